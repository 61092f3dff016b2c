//! [`TlsStream`]: a TLS connection over an async socket whose record buffers come from the
//! pool.

use std::collections::VecDeque;
use std::fmt;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll, Waker};

use rustls::server::ServerSide;
use rustls::{Connection, SideData, Tcp};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::buf::shared::PooledBytes;
use crate::io::tls::input::{decrypt, Found, MAX_PENDING};
use crate::io::tls::output::{sealed_len, write_chunk, Outgoing};
use crate::io::ReadBuffer;
use crate::pool::buffer_pool::BufferPool;

/// A TLS connection over `IO` (a `tokio::net::TcpStream`, say) whose buffers come from a
/// [`BufferPool`] and are held only while bytes are in them: received records while they are
/// incomplete or undecrypted, decrypted data until it is read, records to send until they
/// are written. An idle connection holds no buffer, only rustls' session state: about a third
/// of the memory an idle connection holds over tokio-rustls (the repository's `BENCHMARKS.md`,
/// the `redis` workload).
///
/// Made by [`TlsAcceptor::accept`](super::TlsAcceptor::accept) (a server) or
/// [`TlsConnector::connect`](super::TlsConnector::connect) (a client), with the handshake
/// done. Read it as a stream ([`AsyncRead`], for any code that takes one, tokio-util's
/// `FramedRead` and tierpool's own included), or take the decrypted data without a copy with
/// [`read_bytes`](Self::read_bytes); write it as an [`AsyncWrite`]. Its reads follow the
/// read buffer's rules ([`ReadBuffer`]): with `P` bytes of an incomplete record received and
/// all decrypted data read, it holds at most `max(2P, T0)` while it waits, however slowly
/// they arrive. Decrypted data not yet read (and views from `read_bytes` still alive) keep
/// the buffer they were decrypted in.
///
/// The peer's `close_notify` ends the stream (a read returns 0 bytes);
/// [`shutdown`](tokio::io::AsyncWriteExt::shutdown) sends ours. The connection closing
/// without one is an error ([`io::ErrorKind::UnexpectedEof`]): the data may have been cut
/// short; writes still go out. A TLS error (a bad record, a failed handshake, an alert from
/// the peer) is an [`io::ErrorKind::InvalidData`] error whose source is the
/// [`rustls::Error`] (`err.get_ref()` downcasts to it); the alert rustls answers with is
/// written first where the socket takes it, the data decrypted before the error is still
/// read, every buffer goes back, and later writes fail too.
///
/// A TLS 1.3 key update from the peer is answered with our next write (rustls queues the
/// answer until then; RFC 8446 allows it).
pub struct TlsStream<IO, Side: SideData = ServerSide> {
    io: IO,
    conn: Connection<Side, Tcp>,
    records: ReadBuffer,
    plain: VecDeque<PooledBytes>,
    out: Outgoing,
    found: Vec<Found>,
    /// The socket returned end-of-stream.
    eof: bool,
    /// No more application data will be read (`close_notify`, the end of the stream, or an
    /// error).
    read_done: bool,
    /// Our `close_notify` is in `out`.
    write_done: bool,
    /// Bytes arrived (or the end of the stream) since rustls last looked at the records.
    unprocessed: bool,
    /// The waker of a write, flush or shutdown waiting for the socket: a read that writes
    /// rustls' answers out registers it with the socket in its place (tokio keeps one write
    /// waker per socket; the read's own would strand the writer).
    write_waker: Option<Waker>,
    /// What ended the reads: reported once the data before it is read.
    failure: Option<Failure>,
}

/// What ended a stream's reads.
#[derive(Debug)]
enum Failure {
    /// A TLS error: fatal to both directions.
    Tls(rustls::Error),
    /// The socket's error, or its end without a `close_notify`: reads only.
    Io(io::ErrorKind, String),
}

impl Failure {
    fn to_io(&self) -> io::Error {
        match self {
            Failure::Tls(e) => tls_error(e.clone()),
            Failure::Io(kind, msg) => io::Error::new(*kind, msg.clone()),
        }
    }

    fn io(e: &io::Error) -> Failure {
        // A TLS error that went through an `io::Error` (none today) keeps its type.
        match e
            .get_ref()
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            Some(tls) => Failure::Tls(tls.clone()),
            None => Failure::Io(e.kind(), e.to_string()),
        }
    }
}

// Nothing in it is pinned (the socket is `Unpin`, rustls' state is boxed or moved freely),
// whatever rustls' side types are.
impl<IO: Unpin, Side: SideData> Unpin for TlsStream<IO, Side> {}

/// The error a TLS error is reported as.
pub(crate) fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl<IO, Side: SideData> TlsStream<IO, Side> {
    pub(crate) fn new(io: IO, conn: Connection<Side, Tcp>, pool: BufferPool) -> Self {
        TlsStream {
            io,
            conn,
            records: ReadBuffer::new(pool.clone()).max_len(MAX_PENDING),
            plain: VecDeque::new(),
            out: Outgoing::new(pool),
            found: Vec::new(),
            eof: false,
            read_done: false,
            write_done: false,
            unprocessed: false,
            write_waker: None,
            failure: None,
        }
    }

    /// The socket.
    pub fn get_ref(&self) -> &IO {
        &self.io
    }

    /// The socket (reading or writing it directly breaks the TLS stream).
    pub fn get_mut(&mut self) -> &mut IO {
        &mut self.io
    }

    /// rustls' connection: the negotiated version and cipher suite, ALPN, the peer's
    /// certificates, exporters.
    pub fn connection(&self) -> &Connection<Side, Tcp> {
        &self.conn
    }

    /// The buffers it holds now, in bytes: the one received records not yet decrypted are
    /// in, and those of records not yet written. Decrypted data not yet read is not counted
    /// (its views hold the buffer it was decrypted in, which the records after it may share),
    /// nor are views handed out by [`read_bytes`](Self::read_bytes).
    pub fn held_bytes(&self) -> usize {
        self.records.held_bytes() + self.out.held()
    }

    /// Decrypted bytes not yet read.
    pub fn buffered_plaintext(&self) -> usize {
        self.plain.iter().map(PooledBytes::len).sum()
    }

    /// Records to send before anything else (a client's `ClientHello`).
    pub(crate) fn queue(&mut self, records: crate::buf::pooled::PooledBuf) {
        self.out.queue(records);
    }

    /// Ends the reads on `f` (and the writes, for a TLS error): the records received go
    /// back; the decrypted data stays to be read first.
    fn fail(&mut self, f: Failure) {
        self.records.clear();
        self.read_done = true;
        if self.failure.is_none() {
            self.failure = Some(f);
        }
    }

    /// The TLS error that ended the connection, if one did.
    fn fatal(&self) -> Option<io::Error> {
        match &self.failure {
            Some(f @ Failure::Tls(_)) => Some(f.to_io()),
            _ => None,
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin, Side: SideData> TlsStream<IO, Side> {
    /// Decrypts the whole records received since the last pass: application data queued,
    /// rustls' answers in `out`.
    fn decrypt(&mut self) {
        if !self.unprocessed {
            return;
        }
        self.unprocessed = false;
        let result = decrypt(
            &mut self.conn,
            &mut self.records,
            self.eof,
            self.out.answers_mut(),
            &mut self.plain,
            &mut self.found,
        );
        // A pass over many small records leaves long lists: not kept for the connection's
        // life.
        if self.found.capacity() > 64 {
            self.found = Vec::new();
        }
        if self.plain.is_empty() && self.plain.capacity() > 64 {
            self.plain = VecDeque::new();
        }
        match result {
            Ok(true) => {
                self.read_done = true;
                self.records.clear();
            }
            Ok(false) => {}
            Err(e) => self.fail(Failure::Tls(e)),
        }
    }

    /// Writes rustls' answers out from the read side, without waiting: through the waiting
    /// writer's waker if there is one (and waking it once they are out), else through `cx`.
    fn send_answers(&mut self, cx: &mut Context<'_>) {
        if self.out.pending() == 0 {
            return;
        }
        let sent = match self.write_waker.clone() {
            Some(w) => {
                let sent = self
                    .out
                    .poll_write_out(&mut Context::from_waker(&w), &mut self.io);
                if sent.is_ready() {
                    w.wake();
                }
                sent
            }
            None => self.out.poll_write_out(cx, &mut self.io),
        };
        if let Poll::Ready(Err(e)) = sent {
            // The write side reports it too, at its next write.
            self.fail(Failure::io(&e));
        }
    }

    /// Reads more records from the socket: `Ready` when something changed.
    fn poll_receive(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        match ready!(self.records.poll_read_from(cx, Pin::new(&mut self.io))) {
            Ok(0) => {
                self.eof = true;
                self.unprocessed = true;
            }
            Ok(_) => self.unprocessed = true,
            Err(e) => self.fail(Failure::io(&e)),
        }
        Poll::Ready(())
    }

    /// The handshake, driven until it is complete and our last flight is written.
    pub(crate) fn poll_handshake(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            self.decrypt();
            if !self.conn.is_handshaking() {
                // Done, though what came after our peer's last flight may have failed: the
                // data before that failure is read first, then the error (the stream's
                // reads report it).
                if self.failure.is_none() {
                    ready!(self.out.poll_write_out(cx, &mut self.io))?;
                }
                return Poll::Ready(Ok(()));
            }
            if let Some(f) = &self.failure {
                return Poll::Ready(Err(f.to_io()));
            }
            ready!(self.out.poll_write_out(cx, &mut self.io))?;
            if self.eof || self.read_done {
                self.fail(Failure::Io(
                    io::ErrorKind::UnexpectedEof,
                    "the peer closed the connection during the TLS handshake".into(),
                ));
                continue;
            }
            ready!(self.poll_receive(cx));
        }
    }

    pub(crate) async fn handshake(&mut self) -> io::Result<()> {
        let result = poll_fn(|cx| self.poll_handshake(cx)).await;
        if result.is_err() {
            // The alert rustls answered a failed handshake with, if the socket takes it now.
            let _ = self
                .out
                .poll_write_out(&mut Context::from_waker(Waker::noop()), &mut self.io);
            self.records.clear();
            self.out.clear();
            self.plain.clear();
        }
        result
    }

    /// The next piece of decrypted application data, as a view of the pooled buffer its
    /// record was decrypted in (no copy): `None` at the end of the stream (the peer's
    /// `close_notify`). A piece is at most one record (16 KiB); the buffer goes back to the
    /// pool when the last view of it is dropped.
    ///
    /// # Errors
    /// As the [type's docs](Self) say: `UnexpectedEof` if the connection closed without a
    /// `close_notify`, `InvalidData` with the [`rustls::Error`] for a TLS error, the socket's
    /// errors, `OutOfMemory` if the pool cannot serve a buffer.
    pub fn poll_read_bytes(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<Option<PooledBytes>>> {
        loop {
            if let Some(b) = self.plain.pop_front() {
                return Poll::Ready(Ok(Some(b)));
            }
            if let Some(f) = &self.failure {
                return Poll::Ready(Err(f.to_io()));
            }
            if self.read_done {
                return Poll::Ready(Ok(None));
            }
            self.decrypt();
            // What rustls answered (an alert before an error, a handshake message) goes out
            // now, as far as the socket takes it without waiting.
            self.send_answers(cx);
            if !self.plain.is_empty() || self.read_done {
                continue;
            }
            if self.eof {
                let e = if self.records.is_empty() {
                    "the peer closed the connection without a TLS close_notify: the data may \
                     have been cut short"
                } else {
                    "the peer closed the connection in the middle of a TLS record"
                };
                self.fail(Failure::Io(io::ErrorKind::UnexpectedEof, e.into()));
                continue;
            }
            ready!(self.poll_receive(cx));
        }
    }

    /// [`poll_read_bytes`](Self::poll_read_bytes) as a future.
    ///
    /// ```no_run
    /// # async fn f(mut tls: tierpool::io::tls::TlsStream<tokio::net::TcpStream>) -> std::io::Result<()> {
    /// while let Some(data) = tls.read_bytes().await? {
    ///     // `data` is a view of the buffer the record was decrypted in
    ///     println!("{} bytes", data.len());
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`poll_read_bytes`](Self::poll_read_bytes).
    pub async fn read_bytes(&mut self) -> io::Result<Option<PooledBytes>> {
        poll_fn(|cx| self.poll_read_bytes(cx)).await
    }

    /// Sends a TLS 1.3 `key_update`: our keys change now, the peer's once it answers (rustls
    /// also does this by itself before a key wears out). A connection about to idle for long
    /// may want it.
    ///
    /// # Errors
    /// [`io::ErrorKind::InvalidData`] with the [`rustls::Error`] under TLS 1.2; the socket's
    /// errors.
    pub async fn refresh_traffic_keys(&mut self) -> io::Result<()> {
        if let Some(e) = self.fatal() {
            return Err(e);
        }
        poll_fn(|cx| {
            self.out
                .poll_reserve(cx, &mut self.io, sealed_len(0), false)
        })
        .await?;
        let result = self.conn.refresh_traffic_keys(self.out.buf_mut());
        self.out.release_if_empty();
        result.map_err(tls_error)?;
        poll_fn(|cx| self.out.poll_write_out(cx, &mut self.io)).await
    }

    /// Encrypts as much of `data` as one call takes into records waiting to be written,
    /// writing them out first when they have no room.
    fn poll_seal(&mut self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        if let Some(e) = self.fatal() {
            return Poll::Ready(Err(e));
        }
        if self.write_done {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the TLS stream was shut down (close_notify sent)",
            )));
        }
        if data.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let take = write_chunk(data.len());
        ready!(self
            .out
            .poll_reserve(cx, &mut self.io, sealed_len(take), true))?;
        if let Err(e) = self.conn.write(data[..take].into(), self.out.buf_mut()) {
            self.fail(Failure::Tls(e.clone()));
            return Poll::Ready(Err(tls_error(e)));
        }
        Poll::Ready(Ok(take))
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin, Side: SideData> AsyncRead for TlsStream<IO, Side> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.plain.is_empty() {
            match ready!(this.poll_read_bytes(cx))? {
                Some(b) => this.plain.push_front(b),
                None => return Poll::Ready(Ok(())),
            }
        }
        // Copy out of as many pieces as fit; each goes back when drained.
        while buf.remaining() > 0 {
            let Some(front) = this.plain.front_mut() else {
                break;
            };
            let n = front.len().min(buf.remaining());
            buf.put_slice(&front[..n]);
            front.advance(n);
            if front.is_empty() {
                this.plain.pop_front();
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// Keeps the waker of a write-side call that waits, for the read side to write through
/// (`send_answers`); forgets it once the call is done.
fn note_writer<T>(slot: &mut Option<Waker>, cx: &Context<'_>, poll: Poll<T>) -> Poll<T> {
    match &poll {
        Poll::Pending => match slot {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => *slot = Some(cx.waker().clone()),
        },
        Poll::Ready(_) => *slot = None,
    }
    poll
}

impl<IO: AsyncRead + AsyncWrite + Unpin, Side: SideData> TlsStream<IO, Side> {
    fn poll_write_inner(&mut self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let n = ready!(self.poll_seal(cx, data))?;
        // Start writing now; what the socket cannot take waits for the next write or flush.
        if let Poll::Ready(Err(e)) = self.out.poll_write_out(cx, &mut self.io) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush_inner(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.out.poll_write_out(cx, &mut self.io))?;
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown_inner(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.write_done {
            if let Some(e) = self.fatal() {
                return Poll::Ready(Err(e));
            }
            ready!(self
                .out
                .poll_reserve(cx, &mut self.io, sealed_len(0), false))?;
            let result = self.conn.send_close_notify(self.out.buf_mut());
            self.write_done = true;
            result.map_err(tls_error)?;
        }
        ready!(self.out.poll_write_out(cx, &mut self.io))?;
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin, Side: SideData> AsyncWrite for TlsStream<IO, Side> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = this.poll_write_inner(cx, data);
        note_writer(&mut this.write_waker, cx, poll)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = this.poll_flush_inner(cx);
        note_writer(&mut this.write_waker, cx, poll)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let poll = this.poll_shutdown_inner(cx);
        note_writer(&mut this.write_waker, cx, poll)
    }
}

impl<IO: fmt::Debug, Side: SideData> fmt::Debug for TlsStream<IO, Side> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsStream")
            .field("io", &self.io)
            .field("handshaking", &self.conn.is_handshaking())
            .field("records_held", &self.records.held_bytes())
            .field("plaintext", &self.buffered_plaintext())
            .field("out_pending", &self.out.pending())
            .field("read_done", &self.read_done)
            .field("write_done", &self.write_done)
            .finish_non_exhaustive()
    }
}
