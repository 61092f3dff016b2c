//! Random operation sequences on two pools, checked against a reference model of what must
//! hold whatever the caching does: no buffer smaller than asked, no buffer out twice at once,
//! contents kept while held, counters that add up, caps held, and every buffer back at the end.
//!
//! `cargo +nightly fuzz run pool_ops` (from `fuzz/`).

#![no_main]

use std::collections::HashSet;
use std::sync::mpsc;

use libfuzzer_sys::arbitrary::{self, Arbitrary};
use libfuzzer_sys::fuzz_target;
use tierpool::{BufferPool, PooledBuf, PooledBytes};

#[derive(Arbitrary, Debug)]
enum Op {
    Get {
        pool: bool,
        size: u32,
    },
    GetZeroed {
        pool: bool,
        size: u16,
    },
    TryGet {
        pool: bool,
        size: u64,
    },
    Drop {
        which: u16,
    },
    /// A foreign `Vec` of an arbitrary capacity.
    Put {
        pool: bool,
        cap: u32,
    },
    /// Grow a held buffer past its tier.
    Grow {
        which: u16,
        by: u16,
    },
    Freeze {
        which: u16,
    },
    CloneView {
        which: u16,
    },
    SliceView {
        which: u16,
        from: u16,
        to: u16,
    },
    DropView {
        which: u16,
    },
    Trim {
        pool: bool,
    },
    /// Send a held buffer to the helper thread, which drops it there.
    HandOff {
        which: u16,
    },
    IntoVec {
        which: u16,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    tiers: Vec<u16>,
    cap_kib: u16,
    ops: Vec<Op>,
}

struct Held {
    buf: PooledBuf,
    stamp: u8,
}

fn check_stats(pool: &BufferPool) {
    let s = pool.stats();
    assert_eq!(s.gets, s.hits + s.misses + s.oversize, "{s}");
    assert!(s.depot_bytes <= pool.max_retained_bytes(), "{s}");
}

fuzz_target!(|input: Input| {
    // Pool A: tiers from the input (invalid ones are a clean error, then the default).
    let a = BufferPool::builder()
        .tiers(input.tiers.iter().map(|&t| usize::from(t)))
        .max_retained_bytes(usize::from(input.cap_kib).max(1) << 10)
        .thread_cache_bytes(16 << 10)
        .build()
        .unwrap_or_else(|_| BufferPool::new());
    let b = BufferPool::builder()
        .power_of_two_tiers(64, 1 << 20)
        .max_retained_bytes(4 << 20)
        .build()
        .unwrap();
    let (tx, rx) = mpsc::channel::<Held>();
    let helper = std::thread::spawn(move || {
        for h in rx {
            assert!(
                h.buf.iter().all(|&x| x == h.stamp),
                "contents changed in transit"
            );
        }
    });
    let mut held: Vec<Held> = Vec::new();
    let mut views: Vec<(PooledBytes, u8)> = Vec::new();
    let mut stamp = 0u8;
    let mut addresses = HashSet::new();
    let pick = |i: u16, len: usize| usize::from(i) % len;
    for op in input.ops.into_iter().take(300) {
        match op {
            Op::Get { pool, size } => {
                let n = (size % (2 << 20)) as usize;
                let p = if pool { &a } else { &b };
                let mut buf = p.get(n);
                assert!(buf.capacity() >= n && buf.is_empty());
                stamp = stamp.wrapping_add(1);
                buf.resize(n.min(4096), stamp);
                held.push(Held { buf, stamp });
            }
            Op::GetZeroed { pool, size } => {
                let p = if pool { &a } else { &b };
                let buf = p.get_zeroed(usize::from(size));
                assert!(buf.len() == usize::from(size) && buf.iter().all(|&x| x == 0));
                held.push(Held { buf, stamp: 0 });
            }
            Op::TryGet { pool, size } => {
                let p = if pool { &a } else { &b };
                // Sizes above isize::MAX must be an error (never a panic or an allocation
                // attempt); moderate sizes must be served.
                let n = if size >= 1 << 63 {
                    size as usize
                } else {
                    (size % (8 << 20)) as usize
                };
                match p.try_get(n) {
                    Ok(buf) => {
                        assert!(n <= isize::MAX as usize && buf.capacity() >= n);
                        held.push(Held { buf, stamp: 0 });
                    }
                    Err(e) => assert!(n > isize::MAX as usize, "refused {n}: {e}"),
                }
            }
            Op::Drop { which } if !held.is_empty() => {
                let h = held.swap_remove(pick(which, held.len()));
                assert!(
                    h.buf.iter().all(|&x| x == h.stamp),
                    "contents changed while held"
                );
            }
            Op::Put { pool, cap } => {
                let p = if pool { &a } else { &b };
                p.put(Vec::with_capacity((cap % (4 << 20)) as usize));
            }
            Op::Grow { which, by } if !held.is_empty() => {
                let i = pick(which, held.len());
                let h = &mut held[i];
                let s = h.stamp;
                h.buf.extend(std::iter::repeat_n(s, usize::from(by)));
            }
            Op::Freeze { which } if !held.is_empty() => {
                let h = held.swap_remove(pick(which, held.len()));
                views.push((h.buf.into_shared(), h.stamp));
            }
            Op::CloneView { which } if !views.is_empty() => {
                let (v, s) = &views[pick(which, views.len())];
                views.push((v.clone(), *s));
            }
            Op::SliceView { which, from, to } if !views.is_empty() => {
                let (v, s) = &views[pick(which, views.len())];
                let (from, to) = (usize::from(from), usize::from(to));
                if from <= to && to <= v.len() {
                    views.push((v.slice(from..to), *s));
                }
            }
            Op::DropView { which } if !views.is_empty() => {
                let (v, s) = views.swap_remove(pick(which, views.len()));
                assert!(v.iter().all(|&x| x == s), "a shared view changed");
            }
            Op::Trim { pool } => {
                // The bytes released are checked by the unit tests; here only the invariants.
                let _released = if pool { a.trim() } else { b.trim() };
            }
            Op::HandOff { which } if !held.is_empty() => {
                let h = held.swap_remove(pick(which, held.len()));
                tx.send(h).unwrap();
            }
            Op::IntoVec { which } if !held.is_empty() => {
                let h = held.swap_remove(pick(which, held.len()));
                let v = h.buf.into_vec();
                assert!(v.iter().all(|&x| x == h.stamp));
            }
            _ => {}
        }
        // No buffer with capacity is out twice at once.
        addresses.clear();
        for h in &held {
            if h.buf.capacity() > 0 {
                assert!(
                    addresses.insert(h.buf.as_ptr() as usize),
                    "a buffer is out twice"
                );
            }
        }
        check_stats(&a);
        check_stats(&b);
    }
    drop(held);
    drop(views);
    drop(tx);
    helper.join().unwrap();
    for p in [&a, &b] {
        let s = p.stats();
        assert_eq!(s.gets, s.hits + s.misses + s.oversize, "{s}");
    }
});
