//! The report's verdict: for each workload, tierpool against the best other contender, a win,
//! a draw or a loss by one noise rule ([`NOISE`]), so that a reader sees first where the pool
//! pays and where it does not, and follows the link to the workload's table for the why.

use std::fmt;

use crate::harness::record::{fmt_num, Record};

/// Differences up to this fraction of the better figure are a draw: single-thread times on
/// this shared machine drift 10-30% between runs (BENCHMARKS.md, *Noise*); medians taken in
/// one run's interleaved rounds are steadier, and 15% is the line the prose draws too.
pub const NOISE: f64 = 0.15;

/// True for a contender that is tierpool or one of its ways (`tierpool (budget)`,
/// `tonic + tierpool`, `PooledChain::into_view_frames, ...`, `kv_server pooled, ...`).
pub fn is_tierpool(contender: &str) -> bool {
    contender.contains("tierpool") || contender.to_ascii_lowercase().contains("pooled")
}

/// True if a smaller figure of `metric` is better: times, instructions, bytes, syscalls are;
/// a rate (`/s`), a count of requests served and a ratio with a floor (`>=`) are not.
pub fn lower_is_better(metric: &str) -> bool {
    !(metric.ends_with("/s") || metric.contains(">=") || metric == "requests")
}

/// One comparison's outcome for tierpool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Better by more than [`NOISE`].
    Win,
    /// Within [`NOISE`].
    Draw,
    /// Worse by more than [`NOISE`].
    Loss,
}

impl Outcome {
    /// The outcome of an advantage (the other's figure over tierpool's, turned so that above
    /// 1 favours tierpool).
    pub fn of(advantage: f64) -> Outcome {
        if advantage > 1.0 + NOISE {
            Outcome::Win
        } else if advantage < 1.0 / (1.0 + NOISE) {
            Outcome::Loss
        } else {
            Outcome::Draw
        }
    }
}

/// One parameter and metric of a workload: tierpool's best row against the best other row.
#[derive(Clone, Debug)]
pub struct Comparison<'a> {
    /// Tierpool's best row (of its ways, the best figure).
    pub ours: &'a Record,
    /// The best row of every other contender.
    pub theirs: &'a Record,
    /// `theirs` over `ours`, turned so that above 1 favours tierpool.
    pub advantage: f64,
    /// What [`NOISE`] makes of it.
    pub outcome: Outcome,
}

/// A workload's verdict: its comparisons, and what they add up to.
#[derive(Clone, Debug)]
pub struct Verdict<'a> {
    /// The workload.
    pub workload: &'a str,
    /// One per parameter and metric measured for tierpool and for another contender.
    pub comparisons: Vec<Comparison<'a>>,
    /// Rows of tierpool's ways, and of the others, in the workload.
    ours: usize,
    theirs: usize,
}

/// What a workload's comparisons add up to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Summary {
    /// At least one win and no loss.
    Win,
    /// Every comparison a draw.
    Draw,
    /// At least one loss and no win.
    Loss,
    /// Wins and losses both.
    Mixed,
    /// Nothing to compare: tierpool alone, only its own ways, or no tierpool figure.
    NotCompared,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Summary::Win => "win",
            Summary::Draw => "draw",
            Summary::Loss => "loss",
            Summary::Mixed => "mixed",
            Summary::NotCompared => "not compared",
        })
    }
}

impl<'a> Verdict<'a> {
    /// The verdict of one workload's `rows`: for every parameter and metric, tierpool's best
    /// figure against the best of the others.
    pub fn of(workload: &'a str, rows: &[&'a Record]) -> Verdict<'a> {
        let mut keys: Vec<(&str, &str)> = Vec::new();
        for r in rows {
            if !keys.contains(&(r.param.as_str(), r.metric.as_str())) {
                keys.push((&r.param, &r.metric));
            }
        }
        let comparisons = keys
            .into_iter()
            .filter_map(|(param, metric)| {
                let lower = lower_is_better(metric);
                let best = |ours: bool| {
                    rows.iter()
                        .copied()
                        .filter(|r| r.param == param && r.metric == metric)
                        .filter(|r| is_tierpool(&r.contender) == ours)
                        // A ratio of figures needs both positive (a delta can be negative).
                        .filter(|r| r.median > 0.0 && r.median.is_finite())
                        .min_by(|a, b| {
                            let (a, b) = if lower { (a, b) } else { (b, a) };
                            a.median.total_cmp(&b.median)
                        })
                };
                let (ours, theirs) = (best(true)?, best(false)?);
                let advantage = if lower {
                    theirs.median / ours.median
                } else {
                    ours.median / theirs.median
                };
                Some(Comparison {
                    ours,
                    theirs,
                    advantage,
                    outcome: Outcome::of(advantage),
                })
            })
            .collect();
        let ours = rows.iter().filter(|r| is_tierpool(&r.contender)).count();
        Verdict {
            workload,
            comparisons,
            ours,
            theirs: rows.len() - ours,
        }
    }

    /// How many comparisons tierpool won, drew and lost.
    pub fn counts(&self) -> (usize, usize, usize) {
        let n = |o| self.comparisons.iter().filter(|c| c.outcome == o).count();
        (n(Outcome::Win), n(Outcome::Draw), n(Outcome::Loss))
    }

    /// What the comparisons add up to.
    pub fn summary(&self) -> Summary {
        match self.counts() {
            (0, 0, 0) => Summary::NotCompared,
            (0, _, 0) => Summary::Draw,
            (_, _, 0) => Summary::Win,
            (0, _, _) => Summary::Loss,
            _ => Summary::Mixed,
        }
    }

    /// `won 3, drawn 1, lost 0 of 4`, or why nothing was compared.
    pub fn tally(&self) -> String {
        match self.counts() {
            (0, 0, 0) if self.ours == 0 => "no tierpool figure".into(),
            (0, 0, 0) if self.theirs == 0 => "tierpool's own ways only".into(),
            (0, 0, 0) => "no parameter measured for both".into(),
            (w, d, l) => format!("won {w}, drawn {d}, lost {l} of {}", w + d + l),
        }
    }

    /// The range of tierpool's advantage over the best other contender (`0.95x-8.3x`; one
    /// figure if there is one comparison), `-` if there is none.
    pub fn range(&self) -> String {
        let (lo, hi) = self
            .comparisons
            .iter()
            .fold((f64::INFINITY, 0.0_f64), |(lo, hi), c| {
                (lo.min(c.advantage), hi.max(c.advantage))
            });
        if self.comparisons.is_empty() {
            "-".into()
        } else if fmt_num(lo) == fmt_num(hi) {
            format!("{}x", fmt_num(lo))
        } else {
            format!("{}x-{}x", fmt_num(lo), fmt_num(hi))
        }
    }

    /// The other contenders that were best somewhere, in first-seen order.
    pub fn rivals(&self) -> Vec<&'a str> {
        let mut out: Vec<&str> = Vec::new();
        for c in &self.comparisons {
            if !out.contains(&c.theirs.contender.as_str()) {
                out.push(&c.theirs.contender);
            }
        }
        out
    }
}

/// How the verdict is read (above its table).
pub const READING: &str = "For each workload, tierpool's best figure against the best other contender's, parameter by parameter: a win or a loss when one is better by more than 15% (this shared machine's noise), a draw within it; a parameter without a positive figure from both sides is not compared. The advantage is the other's figure over tierpool's, above 1 in tierpool's favour.";

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn row(contender: &str, param: &str, metric: &str, median: f64) -> Record {
        Record::single(
            "w",
            contender,
            "glibc",
            param.into(),
            metric,
            median,
            BTreeMap::new(),
        )
    }

    #[test]
    fn each_parameter_is_tierpools_best_against_the_best_other() {
        let rows = [
            row("tierpool", "4 KiB", "ns/op", 10.0),
            row("tierpool (budget)", "4 KiB", "ns/op", 8.0),
            row("Vec (glibc)", "4 KiB", "ns/op", 30.0),
            row("Vec (jemalloc)", "4 KiB", "ns/op", 20.0),
            // Within the noise.
            row("tierpool", "1 MiB", "ns/op", 100.0),
            row("opool 0.2", "1 MiB", "ns/op", 110.0),
            // A loss.
            row("tonic + tierpool", "1 MiB x 150", "ns/round trip", 130.0),
            row("tonic", "1 MiB x 150", "ns/round trip", 100.0),
            // Higher is better for a rate.
            row("tierpool", "rate", "msgs/s", 200.0),
            row("Vec (glibc)", "rate", "msgs/s", 100.0),
            // No other contender for this one: not compared.
            row("tierpool", "alone", "ns/op", 1.0),
        ];
        let refs: Vec<&Record> = rows.iter().collect();
        let v = Verdict::of("w", &refs);
        assert_eq!(v.comparisons.len(), 4);
        let c = &v.comparisons[0];
        assert_eq!(
            (c.ours.contender.as_str(), c.theirs.contender.as_str()),
            ("tierpool (budget)", "Vec (jemalloc)")
        );
        assert_eq!((c.advantage, c.outcome), (2.5, Outcome::Win));
        assert_eq!(v.comparisons[1].outcome, Outcome::Draw);
        assert_eq!(v.comparisons[2].outcome, Outcome::Loss);
        assert_eq!(
            (v.comparisons[3].advantage, v.comparisons[3].outcome),
            (2.0, Outcome::Win)
        );
        assert_eq!(v.counts(), (2, 1, 1));
        assert_eq!(v.summary(), Summary::Mixed);
        assert_eq!(v.tally(), "won 2, drawn 1, lost 1 of 4");
        assert_eq!(v.range(), "0.77x-2.50x");
        assert_eq!(
            v.rivals(),
            ["Vec (jemalloc)", "opool 0.2", "tonic", "Vec (glibc)"]
        );
    }

    #[test]
    fn summaries_and_the_noise_line() {
        assert_eq!(Outcome::of(1.16), Outcome::Win);
        assert_eq!(Outcome::of(1.0 + NOISE), Outcome::Draw);
        assert_eq!(Outcome::of(1.0 / (1.0 + NOISE)), Outcome::Draw);
        assert_eq!(Outcome::of(0.86), Outcome::Loss);
        assert_eq!(Outcome::of(0.9), Outcome::Draw);
        let rows = [
            row("tierpool", "a", "ns/op", 1.0),
            row("tierpool, no budget", "a", "ns/op", 1.0),
        ];
        let refs: Vec<&Record> = rows.iter().collect();
        let alone = Verdict::of("budget", &refs);
        assert_eq!(alone.summary(), Summary::NotCompared);
        assert_eq!(
            (alone.tally().as_str(), alone.range().as_str()),
            ("tierpool's own ways only", "-")
        );
        let rows = [
            row("tierpool", "a", "ns/op", 1.0),
            row("Vec (glibc)", "a", "ns/op", 1.1),
        ];
        let refs: Vec<&Record> = rows.iter().collect();
        let v = Verdict::of("w", &refs);
        assert_eq!(
            (v.summary(), v.range()),
            (Summary::Draw, "1.10x".to_string())
        );
        // No tierpool row (its run failed, say), or a figure that is not positive: nothing
        // compared, and the tally says why.
        let others = [row("Vec (glibc)", "a", "ns/op", 1.0)];
        let refs: Vec<&Record> = others.iter().collect();
        assert_eq!(Verdict::of("w", &refs).tally(), "no tierpool figure");
        let zero = [
            row("tierpool", "a", "ns/op", 0.0),
            row("Vec (glibc)", "a", "ns/op", 1.0),
        ];
        let refs: Vec<&Record> = zero.iter().collect();
        let v = Verdict::of("w", &refs);
        assert_eq!(v.summary(), Summary::NotCompared);
        assert_eq!(v.tally(), "no parameter measured for both");
        assert!(!lower_is_better("ratio (target >= 0.9)") && lower_is_better("RSS MiB"));
        assert!(is_tierpool("(b) tierpool read_ready_exact (tokio)"));
        assert!(is_tierpool(
            "PooledChain::into_view_frames, a frame per view (hyper)"
        ));
        assert!(is_tierpool("kv_server pooled, under a budget"));
        assert!(!is_tierpool("Full<Bytes> from a fresh Vec (hyper)"));
        assert!(!is_tierpool("one reused Vec (compio read_at)"));
    }
}
