//! [`Decoded`]: a stream of protobuf messages decoded from pooled memory.

use std::fmt;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use futures_core::Stream;
use http::HeaderMap;
use http_body::Body;
use tonic::Status;

use crate::reader::MessageReader;

/// The messages of a gRPC stream, decoded with prost from pooled memory: what a client-streaming
/// or bidi handler reads, and a client reading a streaming response. Its methods are those of
/// tonic's `Streaming<T>` (`message`, `trailers`), and it is a [`Stream`] of
/// `Result<T, Status>`.
///
/// Each message is decoded from a `bytes::Bytes` view of its pooled buffer, so a field prost
/// generates as `Bytes` (`prost_build::Config::bytes`, or tonic-prost-build's `.bytes(["."])`)
/// is a view of that buffer, and the buffer goes back to the pool when the message and every
/// such field are dropped. Other fields are copied out by prost, and the buffer goes back as
/// soon as the message is decoded.
pub struct Decoded<T, B: Body> {
    reader: MessageReader<B>,
    /// A message failed to decode: the stream is over.
    failed: bool,
    _message: PhantomData<fn() -> T>,
}

impl<T, B: Body> fmt::Debug for Decoded<T, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Decoded")
            .field("reader", &self.reader)
            .finish()
    }
}

impl<T, B> Decoded<T, B>
where
    T: prost::Message + Default,
    B: Body + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    /// The messages `reader` reads, decoded as `T`.
    pub fn new(reader: MessageReader<B>) -> Self {
        Decoded {
            reader,
            failed: false,
            _message: PhantomData,
        }
    }

    /// The next message, `None` at the end of the stream (tonic's `Streaming::message`).
    ///
    /// # Errors
    /// The [`Status`] the stream failed with: a message that could not be received
    /// ([`MessageReader`]) or decoded (`INTERNAL`), or the peer's own status in its trailers.
    pub async fn message(&mut self) -> Result<Option<T>, Status> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx))
            .await
            .transpose()
    }

    /// The trailers the stream ended with, once it has.
    pub fn trailers(&self) -> Option<&HeaderMap> {
        self.reader.trailers()
    }

    /// The reader beneath: its [`held_bytes`](MessageReader::held_bytes), its body.
    pub fn reader(&self) -> &MessageReader<B> {
        &self.reader
    }
}

impl<T, B> Stream for Decoded<T, B>
where
    T: prost::Message + Default,
    B: Body + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Item = Result<T, Status>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        if this.failed {
            return Poll::Ready(None);
        }
        let Some(got) = ready!(this.reader.poll_message(cx)) else {
            return Poll::Ready(None);
        };
        let decoded =
            got.and_then(|payload| T::decode(bytes::Bytes::from(payload)).map_err(decode_error));
        // After any error the stream is over (the reader's own errors end it too).
        this.failed = decoded.is_err();
        Poll::Ready(Some(decoded))
    }
}

/// A message prost could not decode: `INTERNAL`, as tonic's prost codec reports it.
pub(crate) fn decode_error(e: prost::DecodeError) -> Status {
    Status::internal(format!("could not decode the message: {e}"))
}
