//! `streaming` (modelled on gRPC-Go's shared receive buffers, measured with 150 concurrent
//! 1 MiB streaming calls): a loopback server and client in one process, one receive-buffer
//! [`Strategy`] per process (peak RSS is per process), QPS, latency and allocations.

use std::collections::BTreeMap;
use std::time::Duration;

use tierpool::BufferPool;

use super::{size_label, Ctx};
use crate::harness::alloc::Allocator;
use crate::harness::alloc;
use crate::harness::choice::Choice;
use crate::harness::record::{Output, Record};
use crate::fixtures::streaming::{run_client, serve, Strategy};
use crate::harness::procfs::Proc;

/// One shape of the workload.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Request bytes.
    pub req: usize,
    /// Response bytes.
    pub resp: usize,
    /// Concurrent streams.
    pub streams: usize,
    /// Connections they share.
    pub conns: usize,
}

impl Shape {
    /// The label in reports.
    pub fn label(&self) -> String {
        format!("{} x {} streams", size_label(self.req), self.streams)
    }
}

/// The shapes: the seed's (1 MiB, 150 streams, one connection, as gRPC's benchmark uses) and
/// smaller messages.
pub fn shapes(quick: bool) -> Vec<Shape> {
    let streams = if quick { 8 } else { 150 };
    [1 << 20, 64 << 10, 4 << 10]
        .into_iter()
        .map(|n| Shape {
            req: n,
            resp: n,
            streams,
            conns: 1,
        })
        .collect()
}

/// Warm-up and measured durations of one process.
pub fn durations(quick: bool) -> (Duration, Duration) {
    if quick {
        (Duration::from_millis(100), Duration::from_millis(300))
    } else {
        (Duration::from_millis(500), Duration::from_millis(1500))
    }
}

/// Processes per shape and strategy (rounds, interleaved: every strategy once per round).
pub fn rounds(quick: bool) -> usize {
    if quick {
        1
    } else {
        3
    }
}

/// The report label of `strategy` in a process running under `alloc`.
pub fn label(strategy: Strategy, alloc: crate::harness::alloc::Allocator) -> String {
    if alloc == crate::harness::alloc::Allocator::System {
        strategy.label().to_string()
    } else {
        format!("{} on {}", strategy.label(), alloc.name())
    }
}

/// Runs one shape with one strategy in this process (2 worker threads) and reports it.
pub fn run_one(ctx: &Ctx, shape: Shape, strategy: Strategy) -> Output {
    let (warmup, duration) = durations(ctx.quick);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let pool = BufferPool::new();
    let before = alloc::counted();
    let result = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        let server = tokio::spawn(serve(
            listener,
            strategy,
            pool.clone(),
            shape.req,
            shape.resp,
        ));
        let r = run_client(
            addr,
            strategy,
            pool.clone(),
            shape.conns,
            shape.streams,
            shape.req,
            shape.resp,
            warmup,
            duration,
            alloc::set_counting,
        )
        .await;
        server.abort();
        r
    });
    let counted = alloc::counted();
    drop(rt);
    let trips = result.round_trips.max(1) as f64;
    let ns = result.elapsed.as_nanos() as f64 / trips;
    let h = &result.latency_us;
    let ms = |us: f64| us / 1e3;
    let mut extra = BTreeMap::new();
    extra.insert("QPS".to_string(), trips / result.elapsed.as_secs_f64());
    extra.insert("mean ms".to_string(), ms(h.mean()));
    extra.insert("p50 ms".to_string(), ms(h.value_at_quantile(0.5) as f64));
    extra.insert("p99 ms".to_string(), ms(h.value_at_quantile(0.99) as f64));
    extra.insert(
        "peak RSS MiB".to_string(),
        Proc::Me.peak_rss() as f64 / (1 << 20) as f64,
    );
    if matches!(strategy, Strategy::Pooled | Strategy::Shared) {
        extra.insert("hit rate".to_string(), pool.stats().hit_rate());
    }
    Output {
        records: vec![Record {
            workload: "streaming".into(),
            contender: label(strategy, ctx.alloc),
            allocator: ctx.alloc.name().into(),
            param: shape.label(),
            metric: "ns/round trip (1/QPS)".into(),
            median: ns,
            min: ns,
            max: ns,
            samples: 1,
            allocs_per_op: Some((counted.allocs - before.allocs) as f64 / trips),
            bytes_per_op: Some((counted.bytes - before.bytes) as f64 / trips),
            extra,
        }],
        timelines: vec![],
    }
}

/// The `streaming` workload.
#[derive(Debug)]
pub struct Streaming;

impl super::Scenario for Streaming {
    fn name(&self) -> &'static str {
        "streaming"
    }

    fn describe(&self) -> &'static str {
        "Modelled on gRPC-Go's streaming benchmark and its shared receive buffers: a loopback streaming server and client on 2 tokio workers, one connection; each stream sends a request and awaits a response of the same size; one receive-buffer strategy per process; per round trip, with QPS, latency and peak RSS."
    }

    fn weight(&self) -> u64 {
        40
    }

    /// "no pool" first (under glibc, jemalloc, mimalloc), then tierpool and the others.
    fn contenders(&self) -> Vec<super::Entry> {
        let setup = |s: Strategy| format!("streaming workload: {}", s.description());
        let mut all = vec![super::Entry::new(
            Strategy::NoPool.label(),
            setup(Strategy::NoPool),
        )];
        for a in [Allocator::Jemalloc, Allocator::Mimalloc] {
            all.push(super::Entry::new(
                label(Strategy::NoPool, a),
                format!(
                    "{} (the process runs under {})",
                    setup(Strategy::NoPool),
                    a.name()
                ),
            ));
        }
        for s in [Strategy::Pooled, Strategy::BytesMut, Strategy::Shared] {
            all.push(super::Entry::new(s.label(), setup(s)));
        }
        all
    }

    fn baseline(&self) -> String {
        Strategy::NoPool.label().into()
    }

    /// Peak RSS is per process: one process per shape and strategy, one at a time (each uses
    /// both cores), in rounds so that a slow spell of this VM hits all alike.
    fn run(&self, quick: bool) -> Result<Output, String> {
        let rounds = rounds(quick);
        let mut records = Vec::new();
        for round in 1..=rounds {
            for (i, shape) in shapes(quick).iter().enumerate() {
                crate::harness::progress::status(&format!(
                    "streaming round {round}/{rounds}: {}",
                    shape.label()
                ));
                let mut runs: Vec<(Strategy, Allocator)> = Strategy::ALL
                    .iter()
                    .map(|&s| (s, Allocator::System))
                    .collect();
                if i == 0 {
                    // The seed's shape also against "no pool" under the allocators a Rust
                    // user would reach for first.
                    runs.push((Strategy::NoPool, Allocator::Mimalloc));
                    runs.push((Strategy::NoPool, Allocator::Jemalloc));
                }
                for (s, a) in runs {
                    let what = label(s, a);
                    let out =
                        crate::harness::children::run_one(self.name(), a, s.id(), Some(i), quick, &what)?;
                    records.extend(out.records);
                }
            }
        }
        Ok(Output {
            records: crate::harness::record::merge_rounds(records),
            timelines: vec![],
        })
    }

    fn child(&self, ctx: &Ctx, args: &super::ChildArgs) -> Result<Option<Output>, String> {
        let id = args.contender.as_deref().unwrap_or(Strategy::NoPool.id());
        let strategy = Strategy::from_id(id).ok_or(format!("unknown strategy {id}"))?;
        let shape = args.shape(&shapes(ctx.quick), "shape")?;
        Ok(Some(run_one(ctx, shape, strategy)))
    }
}
