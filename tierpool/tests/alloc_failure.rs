//! `try_get` and the frame reader under an allocator that fails on request: a clear error,
//! no panic, nothing lost, and the pool works again once the allocator does.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use tierpool::{AllocError, BufferPool};

thread_local! {
    /// Allocations of at least this many bytes fail on this thread.
    static FAIL_FROM: Cell<usize> = const { Cell::new(usize::MAX) };
}

struct Failing;

fn fails(size: usize) -> bool {
    FAIL_FROM.try_with(|f| size >= f.get()).unwrap_or(false)
}

// SAFETY: forwards to `System`, or reports failure with a null pointer, as `GlobalAlloc`
// allows.
unsafe impl GlobalAlloc for Failing {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if fails(l.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if fails(l.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if fails(new) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded.
        unsafe { System.realloc(p, l, new) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Failing = Failing;

fn failing_from<R>(bytes: usize, f: impl FnOnce() -> R) -> R {
    FAIL_FROM.with(|c| c.set(bytes));
    let r = f();
    FAIL_FROM.with(|c| c.set(usize::MAX));
    r
}

#[test]
fn try_get_reports_allocator_failure_and_the_pool_recovers() {
    let pool = BufferPool::new();
    let retained = pool.get(4096); // warms this thread's cache
    drop(retained);
    // A miss (64 KiB: nothing retained) needs the allocator, which now fails.
    let e = failing_from(32 << 10, || pool.try_get(64 << 10)).unwrap_err();
    assert!(
        matches!(e, AllocError::AllocFailed { requested, .. } if requested == 64 << 10),
        "{e:?}"
    );
    assert!(e.to_string().contains("allocator"), "{e}");
    // A hit needs no allocation: it succeeds even while the allocator fails.
    let hit = failing_from(32 << 10, || pool.try_get(4096)).expect("served from the cache");
    assert_eq!(hit.capacity(), 4096);
    drop(hit);
    // Zeroed gets fail the same way.
    assert!(failing_from(32 << 10, || pool.try_get(1 << 20)).is_err());
    // Afterwards everything works and the books balance.
    let b = pool.try_get(64 << 10).unwrap();
    drop(b);
    let s = pool.stats();
    assert_eq!(s.gets, s.returned, "{s}");
}

#[cfg(feature = "tokio")]
#[tokio::test(flavor = "current_thread")]
async fn the_frame_reader_reports_allocator_failure() {
    use tokio::io::AsyncWriteExt;
    let pool = BufferPool::new();
    let (mut a, b) = tokio::io::duplex(1 << 20);
    a.write_all(&[0, 0, 1, 0, 0]).await.unwrap(); // 64 KiB
    a.write_all(&[1; 65536]).await.unwrap();
    let mut r = tierpool::io::frame::FrameReader::new(b, pool.clone());
    FAIL_FROM.with(|c| c.set(32 << 10));
    let res = r.read_frame().await;
    FAIL_FROM.with(|c| c.set(usize::MAX));
    match res {
        Err(tierpool::io::frame::FrameError::Alloc(_)) => {}
        other => panic!("expected an allocation error, got {other:?}"),
    }
}
