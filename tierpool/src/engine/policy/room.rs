//! Where a tier's room in its cache comes from when it needs more: one ladder, climbed rung by
//! rung until the tier has the room it asked for.
//!
//! | rung | [`Purpose::Refill`] | [`Purpose::Miss`] | [`Purpose::Return`] |
//! |---|---|---|---|
//! | 1. `cache_bytes` nobody booked | yes | yes | yes |
//! | 2. other tiers' bookings beyond their stacks (no buffer moves: [`lower_unused_limits`]) | yes | yes | yes |
//! | 3. other tiers' whole stacks, to the depot with their room ([`make_room`]) | yes, but while the depot has none of the tier, not the stacks of the tiers that may lend to it | yes | no |
//! | 4. the pool's allowance | yes | yes | yes |
//! | 5. the depot's oldest buffers of other tiers, for the one buffer in hand ([`evict`]) | no | yes | yes |
//! | 6. caches that went quiet, reclaimed after the operation ([`Owner::defer_reclaim_quiet`]) | yes | yes | yes |
//!
//! A refill's buffers bring their room from the depot (`exchange.rs`), so a refill never
//! evicts: it trades no retained buffer for empty room. While the depot has none of its
//! tier, it leaves the stacks of the tiers that may lend to it alone: given to the depot,
//! they would only be lent straight back (`retrieve.rs`). A miss's buffer, new to the pool,
//! may displace any other tier's stack and evict the depot's buffers (but not those that
//! may lend to it), so that at the cap the pool keeps the buffers in use now over the oldest
//! idle ones.
//! A return that finds its stack full doubles its room from what is free, evicting only for
//! the buffer in hand. Bookings grow with use (a first buffer or batch, then doubling
//! when returns find the stack full) rather than to the cap at once, and other tiers give up
//! what they do not hold before anything moves, so that a thread cycling several sizes does
//! not have its tiers evict each other.
//!
//! The large slot (one tier above `cache_bytes` may hold one buffer) is climbed the same way:
//! the tier that holds it gives it up (rung 3, whatever the purpose: a slot holds one buffer,
//! and the taker is about to use it), then rungs 4 to 6.
//!
//! Where caches keep an allowance of their own (no heavy fence: `state.rs`), it is never
//! spent, so rungs 5 and 6 are never reached.
//!
//! [`Owner::defer_reclaim_quiet`]: crate::engine::cache::owner::Owner::defer_reclaim_quiet

use super::exchange::give_up;
use crate::engine::cache::owner::Owner;
use crate::engine::state::PoolState;
use crate::sys::trim::Why;

/// Why a tier asks for room: which rungs of the ladder (module docs) it may climb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Purpose {
    /// A refill's batch: other tiers' stacks make way (while the depot has none of the tier,
    /// not those of the tiers that may lend to it); nothing is evicted.
    Refill,
    /// A buffer just allocated, which will return: other tiers' stacks and the depot's
    /// oldest buffers of other tiers may make way for it.
    Miss,
    /// A buffer returned: the depot's oldest buffers of other tiers may make way for it.
    Return,
}

/// Gives tier `t` a first booking if it has none and may use the thread cache: one
/// buffer (more comes with use), or the large slot.
pub(super) fn book(o: &Owner<'_>, pool: &PoolState, t: usize, purpose: Purpose) {
    if o.limit(t) > 0 || o.cap(t) == 0 {
        return;
    }
    if o.is_large(t) {
        take_large_slot(o, pool, t);
        let size = o.size(t);
        if !o.set_limit(t, 1)
            && o.allowance_spent(size)
            && (evict(pool, t, size, size) == 0 || !o.set_limit(t, 1))
        {
            o.defer_reclaim_quiet(); // room for the next operation
        }
        return;
    }
    grow(o, pool, t, 1, purpose);
}

/// Frees the large slot for tier `t` (above `cache_bytes`): the tier that holds it gives up
/// its buffer to the depot, with its room. Tier `t`'s own room comes after: from the
/// allowance ([`book`]), or with the depot's buffer (`exchange::refill`).
pub(super) fn take_large_slot(o: &Owner<'_>, pool: &PoolState, t: usize) {
    if let Some(u) = o.large_holder().filter(|&u| u != t) {
        give_up(o, pool, u);
    }
}

/// Raises tier `t`'s limit toward `target` (at most its cap), climbing the ladder (module
/// docs) for `purpose`.
pub(super) fn grow(o: &Owner<'_>, pool: &PoolState, t: usize, target: usize, purpose: Purpose) {
    let (size, limit) = (o.size(t), o.limit(t));
    let target = target.min(o.cap(t));
    if target <= limit || o.is_large(t) {
        return;
    }
    let want = (target - limit) * size;
    if o.unbooked() < want {
        lower_unused_limits(o, t, want);
    }
    if o.unbooked() < want {
        let spare = match purpose {
            Purpose::Refill if pool.depot.lock(t).exact_len() > 0 => Some(t..t + 1),
            Purpose::Refill => Some(pool.lenders_of(t)),
            Purpose::Miss => Some(t..t + 1),
            Purpose::Return => None,
        };
        if let Some(spare) = spare {
            make_room(o, pool, want, spare);
        }
    }
    let got = o.raise_limit(t, target);
    if got < target && o.allowance_spent(size) {
        // Eviction makes room for the buffer in hand only, when the tier has none left for
        // it; a return that doubles its room evicts nothing for the rest of it.
        let short = size.min(o.unbooked() / size * size);
        if purpose == Purpose::Refill
            || got > o.len(t)
            || evict(pool, t, short, size) == 0
            || o.raise_limit(t, target) < target
        {
            o.defer_reclaim_quiet(); // more room for the next operation
        }
    }
}

/// The allowance is spent and tier `t` is `need` bytes short, in buffers of `unit` bytes:
/// the depot's oldest buffers of other tiers make way (`Depot::evict`), where caches share
/// the depot's allowance, but only if they can make room for one buffer at least (with what
/// the allowance has free). The tiers that may serve `t`'s gets (`retrieve.rs`) are spared.
/// Returns the bytes freed.
pub(super) fn evict(pool: &PoolState, t: usize, need: usize, unit: usize) -> usize {
    if need == 0 || !pool.caches_share_allowance() {
        return 0;
    }
    let free = pool.depot.allowance().free();
    let (need, min) = (need.saturating_sub(free), unit.saturating_sub(free));
    let freed = pool.depot.evict(need, min, pool.lenders_of(t));
    pool.allocator_trim.released(freed, Why::Cap);
    freed
}

/// Lowers other tiers' limits to their stacks' lengths (but not below one buffer, so that a
/// tier in use keeps its storage and its fast path), largest tier first, until `need` bytes
/// of `cache_bytes` are unbooked. Moves no buffer and allocates nothing.
fn lower_unused_limits(o: &Owner<'_>, t: usize, need: usize) {
    for u in (0..o.tiers()).rev() {
        if o.unbooked() >= need {
            return;
        }
        let keep = o.len(u).max(1);
        if u != t && !o.is_large(u) && o.limit(u) > keep {
            o.set_limit(u, keep);
        }
    }
}

/// Frees at least `need` bytes of `cache_bytes` by handing whole stacks of tiers outside
/// `spare`, largest tier first, to the depot (releasing what the depot cannot take) and
/// taking their bookings away: a thread whose sizes change does not keep its room full
/// of sizes it no longer uses until they decay, taking the slow path for its new size
/// meanwhile.
#[cold]
fn make_room(o: &Owner<'_>, pool: &PoolState, need: usize, spare: std::ops::Range<usize>) {
    for u in (0..o.tiers()).rev() {
        if o.unbooked() >= need {
            return;
        }
        if spare.contains(&u) || o.limit(u) == 0 || o.is_large(u) {
            continue;
        }
        give_up(o, pool, u);
    }
}
