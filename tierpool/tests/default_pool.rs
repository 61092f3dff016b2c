//! The default pool gives memory back without a knob: a program that uses only
//! `default_pool()` and goes quiet sees its buffers released within a few decay intervals.
//! (A test binary of its own: the default pool is process-wide.)

use std::time::{Duration, Instant};

#[test]
fn a_quiet_program_gets_the_default_pools_memory_back() {
    let pool = tierpool::default_pool();
    // Buffers kept by this thread's cache and another thread's, then nobody touches the pool.
    let kept: Vec<_> = (0..64).map(|_| pool.get(64 << 10)).collect();
    drop(kept);
    std::thread::spawn(|| {
        let other: Vec<_> = (0..32)
            .map(|_| tierpool::default_pool().get(16 << 10))
            .collect();
        drop(other);
    })
    .join()
    .unwrap();
    let retained = pool.stats().retained_bytes;
    assert!(retained >= 64 * (64 << 10), "kept: {retained}");
    // The default decay interval is 1 s: released within about two, allow five. Where
    // caches cannot be reclaimed from other threads (no membarrier), this thread's own cache
    // waits for its next operation: only the depot (the exited thread's buffers) comes back.
    let mine = if tierpool::__bench::reclaims_other_threads() {
        0
    } else {
        64 * (64 << 10)
    };
    let start = Instant::now();
    while pool.stats().retained_bytes > mine {
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "still retained after 5 s: {}",
            pool.stats()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
