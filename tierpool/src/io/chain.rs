//! [`PooledChain`]: an ordered list of [`PooledBytes`] views that reads as one byte sequence
//! (gRPC-Go's `mem.BufferSlice`, Netty's `CompositeByteBuf`).

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, IoSlice};

use crate::io::parts::ReadRule;
#[cfg(feature = "tokio")]
use crate::io::parts::{Core, VecStore};
use crate::{AllocError, BufferPool, PooledBuf, PooledBytes};

/// An ordered list of [`PooledBytes`] views that reads as one byte sequence, without copying
/// them together.
///
/// A message that arrived in several pooled buffers (or is assembled from a header and a
/// body) stays in them: [`len`](Self::len) is the total, [`split_to`](Self::split_to) and
/// [`advance`](Self::advance) work at any byte offset by splitting at most one view (no copy),
/// [`io_slices`](Self::io_slices) and [`write_to`](Self::write_to) give a vectored write of the
/// whole chain, and it implements [`std::io::Read`] and [`std::io::BufRead`]. With the `bytes`
/// feature it implements [`bytes::Buf`] (`chunks_vectored` lists every view), and
/// `FrameWriter::write_chain` writes one as a frame with a single vectored write. When one
/// contiguous buffer is needed after all, [`materialize`](Self::materialize) copies it into a
/// single pooled buffer. Every buffer goes back to its pool when its last view is dropped.
///
/// ```
/// use std::io::Read;
///
/// let pool = tierpool::BufferPool::new();
/// let mut chain = tierpool::PooledChain::new();
/// for part in [&b"hello, "[..], b"pooled ", b"world"] {
///     let mut buf = pool.get(part.len());
///     buf.extend_from_slice(part);
///     chain.push(buf.into_shared());
/// }
/// assert_eq!((chain.len(), chain.num_parts()), (19, 3));
/// let greeting = chain.split_to(5); // splits the first view, copies nothing
/// assert_eq!(greeting.to_vec(), b"hello");
/// let whole = chain.materialize(&pool); // one contiguous pooled buffer
/// assert_eq!(&whole[..], b", pooled world");
/// let mut rest = String::new();
/// chain.read_to_string(&mut rest)?;
/// assert_eq!(rest, ", pooled world");
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Default)]
pub struct PooledChain {
    parts: VecDeque<PooledBytes>,
    len: usize,
    /// The last view, when [`push_compact`](Self::push_compact) made it (the address of its
    /// first byte): a buffer of copied short reads, which a short read that does not fit
    /// may move to a larger one.
    compacted: Option<usize>,
}

impl PooledChain {
    /// An empty chain (allocates nothing until a view is pushed).
    pub fn new() -> Self {
        PooledChain::default()
    }

    /// Appends a view (an empty one is dropped, not kept).
    pub fn push(&mut self, part: PooledBytes) {
        if !part.is_empty() {
            self.len += part.len();
            self.parts.push_back(part);
        }
    }

    /// Appends a view of received bytes, compacting: a view that fills less than half its
    /// buffer (a short read) is copied into the room after the last view instead, when that
    /// view is the only one of its buffer and has the room, or else into a buffer from
    /// `pool` of its own size; its own buffer goes back at once. A chain built from reads
    /// this way holds at most twice what it has (or one buffer of the pool's smallest tier),
    /// however short the reads: a peer that sends 4,000 bytes one per read leaves a chain of
    /// a few small buffers, not 4,000 large ones. Views that fill at least half their buffers
    /// are appended as [`push`](Self::push) does, without a copy.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::new();
    /// let mut chain = tierpool::PooledChain::new();
    /// for byte in b"hello" {
    ///     let mut read = pool.get(16 << 10); // a 16 KiB buffer per read...
    ///     read.push(*byte); // ...of which one byte arrived
    ///     chain.push_compact(read.into_shared(), &pool);
    /// }
    /// assert_eq!(chain.to_vec(), b"hello");
    /// assert_eq!(chain.num_parts(), 1); // one small buffer holds them all
    /// assert_eq!(chain.parts().next().unwrap().len(), 5);
    /// ```
    pub fn push_compact(&mut self, part: PooledBytes, pool: &BufferPool) {
        if part.is_empty() {
            return;
        }
        if part.len() * 2 >= part.buffer_capacity() {
            self.compacted = None;
            return self.push(part);
        }
        let last = self.parts.back_mut();
        if let Some(last) = last {
            if last.try_extend(&part) {
                self.len += part.len();
                return; // `part`'s buffer goes back now
            }
        }
        // A buffer for the short reads: the last view's bytes too when this chain made it of
        // short reads (so they share one buffer that grows geometrically), sized to hold the
        // bytes at most twice over.
        let regrow = match (self.parts.back(), self.compacted) {
            (Some(last), Some(addr)) => last.as_ptr() as usize == addr,
            _ => false,
        };
        let before = if regrow {
            self.parts.back().map_or(0, PooledBytes::len)
        } else {
            0
        };
        let total = before + part.len();
        let size = ReadRule::grow_capacity(pool, total);
        let Ok(mut tail) = pool.try_get_exact(size) else {
            // No room for a copy (a budget with none): the view as it is.
            self.compacted = None;
            return self.push(part);
        };
        if regrow {
            let old = self.parts.pop_back().expect("checked above");
            self.len -= old.len();
            tail.extend_from_slice(&old);
        }
        tail.extend_from_slice(&part);
        let tail = tail.into_shared();
        self.compacted = Some(tail.as_ptr() as usize);
        self.push(tail);
    }

    /// Appends the views of `other`, in order.
    pub fn append(&mut self, other: PooledChain) {
        self.len += other.len;
        self.parts.extend(other.parts);
    }

    /// Total bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if the chain holds no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of views (none of them empty).
    pub fn num_parts(&self) -> usize {
        self.parts.len()
    }

    /// The views, in order.
    pub fn parts(&self) -> impl ExactSizeIterator<Item = &PooledBytes> + '_ {
        self.parts.iter()
    }

    /// Removes and returns the first view.
    pub fn pop_front(&mut self) -> Option<PooledBytes> {
        let part = self.parts.pop_front()?;
        self.len -= part.len();
        Some(part)
    }

    /// Splits off the first `at` bytes and returns them; `self` keeps the rest. At most one
    /// view is split (a clone of its count, no copy of payload).
    ///
    /// # Panics
    /// If `at > len()`.
    #[must_use = "use `advance` to drop the first bytes"]
    pub fn split_to(&mut self, at: usize) -> PooledChain {
        assert!(
            at <= self.len,
            "split_to({at}) out of bounds for a chain of {} bytes",
            self.len
        );
        let mut head = PooledChain::new();
        while head.len < at {
            let want = at - head.len;
            let front = self.parts.front_mut().expect("len counts the views' bytes");
            if front.len() <= want {
                let part = self.parts.pop_front().expect("checked");
                head.len += part.len();
                head.parts.push_back(part);
            } else {
                head.push(front.split_to(want));
            }
        }
        self.len -= at;
        head
    }

    /// Drops the first `n` bytes.
    ///
    /// # Panics
    /// If `n > len()`.
    pub fn advance(&mut self, n: usize) {
        assert!(
            n <= self.len,
            "advance({n}) past the end of a chain of {} bytes",
            self.len
        );
        self.len -= n;
        let mut n = n;
        while n > 0 {
            let front = self.parts.front_mut().expect("len counts the views' bytes");
            if front.len() <= n {
                n -= front.len();
                self.parts.pop_front();
            } else {
                front.advance(n);
                n = 0;
            }
        }
    }

    /// Drops up to `n` bytes from the front and returns how many it dropped (fewer only if
    /// the chain is shorter): [`advance`](Self::advance) that never panics (gRPC-Go's
    /// `Reader.Discard`).
    pub fn discard(&mut self, n: usize) -> usize {
        let n = n.min(self.len);
        self.advance(n);
        n
    }

    /// Removes and returns the first byte, or `None` if the chain is empty (gRPC-Go's
    /// `Reader.ReadByte`).
    pub fn pop_byte(&mut self) -> Option<u8> {
        let front = self.parts.front_mut()?;
        let b = front[0];
        if front.len() == 1 {
            self.parts.pop_front();
        } else {
            front.advance(1);
        }
        self.len -= 1;
        Some(b)
    }

    /// Copies the first bytes into `dst` without consuming them; returns how many (the
    /// smaller of `dst.len()` and `len()`). A look ahead across views, for a header that may
    /// straddle two of them (gRPC-Go's `Reader.Peek`, as a copy into the caller's bytes).
    ///
    /// ```
    /// # fn view(pool: &tierpool::BufferPool, b: &[u8]) -> tierpool::PooledBytes {
    /// #     let mut v = pool.get(b.len()); v.extend_from_slice(b); v.into_shared() }
    /// let pool = tierpool::BufferPool::new();
    /// let chain: tierpool::PooledChain = [view(&pool, b"\x00\x00"), view(&pool, b"\x00\x05hello")]
    ///     .into_iter()
    ///     .collect();
    /// let mut header = [0u8; 4];
    /// assert_eq!(chain.peek(&mut header), 4);
    /// assert_eq!(u32::from_be_bytes(header), 5);
    /// assert_eq!(chain.len(), 9); // nothing consumed
    /// ```
    pub fn peek(&self, dst: &mut [u8]) -> usize {
        let mut n = 0;
        for part in &self.parts {
            if n == dst.len() {
                break;
            }
            let k = part.len().min(dst.len() - n);
            dst[n..n + k].copy_from_slice(&part[..k]);
            n += k;
        }
        n
    }

    /// The first `n` bytes (all of them if the chain is shorter) as a chain of views, without
    /// consuming them and without copying: one count increment per view, at most one view
    /// sliced (gRPC-Go's `Reader.Peek`, as views).
    pub fn prefix(&self, n: usize) -> PooledChain {
        let n = n.min(self.len);
        let mut out = PooledChain::new();
        for part in &self.parts {
            if out.len == n {
                break;
            }
            let want = n - out.len;
            if part.len() <= want {
                out.push(part.clone());
            } else {
                out.push(part.slice(..want));
            }
        }
        out
    }

    /// The chain's bytes as one contiguous view: the view itself (a clone of its count, no
    /// copy) when the chain has one, else a copy into one buffer from `pool` (gRPC-Go's
    /// `LazyMaterialize`). An empty chain gives an empty view.
    ///
    /// # Panics
    /// As [`BufferPool::get`], when it copies.
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn contiguous(&self, pool: &BufferPool) -> PooledBytes {
        match self.parts.len() {
            0 => PooledBytes::default(),
            1 => self.parts[0].clone(),
            _ => self.materialize(pool).into_shared(),
        }
    }

    /// A writer that appends what is written to the chain: each `write` copies its bytes into
    /// a buffer from `pool` and pushes it as a view (gRPC-Go's `mem.NewWriter`).
    ///
    /// ```
    /// use std::io::Write;
    ///
    /// let pool = tierpool::BufferPool::new();
    /// let mut chain = tierpool::PooledChain::new();
    /// write!(chain.writer(&pool), "{}-{}", "abcd", 42)?;
    /// assert_eq!(chain.to_vec(), b"abcd-42");
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn writer<'a>(&'a mut self, pool: &'a BufferPool) -> ChainWriter<'a> {
        ChainWriter { chain: self, pool }
    }

    /// Fills `dst` with one `IoSlice` per view, from the start; returns how many it filled
    /// (all views if `dst` is long enough). For `write_vectored`.
    pub fn io_slices<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for (slot, part) in dst.iter_mut().zip(&self.parts) {
            *slot = IoSlice::new(part);
            n += 1;
        }
        n
    }

    /// Writes the whole chain to `w` with vectored writes (up to 64 views per call), consuming
    /// it as it goes: on an error, the chain holds what was not written.
    ///
    /// # Errors
    /// What `w` returns; `WriteZero` if it accepts nothing.
    pub fn write_to<W: io::Write + ?Sized>(&mut self, w: &mut W) -> io::Result<()> {
        while !self.is_empty() {
            let mut slices = [IoSlice::new(&[]); 64];
            let k = self.io_slices(&mut slices);
            let n = w.write_vectored(&slices[..k])?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            self.advance(n);
        }
        Ok(())
    }

    /// Copies the chain's bytes into one buffer from `pool` (`len() == self.len()`).
    ///
    /// # Panics
    /// As [`BufferPool::get`].
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn materialize(&self, pool: &BufferPool) -> PooledBuf {
        let mut buf = pool.get_exact(self.len);
        self.copy_into(&mut buf);
        buf
    }

    /// Like [`materialize`](Self::materialize), but failures (and, with a budget, no room
    /// now) are errors, as with [`BufferPool::try_get`].
    ///
    /// # Errors
    /// As [`BufferPool::try_get`].
    #[cfg_attr(feature = "holders", track_caller)]
    pub fn try_materialize(&self, pool: &BufferPool) -> Result<PooledBuf, AllocError> {
        let mut buf = pool.try_get_exact(self.len)?;
        self.copy_into(&mut buf);
        Ok(buf)
    }

    fn copy_into(&self, buf: &mut Vec<u8>) {
        for part in &self.parts {
            buf.extend_from_slice(part);
        }
    }

    /// Copies the chain's bytes into a new `Vec`.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len);
        self.copy_into(&mut v);
        v
    }

    /// Reads `io` to its end into pooled chunks of `chunk` bytes each (the last one may be
    /// shorter), without knowing the length up front: no growth copies, no slack beyond the
    /// last chunk's tier. With a budget on `pool` each chunk waits for room
    /// ([`BufferPool::acquire`]) while the chunks already read are held, so keep `limit` well
    /// below the budget divided by the number of concurrent readers, or readers can wait on
    /// each other.
    ///
    /// # Errors
    /// What `io` returns; `InvalidData` if the stream is longer than `limit` bytes;
    /// `OutOfMemory` (wrapping the [`AllocError`]) if a chunk cannot be had. What was read
    /// is dropped with the chain (its buffers returned); use
    /// [`read_all_into`](Self::read_all_into) to keep it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> std::io::Result<()> {
    /// let pool = tierpool::BufferPool::new();
    /// let data = vec![7u8; 100_000];
    /// let chain = tierpool::PooledChain::read_all(&mut &data[..], &pool, 16 << 10, 1 << 20).await?;
    /// assert_eq!((chain.len(), chain.num_parts()), (100_000, 7));
    /// assert_eq!(chain.to_vec(), data);
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub async fn read_all<R>(
        io: &mut R,
        pool: &BufferPool,
        chunk: usize,
        limit: usize,
    ) -> io::Result<PooledChain>
    where
        R: tokio::io::AsyncRead + Unpin + ?Sized,
    {
        let mut chain = PooledChain::new();
        chain.read_all_into(io, pool, chunk, limit).await?;
        Ok(chain)
    }

    /// [`read_all`](Self::read_all), appending to this chain and returning how many bytes it
    /// read: on an error the chain keeps every byte read before it (as `Read::read_to_end`
    /// keeps them in its `Vec`, and gRPC-Go's `ReadAll` returns them with the error), also
    /// past `limit` when that is the error.
    ///
    /// # Errors
    /// As [`read_all`](Self::read_all).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// let pool = tierpool::BufferPool::new();
    /// let data = vec![1u8; 5000];
    /// let mut chain = tierpool::PooledChain::new();
    /// let err = chain.read_all_into(&mut &data[..], &pool, 1024, 3000).await.unwrap_err();
    /// assert_eq!(err.kind(), std::io::ErrorKind::InvalidData);
    /// assert!(chain.len() > 3000, "the bytes read are kept");
    /// # }
    /// ```
    #[cfg(feature = "tokio")]
    #[cfg_attr(docsrs, doc(cfg(feature = "tokio")))]
    pub async fn read_all_into<R>(
        &mut self,
        io: &mut R,
        pool: &BufferPool,
        chunk: usize,
        limit: usize,
    ) -> io::Result<usize>
    where
        R: tokio::io::AsyncRead + Unpin + ?Sized,
    {
        let chunk = chunk.max(1);
        let start = self.len;
        // Each chunk is read into a buffer that follows what arrived: while the stream waits,
        // the chunk being read holds at most twice its bytes (`io/read_buf.rs`).
        let mut reading = Core::<VecStore>::new(pool.clone());
        loop {
            let (buf, complete) = match reading.read_chunk(io, chunk).await {
                Ok(got) => got,
                Err(e) => {
                    if let Some(buf) = reading.take() {
                        self.push(buf.into_shared());
                    }
                    return Err(e);
                }
            };
            if let Some(buf) = buf {
                self.push(buf.into_shared());
            }
            if !complete {
                return Ok(self.len - start);
            }
            if self.len - start > limit {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("stream longer than the limit of {limit} bytes"),
                ));
            }
        }
    }
}

/// The writer of [`PooledChain::writer`]: each `write` appends a pooled copy of its bytes.
#[derive(Debug)]
pub struct ChainWriter<'a> {
    chain: &'a mut PooledChain,
    pool: &'a BufferPool,
}

impl io::Write for ChainWriter<'_> {
    /// Copies all of `data` into one buffer from the pool and appends it.
    ///
    /// # Errors
    /// `OutOfMemory` (wrapping the [`AllocError`]) if the pool cannot serve the size now
    /// ([`BufferPool::try_get`]: with a budget, no room is an error rather than a wait).
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        if data.is_empty() {
            return Ok(0);
        }
        let mut buf = self
            .pool
            .try_get_exact(data.len())
            .map_err(|e| io::Error::new(io::ErrorKind::OutOfMemory, e))?;
        buf.extend_from_slice(data);
        self.chain.push(buf.into_shared());
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl From<PooledBytes> for PooledChain {
    fn from(part: PooledBytes) -> Self {
        let mut c = PooledChain::new();
        c.push(part);
        c
    }
}

impl From<PooledBuf> for PooledChain {
    fn from(buf: PooledBuf) -> Self {
        PooledChain::from(buf.into_shared())
    }
}

impl Extend<PooledBytes> for PooledChain {
    fn extend<I: IntoIterator<Item = PooledBytes>>(&mut self, iter: I) {
        for part in iter {
            self.push(part);
        }
    }
}

impl FromIterator<PooledBytes> for PooledChain {
    fn from_iter<I: IntoIterator<Item = PooledBytes>>(iter: I) -> Self {
        let mut c = PooledChain::new();
        c.extend(iter);
        c
    }
}

impl io::Read for PooledChain {
    /// Consumes bytes from the front.
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let mut n = 0;
        while n < out.len() {
            let Some(front) = self.parts.front() else {
                break;
            };
            let k = front.len().min(out.len() - n);
            out[n..n + k].copy_from_slice(&front[..k]);
            n += k;
            self.advance(k);
        }
        Ok(n)
    }
}

impl io::BufRead for PooledChain {
    /// The front view's bytes (empty at the end).
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        Ok(self.parts.front().map_or(&[][..], |p| &p[..]))
    }

    fn consume(&mut self, n: usize) {
        self.advance(n.min(self.len));
    }
}

impl PartialEq for PooledChain {
    /// Compares the byte sequences, however they are split into views.
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len
            && self
                .parts
                .iter()
                .flat_map(|p| p.iter())
                .eq(other.parts.iter().flat_map(|p| p.iter()))
    }
}

impl Eq for PooledChain {}

impl fmt::Debug for PooledChain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledChain")
            .field("len", &self.len)
            .field("parts", &self.parts.len())
            .finish()
    }
}

#[cfg(feature = "bytes")]
mod buf_impl {
    use std::io::IoSlice;

    use bytes::{Buf, Bytes};

    use super::PooledChain;

    #[cfg_attr(docsrs, doc(cfg(feature = "bytes")))]
    impl Buf for PooledChain {
        #[inline]
        fn remaining(&self) -> usize {
            self.len
        }

        #[inline]
        fn chunk(&self) -> &[u8] {
            self.parts.front().map_or(&[][..], |p| &p[..])
        }

        fn advance(&mut self, cnt: usize) {
            PooledChain::advance(self, cnt);
        }

        /// One `IoSlice` per view: a `writev` of the whole chain.
        fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
            self.io_slices(dst)
        }

        /// Without copying when the bytes lie in the front view; a chain's bytes spread over
        /// several views are copied into one `Bytes` (use [`PooledChain::split_to`] to keep
        /// them apart without a copy).
        fn copy_to_bytes(&mut self, len: usize) -> Bytes {
            assert!(len <= self.len, "copy_to_bytes({len}) past the end");
            match self.parts.front_mut() {
                Some(front) if front.len() >= len => {
                    let head = front.split_to(len);
                    if front.is_empty() {
                        self.parts.pop_front();
                    }
                    self.len -= len;
                    Bytes::from(head)
                }
                _ => {
                    let head = self.split_to(len);
                    Bytes::from(head.to_vec())
                }
            }
        }
    }
}
