//! Memory comes back: decay after a burst, trim across threads, the background trimmer.
//!
//! These tests involve time (decay intervals of tens of milliseconds) but assert behaviour,
//! never speed: each waits, with a generous deadline, for memory to come back, and the
//! deadlines are many intervals long so that a loaded machine cannot fail them.

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use tierpool::BufferPool;

use crate::common;

const KIB16: usize = 16 << 10;

#[test]
fn after_a_burst_memory_falls_back_while_the_program_runs_on_slowly() {
    let interval = Duration::from_millis(100);
    let pool = BufferPool::builder()
        .decay_interval(interval)
        .build()
        .unwrap();
    let burst: Vec<_> = (0..3000).map(|_| pool.get(KIB16)).collect();
    drop(burst);
    let peak = pool.stats().retained_bytes;
    assert!(peak >= 40 << 20, "the burst is retained at first: {peak}");

    // Quiet phase: one buffer at a time, about one per millisecond.
    let start = Instant::now();
    let mut fell_back_after = None;
    while start.elapsed() < 50 * interval {
        drop(pool.get(KIB16));
        thread::sleep(Duration::from_millis(1));
        if pool.stats().retained_bytes <= 4 * KIB16 {
            fell_back_after = Some(start.elapsed());
            break;
        }
    }
    let after = fell_back_after.unwrap_or_else(|| panic!("never fell back: {}", pool.stats()));
    eprintln!("retained memory fell from {peak} bytes to <= 64 KiB after {after:?} (interval {interval:?})");
    // Mechanism check, not a timing target: each interval boundary releases what stayed idle
    // through the previous one, so it cannot happen before the first boundary has passed.
    let s = pool.stats();
    assert!(s.discarded >= 2900, "{s}");
    assert!(s.hits >= 1, "the working set stays pooled: {s}");
    // Having released tens of megabytes, the pool asked glibc to return the free pages in
    // the middle of its heap (the `burst` workload measures the RSS this saves).
    let expected = cfg!(all(target_os = "linux", target_env = "gnu"));
    assert_eq!(s.allocator_trims > 0, expected, "{s:?}");
}

#[test]
fn trim_allocator_is_called_after_a_megabyte_and_can_be_turned_off() {
    let gnu = cfg!(all(target_os = "linux", target_env = "gnu"));
    for enabled in [true, false] {
        let pool = BufferPool::builder()
            .trim_allocator(enabled)
            .build()
            .unwrap();
        drop(pool.get(4096));
        assert_eq!(pool.trim(), 4096);
        assert_eq!(pool.stats().allocator_trims, 0, "4 KiB is not worth a trim");
        let burst: Vec<_> = (0..100).map(|_| pool.get(KIB16)).collect();
        drop(burst);
        assert!(pool.trim() >= 100 * KIB16);
        assert_eq!(pool.stats().allocator_trims, u64::from(enabled && gnu));
    }
}

#[test]
fn working_set_in_steady_use_is_not_released() {
    // The working set is touched every ~0.2 ms; only a stall of a whole interval (250 ms)
    // could make it look idle.
    let pool = BufferPool::builder()
        .decay_interval(Duration::from_millis(250))
        .build()
        .unwrap();
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(1000) {
        // A steady working set of 8 buffers used every round.
        let bufs: Vec<_> = (0..8).map(|_| pool.get(4096)).collect();
        drop(bufs);
        thread::sleep(Duration::from_micros(200));
    }
    let s = pool.stats();
    assert_eq!(s.misses, 8, "only the first round allocates: {s}");
}

#[test]
fn trim_reaches_other_threads_caches_when_they_next_use_the_pool() {
    let pool = BufferPool::builder().tiers([4096]).build().unwrap();
    let barrier = Arc::new(Barrier::new(2));
    let p = pool.clone();
    let b = barrier.clone();
    let worker = thread::spawn(move || {
        let bufs: Vec<_> = (0..32).map(|_| p.get(4096)).collect();
        drop(bufs);
        b.wait(); // main trims now
        b.wait();
        for _ in 0..64 {
            drop(p.get(4096));
        }
        p.stats().retained_buffers
    });
    barrier.wait();
    assert_eq!(pool.stats().retained_buffers, 32);
    pool.trim();
    assert_eq!(pool.stats().depot_bytes, 0);
    barrier.wait();
    let retained = worker.join().unwrap();
    assert!(
        retained <= 1,
        "the worker's cache honoured the trim: {retained}"
    );
}

#[test]
fn background_trimmer_releases_an_idle_pool() {
    let interval = Duration::from_millis(30);
    let make = |background| {
        BufferPool::builder()
            .decay_interval(interval)
            .background_trim(background)
            .build()
            .unwrap()
    };
    // A thread fills the pool and exits: its cache goes to the depot. Returns what the depot
    // holds then: all 100 buffers natively; where the thread runs slowly enough for an
    // interval to pass while it returns them (aarch64 under qemu), its own look at the clock
    // may already have released the first ones the depot took, by decay.
    let fill = |pool: &BufferPool| {
        let p = pool.clone();
        thread::spawn(move || drop((0..100).map(|_| p.get(KIB16)).collect::<Vec<_>>()))
            .join()
            .unwrap();
        let held = pool.stats().depot_bytes;
        assert!(held > 0 && held <= 100 * KIB16, "{}", pool.stats());
        held
    };
    let trimmed = make(true);
    let untrimmed = make(false);
    fill(&trimmed);
    let untrimmed_held = fill(&untrimmed);
    let deadline = Instant::now() + 100 * interval;
    while trimmed.stats().depot_bytes > 0 && Instant::now() < deadline {
        thread::sleep(interval / 3);
    }
    assert_eq!(trimmed.stats().depot_bytes, 0, "{}", trimmed.stats());
    assert_eq!(trimmed.stats().discarded, 100);
    // Control: without the trimmer nothing looks at the clock of an idle pool.
    thread::sleep(3 * interval);
    assert_eq!(untrimmed.stats().depot_bytes, untrimmed_held);
}

#[test]
fn a_thread_that_only_returns_buffers_honours_trim() {
    // The consumer side of a hand-off never calls get; its cache must still honour trim().
    let pool = BufferPool::builder().tiers([4096]).build().unwrap();
    let (tx, rx) = std::sync::mpsc::sync_channel::<tierpool::PooledBuf>(8);
    let (ack_tx, ack_rx) = std::sync::mpsc::channel::<()>();
    let consumer = thread::spawn(move || {
        for b in rx.iter() {
            drop(b);
            ack_tx.send(()).unwrap();
        }
    });
    let send = |n: usize| {
        for _ in 0..n {
            tx.send(pool.get(4096)).unwrap();
            ack_rx.recv().unwrap();
        }
    };
    send(40); // the consumer's cache now holds the returned buffers
    assert!(pool.stats().retained_bytes > 0);
    pool.trim();
    if common::reclaim_available() {
        // Reclaimed: the consumer's cache is empty when trim() returns, while its thread
        // waits in `recv` (it is not in a pool operation, so nothing waits for it).
        let s = pool.stats();
        assert_eq!(s.retained_bytes, 0, "{s}");
    } else {
        // Without reclaiming, the consumer's cache honours the trim at its next slow
        // operation: enough further returns for its housekeeping to run (it counts slow
        // returns, about one per batch of 32). In steady exchange nothing else is ever
        // discarded, so any new discard is the consumer's cache honouring the trim.
        let after_trim = pool.stats().discarded;
        send(64 * 64);
        let s = pool.stats();
        assert!(
            s.discarded > after_trim,
            "the consumer's cache released its buffers after trim(): {s}"
        );
    }
    drop(tx);
    consumer.join().unwrap();
}
