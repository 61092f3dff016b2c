//! Reservations (`BufferPool::reserve`): bytes of the budget set aside, spent on buffers
//! taken later; in order with the budget's other waiters; every byte back whichever way
//! they end; and threads reserving, spending and dropping at random never take the budget
//! past its limit.

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use crate::common::{in_use, Rng};
use tierpool::{AllocError, BufferPool, PooledBuf};

const KIB: usize = 1 << 10;

fn budgeted(limit: usize) -> BufferPool {
    BufferPool::builder()
        .power_of_two_tiers(1024, 256 * KIB)
        .max_in_use_bytes(limit)
        .build()
        .unwrap()
}

#[derive(Default)]
struct Flag(AtomicUsize);

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn poll_once<F: Future>(f: std::pin::Pin<&mut F>, waker: &Waker) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(waker))
}

/// Runs `f` to completion on this thread, parking it between polls.
fn block_on<F: Future>(f: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(v) = poll_once(f.as_mut(), &waker) {
            return v;
        }
        std::thread::park();
    }
}

#[test]
fn a_reservation_pays_for_its_buffers_and_gives_back_what_it_did_not_spend() {
    let pool = budgeted(256 * KIB);
    let mut r = pool.try_reserve(100 * KIB).unwrap();
    assert_eq!((r.left(), in_use(&pool)), (100 * KIB, 100 * KIB));
    let a = r.try_get_exact(30 * KIB).unwrap(); // a 32 KiB tier
    assert_eq!(a.capacity(), 32 * KIB);
    assert_eq!((r.left(), in_use(&pool)), (68 * KIB, 100 * KIB));
    let b = r.try_get_exact(60 * KIB).unwrap(); // 64 KiB
    assert_eq!(r.left(), 4 * KIB);
    drop(r); // the 4 KiB left go back
    assert_eq!(in_use(&pool), 96 * KIB);
    drop((a, b));
    assert_eq!(in_use(&pool), 0);
}

#[test]
fn what_a_reservation_does_not_cover_comes_from_the_budget_if_it_has_room_now() {
    let pool = budgeted(256 * KIB);
    let mut r = pool.try_reserve(16 * KIB).unwrap();
    let big = r.try_get_exact(64 * KIB).unwrap(); // 16 KiB paid, 48 KiB from the budget
    assert_eq!((r.left(), in_use(&pool)), (0, 64 * KIB));
    let hog = [pool.get(128 * KIB), pool.get(64 * KIB)]; // the rest of the budget
    let err = r.try_get_exact(1024).unwrap_err();
    assert!(matches!(err, AllocError::OverBudget { .. }), "{err:?}");
    assert_eq!(in_use(&pool), 256 * KIB, "a refused get spends nothing");
    drop((big, hog, r));
    assert_eq!(in_use(&pool), 0);
}

#[test]
fn a_buffer_from_the_threads_cache_gives_its_charge_back_to_the_budget() {
    let pool = budgeted(256 * KIB);
    drop(pool.get(32 * KIB)); // one 32 KiB buffer on this thread's stack, charged
    let before = in_use(&pool);
    let mut r = pool.try_reserve(32 * KIB).unwrap();
    let b = r.try_get_exact(32 * KIB).unwrap(); // the stack's: its charge was paid already
    assert_eq!(r.left(), 0);
    drop(r);
    assert_eq!(in_use(&pool), before.max(32 * KIB));
    drop(b);
    assert!(in_use(&pool) <= before);
}

#[test]
fn reservations_wait_in_order_with_the_budgets_other_waiters() {
    let pool = budgeted(256 * KIB);
    let (w1, w2) = (Arc::new(Flag::default()), Arc::new(Flag::default()));
    let (k1, k2) = (Waker::from(w1.clone()), Waker::from(w2.clone()));
    let hog = pool.get(256 * KIB);
    assert!(matches!(
        pool.try_reserve(KIB),
        Err(AllocError::OverBudget { .. })
    ));
    let mut reserve = pin!(pool.reserve(200 * KIB));
    assert!(poll_once(reserve.as_mut(), &k1).is_pending());
    let mut acquire = pin!(pool.acquire(64 * KIB));
    assert!(poll_once(acquire.as_mut(), &k2).is_pending());
    assert_eq!(pool.stats().budget.unwrap().waiting, 2);
    drop(hog);
    assert_eq!(
        w1.0.load(Ordering::SeqCst),
        1,
        "the reservation, first in line"
    );
    let Poll::Ready(Ok(r)) = poll_once(reserve.as_mut(), &k1) else {
        panic!("the reservation is served first");
    };
    assert_eq!(r.left(), 200 * KIB);
    // The acquire waits for 64 KiB: 56 are free.
    assert!(poll_once(acquire.as_mut(), &k2).is_pending());
    drop(r);
    assert!(matches!(
        poll_once(acquire.as_mut(), &k2),
        Poll::Ready(Ok(_))
    ));
    assert_eq!(in_use(&pool), 0);
}

#[test]
fn a_reserve_dropped_while_it_waits_passes_its_place_on() {
    let pool = budgeted(256 * KIB);
    let w = Arc::new(Flag::default());
    let k = Waker::from(w.clone());
    let mut held: Vec<PooledBuf> = (0..4).map(|_| pool.get(64 * KIB)).collect();
    let mut first = Box::pin(pool.reserve(256 * KIB));
    assert!(poll_once(first.as_mut(), &k).is_pending());
    let mut second = pin!(pool.reserve(64 * KIB));
    assert!(poll_once(second.as_mut(), &k).is_pending());
    held.truncate(2); // 128 KiB gathered by the first
    drop(first);
    let Poll::Ready(Ok(r)) = poll_once(second.as_mut(), &k) else {
        panic!("served by what the dropped reservation had gathered");
    };
    drop((r, held));
    let s = pool.stats().budget.unwrap();
    assert_eq!((s.in_use_bytes, s.waiting), (0, 0));
}

#[test]
fn larger_than_the_budget_is_an_error_and_without_a_budget_nothing_is_set_aside() {
    let pool = budgeted(256 * KIB);
    let err = pool.try_reserve(512 * KIB).unwrap_err();
    assert!(
        matches!(err, AllocError::LargerThanBudget { .. }),
        "{err:?}"
    );
    let waker = Waker::from(Arc::new(Flag::default()));
    let mut f = pin!(pool.reserve(512 * KIB));
    assert!(matches!(
        poll_once(f.as_mut(), &waker),
        Poll::Ready(Err(AllocError::LargerThanBudget { .. }))
    ));

    let plain = BufferPool::new();
    let mut r = plain.try_reserve(1 << 40).unwrap();
    assert_eq!(r.left(), 0);
    assert_eq!(
        r.try_get_exact(5000).unwrap().capacity(),
        plain.capacity_for(5000)
    );
}

#[test]
fn threads_reserving_spending_and_dropping_never_exceed_the_budget() {
    let limit = 1 << 20;
    let pool = budgeted(limit);
    let (threads, rounds) = if cfg!(miri) { (3, 20) } else { (4, 300) };
    std::thread::scope(|s| {
        for t in 0..threads {
            let pool = pool.clone();
            s.spawn(move || {
                let mut rng = Rng(t as u64 + 1);
                let mut below = |n: usize| rng.below(n as u64) as usize;
                for _ in 0..rounds {
                    let want = 1024 + below(200 * KIB);
                    let mut r = block_on(pool.reserve(pool.charge_for(want))).unwrap();
                    let mut held = Vec::new();
                    let mut left = want;
                    while left > 0 {
                        let n = (1024 + below(64 * KIB)).min(left);
                        match r.try_get_exact(n) {
                            Ok(b) => held.push(b),
                            Err(AllocError::OverBudget { .. }) => break,
                            Err(e) => panic!("{e}"),
                        }
                        left -= n;
                        let s = pool.stats().budget.unwrap();
                        assert!(s.in_use_bytes <= limit, "{s:?}");
                    }
                    if below(2) == 0 {
                        drop(r);
                        drop(held);
                    } else {
                        drop(held);
                        drop(r);
                    }
                }
            });
        }
    });
    assert_eq!(in_use(&pool), 0);
}
