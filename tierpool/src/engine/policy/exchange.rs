//! How buffers move between a tier's stack, the depot and the allocator: a refill (a batch
//! from the depot), a flush (a batch to it), giving a whole stack up (to the depot, with its
//! room) and releasing (to the allocator). Each moves its batch under one lock acquisition
//! and settles the budget's charges of what it moved.

use crate::base::key::Tag;
use crate::engine::cache::owner::Owner;
use crate::engine::cache::stack::Count;
use crate::engine::state::PoolState;
use crate::sys::alloc::free;
use crate::sys::trim::{free_released, Why};

/// Buffers moved per exchange with the depot for a tier whose stack holds at most `limit`:
/// half the stack, so that a thread alternating gets and returns at the boundary does not
/// exchange on every call, except for the largest tiers (a stack of one or two), whose
/// whole stack moves at once: half of two would send every buffer through the depot's lock
/// alone.
pub(super) fn batch_size(limit: usize) -> usize {
    if limit <= 2 {
        limit
    } else {
        limit.div_ceil(2)
    }
}

/// Moves up to `n` of tier `t`'s buffers from the depot onto the stack (their charges are
/// paid). Returns how many. Into the room the tier has first; then, where caches share the
/// depot's allowance, each further buffer brings the room it held in the depot
/// ([`Guard::pop_with_room`], [`Owner::transfer_in`]) as far as `cache_bytes` (or the large
/// slot) and the tier's cap allow: the allowance's count does not change, so every retained
/// byte is still counted once, and the allowance never has to hold the same buffers twice
/// (which, at the cap, would evict other retained buffers to make room for these).
///
/// [`Guard::pop_with_room`]: crate::engine::depot::Guard::pop_with_room
/// [`Owner::transfer_in`]: crate::engine::cache::owner::Owner::transfer_in
pub(super) fn refill(o: &Owner<'_>, pool: &PoolState, t: usize, n: usize) -> usize {
    let with_room = pool.caches_share_allowance();
    if with_room && o.limit(t) == 0 {
        if pool.depot.lock(t).exact_len() == 0 {
            return 0; // nothing to move: no slots for nothing
        }
        o.ensure_storage(t); // its slots, allocated before the depot's lock is taken
    }
    let mut depot = pool.depot.lock(t);
    let n = n.min(depot.exact_len());
    let mut moved = 0;
    while moved < n {
        let v = if o.len(t) < o.limit(t) {
            depot.pop_exact()
        } else if with_room && o.transfer_in(t) {
            depot.pop_with_room()
        } else {
            break;
        };
        let v = v.expect("counted");
        if let Err(v) = o.push(t, v, true) {
            let cap = v.capacity();
            free(v, pool.align()); // not dropped as a `Vec` by the unwinding (`sys/alloc.rs`)
            unreachable!("room was checked, exact size guaranteed: {cap}");
        }
        moved += 1;
    }
    moved
}

/// Moves the `n` oldest buffers of tier `t` to the depot (its booking stays), as far as
/// the allowance lets the depot take them. Refunds their charges. Returns how many moved.
pub(super) fn flush(o: &Owner<'_>, pool: &PoolState, t: usize, n: usize) -> usize {
    let moved = {
        let mut depot = pool.depot.lock(t);
        let fit = depot.book_exact(n.min(o.len(t)));
        o.drain_oldest(t, fit, false, |v| depot.push_exact(v))
    };
    o.defer_refund(moved * pool.charge_of(Tag::tier(t)));
    moved
}

/// Tier `t` gives up its whole stack and booking: the buffers go to the depot with the
/// room they had (a closed depot frees them), and their charges are refunded.
pub(super) fn give_up(o: &Owner<'_>, pool: &PoolState, t: usize) {
    if !pool.caches_share_allowance() {
        // The caches' room is not the depot's (`state.rs`): the depot takes what fits.
        flush(o, pool, t, usize::MAX);
        let bytes = release(o, pool, t, usize::MAX);
        pool.allocator_trim.released(bytes, Why::Cap);
        o.set_limit(t, 0);
        return;
    }
    let n = o.len(t);
    let mut freed = 0;
    let moved = {
        let mut depot = pool.depot.lock(t);
        o.drain_oldest(t, n, false, |v| {
            if !depot.push_transferred(v) {
                freed += 1;
            }
        })
    };
    o.transfer_out(t, moved);
    o.set_limit(t, 0);
    if freed > 0 {
        o.count(t, Count::Discarded, freed as u64);
        pool.allocator_trim.released(freed * o.size(t), Why::Cap);
    }
    o.defer_refund(moved * pool.charge_of(Tag::tier(t)));
}

/// Releases the `n` oldest buffers of tier `t` to the allocator, refunding their charges.
/// Returns the bytes released.
pub(super) fn release(o: &Owner<'_>, pool: &PoolState, t: usize, n: usize) -> usize {
    let size = o.size(t);
    let align = pool.align();
    let bytes = size * o.drain_oldest(t, n, true, |v| free_released(v, align));
    o.defer_refund(bytes / size * pool.charge_of(Tag::tier(t)));
    bytes
}
