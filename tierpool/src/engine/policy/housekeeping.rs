//! The owner's housekeeping, and what a cache does when the pool asks something of it: the
//! doorbell (closed, trimmed, budget pressure), decay at each new interval, thread exit.
//! Reclaimers run the same functions on a cache they took over (`pool_wide.rs`, `tick.rs`).

use super::exchange::{give_up, release};
use crate::base::sync::Ordering::Relaxed;
use crate::engine::cache::owner::Owner;
use crate::engine::state::PoolState;
use crate::sys::trim::Why;

/// Counts a slow operation and runs [`look`] if the doorbell rang or a look is due.
pub(super) fn after_slow_op(o: &Owner<'_>, pool: &PoolState) {
    let due = o.count_slow_op();
    if o.rung() || due {
        look(o, pool);
    }
}

/// Looks at the pool: closed (free everything, keep nothing from now on), trimmed (release
/// everything), budget pressure (give the stacks back, stay rung), or a new decay interval
/// (release what stayed idle, and tick the pool).
pub(crate) fn look(o: &Owner<'_>, pool: &PoolState) {
    if o.is_dead() {
        return;
    }
    if o.rung() {
        if !o.locked() {
            // Rung while this operation ran: a reclaimer may be waiting for it to end, and
            // only the lock's holder re-arms. The next operation takes the lock.
            return;
        }
        // Re-arm first, then read why it rang (see `Cache::ring`).
        o.rearm();
    }
    if pool.is_closed() {
        kill(o, pool);
        return;
    }
    // Relaxed: ordered after the trim's bump by the re-arm's acquire (`Cache::ring`), or by
    // the lock of the reclaimer that trimmed this cache.
    let generation = pool.trim_gen.load(Relaxed);
    if generation != o.trim_gen() {
        o.set_trim_gen(generation);
        pool.allocator_trim
            .released(release_all(o, pool), Why::Trim);
    }
    if pool.under_pressure() {
        give_up_all(o, pool);
        o.ring_self(); // every operation on the slow path while the pressure lasts
    }
    let now = pool.clock.tick16();
    o.pace(now);
    let epoch = now / 16;
    if epoch != o.epoch() {
        o.set_epoch(epoch);
        pool.allocator_trim.released(decay(o, pool), Why::Decay);
        o.defer_tick(epoch); // the pool's part, once this owner is gone
    }
}

/// Releases, in every tier, the buffers that stayed below the stack's low-water mark for the
/// whole interval, shrinks the booking by as many, and gives back the bookings of
/// tiers that saw no use. Returns the bytes released.
pub(super) fn decay(o: &Owner<'_>, pool: &PoolState) -> usize {
    let mut bytes = 0;
    for t in 0..o.tiers() {
        let idle = o.low(t);
        if idle > 0 {
            o.halve_fill(t);
            bytes += release(o, pool, t, idle);
            let keep = (o.limit(t) - idle).max(o.len(t)).max(1);
            o.set_limit(t, keep);
        }
        o.reset_low(t);
        if o.idle_since_last_look(t) && o.len(t) == 0 {
            o.set_limit(t, 0);
            o.free_storage(t);
        }
    }
    bytes
}

/// Releases every buffer this cache holds and its bookings, refunding their charges.
/// Returns the bytes released.
pub(crate) fn release_all(o: &Owner<'_>, pool: &PoolState) -> usize {
    let mut bytes = 0;
    for t in (0..o.tiers()).filter(|&t| !o.is_bare(t)) {
        bytes += release(o, pool, t, usize::MAX);
        o.set_limit(t, 0);
        o.free_storage(t);
    }
    bytes
}

/// Gives every stack to the depot, with its room (a closed depot frees them), refunding the
/// charges: a budget waiter's sweep, thread exit.
pub(super) fn give_up_all(o: &Owner<'_>, pool: &PoolState) {
    for t in (0..o.tiers()).filter(|&t| !o.is_bare(t)) {
        if o.limit(t) > 0 {
            give_up(o, pool, t);
        }
        o.free_storage(t);
    }
}

/// The pool closed: free everything, keep nothing from now on.
pub(super) fn kill(o: &Owner<'_>, pool: &PoolState) {
    release_all(o, pool);
    o.mark_dead();
    pool.caches.detach(o.cache());
}

/// The thread is exiting (or its table is being dropped): hand everything to the depot, as
/// far as the allowance lets it, and free the rest. The caller (`local.rs`, `retire`, which
/// says why) detaches the cache afterwards.
pub(crate) fn retire(o: &Owner<'_>, pool: &PoolState) {
    if !o.is_dead() {
        give_up_all(o, pool);
    }
}
