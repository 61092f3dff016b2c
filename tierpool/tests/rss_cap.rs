//! The pages of buffers the pool refuses at its cap leave the process at once, whichever
//! thread allocated them and whatever the allocator keeps: the process's resident set
//! (`/proc/self/statm`) right after the returns, with no `trim()` and no decay.
//!
//! Alone in its test binary, as one test: the resident set, and glibc's thresholds, are the
//! whole process's.
#![cfg(all(target_os = "linux", not(miri)))]

use std::time::Duration;

use tierpool::BufferPool;

mod common;
use common::{fill_return_and_idle, rss_bytes};

/// What the pool may retain: two of the 8 MiB buffers.
const CAP: usize = 16 << 20;

/// Eight threads each take and fill two 8 MiB and two 1 MiB buffers, and once all hold
/// theirs, return them to a pool whose cap keeps few of them, and go idle. The returns the
/// cap refuses are freed by the thread that returns them, into its own arena.
///
/// First a 12 MiB `Vec` is allocated and freed, as any program may do: glibc then raises its
/// mmap threshold to 12 MiB (and its trim threshold to 24 MiB), so the threads' buffers come
/// from their arenas instead of their own mappings, and their arenas' tops, each holding its
/// thread's 18 MiB once freed, stay below the trim threshold: freed alone, every refused
/// buffer stays resident (the `idle-threads` workload: 16 threads, nothing retained, the
/// process 73-153 MiB above its start two intervals later). The pool gives their whole pages
/// back before freeing them.
#[test]
fn buffers_refused_at_the_cap_leave_the_process() {
    const THREADS: usize = 8;
    let raise = std::hint::black_box(vec![1u8; 12 << 20]);
    drop(raise);
    // No thread caches: every return goes to the depot, whatever the caches' room would be
    // (their own, beyond the cap, where idle caches cannot be reclaimed:
    // `TIERPOOL_NO_MEMBARRIER`), and no decay tick during the test frees room in between.
    let pool = BufferPool::builder()
        .max_retained_bytes(CAP)
        .thread_cache_bytes(0)
        .decay_interval(Duration::from_secs(3600))
        .build()
        .unwrap();
    let baseline = rss_bytes().expect("/proc/self/statm is readable on Linux");
    let threads = fill_return_and_idle(&pool, THREADS, &[1 << 20, 8 << 20], true);
    let stats = pool.stats();
    let after = rss_bytes().unwrap().saturating_sub(baseline);
    threads.finish();
    assert!(stats.retained_bytes <= CAP, "{stats:?}");
    assert!(
        stats.released_at_cap >= (THREADS * (18 << 20) - CAP) as u64,
        "the cap refused the rest: {stats:?}"
    );
    // What the pool retains is resident; what it refused must not be (a few MiB of slack
    // for the threads' stacks and the allocator's own pages).
    assert!(
        after < stats.retained_bytes + (8 << 20),
        "{} MiB resident after the returns, {} MiB of them retained, {} MiB refused at the cap",
        after >> 20,
        stats.retained_bytes >> 20,
        stats.released_at_cap >> 20
    );
}
