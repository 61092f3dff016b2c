//! Every way an aligned pool's buffer goes back, or leaves the pool's hands, frees exactly
//! what was allocated: live bytes, counted by a global allocator across the whole process,
//! return to where they were once the pool and its buffers are gone.
//!
//! The ways: a thread's cache; the depot; a return the cap refuses; a buffer above the largest
//! tier; `trim`; a thread that exits with its cache full; shared views dropped on another
//! thread; a sole view made writable again, grown and dropped (a buffer of another capacity
//! than its tier's); `get_zeroed`; a pool with a budget; the pool dropped while buffers are
//! out, those dropped after it on another thread.
//!
//! Run under Miri too (`.ci/run`), whose allocator checks that every buffer is freed with the
//! size and alignment it was allocated with: so any change to how aligned buffers are stored
//! (an aligned allocation instead of a window into one of alignment 1) is checked on each of
//! these paths. Alone in its test binary, as one test (see `leak.rs`: the process-wide count
//! also sees the test harness's own allocations).

use std::io::Write;

use tierpool::{AlignedBuf, AlignedPool, Builder};

mod common;
use common::live_bytes;

#[global_allocator]
static GLOBAL: common::Counting = common::Counting;

/// Buffers of each kind of get per scenario (small under Miri, which checks every byte).
const ROUNDS: usize = if cfg!(miri) { 3 } else { 40 };

/// The pool's tiers at alignment `align`: two, so that the cap and the oversize path are
/// reached with small buffers.
fn pool(align: usize, budget: bool) -> AlignedPool {
    let small = align.max(512);
    let b = Builder::new()
        .tiers([small, 4 * small])
        .max_retained_bytes(6 * (4 * small + align));
    let b = if budget {
        // Room for everything a scenario holds at once (`ROUNDS` zeroed and `ROUNDS` large
        // buffers, a burst of 8): a get never waits here.
        b.max_in_use_bytes((2 * ROUNDS + 16) * (4 * small + align))
    } else {
        b
    };
    b.build_aligned(align).unwrap()
}

/// True if every byte of `b` is `byte` (under Miri, whose loops over bytes are slow, the
/// first and the last: the window's bounds are what it checks).
fn all(b: &[u8], byte: u8) -> bool {
    if cfg!(miri) {
        b.first().is_none_or(|&x| x == byte) && b.last().is_none_or(|&x| x == byte)
    } else {
        b.iter().all(|&x| x == byte)
    }
}

/// Checks a buffer's window and writes all of it.
fn fill(b: &mut AlignedBuf, align: usize, byte: u8) {
    assert_eq!(b.as_ptr() as usize % align, 0);
    assert_eq!(b.capacity() % align, 0);
    let cap = b.capacity();
    b.resize(cap, byte);
    assert!(all(b, byte));
}

/// Every way back, on a pool of alignment `align`, with or without a budget.
fn every_way_back(align: usize, budget: bool) {
    let pool = pool(align, budget);
    let (small, large) = (pool.tier_sizes()[0], pool.tier_sizes()[1]);
    let mut out = Vec::new();
    for i in 0..ROUNDS {
        // A thread's cache and the depot: taken and returned at once, and many at a time
        // (more than the cap keeps: the rest is refused and freed).
        let mut b = pool.get(1 + i % small);
        fill(&mut b, align, 1);
        drop(b);
        let mut burst: Vec<_> = (0..8).map(|_| pool.get(large)).collect();
        burst.iter_mut().for_each(|b| fill(b, align, 2));
        drop(burst);
        // Above the largest tier: from the heap, rounded up to the alignment, freed on return.
        let mut big = pool.get(large + 1 + i);
        assert_eq!(big.capacity(), (large + 1 + i).next_multiple_of(align));
        fill(&mut big, align, 3);
        drop(big);
        // Zeroed.
        let z = pool.get_zeroed(small + i);
        assert!(all(&z, 0) && z.len() == small + i);
        out.push(z);
        // Shared views, the last dropped on another thread.
        let mut s = pool.get(small);
        s.write_all(&[4; 100]).unwrap();
        let view = s.into_shared();
        let tail = view.slice(50..);
        drop(view);
        std::thread::spawn(move || assert_eq!(&tail[..], &[4; 50][..]))
            .join()
            .unwrap();
        // A sole view made writable again: a plain handle of the pool behind, grown past its
        // tier, then dropped: it comes back with another capacity than its tier's.
        let mut w = pool.get(small);
        w.write_all(b"grow").unwrap();
        let mut plain = w.into_shared().try_into_mut().unwrap();
        plain.reserve(3 * large);
        plain.extend_from_slice(&[5; 10]);
        drop(plain);
    }
    // A thread that exits with buffers in its cache.
    let p = pool.clone();
    std::thread::spawn(move || {
        for _ in 0..ROUNDS {
            drop(p.get(small));
        }
    })
    .join()
    .unwrap();
    // What is retained, released on demand.
    pool.trim();
    // The pool dropped with buffers out: they are freed when dropped, here on another thread.
    let held: Vec<_> = (0..ROUNDS).map(|_| pool.get(large)).collect();
    let s = pool.stats();
    assert_eq!(s.gets, s.hits + s.misses + s.oversize, "{s}");
    drop(pool);
    std::thread::spawn(move || drop((held, out)))
        .join()
        .unwrap();
}

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
    let _ = growth(|| every_way_back(4096, false));
    let aligns: &[usize] = if cfg!(miri) {
        &[512, 4096]
    } else {
        &[16, 512, 4096, 65536]
    };
    for &align in aligns {
        for budget in [false, true] {
            let grown = growth(move || every_way_back(align, budget));
            assert!(
                grown.abs() < 4096,
                "alignment {align}, budget {budget}: the live heap moved by {grown} bytes"
            );
        }
    }
}
