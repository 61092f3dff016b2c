//! Thread caches that other threads reclaim: idle threads' caches are emptied without their
//! owners (by `trim()`, by the pool's tick, by the background trimmer), the depot and all
//! caches together never retain more than `max_retained_bytes`, and a reclaim racing with an
//! owner that wakes up never loses or doubles a buffer.
//!
//! Where caches cannot be reclaimed (`TIERPOOL_NO_MEMBARRIER`, or no `membarrier`), the tests
//! check what holds there instead: the bound, and release at the owner's next operation.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use tierpool::{BufferPool, PooledBuf};

use crate::common;
use crate::common::{Outstanding, Rng};

/// Sizes from 256 B to 8 MiB, as the idle-threads scenario uses.
const SIZES: [usize; 6] = [256, 4 << 10, 64 << 10, 256 << 10, 1 << 20, 8 << 20];

/// Takes and returns two buffers of each size (written, so that they are real memory).
fn use_the_pool(pool: &BufferPool, rounds: usize) {
    for _ in 0..rounds {
        for &n in &SIZES {
            let n = if cfg!(miri) { n.min(64 << 10) } else { n };
            let (mut a, mut b) = (pool.get(n), pool.get(n));
            a.push(1);
            b.push(2);
            drop((a, b));
        }
    }
}

/// `threads` threads use the pool and park, holding whatever their caches kept; `f` runs
/// while they are idle, then they are let go.
fn with_idle_threads(pool: &BufferPool, threads: usize, f: impl FnOnce()) {
    let ready = Arc::new(Barrier::new(threads + 1));
    let done = Arc::new(AtomicBool::new(false));
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (pool, ready, done) = (pool.clone(), ready.clone(), done.clone());
            thread::spawn(move || {
                use_the_pool(&pool, 2);
                ready.wait();
                while !done.load(Ordering::Acquire) {
                    thread::park(); // idle: never touches the pool again
                }
            })
        })
        .collect();
    ready.wait();
    f();
    done.store(true, Ordering::Release);
    for h in handles {
        h.thread().unpark();
        h.join().unwrap();
    }
}

#[test]
fn trim_empties_the_caches_of_idle_threads_at_once() {
    let pool = BufferPool::new();
    let threads = if cfg!(miri) { 3 } else { 32 };
    with_idle_threads(&pool, threads, || {
        let s = pool.stats();
        assert_eq!(s.thread_caches, threads, "{s}");
        assert!(
            s.retained_bytes <= common::retained_bound(&pool, threads),
            "one number: {s}"
        );
        assert!(s.retained_bytes > 0, "{s}");
        pool.trim();
        let s = pool.stats();
        if common::reclaim_available() {
            assert_eq!(
                s.retained_bytes, 0,
                "no idle thread's cache holds anything: {s}"
            );
        } else {
            // Rung: each releases at its owner's next operation; only the depot is empty now.
            assert_eq!(s.depot_bytes, 0, "{s}");
        }
        assert_eq!(s.thread_caches, threads, "the caches stay attached: {s}");
    });
    // Their owners come back (and exit): nothing was lost or counted twice.
    let s = pool.stats();
    common::assert_books_balance(&s);
    assert_eq!(s.gets, s.returned, "{s}");
}

#[test]
#[cfg_attr(miri, ignore = "waits for decay intervals on real time")]
fn the_background_trimmer_empties_idle_caches_within_a_few_intervals() {
    let interval = Duration::from_millis(20);
    let pool = BufferPool::builder()
        .decay_interval(interval)
        .background_trim(true)
        .build()
        .unwrap();
    with_idle_threads(&pool, 8, || {
        assert!(pool.stats().retained_bytes > 0);
        // Two intervals are the design (a tick that records the caches' activity, one that
        // finds it unchanged); the deadline is generous for a loaded CI machine.
        let deadline = Instant::now() + 100 * interval;
        while pool.stats().retained_bytes > 0 && Instant::now() < deadline {
            thread::sleep(interval / 4);
        }
        let s = pool.stats();
        if common::reclaim_available() {
            assert_eq!(s.retained_bytes, 0, "idle caches came back: {s}");
        } else {
            assert_eq!(s.depot_bytes, 0, "the depot decayed: {s}");
        }
    });
}

#[test]
#[cfg_attr(miri, ignore = "waits for decay intervals on real time")]
fn the_ticks_of_a_working_thread_empty_idle_caches() {
    if !common::reclaim_available() {
        return; // nothing reclaims idle caches here: they give up at their owner's next use
    }
    // No background trimmer: the main thread's own use of the pool ticks it. It works with
    // 2 KiB buffers, a size the idle threads never took, so that everything else retained is
    // theirs (or was, in the depot).
    let interval = Duration::from_millis(20);
    let pool = BufferPool::builder()
        .decay_interval(interval)
        .build()
        .unwrap();
    let t2k = pool.tier_sizes().iter().position(|&s| s == 2048).unwrap();
    with_idle_threads(&pool, 8, || {
        let idle_bytes = || {
            let s = pool.stats();
            s.retained_bytes - s.tiers[t2k].retained_bytes
        };
        assert!(idle_bytes() > 0);
        let deadline = Instant::now() + 100 * interval;
        while idle_bytes() > 0 && Instant::now() < deadline {
            for _ in 0..300 {
                drop(pool.get(2048)); // enough returns for the cache to look at the clock
            }
            thread::sleep(interval / 4);
        }
        assert_eq!(idle_bytes(), 0, "{}", pool.stats());
    });
}

/// Threads come in waves: each uses the pool at random (with hand-offs through a channel),
/// then exits or parks for good. Between waves (all quiet) the depot and every cache together
/// hold at most the cap; a trimmer reclaims caches all along, while their owners work; no
/// buffer is ever handed out twice; and at the end trim() leaves nothing with the parked
/// threads still alive.
#[test]
fn the_bound_holds_while_threads_come_go_idle_and_exit() {
    let cap = 4 << 20;
    let pool = BufferPool::builder()
        .max_retained_bytes(cap)
        .thread_cache_bytes(512 << 10)
        .decay_interval(Duration::from_millis(5))
        .build()
        .unwrap();
    let out = Arc::new(Outstanding::default());
    // `tierpool_sanitized`: .ci/run's ThreadSanitizer build, where the release counts (120
    // parked threads by the end) took 155 s of the step.
    let (waves, per_wave, ops) = if cfg!(miri) {
        (2, 2, 20)
    } else if cfg!(debug_assertions) || cfg!(tierpool_sanitized) {
        (6, 12, 400)
    } else {
        (10, 24, 4_000)
    };
    let stop = Arc::new(AtomicBool::new(false));
    let trims = Arc::new(AtomicUsize::new(0));
    let trimmer = {
        let (pool, stop, trims) = (pool.clone(), stop.clone(), trims.clone());
        thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                pool.trim();
                trims.fetch_add(1, Ordering::Relaxed);
                thread::sleep(Duration::from_micros(if cfg!(miri) { 5_000 } else { 300 }));
            }
        })
    };
    let (tx, rx) = std::sync::mpsc::sync_channel::<PooledBuf>(16);
    let rx = Arc::new(std::sync::Mutex::new(rx));
    let release = Arc::new(AtomicBool::new(false));
    let mut parked = Vec::new();
    for wave in 0..waves {
        let quiet = Arc::new(Barrier::new(per_wave + 1));
        let mut exiting = Vec::new();
        for i in 0..per_wave {
            let (pool, out, tx, rx) = (pool.clone(), out.clone(), tx.clone(), rx.clone());
            let (quiet, release) = (quiet.clone(), release.clone());
            let park = i % 2 == 0;
            let h = thread::spawn(move || {
                let mut rng = Rng(0x5DEE_CE66 ^ ((wave * 1000 + i) as u64).wrapping_mul(0x9E37));
                let mut held: Vec<PooledBuf> = Vec::new();
                for _ in 0..ops {
                    match rng.below(8) {
                        0..=3 => {
                            let n = SIZES[rng.below(SIZES.len() as u64 - 1) as usize];
                            let mut b = pool.get(n);
                            assert!(b.capacity() >= n && b.is_empty());
                            out.take(&b);
                            b.push(i as u8);
                            held.push(b);
                        }
                        4 | 5 if !held.is_empty() => {
                            let b = held.swap_remove(rng.below(held.len() as u64) as usize);
                            out.release(&b);
                        }
                        6 if !held.is_empty() => {
                            let b = held.pop().unwrap();
                            out.release(&b);
                            let _ = tx.try_send(b); // dropped here if the channel is full
                        }
                        _ => {
                            if let Ok(b) = rx.lock().unwrap().try_recv() {
                                out.take(&b);
                                out.release(&b);
                            }
                        }
                    }
                }
                for b in held {
                    out.release(&b);
                }
                quiet.wait();
                if park {
                    while !release.load(Ordering::Acquire) {
                        thread::park();
                    }
                }
            });
            if park {
                parked.push(h);
            } else {
                exiting.push(h);
            }
        }
        quiet.wait();
        for h in exiting {
            h.join().unwrap();
        }
        // This wave is parked or gone; earlier waves are parked: only the trimmer runs, and it
        // only takes away. At rest, one number bounds everything.
        let s = pool.stats();
        let bound = common::retained_bound(&pool, s.thread_caches);
        assert!(s.retained_bytes <= bound, "wave {wave}: {s}");
    }
    stop.store(true, Ordering::Relaxed);
    trimmer.join().unwrap();
    assert!(trims.load(Ordering::Relaxed) > 0);
    drop(tx);
    for b in rx.lock().unwrap().try_iter() {
        drop(b);
    }
    assert!(out.is_empty(), "every buffer came back");
    pool.trim();
    let s = pool.stats();
    if common::reclaim_available() {
        assert_eq!(s.retained_bytes, 0, "the parked threads' caches too: {s}");
    }
    release.store(true, Ordering::Release);
    for h in parked {
        h.thread().unpark();
        h.join().unwrap();
    }
    let s = pool.stats();
    common::assert_books_balance(&s);
    assert_eq!(s.gets, s.returned, "{s}");
}

/// An owner wakes up while its cache is being reclaimed, over and over: its operations and
/// the reclaimer's never work on the stacks at once (a buffer handed out twice, or freed while
/// held, would show in the address set or the contents).
#[test]
fn an_owner_waking_up_during_a_reclaim_never_loses_or_doubles_a_buffer() {
    let pool = BufferPool::builder()
        .tiers([256, 4096])
        .max_retained_bytes(1 << 20)
        .build()
        .unwrap();
    let out = Arc::new(Outstanding::default());
    let rounds = if cfg!(miri) {
        15
    } else if cfg!(debug_assertions) {
        3_000
    } else {
        50_000
    };
    let stop = Arc::new(AtomicBool::new(false));
    let reclaimer = {
        let (pool, stop) = (pool.clone(), stop.clone());
        thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                pool.trim();
                n += 1;
                thread::yield_now();
            }
            n
        })
    };
    let owners: Vec<_> = (0..2)
        .map(|id| {
            let (pool, out) = (pool.clone(), out.clone());
            thread::spawn(move || {
                let mut rng = Rng(11 + id);
                for r in 0..rounds {
                    let k = 1 + rng.below(6) as usize;
                    let mut held = Vec::with_capacity(k);
                    for _ in 0..k {
                        let mut b = pool.get(if rng.below(2) == 0 { 256 } else { 4096 });
                        out.take(&b);
                        b.extend_from_slice(&[(r % 251) as u8; 32]);
                        held.push(b);
                    }
                    for b in held {
                        assert!(
                            b.iter().all(|&x| x == (r % 251) as u8),
                            "changed while held"
                        );
                        out.release(&b);
                    }
                    if rng.below(64) == 0 {
                        thread::sleep(Duration::from_micros(50)); // idle for a moment
                    }
                }
            })
        })
        .collect();
    for h in owners {
        h.join().unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    assert!(reclaimer.join().unwrap() > 0);
    let s = pool.stats();
    common::assert_books_balance(&s);
    assert_eq!(s.gets, s.returned, "{s}");
    assert!(s.retained_bytes <= pool.max_retained_bytes(), "{s}");
}
