//! Criterion micro-benchmark: one thread gets a buffer, writes its first and last byte and
//! releases it, at 256 B, 4 KiB, 64 KiB and 1 MiB, for every contender of the report under
//! this process's allocator (`TIERPOOL_BENCH_ALLOC=mimalloc` or `=jemalloc` to change it).
//! The report's `get-put` workload is the side-by-side view; this is for close study of one
//! change with criterion's statistics.
//!
//! `cargo bench -p tierpool-bench --bench get_put`

use std::hint::black_box;

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion};
use tierpool_bench::contenders::{touch, with_contender, Contender, Kind, Visit};
use tierpool_bench::harness::alloc;

struct Bench<'a, 'g> {
    group: &'a mut BenchmarkGroup<'g, WallTime>,
    name: String,
}

impl Visit for Bench<'_, '_> {
    type Out = ();
    fn visit<C: Contender>(self, c: C) {
        for n in [256, 4096, 65536, 1 << 20] {
            drop(c.get(n)); // the first get of each size allocates
            self.group
                .bench_function(BenchmarkId::new(&self.name, n), |b| {
                    b.iter(|| {
                        let mut buf = c.get(black_box(n));
                        touch(&mut buf, n);
                        black_box(&mut buf);
                    })
                });
        }
    }
}

fn get_put(c: &mut Criterion) {
    let mut group = c.benchmark_group("get_put");
    for kind in Kind::ALL {
        let name = kind.label(alloc::current());
        with_contender(
            kind,
            Bench {
                group: &mut group,
                name,
            },
        );
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(2));
    targets = get_put
}
criterion_main!(benches);
