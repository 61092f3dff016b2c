//! What an [`Owner`] does to a tier's stack: push, pop, take the oldest out, its low-water
//! mark and loans for the interval, its slow-start fill, its storage, and the counters the
//! slow path keeps. Who may do it, and when, is `owner.rs`; how much a tier may hold is
//! `book.rs`.

use std::mem::size_of;

use super::owner::Owner;
use super::stack::{count_return, fold, place, publish, pushes, Count, Slot, MAX_LOCAL_PER_TIER};
use crate::base::key::TIER_STRIDE;
use crate::base::sync::Ordering;
use crate::observe::stats::bump;

use Ordering::{Relaxed, Release};

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

    /// True if tier `t` has neither a booking nor storage: giving either up would change
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
