//! The records to send: a pooled buffer taken when there is something to encrypt and given
//! back once every byte of it has been written.

use std::io;
use std::task::{ready, Context, Poll};

use tokio::io::AsyncWrite;

use crate::buf::pooled::PooledBuf;
use crate::io::inner::{poll_write_from, Taking};
use crate::pool::buffer_pool::BufferPool;

/// The most one record adds to its plaintext (TLS 1.2 AEAD: a 5-byte header, an 8-byte
/// explicit nonce, a 16-byte tag; TLS 1.3: header, content type, tag), rounded up.
const RECORD_OVERHEAD: usize = 64;
/// The most plaintext in one record.
const MAX_FRAGMENT: usize = 16 << 10;
/// The buffer a client's first flight (its `ClientHello`) is written into.
pub(crate) const HELLO: usize = 4 << 10;
/// The least buffer taken for application data.
const MIN_WRITE: usize = 8 << 10;
/// The least plaintext rustls puts in a full record once it encrypts: its fragmenter keeps
/// each protected record within 16 KiB and the header, so a record's plaintext is 16 KiB less
/// the cipher's overhead (17 bytes for TLS 1.3's suites, 24 for TLS 1.2's AES-GCM), never
/// less than this.
const RECORD_PLAINTEXT: usize = MAX_FRAGMENT - RECORD_OVERHEAD;
/// The most plaintext one write encrypts at once: three records however the cipher
/// fragments, which rustls' reservation (below) fits in a 56 KiB buffer.
const MAX_WRITE: usize = 3 * RECORD_PLAINTEXT;

/// The room rustls asks for to encrypt `n` bytes of plaintext, and one alert or key update
/// after them. rustls reserves as many records as it makes, each the size of the first
/// (`Vec::reserve`): a buffer with less room would be reallocated, out of the pool, and
/// copied. Records are counted at [`RECORD_PLAINTEXT`] each, the fewest bytes a record
/// holds: counted at a full 16 KiB, a 48 KiB write was three records here and four in
/// rustls, whose reservation then outgrew the 56 KiB buffer (`tests/io/tls.rs`
/// `writes_never_outgrow_their_pooled_buffers`).
pub(crate) fn sealed_len(n: usize) -> usize {
    let records = n.div_ceil(RECORD_PLAINTEXT).max(1);
    records * (n.min(MAX_FRAGMENT) + RECORD_OVERHEAD) + RECORD_OVERHEAD
}

/// How much of a write of `n` bytes one call encrypts.
pub(crate) fn write_chunk(n: usize) -> usize {
    n.min(MAX_WRITE)
}

/// Encrypted bytes waiting to be written: first what rustls answered while no pooled buffer
/// was held (`answers[answers_written..]`), then `buf[written..]`. No buffer while none wait.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pool: BufferPool,
    /// What rustls wrote while reading with no pooled buffer held: handshake flights,
    /// alerts, key-update answers. Rare and small, so plain heap memory that is freed once
    /// written, rather than a pooled buffer taken (and, nearly always, given back unused)
    /// at every read.
    answers: Vec<u8>,
    answers_written: usize,
    buf: Option<PooledBuf>,
    written: usize,
    taking: Taking,
}

impl Outgoing {
    pub(crate) fn new(pool: BufferPool) -> Self {
        Outgoing {
            pool,
            answers: Vec::new(),
            answers_written: 0,
            buf: None,
            written: 0,
            taking: Taking::default(),
        }
    }

    /// Records already written into `buf` (a client's first flight), to send first.
    pub(crate) fn queue(&mut self, buf: PooledBuf) {
        debug_assert!(self.buf.is_none() && self.answers.is_empty());
        self.buf = Some(buf);
        self.written = 0;
    }

    /// Bytes waiting to be written.
    pub(crate) fn pending(&self) -> usize {
        self.answers.len() - self.answers_written
            + self.buf.as_ref().map_or(0, |b| b.len() - self.written)
    }

    /// What the buffers held take (0 if none).
    pub(crate) fn held(&self) -> usize {
        self.answers.capacity() + self.buf.as_ref().map_or(0, |b| b.capacity())
    }

    /// Where rustls appends what it answers while reading: after the records waiting in the
    /// pooled buffer if one is held, else in `answers` (which go out first).
    pub(crate) fn answers_mut(&mut self) -> &mut Vec<u8> {
        match &mut self.buf {
            Some(b) => b,
            None => &mut self.answers,
        }
    }

    /// Room for `need` more bytes after those waiting, writing what waits to `io` first if
    /// the buffer held has less: a buffer of at least `need` bytes (`MIN_WRITE` for
    /// application data) from the pool, waiting for room under a budget. Then
    /// [`buf_mut`](Self::buf_mut) is the buffer to append to.
    pub(crate) fn poll_reserve<W: AsyncWrite + Unpin + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut W,
        need: usize,
        data: bool,
    ) -> Poll<io::Result<()>> {
        loop {
            if let Some(b) = &self.buf {
                if b.capacity() - b.len() >= need {
                    return Poll::Ready(Ok(()));
                }
                // Too little room (or a buffer waited for at a smaller size): written out
                // and given back, then one of the right size.
                ready!(self.poll_write_out(cx, io))?;
                continue;
            }
            let size = if data { need.max(MIN_WRITE) } else { need };
            self.buf = Some(ready!(self.taking.poll_take(cx, &self.pool, size))?);
        }
    }

    /// The buffer to append records to; [`poll_reserve`](Self::poll_reserve) made room.
    pub(crate) fn buf_mut(&mut self) -> &mut PooledBuf {
        self.buf.as_mut().expect("poll_reserve took a buffer")
    }

    /// Gives the buffer back if nothing in it waits (after rustls appended nothing).
    pub(crate) fn release_if_empty(&mut self) {
        if self.buf.as_ref().is_some_and(|b| b.len() == self.written) {
            self.buf = None;
            self.written = 0;
        }
    }

    /// Writes what waits to `io`; the buffers go back once they are written.
    pub(crate) fn poll_write_out<W: AsyncWrite + Unpin + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        io: &mut W,
    ) -> Poll<io::Result<()>> {
        if !self.answers.is_empty() {
            ready!(poll_write_from(
                cx,
                io,
                &self.answers,
                &mut self.answers_written
            ))?;
            self.answers = Vec::new();
            self.answers_written = 0;
        }
        if let Some(buf) = &self.buf {
            ready!(poll_write_from(cx, io, buf, &mut self.written))?;
            self.buf = None;
            self.written = 0;
        }
        Poll::Ready(Ok(()))
    }

    /// Gives back the buffers and every byte waiting in them.
    pub(crate) fn clear(&mut self) {
        self.answers = Vec::new();
        self.answers_written = 0;
        self.buf = None;
        self.written = 0;
        self.taking.cancel();
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
        // At most three records, however the cipher fragments (24 bytes of overhead or
        // less: TLS 1.2's AES-GCM), each reserved at the first one's protected size.
        let per_record = MAX_FRAGMENT - 24;
        assert!(n.div_ceil(per_record) <= 3);
        let rustls_reserves = 3 * (5 + MAX_FRAGMENT + 24);
        assert!(sealed_len(n) >= rustls_reserves);
        assert!(sealed_len(n) <= 56 << 10);
        assert!(sealed_len(1) >= 5 + 1 + 17 + 5 + 2 + 17); // a record and an alert
    }
}
