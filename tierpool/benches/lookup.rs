//! Seed 000's micro-benchmark: every size from 0 to 2^19 looked up once for get and once for
//! return, with 5, 9, 20 and 40 tiers: tierpool's O(1) lookup against a binary search and a
//! linear scan over the same tiers. One iteration = 2^19 lookup pairs.
//!
//! `cargo bench -p tierpool --bench lookup`

mod common;

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tierpool::__bench::Lookup;

const SIZES: usize = 1 << 19;

fn tier_sets() -> Vec<(usize, Vec<usize>)> {
    // gRPC-Go's defaults.
    let grpc = vec![256, 4096, 16384, 32768, 1 << 20];
    // Powers of two 2 KiB ..= 512 KiB.
    let nine: Vec<usize> = (11..=19).map(|e| 1usize << e).collect();
    // Powers of two 1 B ..= 512 KiB.
    let twenty: Vec<usize> = (0..20).map(|e| 1usize << e).collect();
    // Two classes per doubling: 1, 2, 3, 4, 6, 8, 12, ... 3 * 2^19.
    let mut forty: Vec<usize> = (0..20).flat_map(|e| [1usize << e, 3usize << e]).collect();
    forty.sort_unstable();
    forty.dedup();
    forty.push(1 << 21);
    forty.truncate(40);
    vec![(5, grpc), (9, nine), (20, twenty), (40, forty)]
}

fn binary_get(sizes: &[usize], n: usize) -> Option<usize> {
    let i = sizes.partition_point(|&s| s < n);
    (i < sizes.len()).then_some(i)
}

fn binary_put(sizes: &[usize], cap: usize) -> Option<usize> {
    if cap > *sizes.last()? {
        return None;
    }
    sizes.partition_point(|&s| s <= cap).checked_sub(1)
}

fn linear_get(sizes: &[usize], n: usize) -> Option<usize> {
    sizes.iter().position(|&s| s >= n)
}

fn linear_put(sizes: &[usize], cap: usize) -> Option<usize> {
    if cap > *sizes.last()? {
        return None;
    }
    sizes.iter().rposition(|&s| s <= cap)
}

#[inline(always)]
fn sweep(get: impl Fn(usize) -> Option<usize>, put: impl Fn(usize) -> Option<usize>) -> usize {
    let mut acc = 0usize;
    for size in 0..SIZES {
        let size = black_box(size);
        acc = acc.wrapping_add(get(size).unwrap_or(99));
        acc = acc.wrapping_add(put(size).unwrap_or(99));
    }
    acc
}

fn lookup(c: &mut Criterion) {
    let mut group = c.benchmark_group("lookup");
    group.throughput(Throughput::Elements(SIZES as u64));
    for (count, sizes) in tier_sets() {
        assert_eq!(sizes.len(), count);
        let ours = Lookup::new(&sizes);
        // The three methods must agree before they are timed.
        for n in (0..SIZES).step_by(97).chain([0, 1, SIZES - 1]) {
            assert_eq!(ours.for_get(n), binary_get(&sizes, n));
            assert_eq!(ours.for_put(n), binary_put(&sizes, n));
            assert_eq!(ours.for_get(n), linear_get(&sizes, n));
            assert_eq!(ours.for_put(n), linear_put(&sizes, n));
        }
        group.bench_function(BenchmarkId::new("tierpool", count), |b| {
            b.iter(|| sweep(|n| ours.for_get(n), |n| ours.for_put(n)))
        });
        group.bench_function(BenchmarkId::new("binary_search", count), |b| {
            b.iter(|| sweep(|n| binary_get(&sizes, n), |n| binary_put(&sizes, n)))
        });
        group.bench_function(BenchmarkId::new("linear_scan", count), |b| {
            b.iter(|| sweep(|n| linear_get(&sizes, n), |n| linear_put(&sizes, n)))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::config(20, 2);
    targets = lookup
}
criterion_main!(benches);
