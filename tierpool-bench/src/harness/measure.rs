//! Timing: calibrated, interleaved, repeated samples; median with min and max.
//!
//! This machine is shared and noisy (a VM that switches between fast and slow modes for
//! seconds at a time), so contenders are never timed one after another: every round takes one
//! sample of every case, in turn, and the figures are the median, min and max over rounds.

use std::time::{Duration, Instant};

use crate::harness::alloc::{counting, AllocCount};

/// How long to measure.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Rounds (samples per case).
    pub samples: usize,
    /// Target duration of one sample.
    pub sample_time: Duration,
    /// Iterations of the separate allocation-counting pass (after warm-up).
    pub count_iters: u64,
}

impl Budget {
    /// The full run's budget for a workload whose cases should each take about `sample_time`
    /// per sample.
    pub fn full(sample_time: Duration) -> Budget {
        Budget {
            samples: 15,
            sample_time,
            count_iters: 1000,
        }
    }

    /// `--quick`: enough to prove that everything runs and the report is well formed.
    pub fn quick() -> Budget {
        Budget {
            samples: 3,
            sample_time: Duration::from_micros(500),
            count_iters: 10,
        }
    }
}

/// Median, min and max of a set of samples.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    /// Median (mean of the middle two for an even count).
    pub median: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Number of samples.
    pub samples: usize,
}

impl Summary {
    /// Summarizes `values` (must not be empty).
    pub fn of(mut values: Vec<f64>) -> Summary {
        assert!(!values.is_empty(), "no samples");
        values.sort_by(f64::total_cmp);
        let n = values.len();
        let median = if n % 2 == 1 {
            values[n / 2]
        } else {
            (values[n / 2 - 1] + values[n / 2]) / 2.0
        };
        Summary {
            median,
            min: values[0],
            max: values[n - 1],
            samples: n,
        }
    }

    /// Every figure scaled by `k`.
    pub fn scaled(self, k: f64) -> Summary {
        Summary {
            median: self.median * k,
            min: self.min * k,
            max: self.max * k,
            samples: self.samples,
        }
    }
}

/// One thing to time: `run(iters)` does `iters` iterations of the workload and returns the
/// time they took (the closure times itself so that it can exclude setup such as spawning
/// threads).
pub struct Case {
    /// Runs `iters` iterations, returns their duration.
    pub run: Box<dyn FnMut(u64) -> Duration>,
    /// Operations per iteration (the unit the result is reported per).
    pub ops_per_iter: f64,
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Case")
            .field("ops_per_iter", &self.ops_per_iter)
            .finish()
    }
}

/// What measuring one case found.
#[derive(Clone, Copy, Debug)]
pub struct Measured {
    /// Nanoseconds per operation.
    pub time: Summary,
    /// Allocations per operation in the counting pass.
    pub allocs_per_op: f64,
    /// Bytes allocated per operation in the counting pass.
    pub bytes_per_op: f64,
}

/// Iterations that make one call of `run` last about `target`, not counting what a call costs
/// however many iterations it runs (spawning threads, say).
///
/// The per-iteration cost is read from the growth between two calls, not from one call's
/// time: a first version divided the first call that took a quarter of `target` by its
/// iterations, so a case whose call spawns 64 threads (`threads`) could stop at 1 iteration
/// if spawning alone took 5 ms on this VM, and then measured thread spawning: 4,778 ns per
/// get+put for tierpool and 6,076 for `Vec` under mimalloc in one full run, 1.7 allocations per
/// operation, against 2.5-5 ns for the same code in other runs.
fn calibrate(run: &mut dyn FnMut(u64) -> Duration, target: Duration) -> u64 {
    let before = run(1);
    grow(run, target, 1, before)
}

/// Most iterations a call may run.
const MAX_ITERS: u64 = 1 << 40;

/// [`calibrate`] from `iters` iterations, whose call took `before`: more iterations until
/// the time they add is half a sample, then a call with the estimate to check it.
fn grow(
    run: &mut dyn FnMut(u64) -> Duration,
    target: Duration,
    mut iters: u64,
    mut before: Duration,
) -> u64 {
    const MAX: u64 = MAX_ITERS;
    loop {
        let more = if before < target / 64 { 8 } else { 2 } * iters;
        let t = run(more);
        // The time the extra iterations added, once it is half a sample: then a fixed cost's
        // noise (joining 64 threads: 0-3 ms per call here) moves the estimate by less than a
        // third.
        let grown = t.saturating_sub(before);
        if grown >= target / 2 || more >= MAX {
            let per = grown.as_secs_f64() / (more - iters) as f64;
            let n = ((target.as_secs_f64() / per.max(1e-12)) as u64).clamp(1, MAX);
            // A stall during the second call inflates `grown`, and too few iterations would
            // then measure the fixed cost: check, and go on growing from there if so (one
            // `Vec` under mimalloc case at 32 threads took 1,479 ns per operation without it).
            let check = run(n);
            if check >= target / 2 || n >= MAX {
                return n;
            }
            (iters, before) = (n, check);
            continue;
        }
        (iters, before) = (more, t);
    }
}

/// Measures every case, interleaved: calibration and one warm-up sample per case, then
/// `budget.samples` rounds of one sample per case, then a counting pass per case.
/// `progress(done, total)` is called after each round.
///
/// Each round starts one case further along ([`round_order`]), so that no case is always the
/// first after the previous round's last, or after whatever ran before the workload: with a
/// fixed order, the first case (tierpool at 4 KiB in `cross-thread`) always followed another
/// pool's 1 MiB hand-off, and was the one row of the full report with a median three times
/// its minimum (86.8 ns, minimum 28.6) while the same code ran at 25.7-29.8 in the next rows
/// and at 27.5 when the workload ran alone.
pub fn measure(
    cases: &mut [Case],
    budget: Budget,
    mut progress: impl FnMut(usize, usize),
) -> Vec<Measured> {
    let target = budget.sample_time;
    let mut iters: Vec<u64> = cases
        .iter_mut()
        .map(|c| calibrate(&mut c.run, target))
        .collect();
    // The warm-up, once every case is calibrated, also checks each count: a stall across
    // two calls of a case's calibration (the workload before this one still exiting, say)
    // passes its check and leaves it too few iterations, and its samples would time what a
    // call costs however many iterations it runs (a consumer thread's start in
    // `cross-thread`: 1,099 ns per buffer where the same case reads 22 ns).
    for (c, n) in cases.iter_mut().zip(&mut iters) {
        let t = (c.run)(*n);
        if t < target / 2 && *n < MAX_ITERS {
            *n = grow(&mut c.run, target, *n, t);
        }
    }
    let mut samples = vec![Vec::with_capacity(budget.samples); cases.len()];
    for round in 0..budget.samples {
        for i in round_order(round, cases.len()) {
            let case = &mut cases[i];
            let t = (case.run)(iters[i]);
            samples[i].push(t.as_nanos() as f64 / (iters[i] as f64 * case.ops_per_iter));
        }
        progress(round + 1, budget.samples);
    }
    cases
        .iter_mut()
        .zip(samples)
        .zip(&iters)
        .map(|((case, s), &n)| {
            let k = budget.count_iters.min(n).max(1);
            let (_, count): (_, AllocCount) = counting(|| (case.run)(k));
            let ops = k as f64 * case.ops_per_iter;
            Measured {
                time: Summary::of(s),
                allocs_per_op: count.allocs as f64 / ops,
                bytes_per_op: count.bytes as f64 / ops,
            }
        })
        .collect()
}

/// The order of the cases in round `round` of `n` cases: all of them, once each, starting at
/// `round % n` and wrapping around.
fn round_order(round: usize, n: usize) -> impl Iterator<Item = usize> {
    (0..n).map(move |k| (round + k) % n)
}

/// Runs `f` and returns how long it took.
#[inline]
pub fn timed(f: impl FnOnce()) -> Duration {
    let t = Instant::now();
    f();
    t.elapsed()
}

/// CPU time of this process so far (user + system, every thread), from `getrusage`.
pub fn cpu_time() -> Duration {
    // SAFETY: `getrusage` writes the struct it is given; zeroed is a valid `rusage`.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to a `rusage`.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A synthetic case: `fixed` per call plus `per` per iteration, no clock involved.
    fn synthetic(fixed: Duration, per: Duration) -> impl FnMut(u64) -> Duration {
        move |n| fixed + per * n as u32
    }

    #[test]
    fn calibration_recovers_from_a_stall() {
        // The 8th call stalls for 30 ms: the first estimate is far too small; the check call
        // sees it and calibration goes on.
        let target = Duration::from_millis(20);
        let mut calls = 0;
        let mut run = |n: u64| {
            calls += 1;
            let stall = if calls == 8 {
                Duration::from_millis(30)
            } else {
                Duration::ZERO
            };
            Duration::from_millis(1) + Duration::from_nanos(10) * n as u32 + stall
        };
        let n = calibrate(&mut run, target);
        assert!(
            (1_500_000..=2_500_000).contains(&n),
            "{n} after {calls} calls"
        );
    }

    /// A stall across two calls of calibration (the growth and its check) leaves too few
    /// iterations; the warm-up after every case is calibrated finds it and grows the count,
    /// so the samples time the iterations, not the cost of a call.
    #[test]
    fn a_count_left_too_small_by_a_stall_is_grown_at_the_warm_up() {
        let mut calls = 0;
        let run = move |n: u64| {
            calls += 1;
            // 1 ms per call (a thread's start), 10 ns per iteration; calls 8 and 9 stall.
            let stall = if calls == 8 || calls == 9 {
                Duration::from_millis(30)
            } else {
                Duration::ZERO
            };
            Duration::from_millis(1) + Duration::from_nanos(10) * n as u32 + stall
        };
        let mut cases = vec![Case {
            run: Box::new(run),
            ops_per_iter: 1.0,
        }];
        let budget = Budget {
            count_iters: 1,
            ..Budget::full(Duration::from_millis(20))
        };
        let m = measure(&mut cases, budget, |_, _| {});
        // 10 ns per operation, and at most half a sample's fixed cost on top (about 10.5).
        assert!(m[0].time.median < 12.0, "{:?}", m[0].time);
    }

    #[test]
    fn calibration_ignores_a_fixed_cost_per_call() {
        let target = Duration::from_millis(20);
        // 5 ms of thread spawning per call, 10 ns per iteration: about 2,000,000 iterations,
        // not 4 (what dividing the first slow call by its iterations gave).
        let n = calibrate(
            &mut synthetic(Duration::from_millis(5), Duration::from_nanos(10)),
            target,
        );
        assert!((1_500_000..=2_500_000).contains(&n), "{n}");
        // No fixed cost: the same answer.
        let n = calibrate(
            &mut synthetic(Duration::ZERO, Duration::from_nanos(10)),
            target,
        );
        assert!((1_500_000..=2_500_000).contains(&n), "{n}");
        // One iteration longer than a sample: one iteration.
        let n = calibrate(
            &mut synthetic(Duration::ZERO, Duration::from_millis(50)),
            target,
        );
        assert_eq!(n, 1);
    }

    #[test]
    fn every_round_runs_every_case_once_and_each_case_leads_in_turn() {
        for n in [1, 2, 5] {
            for round in 0..3 * n {
                let mut order: Vec<usize> = round_order(round, n).collect();
                assert_eq!(order[0], round % n);
                order.sort_unstable();
                assert_eq!(order, (0..n).collect::<Vec<_>>());
            }
        }
        assert_eq!(round_order(0, 0).count(), 0);
    }

    #[test]
    fn summary() {
        let s = Summary::of(vec![3.0, 1.0, 2.0]);
        assert_eq!((s.median, s.min, s.max, s.samples), (2.0, 1.0, 3.0, 3));
        assert_eq!(Summary::of(vec![4.0, 1.0, 2.0, 3.0]).median, 2.5);
    }

    #[test]
    fn measures_and_counts() {
        let mut cases = vec![Case {
            run: Box::new(|iters| {
                timed(|| {
                    for _ in 0..iters {
                        std::hint::black_box(Vec::<u8>::with_capacity(100));
                    }
                })
            }),
            ops_per_iter: 1.0,
        }];
        let m = measure(&mut cases, Budget::quick(), |_, _| {});
        assert!(m[0].time.median > 0.0 && m[0].time.min <= m[0].time.max);
        // The crate's global allocator counts: one `Vec` per iteration (other tests running
        // at the same time can only add to the count).
        assert!(m[0].allocs_per_op >= 1.0, "{:?}", m[0]);
        assert!(m[0].bytes_per_op >= 100.0, "{:?}", m[0]);
    }
}
