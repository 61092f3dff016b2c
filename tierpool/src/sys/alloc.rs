//! The global allocator's side of an [`AlignedPool`](crate::AlignedPool)'s buffers: they are
//! allocated with the pool's alignment ([`alloc_aligned`]) and must be freed with it
//! ([`free`], which every buffer a pool lets go of goes through).

use std::alloc::Layout;
use std::mem::ManuallyDrop;
use std::ops::Deref;

/// A buffer of `cap` bytes (a non-zero multiple of `align`, a power of two above 1) allocated
/// with alignment `align`, as a `Vec<u8>` carrier (see [`free`]); zeroed if `zeroed`, and then
/// its first `min(len, cap)` bytes count as initialized (its length), else empty.
///
/// # Errors
/// `Err(None)` if no layout has that size and alignment (above `isize::MAX`), or `cap` is not
/// a non-zero multiple of `align`; `Err(Some(layout))` if the allocator failed.
pub(crate) fn alloc_aligned(
    cap: usize,
    align: usize,
    zeroed: bool,
    len: usize,
) -> Result<Vec<u8>, Option<Layout>> {
    let layout = match Layout::from_size_align(cap, align) {
        Ok(l) if cap > 0 && cap % align == 0 => l,
        _ => return Err(None),
    };
    // SAFETY: `layout` has a non-zero size (checked above).
    let p = unsafe {
        if zeroed {
            std::alloc::alloc_zeroed(layout)
        } else {
            std::alloc::alloc(layout)
        }
    };
    if p.is_null() {
        return Err(Some(layout));
    }
    let len = if zeroed { len.min(cap) } else { 0 };
    // SAFETY: `p` is a live allocation of `cap` bytes from the global allocator whose first
    // `len` bytes are initialized (zeroed) when `len > 0`. Its alignment is `align`, not 1:
    // this `Vec` is only a carrier, never freed or grown as a `Vec` ([`free`]).
    Ok(unsafe { Vec::from_raw_parts(p, len, cap) })
}

/// Frees `v`, a buffer of a pool whose allocations have alignment `align`: every buffer a pool
/// lets go of goes through here (or [`free_released`](crate::sys::trim::free_released), which
/// ends here).
///
/// # The buffers of an aligned pool
///
/// An [`AlignedPool`](crate::AlignedPool)'s buffers are allocated with its alignment
/// (`Layout::from_size_align(capacity, align)`), so that each starts aligned and its whole
/// capacity is usable, with no window to compute on a get. The machinery still moves them as
/// `Vec<u8>` (capacity and pointer, length 0 while retained), but such a `Vec` is never left
/// to free or grow itself: `Vec<u8>` would free it with alignment 1. Only the crate holds
/// them: an [`AlignedBuf`](crate::AlignedBuf) cannot grow, a shared view of one is never made
/// writable again as a `Vec` (`PooledBytes::try_into_mut`), and every place the crate
/// frees a buffer calls this function with the pool's alignment, which a buffer that outlives
/// its pool finds in its key (`base/key.rs`). `tests/aligned_ways_back.rs` takes each of those
/// ways under Miri, which checks every free's layout.
pub(crate) fn free(v: Vec<u8>, align: usize) {
    if align <= 1 {
        drop(v);
        return;
    }
    let v = std::mem::ManuallyDrop::new(v);
    debug_assert!(v.capacity() > 0 && v.capacity() % align == 0);
    // SAFETY: a buffer of a pool with alignment `align > 1` was allocated by `alloc_aligned`
    // with `Layout::from_size_align(capacity, align)` (checked there; the capacity never
    // changes: such a buffer is never grown or shrunk, see above), and `v`, which is never
    // dropped, was its only owner.
    unsafe {
        std::alloc::dealloc(
            v.as_ptr().cast_mut(),
            std::alloc::Layout::from_size_align_unchecked(v.capacity(), align),
        );
    }
}

/// A pool's buffer held where code that may unwind runs before the buffer reaches its handle
/// (a slow get's result while its deferred work wakes a budget's waiters, whose wakers are
/// the user's, or publishes metrics to the user's recorder): dropped, by a panic say, it frees
/// itself with the pool's alignment, which a bare `Vec<u8>` carrier would not ([`free`]).
#[derive(Debug)]
pub(crate) struct Owned {
    v: ManuallyDrop<Vec<u8>>,
    align: usize,
}

impl Owned {
    /// `v`, a buffer of a pool with alignment `align`.
    pub(crate) fn new(v: Vec<u8>, align: usize) -> Owned {
        Owned {
            v: ManuallyDrop::new(v),
            align,
        }
    }

    /// The carrier, for the buffer's handle (which frees it right: `PooledBuf`'s return).
    pub(crate) fn into_vec(self) -> Vec<u8> {
        let mut this = ManuallyDrop::new(self);
        // SAFETY: `this` is never dropped, so `v` is taken only here.
        unsafe { ManuallyDrop::take(&mut this.v) }
    }
}

impl Deref for Owned {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.v
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once, and `into_vec` (the only other taker) skips it.
        free(unsafe { ManuallyDrop::take(&mut self.v) }, self.align);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Aligned buffers start aligned, have the capacity asked, are zeroed when asked, and go
    /// back with the layout they came with (Miri checks it); impossible sizes are errors.
    #[test]
    fn aligned_buffers_round_trip() {
        for align in [2, 16, 4096, 1 << 16] {
            for cap in [align, 3 * align] {
                for zeroed in [false, true] {
                    let v = alloc_aligned(cap, align, zeroed, cap + 1).unwrap();
                    assert_eq!(v.as_ptr() as usize % align, 0);
                    assert_eq!(v.capacity(), cap);
                    if zeroed {
                        assert_eq!(v.len(), cap);
                        assert!(v == vec![0; cap]);
                    } else {
                        assert!(v.is_empty());
                    }
                    free(v, align);
                }
            }
        }
        assert_eq!(alloc_aligned(0, 16, false, 0).unwrap_err(), None);
        assert_eq!(alloc_aligned(24, 16, false, 0).unwrap_err(), None);
        assert_eq!(
            alloc_aligned(isize::MAX as usize + 1, 16, false, 0).unwrap_err(),
            None
        );
        free(Vec::with_capacity(10), 1);
    }

    /// An `Owned` buffer dropped (as by a panic) frees itself with its alignment; taken out,
    /// it is the same buffer.
    #[test]
    fn owned_buffers_free_themselves_with_their_alignment() {
        let v = alloc_aligned(8192, 4096, false, 0).unwrap();
        let p = v.as_ptr();
        let owned = Owned::new(v, 4096);
        assert_eq!((owned.capacity(), owned.as_ptr()), (8192, p));
        let v = owned.into_vec();
        assert_eq!(v.as_ptr(), p);
        drop(Owned::new(v, 4096));
        let unwound = std::panic::catch_unwind(|| {
            let _held = Owned::new(alloc_aligned(4096, 4096, true, 10).unwrap(), 4096);
            panic!("a waker unwinds");
        });
        assert!(unwound.is_err());
        drop(Owned::new(Vec::with_capacity(100), 1));
    }
}
