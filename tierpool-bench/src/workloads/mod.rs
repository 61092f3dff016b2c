//! The workloads of the report, one module each; each module's [`Scenario`] says everything
//! the report knows about its workload, and [`Workload::ALL`] lists them in report order.
//!
//! Every workload returns an [`Output`]: records (and, for `burst`, timelines). Timed work
//! goes through [`crate::harness::measure`]: interleaved rounds, medians, and a separate
//! allocation-counting pass.

pub mod files;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crate::contenders::{with_contender, Kind, Visit};
use crate::harness::alloc::Allocator;
use crate::harness::chart;
use crate::harness::children::{self, ALL_KINDS};
use crate::harness::measure::{measure, Budget, Case, Measured};
use crate::harness::record::{Output, Record, Timeline};

/// Everything the report knows about one workload: what it asks, who competes, how it runs
/// (in the report's process and in its children), and how it is drawn. One implementation per
/// workload, in the workload's module.
pub trait Scenario: Sync {
    /// The name on the command line, in the JSON and in the report.
    fn name(&self) -> &'static str;

    /// What the workload measures and what it is modelled on, for the report's headings.
    fn describe(&self) -> &'static str;

    /// Seconds it usually takes in the full run (2 cores; `--quick` is proportionally
    /// shorter): its weight on the progress bar.
    fn weight(&self) -> u64;

    /// The contenders, in report order (tables and charts), with how each is set up.
    fn contenders(&self) -> Vec<Entry>;

    /// The contender every row is also compared with (the table's last column).
    fn baseline(&self) -> String {
        Kind::Vec.label(Allocator::System)
    }

    /// True if its records carry allocation counts (the report's check then requires them).
    /// A workload that measures memory rather than operations, counts instructions, or
    /// measures a server process of its own (which counts nothing) says false.
    fn counts_allocations(&self) -> bool {
        true
    }

    /// `Err(why)` if this machine cannot run the workload (a missing tool, a refusing
    /// kernel): the report then skips it, saying why.
    fn available(&self, _quick: bool) -> Result<(), String> {
        Ok(())
    }

    /// Runs the workload for the report (in the parent process, which starts what children
    /// it needs).
    fn run(&self, quick: bool) -> Result<Output, String>;

    /// Runs one child process's share ([`crate::harness::children`]); `None` if it prints nothing.
    fn child(&self, ctx: &Ctx, args: &ChildArgs) -> Result<Option<Output>, String>;

    /// Draws the workload's chart at `path`: by default a line per contender of its median
    /// over the parameters.
    fn chart(&self, path: &Path, data: &ChartData) -> Result<(), chart::Error> {
        chart::by_param(path, &data.title(self.name()), data.rows, data.order)
    }
}

/// A workload: a handle on its [`Scenario`], compared by name.
#[derive(Clone, Copy)]
pub struct Workload(&'static dyn Scenario);

/// Declares each workload's module and lists its [`Scenario`] in [`Workload::ALL`], in report
/// order: a workload is its module's file and one line here.
macro_rules! workloads {
    ($($module:ident => $scenario:expr),* $(,)?) => {
        $(pub mod $module;)*

        impl Workload {
            /// Every workload, in report order: the one list.
            pub const ALL: &'static [Workload] = &[$(Workload(&$scenario)),*];
        }
    };
}

workloads! {
    lookup => lookup::Lookup,
    get_put => get_put::WORKLOAD,
    instructions => instructions::Instructions,
    mixed => mixed::WORKLOAD,
    cross_thread => cross_thread::WORKLOAD,
    burst => burst::Burst,
    threads => threads::WORKLOAD,
    streaming => streaming::Streaming,
    budget => budget::Budget,
    file_read => file_read::FileRead,
    idle_threads => idle_threads::IdleThreads,
    direct_read => direct_read::DirectRead,
    connections => connections::Connections,
    http => http::Http,
    redis => redis::Redis,
    grpc => grpc::Grpc,
    uploads => uploads::Uploads,
    soak => soak::Soak,
}

impl Workload {
    /// The workload named `name` ([`Scenario::name`]).
    pub fn from_name(name: &str) -> Option<Workload> {
        Workload::ALL.iter().copied().find(|w| w.name() == name)
    }

    /// Its contenders' labels, in report order.
    pub fn order(self) -> Vec<String> {
        self.contenders().into_iter().map(|e| e.label).collect()
    }
}

impl std::ops::Deref for Workload {
    type Target = dyn Scenario;
    fn deref(&self) -> &(dyn Scenario + 'static) {
        self.0
    }
}

impl PartialEq for Workload {
    fn eq(&self, other: &Workload) -> bool {
        self.name() == other.name()
    }
}

impl Eq for Workload {}

impl std::fmt::Debug for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::fmt::Display for Workload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A contender of a workload: its label in tables and charts, and how it is set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The label.
    pub label: String,
    /// How it is set up (the report's list of contenders).
    pub setup: String,
}

impl Entry {
    /// An entry.
    pub fn new(label: impl Into<String>, setup: impl Into<String>) -> Entry {
        Entry {
            label: label.into(),
            setup: setup.into(),
        }
    }

    /// The entry of a strategy ([`crate::harness::choice::Choice`]).
    pub fn of<S: crate::harness::choice::Choice>(s: S) -> Entry {
        Entry::new(s.label(), s.description())
    }
}

/// The pool contenders in report order, each under every allocator (tierpool asking the
/// allocator to purge right after tierpool): the workloads that run [`Kind`]s.
pub fn kind_entries() -> Vec<Entry> {
    Kind::ALL
        .into_iter()
        .flat_map(|k| match k {
            Kind::Tierpool => vec![k, Kind::TierpoolPurge],
            _ => vec![k],
        })
        .flat_map(|k| {
            Allocator::ALL
                .into_iter()
                .map(move |a| Entry::new(k.label(a), k.adaptation()))
        })
        .collect()
}

/// Every contender of every workload in report order (first appearance) with its set-up:
/// a label several workloads share gets each different set-up once, joined by "; ".
pub fn contenders() -> Vec<Entry> {
    let mut all: Vec<(String, Vec<String>)> = Vec::new();
    for w in Workload::ALL {
        for e in w.contenders() {
            let i = match all.iter().position(|(label, _)| *label == e.label) {
                Some(i) => i,
                None => {
                    all.push((e.label, Vec::new()));
                    all.len() - 1
                }
            };
            let setups = &mut all[i].1;
            if !e.setup.is_empty() && !setups.contains(&e.setup) {
                setups.push(e.setup);
            }
        }
    }
    all.into_iter()
        .map(|(label, setups)| Entry::new(label, setups.join("; ")))
        .collect()
}

/// A child process's orders, from its command line.
#[derive(Clone, Debug, Default)]
pub struct ChildArgs {
    /// `--contender`: the contender, strategy or run.
    pub contender: Option<String>,
    /// `--shape`: the index of a shape, block size or thread count.
    pub shape: Option<usize>,
    /// `--size`: a size in bytes.
    pub size: Option<usize>,
}

impl ChildArgs {
    /// `--contender`, which this child needs.
    pub fn contender(&self) -> Result<&str, String> {
        self.contender
            .as_deref()
            .ok_or_else(|| "--contender needed".to_string())
    }

    /// `--contender` as a strategy of `workload`.
    pub fn strategy<S: crate::harness::choice::Choice>(&self, workload: &str) -> Result<S, String> {
        let id = self.contender()?;
        S::from_id(id).ok_or(format!("unknown {workload} strategy {id}"))
    }

    /// The `--shape`th of `shapes` (the first without `--shape`).
    pub fn shape<T: Copy>(&self, shapes: &[T], what: &str) -> Result<T, String> {
        shapes
            .get(self.shape.unwrap_or(0))
            .copied()
            .ok_or(format!("no such {what}"))
    }

    /// The contenders of a child of a [`Kind`] workload: every one (`all`), one, or the
    /// `Vec` baseline.
    pub fn kinds(&self) -> Result<Vec<Kind>, String> {
        Ok(match self.contender.as_deref() {
            Some(ALL_KINDS) => Kind::ALL.to_vec(),
            Some(id) => vec![Kind::from_id(id).ok_or(format!("unknown contender {id}"))?],
            None => vec![Kind::Vec],
        })
    }
}

/// What a chart is drawn from.
#[derive(Clone, Copy, Debug)]
pub struct ChartData<'a> {
    /// The workload's records, in table order.
    pub rows: &'a [&'a Record],
    /// Its contenders, in report order.
    pub order: &'a [String],
    /// Memory over time (burst, soak), every workload's: each chart takes its own.
    pub timelines: &'a [Timeline],
}

impl ChartData<'_> {
    /// `name: metric`.
    pub fn title(&self, name: &str) -> String {
        format!(
            "{name}: {}",
            self.rows.first().map_or("", |r| r.metric.as_str())
        )
    }
}

/// The parent's run of a workload of [`Kind`]s (`get-put`, `mixed`, `cross-thread`,
/// `threads`): every contender in one child under glibc, then the `Vec` baseline in one child
/// per other allocator.
///
/// Every workload runs in a fresh process, so that none inherits another's heap, thread
/// caches or leaked crate pools (a first version ran them all in the parent, and tierpool's
/// 64 KiB hand-off measured 2-4x slower after the mixed workload than alone).
pub fn run_kinds_in_children(workload: &str, quick: bool) -> Result<Output, String> {
    let mut out = children::run_one(
        workload,
        Allocator::System,
        ALL_KINDS,
        None,
        quick,
        "the glibc contenders",
    )?;
    for a in [Allocator::Mimalloc, Allocator::Jemalloc] {
        let o = children::run_one(
            workload,
            a,
            Kind::Vec.id(),
            None,
            quick,
            &Kind::Vec.label(a),
        )?;
        out.records.extend(o.records);
        out.timelines.extend(o.timelines);
    }
    Ok(out)
}

/// A workload that runs every pool contender ([`Kind`]) on one loop, in
/// [`run_kinds_in_children`]: `get-put`, `mixed`, `cross-thread` and `threads`, each a
/// constant of this in its module.
#[derive(Debug)]
pub struct OfKinds {
    /// [`Scenario::name`].
    pub name: &'static str,
    /// [`Scenario::describe`].
    pub describe: &'static str,
    /// [`Scenario::weight`].
    pub weight: u64,
    /// Runs it in this process for these contenders.
    pub run: fn(&Ctx, &[Kind]) -> Output,
}

impl Scenario for OfKinds {
    fn name(&self) -> &'static str {
        self.name
    }

    fn describe(&self) -> &'static str {
        self.describe
    }

    fn weight(&self) -> u64 {
        self.weight
    }

    fn contenders(&self) -> Vec<Entry> {
        kind_entries()
    }

    fn run(&self, quick: bool) -> Result<Output, String> {
        run_kinds_in_children(self.name, quick)
    }

    fn child(&self, ctx: &Ctx, args: &ChildArgs) -> Result<Option<Output>, String> {
        Ok(Some((self.run)(ctx, &args.kinds()?)))
    }
}

/// Concatenates outputs.
pub fn merge(outputs: impl IntoIterator<Item = Output>) -> Output {
    let mut out = Output::default();
    for o in outputs {
        out.records.extend(o.records);
        out.timelines.extend(o.timelines);
    }
    out
}

/// Drops repeated labels, keeping the first.
pub fn dedup(labels: &mut Vec<String>) {
    let mut seen = HashSet::new();
    labels.retain(|l| seen.insert(l.clone()));
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
            crate::harness::progress::status(&format!("{label}: round {done}/{total}"));
            if done == total {
                crate::harness::progress::status_done();
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
