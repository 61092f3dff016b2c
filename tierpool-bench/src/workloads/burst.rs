//! `burst` (memory after a burst, as a gRPC-Go server under load sees): a burst of buffers taken at once and released, then a quiet
//! phase at a low rate, with the process's RSS and the pool's retained bytes sampled over
//! time. Each contender runs in its own process (RSS is per process).
//!
//! The table gives the peak and the level two release intervals after the burst. The release
//! interval is tierpool's default decay interval (1 s); allocators and other pools have their
//! own schedules (or none), which is the point of the comparison.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::Ctx;

use crate::harness::alloc::Allocator;
use crate::contenders::{fill_all, with_contender, Contender, Kind, Visit};
use crate::harness::measure::timed;
use crate::harness::record::{Output, Record, Timeline};
use crate::harness::procfs::Proc;

/// Size of every buffer.
pub const SIZE: usize = 16 << 10;

/// The release interval the table's "after" level is taken at (two of them).
pub const INTERVAL: Duration = tierpool::Builder::DEFAULT_DECAY_INTERVAL;

/// Shape of one run.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// Buffers in the burst.
    pub burst: usize,
    /// Length of the quiet phase.
    pub quiet: Duration,
    /// Time between quiet-phase get/puts.
    pub period: Duration,
    /// Time between memory samples.
    pub sample_every: Duration,
    /// When (after the release) the "after" level is read.
    pub after: Duration,
}

impl Shape {
    /// The full or `--quick` shape.
    pub fn new(quick: bool) -> Shape {
        if quick {
            Shape {
                burst: 1_000,
                quiet: Duration::from_millis(300),
                period: Duration::from_millis(1),
                sample_every: Duration::from_millis(20),
                after: Duration::from_millis(280),
            }
        } else {
            Shape {
                burst: 10_000,
                quiet: Duration::from_millis(3_000),
                period: Duration::from_millis(1),
                sample_every: Duration::from_millis(25),
                after: 2 * INTERVAL + INTERVAL / 4,
            }
        }
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

struct OneBurst<'a> {
    shape: Shape,
    label: &'a str,
    allocator: &'a str,
}

/// RSS (and the pool's retained bytes, for a pool) over time, their room allocated before the
/// burst so that it does not sit above the burst's memory in the heap and stop the allocator
/// from giving it back.
struct Samples {
    t_ms: Vec<f64>,
    rss: Vec<f64>,
    retained: Option<Vec<f64>>,
}

impl Samples {
    fn with_room<C: Contender>(c: &C, points: usize) -> Self {
        Samples {
            t_ms: Vec::with_capacity(points),
            rss: Vec::with_capacity(points),
            retained: c.retained_bytes().map(|_| Vec::with_capacity(points)),
        }
    }

    fn push<C: Contender>(&mut self, c: &C, t_ms: f64, rss: u64) {
        self.t_ms.push(t_ms);
        self.rss.push(mib(rss));
        if let (Some(v), Some(r)) = (self.retained.as_mut(), c.retained_bytes()) {
            v.push(mib(r));
        }
    }
}

impl Visit for OneBurst<'_> {
    type Out = Output;

    fn visit<C: Contender>(self, c: C) -> Output {
        let s = self.shape;
        let points = (s.quiet.as_micros() / s.sample_every.as_micros()) as usize + 8;
        let mut samples = Samples::with_room(&c, points);
        let began = Instant::now();
        let baseline = Proc::Me.rss();
        samples.push(&c, 0.0, baseline);
        // The burst: every buffer taken and written in full, then all released.
        let mut bufs = Vec::with_capacity(s.burst);
        let take = timed(|| {
            for i in 0..s.burst {
                let mut b = c.get(SIZE);
                fill_all(&mut b, SIZE, i as u8);
                bufs.push(b);
            }
        });
        let peak = Proc::Me.rss();
        samples.push(&c, began.elapsed().as_secs_f64() * 1e3, peak);
        let release = timed(|| drop(std::mem::take(&mut bufs)));
        let released = Instant::now();
        samples.push(&c, began.elapsed().as_secs_f64() * 1e3, Proc::Me.rss());
        let retained_at_release = c.retained_bytes();
        let (after_rss, after_retained) = quiet(&c, &s, began, released, &mut samples, points);
        let record = |param: &str, metric: &str, value: f64, extra: BTreeMap<String, f64>| {
            Record::single(
                "burst",
                self.label,
                self.allocator,
                param.into(),
                metric,
                value,
                extra,
            )
        };
        let with_retained = |r: Option<u64>| {
            let mut m = BTreeMap::from([("baseline RSS MiB".to_string(), mib(baseline))]);
            if let Some(r) = r {
                m.insert("retained MiB".into(), mib(r));
            }
            m
        };
        let after_label = format!("{} ms after release", s.after.as_millis());
        let records = vec![
            record(
                "burst (take + release)",
                "ms",
                (take + release).as_secs_f64() * 1e3,
                BTreeMap::new(),
            ),
            record(
                "peak",
                "RSS MiB",
                mib(peak),
                with_retained(retained_at_release),
            ),
            record(
                &after_label,
                "RSS MiB",
                mib(after_rss),
                with_retained(after_retained),
            ),
        ];
        Output {
            records,
            timelines: vec![Timeline {
                contender: self.label.into(),
                t_ms: samples.t_ms,
                rss_mib: samples.rss,
                retained_mib: samples.retained,
            }],
        }
    }
}

/// The quiet time after the burst: one get/put per period, RSS sampled (up to `points` in
/// all); returns RSS and the retained bytes at `s.after` past `released`.
fn quiet<C: Contender>(
    c: &C,
    s: &Shape,
    began: Instant,
    released: Instant,
    samples: &mut Samples,
    points: usize,
) -> (u64, Option<u64>) {
    let mut after: Option<(u64, Option<u64>)> = None;
    let mut next_sample = s.sample_every;
    let mut sampled = 3;
    let mut next_op = s.period;
    loop {
        let now = released.elapsed();
        if now >= s.quiet {
            break;
        }
        if now >= next_op {
            let mut b = c.get(SIZE);
            fill_all(&mut b, SIZE, 7);
            drop(b);
            next_op += s.period;
        }
        if now >= next_sample && sampled < points {
            samples.push(c, began.elapsed().as_secs_f64() * 1e3, Proc::Me.rss());
            sampled += 1;
            next_sample += s.sample_every;
        }
        if after.is_none() && now >= s.after {
            after = Some((Proc::Me.rss(), c.retained_bytes()));
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    after.unwrap_or_else(|| (Proc::Me.rss(), c.retained_bytes()))
}

/// Runs the burst for one contender in this process (the parent starts one process per
/// contender).
pub fn run_one(ctx: &Ctx, kind: Kind) -> Output {
    let label = kind.label(ctx.alloc);
    with_contender(
        kind,
        OneBurst {
            shape: Shape::new(ctx.quick),
            label: &label,
            allocator: ctx.alloc.name(),
        },
    )
}

/// The `burst` workload.
#[derive(Debug)]
pub struct Burst;

impl super::Scenario for Burst {
    fn name(&self) -> &'static str {
        "burst"
    }

    /// No allocation counts: it measures memory, not operations.
    fn counts_allocations(&self) -> bool {
        false
    }

    fn describe(&self) -> &'static str {
        "Memory after a burst, as a gRPC-Go server under load sees it: 10,000 x 16 KiB taken at once and released, then one get/put per millisecond; RSS and retained bytes over time (each contender in its own process)."
    }

    fn weight(&self) -> u64 {
        30
    }

    fn contenders(&self) -> Vec<super::Entry> {
        super::kind_entries()
    }

    /// RSS is per process: every contender in its own, two at a time (one per core).
    /// tierpool and the `Vec` baseline run under every allocator (whether freed memory leaves
    /// the process is the allocator's policy), the other pools under glibc; tierpool asking
    /// jemalloc or mimalloc to purge runs under those two (under glibc it is tierpool's
    /// default).
    fn run(&self, quick: bool) -> Result<Output, String> {
        let mut runs = Vec::new();
        for k in Kind::ALL
            .into_iter()
            .filter(|&k| k != Kind::TierpoolBudget)
            .chain(Kind::EXTRA)
        {
            let allocs: &[Allocator] = match k {
                Kind::Vec | Kind::Tierpool => &Allocator::ALL,
                Kind::TierpoolPurge => &[Allocator::Mimalloc, Allocator::Jemalloc],
                _ => &[Allocator::System],
            };
            runs.extend(allocs.iter().map(|&a| (k, a)));
        }
        crate::harness::progress::line(&format!(
            "  burst: {} processes, two at a time, {} ms each",
            runs.len(),
            Shape::new(quick).quiet.as_millis()
        ));
        let pairs = runs.len().div_ceil(2);
        let mut out = Output::default();
        for (i, pair) in runs.chunks(2).enumerate() {
            crate::harness::progress::status(&format!(
                "burst: processes {} of {pairs} pairs ({})",
                i + 1,
                pair.iter()
                    .map(|&(k, a)| k.label(a))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            let children = pair
                .iter()
                .map(|&(k, a)| {
                    let child = crate::harness::children::spawn(self.name(), a, k.id(), None, quick)?;
                    Ok((k.label(a), child))
                })
                .collect::<Result<Vec<_>, String>>()?;
            for (label, c) in children {
                let o = crate::harness::children::collect(c, &label)?;
                out.records.extend(o.records);
                out.timelines.extend(o.timelines);
            }
        }
        Ok(out)
    }

    fn child(&self, ctx: &Ctx, args: &super::ChildArgs) -> Result<Option<Output>, String> {
        Ok(Some(super::merge(
            args.kinds()?.into_iter().map(|k| run_one(ctx, k)),
        )))
    }

    /// RSS over time, a panel per allocator.
    fn chart(
        &self,
        path: &std::path::Path,
        data: &super::ChartData,
    ) -> Result<(), crate::harness::chart::Error> {
        // The report's timelines are every workload's: this one's are its contenders'.
        let mine: Vec<crate::harness::record::Timeline> = data
            .timelines
            .iter()
            .filter(|t| data.order.contains(&t.contender))
            .cloned()
            .collect();
        crate::harness::chart::timelines(
            path,
            "burst: process RSS, 16 KiB buffers taken at once, released, then 1 get/put per ms",
            "ms since the burst began (taken at once, then released)",
            &mine,
        )
    }
}
