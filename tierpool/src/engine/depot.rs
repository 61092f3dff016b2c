//! The shared depot, where thread caches exchange batches of buffers, and the pool's
//! [`Allowance`]: the one number that bounds what the depot and every thread cache retain.
//!
//! One stack of buffers per tier, each behind its own lock on its own cache line. The bytes
//! the depot holds are counted in the allowance, together with the room thread caches have
//! booked (`cache/book.rs`), so `max_retained_bytes` bounds both at once.
//!
//! # Invariants
//! - The allowance's `held` is the sum of the capacities of all buffers in the depot plus
//!   every thread cache's booking, except transiently inside an operation: bytes are
//!   *taken* before buffers are pushed or room is booked and *given* back after buffers
//!   are popped or room is given up, so `held <= cap` at every instant and what is actually
//!   retained never exceeds `held`.
//! - Every buffer in tier `t`'s `exact` stack has capacity exactly `sizes[t]` (these are the
//!   ones thread caches take in batches); every buffer in its `odd` stack has a larger capacity
//!   (foreign or grown buffers, filed with
//!   [`Classes::for_put`](crate::engine::class::Classes::for_put)), handed out one at a time. So handing
//!   one out never makes a false hit.
//! - Once `closed` is set, no buffer stays in the depot: [`Depot::close`] empties every tier
//!   after setting the flag, and every push checks the flag under the tier's lock, so a push
//!   either sees the flag (and refuses) or lands before `close` empties that tier.
//!
//! # Working-set decay
//! Each of a tier's stacks is an [`IdleStack`]: at each interval boundary the buffers that
//! stayed in it through the whole interval are released (`idle.rs`).

use crate::base::sync::{
    lock, Arc, AtomicBool, AtomicUsize, CachePadded, Mutex, MutexGuard, Ordering,
};
use crate::engine::idle::IdleStack;
use crate::observe::stats::Stats;
use crate::sys::alloc::free;
use crate::sys::trim::free_released;

/// What a pool may retain, depot and thread caches together: `held <= cap` at every instant
/// (module docs). Shared by the depot and the pool's thread caches; touched only on slow
/// paths (a batch moved, a booking changed).
#[derive(Debug)]
pub(crate) struct Allowance {
    held: CachePadded<AtomicUsize>,
    cap: usize,
}

impl Allowance {
    /// An allowance of `cap` bytes, none held.
    pub(crate) fn new(cap: usize) -> Self {
        Allowance {
            held: CachePadded(AtomicUsize::new(0)),
            cap,
        }
    }

    /// Takes `n` bytes if they fit under the cap; false (nothing taken) otherwise.
    pub(crate) fn take(&self, n: usize) -> bool {
        // Relaxed is enough: the count is only a budget. The buffers themselves are published
        // by the depot's locks or their cache's owner, and no reader infers the presence of a
        // buffer from this count.
        n == 0
            || self
                .held
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| {
                    cur.checked_add(n).filter(|&total| total <= self.cap)
                })
                .is_ok()
    }

    /// Takes the largest multiple of `unit` (`> 0`) up to `n` that fits; returns it.
    pub(crate) fn take_up_to(&self, n: usize, unit: usize) -> usize {
        let mut taken = 0;
        let _ = self
            .held
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |cur| {
                let room = self.cap.saturating_sub(cur).min(n);
                taken = room - room % unit;
                (taken > 0).then_some(cur + taken)
            });
        taken
    }

    /// Gives back `n` bytes taken before.
    pub(crate) fn give(&self, n: usize) {
        if n > 0 {
            let before = self.held.fetch_sub(n, Ordering::Relaxed);
            debug_assert!(before >= n, "gave back more than was taken");
        }
    }

    /// Bytes held now (depot contents plus bookings).
    pub(crate) fn held(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    /// The cap (`max_retained_bytes`): the loom models check `held() <= cap()`.
    #[cfg(loom)]
    pub(crate) fn cap(&self) -> usize {
        self.cap
    }

    /// Bytes that may be taken now: the cap (`max_retained_bytes`) less what is held.
    pub(crate) fn free(&self) -> usize {
        self.cap.saturating_sub(self.held())
    }
}

#[derive(Debug, Default)]
struct DepotTier {
    /// Buffers of exactly the tier's size.
    exact: IdleStack<Vec<u8>>,
    /// Buffers of a larger capacity.
    odd: IdleStack<Vec<u8>>,
    /// Sum of capacities in both stacks.
    bytes: usize,
    /// Buffers released by decay, trim and eviction.
    discarded: u64,
}

/// How a buffer leaving the depot for the allocator is freed, by why it leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Leaving {
    /// Decay and trim: the buffers went idle, and their pages leave the process now
    /// (`free_released`); an emptied stack frees its storage too.
    Idle,
    /// Eviction: room for a cache at work, whose next fresh buffer the allocator makes from
    /// that memory, so the buffers are freed as they are, and the stacks keep their storage.
    Evicted,
}

impl DepotTier {
    /// Releases the `exact` and `odd` oldest buffers (or, with `None`, those that stayed
    /// idle through the interval, which then ends); returns the bytes freed. They are freed
    /// here, under the tier's lock: releases are rare, and freeing in place needs no scratch
    /// allocation.
    fn release(&mut self, n: Option<(usize, usize)>, why: Leaving, align: usize) -> usize {
        let shrink = why == Leaving::Idle;
        let mut freed = 0;
        let mut count = 0;
        let mut free_one = |b: Vec<u8>| {
            freed += b.capacity();
            count += 1;
            if shrink {
                free_released(b, align);
            } else {
                free(b, align);
            }
        };
        match n {
            Some((exact, odd)) => {
                self.exact.take_oldest(exact, shrink, &mut free_one);
                self.odd.take_oldest(odd, shrink, &mut free_one);
            }
            None => {
                self.exact.decay(false, shrink, &mut free_one);
                self.odd.decay(false, shrink, &mut free_one);
            }
        }
        self.discarded += count;
        self.bytes -= freed;
        freed
    }
}

/// The shared, bounded store of retained buffers, one pair of stacks per tier.
#[derive(Debug)]
pub(crate) struct Depot {
    tiers: Box<[CachePadded<Mutex<DepotTier>>]>,
    sizes: Box<[usize]>,
    allowance: Arc<Allowance>,
    closed: AtomicBool,
    /// The alignment the buffers were allocated with, which frees them (`sys/alloc.rs`).
    align: usize,
}

impl Drop for Depot {
    /// Frees what is left with the pool's alignment (dropped as `Vec`s, an aligned pool's
    /// buffers would be freed with alignment 1).
    fn drop(&mut self) {
        if self.align == 1 {
            return;
        }
        for tier in self.tiers.iter() {
            let mut tier = lock(&tier.0);
            let (exact, odd) = (tier.exact.len(), tier.odd.len());
            tier.release(Some((exact, odd)), Leaving::Evicted, self.align);
        }
    }
}

/// One tier of the depot, locked: for moving a batch between a thread cache and the depot
/// under one lock acquisition. The depot's byte count is settled when the guard drops.
pub(crate) struct Guard<'a> {
    depot: &'a Depot,
    /// Always `Some` until the guard drops (an `Option` so that `drop` can unlock first).
    tier: Option<MutexGuard<'a, DepotTier>>,
    size: usize,
    /// Bytes taken out under this guard, unbooked when it drops (outside the lock).
    taken: usize,
}

impl Depot {
    /// A depot for tiers of these sizes, counting what it holds in `allowance`, of buffers
    /// allocated with alignment `align` (1 for a plain pool).
    pub(crate) fn new(sizes: &[usize], allowance: Arc<Allowance>, align: usize) -> Self {
        Depot {
            tiers: sizes
                .iter()
                .map(|_| CachePadded(Mutex::new(DepotTier::default())))
                .collect(),
            sizes: sizes.into(),
            allowance,
            closed: AtomicBool::new(false),
            align,
        }
    }

    /// A depot with an allowance of its own of `cap` bytes (for tests and models).
    #[cfg(test)]
    pub(crate) fn with_cap(sizes: &[usize], cap: usize) -> Self {
        Depot::new(sizes, Arc::new(Allowance::new(cap)), 1)
    }

    /// The allowance this depot counts its contents in (shared with the pool's thread caches).
    pub(crate) fn allowance(&self) -> &Arc<Allowance> {
        &self.allowance
    }

    /// Bytes currently retained in the depot (locks every tier: for stats and tests).
    pub(crate) fn bytes(&self) -> usize {
        self.lock_all().iter().map(|t| t.bytes).sum()
    }

    /// Every tier's lock at once, in ascending order, so that what is read through them is
    /// one instant's contents. Read tier by tier instead, a sum can count bytes that left a
    /// tier already read (a cache's refill) and bytes that joined one not yet read (another
    /// cache's flush), and exceed the cap that the depot never exceeds. No other code holds
    /// two tiers' locks, so the
    /// order cannot deadlock; the depot waits for the time of a read, on the slow path only.
    fn lock_all(&self) -> Vec<MutexGuard<'_, DepotTier>> {
        self.tiers.iter().map(|t| lock(t)).collect()
    }

    /// Locks tier `t` for a batch move.
    pub(crate) fn lock(&self, t: usize) -> Guard<'_> {
        Guard {
            depot: self,
            tier: Some(lock(&self.tiers[t])),
            size: self.sizes[t],
            taken: 0,
        }
    }

    /// Puts one buffer of capacity `>= sizes[t]` into tier `t`; gives it back if the cap is
    /// reached or the pool closed.
    pub(crate) fn put_one(&self, t: usize, buf: Vec<u8>) -> Result<(), Vec<u8>> {
        debug_assert!(buf.capacity() >= self.sizes[t]);
        let mut tier = lock(&self.tiers[t]);
        if self.closed.load(Ordering::Relaxed) || !self.allowance.take(buf.capacity()) {
            return Err(buf);
        }
        tier.bytes += buf.capacity();
        if buf.capacity() == self.sizes[t] {
            tier.exact.push(buf);
        } else {
            tier.odd.push(buf);
        }
        Ok(())
    }

    /// Takes the most recently returned buffer of tier `t`, if any: of exactly the tier's size
    /// if there is one, otherwise a larger one.
    pub(crate) fn take_one(&self, t: usize) -> Option<Vec<u8>> {
        let mut g = self.lock(t);
        g.pop_exact().or_else(|| g.pop_odd())
    }

    /// Takes the most recently returned buffer of exactly tier `t`'s size, if any.
    pub(crate) fn take_exact(&self, t: usize) -> Option<Vec<u8>> {
        self.lock(t).pop_exact()
    }

    /// Takes the most recently returned buffer of tier `t` whose capacity is larger than the
    /// tier's size, if any.
    pub(crate) fn take_odd(&self, t: usize) -> Option<Vec<u8>> {
        self.lock(t).pop_odd()
    }

    /// Releases, in every tier, the buffers that stayed unused since the previous call, and
    /// starts a new interval. Returns the bytes released.
    pub(crate) fn decay(&self) -> usize {
        self.release(|_| None)
    }

    /// Releases every buffer in the depot. Returns the bytes released.
    pub(crate) fn trim(&self) -> usize {
        self.release(|tier| Some((tier.exact.len(), tier.odd.len())))
    }

    fn release(&self, how_many: impl Fn(&DepotTier) -> Option<(usize, usize)>) -> usize {
        let mut total = 0;
        for tier in self.tiers.iter() {
            let mut tier = lock(tier);
            let n = how_many(&tier);
            let freed = tier.release(n, Leaving::Idle, self.align);
            drop(tier);
            self.allowance.give(freed);
            total += freed;
        }
        total
    }

    /// Releases the depot's oldest buffers, largest tier first and never those of the tiers in
    /// `keep`, until `need` bytes are freed or nothing else is left; returns the bytes freed.
    /// Releases nothing if the other tiers hold less than `min` (`<= need`), the least room
    /// that is of any use to the caller: the buffers would be lost for nothing, each
    /// allocated again at its next get.
    ///
    /// What a thread cache that needs room displaces when the allowance is spent: what the
    /// depot holds waits for someone to take it, and the caches of threads at work come
    /// first. `keep` is the tiers whose buffers the cache may be about to take: its own and
    /// the larger tiers that may lend to it, so that booking room never releases the buffer
    /// the get would be lent a moment later.
    pub(crate) fn evict(&self, need: usize, min: usize, keep: std::ops::Range<usize>) -> usize {
        let held: usize = (self.tiers.iter().enumerate())
            .filter(|(t, _)| !keep.contains(t))
            .map(|(_, tier)| lock(tier).bytes)
            .sum();
        if held < min {
            return 0;
        }
        let mut total = 0;
        for (t, tier) in self.tiers.iter().enumerate().rev() {
            if total >= need {
                break;
            }
            if keep.contains(&t) {
                continue;
            }
            let size = self.sizes[t];
            let mut tier = lock(tier);
            let n = (need - total).div_ceil(size);
            let exact = n.min(tier.exact.len());
            let odd = (n - exact).min(tier.odd.len());
            let freed = tier.release(Some((exact, odd)), Leaving::Evicted, self.align);
            drop(tier);
            self.allowance.give(freed);
            total += freed;
        }
        total
    }

    /// Refuses every later push and releases everything retained.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Relaxed);
        // Each tier's lock orders this flag against pushes: a push that takes the lock after
        // `trim` has emptied the tier sees the flag; one that took it before is emptied here.
        self.trim();
    }

    /// Adds the depot's counters and retained buffers to `into`.
    pub(crate) fn add_to(&self, into: &mut Stats) {
        let mut bytes = 0;
        for (tier, t) in self.lock_all().iter().zip(into.tiers.iter_mut()) {
            t.discarded += tier.discarded;
            t.retained_buffers += tier.exact.len() + tier.odd.len();
            t.retained_bytes += tier.bytes;
            bytes += tier.bytes;
        }
        into.depot_bytes += bytes;
    }
}

impl Guard<'_> {
    fn t(&self) -> &DepotTier {
        self.tier.as_ref().expect("locked until dropped")
    }

    fn t_mut(&mut self) -> &mut DepotTier {
        self.tier.as_mut().expect("locked until dropped")
    }

    /// How many of `n` buffers of the tier's exact size fit under the cap (0 once the pool is
    /// closed); books their bytes, to be filled with [`Self::push_exact`].
    pub(crate) fn book_exact(&mut self, n: usize) -> usize {
        if self.depot.closed.load(Ordering::Relaxed) {
            return 0;
        }
        if n > 0 && self.depot.allowance.take(n * self.size) {
            return n;
        }
        // Near the cap: one at a time.
        let mut k = 0;
        while k < n && self.depot.allowance.take(self.size) {
            k += 1;
        }
        k
    }

    /// `buf`, checked to have exactly the tier's size (what `how` buffers always have); the
    /// panic otherwise frees it first, with the pool's alignment (dropped by the unwinding as
    /// a `Vec`, an aligned pool's buffer would be freed with alignment 1: `sys/alloc.rs`).
    fn check_exact(&self, buf: Vec<u8>, how: &str) -> Vec<u8> {
        if buf.capacity() != self.size {
            let cap = buf.capacity();
            free(buf, self.depot.align);
            panic!(
                "only exact buffers are {how}: {cap} bytes in a tier of {}",
                self.size
            );
        }
        buf
    }

    /// Adds a buffer of exactly the tier's size whose bytes were booked with
    /// [`Self::book_exact`].
    pub(crate) fn push_exact(&mut self, buf: Vec<u8>) {
        let buf = self.check_exact(buf, "booked");
        let tier = self.t_mut();
        tier.bytes += buf.capacity();
        tier.exact.push(buf);
    }

    /// Adds a buffer of exactly the tier's size whose bytes are already counted in the
    /// allowance: a thread cache hands over the room it had booked for it
    /// (`cache/book.rs`, `transfer_out`). False if the depot is closed: the buffer is freed
    /// (its pages first, as every buffer a closed pool lets go) and its room goes back to the
    /// allowance.
    pub(crate) fn push_transferred(&mut self, buf: Vec<u8>) -> bool {
        let buf = self.check_exact(buf, "transferred");
        if self.depot.closed.load(Ordering::Relaxed) {
            self.depot.allowance.give(buf.capacity());
            free_released(buf, self.depot.align);
            return false;
        }
        let tier = self.t_mut();
        tier.bytes += buf.capacity();
        tier.exact.push(buf);
        true
    }

    /// Buffers of exactly the tier's size in the depot.
    pub(crate) fn exact_len(&self) -> usize {
        self.t().exact.len()
    }

    /// Takes the newest buffer of exactly the tier's size.
    pub(crate) fn pop_exact(&mut self) -> Option<Vec<u8>> {
        let buf = self.t_mut().exact.pop()?;
        self.taken(buf.capacity());
        Some(buf)
    }

    /// Takes the newest buffer of exactly the tier's size *with its room*: its bytes stay
    /// counted in the allowance, and the caller (a thread cache) takes them over as its
    /// booking ([`Owner::transfer_in`](crate::engine::cache::owner::Owner::transfer_in)), the
    /// reverse of [`Self::push_transferred`]. So a buffer moves from the depot to a stack
    /// without the allowance having room for it twice on the way.
    #[must_use = "its bytes stay counted in the allowance: the caller holds their room"]
    pub(crate) fn pop_with_room(&mut self) -> Option<Vec<u8>> {
        let tier = self.t_mut();
        let buf = tier.exact.pop()?;
        tier.bytes -= buf.capacity();
        Some(buf)
    }

    /// Takes the newest buffer larger than the tier's size.
    pub(crate) fn pop_odd(&mut self) -> Option<Vec<u8>> {
        let buf = self.t_mut().odd.pop()?;
        self.taken(buf.capacity());
        Some(buf)
    }

    fn taken(&mut self, cap: usize) {
        self.t_mut().bytes -= cap;
        self.taken += cap;
    }
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        // Unlock first, then take the bytes of the buffers taken out of the cap's count: the
        // count is shared by every tier, and its read-modify-write need not lengthen the
        // critical section.
        drop(self.tier.take());
        self.depot.allowance.give(self.taken);
    }
}

impl std::fmt::Debug for Guard<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard").field("size", &self.size).finish()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Moves `caps.len()` exact buffers into tier `t` through a guard; returns how many fit.
    fn put_exact(d: &Depot, t: usize, n: usize) -> usize {
        let mut g = d.lock(t);
        let k = g.book_exact(n);
        for _ in 0..k {
            g.push_exact(Vec::with_capacity(g.size));
        }
        k
    }

    #[test]
    fn put_respects_cap_and_take_returns_newest() {
        let d = Depot::with_cap(&[40, 20], 100);
        assert_eq!(put_exact(&d, 0, 3), 2, "only two fit under the cap");
        assert_eq!(d.bytes(), 80);
        assert!(
            d.put_one(1, Vec::with_capacity(30)).is_err(),
            "over the cap"
        );
        assert!(d.put_one(1, Vec::with_capacity(20)).is_ok());
        assert_eq!(d.bytes(), 100);
        {
            let mut g = d.lock(0);
            assert_eq!(g.exact_len(), 2);
            assert_eq!(g.pop_exact().map(|b| b.capacity()), Some(40));
        }
        assert_eq!(d.bytes(), 60, "settled when the guard dropped");
        assert_eq!(d.take_one(1).map(|b| b.capacity()), Some(20));
        assert_eq!(d.take_one(1), None);
    }

    #[test]
    fn odd_buffers_are_kept_apart_and_handed_out_one_at_a_time() {
        let d = Depot::with_cap(&[10], 1000);
        d.put_one(0, Vec::with_capacity(15)).unwrap();
        d.put_one(0, Vec::with_capacity(10)).unwrap();
        assert_eq!(d.lock(0).exact_len(), 1);
        assert_eq!(d.take_odd(0).map(|b| b.capacity()), Some(15));
        assert_eq!(d.take_odd(0), None);
        assert_eq!(d.take_one(0).map(|b| b.capacity()), Some(10));
        assert_eq!(d.bytes(), 0);
    }

    #[test]
    fn decay_releases_only_what_stayed_idle() {
        let d = Depot::with_cap(&[10], 1000);
        put_exact(&d, 0, 6);
        assert_eq!(
            d.decay(),
            0,
            "low water starts at zero: nothing was idle a whole interval"
        );
        // During this interval the stack never goes below 4 buffers.
        let a = d.take_one(0).unwrap();
        let b = d.take_one(0).unwrap();
        d.put_one(0, a).unwrap();
        d.put_one(0, b).unwrap();
        assert_eq!(d.decay(), 40, "four buffers were never used");
        assert_eq!(d.bytes(), 20);
        assert_eq!(d.decay(), 20, "the rest idled through the next interval");
        assert_eq!(d.bytes(), 0);
        let mut s = Stats::empty(&[10]);
        d.add_to(&mut s);
        assert_eq!(s.tiers[0].discarded, 6);
    }

    #[test]
    fn evict_frees_oldest_of_largest_tiers_first_and_spares_keep() {
        let d = Depot::with_cap(&[10, 20, 40], 1000);
        put_exact(&d, 0, 3);
        put_exact(&d, 1, 2);
        d.put_one(1, Vec::with_capacity(25)).unwrap(); // odd: after the exact ones
        put_exact(&d, 2, 2);
        assert_eq!(d.bytes(), 30 + 40 + 25 + 80);
        // Tier 2 is kept; 30 bytes wanted: tier 1's two exact buffers go (oldest first,
        // rounded up to whole buffers), its odd one stays.
        assert_eq!(d.evict(30, 30, 2..3), 40);
        assert_eq!(d.bytes(), 30 + 25 + 80);
        assert_eq!(d.take_one(1).map(|b| b.capacity()), Some(25));
        d.put_one(1, Vec::with_capacity(25)).unwrap();
        // Less than the least of use is held by the other tiers: nothing goes.
        assert_eq!(d.evict(1000, 56, 2..3), 0);
        assert_eq!(d.bytes(), 30 + 25 + 80);
        // More than they hold, but enough to be of use: all of them go, largest tier first;
        // tier 2 still stays.
        assert_eq!(d.evict(1000, 55, 2..3), 25 + 30);
        assert_eq!(d.bytes(), 80);
        assert_eq!(d.evict(0, 0, 0..1), 0, "nothing needed, nothing freed");
        // A range keeps every tier in it: the taker's own and its lenders.
        put_exact(&d, 1, 1);
        assert_eq!(d.evict(1000, 1, 1..3), 0);
        assert_eq!(d.bytes(), 80 + 20);
        assert_eq!(d.evict(1000, 1, 0..2), 80);
        assert_eq!(d.bytes(), 20);
        // The allowance got every byte back: the cap's room is whole again.
        assert_eq!(put_exact(&d, 0, 98), 98);
        let mut s = Stats::empty(&[10, 20, 40]);
        d.add_to(&mut s);
        assert_eq!(
            (
                s.tiers[0].discarded,
                s.tiers[1].discarded,
                s.tiers[2].discarded
            ),
            (3, 3, 2)
        );
    }

    #[test]
    fn close_empties_and_refuses() {
        let d = Depot::with_cap(&[10], 1000);
        d.put_one(0, Vec::with_capacity(10)).unwrap();
        d.close();
        assert_eq!(d.bytes(), 0);
        assert!(d.put_one(0, Vec::with_capacity(10)).is_err());
        assert_eq!(put_exact(&d, 0, 1), 0);
        assert_eq!(d.take_one(0), None);
    }
}
