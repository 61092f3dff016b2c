//! loom models of every place where threads meet: the depot exchange, decay and trim racing
//! with get/put, pool close racing with returns, the thread caches' doorbell (a ring is never
//! lost), counter publication vs. `stats()`, a reclaimer taking a cache over while its owner
//! works on it (module `reclaim`), and the budget's waiters and sweep (module `budget`).
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p tierpool --lib --release loom`.
//! Each model is small (two or three threads, a handful of buffers) so that loom explores every
//! interleaving in seconds.

use loom::thread;

use crate::base::key::Key;
use crate::base::sync::Ordering;
use crate::engine::cache::Owner;
use crate::engine::depot::Depot;
use crate::engine::state::PoolState;
use crate::Builder;
use loom::sync::Arc;

/// A real key for a model's cache (any non-zero slot: the models use no registry).
fn key(budgeted: bool) -> Key {
    Key::new(1, budgeted, 1)
}

/// Drains the depot's tier `t` and returns the sorted capacities found there.
fn drain(d: &Depot, t: usize) -> Vec<usize> {
    let mut out = Vec::new();
    while let Some(b) = d.take_one(t) {
        out.push(b.capacity());
    }
    out.sort_unstable();
    out
}

/// Moves up to `n` exact buffers of `size` into tier `t` under one lock; returns how many fit.
fn put_batch(d: &Depot, t: usize, size: usize, n: usize) -> usize {
    let mut g = d.lock(t);
    let k = g.book_exact(n);
    for _ in 0..k {
        g.push_exact(Vec::with_capacity(size));
    }
    k
}

/// Two thread caches exchange batches through one tier: nothing is lost or duplicated,
/// the byte count matches what is present, and the cap holds.
#[test]
fn loom_depot_batch_exchange_conserves_buffers() {
    loom::model(|| {
        let d = Arc::new(Depot::with_cap(&[10], 25));
        d.put_one(0, Vec::with_capacity(10)).unwrap();
        let d1 = d.clone();
        let producer = thread::spawn(move || put_batch(&d1, 0, 10, 2));
        let d2 = d.clone();
        let consumer = thread::spawn(move || {
            let mut g = d2.lock(0);
            let n = g.exact_len().min(2);
            (0..n).filter_map(|_| g.pop_exact()).count()
        });
        let put = producer.join().unwrap();
        let taken = consumer.join().unwrap();
        assert!(d.bytes() <= 25);
        let present_bytes = d.bytes();
        let present = drain(&d, 0);
        assert_eq!(present_bytes, present.iter().sum::<usize>());
        assert_eq!(present.len() + taken, 1 + put, "every buffer exactly once");
    });
}

/// A depot at its cap while a reader adds up its tiers: one thread takes a buffer from tier 0
/// (a cache's refill) and puts one into tier 1 (another cache's flush). Read tier by tier, the
/// reader could count both and see twice the cap (CI's soak test saw a 4 MiB depot 4,736
/// bytes over); read under every tier's lock at once, never more than the cap.
#[test]
fn loom_depot_bytes_never_read_above_the_cap() {
    loom::model(|| {
        let d = Arc::new(Depot::with_cap(&[10, 10], 10));
        d.put_one(0, Vec::with_capacity(10)).unwrap();
        let d1 = d.clone();
        let mover = thread::spawn(move || {
            let b = d1.take_one(0).expect("put above");
            d1.put_one(1, b).expect("its room came back")
        });
        assert!(d.bytes() <= 10, "read above the cap");
        mover.join().unwrap();
        assert_eq!(d.bytes(), 10);
    });
}

/// Two threads push into a depot that can hold only one of their buffers: the cap holds.
#[test]
fn loom_depot_cap_holds_under_contention() {
    loom::model(|| {
        let d = Arc::new(Depot::with_cap(&[10, 10], 15));
        let handles: Vec<_> = (0..2)
            .map(|t| {
                let d = d.clone();
                thread::spawn(move || d.put_one(t, Vec::with_capacity(10)).is_ok())
            })
            .collect();
        let kept: usize = handles
            .into_iter()
            .map(|h| h.join().unwrap() as usize)
            .sum();
        assert_eq!(kept, 1);
        assert_eq!(d.bytes(), 10);
    });
}

/// Decay and trim race with a take-and-return cycle: the count stays exact.
#[test]
fn loom_decay_and_trim_race_with_get_put() {
    loom::model(|| {
        let d = Arc::new(Depot::with_cap(&[10], 1000));
        put_batch(&d, 0, 10, 2);
        d.decay(); // starts an interval with low water 2
        let d1 = d.clone();
        let user = thread::spawn(move || {
            if let Some(b) = d1.take_one(0) {
                let _ = d1.put_one(0, b);
            }
        });
        let d2 = d.clone();
        let trimmer = thread::spawn(move || {
            d2.decay();
            d2.trim();
        });
        user.join().unwrap();
        trimmer.join().unwrap();
        let bytes = d.bytes();
        let present = drain(&d, 0);
        assert_eq!(bytes, present.iter().sum::<usize>());
        assert!(
            present.len() <= 1,
            "trim ran; at most the buffer returned after it remains"
        );
    });
}

/// Closing races with a thread cache handing buffers back: after both, nothing is retained,
/// whichever went first.
#[test]
fn loom_close_races_with_returns() {
    loom::model(|| {
        let d = Arc::new(Depot::with_cap(&[10], 1000));
        let d1 = d.clone();
        let returner = thread::spawn(move || {
            let _ = d1.put_one(0, Vec::with_capacity(20));
            put_batch(&d1, 0, 10, 1);
        });
        d.close();
        returner.join().unwrap();
        assert_eq!(d.bytes(), 0);
        assert!(d.take_one(0).is_none());
    });
}

/// A thread's cache is read by `stats()` while its owner pushes, pops and then detaches
/// (thread exit): each count is seen at most once while it runs, exactly once after the join.
#[test]
fn loom_counters_publish_and_detach_exactly_once() {
    loom::model(|| {
        let config = Builder::new().tiers([64]).validate().unwrap();
        let state = Arc::new(PoolState::new(config));
        let cache = state.new_cache(key(false));
        let s1 = state.clone();
        let worker = thread::spawn(move || {
            // SAFETY: this thread is the cache's only owner from here on.
            let o = unsafe { Owner::new_unshared(&cache) };
            assert!(o.set_limit(0, 4));
            // Two returns onto the stack, one hit from it: one buffer stays retained.
            o.push(0, Vec::with_capacity(64), false).unwrap();
            o.push(0, Vec::with_capacity(64), false).unwrap();
            drop(o.pop(0).unwrap());
            o.drain_oldest(0, usize::MAX, true, drop);
            o.set_limit(0, 0);
            s1.caches.detach(&cache);
        });
        let seen = state.stats();
        assert!(seen.tiers[0].hits <= 1, "never double-counted: {seen:?}");
        assert!(
            seen.tiers[0].returned <= 2,
            "never double-counted: {seen:?}"
        );
        worker.join().unwrap();
        let after = state.stats();
        assert_eq!(after.tiers[0].hits, 1);
        assert_eq!(after.tiers[0].returned, 2);
        assert_eq!(after.tiers[0].discarded, 1);
        assert_eq!(after.thread_caches, 0);
    });
}

/// The doorbell: `trim()` on one thread (bump the generation, ring) races with the owner's
/// housekeeping (re-arm, then read the generation). Whatever the interleaving, the ring is not
/// lost: after both, either the owner saw the new generation, or its doorbell is still rung,
/// so that its next operation takes the slow path and sees it.
#[test]
fn loom_doorbell_ring_is_never_lost() {
    loom::model(|| {
        let config = Builder::new().tiers([64]).validate().unwrap();
        let state = Arc::new(PoolState::new(config));
        let cache = state.new_cache(key(false));
        cache.ring(); // an earlier ring the owner is about to handle
        let s1 = state.clone();
        let c1 = cache.clone();
        let trimmer = thread::spawn(move || {
            let generation = s1.start_trim();
            c1.ring(); // what `trim_all` does where caches cannot be reclaimed
            generation
        });
        // The owner's side of `policy::look`: enter (rung: under the lock), re-arm, look.
        // SAFETY: this thread is the cache's owner, in no other operation on it.
        let o = unsafe { cache.enter() };
        o.rearm();
        let seen = state.trim_gen.load(Ordering::SeqCst);
        let generation = trimmer.join().unwrap();
        assert!(
            seen == generation || o.rung(),
            "the trim was neither seen nor left ringing: seen {seen}, trim {generation}"
        );
    });
}

/// Close races with the owner's housekeeping in the same way: the owner either sees the pool
/// closed now, or finds its doorbell rung (and then the pool closed) at its next operation.
#[test]
fn loom_close_is_never_missed_by_a_cache() {
    loom::model(|| {
        let config = Builder::new().tiers([64]).validate().unwrap();
        let state = Arc::new(PoolState::new(config));
        let cache = state.new_cache(key(false));
        cache.ring();
        let s1 = state.clone();
        let c1 = cache.clone();
        let closer = thread::spawn(move || {
            s1.close();
            c1.ring();
        });
        // SAFETY: this thread is the cache's owner, in no other operation on it.
        let o = unsafe { cache.enter() };
        o.rearm();
        let saw_closed = state.is_closed();
        closer.join().unwrap();
        assert!(saw_closed || o.rung(), "close was missed");
    });
}

/// Two threads notice the same new epoch at once: whichever wins the epoch CAS releases the
/// idle buffer, the other does nothing, and the depot's count stays exact.
#[test]
fn loom_concurrent_ticks_release_idle_buffers() {
    loom::model(|| {
        let config = Builder::new().tiers([64]).validate().unwrap();
        let state = Arc::new(PoolState::new(config));
        state.depot.put_one(0, Vec::with_capacity(64)).unwrap();
        state.depot.decay(); // low water = 1: the buffer is idle from here on
        let s1 = state.clone();
        let t = thread::spawn(move || s1.claim_tick(1));
        let won = state.claim_tick(1);
        assert!(
            won ^ t.join().unwrap(),
            "exactly one thread claims the tick"
        );
        assert_eq!(state.depot.bytes(), 0, "the idle buffer was released");
        assert!(!state.closed.load(Ordering::Relaxed));
    });
}

/// Views of one shared buffer cloned, sliced and dropped on three threads: exactly one of
/// them, the last, hands the buffer back, in every interleaving.
#[test]
fn loom_shared_views_hand_the_buffer_back_exactly_once() {
    use crate::buf::shared::LAST_VIEWS;
    use crate::PooledBytes;
    use std::sync::atomic::Ordering::Relaxed;
    loom::model(|| {
        LAST_VIEWS.store(0, Relaxed);
        let all = PooledBytes::from(vec![1u8, 2, 3, 4]);
        let a = all.slice(..2);
        let mut b = all.clone();
        let t1 = thread::spawn(move || {
            assert_eq!(&a[..], &[1, 2]);
            drop(a);
        });
        let t2 = thread::spawn(move || {
            let tail = b.split_off(2);
            assert_eq!(&tail[..], &[3, 4]);
            drop((b, tail));
        });
        drop(all);
        t1.join().unwrap();
        t2.join().unwrap();
        assert_eq!(LAST_VIEWS.load(Relaxed), 1);
    });
}

mod reclaim {
    //! A reclaimer takes a cache over while its owner works on it (`cache/mod.rs`, "Who may
    //! touch the stacks"): the owner's busy mark and doorbell against the reclaimer's lock,
    //! ring and heavy fence, with both fences modelled as `SeqCst` fences (`fence.rs`).

    use loom::sync::Arc;
    use loom::thread;

    use crate::engine::cache::reclaim::Turn;
    use crate::engine::state::PoolState;
    use crate::engine::{local::for_models as local_for_models, policy};
    use crate::Builder;

    fn pool() -> Arc<PoolState> {
        let config = Builder::new()
            .tiers([64])
            .max_retained_bytes(1 << 10)
            .thread_cache_bytes(256)
            .validate()
            .unwrap();
        Arc::new(PoolState::new(config))
    }

    /// The owner takes its cache's one buffer and gives it back (fast path, or slow path
    /// when the fast one refuses) while a reclaimer empties the cache: the buffer is owned by
    /// exactly one of them at every step, so every count adds up afterwards (a buffer freed by
    /// the reclaimer while the owner held it would be freed twice: loom runs the real code).
    /// With the owner's fence removed from `fence::light`, loom finds the execution where both
    /// work on the stack at once.
    #[test]
    fn loom_reclaim_never_shares_a_buffer_with_the_owner() {
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(3);
        model.check(|| {
            let state = pool();
            let cache = state.new_cache(super::key(false));
            {
                // SAFETY: no other thread reaches the cache yet.
                let o = unsafe { crate::engine::cache::Owner::new_unshared(&cache) };
                assert!(o.set_limit(0, 2));
                o.push(0, Vec::with_capacity(64), false).unwrap();
            }
            let (s1, c1) = (state.clone(), cache.clone());
            let owner = thread::spawn(move || {
                let (mut v, tag) = local_for_models::get(&c1, &s1, 64);
                assert_eq!(v.capacity(), 64);
                v.push(7); // the owner's write, before it gives the buffer back
                local_for_models::put(&c1, &s1, v, tag);
            });
            let mut released = 0;
            let done = state.caches.reclaim(
                Turn::Wait,
                |_| true,
                |o| {
                    released += policy::release_all(o, &state);
                },
            );
            assert_eq!(done, Some(1));
            owner.join().unwrap();
            let s = state.stats();
            assert_eq!(s.gets, 1);
            assert_eq!(
                s.returned,
                s.retained_buffers as u64 + s.discarded + s.hits,
                "every buffer handed back is retained, released or handed out again: {s}"
            );
            assert!(s.retained_buffers <= 1);
            assert!(state.depot.allowance().held() <= state.depot.allowance().cap());
        });
    }

    /// A reclaimer and an owner whose doorbell an earlier reclaim left rung: the owner takes
    /// the lock path (this model checks the lock's exclusion, not the busy mark: the model
    /// above does), waits for the reclaimer or goes first, re-arms under the lock, and
    /// nothing is lost or counted twice.
    #[test]
    fn loom_an_owner_coming_back_waits_for_its_reclaimer() {
        loom::model(|| {
            let state = pool();
            let cache = state.new_cache(super::key(false));
            cache.ring();
            let (s1, c1) = (state.clone(), cache.clone());
            let owner = thread::spawn(move || {
                let v = Vec::with_capacity(64);
                local_for_models::put(&c1, &s1, v, crate::base::key::Tag::NONE);
            });
            state.caches.reclaim(
                Turn::Wait,
                |_| true,
                |o| {
                    policy::release_all(o, &state);
                },
            );
            owner.join().unwrap();
            let s = state.stats();
            assert_eq!(s.returned, 1);
            assert_eq!(s.retained_buffers as u64 + s.discarded, 1, "{s}");
        });
    }
}

mod budget {
    //! The budget's waiter protocol (`budget.rs`): no lost wake-up, no over-grant,
    //! cancellation passes bytes on; and the sweep: a buffer returned to a thread cache while
    //! a waiter joins the queue always reaches the waiter.

    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use loom::sync::Arc;
    use loom::thread;

    use crate::base::key::Tag;
    use crate::engine::budget::{Budget, Ticket, Wake};
    use crate::engine::state::PoolState;
    use crate::engine::{local::for_models as local_for_models, policy};
    use crate::Builder;

    /// A waiter for `need` bytes at the budget level, like `Acquire`: enqueues with its waker
    /// on first poll (and then runs `after_enqueue`, the sweep), then polls its ticket.
    struct Wait<'a, F: FnMut()> {
        budget: &'a Budget,
        need: usize,
        ticket: Option<Ticket>,
        after_enqueue: F,
    }

    impl<F: FnMut() + Unpin> Future for Wait<'_, F> {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            let this = &mut *self;
            if this.ticket.is_none() {
                this.ticket = Some(
                    this.budget
                        .enqueue(this.need, Wake::Task(Some(cx.waker().clone()))),
                );
                (this.after_enqueue)();
            }
            if this
                .budget
                .poll(this.ticket.as_ref().expect("set"), Some(cx.waker()))
            {
                this.ticket = None;
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        }
    }

    /// A waiter blocks (in a task) for bytes another thread returns: it is always woken
    /// (a lost wake-up would be a deadlock, which loom reports).
    #[test]
    fn loom_budget_waiter_is_always_woken() {
        loom::model(|| {
            let b = Arc::new(Budget::new(2));
            assert_eq!(b.try_take(2, 0, 1), Some(0));
            let b2 = b.clone();
            let returner = thread::spawn(move || {
                b2.refund(1);
                b2.refund(1);
            });
            loom::future::block_on(Wait {
                budget: &b,
                need: 2,
                ticket: None,
                after_enqueue: || {},
            });
            returner.join().unwrap();
            let s = b.snapshot();
            assert_eq!((s.free, s.queued, s.waiting), (0, 0, 0));
        });
    }

    /// The sweep (`policy::sweep`): a thread makes its cache and gives back a buffer charged
    /// to the budget (the fast path refuses it: the new cache has no room yet; the slow path
    /// books room and keeps it unless it sees the pressure) while a waiter for the whole
    /// budget joins the queue and sweeps every cache. In every interleaving the buffer's
    /// charge reaches the waiter: the sweep takes it from the stack, or the owner sees the
    /// pressure and refunds it. With the sweep skipping caches that held nothing when it listed
    /// them, loom finds the deadlock: the owner read the pressure flag before it was raised,
    /// and booked and pushed after the listing. (The budget stress test found it first.)
    #[test]
    fn loom_budget_sweep_strands_nothing() {
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(3);
        model.check(|| {
            let config = Builder::new()
                .tiers([64])
                .max_retained_bytes(1 << 10)
                .thread_cache_bytes(128)
                .max_in_use_bytes(64 * 16)
                .validate()
                .unwrap();
            let state = Arc::new(PoolState::new(config));
            let budget = state.budget.as_ref().unwrap();
            // Everything is in use: one buffer by the owner below, the rest elsewhere.
            assert_eq!(budget.try_take(64 * 16, 0, 1), Some(0));
            let s1 = state.clone();
            let owner = thread::spawn(move || {
                let cache = s1.new_cache(super::key(true));
                local_for_models::put(&cache, &s1, Vec::with_capacity(64), Tag::tier(0));
                cache
            });
            loom::future::block_on(Wait {
                budget,
                need: 64,
                ticket: None,
                after_enqueue: || policy::sweep(&state),
            });
            let cache = owner.join().unwrap();
            budget.refund(64 * 16); // the waiter's and the rest
            assert_eq!(budget.snapshot().free, 64 * 16, "every byte accounted for");
            drop(cache);
        });
    }

    /// The front waiter is cancelled while bytes are released: what it gathered goes on to
    /// the next waiter, which is served, and nothing is lost.
    #[test]
    fn loom_budget_cancel_passes_bytes_on() {
        loom::model(|| {
            let b = Arc::new(Budget::new(2));
            assert_eq!(b.try_take(2, 0, 1), Some(0));
            let first = b.enqueue(2, Wake::Task(None));
            let second = b.enqueue(1, Wake::Task(None));
            let b2 = b.clone();
            let releaser = thread::spawn(move || b2.refund(1));
            b.cancel(first);
            releaser.join().unwrap();
            assert!(b.poll(&second, None));
            let s = b.snapshot();
            assert_eq!((s.free, s.queued, s.waiting), (0, 0, 0));
            b.refund(1);
            b.refund(1);
            assert_eq!(b.snapshot().free, 2);
        });
    }
}
