//! Who may touch a cache's stacks, and the operations of whoever may: the [`Owner`].
//!
//! A cache's stacks (the tiers' `head`, `low`, `full`, their slots, and the counters) are
//! written by one thread at a time, its *owner*: the thread the cache belongs to, or a
//! *reclaimer* (another thread emptying an idle cache, trimming, closing the pool, or sweeping
//! for a budget waiter) that has taken the cache over. The only way to write them is an
//! [`Owner`], and there are two ways to get one:
//!
//! - **The owning thread** ([`Cache::enter`], and the fast path in `fast.rs`) stores 1 in
//!   `using` (a plain store), issues a compiler fence ([`fence::light`]), and reads the
//!   doorbell. If it holds the key, it may work; when done it stores 0 in `using`
//!   (`Release`). If it is rung, the owner clears `using`, takes the cache's `lock` (waiting
//!   for any reclaimer to finish) and works under it; only then may it re-arm the doorbell.
//! - **A reclaimer** ([`Cache::seize`], then [`Seized::take`]) takes the `lock`, rings the
//!   doorbell, issues the heavy fence ([`fence::heavy`]: `membarrier`, one for a whole batch
//!   of caches), and waits until it reads 0 in `using` (`Acquire`). Then it works under the
//!   lock.
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
//! blocks while `using` is set: it waits for no cache's lock, no reclaimer's turn and no
//! budget, and what it leaves to do (refunds, which may wake waiters and so run other code;
//! the pool's tick; reclaiming quiet caches for room) runs after its owner is gone
//! ([`After`]). So a reclaimer waits at most for one operation to finish, and a reclaimer,
//! always outside any operation of its own thread, may reclaim its own thread's cache like
//! any other.

use std::cell::Cell;
use std::marker::PhantomData;

use super::block::{Cache, SLOW_CHECK_EVERY};
use super::stack::{CHECK_EVERY, MIN_CHECK_EVERY};
use crate::base::sync::{lock, spin_wait, try_lock, MutexGuard, Ordering};
use crate::observe::stats::bump;
use crate::sys::fence;

use Ordering::{Acquire, Relaxed, Release};

impl Cache {
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
            return Owner::new(self, None, true);
        }
        // Rung: a reclaimer may be at work. Step aside, then wait for it at the lock.
        bell.using.store(0, Release);
        Owner::new(self, Some(lock(&self.head.lock)), false)
    }

    /// A reclaimer's first step: takes the lock and rings. The caller issues one
    /// [`fence::heavy`] for all the caches it seized, then [`Seized::take`]s each.
    pub(crate) fn seize(&self) -> Seized<'_> {
        let guard = lock(&self.head.lock);
        self.ring();
        Seized { cache: self, guard }
    }

    /// [`Self::seize`] if the lock is free now; `None` if its owner (in a slow path with its
    /// doorbell rung, so not idle) or another reclaimer holds it.
    pub(crate) fn try_seize(&self) -> Option<Seized<'_>> {
        let guard = try_lock(&self.head.lock)?;
        self.ring();
        Some(Seized { cache: self, guard })
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
        Owner::new(self.cache, Some(self.guard), false)
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
    pub(in crate::engine) cache: &'a Cache,
    /// What the operation leaves to do once this owner is gone ([`After`]).
    after: Cell<After>,
    /// The cache's lock, for an owner that entered with the doorbell rung and for reclaimers.
    lock: Option<MutexGuard<'a, ()>>,
    /// True if this owner set the busy mark (and clears it when dropped).
    marked: bool,
    _not_send: PhantomData<*const ()>,
}

/// What an operation on a cache leaves to be done after it, once its [`Owner`] is gone: work
/// that must not run while the owner's busy mark is set or its lock held (a reclaimer may be
/// waiting for it, and the work may run code that reaches this cache again).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct After {
    /// Budget charges to give back (releasing them may wake waiters: other tasks' code).
    pub(crate) refund: usize,
    /// The pool's tick for this epoch is due (the depot's decay, reclaiming idle caches).
    pub(crate) tick: Option<u64>,
    /// The allowance was spent: reclaim caches that went quiet, for room.
    pub(crate) reclaim_quiet: bool,
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
    /// The owner of `cache`, holding its `lock` or not, and having set its busy mark
    /// (`marked`) or not: the way in ([`Cache::enter`], [`Seized::take`]) has made it so.
    fn new(cache: &'a Cache, lock: Option<MutexGuard<'a, ()>>, marked: bool) -> Self {
        Owner {
            cache,
            after: Cell::new(After::default()),
            lock,
            marked,
            _not_send: PhantomData,
        }
    }

    /// An owner for a cache nobody else can reach (unit tests and loom models).
    ///
    /// # Safety
    /// No other thread can reach `cache`, and no other `Owner` of it is live.
    #[cfg(test)]
    pub(crate) unsafe fn new_unshared(cache: &'a Cache) -> Self {
        Owner::new(cache, None, false)
    }

    /// Gives `bytes` of budget charges back once this owner is gone ([`After`]).
    pub(crate) fn defer_refund(&self, bytes: usize) {
        if bytes > 0 {
            let mut a = self.after.get();
            a.refund += bytes;
            self.after.set(a);
        }
    }

    /// Ticks the pool for `epoch` once this owner is gone ([`After`]).
    pub(crate) fn defer_tick(&self, epoch: u64) {
        let mut a = self.after.get();
        a.tick = Some(epoch);
        self.after.set(a);
    }

    /// Reclaims quiet caches for room once this owner is gone ([`After`]).
    pub(crate) fn defer_reclaim_quiet(&self) {
        let mut a = self.after.get();
        a.reclaim_quiet = true;
        self.after.set(a);
    }

    /// Takes what is left to do after this operation (and leaves nothing).
    pub(crate) fn take_after(&self) -> After {
        self.after.take()
    }

    /// The cache.
    #[inline]
    pub(crate) fn cache(&self) -> &'a Cache {
        self.cache
    }

    /// True if this owner holds the cache's lock (a reclaimer, or an owner that found its
    /// doorbell rung); only such an owner may re-arm the doorbell.
    #[inline]
    pub(crate) fn locked(&self) -> bool {
        self.lock.is_some()
    }

    /// True if the doorbell is rung (another thread rang it since the last re-arm).
    #[inline]
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
    #[inline]
    pub(crate) fn count_slow_op(&self) -> bool {
        let h = &self.cache.head;
        bump(&h.slow_ops, 1);
        let left = h.countdown.load(Relaxed).saturating_sub(1);
        if left == 0 {
            h.countdown.store(SLOW_CHECK_EVERY, Relaxed);
            true
        } else {
            h.countdown.store(left, Relaxed);
            false
        }
    }

    /// Returns to a tier between two housekeeping looks now (`Head::check_every`).
    #[inline]
    pub(super) fn check_every(&self) -> u64 {
        self.cache.head.check_every.load(Relaxed)
    }

    /// Paces the housekeeping looks of a thread whose returns are far apart in time: at a
    /// look at `now` (the pool clock's sixteenth of an interval), if two or more sixteenths
    /// began since the last one (the looks are more than a sixteenth apart), the next comes
    /// after half as many returns (at least [`MIN_CHECK_EVERY`]); if none did, after twice as
    /// many (at most `CHECK_EVERY`); after one, as many. So a thread whose returns are far
    /// apart looks about every sixteenth to eighth of an interval, not `CHECK_EVERY` returns
    /// later (which could be intervals late), and a busy thread keeps looking every
    /// `CHECK_EVERY` returns.
    pub(crate) fn pace(&self, now: u64) {
        let h = &self.cache.head;
        let gap = now.wrapping_sub(h.looked.load(Relaxed));
        h.looked.store(now, Relaxed);
        let every = self.check_every();
        let next = match gap {
            0 => (2 * every).min(CHECK_EVERY),
            1 => every,
            _ => (every / 2).max(MIN_CHECK_EVERY),
        };
        h.check_every.store(next, Relaxed);
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
    #[inline]
    pub(crate) fn wipes(&self) -> bool {
        self.cache.head.wipe
    }

    /// True once the pool closed and the cache gave everything up.
    #[inline]
    pub(crate) fn is_dead(&self) -> bool {
        self.cache.is_dead()
    }

    /// Number of tiers (not counting the sentinel).
    #[inline]
    pub(crate) fn tiers(&self) -> usize {
        self.cache.head.cold.len()
    }

    /// Size of tier `t`.
    #[inline]
    pub(crate) fn size(&self, t: usize) -> usize {
        self.cache.tiers[t].size
    }

    /// Marks the cache dead (the pool closed): every operation takes the slow path from now
    /// on, which keeps nothing. The stacks must already be empty, with no room booked and
    /// no storage (`policy/housekeeping.rs`, `release_all`).
    pub(crate) fn mark_dead(&self) {
        let c = self.cache;
        debug_assert!((0..self.tiers()).all(|t| self.len(t) == 0 && self.limit(t) == 0));
        c.head.dead.store(true, Relaxed);
        c.ring();
    }
}
