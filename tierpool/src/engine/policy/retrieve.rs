//! Which retained buffer, besides its own stack's, may serve a get of tier `t` that found none
//! there and could not refill: one rule, nearest size first.
//!
//! 1. **Its own tier in the depot**: a buffer filed under `t` with a larger capacity (foreign
//!    or grown; the exact ones are the refill's), or, for a tier that does not use the
//!    cache, any buffer of it.
//! 2. **A lending tier**, where the pool and the get lend ([`PoolState::lends`]: not under a
//!    budget, whose buffers keep the charge of the tier they were taken for; not in an aligned
//!    pool, whose buffers have exactly their tier's capacity; not for the I/O layer's exact
//!    gets): a buffer of exactly one of the larger tiers up to twice `t`'s size
//!    ([`Classes::lenders`]), nearest first.
//!    - **At the cap** (the tier has no room in this cache and the allowance has less than
//!      one of its buffers free), from the depot, up to [`MAX_LOANS_AT_CAP`] times per tier
//!      and interval. A buffer allocated there would be kept only by evicting another
//!      retained one, or not at all, so the pool would churn, each buffer freed and allocated
//!      again costing the allocator fresh pages. The loan frees the allowance its buffer held
//!      in the depot, so the tier's next get can take room of its own. Not from this
//!      cache's stacks: lent from them every time, a get of one size in a loop would never
//!      get room of its own.
//!    - **Otherwise once per tier and interval**, from this cache's stacks, then the depot.
//!      With several tiers per doubling, a thread whose sizes vary keeps buffers of many
//!      neighbouring tiers, which the cap cannot hold one of each of; only once, so that the
//!      next miss allocates and a tier in steady use gets buffers of its own and stays on the
//!      fast path.
//!
//! The bound at the cap ends a loop between room and lending: a cache whose `cache_bytes` a
//! lending tier's stack fills gives that stack to the depot to make room for a refill
//! (`room.rs`, rung 3), is lent its buffer back, and the return reserves the lender's room
//! again. After the bound the tier's next get misses, and its reservation evicts the depot's
//! oldest buffers of other sizes (rung 5), so the tier keeps a buffer of its own. A tier
//! that many sizes touch only now and then stays under the bound and is lent.
//!
//! [`Classes::lenders`]: crate::engine::class::Classes::lenders

use crate::engine::cache::owner::Owner;
use crate::engine::cache::stack::Count;
use crate::engine::fresh::Fresh;
use crate::engine::state::PoolState;

/// The most gets of one tier a cache is lent the depot's buffers at the cap in one decay
/// interval (module docs; a look that finds no lender does not count).
pub(crate) const MAX_LOANS_AT_CAP: u32 = 16;

/// A retained buffer for a get of tier `t` (of kind `how`) that its stack and a refill could
/// not serve, by the rule in the module docs, and the tier it was retained under. `keeps`:
/// the tier uses this cache (the depot's exact buffers of `t` are then the refill's).
pub(super) fn retrieve(
    o: &Owner<'_>,
    pool: &PoolState,
    t: usize,
    how: Fresh,
    keeps: bool,
) -> Option<(Vec<u8>, usize)> {
    if let Some(v) = pool.take_direct(t, keeps) {
        o.count(t, Count::DirectHit, 1);
        return Some((v, t));
    }
    lend(o, pool, t, how)
}

/// Rule 2 of the module docs: a lending tier's buffer.
pub(super) fn lend(
    o: &Owner<'_>,
    pool: &PoolState,
    t: usize,
    how: Fresh,
) -> Option<(Vec<u8>, usize)> {
    if !pool.lends(how) || o.is_dead() {
        return None;
    }
    let from_depot = || {
        let (v, u) = pool.take_lent(t)?;
        o.count(u, Count::DirectHit, 1);
        Some((v, u))
    };
    let at_cap = o.limit(t) == 0 && o.allowance_spent(o.size(t));
    let looked = at_cap && o.loans_at_cap(t) < MAX_LOANS_AT_CAP;
    if looked {
        if let Some(lent) = from_depot() {
            o.count_loan_at_cap(t);
            return Some(lent);
        }
    }
    if !o.mark_lent(t) {
        return None;
    }
    // A pop from this cache's stack counts as that tier's hit (`counters.rs`).
    let cached = pool
        .classes
        .lenders(t)
        .find_map(|u| o.pop(u).map(|v| (v, u)));
    cached.or_else(|| if looked { None } else { from_depot() })
}
