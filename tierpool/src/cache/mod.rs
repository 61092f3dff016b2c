//! Thread caches: one per thread and pool, and the protocol that lets other threads reclaim
//! them.
//!
//! | file | what it owns |
//! |---|---|
//! | `mod.rs` | the cache's memory layout, the doorbell, and who may touch the stacks when ([`Owner`]) |
//! | `stack.rs` | a tier's stack of raw pointers: its storage, push, pop, drain |
//! | `fast.rs` | the fast path: a get or a return in one visit, reached from the doorbell's address |
//! | `counters.rs` | counting without counting twice, what `stats()` reads, the activity signature |
//! | `reserve.rs` | reservations: how much each tier may hold, drawn from the pool's allowance |
//! | `reclaim.rs` | the pool's list of caches, and taking caches away from their owners |
//! | `policy.rs` | what the slow path and the reclaimers do (refill, flush, decay, trim, close, budget) |
//! | `tls.rs` | how a thread finds its cache: the thread-local slot, the table, the fallback ladder |
//!
//! # Layout
//!
//! ```text
//!  Cache: one allocation, shared by an Arc between the thread's table and the pool's list
//!  ┌───────────────────────────────────────────────────────────────────────────────┐
//!  │ Head (a multiple of 64 bytes)                                                │
//!  │   bell: key   ← the pool's key while the fast path may run; RUNG when another  │
//!  │               thread wants the owner's attention or is reclaiming the cache    │
//!  │         using ← 1 while the owner works on its stacks (fast or slow path)      │
//!  │   hint_end, table: bucket → byte offset of the bucket's first tier             │
//!  │   lock, reservations, decay and housekeeping state, cold counters               │
//!  ├───────────────────────────────────────────────────────────────────────────────┤
//!  │ tiers: [Tier; tiers + 1], 64 bytes each, the last a sentinel that never matches │
//!  └───────────────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! The thread-local slot points at the cache's first byte (its doorbell), and everything the
//! fast path needs is at a constant offset from there: the lookup table, and the tiers at
//! `size_of::<Head>()`. So a get costs one load of the slot, the doorbell, the table entry and
//! the tier's line; no pointer is loaded from the cache to find another part of it.
//!
//! # Who may touch the stacks
//!
//! A cache's stacks (the tiers' `head`, `low`, `full`, their slots, and the counters) are
//! written by one thread at a time, its *owner*: the thread the cache belongs to, or a
//! *reclaimer* (another thread emptying an idle cache, trimming, closing the pool, or sweeping
//! for a budget waiter) that has taken the cache over. The only way to write them is an
//! [`Owner`], and there are two ways to get one:
//!
//! - **The owning thread** stores 1 in `using` (a plain store), issues a compiler fence
//!   ([`fence::light`]), and reads the doorbell. If it holds the key, it may work; when done
//!   it stores 0 in `using` (`Release`). If it is rung, the owner clears `using`, takes the
//!   cache's `lock` (waiting for any reclaimer to finish) and works under it; only then may it
//!   re-arm the doorbell.
//! - **A reclaimer** takes the `lock`, rings the doorbell, issues the heavy fence
//!   ([`fence::heavy`]: `membarrier`, one for a whole batch of caches), and waits until it
//!   reads 0 in `using` (`Acquire`). Then it works under the lock.
//!
//! Why they exclude each other: the owner's store-fence-load and the reclaimer's
//! store-fence-load form Dekker's protocol, with both fences on the reclaimer's side: after
//! the heavy fence, either the owner's mark is visible to the reclaimer (which waits for the
//! owner's release store of 0, and so also sees every write the owner made), or the owner's
//! next read of the doorbell sees it rung (and the owner steps aside to the lock, which the
//! reclaimer holds). Nothing but the holder of the lock re-arms a rung doorbell, so the
//! doorbell stays rung for as long as the reclaimer works. The owner pays two plain stores
//! per operation and no locked instruction; the reclaimer pays a lock, a locked swap and one
//! `membarrier` per batch. loom checks it (`loom_tests.rs`, module `reclaim`, with both
//! fences modelled as `SeqCst` fences).
//!
//! A reclaimer never waits for an owner that is not in an operation, and an operation never
//! blocks while `using` is set (it waits on no cache lock and no budget), so a reclaimer
//! waits at most for one operation to finish. When the current thread is a reclaimer it
//! skips its own cache.

mod counters;
mod fast;
pub(crate) mod policy;
pub(crate) mod reclaim;
mod reserve;
mod stack;
pub(crate) mod tls;

use std::marker::PhantomData;
use std::mem::{align_of, size_of};

use crate::class::{Classes, ALL_BUCKETS};
use crate::depot::Allowance;
use crate::fence;
use crate::key::{Key, RUNG, TIER_STRIDE};
use crate::sync::{lock, spin_wait, Arc, AtomicBool, AtomicU32, AtomicU64, AtomicUsize};
use crate::sync::{Mutex, MutexGuard, Ordering};

pub(crate) use fast::Pushed;
pub(crate) use stack::{Count, MAX_LOCAL_PER_TIER};
use stack::{Tier, TierCold};

use Ordering::{Acquire, Relaxed, Release};

/// The doorbell and the owner's busy mark: the first bytes of a cache, where the thread-local
/// slot points (`tls.rs`).
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Doorbell {
    /// The pool's key while the fast path may run, [`RUNG`] otherwise.
    key: AtomicU32,
    /// 1 while the owner works on the stacks (module docs).
    using: AtomicU32,
}

impl Doorbell {
    /// A doorbell that always reads [`RUNG`] (the thread-local slot's "no cache").
    #[cfg(not(loom))]
    pub(crate) const fn rung() -> Self {
        Doorbell {
            key: AtomicU32::new(RUNG),
            using: AtomicU32::new(0),
        }
    }
}

/// Slow operations between two housekeeping checks.
pub(crate) const SLOW_CHECK_EVERY: u32 = 16;

/// The head of a cache: what the fast path reads first, then the cold state.
#[repr(C, align(64))]
pub(crate) struct Head {
    bell: Doorbell,
    /// `tiers.len() * TIER_STRIDE`: tier hints below this are offsets of this cache's tiers.
    hint_end: usize,
    /// Bucket → byte offset in `tiers` of the bucket's first candidate tier (the sentinel's
    /// above the largest tier); see [`offset_table`].
    table: [u32; ALL_BUCKETS],
    own_key: Key,
    /// Held by a reclaimer while it works, and by the owner while it works with a rung
    /// doorbell (module docs).
    lock: Mutex<()>,
    /// One per pool tier (no sentinel).
    cold: Box<[TierCold]>,
    /// The most bytes this cache may reserve (`thread_cache_bytes`, or less under a budget).
    cache_bytes: usize,
    /// Sum over tiers within `cache_bytes` of `limit * size`; never above `cache_bytes`.
    reserved: AtomicUsize,
    /// The large slot: 1 + the index of the one tier above `cache_bytes` that may hold a
    /// buffer (its limit is 1), or 0.
    large: AtomicUsize,
    /// The pool's allowance, which every reservation is drawn from.
    allowance: Arc<Allowance>,
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
    /// Slow operations ever (part of the activity signature, `counters.rs`).
    slow_ops: AtomicU64,
    /// The activity signature when the pool last ticked (written by the ticking thread under
    /// the pool's reclaim lock).
    seen: AtomicU64,
}

/// One thread's cache for one pool (module docs).
#[repr(C)]
pub(crate) struct Cache {
    head: Head,
    /// One per pool tier, then the sentinel (size `usize::MAX`, never holds a buffer).
    tiers: [Tier],
}

/// Byte offset of the lookup table from a cache's first byte.
const TABLE_OFF: usize = std::mem::offset_of!(Head, table);
/// Byte offset of the first tier from a cache's first byte.
const TIERS_OFF: usize = size_of::<Head>();

// The layout the fast path relies on: the doorbell first, the tiers right after the head.
const _: () = {
    assert!(std::mem::offset_of!(Head, bell) == 0);
    assert!(size_of::<Head>() % align_of::<Tier>() == 0);
    assert!(size_of::<Tier>() == TIER_STRIDE);
};

impl Cache {
    /// A cache whose doorbell is armed with `key`, with nothing reserved yet.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        key: Key,
        classes: &Classes,
        table: &[u32; ALL_BUCKETS],
        cache_bytes: usize,
        wipe: bool,
        epoch: u64,
        trim_gen: u64,
        allowance: &Arc<Allowance>,
    ) -> Arc<Cache> {
        debug_assert_ne!(key.raw(), RUNG);
        let tiers: Vec<Tier> = classes
            .sizes()
            .iter()
            .map(|&size| Tier::new(size))
            .chain(std::iter::once(Tier::new(usize::MAX)))
            .collect();
        let head = Head {
            bell: Doorbell {
                key: AtomicU32::new(key.raw()),
                using: AtomicU32::new(0),
            },
            hint_end: tiers.len() * TIER_STRIDE,
            table: *table,
            own_key: key,
            lock: Mutex::new(()),
            cold: classes
                .sizes()
                .iter()
                .map(|&size| TierCold::new(reserve::stack_cap(cache_bytes, size)))
                .collect(),
            cache_bytes,
            reserved: AtomicUsize::new(0),
            large: AtomicUsize::new(0),
            allowance: Arc::clone(allowance),
            wipe,
            dead: AtomicBool::new(false),
            countdown: AtomicU32::new(SLOW_CHECK_EVERY),
            epoch: AtomicU64::new(epoch),
            trim_gen: AtomicU64::new(trim_gen),
            oversize: AtomicU64::new(0),
            untiered_returned: AtomicU64::new(0),
            slow_ops: AtomicU64::new(0),
            seen: AtomicU64::new(u64::MAX),
        };
        Arc::from(assemble(head, tiers))
    }

    /// The first byte of the cache, as the thread-local slot points at it.
    pub(crate) fn doorbell(this: &Arc<Cache>) -> *const Doorbell {
        Arc::as_ptr(this).cast::<Doorbell>()
    }

    /// Asks the owner to take the slow path at its next operation. Any thread.
    ///
    /// A ringer first publishes why it rings (the pool's `closed` flag, its trim generation,
    /// the budget's pressure), then rings with a `Release` swap. The owner re-arms (under the
    /// lock) with an `Acquire` swap before it reads why. Both are read-modify-writes, so one
    /// comes after the other in the doorbell's order and reads its value: if the ring comes
    /// first, the re-arm reads it, synchronizes with it, and the owner's reads after it see the
    /// reason; if the ring comes after the re-arm, the doorbell stays rung and the owner's next
    /// operation takes the slow path. A ring is never lost (loom models
    /// `loom_doorbell_ring_is_never_lost` and `loom_close_is_never_missed_by_a_cache`; with a
    /// plain store for the ring, loom found an execution that lost it).
    pub(crate) fn ring(&self) {
        self.head.bell.key.swap(RUNG, Release);
    }

    /// True once the pool closed and the cache gave everything up.
    pub(crate) fn is_dead(&self) -> bool {
        self.head.dead.load(Relaxed)
    }

    /// The owning thread's way in (module docs): under the busy mark while the doorbell is
    /// armed, or under the lock (after any reclaimer finished) while it is rung.
    ///
    /// # Safety
    /// Called on the thread the cache belongs to (it is in this thread's table), and no other
    /// `Owner` of it from this thread is live: the stacks are not atomic as a whole, and two
    /// owners could hand out one buffer twice.
    pub(crate) unsafe fn enter(&self) -> Owner<'_> {
        let bell = &self.head.bell;
        bell.using.store(1, Relaxed);
        fence::light();
        if bell.key.load(Relaxed) == self.head.own_key.raw() {
            return Owner {
                cache: self,
                lock: None,
                marked: true,
                _not_send: PhantomData,
            };
        }
        // Rung: a reclaimer may be at work. Step aside, then wait for it at the lock.
        bell.using.store(0, Release);
        Owner {
            cache: self,
            lock: Some(lock(&self.head.lock)),
            marked: false,
            _not_send: PhantomData,
        }
    }

    /// A reclaimer's first step: takes the lock and rings. The caller issues one
    /// [`fence::heavy`] for all the caches it seized, then [`Seized::take`]s each.
    pub(crate) fn seize(&self) -> Seized<'_> {
        let guard = lock(&self.head.lock);
        self.ring();
        Seized { cache: self, guard }
    }
}

/// A cache whose lock a reclaimer holds and whose doorbell it rang (see [`Cache::seize`]).
pub(crate) struct Seized<'a> {
    cache: &'a Cache,
    guard: MutexGuard<'a, ()>,
}

impl<'a> Seized<'a> {
    /// Waits for the owner's current operation, if any, to finish, and takes the cache over.
    ///
    /// # Safety
    /// A successful [`fence::heavy`] ran on this thread after [`Cache::seize`], and this
    /// thread is not the cache's owner in the middle of an operation.
    pub(crate) unsafe fn take(self) -> Owner<'a> {
        let mut round = 0;
        // `Acquire`: pairs with the owner's `Release` store of 0, so that everything it did
        // in its last operation happens before what the reclaimer does now.
        while self.cache.head.bell.using.load(Acquire) != 0 {
            spin_wait(&mut round);
        }
        Owner {
            cache: self.cache,
            lock: Some(self.guard),
            marked: false,
            _not_send: PhantomData,
        }
    }
}

impl std::fmt::Debug for Seized<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Seized")
            .field("key", &self.cache.head.own_key)
            .finish()
    }
}

/// The right to work on a cache's stacks (module docs): the only way to move buffers in or
/// out of it. Neither `Send` nor `Sync`.
pub(crate) struct Owner<'a> {
    cache: &'a Cache,
    /// The cache's lock, for an owner that entered with the doorbell rung and for reclaimers.
    lock: Option<MutexGuard<'a, ()>>,
    /// True if this owner set the busy mark (and clears it when dropped).
    marked: bool,
    _not_send: PhantomData<*const ()>,
}

impl Drop for Owner<'_> {
    fn drop(&mut self) {
        if self.marked {
            // `Release`: a reclaimer that reads this 0 sees everything this owner did.
            self.cache.head.bell.using.store(0, Release);
        }
        // The lock, if held, is released after (field order).
    }
}

impl std::fmt::Debug for Owner<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Owner")
            .field("key", &self.cache.head.own_key)
            .field("locked", &self.lock.is_some())
            .finish()
    }
}

impl<'a> Owner<'a> {
    /// An owner for a cache nobody else can reach (unit tests and loom models).
    ///
    /// # Safety
    /// No other thread can reach `cache`, and no other `Owner` of it is live.
    #[cfg(test)]
    pub(crate) unsafe fn new_unshared(cache: &'a Cache) -> Self {
        Owner {
            cache,
            lock: None,
            marked: false,
            _not_send: PhantomData,
        }
    }

    /// The cache.
    pub(crate) fn cache(&self) -> &'a Cache {
        self.cache
    }

    /// True if this owner holds the cache's lock (a reclaimer, or an owner that found its
    /// doorbell rung); only such an owner may re-arm the doorbell.
    pub(crate) fn locked(&self) -> bool {
        self.lock.is_some()
    }

    /// True if the doorbell is rung (another thread rang it since the last re-arm).
    pub(crate) fn rung(&self) -> bool {
        self.cache.head.bell.key.load(Relaxed) != self.cache.head.own_key.raw()
    }

    /// Re-arms the doorbell, before looking at why it rang (see [`Cache::ring`]). Only
    /// under the lock: a reclaimer relies on the doorbell staying rung while it works.
    pub(crate) fn rearm(&self) {
        debug_assert!(self.locked(), "re-armed without the lock");
        self.cache
            .head
            .bell
            .key
            .swap(self.cache.head.own_key.raw(), Acquire);
    }

    /// Rings this cache's own doorbell (the owner wants every operation on the slow path
    /// for now: under budget pressure).
    pub(crate) fn ring_self(&self) {
        self.cache.ring();
    }

    /// Counts a slow operation; true when housekeeping is due.
    pub(crate) fn tick_countdown(&self) -> bool {
        let h = &self.cache.head;
        counters::bump(&h.slow_ops, 1);
        let left = h.countdown.load(Relaxed).saturating_sub(1);
        if left == 0 {
            h.countdown.store(SLOW_CHECK_EVERY, Relaxed);
            true
        } else {
            h.countdown.store(left, Relaxed);
            false
        }
    }

    /// The decay epoch this cache last saw.
    pub(crate) fn epoch(&self) -> u64 {
        self.cache.head.epoch.load(Relaxed)
    }

    /// Records the decay epoch seen.
    pub(crate) fn set_epoch(&self, epoch: u64) {
        self.cache.head.epoch.store(epoch, Relaxed);
    }

    /// The pool's trim generation this cache last acted on.
    pub(crate) fn trim_gen(&self) -> u64 {
        self.cache.head.trim_gen.load(Relaxed)
    }

    /// Records the trim generation acted on.
    pub(crate) fn set_trim_gen(&self, generation: u64) {
        self.cache.head.trim_gen.store(generation, Relaxed);
    }

    /// True if returns must be wiped (and so take the slow path).
    pub(crate) fn wipes(&self) -> bool {
        self.cache.head.wipe
    }

    /// True once the pool closed and the cache gave everything up.
    pub(crate) fn is_dead(&self) -> bool {
        self.cache.is_dead()
    }

    /// Number of tiers (not counting the sentinel).
    pub(crate) fn tiers(&self) -> usize {
        self.cache.head.cold.len()
    }

    /// Size of tier `t`.
    pub(crate) fn size(&self, t: usize) -> usize {
        self.cache.tiers[t].size
    }

    /// Marks the cache dead (the pool closed): every operation takes the slow path from now
    /// on, which keeps nothing. The stacks must already be empty.
    pub(crate) fn mark_dead(&self) {
        let c = self.cache;
        c.head.dead.store(true, Relaxed);
        c.ring();
        for t in 0..self.tiers() {
            debug_assert_eq!(self.len(t), 0);
            self.set_limit(t, 0);
            self.free_storage(t);
        }
    }
}

/// Builds the cache's single allocation: `head`, then `tiers` (the custom unsized layout the
/// fast path's constant offsets rely on).
fn assemble(head: Head, tiers: Vec<Tier>) -> Box<Cache> {
    use std::alloc::{alloc, handle_alloc_error, Layout};
    let n = tiers.len();
    let (layout, off) = Layout::new::<Head>()
        .extend(Layout::array::<Tier>(n).expect("a few thousand tiers at most"))
        .expect("a few hundred kilobytes at most");
    let layout = layout.pad_to_align();
    debug_assert_eq!(off, TIERS_OFF);
    // SAFETY: the layout has a non-zero size (the head alone is).
    let base = unsafe { alloc(layout) };
    if base.is_null() {
        handle_alloc_error(layout);
    }
    // SAFETY: `base` is a fresh allocation of `layout`: room for the head at 0 and `n` tiers
    // from `off`, each suitably aligned (the layout's alignment is the larger of the two, and
    // `off` a multiple of the tiers' alignment). Each slot is written once, with a value moved
    // out of `head` or `tiers` (whose buffer is then freed without dropping its elements).
    unsafe {
        base.cast::<Head>().write(head);
        let first = base.add(off).cast::<Tier>();
        for (i, tier) in tiers.into_iter().enumerate() {
            first.add(i).write(tier);
        }
    }
    // A pointer to the whole allocation with the tail's length as metadata: the fat pointer
    // of a `Cache` with `n` tiers, whose layout (`Layout::for_value`) is `layout` again.
    let fat = std::ptr::slice_from_raw_parts_mut(base.cast::<Tier>(), n) as *mut Cache;
    // SAFETY: `fat` points at a fully initialized `Cache` in memory from the global allocator
    // with the layout `Box` will free it with; nothing else owns it.
    unsafe { Box::from_raw(fat) }
}

/// The thread caches' lookup table for `classes`: for every bucket of `usize`, the byte
/// offset in a cache's `tiers` of the bucket's first candidate tier (the sentinel's above the
/// largest tier). Byte offsets rather than indices: the fast path adds them to the tiers'
/// address as they are, and they serve as the tier hint a `PooledBuf` carries back. Built once
/// per pool and copied into each of its caches.
pub(crate) fn offset_table(classes: &Classes) -> Box<[u32; ALL_BUCKETS]> {
    let mut table = Box::new([0u32; ALL_BUCKETS]);
    for (slot, &t) in table.iter_mut().zip(classes.fast_table().iter()) {
        *slot = (usize::from(t) * TIER_STRIDE) as u32;
    }
    table
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("key", &self.head.own_key)
            .field("tiers", &self.head.cold.len())
            .field("reserved", &self.head.reserved.load(Relaxed))
            .field("dead", &self.is_dead())
            .finish()
    }
}

impl Drop for Cache {
    /// Frees whatever the stacks still hold (normally nothing: the owner or a reclaimer
    /// empties them first) and the stacks' storage, and gives the reservations back to the
    /// allowance. `&mut self`: no owner is left.
    fn drop(&mut self) {
        for (tier, cold) in self.tiers.iter().zip(self.head.cold.iter()) {
            stack::free_all(tier, cold);
        }
        let large = self.head.large.load(Relaxed);
        let large_bytes = large.checked_sub(1).map_or(0, |t| self.tiers[t].size);
        self.head
            .allowance
            .give(self.head.reserved.load(Relaxed) + large_bytes);
    }
}

/// The owner's side of a get and a return for the loom models, on a given cache instead of
/// this thread's table (loom's models drive the components, not the thread-local table): the
/// fast path, and the slow path when the fast one refuses, as `pool.rs` and `buf.rs` do.
#[cfg(all(test, loom))]
pub(crate) mod tls_for_models {
    use super::{fast, policy, Cache, Pushed};
    use crate::fresh::Fresh;
    use crate::key::Tag;
    use crate::state::{Got, PoolState};
    use crate::sync::Arc;

    /// A get of `n` bytes on `cache`'s thread (which must not have to wait).
    pub(crate) fn get(cache: &Arc<Cache>, pool: &PoolState, n: usize) -> (Vec<u8>, Tag) {
        try_get(cache, pool, n).expect("the model's get does not wait")
    }

    /// A get of `n` bytes on `cache`'s thread; `None` where it would have to wait for budget.
    pub(crate) fn try_get(
        cache: &Arc<Cache>,
        pool: &PoolState,
        n: usize,
    ) -> Option<(Vec<u8>, Tag)> {
        let key = cache.head.own_key;
        // SAFETY: the calling model thread is the cache's owner, in no other operation on it.
        if let Some(hit) = unsafe { fast::pop(Cache::doorbell(cache), key, n) } {
            let tag = Tag::from_hint(hit.hint);
            return Some((hit.into_vec(), tag));
        }
        // SAFETY: as above.
        let o = unsafe { cache.enter() };
        match policy::get_slow(&o, pool, n, Fresh::Plain, 0).expect("no allocation failure") {
            Got::Buf(v, tag) => Some((v, tag)),
            Got::Wait(_) => None,
        }
    }

    /// A return of `v` (tag `tag`) on `cache`'s thread.
    pub(crate) fn give_back(cache: &Arc<Cache>, pool: &PoolState, mut v: Vec<u8>, tag: Tag) {
        let key = cache.head.own_key;
        // SAFETY: as in `get`.
        match unsafe { fast::push(Cache::doorbell(cache), key, tag.hint(), &mut v) } {
            Pushed::Kept | Pushed::Due => {} // taken: `v` is empty
            Pushed::Refused => {
                // SAFETY: as in `get`.
                let o = unsafe { cache.enter() };
                policy::put_slow(&o, pool, v, tag);
            }
        }
    }
}
