//! One thread: get a buffer, write its first and last byte, release it. tierpool against
//! `Vec::with_capacity` + drop under glibc, mimalloc and jemalloc, a crossbeam `ArrayQueue` pool
//! and a naive `thread_local!` free list, at 256 B, 4 KiB, 64 KiB and 1 MiB.
//!
//! `cargo bench -p tierpool --bench get_put`

mod common;

use std::hint::black_box;

use common::*;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};

fn bench_one<C: Contender>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    c: &C,
    n: usize,
) {
    // Warm: the first get of each size allocates.
    drop(c.get(n));
    group.bench_function(BenchmarkId::new(c.name(), n), |b| {
        b.iter(|| {
            let mut buf = c.get(black_box(n));
            buf.touch(n);
            black_box(&mut buf);
        })
    });
}

fn get_put(c: &mut Criterion) {
    let mut group = c.benchmark_group("get_put");
    let pool = Tierpool(tierpool::BufferPool::new());
    let queue = QueuePool::new(1024);
    for n in [256, 4096, 65536, 1 << 20] {
        bench_one(&mut group, &pool, n);
        bench_one(&mut group, &SystemVec, n);
        bench_one(&mut group, &mimalloc_vec(), n);
        bench_one(&mut group, &jemalloc_vec(), n);
        bench_one(&mut group, &queue, n);
        bench_one(&mut group, &TlsFreeList, n);
    }
    group.finish();
    assert_eq!(
        pool.0.stats().misses,
        4,
        "tierpool served every get but the first from its cache"
    );
}

criterion_group! {
    name = benches;
    config = common::config(30, 2);
    targets = get_put
}
criterion_main!(benches);
