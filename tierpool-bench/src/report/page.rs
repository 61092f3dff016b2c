//! `index.html`: the report as one page that reads offline (no network, no external fonts or
//! scripts): the machine, command and date, a table of contents, and each workload's
//! question, chart (the SVG inlined) and table.
//!
//! A small inline script counts, once the page has loaded, the charts that rendered (non-zero
//! size) and writes the count into `<span id="charts-loaded" data-count="N">`, beside the
//! number expected (`data-expected`): `scripts/check_report_page.py` reads it back from a
//! headless browser.

use std::fmt::Write as _;
use std::path::Path;

use crate::harness::record::Report;
use crate::report::render::{self, Section};
use crate::report::table::Table;
use crate::report::verdict;

/// Escapes text for HTML.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(c),
        }
    }
    out
}

/// Inline code (`like this`) in otherwise plain text, escaped.
fn prose(s: &str) -> String {
    escape(s)
        .split('`')
        .enumerate()
        .map(|(i, part)| {
            if i % 2 == 1 {
                format!("<code>{part}</code>")
            } else {
                part.to_string()
            }
        })
        .collect()
}

/// The date and time now, `2026-12-01 14:05 UTC`.
pub fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    utc(secs)
}

/// Seconds since 1970 as `YYYY-MM-DD HH:MM UTC` (the civil calendar, from days).
pub fn utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let (hh, mm) = ((secs % 86_400) / 3600, (secs % 3600) / 60);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {hh:02}:{mm:02} UTC")
}

const STYLE: &str = r#"
:root { color-scheme: light; }
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
  margin: 0 auto; max-width: 1320px; padding: 16px 28px 48px; color: #1b1b1b; background: #fff; }
h1 { font-size: 26px; margin: 8px 0 4px; }
h2 { font-size: 21px; margin: 0 0 6px; padding-top: 10px; border-top: 3px solid #d62728; }
header p, footer p { margin: 4px 0; }
.quick { background: #fff3cd; border: 1px solid #e0c060; padding: 6px 10px; border-radius: 4px; }
nav { columns: 4 180px; background: #f5f6f8; padding: 8px 16px; border-radius: 6px; margin: 14px 0 22px; }
nav a { display: block; text-decoration: none; color: #1f5fa8; padding: 1px 0; }
nav a:hover { text-decoration: underline; }
section { margin: 0 0 34px; }
.question { max-width: 1100px; color: #333; }
figure.chart { margin: 12px 0; }
figure.chart svg { display: block; max-width: 100%; height: auto; border: 1px solid #e3e3e3; }
.missing { color: #b00020; font-weight: bold; }
.table { overflow-x: auto; max-width: 100%; }
table { border-collapse: collapse; font-size: 13px; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 7px; border-bottom: 1px solid #e6e6e6; white-space: nowrap; }
th { background: #eef1f5; text-align: left; position: sticky; top: 0; vertical-align: bottom;
  white-space: normal; overflow-wrap: break-word; min-width: 4.6em; max-width: 7em; }
td:first-child { white-space: normal; min-width: 11em; max-width: 20em; }
td:nth-child(2), td:nth-child(3) { white-space: normal; max-width: 10em; }
th.num, td.num { text-align: right; }
tr.ours td:first-child { font-weight: 600; }
tr.ours { background: #fdf1f1; }
tr.first td { border-top: 2px solid #b8bec8; }
table.verdict td { white-space: normal; max-width: 28em; }
table.verdict tr.win td:nth-child(2) { color: #1a7f37; font-weight: 600; }
table.verdict tr.loss td:nth-child(2) { color: #b00020; font-weight: 600; }
table.verdict tr.mixed td:nth-child(2) { color: #9a6700; font-weight: 600; }
table.contenders td { white-space: normal; vertical-align: top; }
table.contenders td:first-child { white-space: nowrap; font-weight: 600; }
code { background: #f2f2f2; padding: 0 3px; border-radius: 3px; }
"#;

/// Counts the charts that rendered once everything has loaded.
const SCRIPT: &str = r#"
window.addEventListener('load', function () {
  var drawn = 0;
  document.querySelectorAll('figure.chart svg').forEach(function (svg) {
    var r = svg.getBoundingClientRect();
    if (r.width > 0 && r.height > 0) { drawn += 1; }
  });
  var m = document.getElementById('charts-loaded');
  m.setAttribute('data-count', String(drawn));
  m.textContent = String(drawn);
  document.body.setAttribute('data-height', String(document.documentElement.scrollHeight));
});
"#;

/// A table in HTML: numbers right-aligned, tierpool's rows marked, a line where the
/// parameter changes.
fn table_html(t: &Table) -> String {
    let mut last_param: Option<String> = None;
    let row_class = |row: &[String]| {
        let mut classes = Vec::new();
        if row.first().is_some_and(|c| verdict::is_tierpool(c)) {
            classes.push("ours");
        }
        let param = row.get(1).cloned();
        if last_param.is_some() && param != last_param {
            classes.push("first");
        }
        last_param = param;
        classes.join(" ")
    };
    html_table(t, "", row_class, |_, c| escape(c))
}

/// `t` as an HTML table (`class` on the `<table>` if not empty): each row's classes from
/// `row_class` (none if empty), each cell's HTML from `cell` (its column and text), numeric
/// columns right-aligned.
fn html_table(
    t: &Table,
    class: &str,
    mut row_class: impl FnMut(&[String]) -> String,
    cell: impl Fn(usize, &str) -> String,
) -> String {
    let mut out = String::from("<div class=\"table\"><table");
    if !class.is_empty() {
        let _ = write!(out, " class=\"{}\"", escape(class));
    }
    out.push_str(">\n<thead><tr>");
    for (h, &num) in t.header.iter().zip(&t.numeric) {
        let _ = write!(out, "<th{}>{}</th>", num_class(num), escape(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in &t.rows {
        let classes = row_class(row);
        if classes.is_empty() {
            out.push_str("<tr>");
        } else {
            let _ = write!(out, "<tr class=\"{}\">", escape(&classes));
        }
        for (i, (c, &num)) in row.iter().zip(&t.numeric).enumerate() {
            let _ = write!(out, "<td{}>{}</td>", num_class(num), cell(i, c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody></table></div>\n");
    out
}

/// The SVG at `path`, ready to inline (its XML prolog dropped), or a note that it is missing.
fn inline_svg(path: &Path) -> String {
    match std::fs::read_to_string(path) {
        Ok(svg) => match svg.find("<svg") {
            Some(i) => {
                let svg = &svg[i..];
                format!(
                    "<svg role=\"img\" aria-label=\"{}\"{}",
                    escape(&path.file_name().unwrap_or_default().to_string_lossy()),
                    &svg[4..]
                )
            }
            None => format!(
                "<p class=\"missing\">{}: not an SVG</p>",
                escape(&path.display().to_string())
            ),
        },
        Err(e) => format!(
            "<p class=\"missing\">{}: {}</p>",
            escape(&path.display().to_string()),
            escape(&e.to_string())
        ),
    }
}

/// The verdict ([`render::verdict_table`]) first on the page: each workload a link to its
/// section, each row classed by its verdict (`win`, `loss`, ...) for the style to colour.
fn verdict_html(sections: &[Section<'_>]) -> String {
    let t = render::verdict_table(sections, |w| w.to_string());
    let table = html_table(
        &t,
        "verdict",
        |row| row[1].replace(' ', "-"),
        |i, c| {
            let c = escape(c);
            if i == 0 {
                format!("<a href=\"#{c}\">{c}</a>")
            } else {
                c
            }
        },
    );
    format!(
        "<section id=\"verdict\">\n<h2>Verdict</h2>\n<p class=\"question\">{}</p>\n{table}</section>\n",
        prose(verdict::READING)
    )
}

fn num_class(num: bool) -> &'static str {
    if num {
        " class=\"num\""
    } else {
        ""
    }
}

fn section_html(s: &Section, charts: &Path) -> String {
    let w = escape(&s.name);
    format!(
        "<section id=\"{w}\">\n<h2>{w}</h2>\n<p class=\"question\">{}</p>\n<figure class=\"chart\">\n{}\n</figure>\n{}</section>\n",
        prose(s.describe),
        inline_svg(&charts.join(format!("{}.svg", s.name))),
        table_html(&s.table)
    )
}

/// The page of `report`, its charts inlined from `charts/<workload>.svg`; `elapsed` the run's
/// seconds and `date` when it ran, where known.
pub fn html(report: &Report, charts: &Path, elapsed: Option<f64>, date: &str) -> String {
    let sections = render::sections(report);
    let mut out = String::new();
    let _ = write!(
        out,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>tierpool comparison report</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<header>\n<h1>tierpool comparison report</h1>\n"
    );
    if report.quick {
        out.push_str("<p class=\"quick\"><strong>A --quick run:</strong> tiny iteration counts that prove every workload runs and the report is well formed; its figures measure nothing worth quoting.</p>\n");
    }
    let _ = write!(
        out,
        "<p>Command: <code>{}</code></p>\n<p>Machine: {}, {}.{}</p>\n<p>Date: {}</p>\n<p>{}</p>\n</header>\n<nav>\n",
        escape(&report.command),
        escape(&render::machine_line(&report.machine)),
        escape(report.machine.get("os").map_or("?", String::as_str)),
        elapsed.map_or(String::new(), |s| format!(" Total run time {s:.0} s.")),
        escape(date),
        prose(render::READING),
    );
    out.push_str("<a href=\"#verdict\">verdict</a>\n");
    for s in &sections {
        let _ = writeln!(out, "<a href=\"#{0}\">{0}</a>", escape(&s.name));
    }
    out.push_str("<a href=\"#contenders\">contenders</a>\n</nav>\n<main>\n");
    out.push_str(&verdict_html(&sections));
    for s in &sections {
        out.push_str(&section_html(s, charts));
    }
    out.push_str("<section id=\"contenders\">\n<h2>Contenders</h2>\n<div class=\"table\"><table class=\"contenders\">\n<thead><tr><th>contender</th><th>set-up</th></tr></thead>\n<tbody>\n");
    for (name, setup) in render::contenders(report) {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td></tr>",
            escape(name),
            prose(setup)
        );
    }
    let _ = write!(
        out,
        "</tbody></table></div>\n</section>\n</main>\n<footer>\n<p>Charts drawn: <span id=\"charts-loaded\" data-count=\"0\" data-expected=\"{n}\">0</span> of {n}.</p>\n</footer>\n<script>{SCRIPT}</script>\n</body>\n</html>\n",
        n = sections.len()
    );
    out
}

/// `--render FILE --out DIR`: the charts redrawn, `report.md` and `index.html` written into
/// `dir` from a `results.json` (the date on the page: the file's).
pub fn into_dir(json: &Path, dir: &Path) -> Result<(), String> {
    let (report, _) = render::read(json)?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    render::charts(&report, dir)?;
    let date = std::fs::metadata(json)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or_else(
            || "unknown".into(),
            |d| format!("{} (of {})", utc(d.as_secs()), json.display()),
        );
    let md = render::markdown(&report, &render::Style::report(), None);
    let page = html(&report, dir, None, &date);
    for (name, text) in [("report.md", md), ("index.html", page)] {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    eprintln!("rendered {} into {}", json.display(), dir.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::record::Record;

    #[test]
    fn dates() {
        assert_eq!(utc(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc(951_782_400), "2000-02-29 00:00 UTC");
        assert_eq!(
            utc(1_798_761_600 + 3_600 * 14 + 300),
            "2027-01-01 14:05 UTC"
        );
    }

    #[test]
    fn escaping_and_code() {
        assert_eq!(
            escape("Full<Bytes> & \"x\""),
            "Full&lt;Bytes&gt; &amp; &quot;x&quot;"
        );
        assert_eq!(prose("a `b<c>` d"), "a <code>b&lt;c&gt;</code> d");
    }

    #[test]
    fn a_page_inlines_its_charts_and_says_how_many() {
        let dir = std::env::temp_dir().join(format!("tierpool-page-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("get-put.svg"),
            "<?xml version=\"1.0\"?>\n<svg width=\"10\" height=\"10\" viewBox=\"0 0 10 10\"></svg>",
        )
        .unwrap();
        let report = Report {
            command: "cargo run --release -p tierpool-bench -- --quick".into(),
            quick: true,
            machine: Default::default(),
            workloads: vec!["get-put".into(), "lookup".into()],
            contenders: Default::default(),
            records: vec![
                Record::single(
                    "get-put",
                    "tierpool",
                    "glibc",
                    "4 KiB".into(),
                    "ns/op",
                    2.0,
                    Default::default(),
                ),
                Record::single(
                    "get-put",
                    "Vec (jemalloc)",
                    "jemalloc",
                    "4 KiB".into(),
                    "ns/op",
                    8.0,
                    Default::default(),
                ),
            ],
            timelines: vec![],
        };
        let page = html(&report, &dir, Some(3.0), "2026-12-01 14:05 UTC");
        // The verdict opens the page: get-put won 4x, lookup (no records) not compared.
        let verdict = page.find("<section id=\"verdict\">").unwrap();
        assert!(verdict < page.find("<section id=\"get-put\">").unwrap());
        assert!(page.contains("<tr class=\"win\"><td><a href=\"#get-put\">get-put</a></td><td>win</td><td>won 1, drawn 0, lost 0 of 1</td><td class=\"num\">4.00x</td><td>Vec (jemalloc)</td></tr>"), "{page}");
        assert!(page.contains("<tr class=\"not-compared\"><td><a href=\"#lookup\">lookup</a></td>"));
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(page.contains("<svg role=\"img\" aria-label=\"get-put.svg\" width=\"10\""));
        assert!(!page.contains("<?xml"));
        assert!(page.contains("lookup.svg: "), "the missing chart is named");
        assert!(page.contains("data-expected=\"2\""));
        assert!(page.contains("A --quick run"));
        assert!(page.contains("<a href=\"#lookup\">lookup</a>"));
        assert!(
            !page.contains("<link") && !page.contains(" src="),
            "nothing loaded from elsewhere"
        );
    }
}
