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
use std::mem::size_of;

use super::block::{Cache, SLOW_CHECK_EVERY};
use super::stack::{
    count_return, fold, place, publish, pushes, Count, Slot, CHECK_EVERY, MAX_LOCAL_PER_TIER,
    MIN_CHECK_EVERY,
};
use crate::base::key::TIER_STRIDE;
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
            return Owner {
                cache: self,
                after: Cell::new(After::default()),
                lock: None,
                marked: true,
                _not_send: PhantomData,
            };
        }
        // Rung: a reclaimer may be at work. Step aside, then wait for it at the lock.
        bell.using.store(0, Release);
        Owner {
            cache: self,
            after: Cell::new(After::default()),
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
        Owner {
            cache: self.cache,
            after: Cell::new(After::default()),
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
    pub(crate) steal: bool,
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
            after: Cell::new(After::default()),
            lock: None,
            marked: false,
            _not_send: PhantomData,
        }
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
    pub(crate) fn defer_steal(&self) {
        let mut a = self.after.get();
        a.steal = true;
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
    pub(crate) fn tick_countdown(&self) -> bool {
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
    fn check_every(&self) -> u64 {
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
    /// on, which keeps nothing. The stacks must already be empty, with no room reserved and
    /// no storage (`policy/service.rs`, `release_all`).
    pub(crate) fn mark_dead(&self) {
        let c = self.cache;
        debug_assert!((0..self.tiers()).all(|t| self.len(t) == 0 && self.limit(t) == 0));
        c.head.dead.store(true, Relaxed);
        c.ring();
    }
}

impl Owner<'_> {
    /// Buffers on tier `t`'s stack.
    #[inline]
    pub(crate) fn len(&self, t: usize) -> usize {
        let (tier, cold) = self.cache.tier(t);
        cold.len(tier)
    }

    /// Tier `t`'s low-water mark since the last decay.
    #[inline]
    pub(crate) fn low(&self, t: usize) -> usize {
        let tier = &self.cache.tiers[t];
        let end = tier.end.load(Relaxed) as usize;
        (end - tier.low.load(Relaxed) as usize) / size_of::<Slot>()
    }

    /// Starts a new decay interval for tier `t`: its low-water mark is its length now, and
    /// it may be lent a larger tier's buffer again.
    #[inline]
    pub(crate) fn reset_low(&self, t: usize) {
        let (tier, cold) = self.cache.tier(t);
        tier.low.store(tier.head.load(Relaxed), Relaxed);
        cold.loans.store(0, Relaxed);
    }

    /// Loans to gets of tier `t` this interval (`policy/retrieve.rs`).
    #[inline]
    pub(crate) fn loans(&self, t: usize) -> u32 {
        self.cache.head.cold[t].loans.load(Relaxed)
    }

    /// Counts a loan to a get of tier `t` (saturating). A load and a store: only the owner
    /// touches the count.
    #[inline]
    pub(crate) fn count_loan(&self, t: usize) {
        let loans = &self.cache.head.cold[t].loans;
        loans.store(loans.load(Relaxed).saturating_add(1), Relaxed);
    }

    /// How many buffers a refill of tier `t` asks for now, at most `max` (`>= 1`, a refill's
    /// batch).
    #[inline]
    pub(crate) fn fill(&self, t: usize, max: usize) -> usize {
        debug_assert!(max >= 1);
        (self.cache.head.cold[t].fill.load(Relaxed) as usize).clamp(1, max)
    }

    /// Doubles what tier `t`'s next refill asks for, up to `max`: a refill just moved
    /// buffers. A load and a store: only the owner touches the count.
    #[inline]
    pub(crate) fn double_fill(&self, t: usize, max: usize) {
        let next = (2 * self.fill(t, max)).min(max);
        self.cache.head.cold[t].fill.store(next as u32, Relaxed);
    }

    /// Halves what tier `t`'s next refill asks for (not below one buffer): buffers it took
    /// stayed idle.
    #[inline]
    pub(crate) fn halve_fill(&self, t: usize) {
        let fill = &self.cache.head.cold[t].fill;
        fill.store((fill.load(Relaxed) / 2).max(1), Relaxed);
    }

    /// Gives tier `t` its slots if it has none yet (a limit was just set above 0, or is about
    /// to be: `policy/exchange.rs`, `refill`): spare ones of the pool's (`spare.rs`) or fresh ones. They
    /// offer the fast path no room until [`Self::set_full`] gives it the limit's.
    pub(in crate::engine) fn ensure_storage(&self, t: usize) {
        let (tier, cold) = self.cache.tier(t);
        if tier.end.load(Relaxed).is_null() {
            let end = self
                .cache
                .head
                .spares
                .take(cold.cap)
                .wrapping_add(cold.cap as usize);
            // `Release`: a reader that sees the stack's top sees its end (`counters.rs`).
            tier.end.store(end, Release);
            tier.head.store(end, Release);
            tier.low.store(end, Relaxed);
            // No room yet: with `full` still null, the fast path's `head <= full` check would
            // let returns past the limit, and past the slots (a double free in the report's
            // `idle-threads` workload, when a refill gave a tier its slots and found nothing).
            tier.full.store(end, Relaxed);
        }
    }

    /// Points tier `t`'s `full` at `limit` buffers (0 when returns must take the slow path).
    #[inline]
    pub(in crate::engine) fn set_full(&self, t: usize, limit: usize) {
        let (tier, cold) = self.cache.tier(t);
        if !tier.end.load(Relaxed).is_null() {
            let cap = cold.cap as usize;
            tier.full.store(tier.at(cap, cap - limit), Relaxed);
        }
    }

    /// True if tier `t` has neither a reservation nor storage: giving either up would change
    /// nothing.
    #[inline]
    pub(crate) fn is_bare(&self, t: usize) -> bool {
        let (tier, cold) = self.cache.tier(t);
        cold.limit.load(Relaxed) == 0 && tier.end.load(Relaxed).is_null()
    }

    /// Gives up tier `t`'s storage if it has no limit and holds nothing (decay of an idle tier,
    /// `trim`, close, thread exit), to the pool's spares (`spare.rs`), which keep a bounded
    /// amount for the next cache and free the rest: it was allocated while buffers came in,
    /// so it may sit above them in the heap and pin it (glibc trims only the top).
    pub(crate) fn free_storage(&self, t: usize) {
        let (tier, cold) = self.cache.tier(t);
        if cold.limit.load(Relaxed) != 0 || cold.len(tier) != 0 {
            return;
        }
        // A tier that gave up its room and storage starts its refills over at one buffer.
        cold.fill.store(0, Relaxed);
        for p in [&tier.head, &tier.low, &tier.full] {
            // `Release`: a reader that sees the stack gone sees the counts of what left it.
            p.store(std::ptr::null_mut(), Release);
        }
        let end = tier.end.swap(std::ptr::null_mut(), Release);
        if !end.is_null() {
            // SAFETY: the array `end` closes was taken by `ensure_storage` for this tier's
            // `cap` (which never changes); every pointer into it was just cleared.
            unsafe { (self.cache.head.spares).give(end.wrapping_sub(cold.cap as usize), cold.cap) };
        }
    }

    /// Pops the newest buffer of tier `t`, if any (past the low-water mark too, which it
    /// moves).
    #[inline]
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
    #[inline]
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
            fold(tier, cold, self.check_every());
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
        // `f` unwinds, the rest leak instead of being owned twice. (Uninitialized: zeroing the
        // 512 bytes would cost a small flush more than its moves.)
        let mut out = [std::mem::MaybeUninit::<*mut u8>::uninit(); MAX_LOCAL_PER_TIER];
        for (k, o) in out[..n].iter_mut().enumerate() {
            // SAFETY: `cap - 1 - k >= cap - n >= cap - len`: a filled slot (the oldest is last).
            o.write(unsafe { &*tier.at(cap, cap - 1 - k) }.load(Relaxed));
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
        // from the bottom were among them, and did not stay idle: a hand-off's consumer, whose
        // stack goes from half full to full and back, keeps its circulating buffers.
        let untouched = (self.low(t)).saturating_sub(n).min(len - n);
        tier.low.store(tier.at(cap, cap - untouched), Relaxed);
        for p in &out[..n] {
            // SAFETY: the first `n` entries were written above. The slot owned a buffer of
            // capacity exactly `size` from the global allocator; it has left the stack, so
            // this `Vec` is its only owner.
            f(unsafe { Vec::from_raw_parts(p.assume_init(), 0, tier.size) });
        }
        n
    }

    /// Adds `n` to one of tier `t`'s slow-path counters.
    #[inline]
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
    /// hand-off) never returns, but refills: with returns alone it would look idle at every
    /// decay, and lose its storage and allocate it again.
    pub(crate) fn idle_since_last_look(&self, t: usize) -> bool {
        let (tier, cold) = self.cache.tier(t);
        let entered = pushes(tier, cold).wrapping_add(tier.refilled.load(Relaxed));
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
            fold(tier, cold, self.check_every());
        }
    }

    /// Counts a get above the largest tier.
    #[inline]
    pub(crate) fn count_oversize(&self) {
        bump(&self.cache.head.oversize, 1);
    }

    /// Counts a returned buffer that fits no tier.
    #[inline]
    pub(crate) fn count_untiered(&self) {
        bump(&self.cache.head.untiered_returned, 1);
    }
}
