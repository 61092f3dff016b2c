//! [`TlsStream`]: a TLS connection over an async socket whose record buffers come from the
//! pool.

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll, Waker};

use rustls::server::UnbufferedServerConnection;
use tierpool::{BufferPool, PooledBytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::output::{sealed_len, write_chunk, FLIGHT};
use crate::session::{Intent, Session, Step};
use crate::side::Unbuffered;

/// A TLS connection over `IO` (a `tokio::net::TcpStream`, say) whose buffers come from a
/// [`BufferPool`] and are held only while bytes are in them: received records while they are
/// incomplete or not yet processed, decrypted data until it is read, records to send until
/// they are written. An idle connection holds no buffer, only rustls' session state.
///
/// Made by [`TlsAcceptor::accept`](crate::TlsAcceptor::accept) (a server) or
/// [`TlsConnector::connect`](crate::TlsConnector::connect) (a client), with the handshake
/// done. Read it as a stream ([`AsyncRead`], for any code that takes one: tokio-util's and
/// tierpool's `FramedRead`, hyper's I/O adapters), or take the decrypted data as pooled views
/// with [`read_bytes`](Self::read_bytes); write it as an [`AsyncWrite`]. Its reads follow
/// tierpool's read rules ([`ReadRule`](tierpool::io::ReadRule)): with `P` bytes of an
/// incomplete record received, it holds at most `max(2P, T0)` for them while it waits,
/// however slowly they arrive.
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
///
/// `C` is the rustls connection: [`UnbufferedServerConnection`] (the default) or
/// [`UnbufferedClientConnection`](rustls::client::UnbufferedClientConnection); the
/// [`server::TlsStream`](crate::server::TlsStream) and
/// [`client::TlsStream`](crate::client::TlsStream) aliases name them as tokio-rustls does.
pub struct TlsStream<IO, C: Unbuffered = UnbufferedServerConnection> {
    io: IO,
    session: Session<C>,
    /// The socket returned end-of-stream.
    eof: bool,
    /// No more application data will be read (`close_notify`, the end of the stream, or an
    /// error).
    read_done: bool,
    /// Our `close_notify` is in `out`.
    write_done: bool,
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
        Failure::Io(e.kind(), e.to_string())
    }
}

// Nothing in it is pinned (the socket is `Unpin`, rustls' state is boxed or moved freely).
impl<IO: Unpin, C: Unbuffered> Unpin for TlsStream<IO, C> {}

/// The error a TLS error is reported as.
pub(crate) fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

impl<IO, C: Unbuffered> TlsStream<IO, C> {
    pub(crate) fn new(io: IO, conn: C, pool: BufferPool) -> Self {
        TlsStream {
            io,
            session: Session::new(conn, pool),
            eof: false,
            read_done: false,
            write_done: false,
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

    /// rustls' connection: through `Deref`, its [`CommonState`](rustls::CommonState) (the
    /// negotiated version and cipher suite, ALPN, the peer's certificates, exporters).
    pub fn connection(&self) -> &C {
        &self.session.conn
    }

    /// The buffers it holds now, in bytes: the one received records are in, and those of
    /// records not yet written. Decrypted data not yet read is not counted
    /// ([`buffered_plaintext`](Self::buffered_plaintext)), nor are views handed out by
    /// [`read_bytes`](Self::read_bytes).
    pub fn held_bytes(&self) -> usize {
        self.session.records.held_bytes() + self.session.out.held()
    }

    /// Decrypted bytes not yet read.
    pub fn buffered_plaintext(&self) -> usize {
        self.session.plain.iter().map(PooledBytes::len).sum()
    }

    /// Ends the reads on `f` (and the writes, for a TLS error): the records received go
    /// back; the decrypted data stays to be read first.
    fn fail(&mut self, f: Failure) {
        self.session.records.clear();
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

impl<IO: AsyncRead + AsyncWrite + Unpin, C: Unbuffered> TlsStream<IO, C> {
    /// Writes rustls' answers out from the read side, without waiting: through the waiting
    /// writer's waker if there is one (and waking it once they are out), else through `cx`.
    fn send_answers(&mut self, cx: &mut Context<'_>) {
        let out = &mut self.session.out;
        if out.pending() == 0 {
            return;
        }
        let sent = match self.write_waker.clone() {
            Some(w) => {
                let sent = out.poll_write_out(&mut Context::from_waker(&w), &mut self.io);
                if sent.is_ready() {
                    w.wake();
                }
                sent
            }
            None => out.poll_write_out(cx, &mut self.io),
        };
        if let Poll::Ready(Err(e)) = sent {
            // The write side reports it too, at its next write.
            self.fail(Failure::io(&e));
        }
    }

    /// Reads more records from the socket: `Ready` when something changed.
    fn poll_receive(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let records = &mut self.session.records;
        match ready!(records.poll_read_from(cx, Pin::new(&mut self.io))) {
            Ok(0) => self.eof = true,
            Ok(_) => {}
            Err(e) => self.fail(Failure::io(&e)),
        }
        Poll::Ready(())
    }

    /// The handshake, driven until it is complete and our last flight is written.
    fn poll_handshake(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            if let Some(f) = &self.failure {
                return Poll::Ready(Err(f.to_io()));
            }
            // A pooled buffer for the flight rustls may encode now.
            ready!(self
                .session
                .out
                .poll_reserve(cx, &mut self.io, FLIGHT, false))?;
            let step = self.session.advance(Intent::Settle, None);
            self.session.out.release_if_empty();
            match step {
                // The handshake is done, but what came after the peer's last flight failed:
                // the data before the failure is read first, then the error (the stream's
                // reads report it).
                Err(e) if !self.session.conn.is_handshaking() => {
                    self.fail(Failure::Tls(e));
                    let _ = self.session.out.poll_write_out(cx, &mut self.io);
                    return Poll::Ready(Ok(()));
                }
                Err(e) => {
                    self.fail(Failure::Tls(e));
                    continue;
                }
                Ok(Step::Closed) => self.fail(Failure::Io(
                    io::ErrorKind::UnexpectedEof,
                    "the peer closed the TLS session during the handshake".into(),
                )),
                Ok(_) if !self.session.conn.is_handshaking() => {
                    ready!(self.session.out.poll_write_out(cx, &mut self.io))?;
                    return Poll::Ready(Ok(()));
                }
                Ok(_) => {
                    ready!(self.session.out.poll_write_out(cx, &mut self.io))?;
                    if self.eof {
                        self.fail(Failure::Io(
                            io::ErrorKind::UnexpectedEof,
                            "the peer closed the connection during the TLS handshake".into(),
                        ));
                        continue;
                    }
                    ready!(self.poll_receive(cx));
                }
            }
        }
    }

    pub(crate) async fn handshake(&mut self) -> io::Result<()> {
        let result = poll_fn(|cx| self.poll_handshake(cx)).await;
        if result.is_err() {
            // The alert rustls answered a failed handshake with, if the socket takes it now.
            let waker = Waker::from(std::sync::Arc::new(Noop));
            let _ = self
                .session
                .out
                .poll_write_out(&mut Context::from_waker(&waker), &mut self.io);
            self.session.records.clear();
            self.session.out.clear();
            self.session.plain.clear();
        }
        result
    }

    /// Application data for a read: into `sink` (if given) or the queue of decrypted pieces,
    /// until some arrived (`Ready(Ok(true))`), or the stream is over (`Ready(Ok(false))`:
    /// the peer's `close_notify`), or its error.
    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
        mut sink: Option<&mut ReadBuf<'_>>,
    ) -> Poll<io::Result<bool>> {
        loop {
            if !self.session.plain.is_empty() {
                return Poll::Ready(Ok(true));
            }
            if let Some(f) = &self.failure {
                return Poll::Ready(Err(f.to_io()));
            }
            if self.read_done {
                return Poll::Ready(Ok(false));
            }
            let before = sink.as_ref().map_or(0, |s| s.filled().len());
            let step = self.session.advance(Intent::Read, sink.as_deref_mut());
            // What rustls answered (an alert before an error, a handshake message) goes out
            // now, as far as the socket takes it without waiting.
            self.send_answers(cx);
            match step {
                Err(e) => self.fail(Failure::Tls(e)),
                Ok(Step::Delivered) => {}
                Ok(_) if sink.as_ref().map_or(0, |s| s.filled().len()) > before => {}
                Ok(_) if self.session.peer_closed => {
                    self.read_done = true;
                    self.session.records.clear();
                }
                Ok(_) if self.eof => {
                    let e = if self.session.records.is_empty() {
                        "the peer closed the connection without a TLS close_notify: the data \
                         may have been cut short"
                    } else {
                        "the peer closed the connection in the middle of a TLS record"
                    };
                    self.fail(Failure::Io(io::ErrorKind::UnexpectedEof, e.into()));
                }
                Ok(_) => {
                    ready!(self.poll_receive(cx));
                    continue;
                }
            }
            if sink.as_ref().map_or(0, |s| s.filled().len()) > before {
                return Poll::Ready(Ok(true));
            }
        }
    }

    /// The next piece of decrypted application data, as a view of a pooled buffer: `None`
    /// at the end of the stream (the peer's `close_notify`). A piece is at most one record
    /// (16 KiB); its buffer goes back to the pool when the last view of it is dropped.
    ///
    /// # Errors
    /// As the [type's docs](Self) say: `UnexpectedEof` if the connection closed without a
    /// `close_notify`, `InvalidData` with the [`rustls::Error`] for a TLS error, the socket's
    /// errors, `OutOfMemory` if the pool cannot serve a buffer.
    pub fn poll_read_bytes(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<Option<PooledBytes>>> {
        if ready!(self.poll_data(cx, None))? {
            return Poll::Ready(Ok(self.session.plain.pop_front()));
        }
        Poll::Ready(Ok(None))
    }

    /// [`poll_read_bytes`](Self::poll_read_bytes) as a future.
    ///
    /// ```no_run
    /// # async fn f(mut tls: tierpool_rustls::TlsStream<tokio::net::TcpStream>) -> std::io::Result<()> {
    /// while let Some(data) = tls.read_bytes().await? {
    ///     println!("{} bytes", data.len()); // a view of a pooled buffer
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
    /// [`io::ErrorKind::InvalidData`] with the [`rustls::Error`] under TLS 1.2 (the
    /// connection goes on); the socket's errors.
    pub async fn refresh_traffic_keys(&mut self) -> io::Result<()> {
        if let Some(e) = self.fatal() {
            return Err(e);
        }
        poll_fn(|cx| {
            self.session
                .out
                .poll_reserve(cx, &mut self.io, sealed_len(0), false)
        })
        .await?;
        let step = self.session.advance(Intent::KeyUpdate, None);
        self.session.out.release_if_empty();
        match step {
            Ok(Step::Refused(e)) => return Err(tls_error(e)),
            Err(e) => {
                self.fail(Failure::Tls(e.clone()));
                return Err(tls_error(e));
            }
            Ok(_) => {}
        }
        poll_fn(|cx| self.session.out.poll_write_out(cx, &mut self.io)).await
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
        let data = &data[..write_chunk(data.len())];
        let mut room = sealed_len(data.len());
        loop {
            ready!(self.session.out.poll_reserve(cx, &mut self.io, room, true))?;
            match self.session.advance(Intent::Write { data, room }, None) {
                Ok(Step::Done) => return Poll::Ready(Ok(data.len())),
                Ok(Step::NeedRoom(n)) if n > room => room = n,
                Ok(step) => {
                    let e = rustls::Error::General(format!(
                        "the connection cannot send application data ({step:?})"
                    ));
                    return Poll::Ready(Err(tls_error(e)));
                }
                Err(e) => {
                    self.fail(Failure::Tls(e.clone()));
                    return Poll::Ready(Err(tls_error(e)));
                }
            }
        }
    }

    fn poll_write_inner(&mut self, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        let n = ready!(self.poll_seal(cx, data))?;
        // Start writing now; what the socket cannot take waits for the next write or flush.
        if let Poll::Ready(Err(e)) = self.session.out.poll_write_out(cx, &mut self.io) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush_inner(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.session.out.poll_write_out(cx, &mut self.io))?;
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown_inner(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut room = sealed_len(0);
        while !self.write_done {
            if let Some(e) = self.fatal() {
                return Poll::Ready(Err(e));
            }
            ready!(self.session.out.poll_reserve(cx, &mut self.io, room, false))?;
            match self.session.advance(Intent::CloseNotify { room }, None) {
                Ok(Step::NeedRoom(n)) if n > room => room = n,
                Ok(_) => self.write_done = true,
                Err(e) => {
                    self.fail(Failure::Tls(e.clone()));
                    return Poll::Ready(Err(tls_error(e)));
                }
            }
        }
        ready!(self.session.out.poll_write_out(cx, &mut self.io))?;
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin, C: Unbuffered> AsyncRead for TlsStream<IO, C> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.session.plain.is_empty() && buf.remaining() > 0 {
            // Decrypted records go straight into `buf` as far as it has room.
            ready!(this.poll_data(cx, Some(buf)))?;
        }
        // Copy out of as many queued pieces as fit; each goes back when drained.
        let plain = &mut this.session.plain;
        while buf.remaining() > 0 {
            let Some(front) = plain.front_mut() else {
                break;
            };
            let n = front.len().min(buf.remaining());
            buf.put_slice(&front[..n]);
            front.advance(n);
            if front.is_empty() {
                plain.pop_front();
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

impl<IO: AsyncRead + AsyncWrite + Unpin, C: Unbuffered> AsyncWrite for TlsStream<IO, C> {
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

impl<IO: fmt::Debug, C: Unbuffered> fmt::Debug for TlsStream<IO, C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsStream")
            .field("io", &self.io)
            .field("handshaking", &self.session.conn.is_handshaking())
            .field("records_held", &self.session.records.held_bytes())
            .field("plaintext", &self.buffered_plaintext())
            .field("out_pending", &self.session.out.pending())
            .field("read_done", &self.read_done)
            .field("write_done", &self.write_done)
            .finish_non_exhaustive()
    }
}

/// A waker that does nothing: a write attempted once, without waiting (the alert after a
/// failed handshake).
struct Noop;

impl std::task::Wake for Noop {
    fn wake(self: std::sync::Arc<Self>) {}
}
