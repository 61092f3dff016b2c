//! Memory comes back: live bytes, counted by a global allocator across the whole process,
//! return to where they were.
//!
//! Alone in its test binary, as one test: the process-wide count also sees the test
//! harness's own allocations (a finished test's result and captured output), which in a binary
//! with other tests landed inside a measurement now and then.

use tierpool::BufferPool;

mod common;
use common::live_bytes;

#[global_allocator]
static GLOBAL: common::Counting = common::Counting;

/// How much the process's live heap grew while `f` ran (negative: it shrank).
fn growth(f: impl FnOnce()) -> isize {
    let before = live_bytes();
    f();
    live_bytes() - before
}

/// Runs `f` on a thread of its own, joined, so that its thread-local destructors (thread
/// caches) have run before the next scenario measures.
fn alone(f: impl FnOnce() + Send + 'static) {
    if let Err(panic) = std::thread::spawn(f).join() {
        std::panic::resume_unwind(panic);
    }
}

fn dropping_the_pool_gives_every_byte_back() {
    alone(|| {
        let grown = growth(|| {
            let pool = BufferPool::builder()
                .max_retained_bytes(8 << 20)
                .build()
                .unwrap();
            let mut held = Vec::new();
            for i in 0..if cfg!(miri) { 200 } else { 2000 } {
                held.push(pool.get(256 << (i % 10)));
            }
            // Hand some to other threads, which keep caches of their own and exit.
            let moved: Vec<_> = held.drain(..held.len() / 4).collect();
            let p2 = pool.clone();
            std::thread::spawn(move || {
                drop(moved);
                drop(p2.get(1000));
            })
            .join()
            .unwrap();
            let outstanding: Vec<_> = held.drain(..held.len() / 5).collect();
            drop(held);
            assert!(pool.stats().retained_bytes > 0);
            drop(pool);
            // Buffers still out after the pool is gone are freed when dropped.
            std::thread::spawn(move || drop(outstanding))
                .join()
                .unwrap();
        });
        // The pool registry keeps one slot per pool ever alive at once (a few bytes, reused).
        assert!(grown < 4096, "leaked {grown} bytes after dropping the pool");
    });
}

/// After `trim()`, the pool's own bookkeeping storage for the released buffers is freed too,
/// not only the buffers: a depot stack that grew while a burst came back is allocated above
/// the burst's buffers and, kept, stops glibc from returning any of them to the system (found
/// by the comparison report's burst workload: RSS stayed at the peak with 16 KiB retained).
fn trim_frees_the_stacks_as_well_as_the_buffers() {
    alone(|| {
        let pool = BufferPool::builder()
            .max_retained_bytes(64 << 20)
            .build()
            .unwrap();
        drop(pool.get(16 << 10)); // this thread's cache exists before the baseline
        pool.trim();
        let grown = growth(|| {
            let burst: Vec<_> = (0..if cfg!(miri) { 120 } else { 3000 })
                .map(|_| pool.get(16 << 10))
                .collect();
            drop(burst);
            assert!(pool.stats().depot_bytes > 0);
            pool.trim();
        });
        assert!(
            grown < 1024,
            "{grown} bytes still held after trim (the depot's stack storage?)"
        );
    });
}

/// A buffer that outlives its pool, dropped on a thread that still holds a cache for that
/// pool, is freed at once: the pool's close rang the cache's doorbell, so the return takes the
/// slow path, which finds the pool closed. (Before the doorbell, the fast path kept it, up to
/// the thread's budget, until the thread attached to another pool or exited.)
fn a_buffer_outliving_its_pool_is_freed_on_a_thread_that_still_has_a_cache() {
    alone(|| {
        let pool = BufferPool::builder().tiers([4096]).build().unwrap();
        drop(pool.get(4096)); // this thread now has a cache for the pool, with room in it
        let kept = pool.get(4096);
        // The last handle goes on another thread, so this thread's cache stays in its table.
        std::thread::spawn(move || drop(pool)).join().unwrap();
        let freed = -growth(|| drop(kept));
        assert!(
            freed >= 4096,
            "the buffer was kept by a closed pool's cache: {freed} bytes freed"
        );
    });
}

#[test]
fn memory_comes_back() {
    dropping_the_pool_gives_every_byte_back();
    trim_frees_the_stacks_as_well_as_the_buffers();
    a_buffer_outliving_its_pool_is_freed_on_a_thread_that_still_has_a_cache();
}
