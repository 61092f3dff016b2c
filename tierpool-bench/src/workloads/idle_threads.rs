//! `idle-threads`: many threads use the pool and then go quiet for good, as the
//! threads of a thread-per-connection server whose connections idle do, or a runtime's parked
//! blocking threads. Does what they held come back?
//!
//! In one process per (strategy, thread count): `T` threads each take, fill and return two
//! buffers each of 4 KiB, 64 KiB, 256 KiB, 1 MiB and 8 MiB, then park without touching the
//! pool again. The main thread goes on with one get/put of 4 KiB per millisecond (the rest of
//! the program still working), and reads the process's RSS (and how far above the baseline
//! taken before the threads started) and the pool's retained bytes two and ten decay intervals
//! after the last thread went idle; then, for tierpool, once more right after `trim()`. Against plain `Vec`
//! under glibc, jemalloc and mimalloc, whose memory is whatever those allocators keep for the
//! idle threads (glibc's per-thread arenas, jemalloc's and mimalloc's thread caches and
//! pages). tierpool's pool is the default configuration with a 100 ms decay interval.

use std::collections::BTreeMap;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use super::Ctx;
use crate::harness::alloc::Allocator;
use crate::harness::choice::Choice;
use crate::contenders::Kind;
use crate::harness::record::{Output, Record};
use crate::harness::procfs::Proc;

/// Thread counts.
pub const THREADS: [usize; 3] = [16, 64, 256];
/// The `--quick` thread count.
pub const QUICK_THREADS: [usize; 1] = [8];

/// The sizes each thread takes, two of each.
pub const SIZES: [usize; 5] = [4 << 10, 64 << 10, 256 << 10, 1 << 20, 8 << 20];

/// The decay interval of tierpool's pool here.
pub const INTERVAL: Duration = Duration::from_millis(100);

crate::choices! {
    /// What holds the buffers.
    pub enum Strategy {
        /// A tierpool pool (default configuration, 100 ms decay interval): the pool ticks when
        /// the main thread's cache looks at the clock (every 256 returns to a tier at most,
        /// fewer for a thread whose returns are far apart in time: here every 8 ms).
        Tierpool => ("tierpool", "tierpool", Kind::Tierpool.adaptation()),
        /// The same with [`Builder::background_trim`](tierpool::Builder::background_trim): a
        /// thread of the pool ticks it every interval, however little the program does.
        TierpoolBackground => (
            "tierpool-background",
            "tierpool (background trim)",
            "idle-threads workload: tierpool's default configuration with a 100 ms decay interval and `Builder::background_trim(true)` (a thread of the pool ticks it every interval)",
        ),
        /// `Vec::with_capacity` and drop: the allocator alone.
        Vec => ("vec", "Vec (glibc)", Kind::Vec.adaptation()),
    }
}

impl Strategy {
    /// True for the tierpool strategies.
    pub fn pooled(self) -> bool {
        self != Strategy::Vec
    }

    /// The contender's label under `alloc`.
    pub fn label_under(self, alloc: Allocator) -> String {
        match (self, alloc) {
            (Strategy::Tierpool, Allocator::System) => "tierpool".into(),
            (Strategy::Tierpool, a) => format!("tierpool on {}", a.name()),
            (Strategy::TierpoolBackground, Allocator::System) => {
                "tierpool (background trim)".into()
            }
            (Strategy::TierpoolBackground, a) => {
                format!("tierpool (background trim) on {}", a.name())
            }
            (Strategy::Vec, a) => format!("Vec ({})", a.name()),
        }
    }

    /// The runs of the report: tierpool under glibc and under jemalloc (asking jemalloc to
    /// purge, `TrimAllocator::Jemalloc`), plain `Vec` under every allocator.
    pub fn runs() -> Vec<(Strategy, Allocator)> {
        let mut runs = vec![
            (Strategy::Tierpool, Allocator::System),
            (Strategy::TierpoolBackground, Allocator::System),
            (Strategy::Tierpool, Allocator::Jemalloc),
        ];
        runs.extend(Allocator::ALL.iter().map(|&a| (Strategy::Vec, a)));
        runs
    }
}

/// The thread counts of a full or `--quick` run.
pub fn thread_counts(quick: bool) -> &'static [usize] {
    if quick {
        &QUICK_THREADS
    } else {
        &THREADS
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// Fills a buffer's whole capacity, so that its pages are resident.
fn fill(v: &mut Vec<u8>, byte: u8) {
    v.clear();
    v.resize(v.capacity(), byte);
}

/// Takes two buffers of `n` bytes, fills them, and lets them go.
fn use_two(pool: &tierpool::BufferPool, strategy: Strategy, n: usize, byte: u8) {
    match strategy {
        Strategy::Tierpool | Strategy::TierpoolBackground => {
            let (mut a, mut b) = (pool.get(n), pool.get(n));
            fill(&mut a, byte);
            fill(&mut b, byte);
            drop((a, b));
        }
        Strategy::Vec => {
            let (mut a, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
            fill(&mut a, byte);
            fill(&mut b, byte);
            drop((std::hint::black_box(a), std::hint::black_box(b)));
        }
    }
}

/// The rest of the program going on at a low rate (a 4 KiB buffer a millisecond) once every
/// thread is idle: RSS and the pool's retained bytes, read at each of `intervals` decay
/// intervals (plus a margin).
fn go_on_slowly<const N: usize>(
    pool: &tierpool::BufferPool,
    strategy: Strategy,
    intervals: [u32; N],
) -> Vec<(u64, u64)> {
    let mut readings = Vec::with_capacity(N);
    let started = Instant::now();
    let mut next = Duration::ZERO;
    for n in intervals {
        let mark = n * INTERVAL + INTERVAL / 4;
        while started.elapsed() < mark {
            if started.elapsed() >= next {
                match strategy {
                    Strategy::Tierpool | Strategy::TierpoolBackground => {
                        let mut b = pool.get(4 << 10);
                        b.push(1);
                        drop(b);
                    }
                    Strategy::Vec => {
                        let mut b = Vec::<u8>::with_capacity(4 << 10);
                        b.push(1);
                        drop(std::hint::black_box(b));
                    }
                }
                next += Duration::from_millis(1);
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        readings.push((Proc::Me.rss(), pool.stats().retained_bytes as u64));
    }
    readings
}

/// What every row of one run shares.
struct Rows<'a> {
    ctx: &'a Ctx,
    label: String,
    pool: &'a tierpool::BufferPool,
    strategy: Strategy,
    /// RSS before any thread started.
    baseline: u64,
}

impl Rows<'_> {
    /// One row: RSS `rss` (and the pool's retained bytes) at the moment `param` names.
    fn row(&self, param: String, rss: u64, retained: Option<u64>) -> Record {
        let above = rss.saturating_sub(self.baseline);
        let mut extra = BTreeMap::from([
            ("baseline RSS MiB".to_string(), mib(self.baseline)),
            ("above baseline MiB".to_string(), mib(above)),
        ]);
        if self.strategy.pooled() {
            extra.insert("retained MiB".into(), mib(retained.unwrap_or(0)));
            extra.insert("cap MiB".into(), mib(self.pool.max_retained_bytes() as u64));
        }
        Record {
            workload: "idle-threads".into(),
            contender: self.label.clone(),
            allocator: self.ctx.alloc.name().into(),
            param,
            metric: "RSS MiB".into(),
            median: mib(rss),
            min: mib(rss),
            max: mib(rss),
            samples: 1,
            allocs_per_op: None,
            bytes_per_op: None,
            extra,
        }
    }
}

/// `threads` threads that each use two buffers of every size, say so on `ready`, then stay
/// idle until `release`, never touching the pool again.
fn spawn_workers(
    pool: &tierpool::BufferPool,
    strategy: Strategy,
    threads: usize,
    ready: &Arc<Barrier>,
    release: &Arc<Barrier>,
) -> Vec<std::thread::JoinHandle<()>> {
    (0..threads)
        .map(|i| {
            let (pool, ready, release) = (pool.clone(), ready.clone(), release.clone());
            std::thread::Builder::new()
                .stack_size(64 << 10)
                .spawn(move || {
                    for &n in &SIZES {
                        use_two(&pool, strategy, n, i as u8);
                    }
                    ready.wait();
                    release.wait();
                })
                .expect("a thread")
        })
        .collect()
}

/// Runs one strategy with `threads` idle threads in this process.
pub fn run_one(ctx: &Ctx, strategy: Strategy, threads: usize) -> Output {
    let pool = tierpool::BufferPool::builder()
        .decay_interval(INTERVAL)
        .background_trim(strategy == Strategy::TierpoolBackground)
        .trim_allocator(crate::contenders::purge_of(ctx.alloc))
        .build()
        .expect("a valid configuration");
    let baseline = Proc::Me.rss();
    let ready = Arc::new(Barrier::new(threads + 1));
    let release = Arc::new(Barrier::new(threads + 1));
    let handles = spawn_workers(&pool, strategy, threads, &ready, &release);
    ready.wait();
    let idle_rss = Proc::Me.rss();
    let idle_retained = pool.stats().retained_bytes as u64;
    // Memory is read two and ten intervals after the last thread went idle.
    let marks = [2, 10];
    let readings = go_on_slowly(&pool, strategy, marks);
    let (trim_rss, trim_retained) = if strategy.pooled() {
        pool.trim();
        (Some(Proc::Me.rss()), Some(pool.stats().retained_bytes as u64))
    } else {
        (None, None)
    };
    release.wait();
    for h in handles {
        h.join().expect("an idle thread");
    }
    let rows = Rows {
        ctx,
        label: strategy.label_under(ctx.alloc),
        pool: &pool,
        strategy,
        baseline,
    };
    let record = |param: String, rss: u64, retained: Option<u64>| rows.row(param, rss, retained);
    let mut records = vec![record(
        format!("{threads} threads, all idle"),
        idle_rss,
        Some(idle_retained),
    )];
    for (&(rss, retained), n) in readings.iter().zip(marks) {
        records.push(record(
            format!("{threads} threads, {n} intervals later"),
            rss,
            Some(retained),
        ));
    }
    if let Some(rss) = trim_rss {
        records.push(record(
            format!("{threads} threads, after trim()"),
            rss,
            trim_retained,
        ));
    }
    if ctx.progress {
        let (later_rss, later_retained) = readings[0];
        eprintln!(
            "  idle-threads {}, {threads} threads: RSS +{:.1} MiB idle, +{:.1} MiB two intervals later (retained {:.1} MiB)",
            rows.label,
            mib(idle_rss.saturating_sub(baseline)),
            mib(later_rss.saturating_sub(baseline)),
            mib(later_retained),
        );
    }
    Output {
        records,
        timelines: vec![],
    }
}

/// The `idle-threads` workload.
#[derive(Debug)]
pub struct IdleThreads;

impl super::Scenario for IdleThreads {
    fn name(&self) -> &'static str {
        "idle-threads"
    }

    /// No allocation counts: it measures memory, not operations.
    fn counts_allocations(&self) -> bool {
        false
    }

    fn describe(&self) -> &'static str {
        "Threads that used the pool and went idle for good, as a thread-per-connection server's threads or a runtime's parked blocking threads do: T threads each take, fill and return two buffers each of 4 KiB, 64 KiB, 256 KiB, 1 MiB and 8 MiB, then park for good; the main thread goes on with one 4 KiB get/put per ms. Process RSS (and, in the extra columns, how far above the baseline, and the pool's retained bytes against its 64 MiB cap) when all are idle, 2 and 10 decay intervals (100 ms each) later, and for tierpool right after trim(); one process per strategy, allocator and T. tierpool ticks when the main thread's cache looks at the clock (every 256 returns to a tier at most, fewer when its returns are far apart in time: here every 8 ms), or, with background_trim, every interval."
    }

    fn weight(&self) -> u64 {
        35
    }

    /// tierpool with background trim first, then tierpool, then `Vec` under each allocator.
    fn contenders(&self) -> Vec<super::Entry> {
        let mut all = vec![
            super::Entry::of(Strategy::TierpoolBackground),
            super::Entry::of(Strategy::Tierpool),
        ];
        all.extend(Allocator::ALL.iter().map(|&a| {
            super::Entry::new(Strategy::Vec.label_under(a), Strategy::Vec.description())
        }));
        all
    }

    /// RSS is per process: one per strategy, allocator and thread count, one at a time.
    fn run(&self, quick: bool) -> Result<Output, String> {
        let mut out = Output::default();
        for (i, t) in thread_counts(quick).iter().enumerate() {
            crate::harness::progress::status(&format!("idle-threads: {t} threads"));
            for (s, a) in Strategy::runs() {
                let what = s.label_under(a);
                let o = crate::harness::children::run_one(self.name(), a, s.id(), Some(i), quick, &what)?;
                out.records.extend(o.records);
            }
        }
        Ok(out)
    }

    fn child(&self, ctx: &Ctx, args: &super::ChildArgs) -> Result<Option<Output>, String> {
        let s = args.strategy(self.name())?;
        let t = args.shape(thread_counts(ctx.quick), "thread count")?;
        Ok(Some(run_one(ctx, s, t)))
    }

    /// A panel per thread count, each with its own scale.
    fn chart(
        &self,
        path: &std::path::Path,
        data: &super::ChartData,
    ) -> Result<(), crate::harness::chart::Error> {
        crate::harness::chart::panels_by_group(
            path,
            "idle-threads: process RSS after the threads went idle, by thread count",
            data.rows,
            data.order,
        )
    }
}
