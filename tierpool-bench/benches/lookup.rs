//! Criterion micro-benchmark of the tier lookup (the report's `lookup` workload): every size
//! 0..2^19 looked up for get and for return, with 5, 9, 20 and 40 tiers; tierpool against a
//! binary search and a linear scan. One iteration = 2^19 lookup pairs.
//!
//! `cargo bench -p tierpool-bench --bench lookup`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use tierpool::__bench::Lookup;
use tierpool_bench::workloads::lookup::*;

fn lookup(c: &mut Criterion) {
    let mut group = c.benchmark_group("lookup");
    group.throughput(Throughput::Elements(SIZES as u64));
    for sizes in tier_sets() {
        let ours = Lookup::new(&sizes);
        let count = sizes.len();
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
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(2));
    targets = lookup
}
criterion_main!(benches);
