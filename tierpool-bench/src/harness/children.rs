//! The report's child processes: this binary started again with `--child`, one workload and
//! one contender (or strategy, and shape) under one global allocator, printing its
//! [`Output`] as JSON on stdout.
//!
//! RSS, CPU time and page faults are per process, and no workload should inherit another's
//! heap, thread caches or leaked pools: so the parent ([`crate::workloads::Scenario::run`])
//! starts children, and each child runs [`crate::workloads::Scenario::child`].

use std::process::{Child, Command, Stdio};

use crate::harness::alloc::{Allocator, ALLOC_ENV};
use crate::harness::progress;
use crate::harness::record::Output;

/// `--contender` value of a child that runs every contender (under its allocator).
pub const ALL_KINDS: &str = "all";

/// Starts this binary as a child that runs `workload` for one contender (or strategy, and
/// shape) under `alloc`, and prints its `Output` as JSON.
pub fn spawn(
    workload: &str,
    alloc: Allocator,
    contender: &str,
    shape: Option<usize>,
    quick: bool,
) -> Result<Child, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.args(["--child", "--workload", workload, "--contender", contender])
        .env(ALLOC_ENV, alloc.name())
        .stdout(Stdio::piped())
        // With progress bars drawn, the child's progress is read and shown on them.
        .stderr(if progress::drawing() {
            Stdio::piped()
        } else {
            Stdio::inherit()
        });
    if quick {
        cmd.arg("--quick");
    }
    if let Some(shape) = shape {
        cmd.args(["--shape", &shape.to_string()]);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start a child process: {e}"))?;
    progress::forward(&mut child);
    Ok(child)
}

/// Waits for a child from [`spawn`] and reads its `Output`; `what` names it in errors.
pub fn collect(child: Child, what: &str) -> Result<Output, String> {
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("child process for {what} failed: {}", out.status));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("child output for {what}: {e}"))
}

/// [`spawn`] and [`collect`] one child.
pub fn run_one(
    workload: &str,
    alloc: Allocator,
    contender: &str,
    shape: Option<usize>,
    quick: bool,
    what: &str,
) -> Result<Output, String> {
    collect(spawn(workload, alloc, contender, shape, quick)?, what)
}

/// One child process of a workload run in rounds: its `--contender` id, shape index, and the
/// label its records and its progress line carry.
#[derive(Clone, Debug)]
pub struct ChildRun {
    /// `--contender`.
    pub id: &'static str,
    /// `--shape`.
    pub shape: Option<usize>,
    /// What the progress line and errors call it.
    pub label: String,
}

/// Runs each of `runs` in a child process of its own under glibc, one at a time (each may
/// use both cores), in `rounds` interleaved rounds so that a slow spell of this VM hits all
/// alike; the records are the medians over the rounds.
pub fn in_rounds(
    workload: &str,
    rounds: usize,
    runs: &[ChildRun],
    quick: bool,
) -> Result<Output, String> {
    let mut records = Vec::new();
    for round in 1..=rounds {
        for r in runs {
            progress::status(&format!("{workload} round {round}/{rounds}: {}", r.label));
            let out = run_one(workload, Allocator::System, r.id, r.shape, quick, &r.label)?;
            records.extend(out.records);
        }
    }
    Ok(Output {
        records: crate::harness::record::merge_rounds(records),
        timelines: vec![],
    })
}
