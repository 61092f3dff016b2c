//! [`FramedRead`]: any tokio-util `Decoder` over pooled buffers.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::BytesMut;
use futures_core::Stream;
use tokio::io::AsyncRead;
use tokio_util::codec::Decoder;

use super::bytes_mut_store::BytesMutStore;
use crate::io::parts::{Core, Store};
use crate::pool::buffer_pool::BufferPool;

/// A `Stream` of frames decoded by `D` from an [`AsyncRead`], over pooled buffers: tokio-util's
/// `FramedRead` with a pool (module docs). An idle connection holds no buffer; one whose
/// unfinished frame has `P` bytes holds at most `max(2P, T0)`.
///
/// `R` must be `Unpin` (tokio's sockets and streams are; `Box::pin` one that is not).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use futures_util::StreamExt;
/// use tierpool::io::codec::FramedRead;
/// use tokio_util::codec::LinesCodec;
///
/// let pool = tierpool::BufferPool::new();
/// let input: &[u8] = b"hello\nworld\n";
/// let mut lines = FramedRead::new(input, LinesCodec::new(), pool.clone());
/// assert_eq!(lines.next().await.transpose()?, Some("hello".to_string()));
/// assert_eq!(lines.next().await.transpose()?, Some("world".to_string()));
/// assert_eq!(lines.next().await.transpose()?, None);
/// assert_eq!(lines.held_bytes(), 0); // every buffer back in the pool
/// # Ok(()) }
/// ```
pub struct FramedRead<R, D> {
    io: R,
    decoder: D,
    core: Core<BytesMutStore>,
    /// What the decoder is given when no buffer is held (allocates nothing).
    empty: BytesMut,
    max_frame_len: usize,
    eof: bool,
    is_readable: bool,
    has_errored: bool,
}

impl<R, D> FramedRead<R, D> {
    /// A stream of the frames `decoder` finds in what `io` delivers, reading into buffers
    /// from `pool`.
    pub fn new(io: R, decoder: D, pool: BufferPool) -> Self {
        FramedRead {
            io,
            decoder,
            core: Core::new(pool),
            empty: BytesMut::new(),
            max_frame_len: usize::MAX,
            eof: false,
            is_readable: false,
            has_errored: false,
        }
    }

    /// Fails the stream with [`io::ErrorKind::InvalidData`] (and gives the buffer back)
    /// instead of reading on once `bytes` are unread and the decoder still has no frame in
    /// them: a bound on one frame, for decoders that have none of their own. Default: none.
    pub fn max_frame_len(mut self, bytes: usize) -> Self {
        self.max_frame_len = bytes.max(1);
        self
    }

    /// The capacity of the pooled buffer held now (0 while no byte is unread).
    pub fn held_bytes(&self) -> usize {
        self.core.held()
    }

    /// The bytes read and not yet decoded.
    pub fn read_buffer(&self) -> &[u8] {
        self.core.slot.as_ref().map_or(&[], Store::unread)
    }

    /// The underlying reader.
    pub fn get_ref(&self) -> &R {
        &self.io
    }

    /// The underlying reader (reading from it directly loses the framing's place).
    pub fn get_mut(&mut self) -> &mut R {
        &mut self.io
    }

    /// The decoder.
    pub fn decoder(&self) -> &D {
        &self.decoder
    }

    /// The decoder, to change its settings between frames.
    pub fn decoder_mut(&mut self) -> &mut D {
        &mut self.decoder
    }

    /// The reader, giving back the buffer and any bytes read and not yet decoded.
    pub fn into_inner(self) -> R {
        self.io
    }

    /// After a decode: a drained buffer goes back, and anything a decoder reserved in the
    /// empty stand-in is adopted (it holds the bytes the decoder may have put there).
    fn settle(&mut self) {
        if self.empty.capacity() > 0 {
            let bm = std::mem::take(&mut self.empty);
            if !bm.is_empty() {
                // A decoder wrote into the stand-in (none of tokio-util's do): keep its bytes.
                let mut buf = self.core.pool().get_exact(bm.len());
                buf.extend_from_slice(&bm);
                self.core.slot = Some(BytesMutStore::new(buf));
            }
        }
        self.core.give_back_if_drained();
    }
}

impl<R: fmt::Debug, D: fmt::Debug> fmt::Debug for FramedRead<R, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FramedRead")
            .field("io", &self.io)
            .field("decoder", &self.decoder)
            .field("unread", &self.read_buffer().len())
            .field("held", &self.held_bytes())
            .field("eof", &self.eof)
            .finish()
    }
}

impl<R, D> Stream for FramedRead<R, D>
where
    R: AsyncRead + Unpin,
    D: Decoder + Unpin,
{
    type Item = Result<D::Item, D::Error>;

    /// tokio-util's `FramedImpl::poll_next`, with the reads and the buffer of the module
    /// docs.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            // Errored: `None` once, then the stream may be polled again (tokio-util #3976).
            if this.has_errored {
                this.is_readable = false;
                this.has_errored = false;
                return Poll::Ready(None);
            }
            if this.is_readable {
                if this.eof {
                    let decoded = {
                        let buf = match &mut this.core.slot {
                            Some(store) => &mut store.bm,
                            None => &mut this.empty,
                        };
                        this.decoder.decode_eof(buf)
                    };
                    this.settle();
                    let frame = match decoded {
                        Ok(frame) => frame,
                        Err(e) => {
                            this.has_errored = true;
                            return Poll::Ready(Some(Err(e)));
                        }
                    };
                    if frame.is_none() {
                        this.is_readable = false;
                    }
                    return Poll::Ready(frame.map(Ok));
                }
                let decoded = {
                    let buf = match &mut this.core.slot {
                        Some(store) => &mut store.bm,
                        None => &mut this.empty,
                    };
                    this.decoder.decode(buf)
                };
                this.settle();
                match decoded {
                    Ok(Some(frame)) => return Poll::Ready(Some(Ok(frame))),
                    Ok(None) => this.is_readable = false,
                    Err(e) => {
                        this.has_errored = true;
                        return Poll::Ready(Some(Err(e)));
                    }
                }
            }
            let unread = this.read_buffer().len();
            if unread >= this.max_frame_len {
                this.core.clear();
                this.has_errored = true;
                let e = io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{unread} bytes read and no frame: more than the limit of {} bytes",
                        this.max_frame_len
                    ),
                );
                return Poll::Ready(Some(Err(e.into())));
            }
            let limit = this.max_frame_len - unread;
            let n = match ready!(this.core.poll_read(cx, Pin::new(&mut this.io), limit)) {
                Ok(n) => n,
                Err(e) => {
                    this.has_errored = true;
                    return Poll::Ready(Some(Err(e.into())));
                }
            };
            if n == 0 {
                if this.eof {
                    return Poll::Ready(None);
                }
                this.eof = true;
            } else {
                this.eof = false;
            }
            this.is_readable = true;
        }
    }
}
