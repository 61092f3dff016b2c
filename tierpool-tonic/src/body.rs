//! [`EncodeBody`]: a stream of protobuf messages as an HTTP/2 body, each batch encoded into a
//! pooled buffer that goes back to the pool once h2 has written it.

use std::fmt;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use futures_core::Stream;
use http::{HeaderMap, HeaderValue};
use http_body::{Body, Frame};
use tonic::Status;

use tierpool::io::frame::{FrameFormat, Grpc};

use crate::reader::HEADER_LEN;
use crate::status;
use tierpool::{AllocError, BufferPool};

/// Messages that are ready together are encoded into one buffer up to this many bytes (tonic's
/// yield threshold): one data frame and one buffer for a burst of small messages.
pub const BATCH_BYTES: usize = 32 << 10;

/// Which side of a call a body is: a response ends with trailers, a request does not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Response,
    Request,
}

/// How the body ends, once the messages have.
#[derive(Debug)]
enum End {
    /// Still sending messages.
    Open,
    /// The messages are over (with the status a response's trailers carry).
    Over(Status),
    /// Nothing more.
    Done,
}

/// A stream of messages as an `http_body::Body` of gRPC's length-prefixed messages: each
/// message, or each batch of messages ready together (up to [`BATCH_BYTES`]), is encoded into
/// one pooled buffer of its exact length and handed to h2 as a `Bytes` view of it, so the
/// buffer is back in the pool as soon as h2 has written it. A response
/// ([`response`](Self::response)) ends with trailers: `grpc-status: 0`, or the status the
/// stream failed with. A request ([`request`](Self::request)) just ends, or is reset with
/// the stream's error.
///
/// A batch is encoded into a buffer of the pool taken without waiting: under a budget
/// ([`Builder::max_in_use_bytes`](tierpool::Builder::max_in_use_bytes)) with no room for it now,
/// into one from the heap that the budget does not count. Waiting could deadlock: the
/// messages in hand may themselves be views of pooled buffers (an echo of what was received)
/// that only encoding them lets go. The budget bounds what is received; what is sent is what
/// the stream produces, and its pace is h2's flow control on the stream.
///
/// An error while sending a response (a message prost cannot encode, one larger than gRPC's
/// 4 GiB frame) ends it with that status in its trailers, as tonic does; a request is reset.
pub struct EncodeBody<S: Stream> {
    source: Pin<Box<S>>,
    pool: BufferPool,
    side: Side,
    /// Messages polled and waiting to be encoded (a batch, or one that did not fit the last).
    batch: Vec<S::Item>,
    end: End,
}

// Nothing of the body is pinned: its stream is boxed.
impl<S: Stream> Unpin for EncodeBody<S> {}

impl<S: Stream> fmt::Debug for EncodeBody<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EncodeBody")
            .field("pool", &self.pool.name())
            .field("side", &self.side)
            .field("batched", &self.batch.len())
            .field("end", &self.end)
            .finish_non_exhaustive()
    }
}

impl<S, T> EncodeBody<S>
where
    S: Stream<Item = Result<T, Status>>,
    T: prost::Message,
{
    /// A response body: `messages`, then trailers with their status.
    pub fn response(messages: S, pool: BufferPool) -> Self {
        EncodeBody::new(messages, pool, Side::Response)
    }

    /// A request body: `messages`, then the end of the stream (a client sends no trailers).
    pub fn request(messages: S, pool: BufferPool) -> Self {
        EncodeBody::new(messages, pool, Side::Request)
    }

    fn new(messages: S, pool: BufferPool, side: Side) -> Self {
        EncodeBody {
            source: Box::pin(messages),
            pool,
            side,
            batch: Vec::new(),
            end: End::Open,
        }
    }

    /// Polls messages into the batch while they are ready and fit [`BATCH_BYTES`] (at least
    /// one): the bytes they encode to, `None` when the batch is empty and the stream is not
    /// ready.
    fn poll_batch(&mut self, cx: &mut Context<'_>) -> Option<usize> {
        let mut total: usize = self.batch.iter().map(encoded).sum();
        while matches!(self.end, End::Open) && (self.batch.is_empty() || total < BATCH_BYTES) {
            match self.source.as_mut().poll_next(cx) {
                Poll::Ready(Some(Ok(m))) => {
                    let len = HEADER_LEN + m.encoded_len();
                    let full = !self.batch.is_empty() && total + len > BATCH_BYTES;
                    self.batch.push(Ok(m));
                    if full {
                        break; // the last one waits for the next batch (`encode` leaves it)
                    }
                    total += len;
                }
                Poll::Ready(Some(Err(s))) => self.end = End::Over(s),
                Poll::Ready(None) => self.end = End::Over(Status::ok("")),
                Poll::Pending => break,
            }
        }
        (!self.batch.is_empty()).then_some(total)
    }

    /// The batch's messages that fit `total` bytes, encoded into `buf`.
    fn encode(&mut self, buf: &mut Vec<u8>, total: usize) -> Result<(), Status> {
        let mut written = 0;
        let mut taken = 0;
        for m in self.batch.iter() {
            let Ok(m) = m else {
                unreachable!("only messages are batched")
            };
            let len = m.encoded_len();
            if written + HEADER_LEN + len > total {
                break;
            }
            let mut header = [0; HEADER_LEN];
            Grpc.encode(0, len, &mut header)
                .map_err(|_| status::too_large(len, u32::MAX as usize))?;
            buf.extend_from_slice(&header);
            m.encode(buf)
                .map_err(|e| Status::internal(format!("could not encode a message: {e}")))?;
            written += HEADER_LEN + len;
            taken += 1;
        }
        self.batch.drain(..taken);
        Ok(())
    }

    /// The next data frame: a batch encoded into a buffer of its exact length.
    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, Status>>> {
        if self.poll_batch(cx).is_none() {
            return match self.end {
                End::Open => Poll::Pending,
                _ => Poll::Ready(None),
            };
        }
        let total = self.batch_bytes();
        match self.pool.try_get_exact(total) {
            Ok(mut buf) => {
                self.encode(&mut buf, total)?;
                Poll::Ready(Some(Ok(buf.into_bytes())))
            }
            Err(AllocError::OverBudget { .. } | AllocError::LargerThanBudget { .. }) => {
                let mut buf = Vec::with_capacity(total);
                self.encode(&mut buf, total)?;
                Poll::Ready(Some(Ok(Bytes::from(buf))))
            }
            Err(e) => Poll::Ready(Some(Err(status::from_alloc(e)))),
        }
    }

    /// The bytes the batch encodes to, up to [`BATCH_BYTES`] past its first message.
    fn batch_bytes(&self) -> usize {
        let mut total = 0;
        for (i, m) in self.batch.iter().enumerate() {
            let len = encoded(m);
            if i > 0 && total + len > BATCH_BYTES {
                break;
            }
            total += len;
        }
        total
    }
}

/// A batched message's encoded length with its header.
fn encoded<T: prost::Message>(m: &Result<T, Status>) -> usize {
    m.as_ref().map_or(0, |m| HEADER_LEN + m.encoded_len())
}

impl<S, T> Body for EncodeBody<S>
where
    S: Stream<Item = Result<T, Status>>,
    T: prost::Message,
{
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        // `EncodeBody` is `Unpin`: its stream is boxed.
        let this = self.get_mut();
        match ready!(this.poll_data(cx)) {
            Some(Ok(data)) => return Poll::Ready(Some(Ok(Frame::data(data)))),
            // A response ends with the error in its trailers (below); a request is reset.
            Some(Err(s)) => {
                this.batch.clear();
                this.end = End::Over(s);
                if this.side == Side::Request {
                    let End::Over(s) = std::mem::replace(&mut this.end, End::Done) else {
                        unreachable!("set above")
                    };
                    return Poll::Ready(Some(Err(s)));
                }
            }
            None => {}
        }
        match std::mem::replace(&mut this.end, End::Done) {
            End::Over(s) if this.side == Side::Response => {
                Poll::Ready(Some(Ok(Frame::trailers(trailers(&s)))))
            }
            End::Over(s) if s.code() != tonic::Code::Ok => Poll::Ready(Some(Err(s))),
            _ => Poll::Ready(None),
        }
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.end, End::Done)
    }
}

/// A response's trailers for `status`: `grpc-status`, `grpc-message` and its metadata.
pub(crate) fn trailers(status: &Status) -> HeaderMap {
    let mut map = HeaderMap::new();
    if status.add_header(&mut map).is_err() {
        map.insert("grpc-status", HeaderValue::from_static("13"));
    }
    map
}
