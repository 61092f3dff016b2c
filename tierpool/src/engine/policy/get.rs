//! A get the fast path could not serve, in the order it tries: its own stack, a refill from
//! the depot (room first: `room.rs`), another retained buffer (`retrieve.rs`), the allocator;
//! and the same get where the thread cannot use a cache (no stack, no refill).

use super::exchange::{batch_size, refill};
use super::housekeeping::after_slow_op;
use super::retrieve::{retrieve, retrieve_direct};
use super::room::{book, grow, take_large_slot, Purpose};
use crate::base::key::Tag;
use crate::engine::cache::owner::Owner;
use crate::engine::cache::stack::Count;
use crate::engine::error::AllocError;
use crate::engine::fresh::{alloc_fresh, prepare_hit, Fresh};
use crate::engine::state::{Got, PoolState};
use crate::sys::alloc::Owned;

/// Everything a get of `n` bytes can need beyond the fast path, `prepaid` bytes of its
/// charge already paid (after a wait; 0 otherwise).
pub(crate) fn get_slow(
    o: &Owner<'_>,
    pool: &PoolState,
    n: usize,
    how: Fresh,
    prepaid: usize,
) -> Result<Got, AllocError> {
    after_slow_op(o, pool);
    let Some(t) = pool.classes.for_get(n) else {
        let got = oversize(pool, n, how, prepaid, |c| o.defer_refund(c))?;
        if let Got::Buf(..) = got {
            o.count_oversize();
        }
        return Ok(got);
    };
    let charge = pool.charge_of(Tag::tier(t));
    let hit = |mut v: Vec<u8>, u: usize| {
        prepare_hit(&mut v, n, how);
        Ok(Got::Buf(Owned::new(v, pool.align()), Tag::tier(u)))
    };
    if let Some(v) = o.pop(t) {
        o.defer_refund(prepaid.min(charge)); // a stack's buffer is charged already
        return hit(v, t);
    }
    // Refill a batch if the tier may use the cache: room in `cache_bytes` for it first.
    // Where caches share the depot's allowance, what the allowance cannot give comes with
    // the buffers (`exchange::refill`); otherwise (the caches' own allowance), the batch is
    // what room the tier has.
    let mut keeps = !o.is_dead() && o.cap(t) > 0 && !pool.under_pressure();
    let shares = pool.caches_share_allowance();
    let max_batch = batch_size(o.cap(t));
    let want = if keeps {
        let batch = o.fill(t, max_batch);
        if !shares {
            book(o, pool, t, Purpose::Return);
        } else if o.is_large(t) {
            take_large_slot(o, pool, t); // its room comes with the depot's buffer
        }
        if o.limit(t) - o.len(t) < batch {
            grow(o, pool, t, o.len(t) + batch, Purpose::Refill);
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
    // The charge of this buffer, and of up to `want - 1` more to keep on the stack; what the
    // refill does not move is refunded.
    let Some(paid) = pool.pay(charge, prepaid, want.max(1)) else {
        return Ok(Got::Wait(charge));
    };
    let moved = if want > 0 {
        refill(o, pool, t, paid)
    } else {
        0
    };
    if moved > 0 {
        o.double_fill(t, max_batch);
        o.defer_refund((paid - moved) * charge);
        let v = o.pop(t).expect("just refilled");
        return hit(v, t);
    }
    o.defer_refund((paid - 1) * charge);
    if let Some((v, u)) = retrieve(o, pool, t, how, keeps) {
        return hit(v, u);
    }
    // A miss: room for the new buffer's return, which at the cap may evict the depot's
    // oldest buffers of other tiers (`room.rs`), so that the pool keeps what is used now.
    if keeps && shares {
        book(o, pool, t, Purpose::Miss);
    }
    let v = alloc_fresh(o.size(t), n, how, pool.align()).inspect_err(|_| o.defer_refund(charge))?;
    o.count(t, Count::Miss, 1);
    Ok(Got::Buf(Owned::new(v, pool.align()), Tag::tier(t)))
}

/// A get that cannot use a thread cache (the thread is exiting, or a re-entrant call),
/// `prepaid` bytes of its charge already taken: the rules of [`get_slow`] without a stack or
/// a refill, its refunds given at once and its counts added to the retired caches'.
#[cold]
pub(crate) fn get_direct(
    pool: &PoolState,
    n: usize,
    how: Fresh,
    prepaid: usize,
) -> Result<Got, AllocError> {
    let Some(t) = pool.classes.for_get(n) else {
        let got = oversize(pool, n, how, prepaid, |c| pool.refund(c))?;
        if let Got::Buf(..) = got {
            pool.caches.with_retired(|s| s.oversize += 1);
        }
        return Ok(got);
    };
    let charge = pool.charge_of(Tag::tier(t));
    if pool.pay(charge, prepaid, 1).is_none() {
        return Ok(Got::Wait(charge));
    }
    if let Some((mut v, u)) = retrieve_direct(pool, t, how) {
        prepare_hit(&mut v, n, how);
        pool.caches.with_retired(|s| s.tiers[u].hits += 1);
        return Ok(Got::Buf(Owned::new(v, pool.align()), Tag::tier(u)));
    }
    let v = alloc_fresh(pool.classes.size(t), n, how, pool.align())
        .inspect_err(|_| pool.refund(charge))?;
    pool.caches.with_retired(|s| s.tiers[t].misses += 1);
    Ok(Got::Buf(Owned::new(v, pool.align()), Tag::tier(t)))
}

/// A get above the largest tier: from the allocator, charged its size (rounded up to 4 KiB)
/// under a budget, never retained. `refund` gives the charge back if the allocation fails.
fn oversize(
    pool: &PoolState,
    n: usize,
    how: Fresh,
    prepaid: usize,
    refund: impl FnOnce(usize),
) -> Result<Got, AllocError> {
    let cap = pool.oversize_capacity(n)?;
    let (tag, charge) = pool.oversize_tag(cap);
    if pool.pay(charge, prepaid, 1).is_none() {
        return Ok(Got::Wait(charge));
    }
    let v = alloc_fresh(cap, n, how, pool.align()).inspect_err(|_| refund(charge))?;
    Ok(Got::Buf(Owned::new(v, pool.align()), tag))
}
