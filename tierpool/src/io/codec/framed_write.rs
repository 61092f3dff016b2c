//! [`FramedWrite`]: any tokio-util `Encoder` into a pooled buffer held until it is written.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use futures_sink::Sink;
use tokio::io::AsyncWrite;
use tokio_util::codec::Encoder;

use super::bytes_mut_store::BytesMutStore;
use crate::buf::pooled::PooledBuf;
use crate::io::parts::{poll_write_all, ReadRule, Store, MIN_READ};
use crate::pool::buffer_pool::BufferPool;
use crate::pool::poll_acquire::PollAcquire;

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
    buf: Option<BytesMutStore>,
    boundary: usize,
    /// Bytes of the buffer already written out.
    written: usize,
    /// A get waiting for room in the budget.
    taking: PollAcquire,
    /// What the buffers held had to hold: the size that repeats is the one to take next, when
    /// it is more than the boundary's and within the largest tier.
    rule: ReadRule,
}

impl<W, E> FramedWrite<W, E> {
    /// A sink that encodes items with `encoder` into buffers from `pool` and writes them to
    /// `io`.
    pub fn new(io: W, encoder: E, pool: BufferPool) -> Self {
        FramedWrite {
            io,
            encoder,
            rule: ReadRule::new(&pool),
            pool,
            buf: None,
            boundary: BACKPRESSURE_BOUNDARY,
            written: 0,
            taking: PollAcquire::new(),
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
        self.buf
            .as_ref()
            .map_or(&[], |b| &b.unread()[self.written..])
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
                self.buf = Some(BytesMutStore::new(got));
                return Poll::Ready(Ok(()));
            }
        }
        let got = ready!(self.taking.poll_get(cx, &self.pool, self.boundary_size()))?;
        self.buf = Some(BytesMutStore::new(got));
        Poll::Ready(Ok(()))
    }

    /// A buffer now, without waiting (`start_send` without `poll_ready`; a wait `poll_ready`
    /// began is given up).
    fn take_now(&mut self) -> io::Result<()> {
        self.taking.cancel();
        let got = match self.try_take_fitting() {
            Some(got) => got,
            None => self.pool.try_get_exact(self.boundary_size())?,
        };
        self.buf = Some(BytesMutStore::new(got));
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
        let fits = self.rule.repeated();
        let largest = self.pool.tier_sizes().last().copied().unwrap_or(0);
        if fits <= self.boundary_size() || fits > largest {
            return None;
        }
        self.pool.try_get_exact(fits).ok()
    }

    /// Gives the drained buffer back and remembers how much it had to hold (a buffer given
    /// back unwritten, after a `poll_ready` and a flush, changes nothing).
    fn give_back_buffer(&mut self) {
        if let Some(b) = self.buf.take() {
            b.give_back();
        }
        self.written = 0;
        self.rule.drained();
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
        let store = this.buf.as_mut().expect("made above");
        let encoded = this.encoder.encode(item, &mut store.bm);
        this.rule.note_unread(store.bm.len());
        encoded
    }

    /// Writes every buffered byte, gives the buffer back, then flushes the writer.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<(), E::Error>> {
        let this = self.get_mut();
        if let Some(store) = &this.buf {
            ready!(poll_write_all(
                cx,
                &mut this.io,
                &store.bm,
                &mut this.written
            ))?;
            this.give_back_buffer();
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
