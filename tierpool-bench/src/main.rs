//! `tierpool-bench`: the comparison report. Run `cargo run --release -p tierpool-bench -- --help`.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::builder::TypedValueParser as _;
use clap::{CommandFactory, Parser};
use tierpool_bench::contenders::Kind;
use tierpool_bench::harness::alloc::{self, Allocator, ALLOC_ENV};
use tierpool_bench::harness::progress;
use tierpool_bench::harness::record::{self, Output, Report};
use tierpool_bench::report::{page, render};
use tierpool_bench::workloads::{self, ChildArgs, Ctx, Workload};

/// tierpool against allocators and pool crates, on workloads modelled on the buffer pools of
/// gRPC-Go, Vitess and goleveldb.
///
/// Contenders that need another global allocator (mimalloc, jemalloc) and every burst run are
/// child processes of this binary (environment TIERPOOL_BENCH_ALLOC selects the allocator).
#[derive(Debug, Parser)]
#[command(
    name = "tierpool-bench",
    about = "tierpool against allocators and pool crates, on workloads modelled on the buffer pools of gRPC-Go, Vitess and goleveldb",
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
    /// Where to write results.json, report.md, index.html and the SVG charts [default:
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
    /// Write the report's tables from a results.json (its charts beside it) and exit: on
    /// stdout, or between the <!-- report:begin --> and <!-- report:end --> lines of --into;
    /// with --out, redraw the charts and write report.md and index.html into DIR
    #[arg(long, value_name = "FILE")]
    render: Option<PathBuf>,
    /// With --render: the Markdown document whose marked section is replaced
    #[arg(long, value_name = "DOC", requires = "render")]
    into: Option<PathBuf>,
    /// With --render: copy the charts and results.json into DIR, where the chart links point
    /// [default links: docs/bench/]
    #[arg(long, value_name = "DIR", requires = "render")]
    charts_into: Option<PathBuf>,
    /// Print the instructions per get-put iteration of one contender (an id such as tierpool,
    /// tierpool-budget, vec, opool) at one size in bytes, under callgrind, and exit
    #[arg(long, num_args = 2, value_names = ["CONTENDER", "SIZE"])]
    count: Vec<String>,
    /// Join the results.json of runs that chose different workloads into one report (its
    /// tables, charts and page) in --out, and exit
    #[arg(long, value_name = "FILE", num_args = 1.., conflicts_with_all = ["render", "validate", "count"])]
    merge: Vec<PathBuf>,
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
    clap::builder::PossibleValuesParser::new(Workload::ALL.iter().map(|w| w.name()))
        .map(|name| Workload::from_name(&name).expect("one of the possible values"))
}

impl Cli {
    /// The workloads to run, in report order: the named ones, or all.
    fn workloads(&self) -> Vec<Workload> {
        Workload::ALL
            .iter()
            .copied()
            .filter(|w| self.workloads.is_empty() || self.workloads.contains(w))
            .collect()
    }

    /// `--count CONTENDER SIZE`, parsed.
    fn count(&self) -> Result<Option<(String, usize)>, String> {
        match self.count.as_slice() {
            [] => Ok(None),
            [who, size] => Ok(Some((
                who.clone(),
                size.parse()
                    .map_err(|_| format!("--count: {size:?} is not a size in bytes"))?,
            ))),
            _ => Err("--count needs a contender and a size".into()),
        }
    }
}

fn main() -> ExitCode {
    // The grpc workload's server, run as a child of this binary: `grpc_server`'s command line.
    if std::env::args().nth(1).as_deref() == Some("grpc-server") {
        return tierpool_bench::fixtures::grpc::server_main(std::env::args().skip(1));
    }
    // The uploads workload's server: tierpool-axum's `upload_server` example.
    if std::env::args().nth(1).as_deref() == Some("upload-server") {
        return match tierpool_bench::fixtures::upload_server::run(std::env::args().skip(2)) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("upload-server: {e}");
                ExitCode::FAILURE
            }
        };
    }
    // The redis and soak workloads' server: `kv_server`'s command line.
    if std::env::args().nth(1).as_deref() == Some("kv-server") {
        return tierpool_bench::fixtures::kv::server_main(std::env::args().skip(2));
    }
    let cli = Cli::parse();
    if let Some(shell) = cli.completions {
        let mut cmd = Cli::command();
        clap_complete::generate(shell, &mut cmd, "tierpool-bench", &mut std::io::stdout());
        return ExitCode::SUCCESS;
    }
    let count = match cli.count() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let outcome = match (cli.child, count, &cli.validate, &cli.render) {
        (true, ..) => child(&cli),
        (false, Some((who, n)), ..) => count_one(&who, n),
        (false, None, Some(path), _) => validate(path, &cli.workloads()),
        (false, None, None, Some(path)) => match &cli.out {
            Some(dir) => page::into_dir(path, dir),
            None => render::into_document(path, cli.into.as_deref(), cli.charts_into.as_deref()),
        },
        (false, None, None, None) if !cli.merge.is_empty() => merge(&cli),
        (false, None, None, None) => report(&cli),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            progress::finish();
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `--count`: the instructions per get-put iteration of one contender at one size.
fn count_one(who: &str, n: usize) -> Result<(), String> {
    let kind = Kind::from_id(who).ok_or(format!("unknown contender {who}"))?;
    let per_op = workloads::instructions::count(kind, Allocator::System, n)?;
    println!("{per_op:.1}");
    Ok(())
}

/// The workloads whose records carry no allocation counts.
fn uncounted() -> Vec<&'static str> {
    Workload::ALL
        .iter()
        .filter(|w| !w.counts_allocations())
        .map(|w| w.name())
        .collect()
}

/// `--validate`: a results.json holds every chosen workload, every figure finite and positive.
fn validate(path: &Path, chosen: &[Workload]) -> Result<(), String> {
    let json = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let names: Vec<&str> = chosen.iter().map(|w| w.name()).collect();
    let n = record::validate(&json, &names, &uncounted())?;
    println!(
        "{}: {n} records, every workload present, every figure finite and positive",
        path.display()
    );
    Ok(())
}

/// The report: runs the chosen workloads that can run here, then writes its outputs.
fn report(args: &Cli) -> Result<(), String> {
    if alloc::current() != Allocator::System {
        return Err(format!(
            "run the report without {ALLOC_ENV}; it starts its own children"
        ));
    }
    let out_dir = args.out.clone().unwrap_or_else(|| {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/tierpool-report")
    });
    std::fs::create_dir_all(&out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;

    let mut chosen = args.workloads();
    chosen.retain(|w| match w.available(args.quick) {
        Ok(()) => true,
        Err(why) => {
            eprintln!("{why}: the {w} workload is skipped");
            false
        }
    });
    let started = Instant::now();
    let all = run_workloads(&chosen, args.quick)?;
    let cmdline: String = std::env::args().skip(1).map(|a| format!(" {a}")).collect();
    let contenders = workloads::contenders()
        .into_iter()
        .filter(|e| all.records.iter().any(|r| r.contender == e.label))
        .map(|e| (e.label, e.setup))
        .collect();
    let report = Report {
        command: format!("cargo run --release -p tierpool-bench --{cmdline}"),
        quick: args.quick,
        machine: record::machine(),
        workloads: chosen.iter().map(|w| w.name().to_string()).collect(),
        contenders,
        records: all.records,
        timelines: all.timelines,
    };
    let names: Vec<&str> = chosen.iter().map(|w| w.name()).collect();
    record::check(&report, &names, &uncounted())
        .map_err(|e| format!("the report is not well formed: {e}"))?;
    write_outputs(&report, &out_dir, args.json_only, Some(started))
}

/// `--merge`: one report from the results.json of runs that chose different workloads, with
/// its tables, charts and page, in `--out`.
fn merge(args: &Cli) -> Result<(), String> {
    let out_dir = args.out.as_deref().ok_or("--merge needs --out")?;
    std::fs::create_dir_all(out_dir).map_err(|e| format!("{}: {e}", out_dir.display()))?;
    let parts = (args.merge.iter())
        .map(|path| render::read(path).map(|(report, _)| report))
        .collect::<Result<Vec<_>, _>>()?;
    let order: Vec<&str> = Workload::ALL.iter().map(|w| w.name()).collect();
    let merged = record::merge(parts, &order)?;
    let names: Vec<&str> = merged.workloads.iter().map(String::as_str).collect();
    record::check(&merged, &names, &uncounted())
        .map_err(|e| format!("the merged report is not well formed: {e}"))?;
    write_outputs(&merged, out_dir, args.json_only, None)
}

/// Runs the workloads in turn, with the progress bar.
fn run_workloads(chosen: &[Workload], quick: bool) -> Result<Output, String> {
    let mut all = Output::default();
    progress::start(chosen.iter().map(|w| w.weight()).sum());
    for (i, &w) in chosen.iter().enumerate() {
        progress::begin(w.name(), w.describe(), i + 1, chosen.len());
        let t = Instant::now();
        let o = w.run(quick)?;
        progress::end(w.name(), w.weight(), t.elapsed().as_secs_f64());
        all.records.extend(o.records);
        all.timelines.extend(o.timelines);
    }
    progress::finish();
    Ok(all)
}

/// Writes the charts, results.json, report.md and index.html into `out_dir`, and prints the
/// tables unless `json_only`. `started`: when the run began (none for a merge).
fn write_outputs(
    report: &Report,
    out_dir: &Path,
    json_only: bool,
    started: Option<Instant>,
) -> Result<(), String> {
    render::charts(report, out_dir)?;
    let elapsed = started.map(|t| t.elapsed().as_secs_f64());
    let md = render::markdown(report, &render::Style::report(), elapsed);
    let page = page::html(report, out_dir, elapsed, &page::now());
    let json = serde_json::to_string_pretty(report).map_err(|e| e.to_string())?;
    let json_path = out_dir.join("results.json");
    write(&json_path, &json)?;
    write(&out_dir.join("report.md"), &md)?;
    write(&out_dir.join("index.html"), &page)?;
    if !json_only {
        println!("{md}");
    }
    let took = elapsed.map_or_else(String::new, |s| format!(" in {s:.0} s"));
    eprintln!(
        "wrote {} (and report.md, index.html, one SVG per workload){took}",
        json_path.display(),
    );
    Ok(())
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// A child process: runs its workload's share ([`workloads::Scenario::child`]) under this
/// process's allocator and prints its output as JSON.
fn child(a: &Cli) -> Result<(), String> {
    let ctx = Ctx {
        quick: a.quick,
        alloc: alloc::current(),
        progress: true,
    };
    let &[w] = a.workloads().as_slice() else {
        return Err("a child runs exactly one workload".into());
    };
    let args = ChildArgs {
        contender: a.contender.clone(),
        shape: a.shape,
        size: a.size,
    };
    let Some(out) = w.child(&ctx, &args)? else {
        return Ok(());
    };
    let json = serde_json::to_string(&out).map_err(|e| e.to_string())?;
    std::io::stdout()
        .write_all(json.as_bytes())
        .map_err(|e| e.to_string())
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
        let names: Vec<&str> = cli.workloads().iter().map(|w| w.name()).collect();
        assert_eq!(names, ["lookup", "burst"]);
        assert_eq!(cli.count(), Ok(Some(("tierpool".to_string(), 4096))));
        let all = Cli::try_parse_from(["tierpool-bench"]).unwrap();
        assert_eq!(all.workloads(), Workload::ALL.to_vec());
        let bad = Cli::try_parse_from(["tierpool-bench", "--count", "tierpool", "many"]).unwrap();
        assert!(bad.count().unwrap_err().contains("not a size"));
        assert!(Cli::try_parse_from(["tierpool-bench", "--workload", "nope"]).is_err());
    }
}
