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
//! never a locked instruction), written only by the cache's current owner (`owner.rs`), so that
//! `stats()` and the idle check on other threads may read them.

use std::mem::{size_of, ManuallyDrop};

use crate::base::sync::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use Ordering::{Acquire, Relaxed, Release};

/// Returns between two housekeeping checks (clock, decay), per tier: a check reads the clock,
/// which costs a few hundred instructions, so it is spread over many returns. The most: a
/// thread whose returns are far apart
/// in time checks after fewer (`Owner::pace`), so that it notices a new decay interval
/// within an eighth of one.
pub(crate) const CHECK_EVERY: u64 = 256;

/// The fewest returns to a tier between two housekeeping checks (`Owner::pace`), and the
/// first countdown of a tier new to its cache: a thread starts by looking often, and looks
/// less often as it shows that its returns come close together.
pub(crate) const MIN_CHECK_EVERY: u64 = 8;

/// The most buffers a thread cache keeps per tier; a tier of size `s` keeps at most
/// `min(MAX_LOCAL_PER_TIER, cache_bytes / s)`, and none if that is 0.
pub(crate) const MAX_LOCAL_PER_TIER: usize = 64;

/// A slot of a stack: a buffer's pointer.
pub(in crate::engine) type Slot = AtomicPtr<u8>;

/// The hot part of one tier of a thread cache: one cache line.
///
/// Invariants (kept by the cache's owner, `owner.rs`), with `slots = end - cap` and `len = end - head`: all four
/// pointers are null while the tier's storage is not allocated; otherwise
/// `slots <= full <= head <= low <= end`, `full` is `end - limit` or `end`, `limit <= cap`, and
/// the slots from `head` to `end` own buffers of capacity exactly `size`.
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct Tier {
    pub(in crate::engine) head: AtomicPtr<Slot>,
    pub(in crate::engine) low: AtomicPtr<Slot>,
    pub(in crate::engine) full: AtomicPtr<Slot>,
    pub(in crate::engine) size: usize,
    /// One past the last slot (the stack's bottom): `slots + cap`, null while unallocated.
    pub(in crate::engine) end: AtomicPtr<Slot>,
    /// Returns onto the stack (fast or slow) left until the next housekeeping: counts down
    /// to 0 from a length between `MIN_CHECK_EVERY` and `CHECK_EVERY` (the first is
    /// `MIN_CHECK_EVERY`; each later one the cache's `check_every`), when the owner adds that
    /// length to `pushes_folded` and starts the next ([`fold`]). So the fast path's one
    /// counter is also its countdown, and the test for "housekeeping due" is the decrement's
    /// own zero flag.
    pub(in crate::engine) returns_left: AtomicU64,
    /// Buffers moved onto the stack from the depot.
    pub(in crate::engine) refilled: AtomicU64,
    /// Buffers moved from the stack to the depot.
    pub(in crate::engine) flushed: AtomicU64,
}

impl Tier {
    pub(in crate::engine) fn new(size: usize) -> Self {
        let null = || AtomicPtr::new(std::ptr::null_mut());
        Tier {
            head: null(),
            low: null(),
            full: null(),
            size,
            end: null(),
            returns_left: AtomicU64::new(MIN_CHECK_EVERY),
            refilled: AtomicU64::new(0),
            flushed: AtomicU64::new(0),
        }
    }

    /// The address of slot `i` of a stack of `cap` slots (`i <= cap`, slots allocated).
    pub(in crate::engine) fn at(&self, cap: usize, i: usize) -> *mut Slot {
        self.end.load(Relaxed).wrapping_sub(cap).wrapping_add(i)
    }
}

/// The cold part of a tier: its limits, counters of slow paths, decay bookkeeping.
#[derive(Debug, Default)]
pub(crate) struct TierCold {
    /// Capacity of `slots` once allocated: the most `limit` may be.
    pub(in crate::engine) cap: u32,
    /// The tier's booking, in buffers (`<= cap`).
    pub(in crate::engine) limit: AtomicU32,
    /// Buffers released from the stack to the allocator (decay, trim, close, no room).
    pub(in crate::engine) released: AtomicU64,
    /// Returns onto the stack counted before the current countdown (`counters.rs`).
    pub(in crate::engine) pushes_folded: AtomicU64,
    /// Returns plus refills at the last decay: a tier with an empty stack and neither since
    /// gives its booking back.
    pub(in crate::engine) entered_seen: AtomicU64,
    pub(in crate::engine) misses: AtomicU64,
    /// Hits served straight from the depot (odd capacities, bypassed tiers).
    pub(in crate::engine) direct_hits: AtomicU64,
    /// Returns that did not land on the stack.
    pub(in crate::engine) other_returns: AtomicU64,
    /// Buffers released to the allocator by this cache (including `released`).
    pub(in crate::engine) discarded: AtomicU64,
    /// Loans of a larger tier's buffer to gets of this tier this interval
    /// (`policy/retrieve.rs`); cleared by decay. Only the owner reads or writes it.
    pub(in crate::engine) loans: AtomicU32,
    /// Buffers the tier's next refill asks the depot for (slow start, `policy/mod.rs`): 0 (read
    /// as 1) for a tier new to this cache or that gave up its storage, doubled by each refill
    /// that moved buffers, up to a refill's batch (half the stack; the whole of a stack of
    /// one or two), halved by decay when buffers stayed idle. Only the owner reads or writes
    /// it.
    pub(in crate::engine) fill: AtomicU32,
}

impl TierCold {
    pub(in crate::engine) fn new(cap: u32) -> Self {
        TierCold {
            cap,
            // The first countdown is `MIN_CHECK_EVERY` returns (`Tier::new`): [`pushes`]
            // counts `CHECK_EVERY - returns_left` on top of this, so it starts at 0.
            pushes_folded: AtomicU64::new(MIN_CHECK_EVERY.wrapping_sub(CHECK_EVERY)),
            ..TierCold::default()
        }
    }

    /// Length of `tier`'s stack, from its pointers (0 when unallocated). A read racing with
    /// the owner may see `end` and `head` from different moments (storage being allocated
    /// publishes `end` before `head`; storage being freed nulls `head` before `end`): a `head`
    /// outside the array then reads as an empty stack, not as a full one. `Acquire`: see
    /// `counters.rs`.
    pub(in crate::engine) fn len(&self, tier: &Tier) -> usize {
        let end = tier.end.load(Acquire);
        if end.is_null() {
            return 0;
        }
        let head = tier.head.load(Acquire);
        let len = (end as usize).wrapping_sub(head as usize) / size_of::<Slot>();
        if len > self.cap as usize {
            0 // `head` is not within this array (null, or another allocation's)
        } else {
            len
        }
    }
}

/// Puts `v` on `tier`'s stack, in the slot below `head`, and moves `head` there (`Release`:
/// see `counters.rs`). The one store of a buffer onto a stack, for the fast and slow paths.
///
/// # Safety
/// Only the owner calls it; `head` is the tier's current top, and the slot below it is in the
/// allocated array and free (the stack is below its limit).
#[inline(always)]
pub(in crate::engine) unsafe fn place(tier: &Tier, head: *mut Slot, v: Vec<u8>) {
    let mut v = ManuallyDrop::new(v);
    let head = head.wrapping_sub(1);
    // SAFETY: the caller guarantees a free slot of the allocated array at `head`.
    unsafe { &*head }.store(v.as_mut_ptr(), Relaxed);
    tier.head.store(head, Release);
}

/// Counts a return onto `tier`'s stack; returns what is left of the countdown (0: housekeeping
/// is due, and the owner starts it over). `Release`: see `counters.rs`.
#[inline(always)]
pub(in crate::engine) fn count_return(tier: &Tier) -> u64 {
    let left = tier.returns_left.load(Relaxed).wrapping_sub(1);
    tier.returns_left.store(left, Release);
    left
}

/// Frees every buffer on `tier`'s stack (the cache is being dropped: no owner is left) with
/// the pool's alignment `align`, and returns the stack's storage, if it has any: its slots
/// and their number, for the caller to give to the pool's spares.
pub(in crate::engine) fn free_all(
    tier: &Tier,
    cold: &TierCold,
    align: usize,
) -> Option<(*mut Slot, u32)> {
    let end = tier.end.load(Relaxed);
    if end.is_null() {
        return None;
    }
    let cap = cold.cap as usize;
    for i in cap - cold.len(tier)..cap {
        // SAFETY: `i < cap`: a slot of the allocated array.
        let p = unsafe { &*tier.at(cap, i) }.load(Relaxed);
        // SAFETY: slots from `head` to `end` own buffers of capacity exactly `size`, from
        // the global allocator; nothing else refers to them any more.
        crate::sys::trim::free_released(unsafe { Vec::from_raw_parts(p, 0, tier.size) }, align);
    }
    Some((end.wrapping_sub(cap), cold.cap))
}

/// Allocates `cap` empty slots.
pub(in crate::engine) fn alloc_slots(cap: u32) -> *mut Slot {
    let slots: Box<[Slot]> = (0..cap)
        .map(|_| AtomicPtr::new(std::ptr::null_mut()))
        .collect();
    Box::into_raw(slots).cast::<Slot>()
}

/// Frees slots made by [`alloc_slots`]`(cap)`.
///
/// # Safety
/// `slots` came from [`alloc_slots`]`(cap)`, is freed once, and nothing uses it afterwards.
pub(in crate::engine) unsafe fn free_slots(slots: *mut Slot, cap: u32) {
    let slice = std::ptr::slice_from_raw_parts_mut(slots, cap as usize);
    // SAFETY: `Box::into_raw` of a slice of `cap` entries (the caller's contract), freed once.
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

/// Adds `by` to a counter only the owner writes, publishing it (`Release`) for `stats()`.
pub(in crate::engine) fn publish(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(by), Release);
}

/// Returns pushed onto `tier`'s stack so far. Reads the total before the countdown (see
/// [`fold`]), both `Acquire`. Read on another thread across a fold, the count can come out a
/// countdown's length short, and early in a tier's life below zero: that reading is 0, never
/// a wrapped count (the owner's own readings are exact).
pub(in crate::engine) fn pushes(tier: &Tier, cold: &TierCold) -> u64 {
    let folded = cold.pushes_folded.load(Acquire);
    let left = tier.returns_left.load(Acquire);
    let n = folded.wrapping_add(CHECK_EVERY.wrapping_sub(left));
    (n as i64).max(0) as u64
}

/// Moves a finished countdown into `pushes_folded` and starts the next one at `every`
/// (`1..=CHECK_EVERY`). [`pushes`] counts `CHECK_EVERY - returns_left` on top of the folded
/// total, so a countdown started at `every` adds `every` to the total: the count stays
/// exact whatever each countdown's length. A reader on another thread that loads the total
/// before this fold and the countdown after it reads up to `every` too few, which can be
/// below zero early in a tier's life (its total starts at `MIN_CHECK_EVERY - CHECK_EVERY`):
/// [`pushes`] reads that as 0.
pub(in crate::engine) fn fold(tier: &Tier, cold: &TierCold, every: u64) {
    debug_assert!((1..=CHECK_EVERY).contains(&every));
    if tier.returns_left.load(Relaxed) == 0 {
        // Reset, then add: a reader that sees the new total sees the reset too, so it never
        // counts these returns twice (`counters.rs`).
        tier.returns_left.store(every, Release);
        publish(&cold.pushes_folded, every);
    }
}

/// Buffers a thread cache may keep of a tier of `size` bytes when it may book
/// `cache_bytes`: `min(64, cache_bytes / size)`, or, for a tier above that, 1 (the large
/// slot) if `size <= large_max` and none otherwise; none when `cache_bytes` is 0 (thread
/// caches off).
pub(in crate::engine) fn stack_cap(cache_bytes: usize, size: usize, large_max: usize) -> u32 {
    if cache_bytes == 0 {
        0
    } else if size > cache_bytes {
        u32::from(size <= large_max)
    } else {
        (cache_bytes / size).min(MAX_LOCAL_PER_TIER) as u32
    }
}
