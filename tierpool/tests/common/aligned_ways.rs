//! Every way an aligned pool's buffer goes back, or leaves the pool's hands (shared by
//! `aligned_ways_back.rs`, which counts the live heap, and `aligned_layouts.rs`, which Miri
//! runs to check each free's layout).

#![allow(dead_code)]

use std::io::Write;

use tierpool::{AlignedBuf, AlignedPool, Builder};

/// Buffers of each kind of get per scenario (small under Miri, which checks every byte).
const ROUNDS: usize = if cfg!(miri) { 3 } else { 40 };

/// The pool's tiers at alignment `align`: two, so that the cap and the oversize path are
/// reached with small buffers.
fn pool(align: usize, budget: bool) -> AlignedPool {
    let small = align.max(512);
    let b = Builder::new()
        .tiers([small, 4 * small])
        .max_retained_bytes(6 * 4 * small);
    let b = if budget {
        // Room for everything a scenario holds at once (`ROUNDS` zeroed, `ROUNDS` large and
        // `ROUNDS` shared buffers, a burst of 8): a get never waits here.
        b.max_in_use_bytes((3 * ROUNDS + 16) * 4 * small)
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
    // One copy of the whole window (Miri checks its bounds at once, where it would interpret
    // `resize`'s loop byte by byte).
    b.clear();
    b.extend_from_slice(&vec![byte; cap]);
    assert!(all(b, byte));
}

/// Every way back, on a pool of alignment `align`, with or without a budget; returns views
/// of buffers of the pool, which it has dropped.
pub fn every_way_back(align: usize, budget: bool) -> Vec<tierpool::PooledBytes> {
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
        // A sole view is not made writable again (a `Vec` that could grow, and free the
        // buffer with alignment 1): it stays a view, and goes back when dropped.
        let mut w = pool.get(small);
        w.write_all(b"view").unwrap();
        let view = w.into_shared().try_into_mut().unwrap_err();
        assert_eq!(&view[..], b"view");
        drop(view);
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
    // The pool dropped with buffers and views out: they are freed when dropped, some on
    // another thread while this one's cache keeps the pool's state alive, the rest by the
    // caller once this thread is gone, with the pool's state (the buffer's key then says
    // the alignment).
    let held: Vec<_> = (0..ROUNDS).map(|_| pool.get(large)).collect();
    let views: Vec<_> = (0..ROUNDS)
        .map(|i| {
            let mut b = pool.get(small + i);
            fill(&mut b, align, 6);
            b.into_shared()
        })
        .collect();
    let s = pool.stats();
    assert_eq!(s.gets, s.hits + s.misses + s.oversize, "{s}");
    drop(pool);
    std::thread::spawn(move || drop((held, out)))
        .join()
        .unwrap();
    views
}

/// [`every_way_back`] on a thread of its own; then the views it left are dropped here, after
/// that thread and its cache are gone, and the pool with them.
pub fn every_way_back_and_after(align: usize, budget: bool) {
    let views = std::thread::spawn(move || every_way_back(align, budget))
        .join()
        .unwrap();
    drop(views);
}

/// The alignments and budget settings every test of the ways runs (fewer under Miri, which
/// interprets every byte written): `f(align, budget)` for each.
pub fn each_case(mut f: impl FnMut(usize, bool)) {
    let aligns: &[usize] = if cfg!(miri) {
        &[32, 4096]
    } else {
        &[16, 512, 4096, 65536]
    };
    for &align in aligns {
        for budget in [false, true] {
            f(align, budget);
        }
    }
}
