//! What other threads read of a cache: the counts `stats()` adds up (counted without counting
//! twice), what it holds, and the activity signature the pool's tick reads to tell an idle
//! cache.
//!
//! Every counter is written only by the cache's current owner, with a `Relaxed` load and a
//! plain store (never a locked instruction), so that `stats()` on another thread may read it.
//! The fast path writes `head` (which it must anyway) and, on a return, `returns_left`; the
//! stack's length is `end - head`, and the number of hits from the stack is derived:
//! `pops = pushes + refilled - flushed - released - len`. The return counter is kept as a
//! countdown (`returns_left`, folded into `pushes_folded` when it reaches 0, every 8 to
//! `CHECK_EVERY` returns: `Owner::pace`), so it doubles as the housekeeping countdown: the
//! return that ends a countdown asks the owner to look at the clock.

use super::block::Cache;
use super::stack::pushes;
use crate::base::sync::{AtomicU64, Ordering};
use crate::observe::stats::Stats;

use Ordering::{Acquire, Relaxed};

impl Cache {
    /// Adds this cache's counts to `into`; with `with_retained`, also what it holds.
    ///
    /// Read while the owner works, the counters are not a consistent set, so derived figures
    /// are clamped at zero; they are exact once the owner is quiescent and the reader has
    /// synchronized with it.
    pub(crate) fn add_to(&self, into: &mut Stats, with_retained: bool) {
        let r = |a: &AtomicU64| a.load(Relaxed);
        let acq = |a: &AtomicU64| a.load(Acquire);
        for ((tier, cold), t) in self
            .tiers
            .iter()
            .zip(self.head.cold.iter())
            .zip(&mut into.tiers)
        {
            // The owner stores each figure with `Release`, in an order chosen so that reading
            // them with `Acquire` in this order never counts a hit that did not happen: what
            // adds to the derived `pops` first (returns, refills: each stored after the stack
            // top it moved), then the stack top, then what subtracts (flushed, released: each
            // stored before the stack top it moved).
            let pushes = pushes(tier, cold);
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
        into.oversize += r(&self.head.oversize);
        into.untiered_returned += r(&self.head.untiered_returned);
    }

    /// Bytes on this cache's stacks now (read from any thread; exact when the owner is
    /// quiescent).
    pub(crate) fn held_bytes(&self) -> usize {
        self.tiers
            .iter()
            .zip(self.head.cold.iter())
            .map(|(tier, cold)| cold.len(tier) * tier.size)
            .sum()
    }

    /// A number that changes with every operation of the owner (any thread may read it):
    /// every push adds to a tier's return count (monotonic: the folded total plus the
    /// countdown's progress), every pop moves a `head` up until the stack is empty and a refill
    /// (counted) comes, every slow operation counts itself. Two equal readings an interval
    /// apart mean the owner did nothing in between, except in sequences no program produces
    /// (counts that cancel out modulo 2^64); a wrong reading only costs a reclaim. The
    /// countdowns themselves would not do: they come back to the same value every
    /// `CHECK_EVERY` returns, so a busy cache whose ticks fall that many returns apart would
    /// look idle.
    pub(crate) fn activity(&self) -> u64 {
        let mut heads = 0u64;
        let mut entered = 0u64;
        for (tier, cold) in self.tiers.iter().zip(self.head.cold.iter()) {
            heads = heads.wrapping_add(tier.head.load(Relaxed) as usize as u64);
            entered = entered
                .wrapping_add(pushes(tier, cold))
                .wrapping_add(tier.refilled.load(Relaxed));
        }
        let slow = self.head.slow_ops.load(Relaxed);
        heads
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(entered.rotate_left(21))
            .wrapping_add(slow.rotate_left(42))
    }

    /// True if the cache books room (so reclaiming it would give something back).
    pub(crate) fn holds_room(&self) -> bool {
        self.head.booked.load(Relaxed) > 0 || self.head.large.load(Relaxed) > 0
    }

    /// True if the activity signature is the same as at the last tick (read-only).
    pub(crate) fn unchanged_since_last_tick(&self) -> bool {
        self.head.seen.load(Relaxed) == self.activity()
    }

    /// Records the activity signature at a tick; returns true if it is the same as at the
    /// previous tick (the owner was idle in between). Only the ticking thread calls it, under
    /// the pool's reclaim lock.
    pub(crate) fn idle_since_last_tick(&self) -> bool {
        let now = self.activity();
        self.head.seen.swap(now, Relaxed) == now
    }
}
