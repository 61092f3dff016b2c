//! `budget`: a budget on bytes in use under a flood of large frames. Many loopback TCP
//! connections each send 1 MiB frames as fast as they can; one reader task per connection
//! reads them with tierpool's `FrameReader` from one shared pool and queues each payload for a
//! handler thread that processes them more slowly than they arrive. Once with no budget, once with a 64 MiB budget (`Builder::max_in_use_bytes`),
//! each in its own process (peak RSS is per process), in interleaved rounds. Per frame, with
//! throughput, the p99 time of a `read_frame` (which includes waiting for budget), peak RSS,
//! the most payloads held at once and, under the budget, its peak and waits.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tierpool::io::frame::{FrameReader, FrameWriter};
use tierpool::BufferPool;

use super::{size_label, Ctx};

use crate::harness::record::{Output, Record};
use crate::harness::procfs::Proc;

/// The frame size (seed 003's 1 MiB messages).
pub const FRAME: usize = 1 << 20;

/// The budget of the bounded run.
pub const BUDGET: usize = 64 << 20;

/// Checksum passes over each payload by the handler thread: processing slower than loopback
/// TCP delivers (about 4 GB/s here), so that frames back up, as in a flood.
pub const PROCESS_PASSES: usize = 8;

/// The runs: no budget, and [`BUDGET`].
pub const RUNS: [Option<usize>; 2] = [None, Some(BUDGET)];

/// `--contender` id of a run.
pub fn id(budget: Option<usize>) -> &'static str {
    match budget {
        None => "unbounded",
        Some(_) => "budgeted",
    }
}

/// The run with `--contender` id `id`.
pub fn from_id(id: &str) -> Option<Option<usize>> {
    RUNS.into_iter().find(|&b| self::id(b) == id)
}

/// The report label of a run.
pub fn label(budget: Option<usize>) -> String {
    match budget {
        None => "tierpool, no budget".into(),
        Some(b) => format!("tierpool, {} budget", size_label(b)),
    }
}

/// What the contender column says about a run, for the report's contender table.
pub fn description(budget: Option<usize>) -> String {
    match budget {
        None => "budget workload: the default pool; FrameReader allocates up to 256 KiB per payload and grows as data arrives".into(),
        Some(b) => format!(
            "budget workload: the default pool with max_in_use_bytes({}); FrameReader waits (acquire) for room for each whole payload before reading it",
            size_label(b)
        ),
    }
}

/// Connections and frames per connection.
pub fn shape(quick: bool) -> (usize, usize) {
    if quick {
        (8, 2)
    } else {
        (128, 8)
    }
}

/// Processes per run (interleaved rounds).
pub fn rounds(quick: bool) -> usize {
    if quick {
        1
    } else {
        3
    }
}

/// Sums the payload as `u64` words (the "processing" of a frame: touches every byte once).
fn checksum(p: &[u8]) -> u64 {
    p.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .fold(0u64, u64::wrapping_add)
}

/// Runs one configuration in this process (2 tokio workers) and reports it.
pub fn run_one(ctx: &Ctx, budget: Option<usize>) -> Output {
    let (conns, frames) = shape(ctx.quick);
    let mut builder = BufferPool::builder();
    if let Some(b) = budget {
        builder = builder.max_in_use_bytes(b);
    }
    let pool = builder.build().expect("valid configuration");
    let payload: Arc<Vec<u8>> = Arc::new((0..FRAME).map(|i| (i * 7) as u8).collect());
    let f = Flood {
        expected: checksum(&payload),
        payload,
        held: Arc::new(AtomicUsize::new(0)),
        held_peak: Arc::new(AtomicUsize::new(0)),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    let before = crate::harness::alloc::counted();
    crate::harness::alloc::set_counting(true);
    let (elapsed, hist) = rt.block_on(flood(&pool, conns, frames, &f));
    crate::harness::alloc::set_counting(false);
    let counted = crate::harness::alloc::counted();
    drop(rt);
    let run = Flooded {
        elapsed,
        hist,
        held_peak: f.held_peak.load(Ordering::Relaxed),
        allocs: counted.allocs - before.allocs,
        bytes: counted.bytes - before.bytes,
    };
    record(ctx, budget, &pool, (conns, frames), &run)
}

/// What one configuration's run measured.
struct Flooded {
    elapsed: Duration,
    /// The readers' latencies per frame (µs).
    hist: hdrhistogram::Histogram<u64>,
    /// The most payloads held at once.
    held_peak: usize,
    /// Allocations and bytes allocated while it ran.
    allocs: u64,
    bytes: u64,
}

/// What the flood sends and counts, made before the counted run (its allocations are not the
/// flood's).
struct Flood {
    /// Every frame's payload, and its checksum.
    payload: Arc<Vec<u8>>,
    expected: u64,
    /// Payloads read and not yet handled, and the most at once.
    held: Arc<AtomicUsize>,
    held_peak: Arc<AtomicUsize>,
}

/// `conns` loopback connections each send `frames` frames as fast as they can; a reader task
/// per connection reads them into pooled buffers for one slow handler thread. Returns the
/// time it took and the readers' latencies per frame (µs).
async fn flood(
    pool: &BufferPool,
    conns: usize,
    frames: usize,
    f: &Flood,
) -> (Duration, hdrhistogram::Histogram<u64>) {
    let (payload, expected, held, held_peak) = (&f.payload, f.expected, &f.held, &f.held_peak);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let started = Instant::now();
    let mut writers = Vec::new();
    for _ in 0..conns {
        let payload = payload.clone();
        writers.push(tokio::spawn(async move {
            let s = tokio::net::TcpStream::connect(addr).await.expect("connect");
            s.set_nodelay(true).expect("nodelay");
            let mut w = FrameWriter::new(s);
            for _ in 0..frames {
                w.write_frame(0, &payload).await.expect("write");
            }
            w.flush().await.expect("flush");
        }));
    }
    // The handlers: one thread that processes payloads in arrival order, slower than the
    // network delivers them (PROCESS_PASSES checksum passes each), fed by an unbounded
    // queue: without a budget, the backlog (and the heap) grows with the flood.
    let (tx, rx) = std::sync::mpsc::channel::<tierpool::PooledBuf>();
    let handler = {
        let held = held.clone();
        std::thread::spawn(move || {
            for p in rx {
                for _ in 0..PROCESS_PASSES {
                    assert_eq!(checksum(std::hint::black_box(&p)), expected);
                }
                held.fetch_sub(1, Ordering::Relaxed);
            }
        })
    };
    let mut readers = Vec::new();
    for _ in 0..conns {
        let (s, _) = listener.accept().await.expect("accept");
        let (pool, held, held_peak, tx) =
            (pool.clone(), held.clone(), held_peak.clone(), tx.clone());
        readers.push(tokio::spawn(async move {
            let mut r = FrameReader::new(s, pool);
            let mut h = hdrhistogram::Histogram::<u64>::new(3).expect("histogram");
            loop {
                let t = Instant::now();
                let Some((_, p)) = r.read_frame().await.expect("read") else {
                    break;
                };
                let _ = h.record(t.elapsed().as_micros() as u64);
                let now = held.fetch_add(1, Ordering::Relaxed) + 1;
                held_peak.fetch_max(now, Ordering::Relaxed);
                tx.send(p).expect("handler alive");
            }
            h
        }));
    }
    drop(tx);
    let mut all = hdrhistogram::Histogram::<u64>::new(3).expect("histogram");
    for r in readers {
        all.add(r.await.expect("reader")).expect("same bounds");
    }
    for w in writers {
        w.await.expect("writer");
    }
    handler.join().expect("handler");
    (started.elapsed(), all)
}

/// The record of one configuration's run.
fn record(
    ctx: &Ctx,
    budget: Option<usize>,
    pool: &BufferPool,
    (conns, frames): (usize, usize),
    run: &Flooded,
) -> Output {
    let Flooded {
        elapsed,
        ref hist,
        held_peak,
        allocs,
        bytes,
    } = *run;
    let total = (conns * frames) as f64;
    let ns = elapsed.as_nanos() as f64 / total;
    let ms = |us: u64| us as f64 / 1e3;
    let mut extra = BTreeMap::new();
    extra.insert(
        "MB/s".to_string(),
        total * FRAME as f64 / 1e6 / elapsed.as_secs_f64(),
    );
    extra.insert("p50 ms".to_string(), ms(hist.value_at_quantile(0.5)));
    extra.insert("p99 ms".to_string(), ms(hist.value_at_quantile(0.99)));
    extra.insert(
        "peak RSS MiB".to_string(),
        Proc::Me.peak_rss() as f64 / (1 << 20) as f64,
    );
    extra.insert("payloads held at once".to_string(), held_peak as f64);
    let s = pool.stats();
    if let Some(b) = &s.budget {
        let mib = |x: usize| x as f64 / (1 << 20) as f64;
        extra.insert("peak in use MiB".to_string(), mib(b.peak_in_use_bytes));
        extra.insert("waits".to_string(), b.waits as f64);
        extra.insert(
            "mean wait ms".to_string(),
            b.wait_total.as_secs_f64() * 1e3 / b.waits.max(1) as f64,
        );
        extra.insert(
            "longest wait ms".to_string(),
            b.wait_longest.as_secs_f64() * 1e3,
        );
    }
    Output {
        records: vec![Record {
            workload: "budget".into(),
            contender: label(budget),
            allocator: ctx.alloc.name().into(),
            param: format!("{} frames x {conns} conns", size_label(FRAME)),
            metric: "ns/frame (1/throughput)".into(),
            median: ns,
            min: ns,
            max: ns,
            samples: 1,
            allocs_per_op: Some(allocs as f64 / total),
            bytes_per_op: Some(bytes as f64 / total),
            extra,
        }],
        timelines: vec![],
    }
}

/// The `budget` workload.
#[derive(Debug)]
pub struct Budget;

impl super::Scenario for Budget {
    fn name(&self) -> &'static str {
        "budget"
    }

    fn describe(&self) -> &'static str {
        "Memory under a flood: 128 loopback TCP connections each send 8 frames of 1 MiB as fast as they can; a reader task per connection reads them with tierpool's FrameReader from one shared pool and queues them (unbounded) for one handler thread, which processes them more slowly than they arrive (8 checksum passes); once with no budget and once with max_in_use_bytes(64 MiB) (the reader then waits for room before reading a payload), each in its own process, 3 interleaved rounds; per frame, with throughput, p99 read_frame time (waiting included), peak RSS and, under the budget, its peak and waits."
    }

    fn weight(&self) -> u64 {
        15
    }

    fn contenders(&self) -> Vec<super::Entry> {
        RUNS.iter()
            .map(|&b| super::Entry::new(label(b), description(b)))
            .collect()
    }

    fn baseline(&self) -> String {
        label(None)
    }

    fn run(&self, quick: bool) -> Result<Output, String> {
        let runs: Vec<crate::harness::children::ChildRun> = RUNS
            .into_iter()
            .map(|b| crate::harness::children::ChildRun {
                id: id(b),
                shape: None,
                label: label(b),
            })
            .collect();
        crate::harness::children::in_rounds(self.name(), rounds(quick), &runs, quick)
    }

    fn child(&self, ctx: &Ctx, args: &super::ChildArgs) -> Result<Option<Output>, String> {
        let id = args.contender()?;
        let b = from_id(id).ok_or(format!("unknown budget run {id}"))?;
        Ok(Some(run_one(ctx, b)))
    }

    /// What a budget does to memory, latency and throughput at once: a panel each.
    fn chart(
        &self,
        path: &std::path::Path,
        data: &super::ChartData,
    ) -> Result<(), crate::harness::chart::Error> {
        crate::harness::chart::panels_of_extras(
            path,
            "budget: a flood of 1 MiB frames, with and without a 64 MiB budget",
            data.rows,
            &[
                ("peak RSS MiB", "peak RSS (MiB)"),
                ("p99 ms", "p99 read_frame (ms)"),
                ("MB/s", "throughput (MB/s)"),
            ],
        )
    }
}
