//! [`Outgoing`]: the records to send, in a pooled buffer taken when there is something to
//! encrypt and given back once every byte of it has been written.

use std::io;
use std::task::{ready, Context, Poll};

use tierpool::io::poll_write_all;
use tierpool::{BufferPool, PollAcquire, PooledBuf};
use tokio::io::AsyncWrite;

/// The most one record adds to its plaintext (TLS 1.2 AEAD: a 5-byte header, an 8-byte
/// explicit nonce, a 16-byte tag; TLS 1.3: header, content type, tag), rounded up.
const RECORD_OVERHEAD: usize = 64;
/// The most plaintext in one record.
const MAX_FRAGMENT: usize = 16 << 10;
/// The buffer a handshake's flights are encoded into (a flight that needs more grows it).
pub(crate) const FLIGHT: usize = 4 << 10;
/// The least buffer taken for application data.
const MIN_WRITE: usize = 8 << 10;
/// The least plaintext rustls puts in a full record: its fragmenter keeps each protected
/// record within 16 KiB and the header, so a record's plaintext is 16 KiB less the cipher's
/// overhead (17 bytes for TLS 1.3's suites, 24 for TLS 1.2's AES-GCM), never less than this.
const RECORD_PLAINTEXT: usize = MAX_FRAGMENT - RECORD_OVERHEAD;
/// The most plaintext one write encrypts at once: three records however the cipher
/// fragments them.
const MAX_WRITE: usize = 3 * RECORD_PLAINTEXT;

/// The room to encrypt `n` bytes of plaintext into, and one alert or key update that rustls
/// may have queued before them: records counted at [`RECORD_PLAINTEXT`] each, the fewest
/// bytes a record holds. rustls says how much it needs when this is not enough (a
/// configuration with a smaller `max_fragment_size`), and the write asks again.
pub(crate) fn sealed_len(n: usize) -> usize {
    let records = n.div_ceil(RECORD_PLAINTEXT).max(1);
    records * (n.min(MAX_FRAGMENT) + RECORD_OVERHEAD) + RECORD_OVERHEAD
}

/// How much of a write of `n` bytes one call encrypts.
pub(crate) fn write_chunk(n: usize) -> usize {
    n.min(MAX_WRITE)
}

/// Encrypted bytes waiting to be written: first what rustls encoded while no pooled buffer
/// was held (`answers[answers_written..]`), then `buf[written..]`. No buffer while none wait.
#[derive(Debug)]
pub(crate) struct Outgoing {
    pool: BufferPool,
    /// What rustls encoded while reading with no pooled buffer held: alerts, answers to a
    /// post-handshake message. Rare and small, so plain heap memory that is freed once
    /// written, rather than a pooled buffer taken (and nearly always given back unused) at
    /// every read.
    answers: Vec<u8>,
    answers_written: usize,
    buf: Option<PooledBuf>,
    written: usize,
    taking: PollAcquire,
}

impl Outgoing {
    pub(crate) fn new(pool: BufferPool) -> Self {
        Outgoing {
            pool,
            answers: Vec::new(),
            answers_written: 0,
            buf: None,
            written: 0,
            taking: PollAcquire::new(),
        }
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

    /// Appends up to `n` bytes that `encode` writes into the zeroed room it is given and
    /// counts (rustls' `encode` and `encrypt` write into a `&mut [u8]`): after the records
    /// waiting in the pooled buffer if one is held (grown if it has less room), else in
    /// `answers`, which go out first. Never waits. On an error nothing is appended.
    pub(crate) fn append<E>(
        &mut self,
        n: usize,
        encode: impl FnOnce(&mut [u8]) -> Result<usize, E>,
    ) -> Result<usize, E> {
        let target = match &mut self.buf {
            Some(buf) => {
                if buf.capacity() - buf.len() < n {
                    grow(&self.pool, buf, n);
                }
                &mut **buf
            }
            None => &mut self.answers,
        };
        let len = target.len();
        target.resize(len + n, 0);
        let got = encode(&mut target[len..]);
        let used = got.as_ref().map_or(0, |k| (*k).min(n));
        target.truncate(len + used);
        got
    }

    /// A pooled buffer with room for `need` more bytes after those waiting, writing what
    /// waits to `io` first if the buffer held has less: at least `need` bytes (`MIN_WRITE`
    /// for application data) from the pool, waiting for room under a budget.
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
            self.buf = Some(ready!(self.taking.poll_get(cx, &self.pool, size))?);
        }
    }

    /// Gives the buffer back if nothing in it waits.
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
            ready!(poll_write_all(
                cx,
                io,
                &self.answers,
                &mut self.answers_written
            ))?;
            self.answers = Vec::new();
            self.answers_written = 0;
        }
        if let Some(buf) = &self.buf {
            ready!(poll_write_all(cx, io, buf, &mut self.written))?;
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

/// Makes room for `n` more bytes in `buf`: a pooled buffer that holds them and its bytes if
/// the pool has one now, else the heap's (a flight larger than the buffer taken for it, or
/// records rustls queued before the write it made room for).
fn grow(pool: &BufferPool, buf: &mut PooledBuf, n: usize) {
    let need = buf.len() + n;
    match pool.try_get_exact(need) {
        Ok(mut bigger) => {
            bigger.extend_from_slice(buf);
            *buf = bigger;
        }
        Err(_) => buf.reserve(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_largest_write_leaves_room_for_every_record_and_an_alert() {
        let n = write_chunk(usize::MAX);
        // At most three records, however the cipher fragments (24 bytes of overhead or
        // less: TLS 1.2's AES-GCM), each a 5-byte header, its plaintext and its overhead.
        let per_record = MAX_FRAGMENT - 24;
        assert!(n.div_ceil(per_record) <= 3);
        let rustls_needs = 3 * (5 + MAX_FRAGMENT + 24);
        assert!(sealed_len(n) >= rustls_needs);
        assert!(sealed_len(n) <= 56 << 10);
        assert!(sealed_len(1) >= 5 + 1 + 17 + 5 + 2 + 17); // a record and an alert
    }

    #[test]
    fn appending_keeps_what_was_encoded_and_drops_the_rest_of_the_room() {
        let pool = BufferPool::new();
        let mut out = Outgoing::new(pool);
        // No pooled buffer held: into the answers.
        let got: Result<usize, ()> = out.append(10, |room| {
            room[..3].copy_from_slice(b"abc");
            Ok(3)
        });
        assert_eq!(got, Ok(3));
        assert_eq!(out.pending(), 3);
        // An error appends nothing.
        let got: Result<usize, &str> = out.append(10, |room| {
            room[0] = b'x';
            Err("too small")
        });
        assert_eq!(got, Err("too small"));
        assert_eq!(out.pending(), 3);
    }
}
