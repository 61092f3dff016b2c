//! The records to send: a pooled buffer taken when there is something to encrypt and given
//! back once every byte of it has been written.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::AsyncWrite;

use crate::buf::pooled::PooledBuf;
use crate::engine::error::AllocError;
use crate::io::read_buf::alloc_error;
use crate::pool::acquire::Acquire;
use crate::pool::buffer_pool::BufferPool;

/// The most one record adds to its plaintext (TLS 1.2 AEAD: a 5-byte header, an 8-byte
/// explicit nonce, a 16-byte tag; TLS 1.3: header, content type, tag), rounded up.
const RECORD_OVERHEAD: usize = 64;
/// The most plaintext in one record.
const MAX_FRAGMENT: usize = 16 << 10;
/// The buffer taken for what rustls answers while reading (handshake flights, alerts, key
/// updates): rustls grows it if a flight is larger.
pub(crate) const ANSWER: usize = 4 << 10;
/// The least buffer taken for application data.
const MIN_WRITE: usize = 8 << 10;
/// The most plaintext one write encrypts at once: three full records, which rustls'
/// reservation (below) fits in a 64 KiB buffer.
const MAX_WRITE: usize = 3 * MAX_FRAGMENT;

/// The room rustls asks for to encrypt `n` bytes of plaintext, and one alert or key update
/// after them. rustls reserves as many records as it makes, each the size of the first
/// (`Vec::reserve`): a buffer with less room would be reallocated, out of the pool, and
/// copied.
pub(crate) fn sealed_len(n: usize) -> usize {
    let records = n.div_ceil(MAX_FRAGMENT).max(1);
    records * (n.min(MAX_FRAGMENT) + RECORD_OVERHEAD) + RECORD_OVERHEAD
}

/// How much of a write of `n` bytes one call encrypts.
pub(crate) fn write_chunk(n: usize) -> usize {
    n.min(MAX_WRITE)
}

/// Encrypted bytes waiting to be written: `buf[written..]`; no buffer while none wait.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pool: BufferPool,
    buf: Option<PooledBuf>,
    written: usize,
    acquiring: Option<Box<Acquire<'static>>>,
}

impl Outgoing {
    pub(crate) fn new(pool: BufferPool) -> Self {
        Outgoing {
            pool,
            buf: None,
            written: 0,
            acquiring: None,
        }
    }

    /// Records already written into `buf` (a client's first flight), to send first.
    pub(crate) fn queue(&mut self, buf: PooledBuf) {
        debug_assert!(self.buf.is_none());
        self.buf = Some(buf);
        self.written = 0;
    }

    /// Bytes waiting to be written.
    pub(crate) fn pending(&self) -> usize {
        self.buf.as_ref().map_or(0, |b| b.len() - self.written)
    }

    /// What the buffer held takes (0 if none).
    pub(crate) fn held(&self) -> usize {
        self.buf.as_ref().map_or(0, |b| b.capacity())
    }

    /// Room for `need` more bytes after those waiting: in the buffer held, or in one of at
    /// least `need` bytes (`MIN_WRITE` for application data) from the pool, waiting for
    /// room under a budget. `Ready(Ok(false))`: the buffer held has less room; write it out
    /// with [`poll_write_out`](Self::poll_write_out) first.
    pub(crate) fn poll_room(
        &mut self,
        cx: &mut Context<'_>,
        need: usize,
        data: bool,
    ) -> Poll<io::Result<bool>> {
        if let Some(b) = &self.buf {
            return Poll::Ready(Ok(b.capacity() - b.len() >= need));
        }
        let size = if data { need.max(MIN_WRITE) } else { need };
        if self.acquiring.is_none() {
            match self.pool.try_get(size) {
                Ok(b) => {
                    self.buf = Some(b);
                    return Poll::Ready(Ok(true));
                }
                Err(AllocError::OverBudget { .. }) => {
                    self.acquiring = Some(Box::new(self.pool.acquire_owned(size)));
                }
                Err(e) => return Poll::Ready(Err(alloc_error(e))),
            }
        }
        let fut = self.acquiring.as_mut().expect("set above");
        let got = ready!(Pin::new(&mut **fut).poll(cx));
        self.acquiring = None;
        self.buf = Some(got.map_err(alloc_error)?);
        Poll::Ready(Ok(true))
    }

    /// The buffer to append records to; [`poll_room`](Self::poll_room) returned true.
    pub(crate) fn buf_mut(&mut self) -> &mut PooledBuf {
        self.buf.as_mut().expect("poll_room took a buffer")
    }

    /// Gives the buffer back if nothing in it waits (after rustls appended nothing).
    pub(crate) fn release_if_empty(&mut self) {
        if self.pending() == 0 {
            self.buf = None;
            self.written = 0;
        }
    }

    /// Writes what waits to `io`; the buffer goes back once it is all written.
    pub(crate) fn poll_write_out<W: AsyncWrite + Unpin + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut W,
    ) -> Poll<io::Result<()>> {
        while let Some(buf) = &self.buf {
            if self.written == buf.len() {
                self.buf = None;
                self.written = 0;
                break;
            }
            let n = ready!(Pin::new(&mut *io).poll_write(cx, &buf[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::WriteZero,
                    "the connection took no more TLS records",
                )));
            }
            self.written += n;
        }
        Poll::Ready(Ok(()))
    }

    /// Gives back the buffer and every byte waiting in it.
    pub(crate) fn clear(&mut self) {
        self.buf = None;
        self.written = 0;
        self.acquiring = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_write_fits_a_64_kib_buffer_with_rustls_reservation() {
        // rustls reserves `records * (5 + first record's ciphertext)`, the ciphertext at
        // most 16 KiB + 256 (TLS 1.3's padding and tag, TLS 1.2's nonce and tag are less).
        let n = write_chunk(usize::MAX);
        let rustls_reserves = 3 * (5 + MAX_FRAGMENT + 17);
        assert!(sealed_len(n) >= rustls_reserves);
        assert!(sealed_len(n) <= 64 << 10);
        assert!(sealed_len(1) >= 5 + 1 + 17 + 5 + 2 + 17); // a record and an alert
    }
}
