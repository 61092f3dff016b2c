//! A thread's cache for one pool: its layout, the fast path, and the owner's primitive
//! operations. The policy (when to refill, flush, decay) is in `policy.rs`; how a thread finds
//! its cache is in `tls.rs`.
//!
//! # Layout
//!
//! ```text
//!  Cache (one per thread and pool, shared by an Arc between the thread's table and the pool)
//!  ┌──────────────────────────────────────────────────────────────────────────┐
//!  │ key: AtomicU32  ← the doorbell: the pool's key while the fast path may   │
//!  │                   run; RUNG (0) when another thread wants the owner's    │
//!  │                   attention (trim, close) or the cache is dead           │
//!  │ table: bucket → tier (shared with the pool, covers every usize)          │
//!  │ tiers: [Tier; tiers + 1]  (the last is a sentinel that never matches)    │
//!  └──────────────────────────────────────────────────────────────────────────┘
//!  Tier (64 bytes, one cache line)
//!  ┌──────┬─────┬──────┬──────┬───────┬──────────────┬──────────┬─────────┐
//!  │ head │ low │ full │ size │ end  │ returns_left │ refilled │ flushed │
//!  └──────┴─────┴──────┴──────┴───────┴──────────────┴──────────┴─────────┘
//!  slots: [*mut u8; cap], the stack growing down from the end (as jemalloc's cache bins):
//!
//!   slots        full            head               low              end = slots + cap
//!   │  ...       │   ...         │ newest ... ...   │ idle since decay │
//!   └────────────┴───────────────┴──────────────────┴──────────────────┘
//!                                 ◄─── len = end - head ────────────────►
//! ```
//!
//! A get pops the pointer at `head` (if `head < low`; at `low`, unless the stack is empty, it
//! moves `low` first) and rebuilds the `Vec` with the tier's size as capacity; a return checks that the buffer's capacity is the tier's size and, if
//! `head > full`, pushes its pointer below `head`. One load, one compare with a neighbouring
//! field, one load or store of the slot, one store of `head`. Buffers of any other capacity (foreign, grown) never enter a thread cache: the slow
//! path files them in the depot. So the fast path touches the cache's first line, one table
//! entry, the tier's line and one slot, and writes only the tier's line and the slot.
//!
//! # Counting without counting twice
//!
//! Every field the owner writes is an atomic accessed with `Relaxed` loads and stores (plain
//! `mov`s on x86-64, never a locked instruction), so that `stats()` on another thread may read
//! them. The fast path writes `head` (which it must anyway) and, on a return, `pushes`; the
//! stack's length is `end - head`, and the number of hits from the stack is derived:
//! `pops = pushes + refilled - flushed - released - len`.
//! The return counter is kept as a countdown (`returns_left`, folded into a total every
//! `CHECK_EVERY` returns), so it doubles as the housekeeping countdown: every `CHECK_EVERY`-th
//! return asks the owner to look at the clock.
//!
//! `low` marks the lowest length since the last decay (the buffers beyond it stayed idle for
//! the whole interval, and decay releases them). The fast path compares `head` with `low`
//! before each pop anyway (`low >= head` always); only when they meet, which is rare, does it
//! tell an empty stack (`head == end`) from a new low and move `low`. `full` is
//! `end - limit` (`end` when returns must take the slow path: wiping pools, a dead cache).
//!
//! # Who may do what
//!
//! The stacks are owned by one thread. Only an [`Owner`] may pop, push or resize them; one is
//! made only by `tls.rs`, on the owning thread, while no other owner operation is in progress
//! (its constructor is `unsafe` with that contract). Any thread may [`ring`](Cache::ring) the
//! doorbell and read the counters. When the last `Arc` goes, `Drop` frees whatever is left.

use std::marker::PhantomData;
use std::mem::{size_of, ManuallyDrop};

use crate::budget::{Budget, Charge, Credit};
use crate::class::{bucket_of_pred, Classes};
use crate::stats::{bump, Stats};
use crate::sync::{Arc, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use Ordering::{Acquire, Relaxed, Release};

/// Adds `by` to a counter only the owner writes, publishing it (`Release`) for `stats()`.
fn publish(counter: &AtomicU64, by: u64) {
    counter.store(counter.load(Relaxed).wrapping_add(by), Release);
}

/// The doorbell's value when the owner must take the slow path. No pool has key 0.
pub(crate) const RUNG: u32 = 0;

/// Returns between two housekeeping checks (clock, decay), per tier. A check costs about 230
/// instructions (most of them reading the clock): 0.9 per return at 256, 3.6 at 64
/// (`examples/hot_loop.rs` under callgrind). At one return per millisecond a new decay
/// interval is still noticed within a quarter of the default 1 s.
pub(crate) const CHECK_EVERY: u64 = 256;

/// The most buffers a thread cache keeps per tier; a tier of size `s` keeps at most
/// `min(MAX_LOCAL_PER_TIER, thread_cache_bytes / s)`, and none if that is 0.
pub(crate) const MAX_LOCAL_PER_TIER: usize = 64;

/// A slot of a stack: a buffer's pointer.
type Slot = AtomicPtr<u8>;

/// The hot part of one tier of a thread cache: one cache line.
///
/// Invariants (kept by [`Owner`]), with `slots = end - cap` and `len = end - head`: all four
/// pointers are null while the tier's storage is not allocated; otherwise
/// `slots <= full <= head <= low <= end`, `full` is `end - limit` or `end`, `limit <= cap`, and
/// the slots from `head` to `end` own buffers of capacity exactly `size`.
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct Tier {
    head: AtomicPtr<Slot>,
    low: AtomicPtr<Slot>,
    full: AtomicPtr<Slot>,
    size: usize,
    /// One past the last slot (the stack's bottom): `slots + cap`, null while unallocated.
    end: AtomicPtr<Slot>,
    /// Returns onto the stack (fast or slow) left until the next housekeeping: counts down
    /// from `CHECK_EVERY` to 0, when the owner folds `CHECK_EVERY` into `pushes_folded` and
    /// starts over. So the fast path's one counter is also its countdown, and the test for
    /// "housekeeping due" is the decrement's own zero flag.
    returns_left: AtomicU64,
    /// Buffers moved onto the stack from the depot.
    refilled: AtomicU64,
    /// Buffers moved from the stack to the depot.
    flushed: AtomicU64,
}

impl Tier {
    fn new(size: usize) -> Self {
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
    fn at(&self, cap: usize, i: usize) -> *mut Slot {
        self.end.load(Relaxed).wrapping_sub(cap).wrapping_add(i)
    }
}

/// The cold part of a tier: its limits, counters of slow paths, decay bookkeeping.
#[derive(Debug, Default)]
struct TierCold {
    /// Capacity of `slots` once allocated: the most `limit` may be.
    cap: u32,
    /// The tier's reservation, in buffers (`<= cap`).
    limit: AtomicU32,
    /// Buffers released from the stack to the allocator (decay, trim, close, no room).
    released: AtomicU64,
    /// Returns onto the stack counted before the current countdown (module docs).
    pushes_folded: AtomicU64,
    /// Returns plus refills at the last decay: a tier with an empty stack and neither since
    /// gives its reservation back.
    entered_seen: AtomicU64,
    misses: AtomicU64,
    /// Hits served straight from the depot (odd capacities, bypassed tiers).
    direct_hits: AtomicU64,
    /// Returns that did not land on the stack.
    other_returns: AtomicU64,
    /// Buffers released to the allocator by this cache (including `released`).
    discarded: AtomicU64,
}

impl TierCold {
    /// Returns pushed onto `tier`'s stack so far. Reads the total before the countdown (see
    /// `fold`), both `Acquire`.
    fn pushes(&self, tier: &Tier) -> u64 {
        let folded = self.pushes_folded.load(Acquire);
        let left = tier.returns_left.load(Acquire);
        folded.wrapping_add(CHECK_EVERY.wrapping_sub(left))
    }

    /// Moves a finished countdown into `pushes_folded`.
    fn fold(&self, tier: &Tier) {
        if tier.returns_left.load(Relaxed) == 0 {
            // Reset, then add: a reader that sees the new total sees the reset too, so it
            // never counts these returns twice (`Cache::add_to`).
            tier.returns_left.store(CHECK_EVERY, Release);
            publish(&self.pushes_folded, CHECK_EVERY);
        }
    }

    /// Length of `tier`'s stack, from its pointers (0 when unallocated). Clamped to `cap`, so
    /// that a read racing with the owner never yields an absurd figure. `Acquire`: see
    /// `Cache::add_to`.
    fn len(&self, tier: &Tier) -> usize {
        let end = tier.end.load(Acquire);
        if end.is_null() {
            return 0;
        }
        let head = tier.head.load(Acquire);
        let len = (end as usize).wrapping_sub(head as usize) / size_of::<Slot>();
        len.min(self.cap as usize)
    }
}

/// One thread's cache for one pool (module docs).
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Cache {
    /// The doorbell; first, so that `tls.rs` can point at it (module docs).
    key: AtomicU32,
    own_key: u32,
    /// Bucket → byte offset of the first candidate tier in `tiers` (see [`offset_table`]).
    table: Arc<[u32]>,
    /// One per pool tier, then the sentinel (size `usize::MAX`, never holds a buffer).
    tiers: Box<[Tier]>,
    /// `tiers.len() * size_of::<Tier>()`: tier hints (byte offsets) below this are valid.
    hint_end: usize,
    cold: Box<[TierCold]>,
    budget: usize,
    /// Sum over tiers within the budget of `limit * size`; never above `budget`.
    reserved: AtomicUsize,
    /// The large slot: 1 + the index of the one tier above the budget that may hold a buffer
    /// (its limit is 1), or 0.
    large: AtomicUsize,
    wipe: bool,
    dead: AtomicBool,
    /// Slow operations until the next housekeeping.
    countdown: AtomicU32,
    epoch: AtomicU64,
    trim_gen: AtomicU64,
    /// Gets above the largest tier.
    oversize: AtomicU64,
    /// Returned buffers that fit no tier (released).
    untiered_returned: AtomicU64,
    /// The pool's budget on bytes in use, if it has one, and this thread's credit of it
    /// (`budget.rs`).
    in_use: Option<Arc<Budget>>,
    credit: Credit,
}

/// Slow operations between two housekeeping checks.
pub(crate) const SLOW_CHECK_EVERY: u32 = 16;

impl Cache {
    /// The tier at byte offset `off` of `tiers`.
    ///
    /// # Safety
    /// `off` is `t * size_of::<Tier>()` for some `t < tiers.len()`.
    #[inline(always)]
    unsafe fn tier_at(&self, off: usize) -> &Tier {
        debug_assert!(off % size_of::<Tier>() == 0 && off < self.hint_end);
        // SAFETY: the caller guarantees the offset of an element of `tiers`.
        unsafe { &*self.tiers.as_ptr().byte_add(off) }
    }

    /// A cache whose doorbell is armed with `key`, with nothing reserved yet.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        key: u32,
        classes: &Classes,
        table: &Arc<[u32]>,
        budget: usize,
        wipe: bool,
        epoch: u64,
        trim_gen: u64,
        in_use: Option<Arc<Budget>>,
    ) -> Arc<Cache> {
        debug_assert_ne!(key, RUNG);
        let tiers: Box<[Tier]> = classes
            .sizes()
            .iter()
            .map(|&size| Tier::new(size))
            .chain(std::iter::once(Tier::new(usize::MAX)))
            .collect();
        let hint_end = tiers.len() * size_of::<Tier>();
        let cold = classes
            .sizes()
            .iter()
            .map(|&size| TierCold {
                cap: stack_cap(budget, size),
                ..TierCold::default()
            })
            .collect();
        Arc::new(Cache {
            key: AtomicU32::new(key),
            own_key: key,
            table: Arc::clone(table),
            tiers,
            hint_end,
            cold,
            budget,
            reserved: AtomicUsize::new(0),
            large: AtomicUsize::new(0),
            wipe,
            dead: AtomicBool::new(false),
            countdown: AtomicU32::new(SLOW_CHECK_EVERY),
            epoch: AtomicU64::new(epoch),
            trim_gen: AtomicU64::new(trim_gen),
            oversize: AtomicU64::new(0),
            untiered_returned: AtomicU64::new(0),
            in_use,
            credit: Credit::default(),
        })
    }

    /// Asks the owner to take the slow path at its next operation (trim, close). Any thread.
    ///
    /// A ringer first publishes why it rings (the pool's `closed` flag, its trim generation),
    /// then rings with a `Release` swap. The owner re-arms with an `Acquire` swap before it
    /// reads why. Both are read-modify-writes, so one comes after the other in the doorbell's
    /// order and reads its value: if the ring comes first, the re-arm reads it, synchronizes
    /// with it, and the owner's reads after it see the reason; if the ring comes after the
    /// re-arm, the doorbell stays rung and the owner's next operation takes the slow path. A
    /// ring is never lost (loom models `loom_doorbell_ring_is_never_lost` and
    /// `loom_close_is_never_missed_by_a_cache`; with a plain store for the ring, loom found an
    /// execution that lost it).
    pub(crate) fn ring(&self) {
        self.key.swap(RUNG, Ordering::Release);
    }

    /// This thread's credit of the pool's budget (0 without one). Any thread may sweep it.
    pub(crate) fn credit(&self) -> &Credit {
        &self.credit
    }

    /// The doorbell's value (for the loom models).
    #[cfg(all(test, loom))]
    pub(crate) fn doorbell_for_tests(&self) -> u32 {
        self.key.load(Relaxed)
    }

    /// True once the pool closed and the owner freed everything.
    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Relaxed)
    }

    /// Adds this cache's counts to `into`; with `with_retained`, also what it holds.
    ///
    /// Read while the owner works, the counters are not a consistent set, so derived figures
    /// are clamped at zero; they are exact once the owner is quiescent and the reader has
    /// synchronized with it.
    pub(crate) fn add_to(&self, into: &mut Stats, with_retained: bool) {
        let r = |a: &AtomicU64| a.load(Relaxed);
        let acq = |a: &AtomicU64| a.load(Acquire);
        for ((tier, cold), t) in self.tiers.iter().zip(self.cold.iter()).zip(&mut into.tiers) {
            // The owner stores each figure with `Release`, in an order chosen so that reading
            // them with `Acquire` in this order never counts a hit that did not happen: what
            // adds to the derived `pops` first (returns, refills: each stored after the stack
            // top it moved), then the stack top, then what subtracts (flushed, released: each
            // stored before the stack top it moved).
            let pushes = cold.pushes(tier);
            let refilled = acq(&tier.refilled);
            let len = cold.len(tier) as u64;
            let flushed = acq(&tier.flushed);
            let released = acq(&cold.released);
            let pops = pushes
                .wrapping_add(refilled)
                .wrapping_sub(flushed)
                .wrapping_sub(released)
                .wrapping_sub(len);
            let pops = (pops as i64).max(0) as u64;
            t.hits += pops + r(&cold.direct_hits);
            t.misses += r(&cold.misses);
            t.returned += pushes + r(&cold.other_returns);
            t.discarded += r(&cold.discarded);
            if with_retained {
                t.retained_buffers = t.retained_buffers.saturating_add(len as usize);
                t.retained_bytes = t
                    .retained_bytes
                    .saturating_add((len as usize).saturating_mul(tier.size));
            }
        }
        into.oversize += r(&self.oversize);
        into.untiered_returned += r(&self.untiered_returned);
    }
}

/// The thread caches' lookup table for `classes`: for every bucket of `usize`, the byte
/// offset in a cache's `tiers` of the bucket's first candidate tier (the sentinel's above the
/// largest tier). Byte offsets rather than indices: the fast path adds them to the array's
/// address as they are, and they serve as the tier hint a `PooledBuf` carries back. Built once
/// per pool and shared by its caches.
pub(crate) fn offset_table(classes: &Classes) -> Arc<[u32]> {
    classes
        .fast_table()
        .iter()
        .map(|&t| (usize::from(t) * size_of::<Tier>()) as u32)
        .collect()
}

/// Buffers a thread cache may keep of a tier of `size` bytes under a budget of `budget`:
/// `min(64, budget / size)`, or 1 for a tier above the budget (the large slot), or none
/// when the budget is 0 (thread caches off).
fn stack_cap(budget: usize, size: usize) -> u32 {
    if budget == 0 {
        0
    } else if size > budget {
        1
    } else {
        (budget / size).min(MAX_LOCAL_PER_TIER) as u32
    }
}

/// The size of a tier's hot part: tier hints are multiples of it.
pub(crate) const TIER_BYTES: usize = size_of::<Tier>();

/// The tier hint (byte offset) of tier `t`.
pub(crate) fn hint_of(t: usize) -> u32 {
    (t * size_of::<Tier>()) as u32
}

impl Drop for Cache {
    /// Frees whatever the stacks still hold (normally nothing: the owner empties them when the
    /// thread exits or the pool closes) and the stacks' storage. `&mut self`: no owner is left.
    fn drop(&mut self) {
        for (tier, cold) in self.tiers.iter().zip(self.cold.iter()) {
            let end = tier.end.load(Relaxed);
            if end.is_null() {
                continue;
            }
            let cap = cold.cap as usize;
            for i in cap - cold.len(tier)..cap {
                // SAFETY: `i < cap`: a slot of the allocated array.
                let p = unsafe { &*tier.at(cap, i) }.load(Relaxed);
                // SAFETY: slots from `head` to `end` own buffers of capacity exactly `size`,
                // from the global allocator; nothing else refers to them any more.
                drop(unsafe { Vec::from_raw_parts(p, 0, tier.size) });
            }
            free_slots(end.wrapping_sub(cap), cold.cap);
        }
    }
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

/// A buffer just popped by the fast path, as parts: plain scalars, so that the compiler keeps
/// them in registers all the way into the caller's `PooledBuf` (a niche-encoded
/// `Option<(Vec<u8>, u32)>` made it copy the handle through the stack: 17 instructions).
#[derive(Debug)]
#[must_use = "dropping a Popped leaks its buffer"]
pub(crate) struct Popped {
    /// Owns a buffer of capacity exactly `cap` from the global allocator (made only by
    /// `pop_fast`).
    ptr: *mut u8,
    cap: usize,
    /// The tier it came from.
    pub(crate) tier: u32,
}

impl Popped {
    /// The buffer, empty.
    #[inline(always)]
    pub(crate) fn into_vec(self) -> Vec<u8> {
        // SAFETY: `ptr` owns a buffer of capacity exactly `cap` from the global allocator
        // (field invariant), and `self` is consumed, so the `Vec` is its only owner.
        unsafe { Vec::from_raw_parts(self.ptr, 0, self.cap) }
    }
}

/// What [`Owner::push_fast`] did with a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pushed {
    /// On the stack.
    Kept,
    /// On the stack, and housekeeping is due.
    Due,
    /// Not taken: the slow path must file it.
    Refused,
}

/// The owning thread's access to its cache: the only way to move buffers in or out of it.
/// Neither `Send` nor `Sync`; made only by `tls.rs`.
pub(crate) struct Owner<'a> {
    cache: &'a Cache,
    _not_send: PhantomData<*const ()>,
}

impl std::fmt::Debug for Owner<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owner")
            .field("key", &self.cache.own_key)
            .finish()
    }
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

/// [`Owner::pop_fast`] when the bucket's first candidate is too small: walks up. A free
/// function taking the cache (not `&Owner`), so that the fast path need not keep its `Owner`
/// in memory for this call. Only for the cache's owner.
#[cold]
#[inline(never)]
fn pop_walk(cache: &Cache, n: usize, mut off: usize) -> Option<Popped> {
    loop {
        off += size_of::<Tier>();
        // SAFETY: the walk starts at a tier and stops at the sentinel at the latest (its
        // size, `usize::MAX`, is `>= n`), so `off` never passes it.
        let tier = unsafe { cache.tier_at(off) };
        if tier.size >= n {
            return pop_tier(tier, off);
        }
    }
}

/// Pops the newest buffer of `tier` (at byte offset `off`) if the stack is above its
/// low-water mark.
#[inline(always)]
fn pop_tier(tier: &Tier, off: usize) -> Option<Popped> {
    let head = tier.head.load(Relaxed);
    if head >= tier.low.load(Relaxed) {
        // At the low-water mark (rare): empty, or a new low for decay, which moves the mark
        // here, as jemalloc's cache bins do. (Leaving it to the slow path sent every later pop
        // of the interval there.) Unallocated, all three are null: empty.
        if head == tier.end.load(Relaxed) {
            return None;
        }
        tier.low.store(head.wrapping_add(1), Relaxed);
    }
    // SAFETY: `slots <= head < end` (`head < low <= end`, or `head >= low` but not at `end`):
    // a filled slot of the allocated array.
    let ptr = unsafe { &*head }.load(Relaxed);
    // `head < end`, so one past it is still within (or at the end of) the array.
    // `Release`, as every store of a published figure (see `Cache::add_to`).
    tier.head.store(head.wrapping_add(1), Release);
    // The slot owned a buffer of capacity exactly `tier.size` from the global allocator;
    // moving `head` past it removed it from the stack, so the `Popped` is its only owner.
    // Only this owner touches the stack (`Owner::new`'s contract).
    Some(Popped {
        ptr,
        cap: tier.size,
        tier: off as u32,
    })
}

/// Puts `v` on `tier`'s stack, in the slot below `head`, and moves `head` there (`Release`:
/// see `Cache::add_to`). The one store of a buffer onto a stack, for the fast and slow paths.
///
/// # Safety
/// Only the owner calls it; `head` is the tier's current top, and the slot below it is in the
/// allocated array and free (the stack is below its limit).
#[inline(always)]
unsafe fn place(tier: &Tier, head: *mut Slot, v: Vec<u8>) {
    let mut v = ManuallyDrop::new(v);
    let head = head.wrapping_sub(1);
    // SAFETY: the caller guarantees a free slot of the allocated array at `head`.
    unsafe { &*head }.store(v.as_mut_ptr(), Relaxed);
    tier.head.store(head, Release);
}

/// Counts a return onto `tier`'s stack; returns what is left of the countdown (0: housekeeping
/// is due, and `TierCold::fold` starts it over). `Release`: see `Cache::add_to`.
#[inline(always)]
fn count_return(tier: &Tier) -> u64 {
    let left = tier.returns_left.load(Relaxed).wrapping_sub(1);
    tier.returns_left.store(left, Release);
    left
}

impl<'a> Owner<'a> {
    /// Owner access to `cache`.
    ///
    /// # Safety
    /// The calling thread owns `cache` (it was made for and is held by this thread's table),
    /// and no other `Owner` of it is used while this one lives: the fast path's reads and
    /// writes of a stack are not atomic as a whole, and two owners could hand out one buffer
    /// twice.
    #[inline(always)]
    pub(crate) unsafe fn new(cache: &'a Cache) -> Self {
        Owner {
            cache,
            _not_send: PhantomData,
        }
    }

    /// The cache.
    #[inline(always)]
    pub(crate) fn cache(&self) -> &'a Cache {
        self.cache
    }

    /// The fast path of a get: the newest buffer of the tier for `n` bytes, with the tier's
    /// index, or `None` for the slow path (tier empty or at its low-water mark, size 0, size
    /// above the largest tier). Never a false hit: the tier's size is checked against `n`.
    #[inline(always)]
    pub(crate) fn pop_fast(&self, n: usize) -> Option<Popped> {
        let c = self.cache;
        let b = bucket_of_pred(n.wrapping_sub(1));
        debug_assert!(b < c.table.len());
        // SAFETY: the table has an entry for every bucket of `usize` (`ALL_BUCKETS`), and
        // `bucket_of_pred` maps every `usize` below that.
        let off = unsafe { *c.table.get_unchecked(b) } as usize;
        // SAFETY: table entries are offsets of tiers (or of the sentinel) in `tiers`.
        let tier = unsafe { c.tier_at(off) };
        if tier.size < n {
            // A tier with more than five significant bits inside the bucket, or a size above
            // the largest tier: rare, out of line.
            return pop_walk(c, n, off);
        }
        pop_tier(tier, off)
    }

    /// [`pop_fast`](Self::pop_fast) for a pool with a budget: charges the tier's size to
    /// this thread's credit before popping. `Ok`: a buffer, charged. `Err(Some(hint))`: the
    /// charge for the tier with that hint is taken but its stack is empty (the slow path gets
    /// a buffer for it). `Err(None)`: nothing taken (credit short, or a size this path leaves
    /// to the slow one).
    #[inline(always)]
    pub(crate) fn pop_charged(&self, n: usize) -> Result<Popped, Option<u32>> {
        let c = self.cache;
        let b = bucket_of_pred(n.wrapping_sub(1));
        debug_assert!(b < c.table.len());
        // SAFETY: as in `pop_fast`: every bucket has an entry.
        let off = unsafe { *c.table.get_unchecked(b) } as usize;
        // SAFETY: table entries are offsets of tiers (or of the sentinel) in `tiers`.
        let tier = unsafe { c.tier_at(off) };
        // Below `n`: the walk (rare) is the slow path's; the sentinel's size never fits a
        // credit, so sizes above the largest tier take nothing here.
        if tier.size < n || !c.credit.take(tier.size) {
            return Err(None);
        }
        pop_tier(tier, off).ok_or(Some(off as u32))
    }

    /// [`push_fast`](Self::push_fast) for a buffer of a pool with a budget whose tier field
    /// `tag` says it was charged its tier's size: the charge goes back to this thread's
    /// credit, then the buffer to the stack. Returns what became of the buffer and the bytes
    /// the credit should not keep (for the caller to release to the budget), or `None`
    /// (nothing done) for any other tag.
    #[inline(always)]
    pub(crate) fn push_charged(&self, tag: u32, v: &mut Vec<u8>) -> Option<(Pushed, usize)> {
        let Charge::Tier(hint) = Charge::of(tag) else {
            return None;
        };
        let budget = self.cache.in_use.as_deref()?;
        let off = hint as usize;
        if off >= self.cache.hint_end - size_of::<Tier>() || off % size_of::<Tier>() != 0 {
            return None;
        }
        // SAFETY: a multiple of the tier size below the sentinel's offset: a tier.
        let size = unsafe { self.cache.tier_at(off) }.size;
        let excess = budget.credit_back(&self.cache.credit, size);
        Some((self.push_fast(hint, v), excess))
    }

    /// The fast path of a return of `v`, handed out from tier `t` (a hint, checked): pushed
    /// (and `v` left empty) if its capacity is exactly the tier's size and the stack is below
    /// its fast limit. Anything else leaves `v` as it was, for the slow path.
    ///
    /// The buffer comes by `&mut` and the outcome as a plain enum, not as a
    /// `Result<bool, Vec<u8>>`: with the outcome encoded in the `Vec`'s capacity niche, the
    /// compiler re-tested the niche after every refusal, and merged the kept and refused
    /// paths through a flag (4 instructions per return, measured with callgrind).
    #[inline(always)]
    pub(crate) fn push_fast(&self, hint: u32, v: &mut Vec<u8>) -> Pushed {
        let off = hint as usize;
        if off >= self.cache.hint_end {
            return Pushed::Refused;
        }
        // SAFETY: every hint is a multiple of `size_of::<Tier>()` (made by `pop_fast` or
        // `hint_of`, by this pool or, after the key wrapped, another), and this one is below
        // `hint_end`: the offset of a tier of this cache.
        let tier = unsafe { self.cache.tier_at(off) };
        if v.capacity() != tier.size {
            return Pushed::Refused;
        }
        let head = tier.head.load(Relaxed);
        if head <= tier.full.load(Relaxed) {
            return Pushed::Refused; // also when unallocated: null <= null
        }
        // SAFETY: `slots <= full < head`, so the slot below `head` is in the allocated array,
        // and free.
        unsafe { place(tier, head, std::mem::take(v)) };
        if count_return(tier) == 0 {
            Pushed::Due
        } else {
            Pushed::Kept
        }
    }

    /// Charges `charge` bytes to this thread's credit, if it holds that much.
    #[inline]
    pub(crate) fn take_credit(&self, charge: usize) -> bool {
        self.cache.credit.take(charge)
    }

    /// Gives a returned buffer's charge (from its tier field, `tag`) back to this thread's
    /// credit. Returns what the credit should not keep, for the caller to release to the
    /// budget once it let go of this owner ([`Budget::credit_back`]). A tier hint that names
    /// no tier of this cache (possible only after the pool key wrapped) refunds nothing.
    #[inline]
    pub(crate) fn refund(&self, tag: u32) -> usize {
        let Some(budget) = &self.cache.in_use else {
            return 0;
        };
        let charge = match Charge::of(tag) {
            Charge::None => return 0,
            Charge::Bytes(b) => b,
            Charge::Tier(hint) => {
                let off = hint as usize;
                if off >= self.cache.hint_end - size_of::<Tier>() || off % size_of::<Tier>() != 0 {
                    return 0;
                }
                // SAFETY: a multiple of the tier size below the sentinel's offset: a tier.
                unsafe { self.cache.tier_at(off) }.size
            }
        };
        budget.credit_back(&self.cache.credit, charge)
    }

    /// Adds `bytes` taken from the budget to this thread's credit. Returns what it should not
    /// keep (all of it if someone waits), for the caller to release.
    pub(crate) fn add_credit(&self, bytes: usize) -> usize {
        match &self.cache.in_use {
            Some(budget) if bytes > 0 => budget.credit_back(&self.cache.credit, bytes),
            _ => bytes,
        }
    }

    /// The pool's budget, if it has one.
    pub(crate) fn budget(&self) -> Option<&'a Budget> {
        self.cache.in_use.as_deref()
    }

    /// Number of tiers (not counting the sentinel).
    pub(crate) fn tiers(&self) -> usize {
        self.cache.cold.len()
    }

    /// Size of tier `t`.
    pub(crate) fn size(&self, t: usize) -> usize {
        self.cache.tiers[t].size
    }

    /// Buffers on tier `t`'s stack.
    pub(crate) fn len(&self, t: usize) -> usize {
        self.cache.cold[t].len(&self.cache.tiers[t])
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

    /// Tier `t`'s current limit (its reservation, in buffers).
    pub(crate) fn limit(&self, t: usize) -> usize {
        self.cache.cold[t].limit.load(Relaxed) as usize
    }

    /// The most tier `t`'s limit may be: `min(64, budget / size)`, 1 for a tier above the
    /// budget; 0 if the tier bypasses the thread cache.
    pub(crate) fn cap(&self, t: usize) -> usize {
        self.cache.cold[t].cap as usize
    }

    /// True if tier `t` is above the budget: it may hold one buffer, in the large slot.
    pub(crate) fn is_large(&self, t: usize) -> bool {
        self.cache.tiers[t].size > self.cache.budget
    }

    /// The tier holding the large slot, if any.
    pub(crate) fn large_holder(&self) -> Option<usize> {
        self.cache.large.load(Relaxed).checked_sub(1)
    }

    /// Bytes of the budget not reserved by any tier.
    pub(crate) fn unreserved(&self) -> usize {
        self.cache.budget - self.cache.reserved.load(Relaxed)
    }

    /// True if returns must be wiped (and so take the slow path).
    pub(crate) fn wipes(&self) -> bool {
        self.cache.wipe
    }

    /// True once the pool closed and the cache gave everything up.
    pub(crate) fn is_dead(&self) -> bool {
        self.cache.is_dead()
    }

    /// True if another thread rang the doorbell since the last [`Self::rearm`].
    pub(crate) fn rung(&self) -> bool {
        self.cache.key.load(Relaxed) != self.cache.own_key
    }

    /// Re-arms the doorbell, before looking at why it rang (see [`Cache::ring`]).
    pub(crate) fn rearm(&self) {
        self.cache.key.swap(self.cache.own_key, Ordering::Acquire);
    }

    /// Counts a slow operation; true when housekeeping is due.
    pub(crate) fn tick_countdown(&self) -> bool {
        let left = self.cache.countdown.load(Relaxed).saturating_sub(1);
        if left == 0 {
            self.cache.countdown.store(SLOW_CHECK_EVERY, Relaxed);
            true
        } else {
            self.cache.countdown.store(left, Relaxed);
            false
        }
    }

    /// The decay epoch this cache last saw.
    pub(crate) fn epoch(&self) -> u64 {
        self.cache.epoch.load(Relaxed)
    }

    /// Records the decay epoch seen.
    pub(crate) fn set_epoch(&self, epoch: u64) {
        self.cache.epoch.store(epoch, Relaxed);
    }

    /// The pool's trim generation this cache last acted on.
    pub(crate) fn trim_gen(&self) -> u64 {
        self.cache.trim_gen.load(Relaxed)
    }

    /// Records the trim generation acted on.
    pub(crate) fn set_trim_gen(&self, generation: u64) {
        self.cache.trim_gen.store(generation, Relaxed);
    }

    /// Sets tier `t`'s limit (`<= cap`, `>= len`), allocating the stack's slots on first use;
    /// keeps `reserved` and `full` in step. The storage stays when the limit drops to 0 (see
    /// [`Self::free_storage`]). Returns false (and changes nothing) if the reservation would
    /// not fit the budget.
    pub(crate) fn set_limit(&self, t: usize, limit: usize) -> bool {
        let c = self.cache;
        let (tier, cold) = (&c.tiers[t], &c.cold[t]);
        let cap = cold.cap as usize;
        let limit = limit.min(cap);
        assert!(limit >= cold.len(tier), "limit below the stack");
        let old = cold.limit.load(Relaxed) as usize;
        if tier.size > c.budget {
            // The large slot, outside the budget: one tier at a time.
            let holder = c.large.load(Relaxed);
            if limit > 0 && holder != 0 && holder != t + 1 {
                return false;
            }
            c.large.store(if limit > 0 { t + 1 } else { 0 }, Relaxed);
        } else {
            let reserved = c.reserved.load(Relaxed) - old * tier.size + limit * tier.size;
            if reserved > c.budget {
                return false;
            }
            c.reserved.store(reserved, Relaxed);
        }
        cold.limit.store(limit as u32, Relaxed);
        if limit > 0 && tier.end.load(Relaxed).is_null() {
            let end = alloc_slots(cold.cap).wrapping_add(cap);
            // `Release`: a reader that sees the stack's top sees its end (`add_to`).
            tier.end.store(end, Release);
            tier.head.store(end, Release);
            tier.low.store(end, Relaxed);
        }
        if !tier.end.load(Relaxed).is_null() {
            let fast = if c.wipe || c.is_dead() { 0 } else { limit };
            tier.full.store(tier.at(cap, cap - fast), Relaxed);
        }
        true
    }

    /// Frees tier `t`'s storage if it has no limit and holds nothing (decay of an idle tier,
    /// `trim`, close, thread exit): it was allocated while buffers came in, so it may sit above
    /// them in the heap and pin it (glibc trims only the top).
    pub(crate) fn free_storage(&self, t: usize) {
        let (tier, cold) = (&self.cache.tiers[t], &self.cache.cold[t]);
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
        let (tier, cold) = (&self.cache.tiers[t], &self.cache.cold[t]);
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
        // SAFETY: as in `pop_tier`: the slot owned a buffer of capacity exactly `size`, now
        // removed from the stack.
        Some(unsafe { Vec::from_raw_parts(p, 0, tier.size) })
    }

    /// Pushes `v` on tier `t`'s stack if its capacity is exactly the tier's size and the
    /// stack is below its limit; counts it as a return, or with `from_depot` as a refill.
    pub(crate) fn push(&self, t: usize, v: Vec<u8>, from_depot: bool) -> Result<(), Vec<u8>> {
        let (tier, cold) = (&self.cache.tiers[t], &self.cache.cold[t]);
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
            cold.fold(tier);
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
        let (tier, cold) = (&self.cache.tiers[t], &self.cache.cold[t]);
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
        let cold = &self.cache.cold[t];
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

    /// Folds the finished return countdown of the tier with hint `hint` (the fast path
    /// reported housekeeping due for it).
    pub(crate) fn fold_countdown(&self, hint: u32) {
        let off = hint as usize;
        if off < self.cache.hint_end {
            // SAFETY: as in `push_fast`: a hint below `hint_end` is a tier's offset.
            let tier = unsafe { self.cache.tier_at(off) };
            let t = off / size_of::<Tier>();
            if let Some(cold) = self.cache.cold.get(t) {
                cold.fold(tier);
            }
        }
    }

    /// Counts a get above the largest tier.
    pub(crate) fn count_oversize(&self) {
        bump(&self.cache.oversize, 1);
    }

    /// Counts a returned buffer that fits no tier.
    pub(crate) fn count_untiered(&self) {
        bump(&self.cache.untiered_returned, 1);
    }

    /// True if nothing entered tier `t`'s stack since the last call, neither a return nor a
    /// refill (and records the current counts). A thread that only gets (the producer of a
    /// hand-off) never returns, but refills: with returns alone it looked idle at every decay,
    /// lost its storage and allocated it again (found by Miri, where intervals pass quickly).
    pub(crate) fn idle_since_last_look(&self, t: usize) -> bool {
        let (tier, cold) = (&self.cache.tiers[t], &self.cache.cold[t]);
        let entered = cold.pushes(tier).wrapping_add(tier.refilled.load(Relaxed));
        let idle = cold.entered_seen.load(Relaxed) == entered;
        cold.entered_seen.store(entered, Relaxed);
        idle
    }

    /// Marks the cache dead (the pool closed): every operation takes the slow path from now
    /// on, which keeps nothing. The stacks must already be empty.
    pub(crate) fn mark_dead(&self) {
        let c = self.cache;
        c.dead.store(true, Relaxed);
        c.key.store(RUNG, Relaxed); // the owner's own store: nothing to publish
        for t in 0..self.tiers() {
            debug_assert_eq!(self.len(t), 0);
            self.set_limit(t, 0);
            self.free_storage(t);
        }
    }
}
