//! The budget on bytes in use (`Builder::max_in_use_bytes`): every way of asking, every way a
//! buffer comes back, fairness, cancellation, idle credit, stats; and a stress test of threads
//! and async tasks over the budget that checks after every operation that in-use never went
//! above the limit.

use crate::common;

use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

use crate::common::{in_use, Rng};
use tierpool::{AllocError, BufferPool, PooledBuf};

const KIB: usize = 1 << 10;
const MIB: usize = 1 << 20;

fn budgeted(limit: usize) -> BufferPool {
    BufferPool::builder()
        .power_of_two_tiers(1024, 256 * KIB)
        .max_in_use_bytes(limit)
        .build()
        .unwrap()
}

/// A waker that counts its wake-ups.
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

#[test]
fn without_a_budget_nothing_changes() {
    let pool = BufferPool::new();
    assert!(pool.stats().budget.is_none());
    let held: Vec<_> = (0..64).map(|_| pool.get(MIB)).collect();
    assert!(pool.try_get(MIB).is_ok());
    let waker = Waker::from(Arc::new(Flag::default()));
    let f = pin!(pool.acquire(4096));
    assert!(matches!(poll_once(f, &waker), Poll::Ready(Ok(_))));
    assert!(pool.get_timeout(4096, Duration::ZERO).is_ok());
    drop(held);
}

#[test]
fn try_get_refuses_with_the_figures_and_counts_the_refusal() {
    let pool = budgeted(64 * KIB);
    let a = pool.get(40 * KIB); // tier 64 KiB: charged 64 KiB
    assert_eq!(a.capacity(), 64 * KIB);
    assert_eq!(in_use(&pool), 64 * KIB);
    assert_eq!(
        pool.try_get(1).unwrap_err(),
        AllocError::OverBudget {
            requested: 1,
            in_use: 64 * KIB,
            limit: 64 * KIB
        }
    );
    drop(a);
    assert_eq!(in_use(&pool), 0);
    let b = pool.try_get(1).unwrap();
    assert_eq!(in_use(&pool), 1024);
    drop(b);
    let s = pool.stats().budget.unwrap();
    assert_eq!(
        (s.refusals, s.waits, s.in_use_bytes, s.limit),
        (1, 0, 0, 64 * KIB)
    );
    assert_eq!(s.peak_in_use_bytes, 64 * KIB);
}

#[test]
fn a_request_larger_than_the_budget_is_an_error_at_once() {
    let pool = budgeted(100 * KIB);
    // Tiered: 100 KiB is charged its tier, 128 KiB.
    let err = AllocError::LargerThanBudget {
        requested: 100 * KIB,
        charge: 128 * KIB,
        limit: 100 * KIB,
    };
    assert_eq!(pool.try_get(100 * KIB).unwrap_err(), err);
    assert_eq!(
        pool.get_timeout(100 * KIB, Duration::from_secs(60))
            .unwrap_err(),
        err
    );
    let waker = Waker::from(Arc::new(Flag::default()));
    let f = pin!(pool.acquire(100 * KIB));
    assert!(matches!(poll_once(f, &waker), Poll::Ready(Err(e)) if e == err));
    // Above the largest tier: the size rounded up to 4 KiB.
    let pool = budgeted(MIB);
    assert!(matches!(
        pool.try_get(MIB + 1),
        Err(AllocError::LargerThanBudget { charge, .. }) if charge == MIB + 4096
    ));
    assert!(matches!(
        pool.try_get(usize::MAX),
        Err(AllocError::CapacityOverflow { .. })
    ));
    assert_eq!(pool.stats().budget.unwrap().in_use_bytes, 0);
}

#[test]
#[should_panic(expected = "can never fit the budget")]
fn get_panics_on_a_request_larger_than_the_budget() {
    let pool = budgeted(64 * KIB);
    let _ = pool.get(65 * KIB);
}

#[test]
fn oversize_buffers_are_charged_their_size_in_pages() {
    let pool = budgeted(4 * MIB);
    let big = pool.get(300 * KIB + 1); // above the 256 KiB tier
    assert_eq!(big.capacity(), 300 * KIB + 1);
    assert_eq!(in_use(&pool), 300 * KIB + 4096);
    drop(big);
    assert_eq!(in_use(&pool), 0);
}

#[test]
fn every_way_back_returns_the_charge() {
    let pool = budgeted(MIB);
    // Drop on another thread.
    let b = pool.get(4096);
    std::thread::spawn(move || drop(b)).join().unwrap();
    assert_eq!(in_use(&pool), 0);
    // into_vec: the bytes leave the pool.
    let v = pool.get(4096).into_vec();
    assert_eq!(in_use(&pool), 0);
    // put() of that Vec adopts it without charging or refunding anything.
    pool.put(v);
    assert_eq!(in_use(&pool), 0);
    // The last view of a PooledBytes, on another thread.
    let shared = pool.get(4096).into_shared();
    let view = shared.clone();
    drop(shared);
    assert_eq!(in_use(&pool), 4096);
    std::thread::spawn(move || drop(view)).join().unwrap();
    assert_eq!(in_use(&pool), 0);
    // A frozen Bytes.
    #[cfg(feature = "bytes")]
    {
        let mut b = pool.get(4096);
        b.extend_from_slice(b"x");
        let frozen = b.into_bytes();
        assert_eq!(in_use(&pool), 4096);
        drop(frozen);
        assert_eq!(in_use(&pool), 0);
    }
    // A buffer grown past its tier is refunded what it was charged, and not kept.
    let mut grown = pool.get(1024);
    grown.resize(3000, 7);
    assert_eq!(in_use(&pool), 1024);
    let retained = pool.stats().retained_bytes;
    drop(grown);
    assert_eq!(in_use(&pool), 0);
    let after = pool.stats();
    assert_eq!(
        after.retained_bytes, retained,
        "odd capacity freed: {after}"
    );
    // A thread that exits returns its credit; buffers it still held come back when dropped.
    let p = pool.clone();
    let kept = std::thread::spawn(move || {
        let a = p.get(8192);
        drop(p.get(8192));
        a
    })
    .join()
    .unwrap();
    assert_eq!(in_use(&pool), 8192);
    // Its credit came back with it (a detached cache's credit could not be swept): all the
    // rest of the budget can be had at once.
    let rest = pool.try_get(MIB - 8192).unwrap();
    drop(rest);
    drop(kept);
    assert_eq!(in_use(&pool), 0);
    // A dropped pool: buffers still out are freed without complaint.
    let b = pool.get(4096);
    drop(pool);
    drop(b);
}

#[test]
fn an_adopted_buffer_of_odd_capacity_is_not_kept_by_a_budgeted_pool() {
    let pool = budgeted(MIB);
    pool.put(Vec::with_capacity(3000));
    assert_eq!(pool.stats().retained_bytes, 0);
    pool.put(Vec::with_capacity(4096));
    assert_eq!(pool.stats().retained_bytes, 4096);
    // And it is served (and charged) like any other.
    let b = pool.get(4000);
    assert_eq!(b.capacity(), 4096);
    assert_eq!(in_use(&pool), 4096);
}

#[test]
fn get_waits_for_a_return_on_another_thread() {
    let pool = budgeted(256 * KIB);
    let held = pool.get(256 * KIB);
    let started = Instant::now();
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(30));
        drop(held);
    });
    let b = pool.get(128 * KIB);
    assert!(started.elapsed() >= Duration::from_millis(25));
    t.join().unwrap();
    let s = pool.stats().budget.unwrap();
    assert_eq!((s.waits, s.waiting, s.in_use_bytes), (1, 0, 128 * KIB));
    assert!(s.wait_longest >= Duration::from_millis(25) && s.wait_total >= s.wait_longest);
    drop(b);
}

#[test]
fn get_timeout_gives_up_and_reports_how_long_it_waited() {
    let pool = budgeted(64 * KIB);
    let _held = pool.get(64 * KIB);
    match pool.get_timeout(1024, Duration::from_millis(20)) {
        Err(AllocError::TimedOut {
            requested,
            in_use,
            limit,
            waited,
        }) => {
            assert_eq!((requested, in_use, limit), (1024, 64 * KIB, 64 * KIB));
            assert!(waited >= Duration::from_millis(20));
        }
        other => panic!("{other:?}"),
    }
    let s = pool.stats().budget.unwrap();
    assert_eq!((s.waits, s.waiting), (1, 0));
}

#[test]
fn waiters_are_served_in_order_so_a_large_request_is_not_starved() {
    let pool = budgeted(256 * KIB);
    let waker_big = Arc::new(Flag::default());
    let waker_small = Arc::new(Flag::default());
    let (wb, ws) = (
        Waker::from(waker_big.clone()),
        Waker::from(waker_small.clone()),
    );
    let mut smalls: Vec<PooledBuf> = (0..4).map(|_| pool.get(64 * KIB)).collect();
    let mut big = pin!(pool.acquire(256 * KIB));
    assert!(poll_once(big.as_mut(), &wb).is_pending());
    // Half the budget comes back, but it is the big request's: a small one must queue.
    smalls.truncate(2);
    assert!(matches!(
        pool.try_get(1024),
        Err(AllocError::OverBudget { .. })
    ));
    let mut small = pin!(pool.acquire(1024));
    assert!(poll_once(small.as_mut(), &ws).is_pending());
    assert_eq!(pool.stats().budget.unwrap().waiting, 2);
    smalls.clear();
    assert_eq!(
        waker_big.0.load(Ordering::SeqCst),
        1,
        "woken once, when served"
    );
    assert_eq!(waker_small.0.load(Ordering::SeqCst), 0);
    let Poll::Ready(Ok(b)) = poll_once(big.as_mut(), &wb) else {
        panic!("the large request is served first");
    };
    assert!(poll_once(small.as_mut(), &ws).is_pending());
    drop(b);
    assert_eq!(waker_small.0.load(Ordering::SeqCst), 1);
    assert!(matches!(poll_once(small.as_mut(), &ws), Poll::Ready(Ok(_))));
}

#[test]
fn a_dropped_acquire_gives_back_what_it_gathered_and_wakes_the_next() {
    let pool = budgeted(256 * KIB);
    let w1 = Arc::new(Flag::default());
    let w2 = Arc::new(Flag::default());
    let (k1, k2) = (Waker::from(w1.clone()), Waker::from(w2.clone()));
    let mut held: Vec<PooledBuf> = (0..4).map(|_| pool.get(64 * KIB)).collect();
    let mut first = Box::pin(pool.acquire(256 * KIB));
    assert!(poll_once(first.as_mut(), &k1).is_pending());
    let mut second = pin!(pool.acquire(128 * KIB));
    assert!(poll_once(second.as_mut(), &k2).is_pending());
    held.truncate(1); // 192 KiB gathered by the first
    assert_eq!(w2.0.load(Ordering::SeqCst), 0);
    drop(first); // cancelled: its 192 KiB go on to the second, which is served
    assert_eq!(w2.0.load(Ordering::SeqCst), 1);
    let Poll::Ready(Ok(b)) = poll_once(second.as_mut(), &k2) else {
        panic!("served by the cancelled request's bytes");
    };
    assert_eq!(in_use(&pool), 192 * KIB);
    drop((b, held));
    assert_eq!(in_use(&pool), 0);
    // A future served but dropped before it was polled again gives everything back too.
    let hog = pool.get(256 * KIB);
    let mut f = Box::pin(pool.acquire(256 * KIB));
    assert!(poll_once(f.as_mut(), &k1).is_pending());
    drop(hog);
    drop(f);
    let s = pool.stats().budget.unwrap();
    assert_eq!((s.in_use_bytes, s.waiting), (0, 0));
    assert!(pool.try_get(256 * KIB).is_ok());
}

#[test]
fn buffers_idle_in_another_threads_cache_never_block_a_request_for_the_whole_budget() {
    let pool = budgeted(MIB);
    let parked = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(Barrier::new(2));
    let t = {
        let (pool, parked, ready) = (pool.clone(), parked.clone(), ready.clone());
        std::thread::spawn(move || {
            for _ in 0..10 {
                drop(pool.get(16 * KIB)); // leaves a charged buffer in this thread's cache
            }
            ready.wait();
            while !parked.load(Ordering::SeqCst) {
                std::thread::park(); // idle, holding it
            }
        })
    };
    ready.wait();
    if common::reclaim_available() {
        assert!(pool.stats().budget.unwrap().cached_bytes > 0);
    } else {
        // Without reclaiming, a budgeted pool keeps no thread caches (a waiter could not
        // take their buffers back): nothing is cached, and the request is served all the same.
        assert_eq!(pool.stats().budget.unwrap().cached_bytes, 0);
    }
    // The whole budget: the idle thread's cache is swept, without waiting for it.
    let whole = pool.try_get(MIB).expect("swept, not refused");
    assert_eq!(in_use(&pool), MIB);
    drop(whole);
    parked.store(true, Ordering::SeqCst);
    t.thread().unpark();
    t.join().unwrap();
}

// Not under Miri (a tokio runtime there takes minutes; the waker protocol is covered by the
// manual-waker tests), where tokio is not even built (Cargo.toml's dev-dependencies).
#[test]
#[cfg(not(miri))]
fn the_tokio_runtime_waits_and_wakes_across_workers() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .build()
        .unwrap();
    let pool = budgeted(256 * KIB);
    let done = rt.block_on(async {
        let mut tasks = Vec::new();
        for i in 0..32usize {
            let pool = pool.clone();
            tasks.push(tokio::spawn(async move {
                let size = [64 * KIB, 128 * KIB, 256 * KIB][i % 3];
                let buf = pool.acquire(size).await.unwrap();
                tokio::task::yield_now().await;
                drop(buf);
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        32
    });
    assert_eq!(done, 32);
    let s = pool.stats().budget.unwrap();
    assert_eq!((s.in_use_bytes, s.waiting), (0, 0));
    assert!(s.peak_in_use_bytes <= 256 * KIB);
}

/// Eight threads and a runtime's tasks take and return buffers over a budget much smaller than
/// their demand, through every way of asking. Each holder adds its buffers' charges to a
/// shared count before using them and subtracts them before returning them, so the count is
/// at least what is in use at any moment; it must never exceed the limit. Everything must
/// finish (a request for the whole budget included), and the stats must add up at the end.
// A stress test: natively, in release and under ThreadSanitizer; not under Miri, where tokio
// is not built (Cargo.toml's dev-dependencies).
#[test]
#[cfg(not(miri))]
fn stress_threads_and_tasks_never_exceed_the_budget() {
    const LIMIT: usize = 1 << 20;
    let pool = budgeted(LIMIT);
    let charged = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let ops = if cfg!(debug_assertions) {
        2_000
    } else {
        20_000
    };
    let charge_of = |b: &PooledBuf| b.capacity().next_power_of_two().max(1024);
    let take = {
        let (charged, peak) = (charged.clone(), peak.clone());
        move |c: usize| {
            let now = charged.fetch_add(c, Ordering::SeqCst) + c;
            peak.fetch_max(now, Ordering::SeqCst);
            assert!(now <= LIMIT, "in use {now} > limit {LIMIT}");
        }
    };
    let give = {
        let charged = charged.clone();
        move |c: usize| {
            charged.fetch_sub(c, Ordering::SeqCst);
        }
    };
    std::thread::scope(|s| {
        // The whole budget, held by a thread of its own (one that exits, so its cache retires)
        // while every other thread and task starts: each meets a spent budget first, so the
        // budget is contended however the threads are scheduled (under qemu-user, threads ran
        // one after another and none ever waited).
        let (held_tx, held_rx) = std::sync::mpsc::channel();
        let (gate_pool, gate_take, gate_give) = (pool.clone(), take.clone(), give.clone());
        s.spawn(move || {
            let gate = gate_pool.get(LIMIT);
            gate_take(LIMIT);
            held_tx.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(20));
            gate_give(LIMIT);
            drop(gate);
        });
        held_rx.recv().unwrap();
        for id in 0..8u64 {
            let (pool, take, give) = (pool.clone(), take.clone(), give.clone());
            s.spawn(move || {
                let mut rng = Rng(id + 1);
                let mut held: Vec<PooledBuf> = Vec::new();
                for i in 0..ops {
                    let n = 1024 << rng.below(9); // 1 KiB ..= 256 KiB
                    let got = match rng.below(4) {
                        0 => pool.try_get(n).ok(),
                        1 => pool.get_timeout(n, Duration::from_millis(5)).ok(),
                        // A blocking get only while holding nothing (else two threads
                        // holding half each could wait for each other forever, as with
                        // any semaphore).
                        _ if held.is_empty() => Some(pool.get(n)),
                        _ => None,
                    };
                    if let Some(b) = got {
                        take(charge_of(&b));
                        held.push(b);
                    }
                    if held.len() > 2 || (i % 7 == 0 && !held.is_empty()) {
                        let b = held.swap_remove(rng.below(held.len() as u64) as usize);
                        give(charge_of(&b));
                        if rng.below(2) == 0 {
                            drop(b);
                        } else {
                            let v = b.into_vec();
                            drop(v);
                        }
                    }
                    if id == 0 && i % 500 == 0 {
                        // The whole budget, now and then: it must not starve.
                        for b in held.drain(..) {
                            give(charge_of(&b));
                        }
                        let whole = pool.get(LIMIT);
                        take(LIMIT);
                        give(LIMIT);
                        drop(whole);
                    }
                }
                for b in held {
                    give(charge_of(&b));
                }
            });
        }
        // Async tasks on a two-worker runtime, at the same time.
        let (pool, take, give) = (pool.clone(), take.clone(), give.clone());
        s.spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_time()
                .build()
                .unwrap();
            rt.block_on(async move {
                let mut tasks = Vec::new();
                for id in 0..16u64 {
                    let (pool, take, give) = (pool.clone(), take.clone(), give.clone());
                    tasks.push(tokio::spawn(async move {
                        let mut rng = Rng(100 + id);
                        for _ in 0..ops / 20 {
                            let n = 1024 << rng.below(9);
                            let b = pool.acquire(n).await.unwrap();
                            take(charge_of(&b));
                            tokio::task::yield_now().await;
                            give(charge_of(&b));
                            let moved = tokio::spawn(async move { drop(b) });
                            moved.await.unwrap();
                            if rng.below(8) == 0 {
                                // Cancelled while (maybe) waiting.
                                let f = pool.acquire(n);
                                let _ = tokio::time::timeout(Duration::from_micros(50), f).await;
                            }
                        }
                    }));
                }
                for t in tasks {
                    t.await.unwrap();
                }
            });
        });
    });
    assert_eq!(charged.load(Ordering::SeqCst), 0);
    // The runtime's worker threads signal their shutdown before their thread-local destructors
    // (which retire their caches: counts folded in, credit given back) have run; the figures
    // are exact once no thread uses the pool, so wait for the last cache to retire.
    let deadline = Instant::now() + Duration::from_secs(30);
    while pool.stats().thread_caches > 0 {
        assert!(Instant::now() < deadline, "a thread cache never retired");
        std::thread::sleep(Duration::from_millis(1));
    }
    let s = pool.stats().budget.unwrap();
    assert_eq!((s.in_use_bytes, s.waiting), (0, 0), "{s:?}");
    assert!(s.peak_in_use_bytes <= LIMIT);
    assert!(peak.load(Ordering::SeqCst) <= LIMIT);
    assert!(s.waits > 0, "the budget was contended: {s:?}");
    common::assert_books_balance(&pool.stats());
}

/// A thread that exits without being joined (as a runtime's workers do) settles its cache's
/// charges before its cache stops counting: once `thread_caches` reads 0, the account is
/// exact. The exiting thread leaves buffers on its stacks (charged, not in use) for its
/// retirement to give back; the watcher reads the stats as fast as it can meanwhile.
#[test]
#[cfg(not(miri))]
fn an_exited_thread_settles_its_charges_before_it_stops_counting() {
    let pool = budgeted(1 << 20);
    let rounds = if cfg!(debug_assertions) { 200 } else { 2_000 };
    for round in 0..rounds {
        let p = pool.clone();
        let exited = std::thread::spawn(move || {
            for n in [1024, 4096, 16 * KIB, 64 * KIB] {
                drop(p.get(n)); // kept on this thread's stack, charged
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // Its closure is done, so its cache was attached; 0 caches means it retired.
            let done = exited.is_finished();
            let s = pool.stats();
            if s.thread_caches == 0 && done {
                let b = s.budget.unwrap();
                assert_eq!(b.in_use_bytes, 0, "round {round}: {b:?}");
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the thread never retired its cache"
            );
        }
        exited.join().unwrap();
    }
}
