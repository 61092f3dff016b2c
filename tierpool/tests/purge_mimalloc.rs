//! `TrimAllocator::Mimalloc` under mimalloc as the global allocator: after a burst the pool
//! has released, the process's RSS falls back (mimalloc alone keeps it until the thread that
//! owns the pages allocates again). Its own test binary: the global allocator is per process.
#![cfg(all(feature = "mimalloc", target_os = "linux", not(miri)))]

use tierpool::TrimAllocator;

mod common;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const MIB: isize = 1 << 20;

#[test]
fn mimalloc_is_asked_to_collect_what_the_pool_released() {
    let base = common::rss_bytes().unwrap();
    // Not asked: mimalloc keeps the burst's pages (the control: without it the test below
    // could pass for another reason).
    let kept = common::burst_then_trim(TrimAllocator::Off, 128 << 20, base);
    assert!(kept > 96 * MIB, "mimalloc kept only {} MiB", kept / MIB);
    // Asked: the same burst (it reuses those pages), then the collection gives them all back.
    let left = common::burst_then_trim(TrimAllocator::Mimalloc, 128 << 20, base);
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
