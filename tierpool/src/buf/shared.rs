//! [`PooledBytes`]: a shared, sliceable, reference-counted, read-only view of a pooled buffer.
//!
//! A [`PooledBuf`] is owned by one holder. Once it is filled, [`PooledBuf::into_shared`]
//! turns it into a `PooledBytes`: cloning it, slicing it (`slice`, `split_to`, `split_off`)
//! and sending the pieces to other threads costs one atomic increment each, and the buffer goes
//! back to its pool exactly once, when the last view is dropped (gRPC-Go's `mem.Buffer`, in
//! Rust).
//!
//! The views share a small heap block (`buf/block.rs`: the count, the `Vec`, the pool's key
//! and the tag), recycled so that in steady state `into_shared` allocates nothing.
//!
//! # Safety argument
//!
//! `Inner.refs` counts the live views. A view reads the bytes through a raw pointer into the
//! `Vec`'s heap allocation, which nothing mutates or frees while `refs > 0`: the `Vec` is only
//! touched again by the thread that brings `refs` from 1 to 0, which then has exclusive access
//! (the protocol of `std::sync::Arc` and `bytes`: increments `Relaxed`, decrements `Release`,
//! and an `Acquire` load of the count before the last owner touches the block).

use std::fmt;
use std::mem;
use std::ops::{Bound, Deref, RangeBounds};
use std::ptr::NonNull;

use crate::base::key::{Key, Tag};
use crate::base::sync::{AtomicUsize, Ordering};
use crate::buf::block::{self as blocks, Inner};
use crate::buf::pooled::PooledBuf;
use crate::engine::ops;

/// A shared, read-only view of (part of) a pooled buffer; the buffer returns to its pool when
/// the last view is dropped.
///
/// Made by [`PooledBuf::into_shared`]. Cheap to clone and to slice (one atomic increment, no
/// copy, no allocation), `Send + Sync`, dereferences to `[u8]`. With the `bytes` feature it
/// implements [`bytes::Buf`] and converts into [`bytes::Bytes`] without copying.
///
/// ```
/// let pool = tierpool::BufferPool::new();
/// let mut buf = pool.get(16);
/// buf.extend_from_slice(b"header:payload");
/// let mut all = buf.into_shared();
/// let header = all.split_to(7);
/// assert_eq!(&header[..], b"header:");
/// assert_eq!(&all[..], b"payload");
/// let copy = all.clone();
/// std::thread::spawn(move || assert_eq!(&copy[..], b"payload")).join().unwrap();
/// drop((header, all)); // the last view: the buffer goes back to the pool
/// assert_eq!(pool.stats().returned, 1);
/// ```
pub struct PooledBytes {
    inner: NonNull<Inner>,
    ptr: *const u8,
    len: usize,
}

// SAFETY: the bytes a view reads are immutable while any view exists (module docs), and the
// control block is only mutated through atomics or by the last owner; so views can move to
// and be used from any thread, like `Arc<[u8]>`.
unsafe impl Send for PooledBytes {}
// SAFETY: as above; `&PooledBytes` only allows reading the bytes and cloning (an atomic
// increment).
unsafe impl Sync for PooledBytes {}

impl PooledBytes {
    fn from_parts(buf: Vec<u8>, pool: Key, tag: Tag) -> Self {
        let ptr = buf.as_ptr();
        let len = buf.len();
        let inner = blocks::take(Inner {
            refs: AtomicUsize::new(1),
            buf,
            pool,
            tag,
        });
        PooledBytes { inner, ptr, len }
    }

    #[inline]
    fn inner(&self) -> &Inner {
        // SAFETY: `inner` points to a live block while this view exists (it holds a count).
        unsafe { self.inner.as_ref() }
    }

    /// Number of bytes in this view.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True if this view is empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of live views of the underlying buffer (this one included). Racy by nature: for
    /// diagnostics and tests.
    pub fn ref_count(&self) -> usize {
        self.inner().refs.load(Ordering::Relaxed)
    }

    fn bounds(&self, range: impl RangeBounds<usize>) -> (usize, usize) {
        let start = match range.start_bound() {
            Bound::Included(&s) => s,
            Bound::Excluded(&s) => s.checked_add(1).expect("range start overflows usize"),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(&e) => e.checked_add(1).expect("range end overflows usize"),
            Bound::Excluded(&e) => e,
            Bound::Unbounded => self.len,
        };
        assert!(
            start <= end && end <= self.len,
            "range {start}..{end} out of bounds for a view of {} bytes",
            self.len
        );
        (start, end)
    }

    /// A new view of `range` within this one (no copy).
    ///
    /// # Panics
    /// If the range is out of bounds, as slicing a `[u8]` would.
    ///
    /// ```
    /// let pool = tierpool::BufferPool::new();
    /// let mut buf = pool.get(8);
    /// buf.extend_from_slice(b"abcdef");
    /// let all = buf.into_shared();
    /// assert_eq!(&all.slice(1..3)[..], b"bc");
    /// ```
    #[must_use = "slicing makes a new view and leaves this one unchanged"]
    pub fn slice(&self, range: impl RangeBounds<usize>) -> PooledBytes {
        let (start, end) = self.bounds(range);
        let mut view = self.clone();
        // SAFETY: `start <= end <= len`, so the new view stays within this one.
        view.ptr = unsafe { self.ptr.add(start) };
        view.len = end - start;
        view
    }

    /// Splits off the first `at` bytes and returns them; `self` keeps the rest.
    ///
    /// # Panics
    /// If `at > len`.
    #[must_use = "use `advance` to drop the first bytes"]
    pub fn split_to(&mut self, at: usize) -> PooledBytes {
        assert!(
            at <= self.len,
            "split_to({at}) out of bounds for {} bytes",
            self.len
        );
        let mut head = self.clone();
        head.len = at;
        // SAFETY: `at <= len`.
        self.ptr = unsafe { self.ptr.add(at) };
        self.len -= at;
        head
    }

    /// Splits off the bytes from `at` on and returns them; `self` keeps the first `at`.
    ///
    /// # Panics
    /// If `at > len`.
    #[must_use = "use `truncate` to drop the last bytes"]
    pub fn split_off(&mut self, at: usize) -> PooledBytes {
        assert!(
            at <= self.len,
            "split_off({at}) out of bounds for {} bytes",
            self.len
        );
        let mut tail = self.clone();
        // SAFETY: `at <= len`.
        tail.ptr = unsafe { self.ptr.add(at) };
        tail.len = self.len - at;
        self.len = at;
        tail
    }

    /// Shortens this view to `len` bytes (no effect if it is already shorter).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Drops the first `n` bytes of this view.
    ///
    /// # Panics
    /// If `n > len`.
    pub fn advance(&mut self, n: usize) {
        assert!(
            n <= self.len,
            "advance({n}) past the end of {} bytes",
            self.len
        );
        // SAFETY: `n <= len`.
        self.ptr = unsafe { self.ptr.add(n) };
        self.len -= n;
    }

    /// The bytes of this view.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr..ptr+len` lies within the initialized part of the `Vec` this view
        // shares, which nothing mutates or frees while a view exists (module docs).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The buffer back as a writable [`PooledBuf`], if this is its only view (as
    /// `bytes::Bytes::try_into_mut`); otherwise `Err(self)`, unchanged. The `PooledBuf` holds
    /// this view's bytes (`len()` of them) and still returns to its pool when dropped, with
    /// its full capacity. If the view does not start at the buffer's start (after
    /// `split_to` or `advance`), its bytes are moved to the front (a `memmove` of `len()`
    /// bytes); otherwise nothing is copied. A view of a `Vec` that belongs to no pool
    /// (`From<Vec<u8>>`) is always `Err`, and so is a view of an
    /// [`AlignedBuf`](crate::AlignedBuf)'s buffer: a `PooledBuf` is a `Vec` that can grow,
    /// and an aligned pool's buffer cannot (it is allocated with the pool's alignment, and a
    /// `Vec` would reallocate and free it with alignment 1). Copy its bytes out instead
    /// ([`to_vec`](Self::to_vec), or into a buffer of your own).
    ///
    /// ```
    /// let pool = tierpool::BufferPool::new();
    /// let mut buf = pool.get(64);
    /// buf.extend_from_slice(b"header:payload");
    /// let mut shared = buf.into_shared();
    /// let header = shared.split_to(7);
    /// let shared = shared.try_into_mut().unwrap_err(); // `header` still shares the buffer
    /// drop(header);
    /// let mut buf = shared.try_into_mut().expect("the only view now");
    /// assert_eq!(&buf[..], b"payload");
    /// buf.extend_from_slice(b"!"); // writable again, same pooled buffer
    /// assert!(buf.capacity() >= 64);
    /// ```
    pub fn try_into_mut(self) -> Result<PooledBuf, PooledBytes> {
        // `Acquire`: pairs with the `Release` decrements of views dropped on other threads,
        // whose reads of the bytes then happen before our writes (as in `last_view`).
        if self.inner().tag == Tag::FOREIGN
            || self.inner().pool.align() > 1
            || self.inner().refs.load(Ordering::Acquire) != 1
        {
            return Err(self);
        }
        let this = mem::ManuallyDrop::new(self);
        // SAFETY: the count is 1 and this view holds it, so no other view exists, and none can
        // be made (views are cloned only from live ones, and this one is consumed): this
        // thread has the block to itself, as the last view has in `last_view`.
        let block = unsafe { &mut *this.inner.as_ptr() };
        let mut buf = mem::take(&mut block.buf);
        let (pool, tag) = (block.pool, block.tag);
        // SAFETY: the view lies within `buf`'s initialized part (field invariant), so both
        // pointers are into the same allocation and `ptr >= buf.as_ptr()`.
        let start = unsafe { this.ptr.offset_from(buf.as_ptr()) } as usize;
        let len = this.len;
        if start + len > buf.len() {
            // A view of a buffer a provided-buffer ring filled (`written_view`): the kernel
            // wrote it from its start up to the end of this view, and nothing else has it.
            // SAFETY: those bytes are initialized (the invariant of `written_view`), and
            // within the capacity.
            unsafe { buf.set_len(start + len) };
        }
        // SAFETY: the block's `buf` is empty now and nothing uses the block again.
        unsafe { blocks::give(this.inner) };
        if start != 0 {
            buf.copy_within(start..start + len, 0);
        }
        buf.truncate(len);
        Ok(PooledBuf::new(buf, pool, tag))
    }

    /// A new view of `len` bytes `offset` bytes into this view's buffer, which may lie past
    /// this view's end (the empty base view of a buffer lent to a provided-buffer ring, with
    /// the views of what the kernel wrote into it).
    ///
    /// # Safety
    /// The buffer's bytes from its start to `offset + len` are initialized (a kernel that fills
    /// it in order has written them), within its capacity, and nothing writes them while any
    /// view exists.
    #[cfg_attr(not(all(feature = "buf-ring", target_os = "linux")), allow(dead_code))]
    pub(crate) unsafe fn written_view(&self, offset: usize, len: usize) -> PooledBytes {
        debug_assert!(offset + len <= self.inner().buf.capacity());
        // The new view holds the count this clone took.
        let view = mem::ManuallyDrop::new(self.clone());
        PooledBytes {
            inner: view.inner,
            // SAFETY: the caller's contract: `offset` is within the allocation.
            ptr: unsafe { self.inner().buf.as_ptr().add(offset) },
            len,
        }
    }

    /// The capacity of the buffer this view is of.
    pub(crate) fn buffer_capacity(&self) -> usize {
        self.inner().buf.capacity()
    }

    /// Appends `data` in the room after this view's end, in place, if this is the only view
    /// of its buffer, nothing lies after it, and `data` fits; false (nothing done) otherwise.
    /// What a chain does with a small view it is given (`PooledChain::push`).
    pub(crate) fn try_extend(&mut self, data: &[u8]) -> bool {
        // `Acquire`: pairs with the `Release` decrements of views dropped on other threads,
        // whose reads of the bytes then happen before our writes (as in `try_into_mut`).
        if self.inner().tag == Tag::FOREIGN || self.inner().refs.load(Ordering::Acquire) != 1 {
            return false;
        }
        // SAFETY: the count is 1 and this view holds it, and `&mut self` keeps it from being
        // cloned meanwhile: this thread has the block to itself (as in `try_into_mut`).
        let block = unsafe { &mut *self.inner.as_ptr() };
        let base = block.buf.as_mut_ptr();
        // SAFETY: the view lies within the buffer's allocation (field invariant).
        let end = unsafe { self.ptr.offset_from(base) } as usize + self.len;
        // Nothing may lie after the view (a provided-buffer ring's view may end past the
        // `Vec`'s length: the kernel wrote up to it), and `data` must fit.
        if end < block.buf.len() || block.buf.capacity() - end < data.len() {
            return false;
        }
        // SAFETY: `end + data.len()` is within the capacity (checked), the bytes up to `end`
        // are initialized (this view's, and the ones before it in the buffer), and no other
        // view exists to read what is written.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), base.add(end), data.len());
            block.buf.set_len(end + data.len());
        }
        self.len += data.len();
        true
    }

    /// Copies this view into a new `Vec`.
    pub fn to_vec(&self) -> Vec<u8> {
        self.as_slice().to_vec()
    }
}

impl PooledBuf {
    /// Turns this buffer into a shared, read-only [`PooledBytes`] over its contents
    /// (`len()` bytes), without copying. The buffer returns to its pool when the last view is
    /// dropped. Allocates nothing in steady state (the control block is recycled).
    #[must_use = "the buffer goes back to the pool if the view is dropped"]
    pub fn into_shared(self) -> PooledBytes {
        let key = self.key();
        let (buf, tag) = self.into_parts();
        PooledBytes::from_parts(buf, key, tag)
    }
}

impl From<PooledBuf> for PooledBytes {
    fn from(buf: PooledBuf) -> Self {
        buf.into_shared()
    }
}

impl From<Vec<u8>> for PooledBytes {
    /// A shared view of a `Vec` that belongs to no pool: it is freed with the last view.
    fn from(v: Vec<u8>) -> Self {
        PooledBytes::from_parts(v, Key::NOBODY, Tag::FOREIGN)
    }
}

impl Clone for PooledBytes {
    #[inline]
    fn clone(&self) -> Self {
        // Relaxed, as in `Arc::clone`: the new view is made from an existing one, which keeps
        // the block alive; no ordering with other memory is needed.
        let old = self.inner().refs.fetch_add(1, Ordering::Relaxed);
        if old > isize::MAX as usize {
            // As `Arc` does: a count this high means views were leaked on purpose
            // (`mem::forget` in a loop); wrapping would free the buffer while in use.
            std::process::abort();
        }
        PooledBytes {
            inner: self.inner,
            ptr: self.ptr,
            len: self.len,
        }
    }
}

impl Drop for PooledBytes {
    #[inline]
    fn drop(&mut self) {
        if self.inner().refs.fetch_sub(1, Ordering::Release) != 1 {
            return;
        }
        last_view(self.inner);
    }
}

/// Under loom: how many times a last view handed its buffer back (an observer for the models,
/// outside the modelled state).
#[cfg(loom)]
pub(crate) static LAST_VIEWS: std::sync::atomic::AtomicUsize =
    std::sync::atomic::AtomicUsize::new(0);

#[cold]
#[inline(never)]
fn last_view(inner: NonNull<Inner>) {
    // Pairs with the `Release` decrements of the other views: their reads of the bytes happen
    // before the buffer is handed back below. An `Acquire` load of the count (as `bytes`
    // does) rather than a fence, which ThreadSanitizer does not model: it reads the final
    // decrement, and through the release sequence of decrements synchronizes with all of them.
    // SAFETY: the block is live: this thread's decrement brought the count to 0, and nothing
    // else frees it.
    let _ = unsafe { inner.as_ref() }.refs.load(Ordering::Acquire);
    // SAFETY: the count went from 1 to 0, so no other view exists and none can be made (a
    // view is only cloned from a live one): this thread has the block to itself.
    let block = unsafe { &mut *inner.as_ptr() };
    let buf = mem::take(&mut block.buf);
    let (pool, tag) = (block.pool, block.tag);
    // SAFETY: as above; the block is not used again through any view.
    unsafe { blocks::give(inner) };
    #[cfg(loom)]
    LAST_VIEWS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if tag != Tag::FOREIGN {
        ops::put(pool, tag, buf);
    }
}

impl Deref for PooledBytes {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl fmt::Debug for PooledBytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PooledBytes")
            .field("len", &self.len)
            .field("refs", &self.ref_count())
            .finish()
    }
}

bytes_like!(PooledBytes);

impl Default for PooledBytes {
    /// An empty view that belongs to no pool (allocates a control block, or reuses one).
    fn default() -> Self {
        PooledBytes::from(Vec::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `try_extend`: in place only for the sole view of its buffer, with nothing after it and
    /// room for the bytes (under Miri: the write stays within the allocation, and the views
    /// read what was written).
    #[test]
    fn a_sole_tail_view_extends_in_place_and_no_other_does() {
        let pool = crate::BufferPool::new();
        let mut b = pool.get(64);
        b.extend_from_slice(b"head");
        let mut v = b.into_shared();
        assert!(v.try_extend(b"+tail"));
        assert_eq!(&v[..], b"head+tail");
        let other = v.clone();
        assert!(!v.try_extend(b"!"), "shared: no");
        drop(other);
        let mut front = v.split_to(4);
        assert!(!front.try_extend(b"?"), "bytes after it: no");
        drop(front);
        assert!(v.try_extend(b"!"));
        assert_eq!(&v[..], b"+tail!");
        let room = v.buffer_capacity() - 10;
        assert!(!v.try_extend(&vec![0u8; room + 1]), "no room: no");
        assert!(v.try_extend(&vec![1u8; room]));
        assert_eq!(v.len(), 6 + room);
        let foreign = &mut PooledBytes::from(vec![1u8, 2]);
        assert!(!foreign.try_extend(b"3"), "a Vec of no pool: no");
    }
    use crate::BufferPool;

    /// The views a provided-buffer ring makes (`buf_ring`, incremental consumption): an empty
    /// base view, the "kernel" writing in order through the address taken before sharing, a
    /// view per write; the base dropped once the buffer is used up. Runs under Miri.
    #[test]
    fn written_views_of_a_buffer_filled_in_order() {
        let pool = BufferPool::new();
        let mut b = pool.get(64);
        let addr = b.as_mut_ptr();
        let cap = b.capacity();
        let base = b.into_shared();
        assert!(base.is_empty());
        let mut views = Vec::new();
        let mut at = 0;
        for (k, n) in [10usize, 1, 30].into_iter().enumerate() {
            // SAFETY: within the capacity; no view covers these bytes yet.
            unsafe { std::ptr::write_bytes(addr.add(at), k as u8 + 1, n) };
            // SAFETY: bytes `..at + n` were written just now or before, and are not written
            // again.
            views.push(unsafe { base.written_view(at, n) });
            at += n;
        }
        assert!(at <= cap);
        drop(base); // the ring lets go: the views keep the buffer
        assert_eq!(pool.stats().returned, 0);
        assert_eq!(&views[0][..], &[1u8; 10]);
        assert_eq!(&views[1][..], &[2u8]);
        assert_eq!(&views[2][..], &[3u8; 30]);
        let last = views.pop().unwrap();
        drop(views);
        // The only view left, 11 bytes in: back to a buffer holding just its bytes.
        let buf = last.try_into_mut().expect("the only view");
        assert_eq!(&buf[..], &[3u8; 30]);
        drop(buf);
        let s = pool.stats();
        assert_eq!((s.gets, s.returned), (1, 1));
    }

    #[test]
    fn views_share_and_return_once() {
        let pool = BufferPool::new();
        let mut b = pool.get(100);
        b.extend_from_slice(&[7u8; 100]);
        let all = b.into_shared();
        let mut rest = all.clone();
        let head = rest.split_to(10);
        let tail = rest.split_off(50);
        assert_eq!((head.len(), rest.len(), tail.len()), (10, 50, 40));
        assert_eq!(all.ref_count(), 4);
        let s = all.slice(5..=6);
        assert_eq!(&s[..], &[7, 7]);
        drop((all, head, rest, tail));
        assert_eq!(pool.stats().returned, 0, "one view is still alive");
        drop(s);
        assert_eq!(pool.stats().returned, 1);
    }

    #[test]
    fn foreign_vec() {
        let v = PooledBytes::from(vec![1, 2, 3]);
        let w = v.slice(1..);
        drop(v);
        assert_eq!(&w[..], &[2, 3]);
    }

    #[test]
    #[should_panic(expected = "out of bounds")]
    fn slice_out_of_bounds_panics_clearly() {
        let v = PooledBytes::from(vec![1, 2, 3]);
        let _ = v.slice(2..5);
    }

    #[test]
    fn cross_thread_last_view() {
        let pool = BufferPool::new();
        for _ in 0..50 {
            let mut b = pool.get(64);
            b.extend_from_slice(b"x");
            let v = b.into_shared();
            let w = v.clone();
            std::thread::spawn(move || drop(w)).join().unwrap();
            drop(v);
        }
        assert_eq!(pool.stats().returned, 50);
    }
}
