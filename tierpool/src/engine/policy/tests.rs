//! The slow path's rules on one cache, driven step by step: decay, eviction, refills at the
//! cap, loans, the budget, the pace of housekeeping, parked caches.

use super::exchange::refill;
use super::get::get_slow;
use super::housekeeping::{decay, release_all, retire};
use super::put::put_slow;
use super::room::{evict, grow, Purpose};
use super::tick::finish;
use crate::base::key::{Key, Tag};
use crate::base::sync::{Arc, Ordering::Relaxed};
use crate::engine::cache::block::Cache;
use crate::engine::cache::owner::Owner;
use crate::engine::fresh::Fresh;
use crate::engine::state::{Got, PoolState};
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
/// booking and storage. One that neither returned nor refilled for an interval, with
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
    assert_eq!(o.limit(0), 4, "a tier in use keeps its booking");
    assert_eq!(o.limit(1), 0, "an idle, empty tier gives its booking back");
    decay(&o, &state);
    assert_eq!(o.limit(0), 0, "idle for a whole interval now");
    drop(o);
    state.caches.detach(&cache);
    drop(cache);
    assert_eq!(state.depot.allowance().held(), 0, "every booking came back");
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
    grow(&o, &state, 1, 3, Purpose::Return);
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

/// A tier above `cache_bytes` set to no room leaves the large slot with the tier that holds
/// it: decay sets every idle tier to no room, also tiers that never had any.
#[test]
fn the_large_slot_stays_with_its_holder_when_another_large_tier_gets_no_room() {
    let config = Builder::new().tiers([64, 128, 256]).thread_cache_bytes(64);
    let state = PoolState::new(config.validate().unwrap());
    let cache = state.new_cache(Key::new(1, false, 1));
    // SAFETY: nothing else reaches this cache.
    let o = unsafe { Owner::new_unshared(&cache) };
    assert!(o.set_limit(1, 1));
    assert_eq!(o.large_holder(), Some(1));
    assert!(o.set_limit(2, 0), "no room asked: nothing to refuse");
    assert_eq!(o.large_holder(), Some(1), "the holder keeps the slot");
    assert!(!o.set_limit(2, 1), "one tier at a time");
    assert!(o.set_limit(1, 0));
    assert_eq!(o.large_holder(), None);
    assert!(o.set_limit(2, 1));
    assert!(o.set_limit(2, 0));
    assert_eq!(
        state.depot.allowance().held(),
        0,
        "every booking given back"
    );
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
        let Some((state, cache)) = with_shared_cache(PoolState::new(b.validate().unwrap())) else {
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
            match get_slow(o, state, n, Fresh::Infallible, 0).unwrap() {
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
/// booking of `o`'s cache.
fn assert_books(state: &PoolState, o: &Owner<'_>) {
    let booked: usize = (0..o.tiers()).map(|t| o.limit(t) * o.size(t)).sum();
    assert_eq!(state.depot.allowance().held(), state.depot.bytes() + booked);
}

/// A get of a tier with no room, at the cap, is lent the depot's larger buffer (up to
/// `MAX_LOANS_AT_CAP` times an interval): a fresh one could be kept only by evicting another
/// retained buffer, or not at all. A tier with room allocates its own (it then stays on the
/// fast path).
#[test]
fn at_the_cap_a_get_without_room_is_lent_the_depots_buffers() {
    // Tier 0 (64) may hold one buffer; tier 1 (128) is above `cache_bytes` (the large
    // slot).
    let Some((state, cache)) = with_shared_cache(capped(&[64, 128], 256, 64)) else {
        return;
    };
    assert!(state.lends(Fresh::Infallible));
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
    assert_eq!(owner().loans(0), 2, "two loans at the cap");
    // With room left (a 128-byte buffer's worth of allowance free), the tier books
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

/// At the cap, loans to one tier stop at `MAX_LOANS_AT_CAP` an interval: a get of one size in
/// a loop, with other threads keeping the depot full of its lenders, is lent that many
/// times; then it misses, and the miss takes room of its own by evicting the depot's idle
/// buffer of a size that does not lend to it (the lenders' are spared), and its stack keeps
/// the buffer from then on.
#[test]
fn at_the_cap_a_get_in_a_loop_is_lent_a_bounded_number_of_times() {
    // Tiers 64 / 128 / 256 under a cap of 384; the lenders of 64 are the 128s.
    let Some((state, cache)) = with_shared_cache(capped(&[64, 128, 256], 384, 64)) else {
        return;
    };
    let (get, put) = ops(&state, &cache);
    let owner = || owner_of(&cache);
    state.depot.put_one(2, Vec::with_capacity(256)).unwrap();
    let mut lent = Vec::new();
    for i in 0..super::retrieve::MAX_LOANS_AT_CAP {
        // Another thread returns a 128: the allowance is spent again.
        state.depot.put_one(1, Vec::with_capacity(128)).unwrap();
        assert_eq!(state.depot.allowance().free(), 0);
        let b = get(50);
        assert_eq!((b.capacity(), owner().limit(0)), (128, 0), "loan {i}");
        lent.push(b);
    }
    assert_eq!(owner().loans(0), super::retrieve::MAX_LOANS_AT_CAP);
    state.depot.put_one(1, Vec::with_capacity(128)).unwrap();
    let own = get(50);
    assert_eq!(
        (own.capacity(), owner().limit(0), state.depot.bytes()),
        (64, 1, 128),
        "the loans spent: room of its own, the 256 evicted and the 128 spared"
    );
    put(own);
    assert_eq!(get(50).capacity(), 64, "kept, and served from its stack");
    assert_eq!(owner().loans(0), super::retrieve::MAX_LOANS_AT_CAP);
    drop(lent); // freed, not returned: the test is about gets
    state.caches.detach(&cache);
}

/// Tiers 64 / 128 / 256 (the lenders of 64 are the 128s) under a cap of 384 bytes, with
/// `cache_bytes` of thread cache: the cache holds a 128 and the depot an idle 256, so the
/// allowance is spent. `None` where caches cannot share the allowance.
fn at_the_cap_with_a_lender_in_the_cache(cache_bytes: usize) -> Option<(PoolState, Arc<Cache>)> {
    let (state, cache) = with_shared_cache(capped(&[64, 128, 256], 384, cache_bytes))?;
    {
        let (_, put) = ops(&state, &cache);
        put(Vec::with_capacity(128));
    }
    state.depot.put_one(2, Vec::with_capacity(256)).unwrap();
    assert_eq!(state.depot.allowance().free(), 0);
    Some((state, cache))
}

/// A cache whose `cache_bytes` a lender's stack fills keeps that stack for a refill that
/// has nothing to move (a refill's room spares the lenders), so it is not given to the
/// depot only to be lent straight back at every get; the get misses, and the miss's room
/// takes the lender's stack (to the depot, with its room) and evicts the depot's idle buffer
/// of another size. The tier keeps its own buffer and its gets leave the slow path.
#[test]
fn at_the_cap_a_lenders_stack_makes_way_for_a_miss_and_is_not_lent_back() {
    // The cache's 128 bytes hold the 128 (256 is the large slot).
    let Some((state, cache)) = at_the_cap_with_a_lender_in_the_cache(128) else {
        return;
    };
    let (get, put) = ops(&state, &cache);
    let owner = || owner_of(&cache);
    let misses = || state.stats().misses;
    let before = misses();
    let own = get(50);
    assert_eq!(own.capacity(), 64, "its own buffer, not the 128 lent back");
    assert_eq!(
        (owner().limit(0), owner().limit(1), misses()),
        (1, 0, before + 1)
    );
    let in_depot = state.depot.lock(1).exact_len();
    assert_eq!(
        (in_depot, state.depot.bytes()),
        (1, 128),
        "the 128 in the depot with its room, the 256 evicted"
    );
    assert_books(&state, &owner());
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
    assert_eq!((misses(), owner().loans(0)), (before + 1, 0));
    assert_books(&state, &owner());
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
    assert_eq!(owner().loans(0), 0, "a look is not a loan");
    assert_eq!(
        (owner().limit(0), state.depot.bytes()),
        (1, 0),
        "room taken, the 256 evicted"
    );
    put(own);
    assert_books(&state, &owner());
    state.caches.detach(&cache);
}

/// At the cap, this cache's own stacks lend nothing: their room stays theirs, so a tier lent
/// from them would never get room of its own and would take the slow path on every get.
/// The tier evicts the depot's idle buffer of another size for room, allocates its own, and
/// keeps it.
#[test]
fn at_the_cap_a_tier_takes_room_of_its_own_rather_than_its_caches_buffers() {
    // 256 bytes of cache: room for a 64 beside the 128.
    let Some((state, cache)) = at_the_cap_with_a_lender_in_the_cache(256) else {
        return;
    };
    let (get, put) = ops(&state, &cache);
    let owner = || owner_of(&cache);
    let own = get(50);
    assert_eq!(own.capacity(), 64, "its own buffer, not the cache's 128");
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
        match get_slow(&o, &state, 64, Fresh::Infallible, 0) {
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
    drop(o);
    state.caches.detach(cache);
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
    // Detached holding a booking (no `retire`): freed, not parked.
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
        assert_eq!(o.limit(0), 0, "no booking carried over");
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
