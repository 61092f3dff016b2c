//! `instructions`: the get-put loop of every contender, counted by callgrind instead of timed.
//!
//! Time on this shared VM swings 2x between runs; an instruction count does not. Each
//! (contender, size) runs in its own child process under
//! `valgrind --tool=callgrind --toggle-collect='*counted_loop*'`, so that only the loop (and
//! what it calls: the pool, the allocator) is counted, after a warm-up that is not. The figure
//! is the loop's instructions divided by its iterations: one get, a write of the first and the
//! last byte, one drop, and the loop itself.
//!
//! The `Vec` rows call the allocator directly ([`Direct`]): what `Vec::with_capacity` and its
//! drop compile to under that global allocator. Through this binary's switchable, counting
//! global allocator they would cost about 20 instructions more per iteration (measured:
//! `__rust_alloc` alone is 26 instructions per call here under jemalloc), which is this
//! binary's overhead, not the allocator's.
//!
//! Without valgrind the workload says so and is skipped.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::process::{Child, Command, Stdio};

use crate::harness::alloc::{Allocator, ALLOC_ENV, JEMALLOC, MIMALLOC};
use crate::contenders::{get_put_once, with_contender, Buf, Contender, Kind, Visit};
use crate::harness::record::{Output, Record};

use super::size_label;

/// Sizes counted: the get-put workload's, 256 B to 16 MiB.
pub const SIZES: [usize; 5] = super::get_put::SIZES;
/// The `--quick` sizes: one in a thread cache's range, one above most allocators' caches (a
/// count is the same every run; the quick run checks the workload end to end).
pub const QUICK_SIZES: [usize; 2] = [4 << 10, 1 << 20];

/// Iterations of the counted loop (`--quick`: fewer; the count per iteration is the same).
pub fn iterations(quick: bool) -> usize {
    if quick {
        2_000
    } else {
        20_000
    }
}

/// Iterations of the warm-up loop before it (not counted).
const WARM_UP: usize = 1_000;

/// The counted loop. Its name is what callgrind's `--toggle-collect` matches; it must not be
/// inlined, and nothing else may be called `counted_loop`.
#[inline(never)]
pub fn counted_loop<C: Contender>(c: &C, n: usize, iters: usize) {
    for _ in 0..iters {
        get_put_once(c, n);
    }
}

#[inline(never)]
fn warm_up<C: Contender>(c: &C, n: usize) {
    for _ in 0..WARM_UP {
        get_put_once(c, n);
    }
}

struct Loop {
    n: usize,
    iters: usize,
}

impl Visit for Loop {
    type Out = ();
    fn visit<C: Contender>(self, c: C) {
        warm_up(&c, self.n);
        counted_loop(&c, black_box(self.n), self.iters);
    }
}

/// `Vec::with_capacity(n)` and its drop under allocator `A`, without the global allocator's
/// indirection: one call to `A::alloc`, one to `A::dealloc`.
#[derive(Debug)]
pub struct Direct<A: GlobalAlloc + Sync + 'static>(&'static A);

impl<A: GlobalAlloc + Sync + 'static> Clone for Direct<A> {
    fn clone(&self) -> Self {
        Direct(self.0)
    }
}

/// A buffer from [`Direct`].
#[derive(Debug)]
pub struct DirectBuf<A: GlobalAlloc + Sync + 'static> {
    ptr: *mut u8,
    layout: Layout,
    alloc: &'static A,
}

// SAFETY: the buffer owns its block exclusively (like a `Vec`), and the allocator is `Sync`.
unsafe impl<A: GlobalAlloc + Sync + 'static> Send for DirectBuf<A> {}

// SAFETY: `ptr` points to `layout.size()` bytes allocated for this buffer alone, freed only
// by its drop.
unsafe impl<A: GlobalAlloc + Sync + 'static> Buf for DirectBuf<A> {
    #[inline(always)]
    fn ptr(&mut self) -> *mut u8 {
        self.ptr
    }
    #[inline(always)]
    fn capacity(&self) -> usize {
        self.layout.size()
    }
}

impl<A: GlobalAlloc + Sync + 'static> Drop for DirectBuf<A> {
    #[inline(always)]
    fn drop(&mut self) {
        // SAFETY: allocated by `self.alloc` with `self.layout`, freed once.
        unsafe { self.alloc.dealloc(self.ptr, self.layout) }
    }
}

impl<A: GlobalAlloc + Sync + 'static> Contender for Direct<A> {
    type B = DirectBuf<A>;
    #[inline(always)]
    fn get(&self, n: usize) -> DirectBuf<A> {
        let layout = Layout::array::<u8>(n).expect("size fits");
        // SAFETY: `n > 0` (every workload asks for at least one byte).
        let ptr = unsafe { self.0.alloc(layout) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(layout);
        }
        DirectBuf {
            ptr,
            layout,
            alloc: self.0,
        }
    }
}

/// In a child process: warms up contender `kind` at size `n`, then runs the counted loop.
/// `Vec` calls the process's allocator directly ([`Direct`]).
pub fn child(kind: Kind, alloc: Allocator, n: usize, quick: bool) {
    let l = Loop {
        n,
        iters: iterations(quick),
    };
    match (kind, alloc) {
        (Kind::Vec, Allocator::System) => l.visit(Direct(&System)),
        (Kind::Vec, Allocator::Mimalloc) => l.visit(Direct(&MIMALLOC)),
        (Kind::Vec, Allocator::Jemalloc) => l.visit(Direct(&JEMALLOC)),
        _ => with_contender(kind, l),
    }
}

/// The contenders counted, with the allocator each runs under.
pub fn runs() -> Vec<(Kind, Allocator)> {
    let mut runs = Vec::new();
    for k in Kind::ALL {
        if k == Kind::Vec {
            runs.extend(Allocator::ALL.iter().map(|&a| (k, a)));
        } else {
            runs.push((k, Allocator::System));
        }
    }
    runs
}

/// True if `valgrind` can be run.
pub fn valgrind_available() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The instructions callgrind collected, from its summary line (`==pid== Collected : N`).
pub fn parse_collected(stderr: &str) -> Option<u64> {
    stderr.lines().find_map(|l| {
        let (_, rest) = l.split_once("Collected :")?;
        rest.trim().replace(',', "").parse().ok()
    })
}

/// Starts a callgrind run of contender `kind` (under `alloc`) at size `n`.
fn spawn(kind: Kind, alloc: Allocator, n: usize, quick: bool) -> Result<Child, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new("valgrind");
    cmd.args([
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        "--toggle-collect=*counted_loop*",
    ])
    .arg(&exe)
    .args([
        "--child",
        "--workload",
        "instructions",
        "--contender",
        kind.id(),
    ])
    .args(["--size", &n.to_string()])
    .env(ALLOC_ENV, alloc.name())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    if quick {
        cmd.arg("--quick");
    }
    cmd.spawn()
        .map_err(|e| format!("cannot start valgrind: {e}"))
}

/// Waits for a run from [`spawn`] and returns instructions per iteration.
fn finish(child: Child, what: &str, quick: bool) -> Result<f64, String> {
    let o = child.wait_with_output().map_err(|e| e.to_string())?;
    per_iteration(&o, what, iterations(quick))
}

/// Instructions per iteration from a finished callgrind run of `iters` iterations.
fn per_iteration(o: &std::process::Output, what: &str, iters: usize) -> Result<f64, String> {
    let stderr = String::from_utf8_lossy(&o.stderr);
    if !o.status.success() {
        return Err(format!("callgrind run of {what} failed: {stderr}"));
    }
    let total = parse_collected(&stderr)
        .ok_or_else(|| format!("callgrind run of {what}: no count in {stderr}"))?;
    Ok(total as f64 / iters as f64)
}

/// A row of this workload: `per_op` instructions per iteration of `contender` at `n`.
fn record(contender: String, alloc: Allocator, n: usize, per_op: f64) -> Record {
    Record {
        workload: "instructions".into(),
        contender,
        allocator: alloc.name().into(),
        param: size_label(n),
        metric: "instructions/op".into(),
        median: per_op,
        min: per_op,
        max: per_op,
        samples: 1,
        allocs_per_op: None,
        bytes_per_op: None,
        extra: Default::default(),
    }
}

/// Instructions per iteration of contender `kind` (under `alloc`) at size `n`: one run.
pub fn count(kind: Kind, alloc: Allocator, n: usize) -> Result<f64, String> {
    let what = format!("{} at {}", kind.label(alloc), size_label(n));
    finish(spawn(kind, alloc, n, false)?, &what, false)
}

/// Counts every contender at every size, two valgrind processes at a time (one per core).
pub fn run(quick: bool) -> Result<Output, String> {
    let sizes: &[usize] = if quick { &QUICK_SIZES } else { &SIZES };
    let jobs: Vec<(Kind, Allocator, usize)> = runs()
        .into_iter()
        .flat_map(|(k, a)| sizes.iter().map(move |&n| (k, a, n)))
        .collect();
    crate::harness::progress::line(&format!(
        "  instructions: {} callgrind runs, two at a time",
        jobs.len()
    ));
    let mut out = Output::default();
    for pair in jobs.chunks(2) {
        let children = pair
            .iter()
            .map(|&(k, a, n)| Ok((k, a, n, spawn(k, a, n, quick)?)))
            .collect::<Result<Vec<_>, String>>()?;
        for (k, a, n, child) in children {
            let what = format!("{} at {}", k.label(a), size_label(n));
            let per_op = finish(child, &what, quick)?;
            out.records.push(record(k.label(a), a, n, per_op));
        }
    }
    Ok(out)
}

/// The cases of [`feature_costs`]: (features the example is built with, `HOT_LOOP`, label).
pub const FEATURE_CASES: [(&str, &str, &str); 5] = [
    ("", "", "tierpool hot_loop, default build"),
    (
        "",
        "aligned",
        "tierpool hot_loop, AlignedPool (4 KiB alignment), default build",
    ),
    (
        "holders,metrics",
        "holders0",
        "tierpool hot_loop, features holders+metrics, tracking off",
    ),
    (
        "holders,metrics",
        "holders128",
        "tierpool hot_loop, holders tracking 1 get in 128",
    ),
    (
        "holders,metrics",
        "holders1",
        "tierpool hot_loop, holders tracking every get",
    ),
];

/// What the optional features `holders` and `metrics` cost on the fast path: the
/// report's binary is built without them (their code would be in every tierpool row), so
/// tierpool's `hot_loop` example is built twice by cargo, into `target/feature-costs`, as the
/// `tierpool-probe` crate's binary (the same source, without tierpool's dev-dependencies),
/// without optional features and with `holders,metrics`, and its counted loop (get 4 KiB,
/// two byte writes, drop) is counted under callgrind and timed natively (median of three
/// interleaved runs), tracking nothing, 1 get in 128 and every get. Metrics add nothing to
/// the loop (they are published at ticks): what a publication costs is the `metrics`
/// example's figure (BENCHMARKS.md). Where cargo cannot build it, says why and returns
/// nothing.
pub fn feature_costs(quick: bool) -> Vec<Record> {
    match try_feature_costs(quick) {
        Ok(r) => r,
        Err(why) => {
            crate::harness::progress::line(&format!("  instructions: feature costs skipped: {why}"));
            Vec::new()
        }
    }
}

/// Builds tierpool-probe's `hot_loop` with `features` into `dir` (cargo, release), and gives
/// the path of a copy named for them.
fn build_hot_loop(
    root: &std::path::Path,
    dir: &std::path::Path,
    features: &str,
) -> Result<std::path::PathBuf, String> {
    crate::harness::progress::status(&format!(
        "instructions: building hot_loop with features '{features}'"
    ));
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(&cargo);
    cmd.current_dir(root)
        .args(["build", "--release", "--quiet", "-p", "tierpool-probe"])
        .args(["--bin", "hot_loop", "--target-dir"])
        .arg(dir)
        .stdout(Stdio::null());
    if !features.is_empty() {
        cmd.args(["--features", features]);
    }
    let status = cmd.status().map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!(
            "cargo build of hot_loop ({features:?}) failed: {status}"
        ));
    }
    let to = dir.join(format!("hot_loop-{}", features.replace(',', "-")));
    std::fs::copy(dir.join("release/hot_loop"), &to).map_err(|e| e.to_string())?;
    Ok(to)
}

/// `hot_loop`'s own timing of `iters` get+puts of `n` bytes with `HOT_LOOP=mode`, in ns.
fn hot_loop_ns(exe: &std::path::Path, mode: &str, n: usize, iters: usize) -> Result<f64, String> {
    let o = Command::new(exe)
        .args([n.to_string(), iters.to_string()])
        .env("HOT_LOOP", mode)
        .output()
        .map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(format!("hot_loop ({mode:?}) failed: {}", o.status));
    }
    let out = String::from_utf8_lossy(&o.stdout);
    out.split_whitespace()
        .next()
        .and_then(|x| x.parse().ok())
        .ok_or_else(|| format!("hot_loop said {out:?}"))
}

fn try_feature_costs(quick: bool) -> Result<Vec<Record>, String> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("no workspace root")?;
    let dir = root.join("target").join("feature-costs");
    let plain = build_hot_loop(root, &dir, "")?;
    let with = build_hot_loop(root, &dir, "holders,metrics")?;
    let n = 4096;
    let counted = iterations(quick);
    let mut records = Vec::new();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); FEATURE_CASES.len()];
    for _round in 0..3 {
        for (i, &(features, mode, _)) in FEATURE_CASES.iter().enumerate() {
            let exe = if features.is_empty() { &plain } else { &with };
            // Every get tracked takes a lock and reads the clock: fewer iterations.
            let iters = match (quick, mode) {
                (true, _) => 20_000,
                (false, "holders1") => 500_000,
                (false, _) => 5_000_000,
            };
            times[i].push(hot_loop_ns(exe, mode, n, iters)?);
        }
    }
    for (i, &(features, mode, label)) in FEATURE_CASES.iter().enumerate() {
        let exe = if features.is_empty() { &plain } else { &with };
        let o = Command::new("valgrind")
            .args([
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                "--toggle-collect=*counted_loop*",
            ])
            .arg(exe)
            .args([n.to_string(), counted.to_string()])
            .env("HOT_LOOP", mode)
            .stdout(Stdio::null())
            .output()
            .map_err(|e| format!("cannot start valgrind: {e}"))?;
        let per_op = per_iteration(&o, label, counted)?;
        let mut t = times[i].clone();
        t.sort_by(f64::total_cmp);
        let mut r = record(label.into(), Allocator::System, n, per_op);
        r.extra
            .insert("ns/op (native, median of 3)".to_string(), t[1]);
        records.push(r);
    }
    Ok(records)
}

/// The `instructions` workload.
#[derive(Debug)]
pub struct Instructions;

impl super::Scenario for Instructions {
    fn name(&self) -> &'static str {
        "instructions"
    }

    /// No allocation counts: it counts instructions under valgrind; the get-put workload counts allocations.
    fn counts_allocations(&self) -> bool {
        false
    }

    fn describe(&self) -> &'static str {
        "The get-put loop again, counted instead of timed: instructions per iteration (get, write first and last byte, release, loop), from valgrind --tool=callgrind collecting the loop alone after a warm-up; each contender and size in its own process. Deterministic: the same figure every run. The rows named tierpool hot_loop are what the optional features holders and metrics cost, which this binary leaves out: tierpool's hot_loop example built by cargo without optional features and with holders+metrics, at 4 KiB, tracking nothing, 1 get in 128 and every get, with the time per get+drop beside (native runs, median of 3)."
    }

    fn weight(&self) -> u64 {
        70
    }

    fn contenders(&self) -> Vec<super::Entry> {
        let mut all = super::kind_entries();
        all.extend(FEATURE_CASES.iter().map(|(features, mode, label)| {
            super::Entry::new(
                *label,
                format!(
                    "tierpool's examples/hot_loop.rs (get 4 KiB, two byte writes, drop) built by cargo into target/feature-costs as tierpool-probe's binary with features '{features}', run with HOT_LOOP='{mode}' (counted under callgrind, and timed natively: median of 3 interleaved runs); the cost of the optional features, which the report's own binary leaves out, and (HOT_LOOP=aligned) of an AlignedPool's get+put"
                ),
            )
        }));
        all
    }

    fn available(&self, _quick: bool) -> Result<(), String> {
        if valgrind_available() {
            Ok(())
        } else {
            Err("valgrind not found (apt-get install valgrind)".into())
        }
    }

    /// Every contender and size under callgrind, two processes at a time, then the optional
    /// features' costs.
    fn run(&self, quick: bool) -> Result<Output, String> {
        let mut out = run(quick)?;
        out.records.extend(feature_costs(quick));
        Ok(out)
    }

    /// The counted loop of `--contender` at `--size` (under callgrind); prints nothing.
    fn child(&self, ctx: &super::Ctx, args: &super::ChildArgs) -> Result<Option<Output>, String> {
        let id = args.contender()?;
        let kind = Kind::from_id(id).ok_or(format!("unknown contender {id}"))?;
        let n = args.size.ok_or("--size needed")?;
        child(kind, ctx.alloc, n, ctx.quick);
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_callgrinds_summary() {
        let s = "==123== Events    : Ir\n==123== Collected : 6,293,085\n==123==\n";
        assert_eq!(parse_collected(s), Some(6_293_085));
        assert_eq!(parse_collected("==1== Collected : 17"), Some(17));
        assert_eq!(parse_collected("no summary"), None);
    }
}
