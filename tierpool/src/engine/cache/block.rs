//! A thread cache's memory: one allocation holding the doorbell, the lookup table, the cold
//! state and a 64-byte line per tier, laid out so that the fast path (`fast.rs`) finds
//! everything at a constant offset from the doorbell's address (the layout is drawn in
//! `mod.rs`). Who may change what is in `owner.rs`.

use std::mem::{align_of, size_of};

use super::spare::SpareSlots;
use super::stack::{free_all, stack_cap, Tier, TierCold, MIN_CHECK_EVERY};
use crate::base::key::{Key, RUNG, TIER_STRIDE};
use crate::base::sync::{Arc, AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Mutex, Ordering};
use crate::engine::class::{Classes, ALL_BUCKETS};
use crate::engine::depot::Allowance;

use Ordering::{Relaxed, Release};

/// The doorbell and the owner's busy mark: the first bytes of a cache, where the thread-local
/// slot points (`engine/local.rs`).
#[derive(Debug)]
#[repr(C)]
pub(crate) struct Doorbell {
    /// The pool's key while the fast path may run, [`RUNG`] otherwise.
    pub(in crate::engine) key: AtomicU32,
    /// 1 while the owner works on the stacks (`owner.rs`).
    pub(in crate::engine) using: AtomicU32,
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
    pub(in crate::engine) bell: Doorbell,
    /// `tiers.len() * TIER_STRIDE`: tier hints below this are offsets of this cache's tiers.
    pub(in crate::engine) hint_end: usize,
    /// Bucket → byte offset in `tiers` of the bucket's first candidate tier (the sentinel's
    /// above the largest tier); see [`offset_table`].
    pub(in crate::engine) table: [u32; ALL_BUCKETS],
    pub(in crate::engine) own_key: Key,
    /// Held by a reclaimer while it works, and by the owner while it works with a rung
    /// doorbell (`owner.rs`).
    pub(in crate::engine) lock: Mutex<()>,
    /// One per pool tier (no sentinel).
    pub(in crate::engine) cold: Box<[TierCold]>,
    /// The most bytes this cache may book (`thread_cache_bytes`, or less under a budget).
    pub(in crate::engine) cache_bytes: usize,
    /// Sum over tiers within `cache_bytes` of `limit * size`; never above `cache_bytes`.
    pub(in crate::engine) booked: AtomicUsize,
    /// The large slot: 1 + the index of the one tier above `cache_bytes` that may hold a
    /// buffer (its limit is 1), or 0.
    pub(in crate::engine) large: AtomicUsize,
    /// The pool's allowance, which every booking is drawn from.
    pub(in crate::engine) allowance: Arc<Allowance>,
    /// The pool's spare stack storage, where this cache's stacks get and leave theirs.
    pub(in crate::engine) spares: Arc<SpareSlots>,
    pub(in crate::engine) wipe: bool,
    pub(in crate::engine) dead: AtomicBool,
    /// Slow operations until the next housekeeping.
    pub(in crate::engine) countdown: AtomicU32,
    /// Returns to a tier from one housekeeping look to the next: a tier's countdown
    /// (`returns_left`) starts here after each look. From `MIN_CHECK_EVERY` up to
    /// `CHECK_EVERY` for a thread whose returns come close together in time, so that a
    /// thread whose returns are far apart still looks at the clock a few times an interval
    /// (`Owner::pace`).
    pub(in crate::engine) check_every: AtomicU64,
    /// The pool clock's sixteenth of an interval at this cache's last look.
    pub(in crate::engine) looked: AtomicU64,
    pub(in crate::engine) epoch: AtomicU64,
    pub(in crate::engine) trim_gen: AtomicU64,
    /// Gets above the largest tier.
    pub(in crate::engine) oversize: AtomicU64,
    /// Returned buffers that fit no tier (released).
    pub(in crate::engine) untiered_returned: AtomicU64,
    /// Slow operations ever (part of the activity signature, `counters.rs`).
    pub(in crate::engine) slow_ops: AtomicU64,
    /// The activity signature when the pool last ticked (written by the ticking thread under
    /// the pool's reclaim lock).
    pub(in crate::engine) seen: AtomicU64,
}

impl Head {
    /// A head for a cache of the pool with key `key`: its doorbell armed, the pool's fixed
    /// parts (the lookup table, the tiers' cold state, the room, the allowance, the spare
    /// store), the housekeeping clocks at `(epoch, trim_gen)`, every counter and flag at its
    /// start. [`Cache::new`] and [`Cache::reset`] both make theirs here.
    #[allow(clippy::too_many_arguments)]
    fn new(
        key: Key,
        hint_end: usize,
        table: [u32; ALL_BUCKETS],
        cold: Box<[TierCold]>,
        cache_bytes: usize,
        wipe: bool,
        (epoch, trim_gen): (u64, u64),
        allowance: Arc<Allowance>,
        spares: Arc<SpareSlots>,
    ) -> Self {
        Head {
            bell: Doorbell {
                key: AtomicU32::new(key.raw()),
                using: AtomicU32::new(0),
            },
            hint_end,
            table,
            own_key: key,
            lock: Mutex::new(()),
            cold,
            cache_bytes,
            booked: AtomicUsize::new(0),
            large: AtomicUsize::new(0),
            allowance,
            spares,
            wipe,
            dead: AtomicBool::new(false),
            countdown: AtomicU32::new(SLOW_CHECK_EVERY),
            check_every: AtomicU64::new(MIN_CHECK_EVERY),
            looked: AtomicU64::new(epoch.saturating_mul(16)),
            epoch: AtomicU64::new(epoch),
            trim_gen: AtomicU64::new(trim_gen),
            oversize: AtomicU64::new(0),
            untiered_returned: AtomicU64::new(0),
            slow_ops: AtomicU64::new(0),
            seen: AtomicU64::new(u64::MAX),
        }
    }
}

/// One thread's cache for one pool (module docs).
#[repr(C)]
pub(crate) struct Cache {
    pub(in crate::engine) head: Head,
    /// One per pool tier, then the sentinel (size `usize::MAX`, never holds a buffer).
    pub(in crate::engine) tiers: [Tier],
}

/// Byte offset of the lookup table from a cache's first byte.
pub(in crate::engine) const TABLE_OFF: usize = std::mem::offset_of!(Head, table);
/// Byte offset of the first tier from a cache's first byte.
pub(in crate::engine) const TIERS_OFF: usize = size_of::<Head>();

// The layout the fast path relies on: the doorbell first, the tiers right after the head.
const _: () = {
    assert!(std::mem::offset_of!(Head, bell) == 0);
    assert!(size_of::<Head>() % align_of::<Tier>() == 0);
    assert!(size_of::<Tier>() == TIER_STRIDE);
};

impl Cache {
    /// A cache whose doorbell is armed with `key`, with nothing booked yet.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        key: Key,
        classes: &Classes,
        table: &[u32; ALL_BUCKETS],
        cache_bytes: usize,
        large_max: usize,
        wipe: bool,
        epoch: u64,
        trim_gen: u64,
        allowance: &Arc<Allowance>,
        spares: &Arc<SpareSlots>,
    ) -> Arc<Cache> {
        debug_assert_ne!(key.raw(), RUNG);
        let tiers: Vec<Tier> = classes
            .sizes()
            .iter()
            .map(|&size| Tier::new(size))
            .chain(std::iter::once(Tier::new(usize::MAX)))
            .collect();
        let cold = classes
            .sizes()
            .iter()
            .map(|&size| TierCold::new(stack_cap(cache_bytes, size, large_max)))
            .collect();
        let head = Head::new(
            key,
            tiers.len() * TIER_STRIDE,
            *table,
            cold,
            cache_bytes,
            wipe,
            (epoch, trim_gen),
            Arc::clone(allowance),
            Arc::clone(spares),
        );
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
    #[inline]
    pub(crate) fn is_dead(&self) -> bool {
        self.head.dead.load(Relaxed)
    }

    /// True if the cache holds nothing of the pool's: no stack storage (so no buffer), no
    /// booking, no large slot, and it is not dead. What an exiting thread's cache is
    /// once it gave everything back (`policy/housekeeping.rs`, `retire`): such a cache may be parked for the
    /// next thread ([`Caches::detach`](super::reclaim::Caches::detach)). Read by its owner,
    /// by its exiting thread once it gave everything back, or by a holder of the only
    /// reference.
    pub(crate) fn is_empty(&self) -> bool {
        !self.is_dead()
            && self.head.booked.load(Relaxed) == 0
            && self.head.large.load(Relaxed) == 0
            && self.tiers.iter().all(|t| t.end.load(Relaxed).is_null())
    }

    /// Makes an empty cache (an exited thread's, [`Self::is_empty`]) what [`Cache::new`]
    /// makes for the same pool: doorbell armed with `key`, every counter and flag as new,
    /// the housekeeping clocks at `epoch` and `trim_gen`. What stays is what the pool fixed
    /// when it made it: the tiers' sizes and capacities, the lookup table, `cache_bytes`,
    /// the allowance and the spare store. Returns false, and changes nothing, if the cache is
    /// not empty or not `key`'s. `&mut`: nothing else refers to the cache
    /// (`Arc::get_mut`), so the stores race with nothing.
    pub(crate) fn reset(&mut self, key: Key, epoch: u64, trim_gen: u64) -> bool {
        if !self.is_empty() || self.head.own_key != key {
            return false;
        }
        for t in self.tiers.iter_mut() {
            *t = Tier::new(t.size);
        }
        let mut cold = std::mem::take(&mut self.head.cold);
        for c in cold.iter_mut() {
            *c = TierCold::new(c.cap);
        }
        // The head `Cache::new` makes, from this one's fixed parts: a field added to the head
        // is set in one place.
        let h = &self.head;
        self.head = Head::new(
            key,
            h.hint_end,
            h.table,
            cold,
            h.cache_bytes,
            h.wipe,
            (epoch, trim_gen),
            Arc::clone(&h.allowance),
            Arc::clone(&h.spares),
        );
        true
    }
}

impl Cache {
    /// Tier `t` and its cold part.
    #[inline]
    pub(in crate::engine) fn tier(&self, t: usize) -> (&Tier, &TierCold) {
        (&self.tiers[t], &self.head.cold[t])
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
    for (b, slot) in table.iter_mut().enumerate() {
        *slot = (classes.first_candidate(b) * TIER_STRIDE) as u32;
    }
    table
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("key", &self.head.own_key)
            .field("tiers", &self.head.cold.len())
            .field("booked", &self.head.booked.load(Relaxed))
            .field("dead", &self.is_dead())
            .finish()
    }
}

impl Drop for Cache {
    /// Frees whatever the stacks still hold (normally nothing: the owner or a reclaimer
    /// empties them first) and the stacks' storage, and gives the bookings back to the
    /// allowance. `&mut self`: no owner is left.
    fn drop(&mut self) {
        for (tier, cold) in self.tiers.iter().zip(self.head.cold.iter()) {
            if let Some((slots, cap)) = free_all(tier, cold, self.head.own_key.align()) {
                // SAFETY: the tier's array, taken for its `cap` (`Owner::ensure_storage`);
                // the cache is being dropped, so nothing refers to it afterwards.
                unsafe { self.head.spares.give(slots, cap) };
            }
        }
        let large = self.head.large.load(Relaxed);
        let large_bytes = large.checked_sub(1).map_or(0, |t| self.tiers[t].size);
        self.head
            .allowance
            .give(self.head.booked.load(Relaxed) + large_bytes);
    }
}
