//! Bookings: how many buffers each tier of a cache may hold, and where that room comes
//! from.
//!
//! Instead of adding and subtracting bytes on every operation, each tier *books* room for
//! `limit` buffers of its size, so that the fast path only compares the stack's top with its
//! limit. Bookings are bounded twice:
//!
//! - **per cache**, by `cache_bytes` (the pool's `thread_cache_bytes`, or less under a budget):
//!   the tiers within it add up to at most `cache_bytes`, and one tier above it may hold a
//!   single buffer, the *large slot* (so that a thread cycling 16 MiB buffers does not take the
//!   depot's lock on every operation; under a budget, only a tier of at most `limit / 16`);
//! - **per pool**, by the allowance (`depot.rs`): every booking, the large slot's included,
//!   is drawn from the same count as the depot's contents, which never exceeds
//!   `max_retained_bytes`. So the depot and all thread caches together never retain more than
//!   `max_retained_bytes`, however many threads there are. A thread that finds the allowance
//!   spent works with the room it has (down to none: its operations then go to the depot or
//!   the allocator) and asks the pool to reclaim idle caches (`policy/room.rs`).
//!
//! A tier's stack holds at most `min(64, cache_bytes / size)` buffers (its `cap`), 1 above
//! `cache_bytes`, none when `cache_bytes` is 0. What the policy books within that, and when,
//! is in `policy/room.rs`.

use super::owner::Owner;
use crate::base::sync::{AtomicUsize, Ordering};

use Ordering::Relaxed;

impl Owner<'_> {
    /// Tier `t`'s current limit (its booking, in buffers).
    #[inline]
    pub(crate) fn limit(&self, t: usize) -> usize {
        self.cache.head.cold[t].limit.load(Relaxed) as usize
    }

    /// The most tier `t`'s limit may be: `min(64, cache_bytes / size)`, 1 for a tier above
    /// `cache_bytes`; 0 if the tier bypasses the thread cache.
    #[inline]
    pub(crate) fn cap(&self, t: usize) -> usize {
        self.cache.head.cold[t].cap as usize
    }

    /// True if tier `t` is above `cache_bytes`: it may hold one buffer, in the large slot.
    #[inline]
    pub(crate) fn is_large(&self, t: usize) -> bool {
        self.cache.tiers[t].size > self.cache.head.cache_bytes
    }

    /// The tier holding the large slot, if any.
    #[inline]
    pub(crate) fn large_holder(&self) -> Option<usize> {
        self.cache.head.large.load(Relaxed).checked_sub(1)
    }

    /// Bytes of `cache_bytes` not booked by any tier.
    #[inline]
    pub(crate) fn unbooked(&self) -> usize {
        self.cache.head.cache_bytes - self.cache.head.booked.load(Relaxed)
    }

    /// Sets tier `t`'s limit (`<= cap`, `>= len`), allocating the stack's slots on first use,
    /// taking a larger booking from the allowance and giving a smaller one back; keeps
    /// `booked` and `full` in step. The storage stays when the limit drops to 0 (see
    /// [`Self::free_storage`]). Returns false (and changes nothing) if the booking would
    /// not fit `cache_bytes` or the allowance.
    pub(crate) fn set_limit(&self, t: usize, limit: usize) -> bool {
        let h = &self.cache.head;
        let limit = limit.min(self.cap(t));
        assert!(limit >= self.len(t), "limit below the stack");
        let (size, old) = (self.size(t), self.limit(t));
        let Some((field, value)) = self.booking(t, old, limit) else {
            return false;
        };
        if limit > old && !h.allowance.take((limit - old) * size) {
            return false;
        }
        h.allowance.give(old.saturating_sub(limit) * size);
        field.store(value, Relaxed);
        self.apply_limit(t, limit);
        true
    }

    /// What tier `t`'s limit going from `old` to `new` books in `cache_bytes`: the field and
    /// its new value, `booked` for a tier within it, the large slot's holder (one tier at a
    /// time) for a tier above it; `None` if it does not fit. The allowance is not touched.
    fn booking(&self, t: usize, old: usize, new: usize) -> Option<(&AtomicUsize, usize)> {
        let h = &self.cache.head;
        if self.is_large(t) {
            let (holder, mine) = (h.large.load(Relaxed), t + 1);
            if new == 0 {
                // No room: the slot is free again if this tier held it, else as it was.
                return Some((&h.large, if holder == mine { 0 } else { holder }));
            }
            (holder == 0 || holder == mine).then_some((&h.large, mine))
        } else {
            let booked = h.booked.load(Relaxed) - old * self.size(t) + new * self.size(t);
            (booked <= h.cache_bytes).then_some((&h.booked, booked))
        }
    }

    /// Raises tier `t`'s limit toward `target` as far as `cache_bytes` and the allowance
    /// allow (a tier within `cache_bytes` only). Returns the new limit.
    pub(crate) fn raise_limit(&self, t: usize, target: usize) -> usize {
        let h = &self.cache.head;
        let (size, old) = (self.size(t), self.limit(t));
        let target = target.min(self.cap(t));
        if target <= old || self.is_large(t) {
            return old;
        }
        let fits = (target - old).min(self.unbooked() / size);
        let more = h.allowance.take_up_to(fits * size, size) / size;
        if more == 0 {
            return old;
        }
        h.booked
            .store(h.booked.load(Relaxed) + more * size, Relaxed);
        self.apply_limit(t, old + more);
        old + more
    }

    /// True if the allowance could not give tier `t` what it asked for lately (the pool is
    /// at `max_retained_bytes`): the caller may ask for idle caches to be reclaimed.
    pub(crate) fn allowance_spent(&self, bytes: usize) -> bool {
        self.cache.head.allowance.free() < bytes
    }

    /// Lowers tier `t`'s limit by `n` buffers that just left its stack for the depot, whose
    /// room moves with them: `booked` drops, the allowance does not (the depot counts the
    /// buffers now, [`Guard::push_transferred`](crate::engine::depot::Guard::push_transferred)).
    pub(crate) fn transfer_out(&self, t: usize, n: usize) {
        let old = self.limit(t);
        debug_assert!(n <= old && old - n >= self.len(t));
        if n == 0 {
            return;
        }
        let (field, value) = self.booking(t, old, old - n).expect("a smaller limit fits");
        field.store(value, Relaxed);
        self.apply_limit(t, old - n);
    }

    /// Raises tier `t`'s limit by one buffer whose room the depot hands over with it
    /// ([`Guard::pop_with_room`](crate::engine::depot::Guard::pop_with_room)): `booked`
    /// grows (or the large slot is taken), the allowance does not (it counted the buffer in
    /// the depot). The reverse of [`Self::transfer_out`]. False (nothing changed) if the
    /// limit is at the tier's cap (0 for a tier that bypasses the cache), `cache_bytes` has
    /// no room for it, or another tier holds the large slot.
    pub(crate) fn transfer_in(&self, t: usize) -> bool {
        let old = self.limit(t);
        let booked = (old < self.cap(t))
            .then(|| self.booking(t, old, old + 1))
            .flatten();
        let Some((field, value)) = booked else {
            return false;
        };
        field.store(value, Relaxed);
        self.apply_limit(t, old + 1);
        true
    }

    fn apply_limit(&self, t: usize, limit: usize) {
        self.cache.head.cold[t].limit.store(limit as u32, Relaxed);
        if limit > 0 {
            self.ensure_storage(t);
        }
        let fast = if self.wipes() || self.is_dead() {
            0
        } else {
            limit
        };
        self.set_full(t, fast);
    }
}
