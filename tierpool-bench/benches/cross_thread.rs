//! Criterion micro-benchmark of the cross-thread hand-off (the report's `cross-thread`
//! workload): a producer gets 4 KiB buffers and sends them over a spinning bounded channel, a
//! consumer drops them. tierpool, the `Vec` baseline and the `ArrayQueue` pool.
//!
//! Criterion runs one contender after another, and this VM switches between fast and slow
//! cross-core modes for seconds at a time, so these figures swing between runs (39 to 210 ns
//! for tierpool in four runs): quote the report's interleaved figures instead.
//!
//! `cargo bench -p tierpool-bench --bench cross_thread`

use criterion::measurement::WallTime;
use criterion::{criterion_group, criterion_main, BenchmarkGroup, BenchmarkId, Criterion};
use tierpool_bench::contenders::{with_contender, Contender, Kind, Visit};
use tierpool_bench::harness::alloc;
use tierpool_bench::workloads::cross_thread::hand_off;

struct Bench<'a, 'g> {
    group: &'a mut BenchmarkGroup<'g, WallTime>,
    name: String,
}

impl Visit for Bench<'_, '_> {
    type Out = ();
    fn visit<C: Contender>(self, c: C) {
        self.group
            .bench_function(BenchmarkId::new(&self.name, 4096), |b| {
                b.iter_custom(|iters| hand_off(&c, 4096, iters))
            });
    }
}

fn cross_thread(c: &mut Criterion) {
    let mut group = c.benchmark_group("cross_thread");
    for kind in [Kind::Tierpool, Kind::Vec, Kind::QueuePool] {
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
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3));
    targets = cross_thread
}
criterion_main!(benches);
