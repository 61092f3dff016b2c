//! The workloads of the report, one module each, each mirroring a seed.
//!
//! Every workload takes the contenders to run and returns an [`Output`]: records (and, for
//! `burst`, timelines). Timed work goes through [`crate::measure`]: interleaved rounds,
//! medians, and a separate allocation-counting pass.

pub mod budget;
pub mod burst;
pub mod connections;
pub mod cross_thread;
pub mod direct_read;
pub mod file_read;
pub mod get_put;
pub mod http;
pub mod idle_threads;
pub mod instructions;
pub mod lookup;
pub mod mixed;
pub mod streaming;
pub mod threads;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crate::alloc::Allocator;
use crate::contenders::{with_contender, Kind, Visit};
use crate::measure::{measure, Budget, Case, Measured};
use crate::report::{Output, Record};

/// A workload of the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Workload {
    /// Tier lookup pairs.
    Lookup,
    /// One thread, get + write + release.
    GetPut,
    /// The get-put loop under callgrind.
    Instructions,
    /// A packet reader on 2 threads.
    Mixed,
    /// Producer gets, consumer releases.
    CrossThread,
    /// Memory over time after a burst.
    Burst,
    /// All threads at once.
    Threads,
    /// Loopback streaming server and client.
    Streaming,
    /// Large frames over many connections, with and without a budget on bytes in use.
    Budget,
    /// Block reads of a file through compio (io_uring).
    FileRead,
    /// Threads that used the pool and went idle: does their memory come back?
    IdleThreads,
    /// `O_DIRECT` block reads and writes of a 1 GiB file into aligned buffers.
    DirectRead,
    /// 10,000 mostly idle connections: a buffer held per connection, or readiness-first.
    Connections,
    /// A hyper server sending pooled bodies and chains, driven by wrk and h2load.
    Http,
}

impl Workload {
    /// Every workload, in report order: the one list.
    pub const ALL: [Workload; 14] = [
        Workload::Lookup,
        Workload::GetPut,
        Workload::Instructions,
        Workload::Mixed,
        Workload::CrossThread,
        Workload::Burst,
        Workload::Threads,
        Workload::Streaming,
        Workload::Budget,
        Workload::FileRead,
        Workload::IdleThreads,
        Workload::DirectRead,
        Workload::Connections,
        Workload::Http,
    ];

    /// The name on the command line, in the JSON and in the report.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Lookup => "lookup",
            Workload::GetPut => "get-put",
            Workload::Instructions => "instructions",
            Workload::Mixed => "mixed",
            Workload::CrossThread => "cross-thread",
            Workload::Burst => "burst",
            Workload::Threads => "threads",
            Workload::Streaming => "streaming",
            Workload::Budget => "budget",
            Workload::FileRead => "file-read",
            Workload::IdleThreads => "idle-threads",
            Workload::DirectRead => "direct-read",
            Workload::Connections => "connections",
            Workload::Http => "http",
        }
    }

    /// Parses a name written by [`Workload::name`].
    pub fn from_name(name: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.name() == name)
    }

    /// What the workload measures, for the report's headings.
    pub fn describe(self) -> &'static str {
        match self {
            Workload::Lookup => "Seed 000 (gRPC-Go mem): tier lookup for get and for return, every size 0..2^19, per lookup pair.",
            Workload::GetPut => "Seed 002 (goleveldb): one thread, get + write first and last byte + release, per operation.",
            Workload::Instructions => "The get-put loop again, counted instead of timed: instructions per iteration (get, write first and last byte, release, loop), from valgrind --tool=callgrind collecting the loop alone after a warm-up; each contender and size in its own process. Deterministic: the same figure every run. The rows named tierpool hot_loop are what the optional features cost (issue 19), which this binary leaves out: tierpool's hot_loop example built by cargo without optional features and with holders+metrics, at 4 KiB, tracking nothing, 1 get in 128 and every get, with the time per get+drop beside (native runs, median of 3).",
            Workload::Mixed => "Seed 001 (Vitess): a packet reader on 2 threads sharing one pool; packets of short (< 100 B), medium (2-64 KiB) and random (log-uniform to 16 MiB) sizes copied from an in-memory stream into a buffer of the packet's size, checked, released; per packet.",
            Workload::CrossThread => "Seed 003 (gRPC-Go transport): a producer takes and fills buffers, a consumer releases them after a bounded channel; per buffer.",
            Workload::Burst => "Seed 003 (memory): 10,000 x 16 KiB taken at once and released, then one get/put per millisecond; RSS and retained bytes over time (each contender in its own process).",
            Workload::Streaming => "Seed 003 (gRPC-Go shared receive buffers): a loopback streaming server and client on 2 tokio workers, one connection; each stream sends a request and awaits a response of the same size; one receive-buffer strategy per process; per round trip, with QPS, latency and peak RSS.",
            Workload::Budget => "Memory under a flood (issue 10): 128 loopback TCP connections each send 8 frames of 1 MiB as fast as they can; a reader task per connection reads them with tierpool's FrameReader from one shared pool and queues them (unbounded) for one handler thread, which processes them more slowly than they arrive (8 checksum passes); once with no budget and once with max_in_use_bytes(64 MiB) (the reader then waits for room before reading a payload), each in its own process, 3 interleaved rounds; per frame, with throughput, p99 read_frame time (waiting included), peak RSS and, under the budget, its peak and waits.",
            Workload::FileRead => "Seed 002 (goleveldb block reads): a 256 MiB file in the page cache read start to end in 64 KiB or 1 MiB blocks with compio's read_at on io_uring, each block into a tierpool buffer, a fresh Vec, or one reused Vec (the floor); one process per strategy and block size, 5 timed passes after a warm-up; per read, with MB/s, allocations and minor page faults per read, peak RSS.",
            Workload::DirectRead => "Issue 17 (direct I/O, seed 002's block reads): a 1 GiB file on the disk (ext4) read, then written, with O_DIRECT in 64 KiB or 1 MiB blocks through compio's read_at / write_at on io_uring, one block in flight, each block in a 4 KiB-aligned buffer: a tierpool AlignedPool buffer, a fresh std::alloc aligned allocation, or one reused aligned buffer (the floor); one process per strategy, operation and block size, 3 interleaved rounds, each timing the file in 64 MiB stretches after a warm-up stretch; per block, with MB/s, CPU time per MiB (user + system from getrusage, the median stretch: the disk bounds MB/s on this VM, CPU time shows what the buffer costs), allocations and minor page faults per block, peak RSS.",
            Workload::Connections => "Issue 18 (seed 003: memory that follows traffic, not connections): 10,000 loopback TCP connections, about 1% active at once (100 client tasks, each owning 100 connections, send a 16 KiB message on a random one of theirs and wait for a 1-byte answer; 60,000 messages); the server reads each message (a) on 2 tokio workers into a pooled buffer taken when the connection is accepted and held while it waits, (b) on 2 tokio workers with tierpool::io::read_ready_exact, which waits for readability holding nothing and only then takes a pooled buffer, or (c) on one thread through a tierpool::io::buf_ring::BufRing (256 pooled 16 KiB buffers registered with io_uring, one multishot receive per connection: the kernel takes a buffer only when data arrives; refilled from the pool after each batch of completions); one server process per strategy with the client in a process of its own, 2 interleaved rounds; per message, with messages/s, p99 latency (client side), bytes held in pooled buffers (the exact peak of a 1 GiB budget that never binds, thread caches included, and while all are idle), the server's RSS above its idle-connections baseline (peak of 5 ms samples), at that baseline, and its peak (VmHWM), the server's allocations per message (counted while the traffic runs); for (c) the receives that found the ring empty (ring dry) and the slots the pool could not refill (ring starved).",
            Workload::Http => "Issue 18 (pooled bodies through hyper): a hyper 1 server on loopback (HTTP/1.1 and h2c, one tokio worker) answers GET /<body>/<size> with a 64 KiB or 1 MiB body made per request: Full<Bytes> from a fresh Vec, one PooledBytes, a PooledChain of 16 KiB views (tierpool's chain body: the whole chain as one frame), or the same chain one frame per view (into_view_frames, the chain body before); each body first fetched with curl over HTTP/1.1 and HTTP/2 and checked byte for byte; then wrk -t1 -c8 (keep-alive) over HTTP/1.1 and h2load -t1 -c8 -m1 over HTTP/2 (h2c), 2 s per run, 5 interleaved rounds; per request (1/throughput), with requests/s, p99 latency (wrk's), the server's CPU time and minor page faults per request (this process's, the clients being others: the median round) and allocations per request (counted during the same runs). Every pooled buffer back at the end.",
            Workload::Threads => "All threads get/put 4 KiB at once on this 2-core machine (oversubscribed above 2); wall time per operation of all threads together.",
            Workload::IdleThreads => "Idle threads (issue 16): T threads each take, fill and return two buffers each of 4 KiB, 64 KiB, 256 KiB, 1 MiB and 8 MiB, then park for good; the main thread goes on with one 4 KiB get/put per ms. Process RSS (and, in the extra columns, how far above the baseline, and the pool's retained bytes against its 64 MiB cap) when all are idle, 2 and 10 decay intervals (100 ms each) later, and for tierpool right after trim(); one process per strategy, allocator and T. tierpool ticks when the main thread's cache looks at the clock (every 256 returns to a tier: here every 256 ms), or, with background_trim, every interval.",
        }
    }
}

impl std::fmt::Display for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How a workload runs in this process.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    /// `--quick`: tiny counts.
    pub quick: bool,
    /// This process's global allocator.
    pub alloc: Allocator,
    /// Print progress to stderr.
    pub progress: bool,
}

impl Ctx {
    /// The timing budget for a workload whose samples should last about `sample_time`.
    pub fn budget(&self, sample_time: Duration) -> Budget {
        if self.quick {
            Budget::quick()
        } else {
            Budget::full(sample_time)
        }
    }
}

/// Runs workload `w` in this process with the contenders `kinds`. (`instructions` runs its
/// own children: [`instructions::run`].)
pub fn run(w: Workload, ctx: &Ctx, kinds: &[Kind]) -> Output {
    match w {
        Workload::Lookup => lookup::run(ctx),
        Workload::GetPut => get_put::run(ctx, kinds),
        Workload::Mixed => mixed::run(ctx, kinds),
        Workload::CrossThread => cross_thread::run(ctx, kinds),
        Workload::Threads => threads::run(ctx, kinds),
        Workload::Streaming => {
            let mut out = Output::default();
            for shape in streaming::shapes(ctx.quick) {
                for s in crate::streaming::Strategy::ALL {
                    out.records
                        .extend(streaming::run_one(ctx, shape, s).records);
                }
            }
            out
        }
        Workload::Budget => {
            let mut out = Output::default();
            for b in budget::RUNS {
                out.records.extend(budget::run_one(ctx, b).records);
            }
            out
        }
        Workload::Burst => {
            let mut out = Output::default();
            for &k in kinds {
                let o = burst::run_one(ctx, k);
                out.records.extend(o.records);
                out.timelines.extend(o.timelines);
            }
            out
        }
        Workload::FileRead => {
            let mut out = Output::default();
            for block in file_read::BLOCKS {
                for s in file_read::Strategy::ALL {
                    if let Some(o) = file_read::run_one(ctx, s, block) {
                        out.records.extend(o.records);
                    }
                }
            }
            out
        }
        Workload::Http => match http::run(ctx) {
            Ok(o) => o,
            Err(e) => {
                eprintln!("  http: {e}: skipped");
                Output::default()
            }
        },
        Workload::Connections => {
            let mut out = Output::default();
            for s in connections::Strategy::ALL {
                match connections::run_one(ctx, s) {
                    Ok(o) => out.records.extend(o.records),
                    Err(e) => eprintln!("  connections: {e}: skipped"),
                }
            }
            out
        }
        Workload::DirectRead => {
            let mut out = Output::default();
            for shape in direct_read::SHAPES {
                for s in direct_read::Strategy::ALL {
                    if let Some(o) = direct_read::run_one(ctx, s, shape) {
                        out.records.extend(o.records);
                    }
                }
            }
            out
        }
        Workload::IdleThreads => {
            let mut out = Output::default();
            for &t in idle_threads::thread_counts(ctx.quick) {
                for s in idle_threads::Strategy::ALL {
                    out.records.extend(idle_threads::run_one(ctx, s, t).records);
                }
            }
            out
        }
        Workload::Instructions => panic!("the instructions workload runs under valgrind"),
    }
}

/// `256 B`, `4 KiB`, `1 MiB`.
pub fn size_label(n: usize) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} B")
    }
}

/// The labels of a list of sizes, as a workload's parameters.
pub fn size_params(sizes: &[usize]) -> Vec<String> {
    sizes.iter().map(|&n| size_label(n)).collect()
}

/// A case for each parameter of a workload, for one contender.
pub trait MakeCases {
    /// The parameters, as labels, in order.
    fn params(&self) -> Vec<String>;
    /// Cases for contender `c`, one per parameter, in the same order.
    fn cases<C: crate::contenders::Contender>(&self, c: C) -> Vec<Case>;
    /// Extra figures for a (contender, parameter) after measuring.
    fn extra(&self, _param: usize) -> BTreeMap<String, f64> {
        BTreeMap::new()
    }
}

struct Build<'a, M>(&'a M);

impl<M: MakeCases> Visit for Build<'_, M> {
    type Out = Vec<Case>;
    fn visit<C: crate::contenders::Contender>(self, c: C) -> Vec<Case> {
        self.0.cases(c)
    }
}

/// Measures workload `name` for every contender in `kinds` and every parameter of `make`,
/// all interleaved. `make_for` gives each contender its own case builder (and so its own
/// counters for extras).
pub fn run_cases<M: MakeCases>(
    ctx: &Ctx,
    name: &str,
    metric: &str,
    sample_time: Duration,
    kinds: &[Kind],
    make_for: impl Fn() -> M,
) -> Output {
    let makers: Vec<M> = kinds.iter().map(|_| make_for()).collect();
    let params = makers.first().map(|m| m.params()).unwrap_or_default();
    let mut cases: Vec<Case> = kinds
        .iter()
        .zip(&makers)
        .flat_map(|(&k, m)| with_contender(k, Build(m)))
        .collect();
    let label = format!("{name} ({})", ctx.alloc.name());
    let measured: Vec<Measured> = measure(&mut cases, ctx.budget(sample_time), |done, total| {
        if ctx.progress {
            crate::progress::status(&format!("{label}: round {done}/{total}"));
            if done == total {
                crate::progress::status_done();
            }
        }
    });
    drop(cases);
    let mut out = Output::default();
    for (i, (&k, m)) in kinds.iter().zip(&makers).enumerate() {
        for (j, p) in params.iter().enumerate() {
            let r = &measured[i * params.len() + j];
            out.records.push(Record {
                workload: name.into(),
                contender: k.label(ctx.alloc),
                allocator: ctx.alloc.name().into(),
                param: p.clone(),
                metric: metric.into(),
                median: r.time.median,
                min: r.time.min,
                max: r.time.max,
                samples: r.time.samples,
                allocs_per_op: Some(r.allocs_per_op),
                bytes_per_op: Some(r.bytes_per_op),
                extra: m.extra(j),
            });
        }
    }
    out
}

/// Runs `f(i)` on `threads` threads at once and returns the time from their common start
/// (a barrier) until the last one finished; thread start-up is not timed.
///
/// The start is the earliest moment a thread left the barrier, as that thread saw it: a
/// first version read the clock on the spawning thread after its own `wait`, which with 64
/// threads on 2 cores often woke last, after others had done their share (samples of 0.2 ns
/// per operation, below what two cores can do).
pub fn parallel(threads: usize, f: impl Fn(usize) + Sync) -> Duration {
    let barrier = Barrier::new(threads + 1);
    let base = Instant::now();
    let first = AtomicU64::new(u64::MAX);
    std::thread::scope(|s| {
        for i in 0..threads {
            let (f, barrier, first) = (&f, &barrier, &first);
            s.spawn(move || {
                barrier.wait();
                first.fetch_min(base.elapsed().as_nanos() as u64, Ordering::Relaxed);
                f(i);
            });
        }
        barrier.wait();
        // Leaving the scope joins every thread.
    });
    let end = base.elapsed();
    end.saturating_sub(Duration::from_nanos(
        first.load(Ordering::Relaxed).min(end.as_nanos() as u64),
    ))
}

/// A small deterministic generator (SplitMix64), so that every contender sees the same data.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + (self.next_u64() % (hi - lo + 1) as u64) as usize
    }

    /// Log-uniform in `lo..=hi` (every doubling equally likely), `lo >= 1`.
    pub fn log_uniform(&mut self, lo: usize, hi: usize) -> usize {
        let (a, b) = ((lo as f64).ln(), (hi as f64 + 1.0).ln());
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        ((a + u * (b - a)).exp() as usize).clamp(lo, hi)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(size_label(256), "256 B");
        assert_eq!(size_label(4096), "4 KiB");
        assert_eq!(size_label(16 << 20), "16 MiB");
        assert_eq!(size_label(1000), "1000 B");
    }

    #[test]
    fn rng_ranges() {
        let mut r = Rng::new(1);
        for _ in 0..10_000 {
            let x = r.log_uniform(1, 16 << 20);
            assert!((1..=16 << 20).contains(&x));
            let y = r.range(1, 99);
            assert!((1..=99).contains(&y));
        }
    }
}
