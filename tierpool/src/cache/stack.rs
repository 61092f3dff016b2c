//! A tier's stack: raw pointers to buffers of exactly the tier's size, in an array that grows
//! down from its end (as jemalloc's cache bins do).
//!
//! ```text
//!  Tier (64 bytes, one cache line)
//!  ┌──────┬─────┬──────┬──────┬───────┬──────────────┬──────────┬─────────┐
//!  │ head │ low │ full │ size │ end  │ returns_left │ refilled │ flushed │
//!  └──────┴─────┴──────┴──────┴───────┴──────────────┴──────────┴─────────┘
//!  slots: [*mut u8; cap]
//!
//!   slots        full            head               low              end = slots + cap
//!   │  ...       │   ...         │ newest ... ...   │ idle since decay │
//!   └────────────┴───────────────┴──────────────────┴──────────────────┘
//!                                 ◄─── len = end - head ────────────────►
//! ```
//!
//! A get pops the pointer at `head` (if `head < low`; at `low`, unless the stack is empty, it
//! moves `low` first) and rebuilds the `Vec` with the tier's size as capacity; a return checks
//! that the buffer's capacity is the tier's size and, if `head > full`, pushes its pointer
//! below `head`. Buffers of any other capacity (foreign, grown) never enter a stack: the slow
//! path files them in the depot.
//!
//! `low` marks the lowest length since the last decay (the buffers beyond it stayed idle for
//! the whole interval, and decay releases them). The fast path compares `head` with `low`
//! before each pop anyway (`low >= head` always); only when they meet, which is rare, does it
//! tell an empty stack (`head == end`) from a new low and move `low`. `full` is `end - limit`
//! (`end` when returns must take the slow path: wiping pools, a dead cache).
//!
//! Every field is an atomic accessed with `Relaxed` loads and stores (plain `mov`s on x86-64,
//! never a locked instruction), written only by the cache's current [`Owner`], so that
//! `stats()` and the idle check on other threads may read them.

use std::mem::{size_of, ManuallyDrop};

use super::counters::{bump, publish};
use super::{Cache, Owner};
use crate::key::TIER_STRIDE;
use crate::sync::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use Ordering::{Acquire, Relaxed, Release};

/// Returns between two housekeeping checks (clock, decay), per tier. A check costs about 230
/// instructions (most of them reading the clock): 0.9 per return at 256, 3.6 at 64
/// (`examples/hot_loop.rs` under callgrind). At one return per millisecond a new decay
/// interval is still noticed within a quarter of the default 1 s.
pub(crate) const CHECK_EVERY: u64 = 256;

/// The most buffers a thread cache keeps per tier; a tier of size `s` keeps at most
/// `min(MAX_LOCAL_PER_TIER, cache_bytes / s)`, and none if that is 0.
pub(crate) const MAX_LOCAL_PER_TIER: usize = 64;

/// A slot of a stack: a buffer's pointer.
pub(super) type Slot = AtomicPtr<u8>;

/// The hot part of one tier of a thread cache: one cache line.
///
/// Invariants (kept by [`Owner`]), with `slots = end - cap` and `len = end - head`: all four
/// pointers are null while the tier's storage is not allocated; otherwise
/// `slots <= full <= head <= low <= end`, `full` is `end - limit` or `end`, `limit <= cap`, and
/// the slots from `head` to `end` own buffers of capacity exactly `size`.
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct Tier {
    pub(super) head: AtomicPtr<Slot>,
    pub(super) low: AtomicPtr<Slot>,
    pub(super) full: AtomicPtr<Slot>,
    pub(super) size: usize,
    /// One past the last slot (the stack's bottom): `slots + cap`, null while unallocated.
    pub(super) end: AtomicPtr<Slot>,
    /// Returns onto the stack (fast or slow) left until the next housekeeping: counts down
    /// from `CHECK_EVERY` to 0, when the owner folds `CHECK_EVERY` into `pushes_folded` and
    /// starts over. So the fast path's one counter is also its countdown, and the test for
    /// "housekeeping due" is the decrement's own zero flag.
    pub(super) returns_left: AtomicU64,
    /// Buffers moved onto the stack from the depot.
    pub(super) refilled: AtomicU64,
    /// Buffers moved from the stack to the depot.
    pub(super) flushed: AtomicU64,
}

impl Tier {
    pub(super) fn new(size: usize) -> Self {
        let null = || AtomicPtr::new(std::ptr::null_mut());
        Tier {
            head: null(),
            low: null(),
            full: null(),
            size,
            end: null(),
            returns_left: AtomicU64::new(CHECK_EVERY),
            refilled: AtomicU64::new(0),
            flushed: AtomicU64::new(0),
        }
    }

    /// The address of slot `i` of a stack of `cap` slots (`i <= cap`, slots allocated).
    pub(super) fn at(&self, cap: usize, i: usize) -> *mut Slot {
        self.end.load(Relaxed).wrapping_sub(cap).wrapping_add(i)
    }
}

/// The cold part of a tier: its limits, counters of slow paths, decay bookkeeping.
#[derive(Debug, Default)]
pub(crate) struct TierCold {
    /// Capacity of `slots` once allocated: the most `limit` may be.
    pub(super) cap: u32,
    /// The tier's reservation, in buffers (`<= cap`).
    pub(super) limit: AtomicU32,
    /// Buffers released from the stack to the allocator (decay, trim, close, no room).
    pub(super) released: AtomicU64,
    /// Returns onto the stack counted before the current countdown (`counters.rs`).
    pub(super) pushes_folded: AtomicU64,
    /// Returns plus refills at the last decay: a tier with an empty stack and neither since
    /// gives its reservation back.
    pub(super) entered_seen: AtomicU64,
    pub(super) misses: AtomicU64,
    /// Hits served straight from the depot (odd capacities, bypassed tiers).
    pub(super) direct_hits: AtomicU64,
    /// Returns that did not land on the stack.
    pub(super) other_returns: AtomicU64,
    /// Buffers released to the allocator by this cache (including `released`).
    pub(super) discarded: AtomicU64,
}

impl TierCold {
    pub(super) fn new(cap: u32) -> Self {
        TierCold {
            cap,
            ..TierCold::default()
        }
    }

    /// Length of `tier`'s stack, from its pointers (0 when unallocated). Clamped to `cap`, so
    /// that a read racing with the owner never yields an absurd figure. `Acquire`: see
    /// `counters.rs`.
    pub(super) fn len(&self, tier: &Tier) -> usize {
        let end = tier.end.load(Acquire);
        if end.is_null() {
            return 0;
        }
        let head = tier.head.load(Acquire);
        let len = (end as usize).wrapping_sub(head as usize) / size_of::<Slot>();
        len.min(self.cap as usize)
    }
}

/// Puts `v` on `tier`'s stack, in the slot below `head`, and moves `head` there (`Release`:
/// see `counters.rs`). The one store of a buffer onto a stack, for the fast and slow paths.
///
/// # Safety
/// Only the owner calls it; `head` is the tier's current top, and the slot below it is in the
/// allocated array and free (the stack is below its limit).
#[inline(always)]
pub(super) unsafe fn place(tier: &Tier, head: *mut Slot, v: Vec<u8>) {
    let mut v = ManuallyDrop::new(v);
    let head = head.wrapping_sub(1);
    // SAFETY: the caller guarantees a free slot of the allocated array at `head`.
    unsafe { &*head }.store(v.as_mut_ptr(), Relaxed);
    tier.head.store(head, Release);
}

/// Counts a return onto `tier`'s stack; returns what is left of the countdown (0: housekeeping
/// is due, and the owner starts it over). `Release`: see `counters.rs`.
#[inline(always)]
pub(super) fn count_return(tier: &Tier) -> u64 {
    let left = tier.returns_left.load(Relaxed).wrapping_sub(1);
    tier.returns_left.store(left, Release);
    left
}

/// Frees every buffer on `tier`'s stack and the stack's storage (the cache is being dropped:
/// no owner is left).
pub(super) fn free_all(tier: &Tier, cold: &TierCold) {
    let end = tier.end.load(Relaxed);
    if end.is_null() {
        return;
    }
    let cap = cold.cap as usize;
    for i in cap - cold.len(tier)..cap {
        // SAFETY: `i < cap`: a slot of the allocated array.
        let p = unsafe { &*tier.at(cap, i) }.load(Relaxed);
        // SAFETY: slots from `head` to `end` own buffers of capacity exactly `size`, from
        // the global allocator; nothing else refers to them any more.
        drop(unsafe { Vec::from_raw_parts(p, 0, tier.size) });
    }
    free_slots(end.wrapping_sub(cap), cold.cap);
}

/// Allocates `cap` empty slots.
fn alloc_slots(cap: u32) -> *mut Slot {
    let slots: Box<[Slot]> = (0..cap)
        .map(|_| AtomicPtr::new(std::ptr::null_mut()))
        .collect();
    Box::into_raw(slots).cast::<Slot>()
}

/// Frees slots made by [`alloc_slots`]`(cap)`.
fn free_slots(slots: *mut Slot, cap: u32) {
    let slice = std::ptr::slice_from_raw_parts_mut(slots, cap as usize);
    // SAFETY: `slots` came from `alloc_slots(cap)` (`Box::into_raw` of a slice of `cap`
    // entries) and is freed once: callers reset or drop the field holding it.
    drop(unsafe { Box::from_raw(slice) });
}

/// Which counter of a tier an owner operation adds to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Count {
    /// A buffer handed out fresh from the allocator.
    Miss,
    /// A buffer handed out straight from the depot.
    DirectHit,
    /// A buffer handed back that did not land on the stack.
    OtherReturn,
    /// A buffer released to the allocator by this cache.
    Discarded,
}

impl Cache {
    /// Tier `t` and its cold part.
    pub(super) fn tier(&self, t: usize) -> (&Tier, &TierCold) {
        (&self.tiers[t], &self.head.cold[t])
    }
}

impl Owner<'_> {
    /// Buffers on tier `t`'s stack.
    pub(crate) fn len(&self, t: usize) -> usize {
        let (tier, cold) = self.cache.tier(t);
        cold.len(tier)
    }

    /// Tier `t`'s low-water mark since the last decay.
    pub(crate) fn low(&self, t: usize) -> usize {
        let tier = &self.cache.tiers[t];
        let end = tier.end.load(Relaxed) as usize;
        (end - tier.low.load(Relaxed) as usize) / size_of::<Slot>()
    }

    /// Starts a new decay interval for tier `t`: its low-water mark is its length now.
    pub(crate) fn reset_low(&self, t: usize) {
        let tier = &self.cache.tiers[t];
        tier.low.store(tier.head.load(Relaxed), Relaxed);
    }

    /// Allocates tier `t`'s slots if they are not yet (a limit was just set above 0).
    pub(super) fn ensure_storage(&self, t: usize) {
        let (tier, cold) = self.cache.tier(t);
        if tier.end.load(Relaxed).is_null() {
            let end = alloc_slots(cold.cap).wrapping_add(cold.cap as usize);
            // `Release`: a reader that sees the stack's top sees its end (`counters.rs`).
            tier.end.store(end, Release);
            tier.head.store(end, Release);
            tier.low.store(end, Relaxed);
        }
    }

    /// Points tier `t`'s `full` at `limit` buffers (0 when returns must take the slow path).
    pub(super) fn set_full(&self, t: usize, limit: usize) {
        let (tier, cold) = self.cache.tier(t);
        if !tier.end.load(Relaxed).is_null() {
            let cap = cold.cap as usize;
            tier.full.store(tier.at(cap, cap - limit), Relaxed);
        }
    }

    /// Frees tier `t`'s storage if it has no limit and holds nothing (decay of an idle tier,
    /// `trim`, close, thread exit): it was allocated while buffers came in, so it may sit above
    /// them in the heap and pin it (glibc trims only the top).
    pub(crate) fn free_storage(&self, t: usize) {
        let (tier, cold) = self.cache.tier(t);
        if cold.limit.load(Relaxed) != 0 || cold.len(tier) != 0 {
            return;
        }
        for p in [&tier.head, &tier.low, &tier.full] {
            // `Release`: a reader that sees the stack gone sees the counts of what left it.
            p.store(std::ptr::null_mut(), Release);
        }
        let end = tier.end.swap(std::ptr::null_mut(), Release);
        if !end.is_null() {
            free_slots(end.wrapping_sub(cold.cap as usize), cold.cap);
        }
    }

    /// Pops the newest buffer of tier `t`, if any (past the low-water mark too, which it
    /// moves).
    pub(crate) fn pop(&self, t: usize) -> Option<Vec<u8>> {
        let (tier, cold) = self.cache.tier(t);
        if cold.len(tier) == 0 {
            return None;
        }
        let head = tier.head.load(Relaxed);
        // SAFETY: the stack is not empty: `head < end` is a filled slot.
        let p = unsafe { &*head }.load(Relaxed);
        let head = head.wrapping_add(1);
        tier.head.store(head, Release);
        if head > tier.low.load(Relaxed) {
            tier.low.store(head, Relaxed);
        }
        // SAFETY: the slot owned a buffer of capacity exactly `size` from the global
        // allocator, now removed from the stack, so this `Vec` is its only owner.
        Some(unsafe { Vec::from_raw_parts(p, 0, tier.size) })
    }

    /// Pushes `v` on tier `t`'s stack if its capacity is exactly the tier's size and the
    /// stack is below its limit; counts it as a return, or with `from_depot` as a refill.
    pub(crate) fn push(&self, t: usize, v: Vec<u8>, from_depot: bool) -> Result<(), Vec<u8>> {
        let (tier, cold) = self.cache.tier(t);
        if v.capacity() != tier.size || cold.len(tier) >= cold.limit.load(Relaxed) as usize {
            return Err(v);
        }
        // SAFETY: `len < limit <= cap` (so `limit > 0` and the slots are allocated): the slot
        // below `head` is a free slot of the array.
        unsafe { place(tier, tier.head.load(Relaxed), v) };
        if from_depot {
            publish(&tier.refilled, 1);
        } else {
            count_return(tier);
            super::counters::fold(tier, cold);
        }
        Ok(())
    }

    /// Removes the `n` oldest buffers of tier `t` (at most all of them) and hands each to
    /// `f`, oldest first; counts them as moved to the depot, or with `release` as released
    /// (and discarded). Returns how many.
    pub(crate) fn drain_oldest(
        &self,
        t: usize,
        n: usize,
        release: bool,
        mut f: impl FnMut(Vec<u8>),
    ) -> usize {
        let (tier, cold) = self.cache.tier(t);
        let len = cold.len(tier);
        let n = n.min(len);
        if n == 0 {
            return 0;
        }
        let cap = cold.cap as usize;
        // Take the pointers out and fix the stack up first, then hand the buffers over: if
        // `f` unwinds, the rest leak instead of being owned twice.
        let mut out = [std::ptr::null_mut::<u8>(); MAX_LOCAL_PER_TIER];
        for (k, o) in out[..n].iter_mut().enumerate() {
            // SAFETY: `cap - 1 - k >= cap - n >= cap - len`: a filled slot (the oldest is last).
            *o = unsafe { &*tier.at(cap, cap - 1 - k) }.load(Relaxed);
        }
        // Shift the rest toward the end, newest last moved.
        for i in (cap - len..cap - n).rev() {
            // SAFETY: `i` and `i + n` are below `cap`: slots of the allocated array.
            let p = unsafe { &*tier.at(cap, i) }.load(Relaxed);
            // SAFETY: as above.
            unsafe { &*tier.at(cap, i + n) }.store(p, Relaxed);
        }
        // Count first, then move `head`: a reader that sees the shorter stack sees why.
        if release {
            publish(&cold.released, n as u64);
            bump(&cold.discarded, n as u64);
        } else {
            publish(&tier.flushed, n as u64);
        }
        let head = tier.at(cap, cap - len + n);
        tier.head.store(head, Release);
        // `low` counts the bottom buffers no pop reached since the last decay; the `n` taken
        // from the bottom were among them, and did not stay idle. (Leaving the mark where it
        // was made decay release the circulating buffers of a hand-off's consumer, whose stack
        // goes from half full to full and back, every interval.)
        let untouched = (self.low(t)).saturating_sub(n).min(len - n);
        tier.low.store(tier.at(cap, cap - untouched), Relaxed);
        for &p in &out[..n] {
            // SAFETY: the slot owned a buffer of capacity exactly `size` from the global
            // allocator; it has left the stack, so this `Vec` is its only owner.
            f(unsafe { Vec::from_raw_parts(p, 0, tier.size) });
        }
        n
    }

    /// Adds `n` to one of tier `t`'s slow-path counters.
    pub(crate) fn count(&self, t: usize, what: Count, n: u64) {
        let cold = &self.cache.head.cold[t];
        bump(
            match what {
                Count::Miss => &cold.misses,
                Count::DirectHit => &cold.direct_hits,
                Count::OtherReturn => &cold.other_returns,
                Count::Discarded => &cold.discarded,
            },
            n,
        );
    }

    /// True if nothing entered tier `t`'s stack since the last call, neither a return nor a
    /// refill (and records the current counts). A thread that only gets (the producer of a
    /// hand-off) never returns, but refills: with returns alone it looked idle at every decay,
    /// lost its storage and allocated it again (found by Miri, where intervals pass quickly).
    pub(crate) fn idle_since_last_look(&self, t: usize) -> bool {
        let (tier, cold) = self.cache.tier(t);
        let entered = super::counters::pushes(tier, cold).wrapping_add(tier.refilled.load(Relaxed));
        let idle = cold.entered_seen.load(Relaxed) == entered;
        cold.entered_seen.store(entered, Relaxed);
        idle
    }

    /// Folds the finished return countdown of the tier with hint `hint` (the fast path
    /// reported housekeeping due for it).
    pub(crate) fn fold_countdown(&self, hint: u32) {
        let off = hint as usize;
        if off % TIER_STRIDE == 0 && off / TIER_STRIDE < self.tiers() {
            let (tier, cold) = self.cache.tier(off / TIER_STRIDE);
            super::counters::fold(tier, cold);
        }
    }

    /// Counts a get above the largest tier.
    pub(crate) fn count_oversize(&self) {
        bump(&self.cache.head.oversize, 1);
    }

    /// Counts a returned buffer that fits no tier.
    pub(crate) fn count_untiered(&self) {
        bump(&self.cache.head.untiered_returned, 1);
    }
}
