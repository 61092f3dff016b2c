//! The background trimmer's thread exits with its pool. It counts the process's threads named
//! `tierpool-trim`, so it runs in a process of its own: any other test that starts a trimmer
//! would change the count.

use std::thread;
use std::time::{Duration, Instant};

use tierpool::BufferPool;

/// Threads of this process named `tierpool-trim` (Linux), or `None` elsewhere. (Under Wine a
/// Windows build could read the host's /proc, which does not carry Windows thread names.)
fn trimmer_threads() -> Option<usize> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let tasks = std::fs::read_dir("/proc/self/task").ok()?;
    Some(
        tasks
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .filter(|name| name.trim() == "tierpool-trim")
            .count(),
    )
}

#[test]
fn the_trimmer_thread_exits_with_its_pool() {
    // A trimmer of an earlier test may still be on its way out: count from none.
    let deadline = Instant::now() + Duration::from_secs(10);
    while trimmer_threads().is_some_and(|n| n > 0) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    let before = trimmer_threads();
    let pool = BufferPool::builder()
        .decay_interval(Duration::from_secs(3600))
        .background_trim(true)
        .build()
        .unwrap();
    drop(pool.get(10));
    if let Some(before) = before {
        // The thread names itself once it runs.
        let deadline = Instant::now() + Duration::from_secs(10);
        while trimmer_threads() != Some(before + 1) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(trimmer_threads(), Some(before + 1));
    }
    drop(pool); // unparks the trimmer, which sees the pool closed and exits at once
    if let Some(before) = before {
        let deadline = Instant::now() + Duration::from_secs(10);
        while trimmer_threads() != Some(before) && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(trimmer_threads(), Some(before), "the trimmer did not exit");
    }
    let p = BufferPool::new();
    drop(p.get(10));
    assert_eq!(p.stats().returned, 1);
}
