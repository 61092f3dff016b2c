//! `TrimAllocator::Mimalloc` under mimalloc as the global allocator: after a burst the pool
//! has released, the process's RSS falls back (mimalloc alone keeps them until the thread
//! that owns the pages allocates again). Its own test binary: the global
//! allocator is per process; the check is `common::assert_the_allocator_gives_the_burst_back`.
#![cfg(all(feature = "mimalloc", target_os = "linux", not(miri)))]

mod common;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[test]
fn mimalloc_is_asked_to_collect_what_the_pool_released() {
    common::assert_the_allocator_gives_the_burst_back(
        tierpool::TrimAllocator::Mimalloc,
        "mimalloc",
    );
}
