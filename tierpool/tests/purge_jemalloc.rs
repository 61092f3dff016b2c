//! `TrimAllocator::Jemalloc` under jemalloc as the global allocator: after a burst the pool
//! has released, the process's RSS falls back (jemalloc alone keeps the pages for its
//! `dirty_decay_ms`, 10 s). Its own test binary: the global
//! allocator is per process; the check is `common::assert_the_allocator_gives_the_burst_back`.
#![cfg(all(feature = "jemalloc", target_os = "linux", not(miri)))]

mod common;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[test]
fn jemalloc_is_asked_to_purge_what_the_pool_released() {
    common::assert_the_allocator_gives_the_burst_back(
        tierpool::TrimAllocator::Jemalloc,
        "jemalloc",
    );
}
