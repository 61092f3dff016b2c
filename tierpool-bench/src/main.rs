//! `tierpool-bench`: the comparison report. Run `cargo run --release -p tierpool-bench -- --help`.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use clap::builder::TypedValueParser as _;
use clap::{CommandFactory, Parser};
use tierpool_bench::alloc::{self, Allocator, ALLOC_ENV};
use tierpool_bench::chart;
use tierpool_bench::contenders::Kind;
use tierpool_bench::progress;
use tierpool_bench::report::{self, Output, Report};
use tierpool_bench::streaming::Strategy;
use tierpool_bench::workloads::{self, burst, lookup, Ctx, Workload};

/// tierpool against allocators and pool crates on the seeds' workloads.
///
/// Contenders that need another global allocator (mimalloc, jemalloc) and every burst run are
/// child processes of this binary (environment TIERPOOL_BENCH_ALLOC selects the allocator).
#[derive(Debug, Parser)]
#[command(
    name = "tierpool-bench",
    about = "tierpool against allocators and pool crates on the seeds' workloads",
    override_usage = "cargo run --release -p tierpool-bench -- [OPTIONS]"
)]
struct Cli {
    /// Run only this workload (repeat to choose several; instructions needs valgrind and
    /// file-read io_uring: without them they are skipped)
    #[arg(long = "workload", value_name = "NAME", value_parser = workload_parser())]
    workloads: Vec<Workload>,
    /// Tiny iteration counts: proves every workload runs and the report is well formed (for
    /// CI); measures nothing worth quoting
    #[arg(long)]
    quick: bool,
    /// Where to write results.json, report.md and the SVG charts [default:
    /// target/tierpool-report in the workspace]
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Do not print the tables
    #[arg(long)]
    json_only: bool,
    /// Check a results.json (every chosen workload present, every figure finite and positive)
    /// and exit
    #[arg(long, value_name = "FILE")]
    validate: Option<PathBuf>,
    /// Print the instructions per get-put iteration of one contender (an id such as tierpool,
    /// tierpool-budget, vec, opool) at one size in bytes, under callgrind, and exit
    #[arg(long, num_args = 2, value_names = ["CONTENDER", "SIZE"])]
    count: Vec<String>,
    /// Print a completion script for SHELL and exit
    #[arg(long, value_name = "SHELL")]
    completions: Option<clap_complete::Shell>,
    /// (internal) run as a child process
    #[arg(long, hide = true)]
    child: bool,
    /// (internal) the child's contender or strategy
    #[arg(long, hide = true)]
    contender: Option<String>,
    /// (internal) the child's shape
    #[arg(long, hide = true)]
    shape: Option<usize>,
    /// (internal) the child's size in bytes
    #[arg(long, hide = true)]
    size: Option<usize>,
}

/// `--workload` values: the workloads' names.
fn workload_parser() -> impl clap::builder::TypedValueParser<Value = Workload> {
    clap::builder::PossibleValuesParser::new(Workload::ALL.map(|w| w.name()))
        .map(|name| Workload::from_name(&name).expect("one of the possible values"))
}

/// `--contender` value of a child that runs every contender (under its allocator).
const ALL_KINDS: &str = "all";

#[derive(Debug, Default)]
struct Args {
    workloads: Vec<Workload>,
    quick: bool,
    out: Option<PathBuf>,
    json_only: bool,
    validate: Option<PathBuf>,
    child: bool,
    contender: Option<String>,
    shape: Option<usize>,
    size: Option<usize>,
    count: Option<(String, usize)>,
}

impl Args {
    /// From the parsed command line; the workloads in report order, whatever order they were
    /// asked in (all of them if none was).
    fn from_cli(c: Cli) -> Result<Args, String> {
        let count = match c.count.as_slice() {
            [] => None,
            [who, size] => Some((
                who.clone(),
                size.parse()
                    .map_err(|_| format!("--count: {size:?} is not a size in bytes"))?,
            )),
            _ => return Err("--count needs a contender and a size".into()),
        };
        Ok(Args {
            workloads: Workload::ALL
                .into_iter()
                .filter(|w| c.workloads.is_empty() || c.workloads.contains(w))
                .collect(),
            quick: c.quick,
            out: c.out,
            json_only: c.json_only,
            validate: c.validate,
            child: c.child,
            contender: c.contender,
            shape: c.shape,
            size: c.size,
            count,
        })
    }
}

/// A child process: runs one workload for the `Vec` baseline (or `--contender`) under this
/// process's allocator and prints its [`Output`] as JSON.
fn child(a: &Args) -> Result<(), String> {
    let ctx = Ctx {
        quick: a.quick,
        alloc: alloc::current(),
        progress: true,
    };
    let &[w] = a.workloads.as_slice() else {
        return Err("a child runs exactly one workload".into());
    };
    if w == Workload::Instructions {
        let id = a.contender.as_deref().ok_or("--contender needed")?;
        let kind = Kind::from_id(id).ok_or(format!("unknown contender {id}"))?;
        let n = a.size.ok_or("--size needed")?;
        workloads::instructions::child(kind, alloc::current(), n, a.quick);
        return Ok(());
    }
    let out = if w == Workload::FileRead {
        use workloads::file_read::{run_one, Strategy, BLOCKS};
        let id = a.contender.as_deref().ok_or("--contender needed")?;
        let s = Strategy::from_id(id).ok_or(format!("unknown file-read strategy {id}"))?;
        let block = *BLOCKS
            .get(a.shape.unwrap_or(0))
            .ok_or("no such block size")?;
        run_one(&ctx, s, block).ok_or("io_uring refused")?
    } else if w == Workload::Http {
        workloads::http::run(&ctx)?
    } else if w == Workload::Connections {
        use workloads::connections::{run_client, run_one, Strategy, CLIENT};
        let id = a.contender.as_deref().ok_or("--contender needed")?;
        if id == CLIENT {
            return run_client(a.quick);
        }
        let s = Strategy::from_id(id).ok_or(format!("unknown connections strategy {id}"))?;
        run_one(&ctx, s)?
    } else if w == Workload::DirectRead {
        use workloads::direct_read::{run_one, Strategy, SHAPES};
        let id = a.contender.as_deref().ok_or("--contender needed")?;
        let s = Strategy::from_id(id).ok_or(format!("unknown direct-read strategy {id}"))?;
        let shape = *SHAPES.get(a.shape.unwrap_or(0)).ok_or("no such shape")?;
        run_one(&ctx, s, shape).ok_or("io_uring or direct I/O refused")?
    } else if w == Workload::IdleThreads {
        use workloads::idle_threads::{run_one, thread_counts, Strategy};
        let id = a.contender.as_deref().ok_or("--contender needed")?;
        let s = Strategy::from_id(id).ok_or(format!("unknown idle-threads strategy {id}"))?;
        let t = *thread_counts(a.quick)
            .get(a.shape.unwrap_or(0))
            .ok_or("no such thread count")?;
        run_one(&ctx, s, t)
    } else if w == Workload::Budget {
        let id = a.contender.as_deref().ok_or("--contender needed")?;
        let b = workloads::budget::from_id(id).ok_or(format!("unknown budget run {id}"))?;
        workloads::budget::run_one(&ctx, b)
    } else if w == Workload::Streaming {
        let id = a.contender.as_deref().unwrap_or("no-pool");
        let strategy = Strategy::from_id(id).ok_or(format!("unknown strategy {id}"))?;
        let shapes = workloads::streaming::shapes(a.quick);
        let shape = *shapes.get(a.shape.unwrap_or(0)).ok_or("no such shape")?;
        workloads::streaming::run_one(&ctx, shape, strategy)
    } else {
        let kinds = match a.contender.as_deref() {
            Some(ALL_KINDS) => Kind::ALL.to_vec(),
            Some(id) => vec![Kind::from_id(id).ok_or(format!("unknown contender {id}"))?],
            None => vec![Kind::Vec],
        };
        workloads::run(w, &ctx, &kinds)
    };
    let json = serde_json::to_string(&out).map_err(|e| e.to_string())?;
    std::io::stdout()
        .write_all(json.as_bytes())
        .map_err(|e| e.to_string())
}

fn spawn(
    workload: Workload,
    alloc: Allocator,
    kind: Kind,
    quick: bool,
) -> Result<std::process::Child, String> {
    spawn_with(workload, alloc, kind.id(), None, quick)
}

/// Starts this binary as a child that runs `workload` for one contender (or streaming
/// strategy, and shape) under `alloc`, and prints its `Output` as JSON.
fn spawn_with(
    workload: Workload,
    alloc: Allocator,
    contender: &str,
    shape: Option<usize>,
    quick: bool,
) -> Result<std::process::Child, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(exe);
    cmd.args([
        "--child",
        "--workload",
        workload.name(),
        "--contender",
        contender,
    ])
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

fn collect(child: std::process::Child, what: &str) -> Result<Output, String> {
    let out = child.wait_with_output().map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!("child process for {what} failed: {}", out.status));
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("child output for {what}: {e}"))
}

/// One child process of a workload run in rounds: its `--contender` id, shape index, and the
/// label its records and its progress line carry.
struct ChildRun {
    id: &'static str,
    shape: Option<usize>,
    label: String,
}

/// Runs each of `runs` in a child process of its own (RSS, CPU time and page faults are per
/// process), one at a time (each may use both cores), in `rounds` interleaved rounds so that a
/// slow spell of this VM hits all alike; the records are the medians over the rounds.
fn in_rounds(w: Workload, rounds: usize, runs: &[ChildRun], quick: bool) -> Result<Output, String> {
    let mut records = Vec::new();
    for round in 1..=rounds {
        for r in runs {
            progress::status(&format!("{w} round {round}/{rounds}: {}", r.label));
            let child = spawn_with(w, Allocator::System, r.id, r.shape, quick)?;
            records.extend(collect(child, &r.label)?.records);
        }
    }
    Ok(Output {
        records: workloads::streaming::merge_rounds(records),
        timelines: vec![],
    })
}

fn contender_order() -> Vec<String> {
    let mut order = Vec::new();
    // tierpool with the allocator's purge right after tierpool.
    let kinds = Kind::ALL.into_iter().flat_map(|k| match k {
        Kind::Tierpool => vec![k, Kind::TierpoolPurge],
        _ => vec![k],
    });
    for k in kinds {
        order.extend(Allocator::ALL.iter().map(|&a| k.label(a)));
    }
    order.extend(lookup::METHODS.iter().skip(1).map(|m| m.to_string()));
    order.extend(Strategy::ALL.iter().skip(1).map(|s| s.label().to_string()));
    order.insert(0, Strategy::NoPool.label().to_string());
    for a in [Allocator::Mimalloc, Allocator::Jemalloc] {
        order.insert(1, workloads::streaming::label(Strategy::NoPool, a));
    }
    order.extend(
        workloads::budget::RUNS
            .iter()
            .map(|&b| workloads::budget::label(b)),
    );
    order.insert(
        1,
        workloads::idle_threads::Strategy::TierpoolBackground.label(Allocator::System),
    );
    order.extend(
        workloads::file_read::Strategy::ALL
            .iter()
            .map(|s| s.label().to_string()),
    );
    order.extend(
        workloads::direct_read::Strategy::ALL
            .iter()
            .map(|s| s.label().to_string()),
    );
    order.extend(
        workloads::connections::Strategy::ALL
            .iter()
            .map(|s| s.label().to_string()),
    );
    order.extend(
        workloads::http::Strategy::ALL
            .iter()
            .map(|s| s.label().to_string()),
    );
    let mut seen = std::collections::HashSet::new();
    order.retain(|name| seen.insert(name.clone()));
    order
}

fn descriptions() -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    for k in Kind::ALL.into_iter().chain(Kind::EXTRA) {
        for a in Allocator::ALL {
            m.insert(k.label(a), k.adaptation().to_string());
        }
    }
    m.insert(
        "binary search".into(),
        "partition_point over the sorted tier sizes".into(),
    );
    m.insert(
        "linear scan".into(),
        "position / rposition over the sorted tier sizes".into(),
    );
    for a in [Allocator::Mimalloc, Allocator::Jemalloc] {
        m.insert(
            workloads::streaming::label(Strategy::NoPool, a),
            format!(
                "streaming workload: {} (the process runs under {})",
                Strategy::NoPool.description(),
                a.name()
            ),
        );
    }
    for s in workloads::file_read::Strategy::ALL {
        m.insert(s.label().to_string(), s.description().to_string());
    }
    for s in workloads::direct_read::Strategy::ALL {
        m.insert(s.label().to_string(), s.description().to_string());
    }
    for s in workloads::connections::Strategy::ALL {
        m.insert(s.label().to_string(), s.description().to_string());
    }
    for s in workloads::http::Strategy::ALL {
        m.insert(s.label().to_string(), s.description().to_string());
    }
    for (features, mode, label) in workloads::instructions::FEATURE_CASES {
        m.insert(
            label.to_string(),
            format!(
                "tierpool's examples/hot_loop.rs (get 4 KiB, two byte writes, drop) built by cargo into target/feature-costs as tierpool-probe's binary with features '{features}', run with HOT_LOOP='{mode}' (counted under callgrind, and timed natively: median of 3 interleaved runs); the cost of the optional features, which the report's own binary leaves out"
            ),
        );
    }
    for b in workloads::budget::RUNS {
        m.insert(
            workloads::budget::label(b),
            workloads::budget::description(b),
        );
    }
    let background = workloads::idle_threads::Strategy::TierpoolBackground;
    m.insert(
        background.label(Allocator::System),
        background.description().to_string(),
    );
    for s in Strategy::ALL {
        let text = format!("streaming workload: {}", s.description());
        m.entry(s.label().to_string())
            .and_modify(|d: &mut String| *d = format!("{d}; {text}"))
            .or_insert(text);
    }
    m
}

fn run_workload(w: Workload, quick: bool) -> Result<Output, String> {
    let ctx = Ctx {
        quick,
        alloc: Allocator::System,
        progress: true,
    };
    let mut out = Output::default();
    let mut merge = |o: Output| {
        out.records.extend(o.records);
        out.timelines.extend(o.timelines);
    };
    match w {
        Workload::Lookup => merge(workloads::run(w, &ctx, &[])),
        Workload::Instructions => {
            merge(workloads::instructions::run(quick)?);
            merge(Output {
                records: workloads::instructions::feature_costs(quick),
                timelines: vec![],
            });
        }
        Workload::Streaming => {
            // Peak RSS is per process: one process per shape and strategy, one at a time (each
            // uses both cores), in rounds so that a slow spell of this VM hits all alike.
            let rounds = workloads::streaming::rounds(quick);
            let mut records = Vec::new();
            for round in 1..=rounds {
                for (i, shape) in workloads::streaming::shapes(quick).iter().enumerate() {
                    progress::status(&format!(
                        "streaming round {round}/{rounds}: {}",
                        shape.label()
                    ));
                    let mut runs: Vec<(Strategy, Allocator)> = Strategy::ALL
                        .iter()
                        .map(|&s| (s, Allocator::System))
                        .collect();
                    if i == 0 {
                        // The seed's shape also against "no pool" under the allocators a Rust
                        // user would reach for first.
                        runs.push((Strategy::NoPool, Allocator::Mimalloc));
                        runs.push((Strategy::NoPool, Allocator::Jemalloc));
                    }
                    for (s, a) in runs {
                        let child = spawn_with(w, a, s.id(), Some(i), quick)?;
                        let what = workloads::streaming::label(s, a);
                        records.extend(collect(child, &what)?.records);
                    }
                }
            }
            merge(Output {
                records: workloads::streaming::merge_rounds(records),
                timelines: vec![],
            });
        }
        Workload::FileRead => {
            use workloads::file_read::{self as fr, Strategy, BLOCKS};
            let path = fr::file_path(quick);
            fr::make_file(&path, fr::file_size(quick))
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let runs: Vec<ChildRun> = (0..BLOCKS.len())
                .flat_map(|i| {
                    Strategy::ALL.into_iter().map(move |s| ChildRun {
                        id: s.id(),
                        shape: Some(i),
                        label: s.label().to_string(),
                    })
                })
                .collect();
            let out = in_rounds(w, workloads::streaming::rounds(quick), &runs, quick);
            let _ = std::fs::remove_file(&path);
            merge(out?);
        }
        Workload::Http => {
            // The server and its clients in one child (wrk, h2load and curl its own children).
            merge(collect(
                spawn_with(w, Allocator::System, "all", None, quick)?,
                "the http server",
            )?);
        }
        Workload::Connections => {
            use workloads::connections::{self as cn, Strategy};
            let runs: Vec<ChildRun> = Strategy::ALL
                .into_iter()
                .map(|s| ChildRun {
                    id: s.id(),
                    shape: None,
                    label: s.label().to_string(),
                })
                .collect();
            merge(in_rounds(w, cn::rounds(quick), &runs, quick)?);
        }
        Workload::DirectRead => {
            use workloads::direct_read::{self as dr, Strategy, SHAPES};
            let path = dr::file_path(quick);
            progress::status(&format!(
                "direct-read: writing the {} MiB file",
                dr::file_size(quick) >> 20
            ));
            dr::make_file(&path, dr::file_size(quick))?;
            let runs: Vec<ChildRun> = SHAPES
                .iter()
                .enumerate()
                .flat_map(|(i, &shape)| {
                    Strategy::ALL.into_iter().map(move |s| ChildRun {
                        id: s.id(),
                        shape: Some(i),
                        label: format!("{} ({})", s.label(), dr::param(shape)),
                    })
                })
                .collect();
            let out = in_rounds(w, dr::rounds(quick), &runs, quick);
            let _ = std::fs::remove_file(&path);
            merge(out?);
        }
        Workload::Budget => {
            use workloads::budget as bu;
            let runs: Vec<ChildRun> = bu::RUNS
                .into_iter()
                .map(|b| ChildRun {
                    id: bu::id(b),
                    shape: None,
                    label: bu::label(b),
                })
                .collect();
            merge(in_rounds(w, bu::rounds(quick), &runs, quick)?);
        }
        Workload::IdleThreads => {
            use workloads::idle_threads::{thread_counts, Strategy};
            // RSS is per process: one per strategy, allocator and thread count, one at a time.
            for (i, t) in thread_counts(quick).iter().enumerate() {
                progress::status(&format!("idle-threads: {t} threads"));
                for (s, a) in Strategy::runs() {
                    let child = spawn_with(w, a, s.id(), Some(i), quick)?;
                    merge(collect(child, &s.label(a))?);
                }
            }
        }
        Workload::Burst => {
            // RSS is per process: every contender in its own, two at a time (one per core).
            // tierpool and the Vec baseline run under every allocator (whether freed memory
            // leaves the process is the allocator's policy), the other pools under glibc.
            let mut runs = Vec::new();
            // tierpool asking jemalloc or mimalloc to purge runs under those two (under glibc
            // it is tierpool's default).
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
            progress::line(&format!(
                "  burst: {} processes, two at a time, {} ms each",
                runs.len(),
                burst::Shape::new(quick).quiet.as_millis()
            ));
            let pairs = runs.len().div_ceil(2);
            for (i, pair) in runs.chunks(2).enumerate() {
                progress::status(&format!(
                    "burst: processes {} of {pairs} pairs ({})",
                    i + 1,
                    pair.iter()
                        .map(|&(k, a)| k.label(a))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
                let children = pair
                    .iter()
                    .map(|&(k, a)| Ok((k.label(a), spawn(w, a, k, quick)?)))
                    .collect::<Result<Vec<_>, String>>()?;
                for (label, c) in children {
                    merge(collect(c, &label)?);
                }
            }
        }
        Workload::GetPut | Workload::Mixed | Workload::CrossThread | Workload::Threads => {
            // Every workload in a fresh process, so that none inherits another's heap, thread
            // caches or leaked crate pools (a first version ran them all in the parent, and
            // tierpool's 64 KiB hand-off measured 2-4x slower after the mixed workload than
            // alone).
            merge(collect(
                spawn_with(w, Allocator::System, ALL_KINDS, None, quick)?,
                "the glibc contenders",
            )?);
            for a in [Allocator::Mimalloc, Allocator::Jemalloc] {
                merge(collect(
                    spawn(w, a, Kind::Vec, quick)?,
                    &Kind::Vec.label(a),
                )?);
            }
        }
    }
    Ok(out)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(shell) = cli.completions {
        let mut cmd = Cli::command();
        clap_complete::generate(shell, &mut cmd, "tierpool-bench", &mut std::io::stdout());
        return ExitCode::SUCCESS;
    }
    let args = match Args::from_cli(cli) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match real_main(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            progress::finish();
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn real_main(args: Args) -> Result<(), String> {
    if args.child {
        return child(&args);
    }
    if let Some((who, n)) = &args.count {
        let kind = Kind::from_id(who).ok_or(format!("unknown contender {who}"))?;
        let per_op = workloads::instructions::count(kind, Allocator::System, *n)?;
        println!("{per_op:.1}");
        return Ok(());
    }
    if let Some(path) = &args.validate {
        let json = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let names: Vec<&str> = args.workloads.iter().map(|w| w.name()).collect();
        let n = report::validate(&json, &names)?;
        println!(
            "{}: {n} records, every workload present, every figure finite and positive",
            path.display()
        );
        return Ok(());
    }
    if alloc::current() != Allocator::System {
        return Err(format!(
            "run the report without {ALLOC_ENV}; it starts its own children"
        ));
    }
    let out_dir = args.out.clone().unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/tierpool-report")
    });
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;

    let mut args = args;
    if args.workloads.contains(&Workload::Instructions)
        && !workloads::instructions::valgrind_available()
    {
        eprintln!(
            "valgrind not found: the instructions workload is skipped (apt-get install valgrind)"
        );
        args.workloads.retain(|&w| w != Workload::Instructions);
    }
    if args.workloads.contains(&Workload::FileRead) && !workloads::file_read::io_uring_available() {
        eprintln!("io_uring refused by this kernel: the file-read workload is skipped");
        args.workloads.retain(|&w| w != Workload::FileRead);
    }
    if args.workloads.contains(&Workload::Http) {
        if let Err(e) = workloads::http::clients_available() {
            eprintln!("{e}: the http workload is skipped");
            args.workloads.retain(|&w| w != Workload::Http);
        }
    }
    if args.workloads.contains(&Workload::DirectRead) {
        let path = workloads::direct_read::file_path(args.quick);
        let probe = std::fs::write(&path, b"")
            .map_err(|e| e.to_string())
            .and_then(|()| workloads::direct_read::alignment(&path));
        let _ = std::fs::remove_file(&path);
        if let Err(e) = probe.and_then(|_| {
            workloads::file_read::io_uring_available()
                .then_some(())
                .ok_or_else(|| "io_uring refused by this kernel".to_string())
        }) {
            eprintln!("{e}: the direct-read workload is skipped");
            args.workloads.retain(|&w| w != Workload::DirectRead);
        }
    }
    let started = Instant::now();
    let mut all = Output::default();
    progress::start(&args.workloads);
    for (i, &w) in args.workloads.iter().enumerate() {
        progress::begin(w, i + 1, args.workloads.len());
        let t = Instant::now();
        let o = run_workload(w, args.quick)?;
        progress::end(w, t.elapsed().as_secs_f64());
        all.records.extend(o.records);
        all.timelines.extend(o.timelines);
    }
    progress::finish();

    let cmdline: String = std::env::args().skip(1).map(|a| format!(" {a}")).collect();
    let order = contender_order();
    let machine = report::machine();
    let mut md = String::new();
    md.push_str(&format!(
        "# tierpool comparison report\n\nCommand: `cargo run --release -p tierpool-bench --{}`{}\n\nMachine: {} CPUs, {}, {}. Total run time {:.0} s.\n\nTimes are medians over interleaved rounds (min and max beside them); ratios are the contender's median over tierpool's (above 1: tierpool is faster) and over `Vec` under glibc. Allocations are counted by the global allocator in a separate pass.\n",
        cmdline,
        if args.quick { " (**--quick: figures prove the pipeline only**)" } else { "" },
        machine.get("nproc").map_or("?", String::as_str),
        machine.get("cpu").map_or("unknown CPU", String::as_str),
        machine.get("memory").map_or("? memory", String::as_str),
        started.elapsed().as_secs_f64(),
    ));
    for &wl in &args.workloads {
        let w = wl.name();
        let rows = report::ordered(&all.records, w, &order);
        let unbounded = workloads::budget::label(None);
        let baseline = match wl {
            Workload::Streaming => Strategy::NoPool.label(),
            Workload::Budget => unbounded.as_str(),
            Workload::FileRead => workloads::file_read::Strategy::FreshVec.label(),
            Workload::DirectRead => workloads::direct_read::Strategy::Fresh.label(),
            Workload::Connections => workloads::connections::Strategy::Held.label(),
            Workload::Http => workloads::http::Strategy::Full.label(),
            _ => "Vec (glibc)",
        };
        md.push_str(&format!(
            "\n## {w}\n\n{}\n\n{}\n![{w}]({w}.svg)\n",
            wl.describe(),
            report::table(&rows, baseline)
        ));
        let path = out_dir.join(format!("{w}.svg"));
        let title = format!("{w}: {}", rows.first().map_or("", |r| r.metric.as_str()));
        let drawn = if wl == Workload::Burst {
            chart::timelines(
                &path,
                "burst: process RSS, 16 KiB buffers taken at once, released, then 1 get/put per ms",
                &all.timelines,
            )
        } else if wl == Workload::Budget {
            chart::panels_of_extras(
                &path,
                "budget: a flood of 1 MiB frames, with and without a 64 MiB budget",
                &rows,
                &[
                    ("peak RSS MiB", "peak RSS (MiB)"),
                    ("p99 ms", "p99 read_frame (ms)"),
                    ("MB/s", "throughput (MB/s)"),
                ],
            )
        } else if wl == Workload::Connections {
            chart::panels_of_extras(
                &path,
                "connections: 10,000 connections, 1% active, 16 KiB messages",
                &rows,
                &[
                    ("held MiB (peak)", "held in buffers (MiB, peak)"),
                    ("RSS above idle MiB", "RSS above idle (MiB)"),
                    ("msgs/s", "messages/s"),
                    ("p99 ms", "p99 latency (ms)"),
                ],
            )
        } else if wl == Workload::DirectRead {
            // The disk bounds MB/s: the chart shows what each buffer costs in CPU time.
            let cpu: Vec<report::Record> = rows
                .iter()
                .filter_map(|r| {
                    let mut c = (*r).clone();
                    c.median = *r.extra.get("CPU us/MiB")?;
                    c.metric = "CPU us per MiB (user + system)".into();
                    Some(c)
                })
                .collect();
            chart::by_param(
                &path,
                "direct-read: CPU time per MiB of O_DIRECT reads and writes, by buffer",
                &cpu.iter().collect::<Vec<_>>(),
                &order,
            )
        } else {
            chart::by_param(&path, &title, &rows, &order)
        };
        drawn.map_err(|e| format!("chart {}: {e}", path.display()))?;
    }
    md.push_str("\n## Contenders\n\n| contender | set-up |\n|---|---|\n");
    let desc = descriptions();
    for name in &order {
        if all.records.iter().any(|r| &r.contender == name) {
            md.push_str(&format!("| {name} | {} |\n", desc[name]));
        }
    }
    let report = Report {
        command: format!("cargo run --release -p tierpool-bench --{cmdline}"),
        quick: args.quick,
        machine,
        workloads: args
            .workloads
            .iter()
            .map(|w| w.name().to_string())
            .collect(),
        contenders: desc
            .into_iter()
            .filter(|(k, _)| all.records.iter().any(|r| &r.contender == k))
            .collect(),
        records: all.records,
        timelines: all.timelines,
    };
    let names: Vec<&str> = args.workloads.iter().map(|w| w.name()).collect();
    report::check(&report, &names).map_err(|e| format!("the report is not well formed: {e}"))?;
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    let json_path = out_dir.join("results.json");
    std::fs::write(&json_path, json).map_err(|e| format!("{}: {e}", json_path.display()))?;
    std::fs::write(out_dir.join("report.md"), &md).map_err(|e| e.to_string())?;
    if !args.json_only {
        println!("{md}");
    }
    eprintln!(
        "wrote {} (and report.md, one SVG per workload) in {:.0} s",
        json_path.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn arguments_parse_into_the_report_order() {
        let cli = Cli::try_parse_from([
            "tierpool-bench",
            "--workload",
            "burst",
            "--workload",
            "lookup",
            "--count",
            "tierpool",
            "4096",
        ])
        .unwrap();
        let a = Args::from_cli(cli).unwrap();
        assert_eq!(a.workloads, vec![Workload::Lookup, Workload::Burst]);
        assert_eq!(a.count, Some(("tierpool".to_string(), 4096)));
        let all = Args::from_cli(Cli::try_parse_from(["tierpool-bench"]).unwrap()).unwrap();
        assert_eq!(all.workloads, Workload::ALL.to_vec());
        let bad = Cli::try_parse_from(["tierpool-bench", "--count", "tierpool", "many"]).unwrap();
        assert!(Args::from_cli(bad).unwrap_err().contains("not a size"));
        assert!(Cli::try_parse_from(["tierpool-bench", "--workload", "nope"]).is_err());
    }
}
