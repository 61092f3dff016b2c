//! One thread gets buffers, writes their first and last byte and sends them over a bounded
//! channel; another thread drops them (seed 003's receive-buffer pattern). Time per buffer,
//! at 4 KiB and 64 KiB. The channel is a spinning bounded queue (a crossbeam `ArrayQueue` of
//! 64 slots, both sides busy-wait), so neither thread sleeps and the figures show the cost of
//! the buffers, not of futex wake-ups; the queue's own cost is part of every figure.
//!
//! `cargo bench -p tierpool --bench cross_thread`

mod common;

use common::*;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

fn bench_one<C: Contender>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    c: &C,
    n: usize,
) {
    group.bench_function(BenchmarkId::new(c.name(), n), |b| {
        b.iter_custom(|iters| hand_off(c, n, iters))
    });
}

fn cross_thread(c: &mut Criterion) {
    let mut group = c.benchmark_group("cross_thread");
    let pool = Tierpool(tierpool::BufferPool::new());
    let queue = QueuePool::new(1024);
    for n in [4096, 65536] {
        bench_one(&mut group, &pool, n);
        bench_one(&mut group, &SystemVec, n);
        bench_one(&mut group, &mimalloc_vec(), n);
        bench_one(&mut group, &jemalloc_vec(), n);
        bench_one(&mut group, &queue, n);
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = common::config(20, 3);
    targets = cross_thread
}
criterion_main!(benches);
