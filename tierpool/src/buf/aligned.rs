//! [`AlignedBuf`], the handle of an [`AlignedPool`](crate::AlignedPool): a pooled buffer
//! allocated with the pool's alignment, for direct I/O.
//!
//! # How an aligned buffer is kept
//!
//! An aligned pool is a [`BufferPool`](crate::BufferPool) whose tiers are multiples of its
//! alignment and whose buffers are allocated with it (`Layout::from_size_align(tier, align)`,
//! `sys/alloc.rs`): a buffer starts at an aligned address, and its capacity is its tier's,
//! a whole number of blocks. An [`AlignedBuf`] is a [`PooledBuf`] that cannot grow: the same
//! 32-byte handle, the same get and return (a get costs what a plain pool's does: the
//! callgrind guard counts both), and no bytes beyond the tier.
//!
//! The machinery (thread caches, depot, caps, decay, budget, stats, thread exit, a pool dropped
//! with buffers out) moves an aligned pool's buffers as it moves a plain pool's, as `Vec<u8>`s,
//! and frees every one of them with the pool's alignment, which `Vec<u8>` would not
//! (`sys/alloc.rs` says how; `tests/aligned_ways_back.rs` takes every way a buffer goes back
//! under Miri, which checks each free's layout). So no such buffer may become a `Vec` a user
//! can grow: an `AlignedBuf` has no `Vec` to give, and a shared view of one is never made
//! writable again ([`PooledBytes::try_into_mut`] is `Err` for it).

use std::borrow::BorrowMut;
use std::fmt;
use std::io;
use std::mem::MaybeUninit;
use std::ops::{Deref, DerefMut};

use crate::buf::pooled::PooledBuf;
use crate::buf::shared::PooledBytes;

/// A buffer of an [`AlignedPool`](crate::AlignedPool): its start is a multiple of the pool's alignment, and so is
/// its capacity; dropping it returns it to the pool (from any thread).
///
/// It works like a `Vec<u8>` that cannot grow: it dereferences to its `len()` initialized
/// bytes, has [`capacity`](Self::capacity), [`set_len`](Self::set_len),
/// [`extend_from_slice`](Self::extend_from_slice), [`resize`](Self::resize) and
/// [`spare_capacity_mut`](Self::spare_capacity_mut) within its capacity, and
/// [`std::io::Write`] (which, like `&mut [u8]`'s, writes what fits). With the features of the
/// same names it is a [`bytes::BufMut`], converts into [`bytes::Bytes`] without a copy (`into_bytes`), and
/// goes into compio, tokio-uring and monoio operations. Those runtimes read into a buffer from
/// its start, whatever its length, up to its capacity (a whole number of blocks), and set the
/// length to what was read; to read into part of it, pass a slice of it (compio's and
/// tokio-uring's `slice`, monoio's `slice_mut`), whose start and length must then be
/// multiples of the alignment for `O_DIRECT`.
///
/// [`into_shared`](Self::into_shared) makes shareable [`PooledBytes`] views of it: the view
/// starts where the buffer does, so at an aligned address; a slice of it starting at `k` is
/// aligned as far as `k` is (`k` a multiple of 4096 keeps 4 KiB alignment).
///
/// ```
/// use std::io::Write;
///
/// let pool = tierpool::AlignedPool::with_alignment(512)?;
/// let mut buf = pool.get(512);
/// buf.write_all(b"a sector")?;
/// assert_eq!(&buf[..], b"a sector");
/// assert_eq!(buf.as_ptr() as usize % 512, 0);
/// let view = buf.into_shared();
/// assert_eq!(view.as_ptr() as usize % 512, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct AlignedBuf {
    /// The buffer, allocated with the pool's alignment (`sys/alloc.rs`); its length is this
    /// handle's. Never grown: every method stays within its capacity, and nothing else
    /// reaches it.
    buf: PooledBuf,
}

// The size the docs promise: a `PooledBuf`'s.
const _: () = assert!(std::mem::size_of::<AlignedBuf>() == 32);

impl AlignedBuf {
    /// The handle of `buf`, a buffer of an aligned pool just taken from it.
    #[inline(always)]
    pub(crate) fn new(buf: PooledBuf) -> Self {
        AlignedBuf { buf }
    }

    /// Number of initialized bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.buf.len()
    }

    /// True if `len() == 0`.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Bytes the buffer can hold from its start: a multiple of the pool's alignment, at least
    /// what was asked. It never changes.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// A pointer to the first byte (aligned to the pool's alignment).
    #[inline]
    pub fn as_ptr(&self) -> *const u8 {
        self.buf.as_ptr()
    }

    /// A mutable pointer to the first byte, valid for `capacity()` bytes.
    #[inline]
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.buf.as_mut_ptr()
    }

    /// The initialized bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        self.buf.as_slice()
    }

    /// The initialized bytes, mutably.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self.buf.as_mut_slice()
    }

    /// The bytes from `len()` to `capacity()`, possibly uninitialized, to fill before
    /// [`set_len`](Self::set_len).
    #[inline]
    pub fn spare_capacity_mut(&mut self) -> &mut [MaybeUninit<u8>] {
        self.buf.spare_capacity_mut()
    }

    /// Sets the length, as [`Vec::set_len`].
    ///
    /// # Safety
    /// `new_len <= capacity()`, and the bytes up to `new_len` are initialized (written, or
    /// filled by a read).
    #[inline]
    pub unsafe fn set_len(&mut self, new_len: usize) {
        debug_assert!(new_len <= self.capacity());
        // SAFETY: the caller's contract is `Vec::set_len`'s.
        unsafe { self.buf.set_len(new_len) };
    }

    /// Shortens the buffer to `len` bytes; no effect if it is not longer.
    #[inline]
    pub fn truncate(&mut self, len: usize) {
        self.buf.truncate(len);
    }

    /// Sets the length to 0.
    #[inline]
    pub fn clear(&mut self) {
        self.buf.clear();
    }

    /// Appends `src`.
    ///
    /// # Panics
    /// If `src` does not fit in the spare capacity: the buffer cannot grow (it is allocated
    /// with the pool's alignment, which a `Vec` would not reallocate it with).
    /// [`std::io::Write::write`] writes what fits instead.
    #[inline]
    #[track_caller]
    pub fn extend_from_slice(&mut self, src: &[u8]) {
        let left = self.capacity() - self.len();
        assert!(
            src.len() <= left,
            "tierpool: {} bytes do not fit in an aligned buffer with {left} of {} bytes left",
            src.len(),
            self.capacity()
        );
        // Within the capacity (checked): the `Vec` does not reallocate.
        self.buf.extend_from_slice(src);
    }

    /// Resizes to `new_len`, filling new bytes with `value`.
    ///
    /// # Panics
    /// If `new_len > capacity()`.
    #[track_caller]
    pub fn resize(&mut self, new_len: usize, value: u8) {
        assert!(
            new_len <= self.capacity(),
            "tierpool: cannot resize an aligned buffer of capacity {} to {new_len} bytes",
            self.capacity()
        );
        // Within the capacity (checked): the `Vec` does not reallocate.
        self.buf.resize(new_len, value);
    }

    /// Turns this buffer into a shared, read-only [`PooledBytes`] over its contents, without
    /// copying; the view starts at the buffer's (aligned) start, and the buffer returns to
    /// its pool when the last view is dropped. The views cannot be made writable again
    /// ([`PooledBytes::try_into_mut`] is `Err` for them: a [`PooledBuf`] could grow).
    ///
    /// ```
    /// let pool = tierpool::AlignedPool::with_alignment(4096)?;
    /// let mut block = pool.get(8192);
    /// block.resize(8192, 7);
    /// let all = block.into_shared();
    /// let second = all.slice(4096..);
    /// assert_eq!(second.as_ptr() as usize % 4096, 0); // 4096 in: still 4 KiB aligned
    /// assert_eq!(second.len(), 4096);
    /// # Ok::<(), tierpool::ConfigError>(())
    /// ```
    #[must_use = "the buffer goes back to the pool if the view is dropped"]
    pub fn into_shared(self) -> PooledBytes {
        self.buf.into_shared()
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl DerefMut for AlignedBuf {
    #[inline]
    fn deref_mut(&mut self) -> &mut [u8] {
        self.as_mut_slice()
    }
}

impl AsMut<[u8]> for AlignedBuf {
    fn as_mut(&mut self) -> &mut [u8] {
        self
    }
}

impl BorrowMut<[u8]> for AlignedBuf {
    fn borrow_mut(&mut self) -> &mut [u8] {
        self
    }
}

bytes_like!(AlignedBuf);

impl io::Write for AlignedBuf {
    /// Appends what fits of `data` (like `&mut [u8]`): at capacity, `Ok(0)`, and `write_all`
    /// fails with [`io::ErrorKind::WriteZero`].
    #[inline]
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(self.capacity() - self.len());
        self.extend_from_slice(&data[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len())
            .field("capacity", &self.capacity())
            .field("addr", &self.as_ptr())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::class::MAX_ALIGNMENT;
    use crate::{AlignedPool, AllocError, Builder, ConfigError};
    use std::io::Write;

    fn aligned(p: *const u8, a: usize) -> bool {
        p as usize % a == 0
    }

    #[test]
    fn every_buffer_is_aligned_and_at_least_as_large_as_asked() {
        // Under Miri, small tiers only (it checks every byte written, slowly).
        let aligns: &[usize] = if cfg!(miri) {
            &[1, 16, 512, 4096]
        } else {
            &[1, 16, 512, 4096, 64 << 10]
        };
        for &align in aligns {
            let pool = Builder::new()
                .power_of_two_tiers(align.max(64), align.max(16 << 10))
                .max_retained_bytes(1 << 20)
                .build_aligned(align)
                .unwrap();
            let sizes = [0, 1, align - 1, align, align + 1, 3 * align, 20_000];
            for n in sizes {
                let mut b = pool.get(n);
                assert!(aligned(b.as_ptr(), align), "align {align} n {n}");
                // Exactly the smallest tier that fits (whichever way the allocation fell).
                // (or above the largest tier, `n` rounded up).
                let tier = pool
                    .tier_sizes()
                    .iter()
                    .copied()
                    .find(|&t| t >= n)
                    .unwrap_or_else(|| n.next_multiple_of(align));
                assert_eq!(b.capacity(), tier, "align {align} n {n}");
                // Every byte of the buffer is writable (one copy: Miri checks its bounds at
                // once, where it would interpret `resize`'s loop byte by byte).
                b.extend_from_slice(&vec![0xa5; b.capacity()]);
                let (first, last) = (b[0], b[b.len() - 1]);
                assert_eq!((first, last), (0xa5, 0xa5));
            }
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "its allocations and frees are aligned_layouts' and aligned_model's under Miri; run natively"
    )]
    fn the_capacity_is_the_tier_also_where_the_allocation_is_aligned_already() {
        // Alignments the allocator gives anyway (malloc's 16, and 1) and one it does not:
        // the capacity is the tier at each (with windows into larger buffers, it was a block
        // too many where the allocation happened to be aligned already).
        for align in [1, 16, 4096] {
            let pool = Builder::new()
                .tiers([align.max(64), 4096.max(align)])
                .build_aligned(align)
                .unwrap();
            let bufs: Vec<_> = (0..64).map(|_| pool.get(1)).collect();
            assert!(
                bufs.iter().all(|b| b.capacity() == align.max(64)),
                "align {align}"
            );
            let big: Vec<_> = (0..64).map(|_| pool.get(5000)).collect();
            let want = 5000usize.next_multiple_of(align);
            assert!(
                big.iter().all(|b| b.capacity() == want),
                "oversize, align {align}"
            );
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "its allocations and frees are aligned_layouts' and aligned_model's under Miri; run natively"
    )]
    fn an_aligned_pool_lends_no_larger_tier_not_even_at_alignment_1() {
        for align in [1, 64] {
            let pool = Builder::new()
                .tiers([64, 128])
                .build_aligned(align)
                .unwrap();
            // A 128-byte buffer retained, which a plain pool would lend to the next get, whose
            // own tier has none.
            drop(pool.get(100));
            assert_eq!(pool.get(10).capacity(), 64, "align {align}");
        }
        let plain = Builder::new().tiers([64, 128]).build().unwrap();
        drop(plain.get(100));
        assert_eq!(plain.get(10).capacity(), 128, "a plain pool lends it");
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "its allocations and frees are aligned_layouts' and aligned_model's under Miri; run natively"
    )]
    fn a_returned_buffer_comes_back_aligned_with_nothing_in_it() {
        let pool = AlignedPool::with_alignment(4096).unwrap();
        let mut b = pool.get(8192);
        let addr = b.as_ptr();
        b.extend_from_slice(&[1; 100]);
        drop(b);
        let b = pool.get(8000);
        assert_eq!(
            b.as_ptr(),
            addr,
            "the same buffer, from this thread's cache"
        );
        assert!(b.is_empty());
        assert_eq!(pool.stats().hits, 1);
    }

    #[test]
    fn sizes_above_the_largest_tier_are_aligned_and_not_kept() {
        let pool = Builder::new().tiers([4096]).build_aligned(4096).unwrap();
        let b = pool.get(10_000);
        assert!(aligned(b.as_ptr(), 4096));
        assert!(b.capacity() >= 12_288);
        drop(b);
        assert_eq!(pool.stats().oversize, 1);
        assert_eq!(pool.stats().retained_bytes, 0);
    }

    #[test]
    fn write_fills_what_fits_and_extend_checks() {
        let pool = AlignedPool::with_alignment(512).unwrap();
        let mut b = pool.get(512);
        assert_eq!(b.write(&[3; 600]).unwrap(), 512);
        assert_eq!(b.write(&[3; 1]).unwrap(), 0);
        assert_eq!(
            b.write_all(b"x").unwrap_err().kind(),
            io::ErrorKind::WriteZero
        );
        b.truncate(10);
        assert_eq!(&b[..], &[3; 10]);
        b.clear();
        b.extend_from_slice(b"abc");
        b.spare_capacity_mut()[0].write(b'd');
        // SAFETY: the byte after "abc" was just written.
        unsafe { b.set_len(4) };
        assert_eq!(&b[..], b"abcd");
        b.as_mut_slice()[0] = b'A';
        assert_eq!(b.as_ref(), b"Abcd");
        let full = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            b.extend_from_slice(&[0; 512]);
        }));
        assert!(full.is_err(), "508 bytes left: 512 do not fit");
        assert_eq!(&b[..], b"Abcd", "nothing written by the refused append");
    }

    #[test]
    fn zeroed_buffers_are_zero_even_when_reused() {
        let pool = AlignedPool::with_alignment(4096).unwrap();
        let mut b = pool.get(4096);
        b.extend_from_slice(&[0xff; 4096]);
        drop(b);
        let z = pool.get_zeroed(4096);
        assert_eq!(z[..], [0; 4096]);
        assert!(aligned(z.as_ptr(), 4096));
    }

    #[test]
    fn shared_views_keep_the_start_and_return_the_buffer_once() {
        let pool = AlignedPool::with_alignment(4096).unwrap();
        let mut b = pool.get(3 * 4096);
        for i in 0..3 {
            b.extend_from_slice(&[i as u8; 4096]);
        }
        let mut all = b.into_shared();
        assert!(aligned(all.as_ptr(), 4096));
        assert_eq!(all.len(), 3 * 4096);
        let first = all.split_to(4096);
        assert!(aligned(all.as_ptr(), 4096));
        assert!(first[..] == [0; 4096] && all[..4096] == [1; 4096]);
        drop(first);
        assert_eq!(pool.stats().returned, 0);
        drop(all);
        assert_eq!(pool.stats().returned, 1);
        // Never made writable again as a `PooledBuf` (a `Vec` that could grow): the sole
        // view stays a view, and still goes back once.
        let mut b = pool.get(4096);
        b.extend_from_slice(b"tail");
        let view = b.into_shared().try_into_mut().unwrap_err();
        assert_eq!(&view[..], b"tail");
        drop(view);
        assert_eq!(pool.stats().returned, 2);
    }

    #[test]
    fn errors_name_the_size_asked() {
        // (Smaller under Miri, where a large allocation and each caught panic cost seconds.)
        let (budget, held, asked) = if cfg!(miri) {
            (64 << 10, 32 << 10, 40 << 10)
        } else {
            (1 << 20, 512 << 10, 600 << 10)
        };
        let pool = Builder::new()
            .max_in_use_bytes(budget)
            .build_aligned(4096)
            .unwrap();
        let held = pool.get(held);
        match pool.try_get(asked) {
            Err(AllocError::OverBudget { requested, .. }) => assert_eq!(requested, asked),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            pool.try_get(usize::MAX - 10),
            Err(AllocError::CapacityOverflow { requested }) if requested == usize::MAX - 10
        ));
        drop(held);
        // Sizes whose rounding up to the alignment passes `isize::MAX` (above the largest
        // tier, off the fast path) name the size asked, with a budget or without, as an error
        // and in `get`'s panic.
        let plain = AlignedPool::with_alignment(4096).unwrap();
        let sizes: &[usize] = if cfg!(miri) {
            &[isize::MAX as usize - 4094]
        } else {
            // The last: only just, by its rounding.
            &[
                usize::MAX - 10,
                isize::MAX as usize,
                isize::MAX as usize - 4094,
            ]
        };
        for pool in [&pool, &plain] {
            for &n in sizes {
                match pool.try_get(n) {
                    Err(AllocError::CapacityOverflow { requested }) => assert_eq!(requested, n),
                    other => panic!("{n}: {other:?}"),
                }
                let panic = std::panic::catch_unwind(|| drop(pool.get(n))).unwrap_err();
                let message = panic.downcast_ref::<String>().expect("a formatted message");
                assert!(
                    message.starts_with("tierpool: ") && message.contains(&n.to_string()),
                    "{message}"
                );
            }
        }
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "its allocations and frees are aligned_layouts' and aligned_model's under Miri; run natively"
    )]
    fn tiers_are_multiples_of_the_alignment() {
        let pool = AlignedPool::with_alignment(4096).unwrap();
        let t = pool.tier_sizes();
        assert_eq!(t[0], 4096);
        assert_eq!(*t.last().unwrap(), 16 << 20);
        assert!(t.windows(2).all(|w| w[0] < w[1]));
        assert!(t.iter().all(|s| s % 4096 == 0));
        let stats = pool.stats();
        assert_eq!(
            stats.tiers.iter().map(|t| t.size).collect::<Vec<_>>(),
            pool.tier_sizes()
        );
        let p2 = Builder::new()
            .power_of_two_tiers(100, 5000)
            .build_aligned(512)
            .unwrap();
        assert_eq!(p2.tier_sizes(), &[512, 1024, 2048, 4096, 5120]);
        for (align, err) in [
            (0, ConfigError::InvalidAlignment { align: 0 }),
            (3, ConfigError::InvalidAlignment { align: 3 }),
            (
                MAX_ALIGNMENT * 2,
                ConfigError::InvalidAlignment {
                    align: MAX_ALIGNMENT * 2,
                },
            ),
        ] {
            assert_eq!(AlignedPool::with_alignment(align).unwrap_err(), err);
        }
        assert_eq!(
            Builder::new()
                .tiers([4096, 6000])
                .build_aligned(4096)
                .unwrap_err(),
            ConfigError::TierNotAligned {
                tier: 6000,
                align: 4096
            }
        );
        assert_eq!(
            Builder::new()
                .tiers([usize::MAX & !4095])
                .build_aligned(4096)
                .unwrap_err(),
            ConfigError::TierTooLarge {
                size: usize::MAX & !4095
            }
        );
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "its allocations and frees are aligned_layouts' and aligned_model's under Miri; run natively"
    )]
    fn buffers_cross_threads_and_come_back() {
        let pool = AlignedPool::with_alignment(512).unwrap();
        let bufs: Vec<_> = (0..8).map(|_| pool.get(1024)).collect();
        std::thread::spawn(move || drop(bufs)).join().unwrap();
        let again: Vec<_> = (0..8).map(|_| pool.get(1024)).collect();
        assert!(again.iter().all(|b| aligned(b.as_ptr(), 512)));
        assert_eq!(pool.stats().returned, 8);
    }
}
