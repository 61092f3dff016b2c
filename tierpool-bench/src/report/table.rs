//! The Markdown (and HTML) tables of a report: one per workload, its records in display order
//! with their ratios to tierpool and to the baseline.

use std::fmt::Write as _;

use crate::harness::record::{fmt_num, Record};

/// Ratio of `x` to the reference `r` as `1.23x`, or `-` without a reference.
fn ratio(x: f64, r: Option<f64>) -> String {
    match r {
        Some(r) if r > 0.0 => format!("{:.2}x", x / r),
        _ => "-".into(),
    }
}

/// A table of figures: a header, which columns are numbers (right-aligned), and the cells,
/// as text. Written as Markdown ([`Table::markdown`]) or HTML (`crate::report::page`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Table {
    /// Column names.
    pub header: Vec<String>,
    /// True for a column of numbers.
    pub numeric: Vec<bool>,
    /// One row of cells per record.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// The table in Markdown, numbers right-aligned.
    pub fn markdown(&self) -> String {
        let mut out = String::from("|");
        for h in &self.header {
            let _ = write!(out, " {h} |");
        }
        out.push_str("\n|");
        for &n in &self.numeric {
            out.push_str(if n { "---:|" } else { "---|" });
        }
        out.push('\n');
        for row in &self.rows {
            out.push('|');
            for c in row {
                let _ = write!(out, " {} |", markdown_cell(c));
            }
            out.push('\n');
        }
        out
    }
}

/// `cell` as a Markdown table cell: a `|` would end the cell and a `<` start an HTML tag
/// (`Full<Bytes>` would render as `Full`).
fn markdown_cell(cell: &str) -> String {
    cell.replace('|', "\\|").replace('<', "&lt;")
}

/// The table of one workload's records: for each parameter and metric, one row per
/// contender with median/min/max, allocations and bytes per op, extras, and ratios of the
/// median against tierpool and against `baseline` (`Vec (glibc)`, say) for the same parameter
/// and metric.
pub fn table_of(records: &[&Record], baseline: &str) -> Table {
    let mut extra_keys: Vec<&str> = records
        .iter()
        .flat_map(|r| r.extra.keys().map(String::as_str))
        .collect();
    extra_keys.sort_unstable();
    extra_keys.dedup();
    let with_allocs = records.iter().any(|r| r.allocs_per_op.is_some());
    let mut header: Vec<String> = ["contender", "param", "metric", "median", "min", "max"]
        .map(String::from)
        .to_vec();
    if with_allocs {
        header.extend(["allocs/op".to_string(), "bytes/op".to_string()]);
    }
    header.extend(extra_keys.iter().map(|k| k.to_string()));
    header.extend(["vs tierpool".to_string(), format!("vs {baseline}")]);
    let numeric = (0..header.len()).map(|i| i >= 3).collect();
    let reference = |name: &str, r: &Record| {
        records
            .iter()
            .find(|o| o.contender == name && o.param == r.param && o.metric == r.metric)
            .map(|o| o.median)
    };
    let rows = records
        .iter()
        .map(|r| {
            let mut row = vec![
                r.contender.clone(),
                r.param.clone(),
                r.metric.clone(),
                fmt_num(r.median),
                fmt_num(r.min),
                fmt_num(r.max),
            ];
            if with_allocs {
                let opt = |x: Option<f64>| x.map_or("-".into(), fmt_num);
                row.extend([opt(r.allocs_per_op), opt(r.bytes_per_op)]);
            }
            for k in &extra_keys {
                row.push(r.extra.get(*k).map_or("-".into(), |x| fmt_num(*x)));
            }
            row.push(ratio(r.median, reference("tierpool", r)));
            row.push(ratio(r.median, reference(baseline, r)));
            row
        })
        .collect();
    Table {
        header,
        numeric,
        rows,
    }
}

/// [`table_of`] in Markdown.
pub fn table(records: &[&Record], baseline: &str) -> String {
    table_of(records, baseline).markdown()
}

/// Sorts records for display: by parameter (in first-seen order), then contender order.
pub fn ordered<'a>(
    records: &'a [Record],
    workload: &str,
    contender_order: &[String],
) -> Vec<&'a Record> {
    let mut params: Vec<&str> = Vec::new();
    for r in records.iter().filter(|r| r.workload == workload) {
        if !params.contains(&r.param.as_str()) {
            params.push(&r.param);
        }
    }
    let mut rs: Vec<&Record> = records.iter().filter(|r| r.workload == workload).collect();
    let pos = |name: &str| {
        contender_order
            .iter()
            .position(|c| c == name)
            .unwrap_or(usize::MAX)
    };
    rs.sort_by_key(|r| {
        (
            params.iter().position(|p| *p == r.param),
            r.metric.clone(),
            pos(&r.contender),
        )
    });
    rs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::record::sample;

    fn record(contender: &str, median: f64) -> Record {
        sample("get-put", contender, "4 KiB", median)
    }

    #[test]
    fn table_has_ratios() {
        let rs = [record("tierpool", 10.0), record("Vec (glibc)", 25.0)];
        let t = table(&rs.iter().collect::<Vec<_>>(), "Vec (glibc)");
        assert!(
            t.contains(
                "| Vec (glibc) | 4 KiB | ns/op | 25.0 | 22.5 | 27.5 | 0 | 0 | 2.50x | 1.00x |"
            ),
            "{t}"
        );
    }

    #[test]
    fn markdown_cells_keep_their_text() {
        let t = Table {
            header: vec!["contender".into()],
            numeric: vec![false],
            rows: vec![vec!["Full<Bytes> | a".into()]],
        };
        assert_eq!(
            t.markdown(),
            "| contender |\n|---|\n| Full&lt;Bytes> \\| a |\n"
        );
    }
}
