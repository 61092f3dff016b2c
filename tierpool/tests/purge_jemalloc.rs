//! `TrimAllocator::Jemalloc` under jemalloc as the global allocator: after a burst the pool
//! has released, the process's RSS falls back (jemalloc alone keeps the pages for its
//! `dirty_decay_ms`, 10 s). Its own test binary: the global allocator is per process.
#![cfg(all(feature = "jemalloc", target_os = "linux", not(miri)))]

use tierpool::TrimAllocator;

mod common;

#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

const MIB: isize = 1 << 20;

#[test]
fn jemalloc_is_asked_to_purge_what_the_pool_released() {
    let base = common::rss_bytes().unwrap();
    // Not asked: jemalloc keeps the burst's pages (the control: without it the test below
    // could pass for another reason).
    let kept = common::burst_then_trim(TrimAllocator::Off, 128 << 20, base);
    assert!(kept > 96 * MIB, "jemalloc kept only {} MiB", kept / MIB);
    // Asked: the same burst (it reuses those pages), then the purge gives them all back.
    let left = common::burst_then_trim(TrimAllocator::Jemalloc, 128 << 20, base);
    eprintln!(
        "above the start: {} MiB not asked, {} MiB asked",
        kept / MIB,
        left / MIB
    );
    assert!(
        left < 16 * MIB,
        "{} MiB above the start after the purge (kept {} MiB without)",
        left / MIB,
        kept / MIB
    );
}
