//! One SVG chart per workload (plotters' SVG backend; no fonts or system libraries needed).

use std::path::Path;

use plotters::prelude::*;

use crate::report::{Record, Timeline};

const COLORS: [RGBColor; 12] = [
    RGBColor(214, 39, 40),
    RGBColor(31, 119, 180),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
    RGBColor(0, 0, 0),
    RGBColor(100, 100, 255),
];

/// What drawing a chart can fail with.
pub type Error = Box<dyn std::error::Error>;

/// The line style of the `i`th series: its colour, and a thicker line for tierpool.
fn series_style(i: usize, name: &str) -> ShapeStyle {
    let width = if name == "tierpool" { 4 } else { 2 };
    COLORS[i % COLORS.len()].stroke_width(width)
}

/// A legend entry drawn in `style`.
fn legend(style: ShapeStyle) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style)
}

/// A line per contender of its median over the workload's parameters (x, in order), log y.
/// Records of other metrics than the first one seen are left out.
pub fn by_param(
    path: &Path,
    title: &str,
    records: &[&Record],
    contenders: &[String],
) -> Result<(), Error> {
    let Some(first) = records.first() else {
        return Ok(());
    };
    let metric = first.metric.clone();
    let records: Vec<&&Record> = records.iter().filter(|r| r.metric == metric).collect();
    let mut params: Vec<String> = Vec::new();
    for r in &records {
        if !params.contains(&r.param) {
            params.push(r.param.clone());
        }
    }
    let (lo, hi) = records.iter().fold((f64::MAX, f64::MIN), |(lo, hi), r| {
        (lo.min(r.median), hi.max(r.median))
    });
    let (lo, hi) = (lo / 1.5, hi * 1.5);
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.3f64..(params.len() as f64 - 0.7), (lo..hi).log_scale())?;
    let labels = params.clone();
    chart
        .configure_mesh()
        .x_labels(params.len().max(2))
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 0.01 && i >= 0.0 {
                labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(&metric)
        .y_label_formatter(&|y| crate::report::fmt_num(*y))
        .draw()?;
    let mut color = 0;
    for name in contenders {
        let points: Vec<(f64, f64)> = records
            .iter()
            .filter(|r| &r.contender == name)
            .filter_map(|r| Some((params.iter().position(|p| *p == r.param)? as f64, r.median)))
            .collect();
        if points.is_empty() {
            continue;
        }
        let style = series_style(color, name);
        color += 1;
        chart
            .draw_series(LineSeries::new(points.clone(), style))?
            .label(name.as_str())
            .legend(legend(style));
        chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, style.filled())))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// The allocator a burst line ran under, from its label ("... on jemalloc", "Vec (jemalloc)").
fn allocator_of(label: &str) -> &'static str {
    ["mimalloc", "jemalloc"]
        .into_iter()
        .find(|a| label.ends_with(&format!(" on {a}")) || label.ends_with(&format!("({a})")))
        .unwrap_or("glibc")
}

/// RSS over time (the burst workload): one panel per allocator, stacked, each with its own
/// scale, and within a panel a colour per contender (none repeated).
pub fn timelines(path: &Path, title: &str, lines: &[Timeline]) -> Result<(), Error> {
    if lines.is_empty() {
        return Ok(());
    }
    let groups: Vec<(&str, Vec<&Timeline>)> = ["glibc", "mimalloc", "jemalloc"]
        .into_iter()
        .map(|a| {
            let ls = lines
                .iter()
                .filter(|l| allocator_of(&l.contender) == a)
                .collect::<Vec<_>>();
            (a, ls)
        })
        .filter(|(_, ls)| !ls.is_empty())
        .collect();
    let t_max = lines
        .iter()
        .flat_map(|l| l.t_ms.iter().copied())
        .fold(1.0, f64::max);
    let root = SVGBackend::new(path, (960, 60 + 420 * groups.len() as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 22))?;
    let panels = root.split_evenly((groups.len(), 1));
    for ((alloc, group), panel) in groups.iter().zip(panels.iter()) {
        let y_max = group
            .iter()
            .flat_map(|l| l.rss_mib.iter().copied())
            .fold(1.0, f64::max);
        let mut chart = ChartBuilder::on(panel)
            .caption(format!("under {alloc}"), ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..t_max, 0f64..y_max * 1.1)?;
        chart
            .configure_mesh()
            .x_desc("ms since the burst began (taken at once, then released)")
            .y_desc("process RSS (MiB)")
            .draw()?;
        for (i, l) in group.iter().enumerate() {
            let base = l
                .contender
                .strip_suffix(&format!(" on {alloc}"))
                .unwrap_or(&l.contender);
            let style = series_style(i, base);
            chart
                .draw_series(LineSeries::new(
                    l.t_ms.iter().copied().zip(l.rss_mib.iter().copied()),
                    style,
                ))?
                .label(l.contender.as_str())
                .legend(legend(style));
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}

/// One panel per figure (`(extra key, panel title)`), side by side, each a bar per contender
/// of that figure, on a linear scale from zero: the budget workload, where the question is
/// what a budget does to memory, latency and throughput at once.
pub fn panels_of_extras(
    path: &Path,
    title: &str,
    records: &[&Record],
    figures: &[(&str, &str)],
) -> Result<(), Error> {
    if records.is_empty() {
        return Ok(());
    }
    let root = SVGBackend::new(path, (320 * figures.len() as u32, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 20))?;
    let panels = root.split_evenly((1, figures.len()));
    for ((key, name), panel) in figures.iter().zip(panels.iter()) {
        let bars: Vec<(String, f64)> = records
            .iter()
            .filter_map(|r| Some((r.contender.clone(), *r.extra.get(*key)?)))
            .collect();
        let top = bars.iter().map(|b| b.1).fold(0.0, f64::max).max(1e-9) * 1.2;
        let mut chart = ChartBuilder::on(panel)
            .caption(*name, ("sans-serif", 16))
            .margin(14)
            .x_label_area_size(30)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..bars.len() as f64, 0f64..top)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_label_formatter(&|y| crate::report::fmt_num(*y))
            .draw()?;
        for (i, (contender, v)) in bars.iter().enumerate() {
            let style = series_style(i, contender).filled();
            let x = i as f64;
            chart
                .draw_series([Rectangle::new([(x + 0.15, 0.0), (x + 0.85, *v)], style)])?
                .label(contender.as_str())
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], style));
            chart.draw_series([Text::new(
                crate::report::fmt_num(*v),
                (x + 0.3, *v + top * 0.02),
                ("sans-serif", 13),
            )])?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
