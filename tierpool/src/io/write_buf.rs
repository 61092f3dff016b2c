//! [`BufWriter`]: tokio's `BufWriter` with a pooled buffer, held only while it has unflushed
//! bytes.

use std::fmt;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::buf::pooled::PooledBuf;
use crate::io::parts::{poll_write_all, MIN_READ};
use crate::pool::buffer_pool::BufferPool;
use crate::pool::poll_acquire::PollAcquire;

/// Buffers small writes to an [`AsyncWrite`] in a pooled buffer, as `tokio::io::BufWriter`
/// does, but holds the buffer only while it has bytes not yet written: it is taken from the
/// pool by the first write after a flush and goes back once a flush has written it out. A
/// connection that is not writing holds nothing (tokio's keeps its 8 KiB for good).
///
/// Writes of at least the capacity (8 KiB by default) into an empty buffer go straight to
/// the writer, as do vectored writes that large; smaller ones are copied in. Under a budget on
/// bytes in use, a write that needs a buffer waits for room. Reads pass through when `W` is
/// also an [`AsyncRead`] (a socket), so a connection can keep one value for both directions.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// use tokio::io::AsyncWriteExt;
///
/// let pool = tierpool::BufferPool::new();
/// let mut out = tierpool::io::BufWriter::new(Vec::new(), pool.clone());
/// out.write_all(b"+OK\r\n").await?; // copied into a pooled buffer
/// assert_eq!(out.held_bytes(), 8192);
/// out.flush().await?; // written out; the buffer goes back
/// assert_eq!(out.held_bytes(), 0);
/// assert_eq!(out.get_ref(), b"+OK\r\n");
/// # Ok(()) }
/// ```
pub struct BufWriter<W> {
    inner: W,
    pool: BufferPool,
    /// The unflushed bytes are `buf[written..]`.
    buf: Option<PooledBuf>,
    written: usize,
    capacity: usize,
    taking: PollAcquire,
}

impl<W> BufWriter<W> {
    /// A writer to `inner` that buffers up to 8 KiB (tokio's default) in buffers from `pool`.
    pub fn new(inner: W, pool: BufferPool) -> Self {
        BufWriter::with_capacity(MIN_READ, inner, pool)
    }

    /// A writer that buffers up to `capacity` bytes (at least 1).
    pub fn with_capacity(capacity: usize, inner: W, pool: BufferPool) -> Self {
        BufWriter {
            inner,
            pool,
            buf: None,
            written: 0,
            capacity: capacity.max(1),
            taking: PollAcquire::new(),
        }
    }

    /// The capacity of the pooled buffer held now: 0 while nothing waits to be written.
    pub fn held_bytes(&self) -> usize {
        self.buf.as_ref().map_or(0, |b| b.capacity())
    }

    /// The bytes written to this writer and not yet to `W`.
    pub fn buffer(&self) -> &[u8] {
        self.buf.as_ref().map_or(&[], |b| &b[self.written..])
    }

    /// The writer.
    pub fn get_ref(&self) -> &W {
        &self.inner
    }

    /// The writer (writing to it directly can interleave with buffered bytes).
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.inner
    }

    /// The writer; bytes not yet written are dropped with their buffer.
    pub fn into_inner(self) -> W {
        self.inner
    }

    /// A buffer to copy into, waiting for room under a budget.
    fn poll_buffer(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.buf.is_some() {
            return Poll::Ready(Ok(()));
        }
        self.buf = Some(ready!(self.taking.poll_get(cx, &self.pool, self.capacity))?);
        Poll::Ready(Ok(()))
    }
}

impl<W: AsyncWrite + Unpin> BufWriter<W> {
    /// Writes the buffered bytes out; the buffer goes back once they all are.
    fn poll_flush_buf(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(buf) = &self.buf {
            ready!(poll_write_all(cx, &mut self.inner, buf, &mut self.written))?;
            self.buf = None; // back to the pool
            self.written = 0;
        }
        Poll::Ready(Ok(()))
    }

    /// Room for `n` more bytes: the buffer flushed first if they do not fit after what it
    /// holds. False if `n` is a write to pass straight through (the buffer is then empty).
    fn poll_room(&mut self, cx: &mut Context<'_>, n: usize) -> Poll<io::Result<bool>> {
        let fits = |this: &Self| {
            this.buf
                .as_ref()
                .is_some_and(|b| b.capacity() - b.len() >= n)
        };
        if !fits(self) && self.buf.is_some() {
            ready!(self.poll_flush_buf(cx))?;
        }
        if self.buf.is_none() && n >= self.capacity {
            return Poll::Ready(Ok(false));
        }
        ready!(self.poll_buffer(cx))?;
        Poll::Ready(Ok(true))
    }
}

impl<W: AsyncWrite + Unpin> AsyncWrite for BufWriter<W> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if !ready!(this.poll_room(cx, data.len()))? {
            return Pin::new(&mut this.inner).poll_write(cx, data);
        }
        let buf = this.buf.as_mut().expect("poll_room made room");
        let n = data.len().min(buf.capacity() - buf.len());
        buf.extend_from_slice(&data[..n]);
        Poll::Ready(Ok(n))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let total: usize = bufs.iter().map(|b| b.len()).sum();
        if !ready!(this.poll_room(cx, total))? {
            if this.inner.is_write_vectored() {
                return Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
            }
            let first = bufs
                .iter()
                .find(|b| !b.is_empty())
                .map_or(&[][..], |b| &b[..]);
            return Pin::new(&mut this.inner).poll_write(cx, first);
        }
        let buf = this.buf.as_mut().expect("poll_room made room");
        let mut n = 0;
        for b in bufs {
            let take = b.len().min(buf.capacity() - buf.len());
            buf.extend_from_slice(&b[..take]);
            n += take;
            if take < b.len() {
                break;
            }
        }
        Poll::Ready(Ok(n))
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_flush_buf(cx))?;
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_flush_buf(cx))?;
        Pin::new(&mut this.inner).poll_shutdown(cx)
    }
}

impl<W: AsyncRead + Unpin> AsyncRead for BufWriter<W> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<W: fmt::Debug> fmt::Debug for BufWriter<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BufWriter")
            .field("inner", &self.inner)
            .field("unwritten", &self.buffer().len())
            .field("held", &self.held_bytes())
            .finish()
    }
}
