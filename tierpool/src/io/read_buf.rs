//! [`ReadBuffer`]: a pooled, contiguous, growable read buffer whose memory follows traffic,
//! under the read rules ([`ReadRule`](crate::io::ReadRule)) (at most `max(2P, T0)` held while `P`
//! bytes wait, nothing once drained).

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::AsyncRead;

use crate::buf::shared::PooledBytes;
use crate::engine::error::AllocError;
use crate::io::parts::{Core, ReadRule, Store, VecStore};
use crate::pool::buffer_pool::BufferPool;

/// A pooled, contiguous, growable read buffer: reads append to it, a parser looks at the
/// unread bytes as one `&[u8]`, and frames are split off as [`PooledBytes`] without a copy.
/// Its memory follows traffic: drained, its buffer goes back to the pool, so an idle
/// connection holds nothing; with `P` bytes unread it holds at most `max(2P, T0)` (`T0` the
/// pool's smallest tier) while it waits, however the bytes arrive (module docs).
///
/// For a parser that is not a tokio-util decoder: look at [`unread`](Self::unread) (or
/// [`find`](Self::find) a delimiter), consume with [`advance`](Self::advance) or take a frame
/// with [`split_to`](Self::split_to), and read more with [`read_from`](Self::read_from) when
/// what is there is not a whole frame. For a tokio-util `Decoder`, use
/// [`FramedRead`](crate::io::codec::FramedRead) (feature `tokio-util`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> std::io::Result<()> {
/// use tierpool::io::ReadBuffer;
///
/// let pool = tierpool::BufferPool::new();
/// let mut input: &[u8] = b"PING\r\nECHO hi\r\n";
/// let mut buf = ReadBuffer::new(pool);
/// let mut lines = Vec::new();
/// loop {
///     while let Some(end) = buf.find(b"\r\n") {
///         let line = buf.split_to(end + 2); // a view of the pooled buffer, no copy
///         lines.push(line);
///     }
///     if buf.read_from(&mut input).await? == 0 {
///         break; // the end of the stream
///     }
/// }
/// assert_eq!(lines, [&b"PING\r\n"[..], b"ECHO hi\r\n"]);
/// assert_eq!(buf.held_bytes(), 0); // drained: nothing held
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct ReadBuffer {
    core: Core<VecStore>,
    /// After a split: the unread bytes as a view of the buffer the frames share.
    rest: Option<PooledBytes>,
    /// The most unread bytes it may hold (`max_len`).
    max_len: usize,
}

impl ReadBuffer {
    /// An empty read buffer taking its buffers from `pool`; it holds nothing until bytes
    /// arrive.
    pub fn new(pool: BufferPool) -> Self {
        ReadBuffer {
            core: Core::new(pool),
            rest: None,
            max_len: usize::MAX,
        }
    }

    /// Refuses to hold more than `bytes` unread bytes: a read that finds that many already
    /// unread (a frame larger than a parser would ever take) fails with
    /// [`io::ErrorKind::InvalidData`] and the buffer is given back. Default: no limit.
    pub fn max_len(mut self, bytes: usize) -> Self {
        self.max_len = bytes.max(1);
        self
    }

    /// The unread bytes.
    pub fn unread(&self) -> &[u8] {
        match &self.rest {
            Some(rest) => rest,
            None => self.core.slot.as_ref().map_or(&[], Store::unread),
        }
    }

    /// The number of unread bytes.
    pub fn len(&self) -> usize {
        self.unread().len()
    }

    /// True if nothing is unread.
    pub fn is_empty(&self) -> bool {
        self.unread().is_empty()
    }

    /// The capacity of the pooled buffer it holds now (0 when it holds none). Frames split
    /// off and still alive are not counted: they hold their buffer themselves.
    pub fn held_bytes(&self) -> usize {
        self.core.held()
    }

    /// Where `needle` first occurs in the unread bytes (a delimiter such as `b"\r\n"`).
    pub fn find(&self, needle: &[u8]) -> Option<usize> {
        find(self.unread(), needle)
    }

    /// Consumes `n` unread bytes.
    ///
    /// # Panics
    /// If `n > len()`.
    pub fn advance(&mut self, n: usize) {
        assert!(
            n <= self.len(),
            "advance({n}) past the {} unread bytes",
            self.len()
        );
        match &mut self.rest {
            Some(rest) => {
                rest.advance(n);
                if rest.is_empty() {
                    self.rest = None;
                }
            }
            None => {
                if let Some(s) = &mut self.core.slot {
                    s.start += n;
                }
                self.core.give_back_if_drained();
            }
        }
    }

    /// Takes the first `n` unread bytes as a view of the pooled buffer, without a copy. The
    /// buffer returns to the pool when the last of its views (and this read buffer) let go.
    ///
    /// # Panics
    /// If `n > len()`.
    pub fn split_to(&mut self, n: usize) -> PooledBytes {
        assert!(
            n <= self.len(),
            "split_to({n}) past the {} unread bytes",
            self.len()
        );
        let mut rest = match self.rest.take() {
            Some(rest) => rest,
            None => match self.core.hand_over() {
                Some(VecStore { buf, start }) => {
                    let mut view = buf.into_shared();
                    view.advance(start);
                    view
                }
                None => return PooledBytes::default(),
            },
        };
        let frame = rest.split_to(n);
        if !rest.is_empty() {
            self.rest = Some(rest);
        }
        frame
    }

    /// Gives back the buffer and drops every unread byte.
    pub fn clear(&mut self) {
        self.rest = None;
        self.core.clear();
    }

    /// The unread bytes, writable in place: for a protocol that transforms its input where it
    /// lies (TLS records decrypted in place, say). The slice stays where it is until the next
    /// read, [`split_to`](Self::split_to) or `unread_mut` that has to move it; what is written
    /// into it is what [`unread`](Self::unread) then shows.
    ///
    /// Views split off earlier and still alive share the buffer: the unread bytes first move
    /// to a buffer of their own (of the largest tier that holds them twice over), taken
    /// without waiting.
    ///
    /// # Errors
    /// With views alive, the pool's error if it has no buffer for the unread bytes now (under
    /// a budget with no room: [`AllocError::OverBudget`](crate::AllocError::OverBudget));
    /// nothing is moved then. Without views alive it never fails.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let mut buf = tierpool::io::ReadBuffer::new(tierpool::BufferPool::new());
    /// buf.read_from(&mut &b"hello"[..]).await?;
    /// buf.unread_mut()?.make_ascii_uppercase();
    /// assert_eq!(buf.unread(), b"HELLO");
    /// # Ok(()) }
    /// ```
    pub fn unread_mut(&mut self) -> Result<&mut [u8], AllocError> {
        if let Some(rest) = self.rest.take() {
            match rest.try_into_mut() {
                Ok(buf) => self.core.slot = Some(VecStore::adopt(buf)),
                Err(rest) => {
                    let size = ReadRule::grow_capacity(self.core.pool(), rest.len());
                    match self.core.pool().try_get_exact(size) {
                        Ok(mut buf) => {
                            buf.extend_from_slice(&rest);
                            self.core.slot = Some(VecStore::adopt(buf));
                        }
                        Err(e) => {
                            self.rest = Some(rest);
                            return Err(e);
                        }
                    }
                }
            }
        }
        Ok(match &mut self.core.slot {
            Some(VecStore { buf, start }) => &mut buf[*start..],
            None => &mut [],
        })
    }

    /// Makes the unread bytes a plain buffer again before a read: the one the views share if
    /// none of them is left, else a copy (waiting for room under a budget).
    fn poll_unshare(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(rest) = self.rest.take() else {
            return Poll::Ready(Ok(()));
        };
        let buf = match rest.try_into_mut() {
            Ok(buf) => {
                self.core.cancel_take();
                buf
            }
            Err(rest) => {
                let size = ReadRule::grow_capacity(self.core.pool(), rest.len());
                match self.core.poll_take(cx, size) {
                    Poll::Ready(Ok(mut buf)) => {
                        buf.extend_from_slice(&rest);
                        buf
                    }
                    Poll::Ready(Err(e)) => {
                        self.rest = Some(rest);
                        return Poll::Ready(Err(e));
                    }
                    Poll::Pending => {
                        self.rest = Some(rest);
                        return Poll::Pending;
                    }
                }
            }
        };
        self.core.slot = Some(VecStore::adopt(buf));
        Poll::Ready(Ok(()))
    }

    /// Reads once from `io`, appending to the unread bytes: how many arrived (0 at the end of
    /// the stream). With nothing unread it holds no buffer while `io` has nothing to read, and
    /// a buffer is taken only for a read that has data (module docs).
    ///
    /// # Errors
    /// `io`'s error; [`io::ErrorKind::OutOfMemory`] if the pool cannot serve a buffer;
    /// [`io::ErrorKind::InvalidData`] if [`max_len`](Self::max_len) bytes are already unread.
    pub fn poll_read_from<R: AsyncRead + ?Sized>(
        &mut self,
        cx: &mut Context<'_>,
        io: Pin<&mut R>,
    ) -> Poll<io::Result<usize>> {
        if self.len() >= self.max_len {
            let held = self.len();
            self.clear();
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{held} bytes unread and no frame: more than the limit of {} bytes",
                    self.max_len
                ),
            )));
        }
        ready!(self.poll_unshare(cx))?;
        let limit = self.max_len - self.len();
        self.core.poll_read(cx, io, limit)
    }

    /// [`poll_read_from`](Self::poll_read_from) as a future.
    ///
    /// # Errors
    /// As [`poll_read_from`](Self::poll_read_from).
    pub async fn read_from<R: AsyncRead + Unpin + ?Sized>(
        &mut self,
        io: &mut R,
    ) -> io::Result<usize> {
        poll_fn(|cx| self.poll_read_from(cx, Pin::new(&mut *io))).await
    }
}

/// Where `needle` first occurs in `hay`.
pub(crate) fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    match needle {
        [] => Some(0),
        [b] => hay.iter().position(|x| x == b),
        [first, rest @ ..] => {
            let mut from = 0;
            while let Some(i) = hay[from..].iter().position(|x| x == first) {
                let at = from + i;
                if hay[at + 1..].starts_with(rest) {
                    return Some(at);
                }
                from = at + 1;
            }
            None
        }
    }
}

#[cfg(feature = "bytes")]
impl bytes::Buf for ReadBuffer {
    fn remaining(&self) -> usize {
        self.len()
    }

    fn chunk(&self) -> &[u8] {
        self.unread()
    }

    fn advance(&mut self, n: usize) {
        ReadBuffer::advance(self, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;
    use std::task::{RawWaker, RawWakerVTable, Waker};
    use tokio::io::ReadBuf;

    /// A waker that does nothing (the tests poll by hand).
    fn noop_waker() -> Waker {
        const VTABLE: RawWakerVTable = RawWakerVTable::new(
            |_| RawWaker::new(std::ptr::null(), &VTABLE),
            |_| {},
            |_| {},
            |_| {},
        );
        // SAFETY: every function of the vtable ignores the data pointer.
        unsafe { Waker::from_raw(RawWaker::new(std::ptr::null(), &VTABLE)) }
    }

    /// Chunks, each after a `Pending`, delivered no more than a read offers.
    struct Chunks(VecDeque<Vec<u8>>, bool);

    impl AsyncRead for Chunks {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            if !self.1 && !self.0.is_empty() {
                self.1 = true;
                return Poll::Pending;
            }
            self.1 = false;
            if let Some(mut c) = self.0.pop_front() {
                let n = c.len().min(buf.remaining());
                buf.put_slice(&c[..n]);
                if n < c.len() {
                    self.0.push_front(c.split_off(n));
                    self.1 = true;
                }
            }
            Poll::Ready(Ok(()))
        }
    }

    /// Every path of a read (into the room held, into a fresh buffer adopted, appended after
    /// compacting, stashed and grown), splits that share the buffer and outlive it, and
    /// shrinking at a wait: the bytes come out right (under Miri: every access in bounds and
    /// initialized).
    #[test]
    fn reads_splits_growth_and_shrinking_keep_the_bytes() {
        let pool = BufferPool::builder()
            .tiers([
                16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768,
            ])
            .build()
            .unwrap();
        let input: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        let sizes = [1usize, 3, 17, 200, 5000, 1, 9000, 40, 2, 4000, 1700];
        let mut chunks = VecDeque::new();
        let mut at = 0;
        for (i, &n) in sizes.iter().cycle().enumerate() {
            if at >= input.len() {
                break;
            }
            let n = n.min(input.len() - at) + i % 2;
            let n = n.min(input.len() - at);
            chunks.push_back(input[at..at + n].to_vec());
            at += n;
        }
        let mut io = Chunks(chunks, false);
        let mut rb = ReadBuffer::new(pool.clone());
        let waker = noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut out = Vec::new();
        let mut kept = Vec::new();
        loop {
            // Take a frame of 700 bytes whenever there is one; keep every third alive.
            while rb.len() >= 700 {
                let frame = rb.split_to(700);
                out.extend_from_slice(&frame);
                if out.len() % 2100 == 0 {
                    kept.push(frame);
                }
            }
            match rb.poll_read_from(&mut cx, Pin::new(&mut io)) {
                Poll::Pending => {}
                Poll::Ready(Ok(0)) => break,
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => panic!("{e}"),
            }
        }
        out.extend_from_slice(rb.unread());
        assert_eq!(out, input);
        for (i, f) in kept.iter().enumerate() {
            let at = (i + 1) * 2100 - 700;
            assert_eq!(&f[..], &input[at..at + 700]);
        }
        drop((rb, kept));
        let s = pool.stats();
        assert_eq!(s.gets, s.returned);
    }

    #[test]
    fn find_finds_the_first_occurrence() {
        assert_eq!(find(b"abc\r\ndef\r\n", b"\r\n"), Some(3));
        assert_eq!(find(b"abc\r", b"\r\n"), None);
        assert_eq!(find(b"\r\r\n", b"\r\n"), Some(1));
        assert_eq!(find(b"abc", b""), Some(0));
        assert_eq!(find(b"", b"x"), None);
        assert_eq!(find(b"xyx", b"x"), Some(0));
    }
}
