//! The pages of buffers the pool lets go of leave the process, whichever thread allocated
//! them and whatever the allocator keeps: the process's resident set (`/proc/self/statm`)
//! after `trim()`.
//!
//! Alone in its test binary, as one test: the resident set is the whole process's.
#![cfg(all(target_os = "linux", not(miri)))]

use tierpool::BufferPool;

mod common;
use common::{fill_return_and_idle, reclaim_available, rss_bytes};

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
    let threads = fill_return_and_idle(&pool, THREADS, &[64 << 10, 1 << 20, 8 << 20], idle);
    let held = rss_bytes().unwrap().saturating_sub(baseline);
    assert!(
        held >= THREADS * (16 << 20),
        "the buffers are resident: {held} bytes"
    );
    // Where idle caches cannot be reclaimed, the threads exit first (their caches go to the
    // depot); elsewhere they stay idle, holding their caches, until the measurement is over.
    let threads = if idle {
        Some(threads)
    } else {
        threads.finish();
        None
    };
    pool.trim();
    assert_eq!(pool.stats().retained_bytes, 0);
    let after = rss_bytes().unwrap().saturating_sub(baseline);
    if let Some(threads) = threads {
        threads.finish();
    }
    assert!(
        after < 16 << 20,
        "{} MiB still resident after trim() (of {} MiB held)",
        after >> 20,
        held >> 20
    );
}
