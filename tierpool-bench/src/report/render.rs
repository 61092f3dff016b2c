//! From a [`Report`] (a run in memory, or a `results.json` read back) to what a person reads:
//! the Markdown of `report.md` and of a document's marked section ([`markdown`], one function
//! for both), the charts ([`charts`]), and the marked section replaced in place ([`splice`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use crate::harness::record::{Record, Report};
use crate::report::table::{self, Table};
use crate::report::verdict::{self, Verdict};
use crate::workloads::{self, ChartData, Workload};

/// The line before a document's rendered section.
pub const BEGIN: &str = "<!-- report:begin -->";
/// The line after it.
pub const END: &str = "<!-- report:end -->";

/// One workload as the report shows it.
#[derive(Debug)]
pub struct Section<'a> {
    /// Its name (also its chart's file name, `<name>.svg`).
    pub name: String,
    /// What it measures; empty for a workload this binary does not know.
    pub describe: &'static str,
    /// Its records, in table order.
    pub rows: Vec<&'a Record>,
    /// Its table.
    pub table: Table,
    /// Its contenders, in report order.
    pub order: Vec<String>,
}

/// The workloads of `report`, in its order, each with its rows in table order.
pub fn sections(report: &Report) -> Vec<Section<'_>> {
    report
        .workloads
        .iter()
        .map(|name| {
            let w = Workload::from_name(name);
            let order = w.map(|w| w.order()).unwrap_or_default();
            let baseline = w.map_or_else(
                || crate::contenders::Kind::Vec.label(crate::harness::alloc::Allocator::System),
                |w| w.baseline(),
            );
            let rows = table::ordered(&report.records, name, &order);
            Section {
                name: name.clone(),
                describe: w.map_or("", |w| w.describe()),
                table: table::table_of(&rows, &baseline),
                rows,
                order,
            }
        })
        .collect()
}

/// The contenders of `report`'s records with their set-up, in report order (those this
/// binary does not know at the end, by name).
pub fn contenders(report: &Report) -> Vec<(&str, &str)> {
    let used = |name: &str| report.records.iter().any(|r| r.contender == name);
    let mut order: Vec<String> = workloads::contenders()
        .into_iter()
        .map(|e| e.label)
        .collect();
    order.extend(report.contenders.keys().cloned());
    workloads::dedup(&mut order);
    order
        .iter()
        .filter(|name| used(name))
        .filter_map(|name| {
            report
                .contenders
                .get_key_value(name.as_str())
                .map(|(k, v)| (k.as_str(), v.as_str()))
        })
        .collect()
}

/// The verdict of every workload of `sections` ([`Verdict`]) as a table: the workload, the
/// verdict, the tally, tierpool's advantage and the contenders that were best elsewhere.
/// `link` writes a workload's name as a link to its section.
pub fn verdict_table(sections: &[Section<'_>], link: impl Fn(&str) -> String) -> Table {
    let header: Vec<String> = [
        "workload",
        "verdict",
        "comparisons",
        "tierpool's advantage",
        "the best other",
    ]
    .map(String::from)
    .to_vec();
    let rows = sections
        .iter()
        .map(|s| {
            let v = Verdict::of(&s.name, &s.rows);
            vec![
                link(&s.name),
                v.summary().to_string(),
                v.tally(),
                v.range(),
                v.rivals().join(", "),
            ]
        })
        .collect();
    Table {
        numeric: vec![false, false, false, true, false],
        header,
        rows,
    }
}

/// How [`markdown`] writes.
#[derive(Clone, Debug)]
pub struct Style {
    /// The heading level of each workload (2 in `report.md`: `## lookup`).
    pub level: usize,
    /// What comes before `<workload>.svg` in chart links (`""` beside the charts,
    /// `"docs/bench/"` from the repository's root).
    pub charts: String,
    /// The report's own title and header (command, machine, run time): `report.md` has them,
    /// a section of another document does not.
    pub header: bool,
}

impl Style {
    /// `report.md`'s.
    pub fn report() -> Style {
        Style {
            level: 2,
            charts: String::new(),
            header: true,
        }
    }

    /// A section of a document whose charts are in `charts` (`docs/bench/`).
    pub fn section(charts: &str) -> Style {
        let mut charts = charts.to_string();
        if !charts.is_empty() && !charts.ends_with('/') {
            charts.push('/');
        }
        Style {
            level: 3,
            charts,
            header: false,
        }
    }
}

/// `N CPUs, CPU, memory` from the report's machine facts.
pub fn machine_line(machine: &BTreeMap<String, String>) -> String {
    format!(
        "{} CPUs, {}, {}",
        machine.get("nproc").map_or("?", String::as_str),
        machine.get("cpu").map_or("unknown CPU", String::as_str),
        machine.get("memory").map_or("? memory", String::as_str),
    )
}

/// How to read the tables (`report.md`'s header and the page's).
pub const READING: &str = "Times are medians over interleaved rounds (min and max beside them); ratios are the contender's median over tierpool's (above 1: tierpool is faster) and over `Vec` under glibc. Allocations are counted by the global allocator in a separate pass.";

/// The report in Markdown: with [`Style::report`], `report.md` (`elapsed`: the run's
/// seconds, for its header); with [`Style::section`], what goes between a document's markers.
pub fn markdown(report: &Report, style: &Style, elapsed: Option<f64>) -> String {
    let h = "#".repeat(style.level);
    let mut md = String::new();
    if style.header {
        let _ = write!(
            md,
            "# tierpool comparison report\n\nCommand: `{}`{}\n\nMachine: {}.{}\n\n{READING}\n",
            report.command,
            if report.quick {
                " (**--quick: figures prove the pipeline only**)"
            } else {
                ""
            },
            machine_line(&report.machine),
            elapsed.map_or(String::new(), |s| format!(" Total run time {s:.0} s.")),
        );
    }
    let sections = sections(report);
    let _ = write!(
        md,
        "\n{h} Verdict\n\n{}\n\n{}",
        verdict::READING,
        verdict_table(&sections, |w| format!("[{w}](#{w})")).markdown()
    );
    for s in sections {
        let _ = write!(
            md,
            "\n{h} {w}\n\n{}\n\n{}\n![{w}]({}{w}.svg)\n",
            s.describe,
            s.table.markdown(),
            style.charts,
            w = s.name,
        );
    }
    let _ = write!(
        md,
        "\n{h} Contenders\n\n| contender | set-up |\n|---|---|\n"
    );
    for (name, setup) in contenders(report) {
        let _ = writeln!(md, "| {name} | {setup} |");
    }
    md
}

/// Draws every workload's chart into `dir` as `<workload>.svg`.
pub fn charts(report: &Report, dir: &Path) -> Result<(), String> {
    for s in sections(report) {
        let Some(w) = Workload::from_name(&s.name) else {
            continue;
        };
        let path = dir.join(format!("{}.svg", s.name));
        let data = ChartData {
            rows: &s.rows,
            order: &s.order,
            timelines: &report.timelines,
        };
        w.chart(&path, &data)
            .map_err(|e| format!("chart {}: {e}", path.display()))?;
    }
    Ok(())
}

/// `doc` with the text between its [`BEGIN`] and [`END`] lines replaced by `body`; the
/// marker lines and everything outside them are kept as they are.
pub fn splice(doc: &str, body: &str) -> Result<String, String> {
    let begin = doc
        .find(BEGIN)
        .ok_or(format!("no {BEGIN} line to render into"))?;
    let after_begin = begin + BEGIN.len();
    let end = doc[after_begin..]
        .find(END)
        .map(|i| after_begin + i)
        .ok_or(format!("no {END} line after {BEGIN}"))?;
    if doc[end + END.len()..].contains(BEGIN) || doc[after_begin..].contains(BEGIN) {
        return Err(format!("more than one {BEGIN}"));
    }
    let body = body.trim_matches('\n');
    Ok(format!(
        "{}\n\n{body}\n\n{}",
        &doc[..after_begin],
        &doc[end..]
    ))
}

/// Reads a `results.json`.
pub fn read(json: &Path) -> Result<(Report, String), String> {
    let text = std::fs::read_to_string(json).map_err(|e| format!("{}: {e}", json.display()))?;
    let report = serde_json::from_str(&text)
        .map_err(|e| format!("{}: not a report: {e}", json.display()))?;
    Ok((report, text))
}

/// `--render FILE`: the report's tables from a `results.json`, between the markers of the
/// document `into` (or on stdout), and its charts and `results.json` copied into
/// `charts_into`, where the tables' chart links point.
pub fn into_document(
    json: &Path,
    into: Option<&Path>,
    charts_into: Option<&Path>,
) -> Result<(), String> {
    let (report, text) = read(json)?;
    // Links relative to the document, to where the charts are copied.
    let link = match (into, charts_into) {
        (Some(doc), Some(dir)) => relative_to(dir, doc.parent().unwrap_or(Path::new(""))),
        (None, Some(dir)) => dir.display().to_string(),
        (_, None) => "docs/bench".into(),
    };
    let body = markdown(&report, &Style::section(&link), None);
    if let Some(dir) = charts_into {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let from = json.parent().unwrap_or(Path::new("."));
        for w in &report.workloads {
            let svg = from.join(format!("{w}.svg"));
            let to = dir.join(format!("{w}.svg"));
            std::fs::copy(&svg, &to)
                .map_err(|e| format!("copying {} to {}: {e}", svg.display(), to.display()))?;
        }
        let to = dir.join("results.json");
        if std::fs::canonicalize(json).ok() != std::fs::canonicalize(&to).ok() {
            std::fs::write(&to, &text).map_err(|e| format!("{}: {e}", to.display()))?;
        }
        eprintln!(
            "copied {} charts and results.json into {}",
            report.workloads.len(),
            dir.display()
        );
    }
    match into {
        Some(doc) => {
            let old =
                std::fs::read_to_string(doc).map_err(|e| format!("{}: {e}", doc.display()))?;
            let new = splice(&old, &body).map_err(|e| format!("{}: {e}", doc.display()))?;
            std::fs::write(doc, new).map_err(|e| format!("{}: {e}", doc.display()))?;
            eprintln!("rendered {} into {}", json.display(), doc.display());
        }
        None => print!("{body}"),
    }
    Ok(())
}

/// `dir` as a path relative to the directory `base` (both as given, made absolute from the
/// current directory): the chart links of a document in `base`.
pub fn relative_to(dir: &Path, base: &Path) -> String {
    let abs = |p: &Path| {
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            std::env::current_dir().unwrap_or_default().join(p)
        };
        p.components()
            .filter(|c| !matches!(c, std::path::Component::CurDir))
            .collect::<Vec<_>>()
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect::<Vec<_>>()
    };
    let (d, b) = (abs(dir), abs(base));
    let common = d.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<String> = vec!["..".into(); b.len() - common];
    parts.extend(d[common..].iter().cloned());
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::record::{sample as record, Output};

    /// A small synthetic `results.json`: two workloads, three contenders.
    fn synthetic() -> String {
        let out = Output {
            records: vec![
                record("get-put", "Vec (glibc)", "4 KiB", 20.0),
                record("get-put", "tierpool", "4 KiB", 5.0),
                record("get-put", "tierpool", "1 MiB", 6.0),
                record("get-put", "Vec (glibc)", "1 MiB", 30.0),
                record("cross-thread", "tierpool", "4 KiB", 100.0),
                record("cross-thread", "opool 0.2", "4 KiB", 150.0),
            ],
            timelines: vec![],
        };
        let contenders = ["tierpool", "Vec (glibc)", "opool 0.2"]
            .into_iter()
            .map(|c| (c.to_string(), format!("{c} set up")))
            .collect();
        serde_json::to_string_pretty(&Report {
            command: "cargo run --release -p tierpool-bench -- --quick".into(),
            quick: true,
            machine: BTreeMap::from([("nproc".to_string(), "2".to_string())]),
            workloads: vec!["get-put".into(), "cross-thread".into()],
            contenders,
            records: out.records,
            timelines: out.timelines,
        })
        .unwrap()
    }

    const DOC: &str = "# Benchmarks\n\nProse before.\n\n## The full run\n\n<!-- report:begin -->\nold tables\n<!-- report:end -->\n\n## After\n\nProse after.\n";

    #[test]
    fn report_md_and_the_section_come_from_one_function() {
        let report: Report = serde_json::from_str(&synthetic()).unwrap();
        let md = markdown(&report, &Style::report(), Some(12.0));
        assert!(md.starts_with("# tierpool comparison report\n\nCommand: `cargo run --release -p tierpool-bench -- --quick` (**--quick"), "{md}");
        assert!(md.contains("Total run time 12 s."));
        assert!(md.contains("\n## get-put\n\nModelled on goleveldb"));
        assert!(md.contains("![get-put](get-put.svg)"));
        // Table order: parameter, then contender in report order (tierpool before Vec).
        let t = md.find("| tierpool | 4 KiB |").unwrap();
        let v = md.find("| Vec (glibc) | 4 KiB |").unwrap();
        let t1 = md.find("| tierpool | 1 MiB |").unwrap();
        assert!(t < v && v < t1, "{md}");
        assert!(md.contains(
            "| Vec (glibc) | 4 KiB | ns/op | 20.0 | 18.0 | 22.0 | 0 | 0 | 4.00x | 1.00x |"
        ));
        assert!(md.contains("\n## Contenders\n"));
        assert!(md.contains("| opool 0.2 | opool 0.2 set up |"));

        let section = markdown(&report, &Style::section("docs/bench"), None);
        assert!(!section.contains("# tierpool comparison report"));
        assert!(section.contains("\n### get-put\n"));
        assert!(section.contains("![cross-thread](docs/bench/cross-thread.svg)"));
        assert!(section.contains("\n### Contenders\n"));
        // The verdict first, each workload a link to its section.
        assert!(md.find("## Verdict").unwrap() < md.find("## get-put").unwrap());
        assert!(md.contains("| [get-put](#get-put) |"), "{md}");
        // The same tables.
        assert_eq!(
            md.matches("| tierpool | 4 KiB |").count(),
            section.matches("| tierpool | 4 KiB |").count()
        );
    }

    #[test]
    fn chart_links_are_relative_to_the_document() {
        assert_eq!(
            relative_to(Path::new("docs/bench"), Path::new("")),
            "docs/bench"
        );
        assert_eq!(
            relative_to(Path::new("/a/b/c"), Path::new("/a/d")),
            "../b/c"
        );
        assert_eq!(relative_to(Path::new("./x/"), Path::new(".")), "x");
    }

    #[test]
    fn splicing_keeps_the_markers_and_everything_outside_them() {
        let report: Report = serde_json::from_str(&synthetic()).unwrap();
        let body = markdown(&report, &Style::section("docs/bench"), None);
        let once = splice(DOC, &body).unwrap();
        assert!(once.starts_with("# Benchmarks\n\nProse before.\n\n## The full run\n\n<!-- report:begin -->\n\n### Verdict\n"));
        assert!(once.ends_with("<!-- report:end -->\n\n## After\n\nProse after.\n"));
        assert!(!once.contains("old tables"));
        // Round trip: rendering again changes nothing.
        assert_eq!(splice(&once, &body).unwrap(), once);
        // The text between the markers is the body.
        let inner = &once[once.find(BEGIN).unwrap() + BEGIN.len()..once.find(END).unwrap()];
        assert_eq!(inner.trim(), body.trim());
        // Without markers, or with two, nothing is written.
        assert!(splice("# no markers\n", &body).is_err());
        assert!(splice(&format!("{DOC}{BEGIN}\n"), &body).is_err());
        assert!(splice(&format!("{END}\n{BEGIN}\n"), &body).is_err());
    }
}
