//! A run's records: one measurement each ([`Record`]), what a child prints ([`Output`]), the
//! whole run as `results.json` ([`Report`]), its validation and the merging of runs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// One measurement: one contender, one parameter, one metric.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Record {
    /// Workload name (`lookup`, `get-put`, ...).
    pub workload: String,
    /// Contender label (`tierpool`, `Vec (jemalloc)`, ...).
    pub contender: String,
    /// The global allocator of the process that measured it.
    pub allocator: String,
    /// The parameter this row varies (`4 KiB`, `9 tiers`, `8 threads`, ...).
    pub param: String,
    /// What `median`/`min`/`max` measure, with its unit (`ns/op`, `MiB`, ...).
    pub metric: String,
    /// Median over samples.
    pub median: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Number of samples.
    pub samples: usize,
    /// Allocations per operation (counting pass), where meaningful.
    pub allocs_per_op: Option<f64>,
    /// Bytes allocated per operation (counting pass), where meaningful.
    pub bytes_per_op: Option<f64>,
    /// Further figures (false hits, retained bytes, ...), by name.
    #[serde(default)]
    pub extra: BTreeMap<String, f64>,
}

impl Record {
    /// A row of one figure (a reading, not timed samples): `value` as its median, min and max,
    /// no allocation figures, `extra` beside it.
    pub fn single(
        workload: &str,
        contender: &str,
        allocator: &str,
        param: String,
        metric: &str,
        value: f64,
        extra: BTreeMap<String, f64>,
    ) -> Record {
        Record {
            workload: workload.into(),
            contender: contender.into(),
            allocator: allocator.into(),
            param,
            metric: metric.into(),
            median: value,
            min: value,
            max: value,
            samples: 1,
            allocs_per_op: None,
            bytes_per_op: None,
            extra,
        }
    }
}

/// Memory over time for one contender (the burst workload).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Timeline {
    /// Contender label.
    pub contender: String,
    /// Milliseconds since the burst was released.
    pub t_ms: Vec<f64>,
    /// Process RSS in MiB at each point.
    pub rss_mib: Vec<f64>,
    /// Bytes the pool retains, in MiB, where the pool can say.
    pub retained_mib: Option<Vec<f64>>,
}

/// What a process (parent or child) measured.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Output {
    /// One record per measurement.
    pub records: Vec<Record>,
    /// Burst timelines.
    #[serde(default)]
    pub timelines: Vec<Timeline>,
}

/// The whole report, as written to `results.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// The command line that produced it.
    pub command: String,
    /// `--quick` (figures prove the pipeline, not performance).
    pub quick: bool,
    /// `nproc`, CPU model, OS.
    pub machine: BTreeMap<String, String>,
    /// The workloads that ran.
    pub workloads: Vec<String>,
    /// How each contender was set up, by label.
    pub contenders: BTreeMap<String, String>,
    /// Every measurement.
    pub records: Vec<Record>,
    /// Burst timelines.
    pub timelines: Vec<Timeline>,
}

/// Facts about this machine for the report.
pub fn machine() -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    m.insert("nproc".into(), cpus.to_string());
    if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") {
        if let Some(model) = info
            .lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split(':').nth(1))
        {
            m.insert("cpu".into(), model.trim().to_string());
        }
    }
    if let Ok(mem) = std::fs::read_to_string("/proc/meminfo") {
        if let Some(total) = mem.lines().find(|l| l.starts_with("MemTotal")) {
            m.insert(
                "memory".into(),
                total.trim_start_matches("MemTotal:").trim().into(),
            );
        }
    }
    m.insert("os".into(), std::env::consts::OS.into());
    m
}

/// `1.5 ns`-style figure with sensible precision.
pub fn fmt_num(x: f64) -> String {
    let a = x.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1000.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 0.1 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// Checks a `results.json`: it parses, every workload in `expected` has records, every
/// figure is finite and positive (allocation counts and extras finite and not negative), and
/// every record of a workload not in `uncounted` has allocation counts. Returns the number of
/// records checked.
pub fn validate(json: &str, expected: &[&str], uncounted: &[&str]) -> Result<usize, String> {
    let report: Report = serde_json::from_str(json).map_err(|e| format!("not a report: {e}"))?;
    check(&report, expected, uncounted)
}

/// [`validate`] on a report in memory (run before writing, since JSON has no NaN: a
/// non-finite figure would be written as `null`).
pub fn check(report: &Report, expected: &[&str], uncounted: &[&str]) -> Result<usize, String> {
    for w in expected {
        if !report.records.iter().any(|r| r.workload == *w) {
            return Err(format!("workload {w} has no records"));
        }
        if !report.workloads.iter().any(|x| x == w) {
            return Err(format!("workload {w} not listed"));
        }
    }
    for r in &report.records {
        let what = format!(
            "{} / {} / {} / {}",
            r.workload, r.contender, r.param, r.metric
        );
        for (name, x) in [("median", r.median), ("min", r.min), ("max", r.max)] {
            if !x.is_finite() || x <= 0.0 {
                return Err(format!("{what}: {name} = {x} is not finite and positive"));
            }
        }
        if !(r.min <= r.median && r.median <= r.max) {
            return Err(format!("{what}: min/median/max out of order"));
        }
        if r.samples == 0 {
            return Err(format!("{what}: no samples"));
        }
        let timed = !uncounted.contains(&r.workload.as_str());
        if timed && (r.allocs_per_op.is_none() || r.bytes_per_op.is_none()) {
            return Err(format!("{what}: allocation figures missing"));
        }
        let others = [r.allocs_per_op, r.bytes_per_op]
            .into_iter()
            .flatten()
            .chain(r.extra.values().copied());
        for x in others {
            if !x.is_finite() || x < 0.0 {
                return Err(format!("{what}: figure {x} is not finite and non-negative"));
            }
        }
        if !report.contenders.contains_key(&r.contender) {
            return Err(format!("{what}: contender not described"));
        }
    }
    for t in &report.timelines {
        let n = t.t_ms.len();
        if n == 0 || t.rss_mib.len() != n || t.retained_mib.as_ref().is_some_and(|v| v.len() != n) {
            return Err(format!("timeline of {}: ragged or empty", t.contender));
        }
        if t.t_ms.iter().chain(&t.rss_mib).any(|x| !x.is_finite()) {
            return Err(format!("timeline of {}: not finite", t.contender));
        }
    }
    Ok(report.records.len())
}

/// Merges the records of several rounds: for each contender and parameter, the median, min and
/// max of the rounds' figures, and the median of every other figure.
pub fn merge_rounds(records: Vec<Record>) -> Vec<Record> {
    let mut groups: Vec<Vec<Record>> = Vec::new();
    for r in records {
        match groups
            .iter_mut()
            .find(|g| g[0].contender == r.contender && g[0].param == r.param)
        {
            Some(g) => g.push(r),
            None => groups.push(vec![r]),
        }
    }
    let median =
        |mut v: Vec<f64>| crate::harness::measure::Summary::of(std::mem::take(&mut v)).median;
    groups
        .into_iter()
        .map(|g| {
            let s = crate::harness::measure::Summary::of(g.iter().map(|r| r.median).collect());
            let mut out = g[0].clone();
            out.median = s.median;
            out.min = s.min;
            out.max = s.max;
            out.samples = g.len();
            out.allocs_per_op = g[0]
                .allocs_per_op
                .map(|_| median(g.iter().filter_map(|r| r.allocs_per_op).collect()));
            out.bytes_per_op = g[0]
                .bytes_per_op
                .map(|_| median(g.iter().filter_map(|r| r.bytes_per_op).collect()));
            for (k, v) in out.extra.iter_mut() {
                *v = median(g.iter().filter_map(|r| r.extra.get(k).copied()).collect());
            }
            out
        })
        .collect()
}

/// One report from reports of runs that chose different workloads (CI runs its quick report
/// as two processes side by side): their workloads in `order` (the report's), their
/// contenders, records and timelines together. Errors if the runs disagree on `--quick`, a
/// workload ran twice, or a contender was set up two ways.
pub fn merge(parts: Vec<Report>, order: &[&str]) -> Result<Report, String> {
    let Some(first) = parts.first() else {
        return Err("nothing to merge".into());
    };
    let (quick, machine) = (first.quick, first.machine.clone());
    let mut merged = Report {
        command: String::new(),
        quick,
        machine,
        workloads: Vec::new(),
        contenders: BTreeMap::new(),
        records: Vec::new(),
        timelines: Vec::new(),
    };
    let mut commands = Vec::new();
    for part in parts {
        if part.quick != quick {
            return Err("one run was --quick and another was not".into());
        }
        for w in part.workloads {
            if merged.workloads.contains(&w) {
                return Err(format!("workload {w} ran in two of the runs"));
            }
            merged.workloads.push(w);
        }
        for (label, setup) in part.contenders {
            match merged.contenders.get(&label) {
                Some(s) if *s != setup => {
                    return Err(format!("contender {label} was set up two ways"));
                }
                _ => {
                    merged.contenders.insert(label, setup);
                }
            }
        }
        merged.records.extend(part.records);
        merged.timelines.extend(part.timelines);
        commands.push(part.command);
    }
    let rank = |w: &String| order.iter().position(|o| o == w).unwrap_or(order.len());
    merged.workloads.sort_by_key(rank);
    merged.command = commands.join(" & ");
    Ok(merged)
}

/// A record of `median` ns/op with min and max 10% either side, 3 samples and no
/// allocations: the sample the tool's tests build their reports from.
#[cfg(test)]
pub(crate) fn sample(workload: &str, contender: &str, param: &str, median: f64) -> Record {
    Record {
        workload: workload.into(),
        contender: contender.into(),
        allocator: "glibc".into(),
        param: param.into(),
        metric: "ns/op".into(),
        median,
        min: median * 0.9,
        max: median * 1.1,
        samples: 3,
        allocs_per_op: Some(0.0),
        bytes_per_op: Some(0.0),
        extra: BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(contender: &str, median: f64) -> Record {
        sample("get-put", contender, "4 KiB", median)
    }

    fn report(records: Vec<Record>) -> String {
        let contenders = records
            .iter()
            .map(|r| (r.contender.clone(), "how".to_string()))
            .collect();
        serde_json::to_string(&Report {
            command: "x".into(),
            quick: true,
            machine: machine(),
            workloads: vec!["get-put".into()],
            contenders,
            records,
            timelines: vec![],
        })
        .unwrap()
    }

    #[test]
    fn validation_accepts_a_good_report_and_rejects_bad_figures() {
        let good = report(vec![record("tierpool", 10.0), record("Vec (glibc)", 20.0)]);
        assert_eq!(validate(&good, &["get-put"], &[]), Ok(2));
        assert!(validate(&good, &["get-put", "burst"], &[])
            .unwrap_err()
            .contains("burst"));
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let mut r = record("tierpool", 10.0);
            r.median = bad;
            assert!(
                validate(&report(vec![r]), &["get-put"], &[]).is_err(),
                "{bad}"
            );
        }
        let mut r = record("tierpool", 10.0);
        r.allocs_per_op = Some(f64::NAN);
        assert!(validate(&report(vec![r]), &["get-put"], &[]).is_err());
        assert!(validate("{}", &[], &[]).is_err());
    }

    #[test]
    fn runs_of_different_workloads_merge_into_one_report_in_report_order() {
        let part = |workload: &str, contender: &str, setup: &str| {
            let mut r = record(contender, 10.0);
            r.workload = workload.into();
            Report {
                command: format!("run {workload}"),
                quick: true,
                machine: machine(),
                workloads: vec![workload.into()],
                contenders: [(contender.to_string(), setup.to_string())].into(),
                records: vec![r],
                timelines: vec![],
            }
        };
        let order = ["lookup", "get-put", "soak"];
        let merged = merge(
            vec![
                part("soak", "tierpool", "a"),
                part("lookup", "tierpool", "a"),
            ],
            &order,
        )
        .unwrap();
        assert_eq!(merged.workloads, ["lookup", "soak"]);
        assert_eq!((merged.records.len(), merged.contenders.len()), (2, 1));
        assert_eq!(merged.command, "run soak & run lookup");
        check(&merged, &["lookup", "soak"], &["lookup", "soak"]).unwrap();
        let twice = merge(vec![part("soak", "x", "a"), part("soak", "y", "a")], &order);
        assert!(twice.unwrap_err().contains("two of the runs"));
        let two_ways = merge(
            vec![part("lookup", "x", "a"), part("soak", "x", "b")],
            &order,
        );
        assert!(two_ways.unwrap_err().contains("set up two ways"));
        let mut slow = part("soak", "x", "a");
        slow.quick = false;
        assert!(merge(vec![part("lookup", "x", "a"), slow], &order).is_err());
        assert!(merge(vec![], &order).is_err());
    }
}
