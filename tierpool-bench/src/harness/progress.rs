//! The report's progress on the terminal: one bar for the whole run (workloads weighted by
//! their usual length, so its ETA means something) and one line for the workload at work,
//! which shows what it, or the child process it started, is doing (indicatif).
//!
//! Where stderr is not a terminal (CI, a pipe) nothing is drawn and every message is printed
//! as a plain line, as before. A child process has no bars: its status lines go to its
//! stderr, which the parent reads ([`forward`]) and shows on the workload's line.

use std::io::{Read, Write as _};
use std::process::Child;
use std::sync::OnceLock;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

/// The bars of the parent's run, once started.
struct Bars {
    multi: MultiProgress,
    total: ProgressBar,
    current: ProgressBar,
}

static BARS: OnceLock<Bars> = OnceLock::new();

/// Starts the bars for a run of workloads whose weights (their expected shares of the run)
/// add up to `total_weight` (the parent only). Without a terminal on stderr the bars are
/// hidden and [`line`] prints plain lines.
pub fn start(total_weight: u64) {
    let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
    let total = multi.add(ProgressBar::new(total_weight));
    total.set_style(
        ProgressStyle::with_template(
            "{prefix:>12} [{bar:40}] {percent:>3}%  elapsed {elapsed_precise}, about {eta} left",
        )
        .expect("a valid template")
        .progress_chars("=> "),
    );
    total.set_prefix("report");
    let current = multi.add(ProgressBar::new_spinner());
    current.set_style(
        ProgressStyle::with_template("{prefix:>12} {spinner} {msg}").expect("a valid template"),
    );
    current.enable_steady_tick(Duration::from_millis(200));
    let _ = BARS.set(Bars {
        multi,
        total,
        current,
    });
}

fn bars() -> Option<&'static Bars> {
    BARS.get().filter(|b| !b.multi.is_hidden())
}

/// Workload `name` (the `i`th of `n`), which `describe`s itself, begins.
pub fn begin(name: &str, describe: &str, i: usize, n: usize) {
    line(&format!("[{i}/{n}] {name}: {describe}"));
    if let Some(b) = bars() {
        b.current.set_prefix(name.to_string());
        b.current.set_message("starting");
    }
}

/// Workload `name`, of `weight`, ended after `secs` seconds.
pub fn end(name: &str, weight: u64, secs: f64) {
    line(&format!("  {name} done in {secs:.1} s"));
    if let Some(b) = BARS.get() {
        b.total.inc(weight);
    }
}

/// The run is over: the bars go away.
pub fn finish() {
    if let Some(b) = BARS.get() {
        b.current.finish_and_clear();
        b.total.finish_and_clear();
    }
}

/// A line of progress: above the bars where they are drawn, else on stderr.
pub fn line(s: &str) {
    match bars() {
        Some(b) => b.multi.println(s).unwrap_or(()),
        None => eprintln!("{s}"),
    }
}

/// A status that the next one replaces ("round 3/9"): the workload's line where the bars are
/// drawn; a plain line in a parent without a terminal (a log keeps every step); in a child,
/// on stderr, overwritten in place (the parent reads it, [`forward`]).
pub fn status(s: &str) {
    match (bars(), BARS.get()) {
        (Some(b), _) => b.current.set_message(s.trim().to_string()),
        (None, Some(_)) => eprintln!("  {}", s.trim()),
        (None, None) => {
            eprint!("\r  {s}   ");
            let _ = std::io::stderr().flush();
        }
    }
}

/// True if the bars are drawn: children's stderr should then be read with [`forward`]
/// rather than inherited.
pub fn drawing() -> bool {
    bars().is_some()
}

/// Ends a run of [`status`]es: the next output starts on a line of its own.
pub fn status_done() {
    if BARS.get().is_none() {
        eprintln!();
    }
}

/// Reads a child's stderr (piped) on a thread of its own and shows it: each status it
/// overwrites (ended by `\r`) on the workload's line, each finished line (ended by `\n`)
/// above the bars.
pub fn forward(child: &mut Child) {
    let Some(mut stderr) = child.stderr.take() else {
        return;
    };
    std::thread::spawn(move || {
        let (mut pending, mut chunk) = (Vec::new(), [0u8; 512]);
        loop {
            let n = match stderr.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            for &byte in &chunk[..n] {
                if byte != b'\r' && byte != b'\n' {
                    pending.push(byte);
                    continue;
                }
                let text = String::from_utf8_lossy(&pending).trim().to_string();
                pending.clear();
                if text.is_empty() {
                    continue;
                }
                if byte == b'\r' {
                    status(&text);
                } else {
                    line(&format!("  {text}"));
                }
            }
        }
    });
}
