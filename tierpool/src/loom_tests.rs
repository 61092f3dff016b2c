//! loom models of every place where threads meet: the depot exchange, decay and trim racing
//! with get/put, pool close racing with returns, the thread caches' doorbell (a ring is never
//! lost), and counter publication vs. `stats()`.
//!
//! Run with `RUSTFLAGS="--cfg loom" cargo test -p tierpool --lib --release loom`.
//! Each model is small (two or three threads, a handful of buffers) so that loom explores every
//! interleaving in seconds.

use loom::thread;

use crate::cache::Owner;
use crate::config::Builder;
use crate::depot::Depot;
use crate::state::PoolState;
use crate::sync::Ordering;
use loom::sync::Arc;

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
    let k = g.reserve_exact(n);
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
        let d = Arc::new(Depot::new(&[10], 25));
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

/// Two threads push into a depot that can hold only one of their buffers: the cap holds.
#[test]
fn loom_depot_cap_holds_under_contention() {
    loom::model(|| {
        let d = Arc::new(Depot::new(&[10, 10], 15));
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
        let d = Arc::new(Depot::new(&[10], 1000));
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
        let d = Arc::new(Depot::new(&[10], 1000));
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
        let cache = state.new_cache(1);
        let s1 = state.clone();
        let worker = thread::spawn(move || {
            // SAFETY: this thread is the cache's only owner from here on.
            let o = unsafe { Owner::new(&cache) };
            assert!(o.set_limit(0, 4));
            // Two returns onto the stack, one hit from it: one buffer stays retained.
            o.push(0, Vec::with_capacity(64), false).unwrap();
            o.push(0, Vec::with_capacity(64), false).unwrap();
            drop(o.pop(0).unwrap());
            o.drain_oldest(0, usize::MAX, true, drop);
            o.set_limit(0, 0);
            s1.detach(&cache);
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
        let cache = state.new_cache(1);
        cache.ring(); // an earlier ring the owner is about to handle
        let s1 = state.clone();
        let trimmer = thread::spawn(move || s1.start_trim());
        // The owner's side of `policy::service`: re-arm, then look.
        // SAFETY: this thread is the cache's only owner.
        let o = unsafe { Owner::new(&cache) };
        o.rearm();
        let seen = state.trim_gen.load(Ordering::SeqCst);
        let generation = trimmer.join().unwrap();
        assert!(
            seen == generation || o.rung(),
            "the trim was neither seen nor left ringing: seen {seen}, trim {generation}, doorbell {}",
            cache.doorbell_for_tests()
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
        let cache = state.new_cache(1);
        cache.ring();
        let s1 = state.clone();
        let closer = thread::spawn(move || s1.close());
        // SAFETY: this thread is the cache's only owner.
        let o = unsafe { Owner::new(&cache) };
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
        let t = thread::spawn(move || s1.tick(1));
        state.tick(1);
        t.join().unwrap();
        assert_eq!(state.depot.bytes(), 0, "the idle buffer was released");
        assert!(!state.closed.load(Ordering::Relaxed));
    });
}

/// Views of one shared buffer cloned, sliced and dropped on three threads: exactly one of
/// them, the last, hands the buffer back, in every interleaving.
#[test]
fn loom_shared_views_hand_the_buffer_back_exactly_once() {
    use crate::pooled_bytes::LAST_VIEWS;
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

mod budget {
    //! The budget's credit and waiter protocol (`budget.rs`): no lost wake-up, no over-grant,
    //! no credit stranded under pressure, cancellation passes bytes on.

    use std::future::Future;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use loom::sync::Arc;
    use loom::thread;

    use crate::budget::{Budget, Credit, Ticket, Wake};

    /// A waiter for `need` bytes at the budget level, like `Acquire`: enqueues with its waker
    /// on first poll, then polls its ticket.
    struct Wait<'a> {
        budget: &'a Budget,
        need: usize,
        ticket: Option<Ticket>,
    }

    impl Future for Wait<'_> {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            let this = &mut *self;
            let ticket = this.ticket.get_or_insert_with(|| {
                this.budget
                    .enqueue(this.need, Wake::Task(Some(cx.waker().clone())))
            });
            if this.budget.poll(ticket, Some(cx.waker())) {
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
            let b = Arc::new(Budget::new(2, 1));
            assert_eq!(b.try_take(2, 0, 0), Some(0));
            let b2 = b.clone();
            let returner = thread::spawn(move || {
                b2.release(1);
                b2.release(1);
            });
            loom::future::block_on(Wait {
                budget: &b,
                need: 2,
                ticket: None,
            });
            returner.join().unwrap();
            let s = b.snapshot();
            assert_eq!((s.free, s.queued, s.waiting), (0, 0, 0));
        });
    }

    /// A return adds its charge to its thread's credit while a waiter sets the pressure flag
    /// and sweeps: in every interleaving the credit reaches the waiter (by the sweep, or by
    /// the return seeing the pressure), so the waiter is served.
    #[test]
    fn loom_budget_credit_is_never_stranded() {
        loom::model(|| {
            let b = Arc::new(Budget::new(2, 2));
            let credit = Arc::new(Credit::default());
            assert_eq!(b.try_take(2, 0, 0), Some(0));
            let (b2, c2) = (b.clone(), credit.clone());
            let returner = thread::spawn(move || {
                // A return on the owning thread: below credit_max, kept unless pressure.
                let back = b2.credit_back(&c2, 2);
                b2.release(back);
            });
            let ticket = b.enqueue(2, Wake::Task(None));
            b.release(credit.sweep());
            returner.join().unwrap();
            assert!(
                b.poll(&ticket, None),
                "the returned bytes reached the waiter"
            );
            assert_eq!(credit.get(), 0);
        });
    }

    /// Two threads take budget (credit first, then the account with a refill) while a third
    /// sweeps one's credit: never more than the limit is held, and every byte is accounted
    /// for at the end. (Three threads with compare-and-swap loops and a mutex: explored with
    /// at most four preemptions: 7 s; unbounded it ran for over ten minutes.)
    #[test]
    fn loom_budget_never_over_grants() {
        let mut model = loom::model::Builder::new();
        model.preemption_bound = Some(4);
        model.check(|| {
            let b = Arc::new(Budget::new(3, 1));
            let credits = Arc::new([Credit::default(), Credit::default()]);
            let held = Arc::new(loom::sync::atomic::AtomicUsize::new(0));
            let taker = |i: usize| {
                let (b, credits, held) = (b.clone(), credits.clone(), held.clone());
                thread::spawn(move || {
                    let c = &credits[i];
                    let got = c.take(1)
                        || b.try_take(1, c.sweep(), b.credit_max())
                            .map(|extra| b.release(b.credit_back(c, extra)))
                            .is_some();
                    if got {
                        let now = held.fetch_add(1, loom::sync::atomic::Ordering::SeqCst) + 1;
                        assert!(now <= 3);
                    }
                    got
                })
            };
            let (t0, t1) = (taker(0), taker(1));
            let sweeper = {
                let (b, credits) = (b.clone(), credits.clone());
                thread::spawn(move || b.release(credits[0].sweep()))
            };
            let got = [t0.join().unwrap(), t1.join().unwrap()];
            sweeper.join().unwrap();
            assert_eq!(got, [true, true], "3 bytes cover two takers");
            let s = b.snapshot();
            let held = held.load(loom::sync::atomic::Ordering::SeqCst);
            assert_eq!(s.free + credits[0].get() + credits[1].get() + held, 3);
        });
    }

    /// The front waiter is cancelled while bytes are released: what it gathered goes on to
    /// the next waiter, which is served, and nothing is lost.
    #[test]
    fn loom_budget_cancel_passes_bytes_on() {
        loom::model(|| {
            let b = Arc::new(Budget::new(2, 1));
            assert_eq!(b.try_take(2, 0, 0), Some(0));
            let first = b.enqueue(2, Wake::Task(None));
            let second = b.enqueue(1, Wake::Task(None));
            let b2 = b.clone();
            let releaser = thread::spawn(move || b2.release(1));
            b.cancel(first);
            releaser.join().unwrap();
            assert!(b.poll(&second, None));
            let s = b.snapshot();
            assert_eq!((s.free, s.queued, s.waiting), (0, 0, 0));
            b.release(1);
            b.release(1);
            assert_eq!(b.snapshot().free, 2);
        });
    }
}
