//! A return the fast path could not take: a stack that is full or has no room yet, a buffer
//! of another capacity than its tier's, a pool that wipes returns, a cache the pool rang; and
//! a return where the thread cannot use a cache.

use super::exchange::{batch_size, flush};
use super::housekeeping::after_slow_op;
use super::room::{book, grow, Purpose};
use crate::base::key::Tag;
use crate::engine::cache::owner::Owner;
use crate::engine::cache::stack::Count;
use crate::engine::fresh::scrub;
use crate::engine::state::PoolState;
use crate::sys::alloc::free;

/// Everything a return of `v` (with tag `tag`) can need beyond the fast path.
pub(crate) fn put_slow(o: &Owner<'_>, pool: &PoolState, mut v: Vec<u8>, tag: Tag) {
    after_slow_op(o, pool);
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
            Some(_) => tag == Tag::tier(t) && !pool.under_pressure(),
            None => true,
        };
    if stackable {
        book(o, pool, t, Purpose::Return);
        if o.limit(t) > 0 && o.len(t) >= o.limit(t) {
            grow(o, pool, t, 2 * o.limit(t), Purpose::Return);
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

/// A return that cannot use a thread cache: what [`put_slow`] does with a buffer its stack
/// does not take (filed in the depot, or freed), its refund given at once and its counts
/// added to the retired caches'.
#[cold]
pub(crate) fn put_direct(pool: &PoolState, mut v: Vec<u8>, tag: Tag) {
    // Refunded once the buffer is filed or freed: the refund wakes a budget's waiters,
    // whose wakers are the user's and may unwind, which must not drop the buffer as a
    // `Vec` (`sys/alloc.rs`).
    let charge = pool.charge_of(tag);
    scrub(&mut v, pool.zero_on_return);
    let Some(t) = pool.classes.for_put(v.capacity()) else {
        free(v, pool.align());
        pool.refund(charge);
        pool.caches.with_retired(|s| s.untiered_returned += 1);
        return;
    };
    let kept = pool.file_in_depot(t, v);
    pool.refund(charge);
    pool.caches.with_retired(|s| {
        s.tiers[t].returned += 1;
        if !kept {
            s.tiers[t].discarded += 1;
        }
    });
}
