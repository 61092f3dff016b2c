//! The thread cache's policy, in safe code: what a get or a return does when the fast path
//! cannot serve it (refill from the depot, flush to it, reserve budget, allocate), and the
//! housekeeping (doorbell, decay, trim, close, thread exit).
//!
//! Every function takes the cache's [`Owner`] (proof that this is the owning thread) and the
//! pool's state.
//!
//! # The budget
//!
//! A cache may hold at most `thread_cache_bytes`, plus one buffer of a tier above that (the
//! *large slot*, so that a thread cycling 16 MiB buffers does not take the depot's lock on
//! every operation). Instead of adding and subtracting bytes on every operation, each tier
//! *reserves* room for `limit` buffers of its size, and the reservations add up to at most the
//! budget; the fast path then only compares the stack's top with its limit. A tier reserves
//! one batch when it is first used and grows with use, up to `min(64, budget / size)`
//! buffers: doubling when a return finds its stack full, and by a batch when a get finds too
//! little room to refill. It takes unreserved budget first, then other tiers' reservations
//! beyond what their stacks hold (no buffer moves), and, for a get's batch only, other tiers'
//! whole stacks, which go to the depot, largest tier first. A tier that saw no return during a
//! whole decay interval and holds nothing gives its reservation and its storage back. A tier
//! above the budget takes the large slot from whichever tier held it.

use crate::cache::{hint_of, Count, Owner};
use crate::error::AllocError;
use crate::fresh::{alloc_fresh, prepare_hit, scrub, Fresh};
use crate::state::PoolState;

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

/// Everything a get can need beyond the fast path. Returns the buffer and the tier hint for
/// its return (`u32::MAX`: none).
pub(crate) fn get_slow(
    o: &Owner<'_>,
    pool: &PoolState,
    n: usize,
    how: Fresh,
) -> Result<(Vec<u8>, u32), AllocError> {
    housekeeping(o, pool);
    let Some(t) = pool.classes.for_get(n) else {
        let v = alloc_fresh(n, n, how)?;
        o.count_oversize();
        return Ok((v, u32::MAX));
    };
    if !o.is_dead() {
        reserve(o, pool, t);
        if let Some(mut v) = o.pop(t) {
            prepare_hit(&mut v, n, how);
            return Ok((v, hint_of(t)));
        }
        let batch = batch_size(o.cap(t));
        if o.limit(t) > 0 && o.limit(t) - o.len(t) < batch {
            grow(o, pool, t, o.len(t) + batch, true);
        }
        if o.limit(t) > 0 && refill(o, pool, t) > 0 {
            let mut v = o.pop(t).expect("just refilled");
            prepare_hit(&mut v, n, how);
            return Ok((v, hint_of(t)));
        }
    }
    // Nothing of this size here: a larger buffer filed under this tier, or (a tier that
    // bypasses the cache) any buffer of it, straight from the depot.
    let (v, hit) = pool.direct_or_fresh(t, n, how, o.limit(t) > 0)?;
    o.count(t, if hit { Count::DirectHit } else { Count::Miss }, 1);
    Ok((v, hint_of(t)))
}

/// Moves up to a batch of tier `t`'s buffers from the depot onto the stack. Returns how many.
fn refill(o: &Owner<'_>, pool: &PoolState, t: usize) -> usize {
    let room = o.limit(t) - o.len(t);
    let want = batch_size(o.cap(t)).min(room);
    let mut depot = pool.depot.lock(t);
    let n = want.min(depot.exact_len());
    for _ in 0..n {
        let v = depot.pop_exact().expect("counted");
        if let Err(v) = o.push(t, v, true) {
            unreachable!("room was checked, exact size guaranteed: {}", v.capacity());
        }
    }
    n
}

/// Everything a return can need beyond the fast path.
pub(crate) fn put_slow(o: &Owner<'_>, pool: &PoolState, mut v: Vec<u8>) {
    housekeeping(o, pool);
    if o.is_dead() {
        return; // the pool is gone: free the buffer, count nothing
    }
    scrub(&mut v, o.wipes());
    let cap = v.capacity();
    let Some(t) = pool.classes.for_put(cap) else {
        o.count_untiered();
        return;
    };
    if cap == o.size(t) {
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
                Err(back) => v = back, // the depot is at its cap
            }
        }
    }
    // A larger buffer (foreign or grown), a tier that bypasses the cache, or no room. A pool
    // with a budget keeps only exact sizes (every buffer it hands out has the capacity it
    // was charged).
    o.count(t, Count::OtherReturn, 1);
    if (pool.exact_only() && cap != o.size(t)) || pool.depot.put_one(t, v).is_err() {
        pool.allocator_trim.released(cap);
        o.count(t, Count::Discarded, 1);
    }
}

/// Moves the `n` oldest buffers of tier `t` to the depot, as far as its cap allows. Returns
/// how many moved.
fn flush(o: &Owner<'_>, pool: &PoolState, t: usize, n: usize) -> usize {
    let mut depot = pool.depot.lock(t);
    let fit = depot.reserve_exact(n.min(o.len(t)));
    o.drain_oldest(t, fit, false, |v| depot.push_exact(v))
}

/// Gives tier `t` a reservation if it has none and may use the thread cache: its cap if the
/// budget has room for it (unreserved, or reserved by other tiers beyond what they hold),
/// otherwise at least one batch.
fn reserve(o: &Owner<'_>, pool: &PoolState, t: usize) {
    if o.limit(t) > 0 || o.cap(t) == 0 {
        return;
    }
    if o.is_large(t) {
        // The large slot: taken from the tier that holds it, whose buffer goes to the depot.
        if let Some(u) = o.large_holder() {
            give_up(o, pool, u);
        }
        let ok = o.set_limit(t, 1);
        debug_assert!(ok, "the large slot was just freed");
        return;
    }
    grow(o, pool, t, o.cap(t), false);
    grow(o, pool, t, batch_size(o.cap(t)), true);
}

/// Raises tier `t`'s limit toward `target` (at most its cap): from unreserved budget, then
/// from other tiers' unused reservations (limits above their stacks: no buffer moves), and,
/// with `evict`, from other tiers' whole stacks (to the depot, largest tier first).
///
/// Reservations grow with use (a first batch, then doubling when returns find the stack
/// full) rather than to the cap at once, and other tiers give up what they do not hold
/// before anything is evicted. A first version reserved every tier's cap up front: the
/// comparison report's hand-off producer, which runs its 4 KiB, 64 KiB and 1 MiB cases in
/// turn, was left with a limit of one 1 MiB buffer, took the depot's lock on every get and
/// measured 180 ns per buffer instead of 100 (`cargo run --release -p tierpool-bench --
/// --workload cross-thread`, 1 MiB, before and after); and a thread cycling seven sizes had
/// its tiers evict each other on every round (`tests/alloc_free.rs`
/// `steady_state_get_put_allocates_nothing` failed).
fn grow(o: &Owner<'_>, pool: &PoolState, t: usize, target: usize, evict: bool) {
    let (size, limit) = (o.size(t), o.limit(t));
    let target = target.min(o.cap(t));
    if target <= limit || o.is_large(t) {
        return;
    }
    let want = (target - limit) * size;
    if o.unreserved() < want {
        trim_unused(o, t, want);
    }
    if evict && o.unreserved() < want {
        make_room(o, pool, t, want);
    }
    let limit = limit + (target - limit).min(o.unreserved() / size);
    if limit > o.limit(t) {
        let ok = o.set_limit(t, limit);
        debug_assert!(ok, "the reservation was measured to fit");
    }
}

/// Lowers other tiers' limits to their stacks' lengths (but not below one buffer, so that a
/// tier in use keeps its storage and its fast path), largest tier first, until `need` bytes
/// of the budget are unreserved. Moves no buffer and allocates nothing.
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

/// Frees at least `need` bytes of the budget for tier `t` by handing whole stacks of other
/// tiers, largest tier first, to the depot (releasing what the depot cannot take) and taking
/// their reservations away.
///
/// Without this, a thread whose sizes change keeps its budget full of buffers of sizes it no
/// longer uses until they decay, and every get of its new size takes the slow path meanwhile:
/// with two idle 1 MiB buffers in a producer's 2 MiB budget, a 64 KiB hand-off took 149 ns
/// per buffer instead of 52 in the first release without its equivalent. With this and
/// `grow`: 48.9 ns with the idle buffers, 46.4 without (`cargo run --release -p
/// tierpool-bench --example idle_budget 8`, medians of 8 interleaved rounds).
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

/// Tier `u` gives up its reservation: its whole stack goes to the depot (what the depot
/// cannot take is released).
fn give_up(o: &Owner<'_>, pool: &PoolState, u: usize) {
    flush(o, pool, u, usize::MAX);
    o.drain_oldest(u, usize::MAX, true, drop); // the depot is at its cap (or closed)
    o.set_limit(u, 0);
}

/// Counts a slow operation and runs [`service`] if the doorbell rang or housekeeping is due.
fn housekeeping(o: &Owner<'_>, pool: &PoolState) {
    let due = o.tick_countdown();
    if o.rung() || due {
        service(o, pool);
    }
}

/// Looks at the pool: closed (free everything, keep nothing from now on), trimmed (release
/// everything), or a new decay interval (release what stayed idle, and maybe the depot's).
pub(crate) fn service(o: &Owner<'_>, pool: &PoolState) {
    if o.is_dead() {
        return;
    }
    // Re-arm first, then read why it rang (see `Cache::ring`).
    o.rearm();
    if pool.is_closed() {
        kill(o, pool);
        return;
    }
    // Relaxed: ordered after the trim's bump by the re-arm's acquire (`Cache::ring`).
    let generation = pool.trim_gen.load(std::sync::atomic::Ordering::Relaxed);
    if generation != o.trim_gen() {
        trimmed(o, generation);
    }
    let epoch = pool.clock.epoch();
    if epoch != o.epoch() {
        o.set_epoch(epoch);
        pool.allocator_trim.released(decay(o));
        pool.tick(epoch);
        pool.allocator_trim.maybe_run(epoch);
    }
}

/// Releases, in every tier, the buffers that stayed below the stack's low-water mark for the
/// whole interval, and gives back the reservations of tiers that saw no use. Returns the
/// bytes released.
fn decay(o: &Owner<'_>) -> usize {
    let mut bytes = 0;
    for t in 0..o.tiers() {
        let idle = o.low(t);
        bytes += o.size(t) * o.drain_oldest(t, idle, true, drop);
        o.reset_low(t);
        if o.idle_since_last_look(t) && o.len(t) == 0 {
            o.set_limit(t, 0);
            o.free_storage(t);
        }
    }
    bytes
}

/// This thread's part of a `trim()` of generation `generation`: release everything now.
/// Returns the bytes released.
pub(crate) fn trimmed(o: &Owner<'_>, generation: u64) -> usize {
    o.set_trim_gen(generation);
    release_all(o)
}

/// Releases every buffer this cache holds and its reservations. Returns the bytes released.
fn release_all(o: &Owner<'_>) -> usize {
    let mut bytes = 0;
    for t in 0..o.tiers() {
        let size = o.size(t);
        bytes += size * o.drain_oldest(t, usize::MAX, true, drop);
        o.set_limit(t, 0);
        o.free_storage(t);
    }
    bytes
}

/// Gives this thread's credit of the budget back to the account (thread exit, pool closed).
fn give_credit_back(o: &Owner<'_>, pool: &PoolState) {
    if let Some(budget) = &pool.budget {
        budget.release(o.cache().credit().sweep());
    }
}

/// Takes `charge` bytes of the budget for a get whose thread credit was short: this thread's
/// credit goes to the account, and the charge plus a refill of the credit come out of it, if
/// no one waits and it fits. False if the charge must wait (nothing is taken then).
pub(crate) fn take_budget(o: &Owner<'_>, pool: &PoolState, charge: usize) -> bool {
    let Some(budget) = &pool.budget else {
        return true;
    };
    let own = o.cache().credit().sweep();
    let refill = if o.is_dead() { 0 } else { budget.credit_max() };
    match budget.try_take(charge, own, refill) {
        Some(extra) => {
            budget.release(o.add_credit(extra));
            true
        }
        None => false,
    }
}

/// The pool closed: free everything, keep nothing from now on.
fn kill(o: &Owner<'_>, pool: &PoolState) {
    give_credit_back(o, pool);
    release_all(o);
    o.mark_dead();
    pool.detach(o.cache());
}

/// The thread is exiting (or its table is being dropped): hand everything to the depot, as
/// far as its cap allows, free the rest, and fold this thread's counts into the pool's.
pub(crate) fn retire(o: &Owner<'_>, pool: &PoolState) {
    give_credit_back(o, pool);
    if !o.is_dead() {
        if !pool.is_closed() {
            for t in 0..o.tiers() {
                flush(o, pool, t, usize::MAX);
            }
        }
        release_all(o);
    }
    pool.detach(o.cache());
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::config::Builder;

    /// A thread that only gets (refills from the depot, pops) is not idle: decay keeps its
    /// reservation and storage. One that neither returned nor refilled for an interval, with
    /// nothing on its stack, gives both back.
    #[test]
    fn decay_keeps_a_getting_tier_and_frees_an_idle_one() {
        let state = PoolState::new(Builder::new().tiers([64, 128]).validate().unwrap());
        let cache = state.new_cache(1);
        // SAFETY: this test thread is the cache's only owner.
        let o = unsafe { Owner::new(&cache) };
        decay(&o); // a first look: records the counts
        assert!(o.set_limit(0, 4) && o.set_limit(1, 4));
        // Tier 0 refills and pops (a producer); tier 1 does nothing.
        o.push(0, Vec::with_capacity(64), true).unwrap();
        drop(o.pop(0).unwrap());
        decay(&o);
        assert_eq!(o.limit(0), 4, "a tier in use keeps its reservation");
        assert_eq!(
            o.limit(1),
            0,
            "an idle, empty tier gives its reservation back"
        );
        decay(&o);
        assert_eq!(o.limit(0), 0, "idle for a whole interval now");
        state.detach(&cache);
    }
}
