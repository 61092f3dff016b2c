//! The pages of buffers the pool lets go of leave the process, whichever thread allocated
//! them and whatever the allocator keeps: the process's resident set (`/proc/self/statm`)
//! after `trim()`.
//!
//! Alone in its test binary, as one test: the resident set is the whole process's.
#![cfg(all(target_os = "linux", not(miri)))]

use std::sync::{Arc, Barrier};

use tierpool::BufferPool;

mod common;
use common::{reclaim_available, rss_bytes};

/// Eight threads each take and fill two 8 MiB buffers and a few smaller ones, and once all
/// hold theirs, return them into a pool large enough to keep them all, and go idle. `trim()` then releases every buffer from
/// this thread (where idle caches cannot be reclaimed, the threads exit first and their
/// caches go to the pool's depot). Freed alone, glibc keeps them: each lies in the arena of
/// the thread that allocated it, merged into that arena's top, which `malloc_trim` does not
/// release for other threads' arenas and glibc trims only beyond its raised trim threshold
/// (the process stayed 33 MiB and more above its start). The pool gives their whole pages
/// back first.
#[test]
fn released_buffers_leave_the_process_from_idle_threads_arenas() {
    const THREADS: usize = 8;
    let idle = reclaim_available();
    let pool = BufferPool::builder()
        .max_retained_bytes(1 << 30)
        .build()
        .unwrap();
    let baseline = rss_bytes().expect("/proc/self/statm is readable on Linux");
    let got = Arc::new(Barrier::new(THREADS));
    let ready = Arc::new(Barrier::new(THREADS + 1));
    let done = Arc::new(Barrier::new(THREADS + 1));
    let mut threads: Vec<_> = (0..THREADS)
        .map(|i| {
            let (pool, got, ready, done) = (pool.clone(), got.clone(), ready.clone(), done.clone());
            std::thread::spawn(move || {
                let mut held = Vec::new();
                for n in [64 << 10, 1 << 20, 8 << 20] {
                    for _ in 0..2 {
                        let mut b = pool.get(n);
                        let cap = b.capacity();
                        b.resize(cap, i as u8);
                        held.push(b);
                    }
                }
                // Every thread's buffers are distinct: none was returned (and taken by
                // another thread) before all were handed out.
                got.wait();
                drop(held);
                ready.wait();
                if idle {
                    done.wait(); // idle, holding its cache, until the measurement is over
                }
            })
        })
        .collect();
    ready.wait();
    let held = rss_bytes().unwrap().saturating_sub(baseline);
    assert!(
        held >= THREADS * (16 << 20),
        "the buffers are resident: {held} bytes"
    );
    if !idle {
        threads.drain(..).for_each(|t| t.join().unwrap());
    }
    pool.trim();
    assert_eq!(pool.stats().retained_bytes, 0);
    let after = rss_bytes().unwrap().saturating_sub(baseline);
    if idle {
        done.wait();
        threads.drain(..).for_each(|t| t.join().unwrap());
    }
    assert!(
        after < 16 << 20,
        "{} MiB still resident after trim() (of {} MiB held)",
        after >> 20,
        held >> 20
    );
}
