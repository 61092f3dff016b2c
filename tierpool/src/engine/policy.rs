//! What a thread cache does beyond the fast path, in safe code: a get or a return the fast
//! path could not serve (refill from the depot, flush to it, reserve room, charge the budget,
//! allocate), the owner's housekeeping (doorbell, decay, trim, close, budget pressure, thread
//! exit), and what reclaimers do with a cache they took over.
//!
//! Every function on one cache takes its [`Owner`] (the owning thread's, or a reclaimer's:
//! the policy is the same either way) and the pool's state.
//!
//! # Reservations
//!
//! A tier reserves room (`reserve.rs`) when it is first used: one buffer for a return, a batch
//! for a refill. The reservation grows with use, up to `min(64, cache_bytes / size)` buffers:
//! doubling when a return finds its stack full, and by a batch when a get finds too little
//! room to refill. It takes unreserved room first, then other tiers' reservations beyond what
//! their stacks hold (no buffer moves), and, for a get's batch only, other tiers' whole
//! stacks, which go to the depot, largest tier first. When the pool's allowance is spent, it
//! asks for the caches that stayed idle since the last tick to be reclaimed (at most every
//! sixteenth of an interval), and otherwise makes do. Decay shrinks a reservation by the
//! buffers that stayed idle through the interval; a tier that saw no use at all gives all of
//! it back, and its storage. A tier above `cache_bytes` takes the large slot from whichever
//! tier held it. A refill takes what room the allowance has and, beyond it, the room the
//! depot's buffers held there (`refill`), so that at the cap nothing is evicted to make room
//! for buffers the allowance already counts; what evicts is a buffer the pool did not retain
//! (a miss's, or one returned without room).
//!
//! A refill's batch starts small (a slow start, as jemalloc's thread caches adapt their fill
//! count): a tier's first refill asks the depot for one buffer, each refill that moved
//! buffers doubles the next, up to the batch (half its stack, the whole of a stack of one or
//! two), decay halves it when buffers stayed idle, and a tier that gives up its storage starts
//! over. So a thread new to a tier takes what it uses, not every buffer the depot holds while
//! another thread then allocates (the `mixed` workload's random sizes).
//!
//! # Budget
//!
//! In a pool with a budget on bytes in use, buffers on a stack count as charged
//! (`budget.rs`): a refill charges its batch, a flush refunds it, and so do releases; a
//! return that does not land on a stack refunds its buffer's charge (from its tag). A get
//! that needs a charge the account cannot give now returns [`Got::Wait`], and the caller
//! waits outside the cache. While a waiter is queued, owners keep nothing: their caches stay
//! rung, returns go to the depot, and their stacks were swept by the waiter.

use super::cache::block::Cache;
use super::cache::owner::{After, Owner};
use super::cache::reclaim::{Reclaimer, Turn};
use super::cache::stack::Count;
use crate::base::key::Tag;
use crate::base::sync::Ordering::Relaxed;
use crate::engine::error::AllocError;
use crate::engine::fresh::{alloc_fresh, prepare_hit, scrub, Fresh};
use crate::engine::state::{Got, PoolState};
use crate::sys::alloc::{free, Owned};
use crate::sys::trim::{free_released, Why};

/// Buffers moved per exchange with the depot for a tier whose stack holds at most `limit`:
/// half the stack, so that a thread alternating gets and returns at the boundary does not
/// exchange on every call, except for the largest tiers (a stack of one or two), whose
/// whole stack moves at once: half of two would send every buffer through the depot's lock
/// alone.
fn batch_size(limit: usize) -> usize {
    if limit <= 2 {
        limit
    } else {
        limit.div_ceil(2)
    }
}

/// The most gets of one tier a cache has lent the depot's buffers at the cap in one decay
/// interval (`lend`; a look that finds no lender does not count): a tier used more often
/// than that takes room of its own.
pub(crate) const MAX_LOANS_AT_CAP: u32 = 16;

/// Everything a get can need beyond the fast path, `prepaid` bytes of its charge already
/// paid (after a wait; 0 otherwise).
pub(crate) fn get_slow(
    o: &Owner<'_>,
    pool: &PoolState,
    n: usize,
    how: Fresh,
    prepaid: usize,
) -> Result<Got, AllocError> {
    housekeeping(o, pool);
    let Some(t) = pool.classes.for_get(n) else {
        let cap = pool.oversize_capacity(n)?;
        let (tag, charge) = pool.oversize_tag(cap);
        if pool.charge(charge, prepaid, 0, 1).is_none() {
            return Ok(Got::Wait(charge));
        }
        let v = alloc_fresh(cap, n, how, pool.align()).inspect_err(|_| o.defer_refund(charge))?;
        o.count_oversize();
        return Ok(Got::Buf(Owned::new(v, pool.align()), tag));
    };
    let charge = pool.charge_of(Tag::tier(t));
    let hit = |mut v: Vec<u8>| {
        prepare_hit(&mut v, n, how);
        Ok(Got::Buf(Owned::new(v, pool.align()), Tag::tier(t)))
    };
    if let Some(v) = o.pop(t) {
        o.defer_refund(prepaid.min(charge)); // a stack's buffer is charged already
        return hit(v);
    }
    // Refill a batch if the tier may use the cache: room in `cache_bytes` for it first,
    // evicting other tiers' idle stacks if need be. Where caches share the depot's allowance,
    // what the allowance cannot give comes with the buffers (`refill`): nothing is evicted
    // to make room for buffers the allowance already counts. Otherwise (the caches' own
    // allowance), the batch is what room the tier has.
    let mut keeps = !o.is_dead() && o.cap(t) > 0 && !under_pressure(pool);
    let shares = pool.caches_share_allowance();
    let max_batch = batch_size(o.cap(t));
    let want = if keeps {
        let batch = o.fill(t, max_batch);
        if !shares {
            reserve(o, pool, t);
        } else if o.is_large(t) {
            take_large_slot(o, pool, t); // its room comes with the depot's buffer
        }
        if o.limit(t) - o.len(t) < batch {
            grow(o, pool, t, o.len(t) + batch, true);
        }
        if shares {
            batch
        } else {
            keeps = o.limit(t) > 0;
            batch.min(o.limit(t) - o.len(t))
        }
    } else {
        0
    };
    // The charge of this buffer, and of up to `want - 1` more to keep on the stack.
    let Some(extra) = pool.charge(charge, prepaid, want.saturating_sub(1) * charge, charge) else {
        return Ok(Got::Wait(charge));
    };
    if want > 0 {
        // Without a budget every buffer is "paid" (charges are 0).
        let paid = 1 + extra.checked_div(charge).unwrap_or(want - 1);
        let moved = refill(o, pool, t, paid.min(want));
        if moved > 0 {
            o.double_fill(t, max_batch);
            o.defer_refund((paid - moved) * charge);
            let v = o.pop(t).expect("just refilled");
            return hit(v);
        }
        o.defer_refund((paid - 1) * charge);
    } else {
        o.defer_refund(extra);
    }
    // Nothing of this size here: a larger buffer filed under this tier, or (a tier that
    // bypasses the cache) any buffer of it, straight from the depot.
    if let Some(mut v) = pool.take_direct(t, keeps) {
        o.count(t, Count::DirectHit, 1);
        prepare_hit(&mut v, n, how);
        return Ok(Got::Buf(Owned::new(v, pool.align()), Tag::tier(t)));
    }
    // Else a larger tier's buffer, if one may be lent (`lend`).
    if let Some((mut v, u)) = lend(o, pool, t, how) {
        prepare_hit(&mut v, n, how);
        return Ok(Got::Buf(Owned::new(v, pool.align()), Tag::tier(u)));
    }
    // A miss: room for the new buffer's return, which at the cap may evict the depot's
    // oldest buffers of other tiers (`grow`), so that the pool keeps what is used now.
    if keeps && shares {
        reserve(o, pool, t);
    }
    let v = alloc_fresh(o.size(t), n, how, pool.align()).inspect_err(|_| o.defer_refund(charge))?;
    o.count(t, Count::Miss, 1);
    Ok(Got::Buf(Owned::new(v, pool.align()), Tag::tier(t)))
}

/// A larger tier's buffer ([`Classes::lenders`]: up to twice the size, nearest first) for a
/// get of tier `t` that found none of its own, if it may be lent one, and that tier. Where
/// the pool and `how` lend ([`PoolState::lends`]):
///
/// - **Once per tier and interval** (the cache's `lent` mark), from this cache's stacks (the
///   pop counts as that tier's hit, `counters.rs`), then the depot. With several tiers per
///   doubling, a thread whose sizes vary keeps buffers of many neighbouring tiers, and the
///   retained cap cannot hold one of each (the `mixed` workload's random sizes touched 46
///   tiers, 96 MiB of them, when the default had four per doubling up to 16 MiB; 33 MiB a
///   thread with the default now). Only once, so that the next miss allocates and a tier in
///   steady use gets buffers of its own, staying on the fast path (a thread getting 1000
///   bytes in a loop, lent its 2048-byte buffer each time, took the slow path and the
///   depot's lock on every get).
/// - **At the cap, from the depot, up to [`MAX_LOANS_AT_CAP`] times per tier and
///   interval**, for a tier with no room in this cache while the pool's allowance has less
///   than one of its buffers free, before (and without spending) the interval's loan. A
///   buffer allocated there is kept only by evicting another retained buffer (its
///   reservation, `grow`) or not at all (its return is refused), so the pool churned, and
///   each buffer it frees and allocates again costs the allocator fresh pages. The loan frees
///   the allowance its buffer held in the depot, so the tier's next get can take room of its
///   own if no return spent it first. Not from this cache's stacks: their room stays with
///   them, and a get of one size in a loop, lent from them every time, would never get room
///   (a review's finding on the first form).
///
///   The bound ends a loop a second review found: a cache whose `cache_bytes` a lending
///   tier's stack fills gives that stack to the depot to make room for a refill
///   (`make_room`), is lent its buffer back, and the return reserves the lender's room
///   again, so every get took the slow path (and the depot's locks) until the depot's idle
///   buffers decayed, or for as long as other threads kept the pool at the cap. After the
///   bound, the tier's next get misses, and its reservation evicts the depot's oldest idle
///   buffers of other sizes for room (`grow`), so the tier keeps a buffer of its own and its
///   gets stay on the fast path. A tier that sizes spread over many tiers touch only now and
///   then stays under the bound and is lent (taking the tier's room out of the first loan,
///   or skipping the refill's room-making when the depot has none of the tier, brought the
///   `mixed` churn back: faults over 100 in 19 of 20 rounds of `mixed_cap`, and in 13 and
///   16).
///
/// The `mixed` workload's random sizes, with the once-per-interval rule alone, needed 68.5
/// MiB to allocate nothing (a 128 MiB cap); against the 64 MiB default, in rounds 5-24 of
/// `cargo run --release -p tierpool-bench --example mixed_cap` (two runs), they missed 88-92
/// buffers, released up to 37 MiB at the cap in 17-18 rounds of 20 and took over 100 page
/// faults in 10-17 (up to 5,624), running up to 2.3x the `Mutex<Vec>` pool's time in those
/// rounds. Lent at the cap from the depot: 22-26 misses (small sizes), nothing released at
/// the cap in 39 rounds of 40 (8 MiB in one), 60.4-60.7 MiB retained, at most 3 page faults
/// in a round, and a median of 0.986x and 0.989x the `Mutex<Vec>` pool's time.
///
/// Where caches keep their own allowance (no heavy fence), it is never spent, and only the
/// interval's loan applies.
///
/// [`Classes::lenders`]: crate::engine::class::Classes::lenders
fn lend(o: &Owner<'_>, pool: &PoolState, t: usize, how: Fresh) -> Option<(Vec<u8>, usize)> {
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
    let cached = pool
        .classes
        .lenders(t)
        .find_map(|u| o.pop(u).map(|v| (v, u)));
    cached.or_else(|| if looked { None } else { from_depot() })
}

/// Moves up to `n` of tier `t`'s buffers from the depot onto the stack (their charges are
/// paid). Returns how many. Into the room the tier has first; then, where caches share the
/// depot's allowance, each further buffer brings the room it held in the depot
/// ([`Guard::pop_with_room`], [`Owner::transfer_in`]) as far as `cache_bytes` (or the large
/// slot) and the tier's cap allow: the allowance's count does not change, so every retained
/// byte is still counted once.
///
/// Without the second part, a get at the cap whose tier had too little room reserved it from
/// the allowance before the depot's buffers gave theirs back: the allowance had to hold the
/// same buffers twice, so the reservation evicted other retained buffers (largest tiers
/// first), which the next gets then allocated afresh. `cargo run --release -p tierpool-bench
/// --example mixed_random` (the `mixed` workload's random sizes against the 64 MiB cap):
/// 1-8 fresh buffers (2.0-26.3 MiB) and 8.0-26.5 MiB released at the cap per pass before,
/// 0-2 fresh buffers (none in 12 passes of 18) and nothing released at the cap after.
///
/// [`Guard::pop_with_room`]: crate::engine::depot::Guard::pop_with_room
/// [`Owner::transfer_in`]: crate::engine::cache::owner::Owner::transfer_in
fn refill(o: &Owner<'_>, pool: &PoolState, t: usize, n: usize) -> usize {
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

/// Everything a return of `v` (with tag `tag`) can need beyond the fast path.
pub(crate) fn put_slow(o: &Owner<'_>, pool: &PoolState, mut v: Vec<u8>, tag: Tag) {
    housekeeping(o, pool);
    if o.is_dead() {
        o.defer_refund(pool.charge_of(tag));
        free(v, pool.align());
        return; // the pool is gone: free the buffer, count nothing
    }
    scrub(&mut v, o.wipes());
    let cap = v.capacity();
    let Some(t) = pool.classes.for_put(cap) else {
        o.defer_refund(pool.charge_of(tag));
        o.count_untiered();
        free(v, pool.align());
        return;
    };
    // In a pool with a budget only a buffer charged this tier's size may join the stack (its
    // charge stays with it); elsewhere any buffer of the tier's exact size.
    let stackable = cap == o.size(t)
        && match &pool.budget {
            Some(_) => tag == Tag::tier(t) && !under_pressure(pool),
            None => true,
        };
    if stackable {
        reserve(o, pool, t);
        if o.limit(t) > 0 && o.len(t) >= o.limit(t) {
            grow(o, pool, t, 2 * o.limit(t), false);
        }
        let limit = o.limit(t);
        if limit > 0 {
            if o.len(t) >= limit {
                flush(o, pool, t, batch_size(o.cap(t)).min(limit));
            }
            match o.push(t, v, false) {
                Ok(()) => return,
                Err(back) => v = back,
            }
        }
    }
    // A larger buffer (foreign or grown), a tier that bypasses the cache, or no room. A pool
    // with a budget keeps only exact sizes (every buffer it hands out has the capacity it
    // was charged).
    o.defer_refund(pool.charge_of(tag));
    o.count(t, Count::OtherReturn, 1);
    if !pool.file_in_depot(t, v) {
        o.count(t, Count::Discarded, 1);
    }
}

/// Moves the `n` oldest buffers of tier `t` to the depot (its reservation stays), as far as
/// the allowance lets the depot take them. Refunds their charges. Returns how many moved.
fn flush(o: &Owner<'_>, pool: &PoolState, t: usize, n: usize) -> usize {
    let moved = {
        let mut depot = pool.depot.lock(t);
        let fit = depot.reserve_exact(n.min(o.len(t)));
        o.drain_oldest(t, fit, false, |v| depot.push_exact(v))
    };
    o.defer_refund(moved * pool.charge_of(Tag::tier(t)));
    moved
}

/// Tier `t` gives up its whole stack and reservation: the buffers go to the depot with the
/// room they had (a closed depot frees them), and their charges are refunded.
fn give_up(o: &Owner<'_>, pool: &PoolState, t: usize) {
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
fn release(o: &Owner<'_>, pool: &PoolState, t: usize, n: usize) -> usize {
    let size = o.size(t);
    let align = pool.align();
    let bytes = size * o.drain_oldest(t, n, true, |v| free_released(v, align));
    o.defer_refund(bytes / size * pool.charge_of(Tag::tier(t)));
    bytes
}

/// Gives tier `t` a first reservation if it has none and may use the thread cache: one
/// buffer (more comes with use), or the large slot.
fn reserve(o: &Owner<'_>, pool: &PoolState, t: usize) {
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
            o.defer_steal(); // room for the next operation
        }
        return;
    }
    grow(o, pool, t, 1, false);
}

/// Frees the large slot for tier `t` (above `cache_bytes`): the tier that holds it gives up
/// its buffer to the depot, with its room. Tier `t`'s own room comes after: from the
/// allowance (`reserve`), or with the depot's buffer (`refill`).
fn take_large_slot(o: &Owner<'_>, pool: &PoolState, t: usize) {
    if let Some(u) = o.large_holder().filter(|&u| u != t) {
        give_up(o, pool, u);
    }
}

/// Raises tier `t`'s limit toward `target` (at most its cap): from unreserved room, then
/// from other tiers' unused reservations (limits above their stacks: no buffer moves), and,
/// with `displace` (a refill), from other tiers' whole stacks (to the depot, largest tier
/// first); and from the allowance, asking for idle caches to be reclaimed if it is spent.
/// Without `displace` (a return, or a miss's room for its return), a spent allowance also
/// displaces the depot's oldest buffers of other tiers (`evict`), as many as make room for
/// the one buffer in hand if the tier has none left; a refill evicts nothing, as its buffers
/// bring their room (`refill`). So at the cap the pool keeps the buffers in use now over the
/// oldest idle ones, but never trades retained buffers for empty room.
///
/// Reservations grow with use (a first buffer or batch, then doubling when returns find the
/// stack full) rather than to the cap at once, and other tiers give up what they do not
/// hold before anything is evicted. A first version reserved every tier's cap up front: the
/// comparison report's hand-off producer, which runs its 4 KiB, 64 KiB and 1 MiB cases in
/// turn, was left with a limit of one 1 MiB buffer, took the depot's lock on every get and
/// measured 180 ns per buffer instead of 100 (`cargo run --release -p tierpool-bench --
/// --workload cross-thread`, 1 MiB, before and after); and a thread cycling seven sizes had
/// its tiers evict each other on every round (`tests/alloc_free.rs`
/// `steady_state_get_put_allocates_nothing` failed).
fn grow(o: &Owner<'_>, pool: &PoolState, t: usize, target: usize, displace: bool) {
    let (size, limit) = (o.size(t), o.limit(t));
    let target = target.min(o.cap(t));
    if target <= limit || o.is_large(t) {
        return;
    }
    let want = (target - limit) * size;
    if o.unreserved() < want {
        trim_unused(o, t, want);
    }
    if displace && o.unreserved() < want {
        make_room(o, pool, t, want);
    }
    let got = o.raise_limit(t, target);
    if got < target && o.allowance_spent(size) {
        // Eviction makes room for the buffer in hand only, when the tier has none left for
        // it: a refill (`displace`) evicts nothing, its buffers bring their room (`refill`),
        // and a return that doubles its room evicts nothing for the rest of it.
        let short = size.min(o.unreserved() / size * size);
        if displace
            || got > o.len(t)
            || evict(pool, t, short, size) == 0
            || o.raise_limit(t, target) < target
        {
            o.defer_steal(); // more room for the next operation
        }
    }
}

/// The allowance is spent and tier `t` is `need` bytes short, in buffers of `unit` bytes:
/// the depot's oldest buffers of other tiers make way (`Depot::evict`), where caches share
/// the depot's allowance, but only if they can make room for one buffer at least (with what
/// the allowance has free). Returns the bytes freed.
fn evict(pool: &PoolState, t: usize, need: usize, unit: usize) -> usize {
    if need == 0 || !pool.caches_share_allowance() {
        return 0;
    }
    let free = pool.depot.allowance().free();
    let (need, min) = (need.saturating_sub(free), unit.saturating_sub(free));
    let keep = if !pool.lends(Fresh::Plain) {
        t..t + 1
    } else {
        t..pool.classes.lenders(t).end
    };
    let freed = pool.depot.evict(need, min, keep);
    pool.allocator_trim.released(freed, Why::Cap);
    freed
}

/// Lowers other tiers' limits to their stacks' lengths (but not below one buffer, so that a
/// tier in use keeps its storage and its fast path), largest tier first, until `need` bytes
/// of `cache_bytes` are unreserved. Moves no buffer and allocates nothing.
fn trim_unused(o: &Owner<'_>, t: usize, need: usize) {
    for u in (0..o.tiers()).rev() {
        if o.unreserved() >= need {
            return;
        }
        let keep = o.len(u).max(1);
        if u != t && !o.is_large(u) && o.limit(u) > keep {
            o.set_limit(u, keep);
        }
    }
}

/// Frees at least `need` bytes of `cache_bytes` for tier `t` by handing whole stacks of other
/// tiers, largest tier first, to the depot (releasing what the depot cannot take) and taking
/// their reservations away.
///
/// Without this, a thread whose sizes change keeps its room full of buffers of sizes it no
/// longer uses until they decay, and every get of its new size takes the slow path meanwhile:
/// with two idle 1 MiB buffers in a producer's 2 MiB, a 64 KiB hand-off took 149 ns per buffer
/// instead of 52 in the first release without its equivalent. With this and `grow`: 48.9 ns
/// with the idle buffers, 46.4 without (`cargo run --release -p tierpool-bench --example
/// idle_budget 8`, medians of 8 interleaved rounds).
#[cold]
fn make_room(o: &Owner<'_>, pool: &PoolState, t: usize, need: usize) {
    for u in (0..o.tiers()).rev() {
        if o.unreserved() >= need {
            return;
        }
        if u == t || o.limit(u) == 0 || o.is_large(u) {
            continue;
        }
        give_up(o, pool, u);
    }
}

/// The pool's allowance was spent: reclaims the caches that have not been used since the last
/// tick, at most once per sixteenth of an interval, so that a thread that needs room takes it
/// from threads that went quiet (tcmalloc's threads steal cache capacity from each other the
/// same way). After an operation, never inside one.
fn steal(pool: &PoolState) {
    let now = pool.clock.tick16();
    let last = pool.last_steal.load(Relaxed);
    if now == last
        || pool
            .last_steal
            .compare_exchange(last, now, Relaxed, Relaxed)
            .is_err()
    {
        return;
    }
    if let Some(r) = pool.caches.turn(Turn::Try) {
        reclaim_idle(pool, &r, false);
    }
}

/// True if a waiter is queued for the budget (thread caches keep nothing then).
fn under_pressure(pool: &PoolState) -> bool {
    pool.budget.as_ref().is_some_and(|b| b.under_pressure())
}

/// Counts a slow operation and runs [`service`] if the doorbell rang or housekeeping is due.
fn housekeeping(o: &Owner<'_>, pool: &PoolState) {
    let due = o.tick_countdown();
    if o.rung() || due {
        service(o, pool);
    }
}

/// Looks at the pool: closed (free everything, keep nothing from now on), trimmed (release
/// everything), budget pressure (give the stacks back, stay rung), or a new decay interval
/// (release what stayed idle, and tick the pool).
pub(crate) fn service(o: &Owner<'_>, pool: &PoolState) {
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
    if under_pressure(pool) {
        give_back(o, pool);
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
pub(crate) fn after(pool: &PoolState, after: After) {
    pool.refund(after.refund);
    if let Some(epoch) = after.tick {
        tick(pool, epoch, Turn::Try);
    }
    if after.steal {
        steal(pool);
    }
}

/// Releases, in every tier, the buffers that stayed below the stack's low-water mark for the
/// whole interval, shrinks the reservation by as many, and gives back the reservations of
/// tiers that saw no use. Returns the bytes released.
fn decay(o: &Owner<'_>, pool: &PoolState) -> usize {
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

/// Releases every buffer this cache holds and its reservations, refunding their charges.
/// Returns the bytes released.
pub(crate) fn release_all(o: &Owner<'_>, pool: &PoolState) -> usize {
    let mut bytes = 0;
    for t in 0..o.tiers() {
        bytes += release(o, pool, t, usize::MAX);
        o.set_limit(t, 0);
        o.free_storage(t);
    }
    bytes
}

/// Gives every stack to the depot, with its room (a closed depot frees them), refunding the
/// charges: a budget waiter's sweep, thread exit.
fn give_back(o: &Owner<'_>, pool: &PoolState) {
    for t in 0..o.tiers() {
        if o.limit(t) > 0 {
            give_up(o, pool, t);
        }
        o.free_storage(t);
    }
}

/// The pool closed: free everything, keep nothing from now on.
fn kill(o: &Owner<'_>, pool: &PoolState) {
    release_all(o, pool);
    o.mark_dead();
    pool.caches.detach(o.cache());
}

/// The thread is exiting (or its table is being dropped): hand everything to the depot, as
/// far as the allowance lets it, free the rest, and fold this thread's counts into the pool's.
pub(crate) fn retire(o: &Owner<'_>, pool: &PoolState) {
    if !o.is_dead() {
        give_back(o, pool);
    }
    pool.caches.detach(o.cache());
}

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
    if done.is_none() {
        pool.caches.ring_all();
        return None;
    }
    Some(bytes)
}

/// Closing: every thread cache frees everything and dies now, reclaimed; without a heavy
/// fence, at its owner's next operation.
pub(crate) fn close_all(pool: &PoolState) {
    pool.close();
    if reclaim_all(pool, |o| kill(o, pool)).is_none() {
        pool.caches.ring_all();
    }
}

/// A budget waiter's sweep (after it joined the queue): every thread cache's stacks go to the
/// depot and their charges to the account, whether its owner is busy or idle.
///
/// Every cache, also one that holds nothing now: its owner may be in the middle of a slow
/// return that read the pressure flag before the waiter raised it, and about to reserve room
/// and push. Reclaiming waits for that operation to end (and takes what it pushed), and rings
/// the doorbell, so that the owner's next operation takes the lock and sees the flag. (With
/// empty caches skipped, the budget stress test lost a wake-up about one run in ten.)
pub(crate) fn sweep(pool: &PoolState) {
    if reclaim_all(pool, |o| give_back(o, pool)).is_none() {
        pool.caches.ring_all();
    }
}

/// Reclaims every cache (waiting for the turn and every lock) and runs `act` on each, then
/// gives back the charges the actions refunded, once every cache is let go.
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

/// Runs `f` with this owner, then does what it left to do ([`after`]) once the owner is
/// gone: every owner of this thread's cache ends so (`tls.rs`).
pub(crate) fn finish<R>(o: Owner<'_>, pool: &PoolState, f: impl FnOnce(&Owner<'_>) -> R) -> R {
    let r = f(&o);
    let left = o.take_after();
    drop(o);
    if left != After::default() {
        after(pool, left);
    }
    r
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::base::key::Key;
    use crate::base::sync::Arc;
    use crate::Builder;

    /// A pool's state with `tiers`, a retained cap and thread caches of `cache_bytes`.
    fn capped(tiers: &[usize], cap: usize, cache_bytes: usize) -> PoolState {
        let b = Builder::new().tiers(tiers.iter().copied());
        PoolState::new(
            b.max_retained_bytes(cap)
                .thread_cache_bytes(cache_bytes)
                .validate()
                .unwrap(),
        )
    }

    /// A thread that only gets (refills from the depot, pops) is not idle: decay keeps its
    /// reservation and storage. One that neither returned nor refilled for an interval, with
    /// nothing on its stack, gives both back.
    #[test]
    fn decay_keeps_a_getting_tier_and_frees_an_idle_one() {
        let state = PoolState::new(Builder::new().tiers([64, 128]).validate().unwrap());
        let cache = state.new_cache(Key::new(1, false, 1));
        // SAFETY: nothing else reaches this cache.
        let o = unsafe { Owner::new_unshared(&cache) };
        decay(&o, &state); // a first look: records the counts
        assert!(o.set_limit(0, 4) && o.set_limit(1, 4));
        // Tier 0 refills and pops (a producer); tier 1 does nothing.
        o.push(0, Vec::with_capacity(64), true).unwrap();
        drop(o.pop(0).unwrap());
        decay(&o, &state);
        assert_eq!(o.limit(0), 4, "a tier in use keeps its reservation");
        assert_eq!(
            o.limit(1),
            0,
            "an idle, empty tier gives its reservation back"
        );
        decay(&o, &state);
        assert_eq!(o.limit(0), 0, "idle for a whole interval now");
        drop(o);
        state.caches.detach(&cache);
        drop(cache);
        assert_eq!(
            state.depot.allowance().held(),
            0,
            "every reservation came back"
        );
    }

    /// A cache with no room for the buffer in hand, the allowance spent, makes room for
    /// that one buffer from the depot's other tiers, oldest first, and no more (it asked for
    /// three). But nothing is released if not even one buffer's room can be made.
    #[test]
    fn eviction_makes_room_for_one_buffer_but_not_less_and_not_more() {
        let state = capped(&[64, 128], 448, 448);
        if !state.caches_share_allowance() {
            return; // no heavy fence here: caches do not draw from the depot's allowance
        }
        // The allowance spent: two 128-byte buffers (the tier being grown: kept) and three
        // of 64 (another tier: 192 bytes that may make way).
        for _ in 0..2 {
            state.depot.put_one(1, Vec::with_capacity(128)).unwrap();
        }
        for _ in 0..3 {
            state.depot.put_one(0, Vec::with_capacity(64)).unwrap();
        }
        assert_eq!(state.depot.allowance().held(), 448);
        let cache = state.new_cache(Key::new(1, false, 1));
        // SAFETY: nothing else reaches this cache.
        let o = unsafe { Owner::new_unshared(&cache) };
        grow(&o, &state, 1, 3, false);
        assert_eq!(o.limit(1), 1, "room for one buffer of the three wanted");
        assert_eq!(
            state.depot.bytes(),
            256 + 64,
            "the two oldest 64-byte buffers made way, and no more: room for the one in hand"
        );
        // A buffer of 256 bytes' room wanted for tier 1, 64 bytes of the allowance free, and
        // 128 bytes of other tiers in the depot: they could not make it, and stay.
        assert!(o.set_limit(1, 0));
        state.depot.put_one(0, Vec::with_capacity(64)).unwrap();
        assert_eq!(state.depot.allowance().held(), 384);
        assert_eq!(evict(&state, 1, 256, 256), 0);
        assert_eq!(state.depot.bytes(), 384, "128 bytes of 64s cannot make 192");
        // With 64 more of them (the allowance spent again) a buffer of 128 can be made: the
        // oldest go first, only as many as needed.
        state.depot.put_one(0, Vec::with_capacity(64)).unwrap();
        assert_eq!(evict(&state, 1, 128, 128), 128);
        assert_eq!(state.depot.bytes(), 256 + 64);
        drop(o);
        state.caches.detach(&cache);
    }

    /// At the cap, a refill takes the room the depot's buffers held there beyond what room
    /// the tier has: nothing is evicted, and the allowance still counts every retained byte
    /// once. A first get of a tier (its `cache_bytes` room made by giving another tier's
    /// stack to the depot), a batch beyond the tier's room, and the large slot taken from
    /// the tier that held it; with and without a budget, whose charges stay exact.
    #[test]
    fn a_refill_at_the_cap_takes_the_room_its_buffers_held_in_the_depot() {
        for budget in [false, true] {
            let mut b = Builder::new()
                .tiers([64, 256, 512, 1024])
                .max_retained_bytes(2560)
                .thread_cache_bytes(256);
            if budget {
                b = b.max_in_use_bytes(1 << 20);
            }
            let Some((state, cache)) = with_shared_cache(PoolState::new(b.validate().unwrap()))
            else {
                return;
            };
            let (get, put) = ops(&state, &cache);
            let owner = || owner_of(&cache);
            let books = || assert_books(&state, &owner());
            // Tier 1's stack holds a buffer (a miss, returned: all of `cache_bytes`), the
            // large slot one of 512 (tier 2); the depot holds four of 64 bytes, two of 256 and
            // one of 1024: the allowance is spent.
            put(get(200));
            put(get(500));
            for _ in 0..4 {
                state.depot.put_one(0, Vec::with_capacity(64)).unwrap();
            }
            for _ in 0..2 {
                state.depot.put_one(1, Vec::with_capacity(256)).unwrap();
            }
            state.depot.put_one(3, Vec::with_capacity(1024)).unwrap();
            assert_eq!(state.depot.allowance().held(), 2560);
            books();
            // A first get of tier 0: tier 1's stack goes to the depot with its room, the
            // 64-byte buffer comes with its own. Before, the get evicted the 1024-byte one.
            let a = get(50);
            assert_eq!(a.capacity(), 64);
            assert_eq!(
                state.depot.bytes(),
                3 * 64 + 3 * 256 + 1024,
                "nothing evicted"
            );
            books();
            // Returned and taken again, the tier's next refill asks for two (slow start):
            // one into the room it has, one bringing its own.
            put(a);
            let a = get(50);
            let b = get(50);
            assert_eq!(state.depot.bytes(), 64 + 3 * 256 + 1024, "nothing evicted");
            books();
            // Tier 3 is above `cache_bytes`: it takes the large slot from tier 2, whose
            // buffer goes to the depot with its room, and its own room with the depot's buffer.
            let c = get(1000);
            assert_eq!(c.capacity(), 1024);
            assert_eq!(state.depot.bytes(), 64 + 3 * 256 + 512, "nothing evicted");
            let o = owner();
            assert_eq!((o.limit(2), o.limit(3), o.large_holder()), (0, 1, Some(3)));
            drop(o);
            books();
            if budget {
                assert_eq!(state.in_use(), 2 * 64 + 1024, "what is out is charged");
            }
            for v in [a, b, c] {
                put(v);
            }
            books();
            if budget {
                assert_eq!(state.in_use(), 0, "every charge came back");
            }
            assert_eq!(state.depot.allowance().held(), 2560);
            state.caches.detach(&cache);
            drop((get, put, books, owner));
            drop(cache);
            assert_eq!(state.depot.allowance().held(), state.depot.bytes());
        }
    }

    /// A refill gives a tier at a limit of 0 its slots before it takes the depot's lock, and
    /// may then find the depot's buffer gone (another thread took it): at a limit of 0 the
    /// slots must offer the fast path no room. A first form left `full` unset there: returns
    /// went onto the stack past its limit and, past its slots, into the heap (a double free in
    /// the report's `idle-threads` workload, where the refill also gave slots when the depot
    /// had nothing; now it gives none then).
    #[test]
    fn slots_given_before_a_refill_offer_no_room_at_limit_zero() {
        use crate::engine::cache::fast::{push, Pushed};
        let state = capped(&[64, 128], 256, 128);
        state.depot.put_one(1, Vec::with_capacity(128)).unwrap();
        let key = Key::new(1, false, 1);
        let cache = state.new_cache(key);
        // SAFETY: nothing else reaches this cache.
        let o = unsafe { Owner::new_unshared(&cache) };
        assert_eq!(refill(&o, &state, 0, 1), 0, "the depot has none of tier 0");
        o.ensure_storage(0); // what a refill that loses the depot's buffer to a race leaves
        assert_eq!(o.limit(0), 0);
        drop(o);
        for _ in 0..3 {
            let mut v = Vec::with_capacity(64);
            // SAFETY: the cache is alive, armed with `key`, and used by this thread alone.
            let pushed = unsafe { push(Cache::doorbell(&cache), key, Tag::tier(0).hint(), &mut v) };
            assert!(matches!(pushed, Pushed::Refused), "no room at a limit of 0");
        }
        state.caches.detach(&cache);
    }

    /// A refill moves buffers with their room only as far as the tier's cap and
    /// `cache_bytes` allow, then stops (the rest stay in the depot, counted there), and the
    /// allowance counts every retained byte once throughout.
    #[test]
    fn a_refill_with_room_stops_at_the_tiers_cap_and_at_cache_bytes() {
        // Tier 0 (64) may hold four buffers in the cache's 256 bytes.
        let Some((state, cache)) = with_shared_cache(capped(&[64, 128], 1024, 256)) else {
            return;
        };
        let o = owner_of(&cache);
        for _ in 0..4 {
            state.depot.put_one(0, Vec::with_capacity(64)).unwrap();
        }
        // Tier 1 holds half of `cache_bytes`: two buffers' room is left for tier 0.
        assert!(o.set_limit(1, 1));
        assert_books(&state, &o);
        assert_eq!(refill(&o, &state, 0, 4), 2, "cache_bytes stops the third");
        assert_eq!((o.len(0), o.limit(0), state.depot.bytes()), (2, 2, 128));
        assert_books(&state, &o);
        // Tier 1's room given back: the other two come, with theirs, up to the tier's cap.
        assert!(o.set_limit(1, 0));
        for _ in 0..2 {
            state.depot.put_one(0, Vec::with_capacity(64)).unwrap();
        }
        assert_eq!(
            refill(&o, &state, 0, 4),
            2,
            "the tier's cap stops the fifth"
        );
        assert_eq!((o.len(0), o.limit(0), state.depot.bytes()), (4, 4, 128));
        assert_books(&state, &o);
        assert_eq!(
            refill(&o, &state, 0, 4),
            0,
            "a full stack at its cap takes nothing"
        );
        assert_eq!(state.depot.bytes(), 128);
        assert_books(&state, &o);
        release_all(&o, &state);
        assert_books(&state, &o);
        drop(o);
        state.caches.detach(&cache);
    }

    /// `state` and a cache of it, where caches share the depot's allowance; `None` where
    /// they do not (no heavy fence here, and under Miri), for the tests of what the
    /// allowance's cap does, which then have nothing to check.
    fn with_shared_cache(state: PoolState) -> Option<(PoolState, Arc<Cache>)> {
        if !state.caches_share_allowance() {
            return None;
        }
        let cache = state.new_cache(Key::new(1, false, 1));
        Some((state, cache))
    }

    /// The owner of a test's `cache`, which one call at a time uses.
    fn owner_of(cache: &Cache) -> Owner<'_> {
        // SAFETY: the test's cache: nothing else reaches it, and the tests take one owner at
        // a time.
        unsafe { Owner::new_unshared(cache) }
    }

    /// Gets and returns as the fast path's caller runs them (the deferred work after each),
    /// on one cache of `state`.
    fn ops<'a>(
        state: &'a PoolState,
        cache: &'a Cache,
    ) -> (impl Fn(usize) -> Vec<u8> + 'a, impl Fn(Vec<u8>) + 'a) {
        let get = move |n: usize| {
            finish(owner_of(cache), state, |o| {
                match get_slow(o, state, n, Fresh::Plain, 0).unwrap() {
                    Got::Buf(v, _) => v.into_vec(),
                    Got::Wait(_) => panic!("no budget here"),
                }
            })
        };
        let put = move |v: Vec<u8>| {
            let tag = Tag::tier(state.classes.for_put(v.capacity()).unwrap());
            finish(owner_of(cache), state, move |o| put_slow(o, state, v, tag));
        };
        (get, put)
    }

    /// Every retained byte counted once: the allowance is the depot's bytes plus every
    /// reservation of `o`'s cache.
    fn assert_books(state: &PoolState, o: &Owner<'_>) {
        let reserved: usize = (0..o.tiers()).map(|t| o.limit(t) * o.size(t)).sum();
        assert_eq!(
            state.depot.allowance().held(),
            state.depot.bytes() + reserved
        );
    }

    /// A get of a tier with no room, at the cap, is lent the depot's larger buffer (up to
    /// `MAX_LOANS_AT_CAP` times an interval) without spending the interval's loan: a fresh one could be kept only by
    /// evicting another retained buffer, or not at all. A tier with room allocates its own
    /// (it then stays on the fast path).
    #[test]
    fn at_the_cap_a_get_without_room_is_lent_the_depots_buffers() {
        // Tier 0 (64) may hold one buffer; tier 1 (128) is above `cache_bytes` (the large
        // slot).
        let Some((state, cache)) = with_shared_cache(capped(&[64, 128], 256, 64)) else {
            return;
        };
        assert!(state.lends(Fresh::Plain));
        let (get, _) = ops(&state, &cache);
        let owner = || owner_of(&cache);
        // The allowance spent by the depot's two 128-byte buffers: tier 0 gets no room, and
        // is lent one.
        for _ in 0..2 {
            state.depot.put_one(1, Vec::with_capacity(128)).unwrap();
        }
        let first = get(50);
        assert_eq!((first.capacity(), owner().limit(0)), (128, 0));
        // Another thread returns one (the allowance spent again): lent again, where it
        // allocated a 64-byte buffer before (the interval's loan was spent).
        state.depot.put_one(1, Vec::with_capacity(128)).unwrap();
        let second = get(50);
        assert_eq!(second.capacity(), 128, "lent at the cap, not allocated");
        assert_eq!(state.depot.bytes(), 128);
        assert!(owner().mark_lent(0), "the interval's loan is still there");
        // With room left (a 128-byte buffer's worth of allowance free), the tier reserves
        // it and allocates its own buffer.
        let third = get(50);
        assert_eq!(
            (third.capacity(), owner().limit(0)),
            (64, 1),
            "its own, into its room"
        );
        assert_eq!(state.depot.bytes(), 128, "nothing evicted or lent");
        // Another cache takes the last of the allowance: tier 0 still has its room (the
        // third buffer is out), so a fresh buffer will be kept there, and it allocates one.
        let other = state.new_cache(Key::new(2, false, 1));
        assert!(owner_of(&other).set_limit(0, 1));
        assert_eq!(state.depot.allowance().free(), 0);
        let fourth = get(50);
        assert_eq!(fourth.capacity(), 64, "a tier with room allocates its own");
        drop((first, second, third, fourth)); // freed, not returned: the test is about gets
        state.caches.detach(&other);
        state.caches.detach(&cache);
    }

    /// Review 2's loop, bounded: a cache whose `cache_bytes` a lender's stack fills gives
    /// it to the depot to make room, and is lent it back at every get, allocating, evicting
    /// and releasing nothing; after `MAX_LOANS_AT_CAP` such loans (and the interval's loan)
    /// the tier evicts the depot's idle buffer of another size for room, allocates its own
    /// buffer and keeps it, and its gets leave the slow path.
    #[test]
    fn at_the_cap_a_get_in_a_loop_is_lent_a_bounded_number_of_times() {
        // Tiers 64 / 128 / 256 in 128 bytes of cache (256 is the large slot).
        let Some((state, cache)) = with_shared_cache(capped(&[64, 128, 256], 384, 128)) else {
            return;
        };
        let (get, put) = ops(&state, &cache);
        let owner = || owner_of(&cache);
        // The cache's 128 bytes hold a 128; the depot an idle 256: the allowance is spent.
        put(Vec::with_capacity(128));
        state.depot.put_one(2, Vec::with_capacity(256)).unwrap();
        assert_eq!(state.depot.allowance().free(), 0);
        let misses = || state.stats().misses;
        let before = misses();
        // The loans at the cap, then the interval's loan: the 128 each time, nothing
        // allocated or evicted.
        for _ in 0..=MAX_LOANS_AT_CAP {
            let lent = get(50);
            assert_eq!((lent.capacity(), owner().limit(0)), (128, 0));
            put(lent);
            assert_eq!(state.depot.bytes(), 256, "nothing evicted");
            assert_books(&state, &owner());
        }
        assert_eq!(misses(), before, "lent, not allocated");
        // The bound reached: the tier takes room (the depot's idle 256 makes way) and
        // allocates its own buffer, which it keeps.
        let own = get(50);
        assert_eq!(own.capacity(), 64, "its own buffer");
        assert_eq!((owner().limit(0), misses()), (1, before + 1));
        put(own);
        for _ in 0..3 {
            let again = get(50);
            assert_eq!(
                (again.capacity(), owner().len(0)),
                (64, 0),
                "from its stack"
            );
            put(again);
        }
        assert_eq!(misses(), before + 1);
        assert_books(&state, &owner());
        // A new interval starts the count again.
        assert_eq!(owner().loans_at_cap(0), MAX_LOANS_AT_CAP);
        decay(&owner(), &state);
        assert_eq!(owner().loans_at_cap(0), 0);
        state.caches.detach(&cache);
    }

    /// At the cap, a look at the depot that finds no lender (its idle buffers are of a size
    /// too large to lend) spends none of the tier's loans: the get misses and takes room,
    /// the depot's idle buffer making way.
    #[test]
    fn at_the_cap_a_look_that_finds_no_lender_is_not_a_loan() {
        // Tiers 64 / 128 / 256; the lenders of 64 are the 128s. The depot's 256 spends the
        // allowance and cannot be lent to 64.
        let Some((state, cache)) = with_shared_cache(capped(&[64, 128, 256], 256, 64)) else {
            return;
        };
        let (get, put) = ops(&state, &cache);
        let owner = || owner_of(&cache);
        state.depot.put_one(2, Vec::with_capacity(256)).unwrap();
        assert_eq!(state.depot.allowance().free(), 0);
        let misses = state.stats().misses;
        let own = get(50);
        assert_eq!(own.capacity(), 64, "allocated, nothing to lend");
        assert_eq!(state.stats().misses, misses + 1);
        assert_eq!(owner().loans_at_cap(0), 0, "a look is not a loan");
        assert_eq!(
            (owner().limit(0), state.depot.bytes()),
            (1, 0),
            "room taken, the 256 evicted"
        );
        put(own);
        assert_books(&state, &owner());
        state.caches.detach(&cache);
    }

    /// At the cap, this cache's own stacks lend only the interval's loan: their room stays
    /// with them, so a tier lent from them every time would never get room of its own and
    /// would take the slow path on every get. After the loan the tier evicts the depot's
    /// idle buffer of another size for room, allocates its own, and keeps it.
    #[test]
    fn at_the_cap_a_tier_gets_room_of_its_own_after_one_loan_from_its_cache() {
        // Tiers 64 / 128 / 256 in 256 bytes of cache; the lenders of 64 are the 128s.
        let Some((state, cache)) = with_shared_cache(capped(&[64, 128, 256], 384, 256)) else {
            return;
        };
        let (get, put) = ops(&state, &cache);
        let owner = || owner_of(&cache);
        // The cache holds a 128 (its room), the depot a 256: the allowance is spent.
        put(Vec::with_capacity(128));
        state.depot.put_one(2, Vec::with_capacity(256)).unwrap();
        assert_eq!(state.depot.allowance().free(), 0);
        // The interval's loan: the cache's own 128, which goes back to its stack.
        let lent = get(50);
        assert_eq!((lent.capacity(), owner().limit(0)), (128, 0));
        put(lent);
        assert_eq!(owner().len(1), 1);
        // The next get is not lent the same buffer again: the depot's 256 makes way for
        // tier 0's room, and the tier allocates its own buffer, which it keeps.
        let own = get(50);
        assert_eq!(
            own.capacity(),
            64,
            "its own buffer, not the cache's 128 again"
        );
        assert_eq!((owner().limit(0), state.depot.bytes()), (1, 0));
        put(own);
        let o = owner();
        assert_eq!((o.len(0), o.len(1)), (1, 1));
        drop(o);
        let again = get(50);
        assert_eq!(
            (again.capacity(), owner().len(0)),
            (64, 0),
            "from its own stack"
        );
        put(again);
        assert_eq!(
            state.depot.allowance().held(),
            64 + 128,
            "every retained byte counted once"
        );
        state.caches.detach(&cache);
    }

    /// Under a budget, a refill moves only the buffers the budget could pay for (the rest of
    /// the batch stays in the depot), and the charges stay exact: what is out and what the
    /// stack holds are charged, nothing else.
    #[test]
    fn a_refill_under_a_budget_moves_only_what_it_paid_for() {
        // A budget of 8192 + 192 bytes (thread caches of 512 fit under its sixteenth).
        let b = Builder::new()
            .tiers([64, 8192])
            .max_retained_bytes(1 << 20)
            .thread_cache_bytes(512)
            .max_in_use_bytes(8192 + 192);
        let state = PoolState::new(b.validate().unwrap());
        if !state.caches_share_allowance() {
            return; // no heavy fence here: the refill is limited by the tier's room instead
        }
        for _ in 0..6 {
            state.depot.put_one(0, Vec::with_capacity(64)).unwrap();
        }
        let cache = state.new_cache(Key::new(1, false, 1));
        let (get, put) = ops(&state, &cache);
        let owner = || owner_of(&cache);
        let big = get(8000); // 192 bytes of the budget left
        let first = get(50); // a refill of one (slow start)
        assert_eq!((owner().len(0), state.in_use()), (0, 8192 + 64));
        // The next refill asks for a batch of four; the budget has room for two.
        owner().double_fill(0, 4);
        assert_eq!(owner().fill(0, 4), 4);
        let second = get(50);
        assert_eq!(
            owner().len(0),
            1,
            "two moved: one handed out, one on the stack"
        );
        assert_eq!(
            state.depot.bytes(),
            3 * 64,
            "the other two stay in the depot"
        );
        assert_eq!(
            state.in_use(),
            8192 + 128,
            "what is out is charged, the stack apart"
        );
        for v in [big, first, second] {
            put(v);
        }
        assert_eq!(state.in_use(), 0, "every charge came back");
        state.caches.detach(&cache);
    }

    /// A tier's refills start at one buffer and double with use (up to half its stack), so
    /// that a thread new to a tier does not take every buffer the depot holds while it needs
    /// one (a second thread then allocated, in the `mixed` workload's random sizes); decay
    /// halves them again when buffers stayed idle, and a tier that gives up its storage
    /// starts over.
    #[test]
    fn refills_start_at_one_buffer_and_double_with_use() {
        let state = PoolState::new(Builder::new().tiers([64]).validate().unwrap());
        for _ in 0..8 {
            state.depot.put_one(0, Vec::with_capacity(64)).unwrap();
        }
        let in_depot = || state.depot.bytes() / 64;
        let get = |c: &Cache| {
            // SAFETY: the test's caches, each used by one call at a time.
            let o = unsafe { Owner::new_unshared(c) };
            match get_slow(&o, &state, 64, Fresh::Plain, 0) {
                Ok(Got::Buf(v, _)) => assert_eq!(v.capacity(), 64),
                _ => panic!("a buffer"),
            }
            o.len(0)
        };
        let (a, b) = (
            state.new_cache(Key::new(1, false, 1)),
            state.new_cache(Key::new(2, false, 1)),
        );
        assert_eq!((get(&a), in_depot()), (0, 7), "a first refill takes one");
        assert_eq!(
            (get(&b), in_depot()),
            (0, 6),
            "and leaves the rest to others"
        );
        assert_eq!((get(&a), in_depot()), (1, 4), "then two");
        get(&a);
        assert_eq!((get(&a), in_depot()), (3, 0), "then four");
        // SAFETY: as above.
        let o = unsafe { Owner::new_unshared(&a) };
        let fill = || o.cache().head.cold[0].fill.load(Relaxed);
        decay(&o, &state); // starts an interval with three buffers on the stack
        assert_eq!(fill(), 8);
        let v = o.pop(0).unwrap();
        o.push(0, v, false).unwrap();
        decay(&o, &state); // two of them stayed idle: released
        assert_eq!((fill(), o.len(0)), (4, 1));
        decay(&o, &state); // the last one too, and the tier saw no use: storage given up
        assert_eq!((fill(), o.limit(0)), (0, 0), "starts over");
        assert_eq!(state.stats().tiers[0].misses, 0);
        drop(o);
        for c in [&a, &b] {
            exit(c, &state);
        }
    }

    /// A thread's housekeeping looks come after fewer returns when they are far apart in time
    /// (a thread returning a buffer a millisecond looked every 256 ms, and ticked the pool two
    /// intervals late), and after more, up to `CHECK_EVERY`, when they come close together; the
    /// returns and hits counted stay exact whatever each countdown's length.
    #[test]
    fn housekeeping_is_paced_by_the_time_between_looks_and_counts_stay_exact() {
        use crate::engine::cache::stack::{CHECK_EVERY, MIN_CHECK_EVERY};
        let state = PoolState::new(Builder::new().tiers([64]).validate().unwrap());
        let cache = state.new_cache(Key::new(1, false, 1));
        // SAFETY: nothing else reaches this cache.
        let o = unsafe { Owner::new_unshared(&cache) };
        let every = || cache.head.check_every.load(Relaxed);
        assert_eq!(every(), MIN_CHECK_EVERY, "a new cache looks often");
        let mut now = cache.head.looked.load(Relaxed);
        for want in [16, 32, 64, 128, CHECK_EVERY, CHECK_EVERY] {
            o.pace(now); // within the same sixteenth of an interval
            assert_eq!(every(), want);
        }
        now += 1;
        o.pace(now);
        assert_eq!(every(), CHECK_EVERY, "a sixteenth apart: as before");
        for want in [128, 64, 32, 16, MIN_CHECK_EVERY, MIN_CHECK_EVERY] {
            now += 5;
            o.pace(now);
            assert_eq!(every(), want);
        }
        assert!(o.set_limit(0, 4));
        for round in 0..1000u64 {
            o.push(0, Vec::with_capacity(64), false).unwrap();
            drop(o.pop(0).unwrap());
            if round % 7 == 0 {
                now += [0, 0, 3][(round % 3) as usize];
                o.pace(now);
            }
        }
        let s = state.stats();
        assert_eq!((s.tiers[0].returned, s.tiers[0].hits), (1000, 1000), "{s}");
        drop(o);
        exit(&cache, &state);
    }

    /// `stats()` read across a fold (the total loaded before it, the countdown after it) reads
    /// the tier's returns a countdown's length short: early in a tier's life, below zero. The
    /// reading is clamped, never an overflow (a panic in debug builds) or a wrapped count.
    #[test]
    fn a_count_read_across_a_fold_is_clamped_not_wrapped() {
        use crate::engine::cache::stack::{fold, CHECK_EVERY, MIN_CHECK_EVERY};
        let state = PoolState::new(Builder::new().tiers([64]).validate().unwrap());
        let cache = state.new_cache(Key::new(1, false, 1));
        // SAFETY: nothing else reaches this cache.
        let o = unsafe { Owner::new_unshared(&cache) };
        assert!(o.set_limit(0, 4));
        for _ in 0..MIN_CHECK_EVERY {
            o.push(0, Vec::with_capacity(64), false).unwrap();
            drop(o.pop(0).unwrap());
        }
        let (tier, cold) = cache.tier(0);
        assert_eq!(
            tier.returns_left.load(Relaxed),
            MIN_CHECK_EVERY,
            "folded at 8"
        );
        // The state a reader sees when it loads the total before a fold that restarts the
        // countdown at `CHECK_EVERY`, and the countdown after it.
        tier.returns_left.store(0, Relaxed);
        let before = cold.pushes_folded.load(Relaxed);
        fold(tier, cold, CHECK_EVERY);
        let after = cold.pushes_folded.swap(before, Relaxed);
        let s = state.stats();
        assert_eq!((s.tiers[0].returned, s.tiers[0].hits), (0, 0), "{s}");
        cold.pushes_folded.store(after, Relaxed);
        let s = state.stats();
        assert_eq!((s.tiers[0].returned, s.tiers[0].hits), (16, 16), "{s}");
        drop(o);
        exit(&cache, &state);
    }

    /// Empties a cache as an exiting thread does (`retire`): stacks to the depot, room and
    /// storage given back; then detaches it.
    fn exit(cache: &Cache, state: &PoolState) {
        // SAFETY: the test's cache, used by nothing else meanwhile.
        let o = unsafe { Owner::new_unshared(cache) };
        retire(&o, state);
    }

    /// An exited thread's empty cache is parked and taken over by the next new cache, as new:
    /// not while anything else still refers to it, never one that holds something, and not
    /// after a whole interval unused, a trim or the close.
    #[test]
    fn parked_caches_are_taken_over_as_new_and_decay() {
        let state = PoolState::new(Builder::new().tiers([64, 128]).validate().unwrap());
        let key = Key::new(1, false, 1);
        let a = state.new_cache(key);
        {
            // SAFETY: nothing else reaches this cache.
            let o = unsafe { Owner::new_unshared(&a) };
            assert!(o.set_limit(0, 4));
            o.push(0, Vec::with_capacity(64), true).unwrap();
            drop(o.pop(0).unwrap());
        }
        // Detached holding a reservation (no `retire`): freed, not parked.
        state.caches.detach(&a);
        assert_eq!(state.caches.parked(), 0);
        drop(a);
        let b = state.new_cache(key);
        {
            // SAFETY: as above.
            let o = unsafe { Owner::new_unshared(&b) };
            assert!(o.set_limit(0, 4));
            o.push(0, Vec::with_capacity(64), true).unwrap();
            drop(o.pop(0).unwrap());
        }
        exit(&b, &state);
        assert_eq!(state.caches.parked(), 1);
        // Still held (by its thread's table, say): not taken.
        let c = state.new_cache(key);
        assert!(!Arc::ptr_eq(&b, &c));
        exit(&c, &state);
        let b_at = Arc::as_ptr(&b);
        drop(b);
        // `c` is the newest parked one, but still held: `b` is taken, made new.
        let d = state.new_cache(key);
        assert_eq!(Arc::as_ptr(&d), b_at);
        assert_eq!(state.caches.parked(), 1);
        assert!(d.is_empty());
        let s = state.stats();
        assert_eq!(s.thread_caches, 1);
        // Both exited caches' counts once each (two refills, two hits), none from `d` yet.
        assert_eq!((s.tiers[0].hits, s.tiers[0].misses), (2, 0), "{s}");
        {
            // SAFETY: as above.
            let o = unsafe { Owner::new_unshared(&d) };
            assert_eq!(o.limit(0), 0, "no reservation carried over");
            assert!(o.set_limit(0, 4), "usable as new");
            o.push(0, Vec::with_capacity(64), true).unwrap();
            drop(o.pop(0).unwrap());
        }
        assert_eq!(state.stats().tiers[0].hits, 3);
        // A whole interval parked: freed at the second tick.
        drop(c);
        state.caches.decay_parked(false);
        assert_eq!(
            state.caches.parked(),
            1,
            "the first tick starts the interval"
        );
        state.caches.decay_parked(false);
        assert_eq!(state.caches.parked(), 0);
        // `trim` frees them at once; a closed pool keeps none.
        exit(&d, &state);
        drop(d);
        assert_eq!(state.caches.parked(), 1);
        state.trim_spares();
        assert_eq!(state.caches.parked(), 0);
        let e = state.new_cache(key);
        state.close();
        exit(&e, &state);
        assert_eq!(state.caches.parked(), 0);
        assert_eq!(state.depot.allowance().held(), 0);
    }
}
