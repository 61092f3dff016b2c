//! Every way an aligned pool's buffer goes back (`common/aligned_ways.rs`) frees it with the
//! layout it was allocated with: size and alignment.
//!
//! An aligned pool allocates its buffers with its alignment and moves them through the
//! machinery as `Vec<u8>`s, which must never free them themselves (`Vec<u8>` frees with
//! alignment 1; `sys/alloc.rs`). A free with the wrong layout is undefined behaviour that the
//! common allocators do not notice, so the check is Miri's (`.ci/run`): its allocator compares
//! each free's layout with the allocation's. That is why this file has no
//! `#[global_allocator]` (a program's own allocator replaces Miri's, and with it the check:
//! `aligned_ways_back.rs` counts bytes with one). Natively, it runs the same ways as a smoke
//! test.

#[path = "common/aligned_ways.rs"]
mod aligned_ways;

#[test]
fn every_way_back_frees_with_the_layout_it_allocated() {
    aligned_ways::each_case(aligned_ways::every_way_back_and_after);
}
