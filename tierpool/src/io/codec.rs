//! tokio-util's codecs over pooled buffers (feature `tokio-util`): [`FramedRead`] runs any
//! [`Decoder`] as it is, over buffers that are taken from the pool when bytes arrive and go
//! back when they are consumed; [`FramedWrite`] runs any [`Encoder`] into a pooled buffer held
//! only until it is flushed.
//!
//! # Porting from tokio-util
//!
//! The types mirror `tokio_util::codec`'s, with a pool:
//!
//! ```text
//! - use tokio_util::codec::{FramedRead, FramedWrite};
//! + use tierpool::io::codec::{FramedRead, FramedWrite};
//! - let frames = FramedRead::new(reader, MyCodec);
//! + let frames = FramedRead::new(reader, MyCodec, pool.clone());
//! - let sink = FramedWrite::new(writer, MyCodec);
//! + let sink = FramedWrite::new(writer, MyCodec, pool.clone());
//! ```
//!
//! Everything else (the `Stream` and `Sink` they are, the decoder's and encoder's code,
//! `decode_eof`, errors) is unchanged: `FramedRead`'s loop is `tokio_util`'s, line for line.
//! What changes is the memory. `tokio_util`'s `FramedRead` keeps an 8 KiB `BytesMut` per
//! connection from the start, and after one large frame keeps that frame's size for good;
//! this one holds nothing while no byte is unread, and at most `max(2P, T0)` while `P` bytes
//! of an unfinished frame wait ([`read_buf`](crate::io::ReadBuffer)'s rules). Its reads go
//! through the stream's `poll_read`, which on a tokio socket makes no system call while
//! nothing has arrived, so an idle connection costs neither memory nor receives.
//!
//! # What the bridge costs
//!
//! A decoder works on a `BytesMut`, which cannot be made from a pooled buffer without a
//! `bytes` control block: lending a buffer to the decoder allocates one (24 bytes) and
//! giving it back frees it, once per buffer, not per frame. A decoder that hands out frames
//! sharing the buffer (`LengthDelimitedCodec`, `AnyDelimiterCodec`, `BytesCodec`: their
//! `split_to`) makes `bytes` allocate its shared block (40 bytes) once per buffer, and if such
//! frames are still alive when the buffer is drained, the buffer goes to the allocator with
//! the last of them instead of back to the pool. Decoders that copy (`LinesCodec`, most
//! protocol parsers) return every buffer.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::{Bytes, BytesMut};
use futures_core::Stream;
use futures_sink::Sink;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_util::codec::{Decoder, Encoder};

use crate::base::key::{Key, Tag};
use crate::buf::pooled::{give_back, refund, PooledBuf};
use crate::io::read_buf::{alloc_error, Core, Store, Taking, MIN_READ};
use crate::pool::buffer_pool::BufferPool;

/// A pooled buffer lent to a codec as a `BytesMut` (no copy), and how to give it back.
pub(crate) struct Lent {
    bm: BytesMut,
    key: Key,
    tag: Tag,
    /// The pooled allocation: its address and capacity. A `BytesMut` converted back into a
    /// `Vec` with both is that allocation (not one a decoder's `reserve` made).
    addr: usize,
    cap: usize,
}

impl fmt::Debug for Lent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lent")
            .field("len", &self.bm.len())
            .field("capacity", &self.cap)
            .finish()
    }
}

impl Lent {
    fn new(buf: PooledBuf) -> Lent {
        let key = buf.key();
        let (v, tag) = buf.into_parts();
        let (addr, cap) = (v.as_ptr() as usize, v.capacity());
        // No copy: `Bytes` takes the `Vec` (allocating its small control block when the
        // `Vec` is not full), and a unique `Bytes` becomes a `BytesMut` in place.
        let bm = BytesMut::from(Bytes::from(v));
        Lent {
            bm,
            key,
            tag,
            addr,
            cap,
        }
    }
}

impl Store for Lent {
    fn unread(&self) -> &[u8] {
        &self.bm
    }
    fn spare(&self) -> usize {
        self.bm.capacity() - self.bm.len()
    }
    fn held(&self) -> usize {
        self.cap.max(self.bm.capacity())
    }
    fn spare_mut(&mut self) -> &mut [std::mem::MaybeUninit<u8>] {
        self.bm.spare_capacity_mut()
    }
    unsafe fn filled(&mut self, n: usize) {
        let len = self.bm.len() + n;
        // SAFETY: the caller's contract: `n` more bytes are initialized, within the capacity.
        unsafe { self.bm.set_len(len) };
    }
    fn compact(&mut self) {
        // `bytes` moves the unread bytes to the start when that is cheap and nothing else
        // shares the allocation; it never allocates here.
        let room = self.held().saturating_sub(self.bm.len());
        let _ = self.bm.try_reclaim(room);
    }
    fn adopt(buf: PooledBuf) -> Self {
        Lent::new(buf)
    }
    fn release(self) {
        drop(self);
    }
}

impl Drop for Lent {
    /// Gives the buffer back: a unique `BytesMut` gives its whole allocation back (unread
    /// bytes moved to the front), a shared one a copy of its bytes, and the allocation stays
    /// with the frames that share it.
    fn drop(&mut self) {
        let v: Vec<u8> = std::mem::take(&mut self.bm).into();
        if v.as_ptr() as usize == self.addr && v.capacity() == self.cap {
            give_back(self.key, self.tag, v);
        } else {
            // The pooled allocation left the pool (to the frames, or freed by a decoder's
            // `reserve`): its charge goes back. This buffer is the decoder's (a `reserve`
            // sized it, often to a whole frame's declared length) or a copy of unread bytes:
            // freed, not kept. Filed under the largest tier below its capacity, it would be
            // handed out later as that tier, larger than asked, and a read buffer parked in
            // it would hold more than its bound.
            refund(self.key, self.tag);
            drop(v);
        }
    }
}

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
    core: Core<Lent>,
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
                self.core.slot = Some(Lent::new(buf));
            }
        }
        self.core.release_if_drained();
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
                            Some(lent) => &mut lent.bm,
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
                        Some(lent) => &mut lent.bm,
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

/// The default [`FramedWrite::backpressure_boundary`]: tokio-util's, 8 KiB.
const BACKPRESSURE_BOUNDARY: usize = 8 << 10;

/// A `Sink` of items encoded by `E` into an [`AsyncWrite`], through a pooled buffer held only
/// while it has unflushed bytes: tokio-util's `FramedWrite` with a pool (module docs).
///
/// Items are encoded into a buffer taken from the pool (waiting for room under a budget, in
/// `poll_ready`), written out when `boundary` bytes are waiting or on flush, and the buffer
/// goes back as soon as it is empty. `W` must be `Unpin`.
///
/// The buffer is taken at the boundary's size (at most 8 KiB), or, when each of the last
/// two buffers had to hold more than that, at the smaller of their two peaks (if a tier has
/// it): a connection whose replies are larger than the boundary encodes each into a pooled
/// buffer that fits, instead of an encoder's `reserve` growing a small one out of the pool
/// (an allocation per reply), while one large reply among small ones, or replies that
/// alternate, change nothing. That larger size is taken only when a budget has room for it
/// at once; otherwise the sink waits for the boundary's size, as it would without it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use futures_util::SinkExt;
/// use tierpool::io::codec::FramedWrite;
/// use tokio_util::codec::LinesCodec;
///
/// let pool = tierpool::BufferPool::new();
/// let mut out = FramedWrite::new(Vec::new(), LinesCodec::new(), pool.clone());
/// out.send("hello").await?; // encoded, written, flushed
/// assert_eq!(out.held_bytes(), 0); // the buffer is back in the pool
/// assert_eq!(out.get_ref(), b"hello\n");
/// # Ok(()) }
/// ```
pub struct FramedWrite<W, E> {
    io: W,
    encoder: E,
    pool: BufferPool,
    buf: Option<Lent>,
    boundary: usize,
    /// A get waiting for room in the budget.
    taking: Taking,
    /// The most bytes the buffer held now has held.
    peak: usize,
    /// The most bytes each of the last two buffers that were written to held (0: none yet):
    /// the smaller is the size to take next when it is more than the boundary's and within
    /// the largest tier.
    peaks: [usize; 2],
}

impl<W, E> FramedWrite<W, E> {
    /// A sink that encodes items with `encoder` into buffers from `pool` and writes them to
    /// `io`.
    pub fn new(io: W, encoder: E, pool: BufferPool) -> Self {
        FramedWrite {
            io,
            encoder,
            pool,
            buf: None,
            boundary: BACKPRESSURE_BOUNDARY,
            taking: Taking::default(),
            peak: 0,
            peaks: [0; 2],
        }
    }

    /// How many buffered bytes make `poll_ready` write them out first (8 KiB by default,
    /// as tokio-util's).
    pub fn backpressure_boundary(&self) -> usize {
        self.boundary
    }

    /// Sets [`backpressure_boundary`](Self::backpressure_boundary).
    pub fn set_backpressure_boundary(&mut self, bytes: usize) {
        self.boundary = bytes;
    }

    /// The capacity of the pooled buffer held now (0 while nothing waits to be written).
    pub fn held_bytes(&self) -> usize {
        self.buf.as_ref().map_or(0, Store::held)
    }

    /// The bytes encoded and not yet written.
    pub fn write_buffer(&self) -> &[u8] {
        self.buf.as_ref().map_or(&[], Store::unread)
    }

    /// The underlying writer.
    pub fn get_ref(&self) -> &W {
        &self.io
    }

    /// The underlying writer (writing to it directly can interleave with buffered frames).
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.io
    }

    /// The encoder.
    pub fn encoder(&self) -> &E {
        &self.encoder
    }

    /// The encoder, to change its settings between items.
    pub fn encoder_mut(&mut self) -> &mut E {
        &mut self.encoder
    }

    /// The writer; bytes not yet written are dropped with their buffer.
    pub fn into_inner(self) -> W {
        self.io
    }

    /// A buffer to encode into, waiting for room under a budget.
    fn poll_buffer(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.buf.is_some() {
            return Poll::Ready(Ok(()));
        }
        if !self.taking.is_waiting() {
            if let Some(got) = self.try_take_fitting() {
                self.buf = Some(Lent::new(got));
                return Poll::Ready(Ok(()));
            }
        }
        let got = ready!(self.taking.poll_take(cx, &self.pool, self.boundary_size()))?;
        self.buf = Some(Lent::new(got));
        Poll::Ready(Ok(()))
    }

    /// A buffer now, without waiting (`start_send` without `poll_ready`; a wait `poll_ready`
    /// began is given up).
    fn take_now(&mut self) -> io::Result<()> {
        self.taking.cancel();
        let got = match self.try_take_fitting() {
            Some(got) => got,
            None => self
                .pool
                .try_get_exact(self.boundary_size())
                .map_err(alloc_error)?,
        };
        self.buf = Some(Lent::new(got));
        Ok(())
    }

    /// The size a buffer is taken at without a larger last one: the boundary, at most
    /// tokio-util's 8 KiB.
    fn boundary_size(&self) -> usize {
        self.boundary.clamp(1, MIN_READ)
    }

    /// A buffer of the smaller of the last two buffers' peaks, when that was larger than the
    /// boundary's size and a tier holds it, and a budget has room for it now.
    fn try_take_fitting(&self) -> Option<PooledBuf> {
        let fits = self.peaks[0].min(self.peaks[1]);
        let largest = self.pool.tier_sizes().last().copied().unwrap_or(0);
        if fits <= self.boundary_size() || fits > largest {
            return None;
        }
        self.pool.try_get_exact(fits).ok()
    }

    /// Gives the drained buffer back and remembers how much it had to hold (a buffer given
    /// back unwritten, after a `poll_ready` and a flush, changes nothing).
    fn release_buffer(&mut self) {
        if let Some(b) = self.buf.take() {
            b.release();
        }
        let peak = std::mem::take(&mut self.peak);
        if peak > 0 {
            self.peaks = [self.peaks[1], peak];
        }
    }
}

impl<W: fmt::Debug, E: fmt::Debug> fmt::Debug for FramedWrite<W, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FramedWrite")
            .field("io", &self.io)
            .field("encoder", &self.encoder)
            .field("unwritten", &self.write_buffer().len())
            .field("held", &self.held_bytes())
            .finish()
    }
}

impl<W, E, I> Sink<I> for FramedWrite<W, E>
where
    W: AsyncWrite + Unpin,
    E: Encoder<I> + Unpin,
    E::Error: From<io::Error>,
{
    type Error = E::Error;

    /// Writes the buffered bytes out first if `boundary` or more wait, then makes sure a
    /// buffer is there to encode into.
    fn poll_ready(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), E::Error>> {
        let this = self.get_mut();
        if this.write_buffer().len() >= this.boundary {
            ready!(Sink::<I>::poll_flush(Pin::new(&mut *this), cx))?;
        }
        ready!(this.poll_buffer(cx))?;
        Poll::Ready(Ok(()))
    }

    fn start_send(self: Pin<&mut Self>, item: I) -> Result<(), E::Error> {
        let this = self.get_mut();
        if this.buf.is_none() {
            // `poll_ready` was not awaited: a buffer now, without waiting.
            this.take_now()?;
        }
        let lent = this.buf.as_mut().expect("made above");
        let encoded = this.encoder.encode(item, &mut lent.bm);
        this.peak = this.peak.max(lent.bm.len());
        encoded
    }

    /// Writes every buffered byte, gives the buffer back, then flushes the writer.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), E::Error>> {
        let this = self.get_mut();
        while let Some(lent) = &mut this.buf {
            if lent.bm.is_empty() {
                this.release_buffer();
                break;
            }
            let n = ready!(Pin::new(&mut this.io).poll_write(cx, &lent.bm))?;
            if n == 0 {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "failed to write frame to transport",
                )
                .into()));
            }
            bytes::Buf::advance(&mut lent.bm, n);
        }
        ready!(Pin::new(&mut this.io).poll_flush(cx))?;
        Poll::Ready(Ok(()))
    }

    fn poll_close(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), E::Error>> {
        ready!(Sink::<I>::poll_flush(self.as_mut(), cx))?;
        ready!(Pin::new(&mut self.get_mut().io).poll_shutdown(cx))?;
        Poll::Ready(Ok(()))
    }
}
