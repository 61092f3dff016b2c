//! One SVG chart per workload (plotters' SVG backend; no fonts or system libraries needed).
//!
//! Every chart keeps its legend outside the plotting area (a column on the right), labels its
//! categories itself (wrapped to the room each has, never on top of each other), and uses a
//! log axis only where the figures span more than [`LOG_ABOVE`] times, saying so in the
//! axis label.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::harness::record::{fmt_num, Record, Timeline};

/// What drawing a chart can fail with.
pub type Error = Box<dyn std::error::Error>;

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// A chart's y axis is logarithmic when its largest figure is more than this many times its
/// smallest.
pub const LOG_ABOVE: f64 = 30.0;

const PALETTE: [RGBColor; 20] = [
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
    RGBColor(90, 90, 230),
    RGBColor(120, 160, 210),
    RGBColor(230, 160, 90),
    RGBColor(110, 190, 100),
    RGBColor(240, 120, 120),
    RGBColor(170, 140, 200),
    RGBColor(170, 120, 100),
    RGBColor(110, 200, 210),
    RGBColor(60, 60, 60),
];

const FONT: &str = "sans-serif";
const GRID: RGBColor = RGBColor(225, 225, 225);
/// Roughly the width of a character of the legend's and labels' font, in pixels.
const CHAR_PX: f64 = 7.4;

/// The colour of the `i`th series, and a thicker line for tierpool's.
fn series_style(i: usize, name: &str) -> ShapeStyle {
    let width = if name == "tierpool" {
        4
    } else if name.starts_with("tierpool") {
        3
    } else {
        2
    };
    PALETTE[i % PALETTE.len()].stroke_width(width)
}

/// One entry of a legend: a label and how its series is drawn.
struct Key {
    label: String,
    style: ShapeStyle,
    bar: bool,
}

/// The width a legend of these labels needs.
fn legend_width(labels: impl IntoIterator<Item = usize>) -> u32 {
    let longest = labels.into_iter().max().unwrap_or(0) as f64;
    (44.0 + longest * CHAR_PX).clamp(120.0, 460.0) as u32
}

/// Draws a legend in `area` (a column beside the plots), from `top` pixels down.
fn draw_legend(area: &Area, keys: &[Key], top: i32) -> Result<(), Error> {
    let text = TextStyle::from((FONT, 15).into_font()).pos(Pos::new(HPos::Left, VPos::Center));
    for (i, k) in keys.iter().enumerate() {
        let y = top + 22 * i as i32;
        if k.bar {
            area.draw(&Rectangle::new([(8, y - 6), (26, y + 6)], k.style.filled()))?;
        } else {
            area.draw(&PathElement::new(vec![(6, y), (30, y)], k.style))?;
        }
        area.draw(&Text::new(k.label.clone(), (38, y), text.clone()))?;
    }
    Ok(())
}

/// `label` in lines of at most `width` characters, at word boundaries (a longer word stays
/// whole), at most three lines.
fn wrap(label: &str, width: usize) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for word in label.split(' ') {
        match lines.last_mut() {
            Some(l) if l.len() + 1 + word.len() <= width => {
                l.push(' ');
                l.push_str(word);
            }
            _ => lines.push(word.to_string()),
        }
    }
    if lines.len() > 3 {
        let rest = lines.split_off(2).join(" ");
        lines.push(rest);
    }
    lines
}

/// A y axis: linear from zero, or logarithmic (figures as their log10) where the range
/// demands it.
#[derive(Clone, Copy, Debug)]
struct Axis {
    log: bool,
    lo: f64,
    hi: f64,
}

impl Axis {
    /// The axis for these figures (positive); `room` above the largest for value labels.
    fn of(values: impl IntoIterator<Item = f64>, room: f64) -> Axis {
        let (lo, hi) = values
            .into_iter()
            .filter(|v| v.is_finite() && *v > 0.0)
            .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
        if lo > hi {
            return Axis {
                log: false,
                lo: 0.0,
                hi: 1.0,
            };
        }
        if hi / lo > LOG_ABOVE {
            let (l, h) = (lo.log10(), hi.log10());
            let pad = (h - l) * 0.06;
            Axis {
                log: true,
                lo: l - pad,
                hi: h + pad + (h - l) * room,
            }
        } else {
            Axis {
                log: false,
                lo: 0.0,
                hi: hi * (1.08 + room),
            }
        }
    }

    /// Where `v` goes on the axis.
    fn at(&self, v: f64) -> f64 {
        if self.log {
            v.max(1e-300).log10()
        } else {
            v
        }
    }

    /// A tick's label.
    fn label(&self, t: f64) -> String {
        if self.log {
            let v = 10f64.powf(t);
            // Two significant digits.
            let digits = v.abs().log10().floor() as i32;
            let scale = 10f64.powi(digits - 1);
            tick((v / scale).round() * scale)
        } else {
            tick(t)
        }
    }

    /// The axis label: the metric, and "(log scale)" when it is.
    fn desc(&self, metric: &str) -> String {
        if self.log {
            format!("{metric} (log scale)")
        } else {
            metric.to_string()
        }
    }
}

/// A tick's number: at most three decimals, no trailing zeros (`0.25`, `3.2`, `150`, `3200`).
fn tick(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// The categories of `records`, in first-seen order.
fn categories<'a>(params: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for p in params {
        if !out.iter().any(|c| c == p) {
            out.push(p.to_string());
        }
    }
    out
}

/// A panel of lines over categories: one per contender (those of `contenders` with points),
/// coloured by their index in `colours`. Draws its own category labels, wrapped.
#[allow(clippy::too_many_arguments)]
fn line_panel(
    full: &Area,
    area: &Area,
    caption: Option<&str>,
    metric: &str,
    cats: &[String],
    series: &[(String, Vec<(usize, f64)>)],
    colours: &[String],
) -> Result<(), Error> {
    let axis = Axis::of(
        series.iter().flat_map(|(_, p)| p.iter().map(|&(_, v)| v)),
        0.0,
    );
    let (w, _) = area.dim_in_pixel();
    let slot = f64::from(w.saturating_sub(90)) / cats.len().max(1) as f64;
    let lines = cats
        .iter()
        .map(|c| wrap(c, ((slot - 8.0) / CHAR_PX).max(6.0) as usize).len())
        .max()
        .unwrap_or(1);
    let mut b = ChartBuilder::on(area);
    if let Some(c) = caption {
        b.caption(c, (FONT, 20));
    }
    let mut chart = b
        .margin(14)
        .margin_right(22)
        .x_label_area_size(14 + 17 * lines as u32)
        .y_label_area_size(78)
        .build_cartesian_2d(-0.5f64..(cats.len() as f64 - 0.5), axis.lo..axis.hi)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_labels(8)
        .light_line_style(TRANSPARENT)
        .bold_line_style(GRID)
        .y_label_formatter(&|y| axis.label(*y))
        .y_desc(axis.desc(metric))
        .label_style((FONT, 14))
        .axis_desc_style((FONT, 15))
        .draw()?;
    for (i, _) in cats.iter().enumerate() {
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(i as f64, axis.lo), (i as f64, axis.hi)],
            GRID,
        )))?;
    }
    for (name, points) in series {
        let i = colours.iter().position(|c| c == name).unwrap_or(0);
        let style = series_style(i, name);
        let pts: Vec<(f64, f64)> = points
            .iter()
            .map(|&(x, v)| (x as f64, axis.at(v)))
            .collect();
        chart.draw_series(LineSeries::new(pts.clone(), style))?;
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, style.filled())))?;
    }
    let text = TextStyle::from((FONT, 14).into_font()).pos(Pos::new(HPos::Center, VPos::Top));
    for (i, c) in cats.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64, axis.lo));
        for (k, line) in wrap(c, ((slot - 8.0) / CHAR_PX).max(6.0) as usize)
            .into_iter()
            .enumerate()
        {
            full.draw(&Text::new(line, (px, py + 8 + 17 * k as i32), text.clone()))?;
        }
    }
    Ok(())
}

/// The series of `records` (of one metric) over `cats`, in `contenders` order.
fn series_of(
    records: &[&Record],
    cats: &[String],
    contenders: &[String],
) -> Vec<(String, Vec<(usize, f64)>)> {
    let mut names: Vec<String> = contenders
        .iter()
        .filter(|c| records.iter().any(|r| &r.contender == *c))
        .cloned()
        .collect();
    // Contenders missing from the order still get drawn, after the others.
    for r in records {
        if !names.contains(&r.contender) {
            names.push(r.contender.clone());
        }
    }
    names
        .into_iter()
        .map(|name| {
            let points = records
                .iter()
                .filter(|r| r.contender == name)
                .filter_map(|r| Some((cats.iter().position(|c| *c == r.param)?, r.median)))
                .collect();
            (name, points)
        })
        .collect()
}

/// Splits the SVG into a plot area and a legend column on the right, under a title.
fn layout<'a>(full: &Area<'a>, title: &str, legend: u32) -> Result<(Area<'a>, Area<'a>), Error> {
    let (w, _) = full.dim_in_pixel();
    let body = full.titled(title, (FONT, 22))?;
    let (plots, keys) = body.split_horizontally(w.saturating_sub(legend));
    Ok((plots, keys))
}

fn keys_of(names: &[String], bar: bool) -> Vec<Key> {
    names
        .iter()
        .enumerate()
        .map(|(i, n)| Key {
            label: n.clone(),
            style: series_style(i, n),
            bar,
        })
        .collect()
}

/// The metric of the first record and the records of that metric, in order (`None` for no
/// records): what a chart of one metric draws.
fn of_first_metric<'a>(records: &[&'a Record]) -> Option<(String, Vec<&'a Record>)> {
    let metric = records.first()?.metric.clone();
    let same = records
        .iter()
        .copied()
        .filter(|r| r.metric == metric)
        .collect();
    Some((metric, same))
}

/// A line per contender of its median over the workload's parameters (categories on x, in
/// order). Records of other metrics than the first one seen are left out.
pub fn by_param(
    path: &Path,
    title: &str,
    records: &[&Record],
    contenders: &[String],
) -> Result<(), Error> {
    let Some((metric, records)) = of_first_metric(records) else {
        return Ok(());
    };
    let cats = categories(records.iter().map(|r| r.param.as_str()));
    let series = series_of(&records, &cats, contenders);
    let names: Vec<String> = series.iter().map(|(n, _)| n.clone()).collect();
    let legend = legend_width(names.iter().map(String::len));
    let full = SVGBackend::new(path, (1000 + legend, 600)).into_drawing_area();
    full.fill(&WHITE)?;
    let (plots, keys) = layout(&full, title, legend)?;
    line_panel(&full, &plots, None, &metric, &cats, &series, &names)?;
    draw_legend(&keys, &keys_of(&names, false), 24)?;
    full.present()?;
    Ok(())
}

/// Like [`by_param`], with a panel per group of parameters: a parameter `"G, X"` is category
/// `X` in the panel of `G` (`"8 threads, all idle"`, `"64 KiB bodies, HTTP/2 (h2load)"`), each
/// panel with its own scale, one legend for all.
pub fn panels_by_group(
    path: &Path,
    title: &str,
    records: &[&Record],
    contenders: &[String],
) -> Result<(), Error> {
    let Some((metric, records)) = of_first_metric(records) else {
        return Ok(());
    };
    let split = |p: &str| -> (String, String) {
        match p.split_once(", ") {
            Some((g, x)) => (g.to_string(), x.to_string()),
            None => (String::new(), p.to_string()),
        }
    };
    let groups = categories(records.iter().map(|r| r.param.as_str()))
        .iter()
        .map(|p| split(p).0)
        .fold(Vec::<String>::new(), |mut v, g| {
            if !v.contains(&g) {
                v.push(g);
            }
            v
        });
    let all = series_of(&records, &[], contenders);
    let names: Vec<String> = all.into_iter().map(|(n, _)| n).collect();
    let legend = legend_width(names.iter().map(String::len));
    let width = (520 * groups.len() as u32).max(700);
    let full = SVGBackend::new(path, (width + legend, 600)).into_drawing_area();
    full.fill(&WHITE)?;
    let (plots, keys) = layout(&full, title, legend)?;
    let panels = plots.split_evenly((1, groups.len()));
    for (g, panel) in groups.iter().zip(panels.iter()) {
        let rows: Vec<&Record> = records
            .iter()
            .copied()
            .filter(|r| split(&r.param).0 == *g)
            .collect();
        // The panel's records, their parameter the part after the group.
        let local: Vec<Record> = rows
            .iter()
            .map(|r| Record {
                param: split(&r.param).1,
                ..(*r).clone()
            })
            .collect();
        let local: Vec<&Record> = local.iter().collect();
        let cats = categories(local.iter().map(|r| r.param.as_str()));
        let series = series_of(&local, &cats, &names);
        line_panel(&full, panel, Some(g), &metric, &cats, &series, &names)?;
    }
    draw_legend(&keys, &keys_of(&names, false), 40)?;
    full.present()?;
    Ok(())
}

/// The allocator a burst line ran under, from its label ("... on jemalloc", "Vec (jemalloc)").
fn allocator_of(label: &str) -> &'static str {
    ["mimalloc", "jemalloc"]
        .into_iter()
        .find(|a| label.ends_with(&format!(" on {a}")) || label.ends_with(&format!("({a})")))
        .unwrap_or("glibc")
}

/// RSS over time (the burst and soak workloads): one panel per allocator, stacked, each with its own
/// scale and its legend beside it, and within a panel a colour per contender (none repeated).
pub fn timelines(path: &Path, title: &str, x_desc: &str, lines: &[Timeline]) -> Result<(), Error> {
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
    let legend = legend_width(lines.iter().map(|l| l.contender.len()));
    let full =
        SVGBackend::new(path, (1000 + legend, 60 + 400 * groups.len() as u32)).into_drawing_area();
    full.fill(&WHITE)?;
    let body = full.titled(title, (FONT, 22))?;
    let rows = body.split_evenly((groups.len(), 1));
    for ((alloc, group), row) in groups.iter().zip(rows.iter()) {
        let (panel, keys) = row.split_horizontally(1000);
        let y_max = group
            .iter()
            .flat_map(|l| l.rss_mib.iter().copied())
            .fold(1.0, f64::max);
        let mut chart = ChartBuilder::on(&panel)
            .caption(format!("under {alloc}"), (FONT, 19))
            .margin(14)
            .margin_right(22)
            .x_label_area_size(46)
            .y_label_area_size(78)
            .build_cartesian_2d(0f64..t_max, 0f64..y_max * 1.1)?;
        chart
            .configure_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID)
            .x_desc(x_desc)
            .y_desc("process RSS (MiB)")
            .x_label_formatter(&|x| tick(*x))
            .y_label_formatter(&|y| tick(*y))
            .label_style((FONT, 14))
            .axis_desc_style((FONT, 15))
            .draw()?;
        let mut k = Vec::new();
        for (i, l) in group.iter().enumerate() {
            let base = l
                .contender
                .strip_suffix(&format!(" on {alloc}"))
                .unwrap_or(&l.contender);
            let style = series_style(i, base);
            chart.draw_series(LineSeries::new(
                l.t_ms.iter().copied().zip(l.rss_mib.iter().copied()),
                style,
            ))?;
            k.push(Key {
                label: l.contender.clone(),
                style,
                bar: false,
            });
        }
        draw_legend(&keys, &k, 48)?;
    }
    full.present()?;
    Ok(())
}

/// One panel per figure (`(extra key, panel title)`), side by side, each a bar per contender
/// of that figure, on a linear scale from zero, its value on top; one legend for all: the
/// budget and connections
/// workloads, where the question is what a strategy does to memory, latency and throughput
/// at once.
pub fn panels_of_extras(
    path: &Path,
    title: &str,
    records: &[&Record],
    figures: &[(&str, &str)],
) -> Result<(), Error> {
    if records.is_empty() {
        return Ok(());
    }
    let names = categories(records.iter().map(|r| r.contender.as_str()));
    let legend = legend_width(names.iter().map(String::len));
    let full =
        SVGBackend::new(path, (300 * figures.len() as u32 + legend, 520)).into_drawing_area();
    full.fill(&WHITE)?;
    let (plots, keys) = layout(&full, title, legend)?;
    let panels = plots.split_evenly((1, figures.len()));
    let label = TextStyle::from((FONT, 14).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));
    for ((key, name), panel) in figures.iter().zip(panels.iter()) {
        let bars: Vec<(usize, f64)> = records
            .iter()
            .filter_map(|r| {
                let i = names.iter().position(|n| *n == r.contender)?;
                Some((i, *r.extra.get(*key)?))
            })
            .collect();
        // Linear from zero (a bar's length is its value), room above the tallest for its
        // label.
        let axis = Axis {
            log: false,
            lo: 0.0,
            hi: bars.iter().map(|b| b.1).fold(0.0, f64::max).max(1e-9) * 1.15,
        };
        let floor = axis.lo;
        let mut chart = ChartBuilder::on(panel)
            .caption(*name, (FONT, 17))
            .margin(14)
            .x_label_area_size(8)
            .y_label_area_size(64)
            .build_cartesian_2d(0f64..names.len() as f64, axis.lo..axis.hi)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_labels(6)
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID)
            .y_label_formatter(&|y| axis.label(*y))
            .label_style((FONT, 13))
            .draw()?;
        for &(i, v) in &bars {
            let style = series_style(i, &names[i]).filled();
            let x = i as f64;
            chart.draw_series([Rectangle::new(
                [(x + 0.15, floor), (x + 0.85, axis.at(v))],
                style,
            )])?;
            let (px, py) = chart.backend_coord(&(x + 0.5, axis.at(v)));
            full.draw(&Text::new(fmt_num(v), (px, py - 4), label.clone()))?;
        }
    }
    draw_legend(&keys, &keys_of(&names, true), 40)?;
    full.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_wrap_at_words() {
        assert_eq!(wrap("10 intervals later", 12), ["10 intervals", "later"]);
        assert_eq!(wrap("after trim()", 20), ["after trim()"]);
        assert_eq!(wrap("a b c d e", 1), ["a", "b", "c d e"]);
    }

    #[test]
    fn a_log_axis_only_where_the_range_demands_it() {
        let lin = Axis::of([2.0, 10.0, 50.0], 0.0);
        assert!(!lin.log && lin.lo == 0.0 && lin.hi > 50.0);
        assert_eq!(lin.desc("ns/op"), "ns/op");
        let log = Axis::of([3.0, 10_000.0], 0.0);
        assert!(log.log && log.lo < 3f64.log10() && log.hi > 4.0);
        assert_eq!(log.desc("ns/op"), "ns/op (log scale)");
        assert_eq!(log.label(2.0), "100");
        assert_eq!(log.label(3.0f64.log10()), "3");
        assert_eq!(log.label(0.5), "3.2");
        assert_eq!(tick(0.25), "0.25");
        assert_eq!(tick(150.0), "150");
        assert_eq!(tick(0.0), "0");
    }
}
