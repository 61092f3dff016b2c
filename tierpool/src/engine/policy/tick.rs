//! The pool's tick (the depot's decay, reclaiming caches that stayed idle for an interval),
//! reclaiming quiet caches for room, and what an operation leaves to do once its owner is
//! gone ([`After`]): work that must not run while the owner's busy mark is set or its lock
//! held.

use crate::base::sync::Ordering::Relaxed;
use crate::engine::cache::block::Cache;
use crate::engine::cache::owner::{After, Owner};
use crate::engine::cache::reclaim::{Reclaimer, Turn};
use crate::engine::state::PoolState;
use crate::sys::trim::Why;

use super::housekeeping::release_all;

/// The pool's allowance was spent: reclaims the caches that have not been used since the last
/// tick, at most once per sixteenth of an interval, so that a thread that needs room takes it
/// from threads that went quiet (tcmalloc's threads take cache capacity from each other the
/// same way). After an operation, never inside one.
fn reclaim_quiet(pool: &PoolState) {
    let now = pool.clock.tick16();
    let last = pool.last_quiet_reclaim.load(Relaxed);
    if now == last
        || pool
            .last_quiet_reclaim
            .compare_exchange(last, now, Relaxed, Relaxed)
            .is_err()
    {
        return;
    }
    if let Some(r) = pool.caches.turn(Turn::Try) {
        reclaim_idle(pool, &r, false);
    }
}

/// The pool's tick for `epoch`, by whichever thread claims it first: the depot's decay, then
/// every cache not used since the previous tick is reclaimed and emptied, then glibc's trim
/// if enough was released, then (feature `metrics`) the pool's figures are published. The
/// claim is made with the reclaimer's turn in hand, so that a
/// tick that finds another reclaimer at work ([`Turn::Try`]) leaves the epoch to the next
/// thread that looks. Never inside an operation.
pub(crate) fn tick(pool: &PoolState, epoch: u64, turn: Turn) {
    let Some(r) = pool.caches.turn(turn) else {
        return;
    };
    if !pool.claim_tick(epoch) {
        return;
    }
    reclaim_idle(pool, &r, true);
    drop(r);
    report_overdue(pool);
    pool.allocator_trim.maybe_run(epoch);
    pool.publish_metrics();
}

/// Reports the async budget waits that have lasted longer than `report_waits_after`
/// (feature `holders`): a future is polled only when woken, so the tick reports for it. A
/// report that panics (a subscriber's bug) does not unwind into the operation that ticked.
fn report_overdue(pool: &PoolState) {
    let (Some(after), Some(budget)) = (pool.holders.report_after(), pool.budget.as_ref()) else {
        return;
    };
    if let Some((count, charge, waited)) = budget.overdue_tasks(after) {
        let report = || {
            pool.holders
                .report_overdue(&pool.name, count, charge, waited)
        };
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(report));
    }
}

/// Reclaims the caches that hold room and whose owner did nothing since the last tick,
/// releasing everything they hold. With `record`, this is the tick: every cache's activity is
/// recorded for the next one.
fn reclaim_idle(pool: &PoolState, r: &Reclaimer<'_>, record: bool) {
    let pick = |c: &Cache| {
        let idle = if record {
            c.idle_since_last_tick()
        } else {
            c.unchanged_since_last_tick()
        };
        idle && c.holds_room()
    };
    let (mut bytes, mut refund) = (0, 0);
    r.reclaim(pick, |o| {
        bytes += release_all(o, pool);
        refund += o.take_after().refund;
    });
    // The tick releases caches idle for an interval; a thread short of room, for room.
    let why = if record { Why::Decay } else { Why::Cap };
    pool.allocator_trim.released(bytes, why);
    pool.refund(refund);
}

/// What an operation left to do ([`After`]), done once its owner is gone: refunds (which may
/// wake waiters), the pool's tick, reclaiming quiet caches for room.
pub(super) fn after(pool: &PoolState, after: After) {
    pool.refund(after.refund);
    if let Some(epoch) = after.tick {
        tick(pool, epoch, Turn::Try);
    }
    if after.reclaim_quiet {
        reclaim_quiet(pool);
    }
}

/// Runs `f` with this owner, then does what it left to do ([`after`]) once the owner is
/// gone: every owner of this thread's cache ends so (`engine/local.rs`).
pub(crate) fn finish<R>(o: Owner<'_>, pool: &PoolState, f: impl FnOnce(&Owner<'_>) -> R) -> R {
    let r = f(&o);
    let left = o.take_after();
    drop(o);
    if left != After::default() {
        after(pool, left);
    }
    r
}
