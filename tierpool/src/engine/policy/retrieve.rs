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
//!    ([`Classes::lenders`]), nearest first, a limited number of times per tier and interval
//!    (the tier's `loans`, cleared by decay). Past the limit the get misses, and the miss
//!    takes room of its own for the tier (`room.rs`), so that a tier in steady use gets
//!    buffers of its own and stays on the fast path, while a tier that varied sizes touch only
//!    now and then borrows instead of making the cap hold one buffer of every tier.
//!    - **Off the cap: once**, from this cache's stacks, then the depot; the look counts
//!      whether it finds a buffer or not.
//!    - **At the cap** (the tier has no room in this cache and the allowance has less than
//!      one of its buffers free): up to [`MAX_LOANS_AT_CAP`] times, from the depot only, and a
//!      look that finds nothing does not count. A buffer allocated there would be kept only by
//!      evicting another retained one, or not at all, so the pool would churn, each buffer
//!      freed and allocated again costing the allocator fresh pages; the loan frees the
//!      allowance its buffer held in the depot. Not from this cache's stacks: their room stays
//!      theirs, and a tier lent from them every time would never get room of its own.
//!
//! While the depot has none of a tier, the room its refill makes spares the lending tiers'
//! stacks (`room.rs`), so that no stack is given to the depot only to be lent straight back.
//!
//! [`Classes::lenders`]: crate::engine::class::Classes::lenders

use crate::engine::cache::owner::Owner;
use crate::engine::cache::stack::Count;
use crate::engine::fresh::Fresh;
use crate::engine::state::PoolState;

/// The most loans to gets of one tier in a decay interval at the cap (module docs).
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

/// The same rule for a get that cannot use a thread cache: rule 1 takes any buffer of its
/// tier (there is no refill to leave the exact ones to), rule 2 takes from the depot with no
/// limit (the limit is a cache's, per interval, and there is no cache).
pub(super) fn retrieve_direct(pool: &PoolState, t: usize, how: Fresh) -> Option<(Vec<u8>, usize)> {
    if let Some(v) = pool.take_direct(t, false) {
        return Some((v, t));
    }
    if !pool.lends(how) {
        return None;
    }
    pool.take_lent(t)
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
    let at_cap = o.limit(t) == 0 && o.allowance_spent(o.size(t));
    if o.loans(t) >= if at_cap { MAX_LOANS_AT_CAP } else { 1 } {
        return None;
    }
    if !at_cap {
        o.count_loan(t);
        // A pop from this cache's stack counts as that tier's hit (`counters.rs`).
        let cached = pool
            .classes
            .lenders(t)
            .find_map(|u| o.pop(u).map(|v| (v, u)));
        if cached.is_some() {
            return cached;
        }
    }
    let (v, u) = pool.take_lent(t)?;
    if at_cap {
        o.count_loan(t);
    }
    o.count(u, Count::DirectHit, 1);
    Some((v, u))
}
