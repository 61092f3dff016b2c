//! Stack storage that thread caches gave up, kept for the next cache that needs an array of
//! the same length.
//!
//! A tier's stack is an array of slots, taken when the tier is first used in a thread and
//! given up when the tier goes idle, the cache is trimmed, or the thread exits (`tier_ops.rs`).
//! Before this store, given up meant freed, and a program that starts threads for batches
//! of work (`std::thread::scope`, a runtime's blocking pool) paid one small allocation per
//! tier each new thread touched: the comparison report's `mixed` workload, two fresh threads
//! per sample over about 30 tiers each, made 0.5 allocations per packet that way, beside the
//! thread start-up itself. Now an exiting thread's arrays serve the next thread.
//!
//! Apart from the parked caches (`reclaim.rs`), which recycle a cache's block: an array here
//! serves any tier whose stack has its length, and most tiers' stacks have one length (64
//! slots). A parked cache that kept its own arrays would serve only the tiers its exited
//! thread used, and a new thread that uses others (the `mixed` workload's two threads each
//! run a different stream) would allocate a stack for each of them
//! (`docs/benchmarks-history.md`, "One recycler of stack storage, tried").
//!
//! Bounded: at most [`MAX_SPARE_SLOTS`] slots (64 KiB) wait here. And decayed by the pool's
//! one idle rule (`engine/idle.rs`): at each pool tick the arrays that stayed here through
//! the whole interval since the last tick are freed (`decay`). `trim` frees those here at
//! the time (caches trimmed later, at their owners' next operation, give theirs
//! afterwards), and once the pool is closed nothing is kept.

use super::stack::{alloc_slots, free_slots, Slot};
use crate::base::sync::{lock, Mutex, Ordering::Relaxed};
use crate::engine::idle::IdleStack;

/// The most slots kept spare, per pool: 8,192 (64 KiB of pointers), the arrays of about
/// four threads that used 30 tiers each.
pub(crate) const MAX_SPARE_SLOTS: usize = 8192;

/// One spare array: `cap` slots from [`alloc_slots`].
struct Array {
    slots: *mut Slot,
    cap: u32,
}

// SAFETY: an `Array` owns its allocation exclusively (it left its cache's stack, and only the
// store refers to it), and a slot array may be freed or used from any thread.
unsafe impl Send for Array {}

#[derive(Default)]
struct Spares {
    arrays: IdleStack<Array>,
    /// Sum of the arrays' `cap`.
    slots: usize,
    /// Set when the pool closes: nothing is kept from then on.
    closed: bool,
}

/// Spare stack storage of one pool's thread caches (module docs).
pub(crate) struct SpareSlots {
    spares: Mutex<Spares>,
}

impl std::fmt::Debug for SpareSlots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = lock(&self.spares);
        f.debug_struct("SpareSlots")
            .field("arrays", &s.arrays.len())
            .field("slots", &s.slots)
            .finish()
    }
}

impl SpareSlots {
    /// An empty store.
    pub(crate) fn new() -> Self {
        SpareSlots {
            // Room for the arrays of a few threads up front: taking and giving allocate
            // nothing once the pool runs (`tests/alloc_free.rs` counts every allocation).
            spares: Mutex::new(Spares {
                arrays: IdleStack::with_capacity(64),
                ..Spares::default()
            }),
        }
    }

    /// An array of `cap` null slots: the newest spare one of that length, or a fresh one.
    pub(crate) fn take(&self, cap: u32) -> *mut Slot {
        let spare = {
            let mut s = lock(&self.spares);
            let found = s.arrays.take_newest(|a| a.cap == cap);
            found.map(|a| {
                s.slots -= cap as usize;
                a.slots
            })
        };
        spare.unwrap_or_else(|| alloc_slots(cap))
    }

    /// Takes back `slots`, an array of `cap` slots, or frees it if the store is full or the
    /// pool closed.
    ///
    /// # Safety
    /// `slots` came from [`take`](Self::take)`(cap)` of a store of the same pool (or from
    /// [`alloc_slots`]`(cap)`), and nothing uses it afterwards: the caller clears every
    /// pointer to it first.
    pub(crate) unsafe fn give(&self, slots: *mut Slot, cap: u32) {
        for i in 0..cap as usize {
            // SAFETY: `i < cap`: a slot of the array (the caller's contract). Nulled so that
            // no stale pointer to a buffer that left the stack outlives it (slots are written
            // before they are read in any case).
            unsafe { &*slots.add(i) }.store(std::ptr::null_mut(), Relaxed);
        }
        let mut s = lock(&self.spares);
        if s.closed || s.slots + cap as usize > MAX_SPARE_SLOTS {
            drop(s);
            // SAFETY: an array of `cap` slots from `alloc_slots` that nothing uses any more
            // (the caller's contract), not kept here.
            unsafe { free_slots(slots, cap) };
            return;
        }
        s.slots += cap as usize;
        s.arrays.push(Array { slots, cap });
    }

    /// Frees every array and keeps none from now on (the pool closed).
    pub(crate) fn close(&self) {
        lock(&self.spares).closed = true;
        self.decay(true);
    }

    /// Frees the arrays that stayed here since the previous call (the low-water mark) and
    /// starts a new interval; with `all`, every array (`trim`).
    pub(crate) fn decay(&self, all: bool) {
        // Freed under the lock, in place: decay runs at a pool's tick, inside operations
        // that must not allocate (collecting the arrays first did, at every tick that freed
        // some: `tests/alloc_free.rs` under Miri, whose clock passes intervals quickly).
        let mut s = lock(&self.spares);
        let mut freed = 0;
        s.arrays.decay(all, false, |a| {
            // SAFETY: a kept array of `a.cap` slots, leaving the store: nothing else has it.
            unsafe { free_slots(a.slots, a.cap) };
            freed += a.cap as usize;
        });
        s.slots -= freed;
    }
}

impl Drop for SpareSlots {
    fn drop(&mut self) {
        self.decay(true);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// `SpareSlots::give` for the test's arrays: each from `take` or `alloc_slots` with that
    /// length, given once, and not used after unless taken again.
    fn give(s: &SpareSlots, slots: *mut Slot, cap: u32) {
        // SAFETY: as above.
        unsafe { s.give(slots, cap) }
    }

    #[test]
    fn arrays_are_reused_by_length_bounded_and_decayed() {
        let s = SpareSlots::new();
        let a = s.take(64);
        let b = s.take(8);
        // SAFETY: `a` has 64 slots.
        unsafe { &*a.add(63) }.store(std::ptr::NonNull::dangling().as_ptr(), Relaxed);
        give(&s, a, 64);
        give(&s, b, 8);
        assert_eq!(s.take(64), a, "the same array back");
        // SAFETY: `a` has 64 slots, taken again.
        let last = unsafe { &*a.add(63) }.load(Relaxed);
        assert!(last.is_null(), "given back nulled");
        assert_eq!(s.take(8), b);
        let fresh = s.take(8);
        assert_ne!(fresh, b, "none spare: a fresh one");
        give(&s, a, 64);
        give(&s, b, 8);
        give(&s, fresh, 8);
        // Full: an array that does not fit is freed, not kept.
        let big = alloc_slots(MAX_SPARE_SLOTS as u32);
        give(&s, big, MAX_SPARE_SLOTS as u32);
        assert_eq!(lock(&s.spares).slots, 80);
        // A decay starts the interval; the next frees what stayed through it, but not what
        // was taken meanwhile.
        s.decay(false);
        assert_eq!(
            lock(&s.spares).arrays.len(),
            3,
            "the first decay frees nothing"
        );
        let again = s.take(64);
        s.decay(false);
        assert_eq!(
            lock(&s.spares).arrays.len(),
            0,
            "two arrays stayed a whole interval"
        );
        give(&s, again, 64);
        s.decay(true);
        assert_eq!(lock(&s.spares).slots, 0);
        // Closed: nothing is kept.
        let kept = s.take(8);
        s.close();
        give(&s, kept, 8);
        assert_eq!(lock(&s.spares).arrays.len(), 0);
    }
}
