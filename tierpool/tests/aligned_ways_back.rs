//! Every way an aligned pool's buffer goes back, or leaves the pool's hands, frees exactly
//! what was allocated: live bytes, counted by a global allocator across the whole process,
//! return to where they were once the pool and its buffers are gone.
//!
//! The ways: a thread's cache; the depot; a return the cap refuses; a buffer above the largest
//! tier; `trim`; a thread that exits with its cache full; shared views dropped on another
//! thread; a sole view, which is never made writable again (`try_into_mut` refuses it: a
//! `PooledBuf` could grow); `get_zeroed`; a pool with a budget; the pool dropped while
//! buffers and views are out, those dropped after it on another thread.
//!
//! The ways are `common/aligned_ways.rs`, which `aligned_layouts.rs` runs under Miri without a
//! counting allocator: Miri checks the layout of each free only in its own allocator, and a
//! program's `#[global_allocator]` (this one) replaces it. This one runs natively, under
//! LeakSanitizer and on aarch64 (`.ci/run`). Alone in its test binary, as one test (see `leak.rs`: the process-wide count
//! also sees the test harness's own allocations).

mod common;
use common::live_bytes;

#[path = "common/aligned_ways.rs"]
mod aligned_ways;
use aligned_ways::every_way_back_and_after;

#[global_allocator]
static GLOBAL: common::Counting = common::Counting;

/// How much the process's live heap grew while `f` ran on a thread of its own, joined (so
/// that its thread caches are gone before the count is read).
fn growth(f: impl FnOnce() + Send + 'static) -> isize {
    let before = live_bytes();
    if let Err(panic) = std::thread::spawn(f).join() {
        std::panic::resume_unwind(panic);
    }
    live_bytes() - before
}

#[test]
fn every_way_back_frees_what_was_allocated() {
    // The pool registry's slot and the shared views' recycled control blocks (a thread's
    // blocks go to a process-wide stack when it exits) stay: a warm-up makes them first.
    let _ = growth(|| every_way_back_and_after(4096, false));
    aligned_ways::each_case(|align, budget| {
        let grown = growth(move || every_way_back_and_after(align, budget));
        assert!(
            grown.abs() < 4096,
            "alignment {align}, budget {budget}: the live heap moved by {grown} bytes"
        );
    });
}
