//! `AlignedBuf` against a model: a `Vec<u8>` that may not grow past the capacity the buffer
//! came with. Random sequences of appends, writes, resizes, truncations, raw fills through the
//! spare capacity, and shared views; after every step the buffer holds what the model holds,
//! stays aligned and keeps its capacity, and at the end every buffer went back exactly once.

use std::io::Write;

use proptest::prelude::*;
use tierpool::{AlignedBuf, AlignedPool, Builder};

#[derive(Debug, Clone)]
enum Op {
    Get(usize),
    GetZeroed(usize),
    TryGet(usize),
    Extend(usize, Vec<u8>),
    Write(usize, Vec<u8>),
    Resize(usize, usize, u8),
    Truncate(usize, usize),
    Clear(usize),
    /// Fill `n` bytes of the spare capacity with a byte, then `set_len`.
    Fill(usize, usize, u8),
    /// Overwrite a byte through `DerefMut`.
    Poke(usize, usize, u8),
    /// Into shared views, check a slice of them, and drop them.
    Share(usize, usize),
    Drop(usize),
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..700)
}

fn size() -> impl Strategy<Value = usize> {
    prop_oneof![
        0..5000usize,
        Just(0usize),
        Just(512usize),
        Just(4096usize),
        Just(4097usize)
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let i = any::<usize>();
    prop_oneof![
        3 => size().prop_map(Op::Get),
        1 => size().prop_map(Op::GetZeroed),
        1 => size().prop_map(Op::TryGet),
        3 => (i, bytes()).prop_map(|(i, b)| Op::Extend(i, b)),
        2 => (i, bytes()).prop_map(|(i, b)| Op::Write(i, b)),
        1 => (i, 0..5000usize, any::<u8>()).prop_map(|(i, n, v)| Op::Resize(i, n, v)),
        1 => (i, 0..5000usize).prop_map(|(i, n)| Op::Truncate(i, n)),
        1 => i.prop_map(Op::Clear),
        1 => (i, 0..5000usize, any::<u8>()).prop_map(|(i, n, v)| Op::Fill(i, n, v)),
        1 => (i, any::<usize>(), any::<u8>()).prop_map(|(i, k, v)| Op::Poke(i, k, v)),
        1 => (i, any::<usize>()).prop_map(|(i, k)| Op::Share(i, k)),
        2 => i.prop_map(Op::Drop),
    ]
}

/// A live buffer and its model: the bytes it must hold, and the capacity it came with.
struct Live {
    buf: AlignedBuf,
    model: Vec<u8>,
    cap: usize,
}

fn check(l: &Live, align: usize) {
    assert_eq!(&l.buf[..], &l.model[..]);
    assert_eq!(l.buf.len(), l.model.len());
    assert_eq!(
        l.buf.capacity(),
        l.cap,
        "the capacity it came with, exactly"
    );
    assert_eq!(l.buf.as_ptr() as usize % align, 0);
}

fn run(align: usize, ops: Vec<Op>) {
    let pool: AlignedPool = Builder::new()
        .tiers([align, 2 * align, 4096.max(align)])
        .max_retained_bytes(1 << 20)
        .build_aligned(align)
        .unwrap();
    let mut live: Vec<Live> = Vec::new();
    let (mut gets, mut shared_drops) = (0u64, 0u64);
    for op in ops {
        let pick = |i: usize, n: usize| if n == 0 { None } else { Some(i % n) };
        match op {
            Op::Get(n) | Op::GetZeroed(n) | Op::TryGet(n) => {
                let (buf, model) = match op {
                    Op::Get(_) => (pool.get(n), Vec::new()),
                    Op::GetZeroed(_) => (pool.get_zeroed(n), vec![0; n]),
                    _ => (pool.try_get(n).expect("no budget"), Vec::new()),
                };
                gets += 1;
                // The smallest tier that fits, or above the largest `n` rounded up.
                let cap = pool
                    .tier_sizes()
                    .iter()
                    .copied()
                    .find(|&t| t >= n)
                    .unwrap_or_else(|| n.next_multiple_of(align));
                assert_eq!(buf.capacity(), cap, "get of {n} at alignment {align}");
                live.push(Live { buf, model, cap });
            }
            Op::Extend(i, b) => {
                let Some(i) = pick(i, live.len()) else {
                    continue;
                };
                let l = &mut live[i];
                if b.len() <= l.cap - l.model.len() {
                    l.buf.extend_from_slice(&b);
                    l.model.extend_from_slice(&b);
                } else {
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        l.buf.extend_from_slice(&b)
                    }));
                    assert!(r.is_err(), "an append past the capacity panics");
                }
            }
            Op::Write(i, b) => {
                let Some(i) = pick(i, live.len()) else {
                    continue;
                };
                let l = &mut live[i];
                let fits = b.len().min(l.cap - l.model.len());
                assert_eq!(l.buf.write(&b).unwrap(), fits);
                l.model.extend_from_slice(&b[..fits]);
            }
            Op::Resize(i, n, v) => {
                let Some(i) = pick(i, live.len()) else {
                    continue;
                };
                let l = &mut live[i];
                let n = n.min(l.cap);
                l.buf.resize(n, v);
                l.model.resize(n, v);
            }
            Op::Truncate(i, n) => {
                let Some(i) = pick(i, live.len()) else {
                    continue;
                };
                live[i].buf.truncate(n);
                live[i].model.truncate(n);
            }
            Op::Clear(i) => {
                let Some(i) = pick(i, live.len()) else {
                    continue;
                };
                live[i].buf.clear();
                live[i].model.clear();
            }
            Op::Fill(i, n, v) => {
                let Some(i) = pick(i, live.len()) else {
                    continue;
                };
                let l = &mut live[i];
                let spare = l.buf.spare_capacity_mut();
                assert_eq!(spare.len(), l.cap - l.model.len());
                let n = n.min(spare.len());
                for b in &mut spare[..n] {
                    b.write(v);
                }
                let len = l.model.len() + n;
                // SAFETY: the `n` bytes after the old length were just written.
                unsafe { l.buf.set_len(len) };
                l.model.resize(len, v);
            }
            Op::Poke(i, k, v) => {
                let Some(i) = pick(i, live.len()) else {
                    continue;
                };
                let l = &mut live[i];
                let Some(k) = pick(k, l.model.len()) else {
                    continue;
                };
                l.buf[k] = v;
                l.model[k] = v;
            }
            Op::Share(i, k) => {
                let Some(i) = pick(i, live.len()) else {
                    continue;
                };
                let l = live.swap_remove(i);
                let start = l.buf.as_ptr();
                let all = l.buf.into_shared();
                assert_eq!(all.as_ptr(), start, "the view starts where the buffer did");
                assert_eq!(&all[..], &l.model[..]);
                let k = if l.model.is_empty() {
                    0
                } else {
                    k % (l.model.len() + 1)
                };
                let tail = all.slice(k..);
                assert_eq!(&tail[..], &l.model[k..]);
                drop(all);
                drop(tail);
                shared_drops += 1;
            }
            Op::Drop(i) => {
                let Some(i) = pick(i, live.len()) else {
                    continue;
                };
                drop(live.swap_remove(i));
            }
        }
        for l in &live {
            check(l, align);
        }
        let s = pool.stats();
        assert_eq!(s.gets, gets);
        assert_eq!(s.gets - s.returned, live.len() as u64, "{s}");
    }
    drop(live);
    let s = pool.stats();
    assert_eq!(
        s.gets, s.returned,
        "every buffer back once ({shared_drops} via views): {s}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig {
        // Under Miri two short sequences: what it checks there is the aligned path's memory
        // accesses, which every case takes (`aligned_layouts.rs` takes every way back).
        cases: if cfg!(miri) { 2 } else { 128 },
        // No regression file: Miri's isolation has no file system (as in tests/pool/pool_model.rs).
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn aligned_buf_behaves_like_a_vec_that_cannot_grow(
        align in prop_oneof![Just(1usize), Just(512usize), Just(4096usize)],
        ops in prop::collection::vec(op(), 1..if cfg!(miri) { 12 } else { 200 }),
    ) {
        run(align, ops);
    }
}
