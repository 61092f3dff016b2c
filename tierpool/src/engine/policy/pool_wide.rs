//! The operations on every cache of a pool at once, each reclaiming every cache from its
//! owner (busy or idle) and acting on it: `trim()`, closing, a budget waiter's sweep. Where
//! caches cannot be reclaimed (no heavy fence), reclaiming leaves each rung, and each acts at
//! its owner's next operation (`housekeeping.rs`). A cache attached after the reclaimer listed
//! them is born rung if the pool is closed or under pressure (`Caches::attach`); one made
//! while a trim runs is empty, and acts on the trim at its first housekeeping.

use crate::engine::cache::owner::Owner;
use crate::engine::cache::reclaim::Turn;
use crate::engine::state::PoolState;

use super::housekeeping::{give_up_all, kill, release_all};

/// `trim()`: every thread cache releases everything now, reclaimed (the calling thread's own
/// included, if it has one). Returns the bytes released from the caches, or `None` if caches
/// cannot be reclaimed here: each then releases at its owner's next operation.
pub(crate) fn trim_all(pool: &PoolState) -> Option<usize> {
    let generation = pool.start_trim();
    let mut bytes = 0;
    let done = reclaim_all(pool, |o| {
        o.set_trim_gen(generation);
        bytes += release_all(o, pool);
    });
    done.map(|_| bytes)
}

/// Closing: every thread cache frees everything and dies now, reclaimed; without a heavy
/// fence, at its owner's next operation.
pub(crate) fn close_all(pool: &PoolState) {
    pool.close();
    reclaim_all(pool, |o| kill(o, pool));
}

/// A budget waiter's sweep (after it joined the queue): every thread cache's stacks go to the
/// depot and their charges to the account, whether its owner is busy or idle.
///
/// Every cache, also one that holds nothing now: its owner may be in the middle of a slow
/// return that read the pressure flag before the waiter raised it, and about to book room
/// and push. Reclaiming waits for that operation to end (and takes what it pushed), and rings
/// the doorbell, so that the owner's next operation takes the lock and sees the flag; skipping
/// empty caches would lose that wake-up.
pub(crate) fn sweep(pool: &PoolState) {
    reclaim_all(pool, |o| give_up_all(o, pool));
}

/// Reclaims every cache (waiting for the turn and every lock) and runs `act` on each, then
/// gives back the charges the actions refunded, once every cache is let go. `None` if there
/// is no heavy fence: every cache is then rung, and acts at its owner's next operation.
fn reclaim_all(pool: &PoolState, mut act: impl FnMut(&Owner<'_>)) -> Option<usize> {
    let mut refund = 0;
    let done = pool.caches.reclaim(
        Turn::Wait,
        |_| true,
        |o| {
            act(o);
            refund += o.take_after().refund;
        },
    );
    pool.refund(refund);
    done
}
