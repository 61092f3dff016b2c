//! [`MessageReader`]: gRPC's length-prefixed messages out of an HTTP/2 body, copied into
//! pooled memory, nothing held between messages.

use std::fmt;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Buf;
use futures_core::Stream;
use http::HeaderMap;
use http_body::Body;
use tonic::Status;

use tierpool::io::frame::{FrameFormat, Grpc};
use tierpool::io::ReadRule;
use tierpool::{BufferPool, PollAcquire, PooledBuf, PooledBytes};

use crate::compression::{self, Encoding};
use crate::status;

/// gRPC's message header: a flag byte (compressed or not) and a 4-byte big-endian length
/// (`tierpool::io::frame::Grpc` reads and writes it).
pub(crate) const HEADER_LEN: usize = Grpc::HEADER_LEN;

/// Default [`MessageReader::max_message_size`]: 4 MiB, tonic's and gRPC's default limit on
/// received messages.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 4 << 20;

/// The smallest first buffer a message takes while nothing is known of its size but its
/// header: a message of up to this many bytes takes one buffer of its own length.
const FIRST_BUFFER: usize = 4 << 10;

/// Reads gRPC messages from an HTTP/2 body (`http_body::Body`, as hyper and tonic hand it
/// over) into pooled buffers: a [`Stream`] of each message's payload as a [`PooledBytes`].
///
/// - **Between messages it holds no pooled memory**: up to the 5 header bytes of the next one
///   in place, and, until it is polled again, the rest of the data frame the last message
///   ended in (h2's `Bytes`, as the body handed it over).
/// - **The declared length is checked before any memory is taken**: a message over
///   [`max_message_size`](Self::max_message_size) is `RESOURCE_EXHAUSTED`.
/// - **A payload is copied from the body's frames into a pooled buffer that the message
///   keeps.** A message no longer than each of the two before it on the stream (a stream of
///   same-sized messages) takes a buffer of its whole length with its first bytes and is
///   copied once, however often the reader waits for its frames (HTTP/2 interleaves the
///   frames of concurrent streams, so a large message is waited for many times). Any other
///   message's buffer grows geometrically with what arrived: about one more copy of its
///   length.
/// - **A wait holds at most twice what arrived, or what the peer paid for**: before the body
///   is waited on, a growing message's buffer larger than `max(2P, T0)` for the `P` bytes
///   that arrived (`T0` the pool's smallest tier) is replaced by one that is not, so a peer
///   that declares a large message and trickles it pins twice what it sent. A message that
///   took its whole length keeps that buffer (its length's tier) while it waits: the peer
///   sent two messages at least as long on the stream first, so it pins less than it has
///   sent there, or `T0` (a tier above `T0` is less than twice the length it is taken for).
///   The credit lasts as long as the stream: a stream whose sizes repeat pays once.
/// - **Under a budget** ([`Builder::max_in_use_bytes`](tierpool::Builder::max_in_use_bytes)) a
///   message's whole buffer is taken, waiting for room, once its header has arrived and before
///   any more of the body is read: while it waits, HTTP/2 flow control holds the peer back
///   instead of the heap growing. (The bound on a wait does not apply then; the budget does.)
///   A message of at most 16 KiB on a stream that has received one before does not wait: with
///   no room, it goes into the heap (so that handlers keeping their stream's last message
///   cannot all wait on each other; the crate docs' *Under a budget*).
/// - **Compressed messages** (`grpc-encoding: gzip`) are decompressed into pooled memory,
///   bounded by the same limit.
/// - **Trailers** with a `grpc-status` other than OK end the stream with that status.
///
/// Every error is a [`Status`], after which the stream ends; every buffer goes back to its
/// pool whatever happens.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use futures_util::StreamExt;
/// use tierpool_tonic::MessageReader;
///
/// let pool = tierpool::BufferPool::new();
/// // A body as h2 hands it over: two messages, the second split across frames.
/// let wire = b"\x00\x00\x00\x00\x05hello\x00\x00\x00\x00\x05world".to_vec();
/// let frames = vec![bytes::Bytes::copy_from_slice(&wire[..13]), bytes::Bytes::copy_from_slice(&wire[13..])];
/// let body = http_body_util::StreamBody::new(futures_util::stream::iter(
///     frames.into_iter().map(|b| Ok::<_, std::convert::Infallible>(http_body::Frame::data(b))),
/// ));
/// let mut messages = MessageReader::new(body, pool);
/// assert_eq!(&messages.next().await.unwrap().unwrap()[..], b"hello");
/// assert_eq!(&messages.next().await.unwrap().unwrap()[..], b"world");
/// assert!(messages.next().await.is_none());
/// # }
/// ```
pub struct MessageReader<B: Body> {
    body: B,
    pool: BufferPool,
    max_message: usize,
    encoding: Option<Encoding>,
    /// The rest of the last data frame, not yet consumed (a message ended inside it).
    frame: Option<B::Data>,
    header: [u8; HEADER_LEN],
    /// Header bytes received of the next message.
    header_len: usize,
    /// The message being received, once its header is in.
    message: Option<Message>,
    /// A budget's wait for a message's whole buffer.
    taking: PollAcquire,
    /// The read rules: the lengths of the last two messages (a message no longer than both
    /// takes its whole length at once), the bound on a wait, growth.
    rule: ReadRule,
    /// Messages received whole (a stream that has received one may read a small one into
    /// the heap rather than wait: [`BEYOND_BUDGET`]).
    received: u64,
    trailers: Option<HeaderMap>,
    /// A response's body: it must end with a `grpc-status`.
    response: bool,
    done: bool,
}

/// A message whose header arrived.
#[derive(Debug)]
struct Message {
    compressed: bool,
    len: usize,
    /// No longer than each of the last two messages: it takes its whole length at once and
    /// keeps it through waits (the peer paid for it with those two).
    whole: bool,
    buf: Option<MessageBuf>,
}

/// A message's buffer: the pool's, or, for a small message of a stream that has received one
/// before and found no room in the budget, the heap's (below: [`BEYOND_BUDGET`]).
#[derive(Debug)]
enum MessageBuf {
    Pooled(PooledBuf),
    Heap(Vec<u8>),
}

impl std::ops::Deref for MessageBuf {
    type Target = Vec<u8>;

    fn deref(&self) -> &Vec<u8> {
        match self {
            MessageBuf::Pooled(b) => b,
            MessageBuf::Heap(v) => v,
        }
    }
}

impl std::ops::DerefMut for MessageBuf {
    fn deref_mut(&mut self) -> &mut Vec<u8> {
        match self {
            MessageBuf::Pooled(b) => b,
            MessageBuf::Heap(v) => v,
        }
    }
}

impl MessageBuf {
    fn into_shared(self) -> PooledBytes {
        match self {
            MessageBuf::Pooled(b) => b.into_shared(),
            MessageBuf::Heap(v) => PooledBytes::from(v),
        }
    }
}

/// Under a budget with no room now, a message of at most this many bytes on a stream that has
/// received a message before is read into the heap instead of waiting. A handler that keeps
/// its stream's last message while it reads the next (as most do) holds that message's
/// buffer: if every stream admitted did so and waited for the budget for a small next message,
/// behind streams not yet admitted, none would ever let go. The memory this puts beyond the
/// budget is at most one such message per stream.
const BEYOND_BUDGET: usize = 16 << 10;

impl Message {
    fn received(&self) -> usize {
        self.buf.as_ref().map_or(0, |b| b.len())
    }
}

// Nothing of the reader is pinned: the body is polled through `Pin::new` (it is `Unpin`), and
// the rest of a frame is a plain value.
impl<B: Body + Unpin> Unpin for MessageReader<B> {}

impl<B: Body> fmt::Debug for MessageReader<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MessageReader")
            .field("pool", &self.pool.name())
            .field("max_message", &self.max_message)
            .field("encoding", &self.encoding)
            .field("header_len", &self.header_len)
            .field("message", &self.message)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl<B> MessageReader<B>
where
    B: Body + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    /// A reader of uncompressed messages from `body`, taking buffers from `pool`.
    pub fn new(body: B, pool: BufferPool) -> Self {
        MessageReader {
            rule: ReadRule::new(&pool),
            received: 0,
            body,
            pool,
            max_message: DEFAULT_MAX_MESSAGE_SIZE,
            encoding: None,
            frame: None,
            header: [0; HEADER_LEN],
            header_len: 0,
            message: None,
            taking: PollAcquire::new(),
            trailers: None,
            response: false,
            done: false,
        }
    }

    /// A reader for a request or response with these `headers`: compressed messages are
    /// decompressed as their `grpc-encoding` says.
    ///
    /// # Errors
    /// `UNIMPLEMENTED` for an encoding other than `identity` and `gzip` (a server answers with
    /// it, as the gRPC spec asks).
    pub fn for_headers(body: B, pool: BufferPool, headers: &HeaderMap) -> Result<Self, Status> {
        let encoding = compression::from_headers(headers)?;
        Ok(MessageReader::new(body, pool).encoding(encoding))
    }

    /// Sets the largest message accepted, compressed or decompressed (default
    /// [`DEFAULT_MAX_MESSAGE_SIZE`]).
    pub fn max_message_size(mut self, max: usize) -> Self {
        self.max_message = max;
        self
    }

    /// Sets the encoding compressed messages use (`None`: a compressed message is an error).
    pub fn encoding(mut self, encoding: Option<Encoding>) -> Self {
        self.encoding = encoding;
        self
    }

    /// Reads a response's body, which must end with trailers carrying `grpc-status`: a body
    /// that ends without one (a proxy's reset seen as a clean end, say) is `UNKNOWN` rather than
    /// a complete stream. (A request's body ends without trailers.)
    pub fn response(mut self) -> Self {
        self.response = true;
        self
    }

    /// Bytes of pooled memory the reader holds now: the buffer of a message partly received.
    pub fn held_bytes(&self) -> usize {
        self.message
            .as_ref()
            .and_then(|m| m.buf.as_ref())
            .map_or(0, |b| b.capacity())
    }

    /// Payload bytes of the message under way that have arrived: while the reader waits,
    /// [`held_bytes`](Self::held_bytes) is at most twice this (or the smallest tier), but for
    /// a message that took its whole length (type docs).
    pub fn pending_bytes(&self) -> usize {
        self.message.as_ref().map_or(0, Message::received)
    }

    /// The trailers the body ended with, once it has.
    pub fn trailers(&self) -> Option<&HeaderMap> {
        self.trailers.as_ref()
    }

    /// The body.
    pub fn get_ref(&self) -> &B {
        &self.body
    }

    /// Polls for the next message: its payload, decompressed.
    pub fn poll_message(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<PooledBytes, Status>>> {
        if self.done {
            return Poll::Ready(None);
        }
        let got = self.poll_step(cx);
        if let Poll::Ready(Some(Err(_)) | None) = got {
            self.finish();
        }
        got
    }

    fn poll_step(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<PooledBytes, Status>>> {
        loop {
            if let Some(m) = &mut self.message {
                if m.buf.is_none() && self.taking.is_waiting() {
                    // Under a budget: the whole payload's buffer before any more is read.
                    let buf = ready!(self.taking.poll_get(cx, &self.pool, m.len))
                        .map_err(status::from_alloc)?;
                    m.buf = Some(MessageBuf::Pooled(buf));
                }
                if m.received() == m.len {
                    return Poll::Ready(Some(self.complete()));
                }
            }
            if self.frame.as_ref().is_some_and(|f| f.has_remaining()) {
                if let Err(e) = self.consume(cx) {
                    return Poll::Ready(Some(Err(e)));
                }
                continue;
            }
            self.frame = None;
            let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) else {
                self.park();
                return Poll::Pending;
            };
            match frame {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => self.frame = Some(data),
                    Err(frame) => {
                        if let Ok(trailers) = frame.into_trailers() {
                            let status = Status::from_header_map(&trailers);
                            self.trailers = Some(trailers);
                            if let Some(s) = status.filter(|s| s.code() != tonic::Code::Ok) {
                                return Poll::Ready(Some(Err(s)));
                            }
                        }
                    }
                },
                Some(Err(e)) => return Poll::Ready(Some(Err(Status::from_error(e.into())))),
                None => return Poll::Ready(self.ended().map(Err)),
            }
        }
    }

    /// Takes what the current frame holds of the header and the payload.
    fn consume(&mut self, cx: &mut Context<'_>) -> Result<(), Status> {
        let frame = self.frame.as_mut().expect("a frame with bytes");
        let Some(m) = &mut self.message else {
            let n = frame.remaining().min(HEADER_LEN - self.header_len);
            frame.copy_to_slice(&mut self.header[self.header_len..self.header_len + n]);
            self.header_len += n;
            if self.header_len == HEADER_LEN {
                self.header_len = 0;
                self.begin(cx)?;
            }
            return Ok(());
        };
        let n = frame.remaining().min(m.len - m.received());
        let buf = room(&self.pool, m, n, self.rule.bound(0))?;
        let mut left = n;
        while left > 0 {
            let chunk = frame.chunk();
            let k = chunk.len().min(left);
            buf.extend_from_slice(&chunk[..k]);
            frame.advance(k);
            left -= k;
        }
        Ok(())
    }

    /// A header is in: checks it, then (under a budget) begins taking the payload's buffer.
    fn begin(&mut self, cx: &mut Context<'_>) -> Result<(), Status> {
        let (flag, len) = Grpc
            .decode(&self.header)
            .expect("gRPC's header has no invalid form");
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        let compressed = match flag {
            0 => false,
            1 if self.encoding.is_some() => true,
            1 => {
                return Err(Status::internal(
                    "protocol error: a message with the compressed flag but no grpc-encoding",
                ))
            }
            other => {
                return Err(Status::internal(format!(
                    "protocol error: invalid compression flag {other} (valid flags are 0 and 1)"
                )))
            }
        };
        if len > self.max_message {
            return Err(status::too_large(len, self.max_message));
        }
        let mut m = Message {
            compressed,
            len,
            whole: len <= self.rule.repeated(),
            buf: None,
        };
        if self.pool.max_in_use_bytes().is_some() {
            match self.taking.poll_get(cx, &self.pool, len) {
                Poll::Ready(got) => {
                    m.buf = Some(MessageBuf::Pooled(got.map_err(status::from_alloc)?));
                }
                Poll::Pending if self.received > 0 && len <= BEYOND_BUDGET => {
                    self.taking.cancel();
                    m.buf = Some(MessageBuf::Heap(Vec::with_capacity(len)));
                }
                Poll::Pending => {} // `poll_step` waits for it before reading more
            }
        } else if len == 0 {
            let buf = self.pool.try_get_exact(0).map_err(status::from_alloc)?;
            m.buf = Some(MessageBuf::Pooled(buf));
        }
        self.message = Some(m);
        Ok(())
    }

    /// The message is complete: its payload, decompressed if it was compressed.
    fn complete(&mut self) -> Result<PooledBytes, Status> {
        let m = self.message.take().expect("a complete message");
        self.received += 1;
        self.rule.note_unread(m.len);
        self.rule.drained();
        let buf = m.buf.expect("a complete message has its buffer");
        if !m.compressed {
            return Ok(buf.into_shared());
        }
        let encoding = self.encoding.expect("checked in the header");
        compression::decompress(encoding, &buf, &self.pool, self.max_message)
            .map(PooledBuf::into_shared)
    }

    /// While waiting for the body: a growing message's buffer holds at most `max(2P, T0)`
    /// (not a message that took its whole length, nor under a budget, whose buffer was
    /// charged whole).
    fn park(&mut self) {
        if self.pool.max_in_use_bytes().is_some() {
            return;
        }
        let Some(buf) = self
            .message
            .as_mut()
            .filter(|m| !m.whole)
            .and_then(|m| m.buf.as_mut())
        else {
            return;
        };
        if let Some(smaller) = self.rule.shrink(&self.pool, buf, buf.capacity()) {
            *buf = MessageBuf::Pooled(smaller);
        }
    }

    /// The body ended: an error if it ended inside a message.
    fn ended(&mut self) -> Option<Status> {
        if let Some(m) = &self.message {
            return Some(Status::internal(format!(
                "the stream ended inside a message: {} of {} payload bytes received",
                m.received(),
                m.len
            )));
        }
        if self.header_len > 0 {
            return Some(Status::internal(format!(
                "the stream ended inside a message header: {} of {HEADER_LEN} bytes received",
                self.header_len
            )));
        }
        let has_status = self
            .trailers
            .as_ref()
            .is_some_and(|t| t.contains_key("grpc-status"));
        (self.response && !has_status)
            .then(|| Status::unknown("the response ended without a grpc-status"))
    }

    /// Gives everything back: the stream is over.
    fn finish(&mut self) {
        self.done = true;
        self.frame = None;
        self.message = None;
        self.taking.cancel();
    }
}

/// The message's buffer with room for `n` more bytes: its first buffer, or a larger one the
/// bytes received so far are copied into.
fn room<'m>(
    pool: &BufferPool,
    m: &'m mut Message,
    n: usize,
    floor: usize,
) -> Result<&'m mut MessageBuf, Status> {
    let have = m.received();
    let need = have + n;
    if m.buf.as_ref().is_none_or(|b| b.capacity() < need) {
        let size = if m.whole {
            m.len
        } else if have == 0 {
            // The first buffer of a growing message: what arrived, at least a small
            // buffer's worth.
            need.max(FIRST_BUFFER).max(floor).min(m.len)
        } else {
            ReadRule::grow_capacity(pool, need).max(2 * have).min(m.len)
        };
        let mut bigger = pool.try_get_exact(size).map_err(status::from_alloc)?;
        if let Some(old) = m.buf.take() {
            bigger.extend_from_slice(&old);
        }
        m.buf = Some(MessageBuf::Pooled(bigger));
    }
    Ok(m.buf.as_mut().expect("given above"))
}

impl<B> Stream for MessageReader<B>
where
    B: Body + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Item = Result<PooledBytes, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.get_mut().poll_message(cx)
    }
}
