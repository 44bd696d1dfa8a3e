//! Small generic SVG charts (for the fleet simulator's reports): a stacked horizontal
//! bar chart and a line chart. Both are standalone documents with escaped text; bars and
//! lines carry `data-*` attributes naming what they show, so that tests and scripts can
//! read the values back.

use crate::svg::elements::{Anchor, Svg, attr, num};

/// Colours used when the caller passes an empty palette.
pub(crate) const DEFAULT_PALETTE: [&str; 8] = [
    "#2f5597", "#f57c00", "#2e9e44", "#d32f2f", "#7b4fbf", "#00838f", "#8d6e63", "#c2185b",
];

/// Width of the plotting area of both charts.
const PLOT_W: f64 = 640.0;

/// A finite, non-negative reading of a bar value (NaN, infinities and negatives count as
/// zero: a bar cannot be drawn for them).
fn bar_value(v: f64) -> f64 {
    if v.is_finite() && v > 0.0 { v } else { 0.0 }
}

/// "Nice" tick values covering `[lo, hi]`: steps of 1, 2 or 5 times a power of ten.
pub(crate) fn nice_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    let (lo, hi) = if lo.is_finite() && hi.is_finite() && hi > lo {
        (lo, hi)
    } else if lo.is_finite() {
        (lo, lo + 1.0)
    } else {
        (0.0, 1.0)
    };
    let raw = (hi - lo) / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let start = (lo / step).floor() * step;
    let mut ticks = Vec::new();
    let mut t = start;
    while t <= hi + step * 1e-9 && ticks.len() < 100 {
        ticks.push(t);
        t += step;
    }
    if ticks.last().is_some_and(|&l| l < hi) {
        ticks.push(t);
    }
    ticks
}

fn tick_text(v: f64) -> String {
    if v.abs() >= 1e6 || (v != 0.0 && v.abs() < 1e-3) {
        format!("{v:.1e}")
    } else if v.fract().abs() < 1e-9 {
        format!("{v:.0}")
    } else {
        let s = format!("{v:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// A horizontal stacked bar chart: one bar per row, one segment per `(name, value)`;
/// segments with the same name share a colour (`palette[k % len]` in order of first
/// appearance) and a legend entry. Bar lengths are proportional to the values, the
/// longest bar spanning the plot.
pub fn stacked_bars(
    title: &str,
    categories: &[(&str, Vec<(String, f64)>)],
    palette: &[&str],
) -> String {
    let palette: Vec<&str> = if palette.is_empty() {
        DEFAULT_PALETTE.to_vec()
    } else {
        palette.to_vec()
    };
    let mut names: Vec<&str> = Vec::new();
    for (_, segs) in categories {
        for (n, _) in segs {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    let color = |n: &str| palette[names.iter().position(|x| *x == n).unwrap_or(0) % palette.len()];
    let max_total = categories
        .iter()
        .map(|(_, s)| s.iter().map(|(_, v)| bar_value(*v)).sum::<f64>())
        .fold(0.0, f64::max);
    let ticks = nice_ticks(0.0, if max_total > 0.0 { max_total } else { 1.0 }, 5);
    let axis_max = ticks.last().copied().unwrap_or(1.0).max(f64::MIN_POSITIVE);
    let label_w = categories
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .map_or(40.0, |c| (c as f64 * 7.0 + 16.0).clamp(40.0, 260.0));
    let (left, row_h) = (20.0 + label_w, 28.0);
    let mut svg = Svg::new();
    svg.text(20.0, 28.0, 17.0, "bold", "#1a1a1a", Anchor::Start, title);
    let legend_y = 50.0;
    let mut lx = left;
    for n in &names {
        svg.rect(lx, legend_y - 10.0, 14.0, 12.0, 2.0, color(n), color(n), "");
        svg.text(
            lx + 19.0,
            legend_y,
            11.5,
            "normal",
            "#222222",
            Anchor::Start,
            n,
        );
        lx += 34.0 + 6.6 * n.chars().count() as f64;
    }
    let top = legend_y + 20.0;
    let scale = PLOT_W / axis_max;
    for (r, (label, segs)) in categories.iter().enumerate() {
        let y = top + r as f64 * row_h;
        svg.text(
            left - 8.0,
            y + 15.0,
            12.0,
            "normal",
            "#222222",
            Anchor::End,
            label,
        );
        let mut x = left;
        for (n, v) in segs {
            let w = bar_value(*v) * scale;
            let extra = format!(
                "{}{}{}{}",
                attr("class", "bar-seg"),
                attr("data-row", label),
                attr("data-segment", n),
                attr("data-value", &v.to_string())
            );
            svg.rect(x, y + 3.0, w, row_h - 8.0, 0.0, color(n), "#ffffff", &extra);
            x += w;
        }
        let total: f64 = segs.iter().map(|(_, v)| bar_value(*v)).sum();
        svg.text(
            x + 6.0,
            y + 15.0,
            11.0,
            "normal",
            "#444444",
            Anchor::Start,
            &tick_text(total),
        );
    }
    let bottom = top + categories.len() as f64 * row_h + 4.0;
    axis_x(&mut svg, &ticks, left, bottom, scale, 0.0);
    let width = left + PLOT_W + 70.0;
    svg.finish(width, bottom + 40.0, title)
}

/// Draws an x axis at `y` with tick labels; `x0` is the value at `left`.
fn axis_x(svg: &mut Svg, ticks: &[f64], left: f64, y: f64, scale: f64, x0: f64) {
    let right = left + ticks.last().map_or(0.0, |t| (t - x0) * scale);
    svg.line(left, y, right, y, "#666666", 1.0, "");
    for t in ticks {
        let x = left + (t - x0) * scale;
        svg.line(x, y, x, y + 5.0, "#666666", 1.0, "");
        svg.text(
            x,
            y + 18.0,
            10.5,
            "normal",
            "#444444",
            Anchor::Middle,
            &tick_text(*t),
        );
    }
}

/// A line chart of several `(name, points)` series on shared axes. Points that are not
/// finite are skipped; the y axis starts at zero unless values go below it.
pub fn lines(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> String {
    let pts = || {
        series
            .iter()
            .flat_map(|(_, p)| p.iter())
            .filter(|(x, y)| x.is_finite() && y.is_finite())
    };
    let (xmin, xmax) = pts().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), (x, _)| {
        (a.min(*x), b.max(*x))
    });
    let (ymin, ymax) = pts().fold((0.0f64, f64::NEG_INFINITY), |(a, b), (_, y)| {
        (a.min(*y), b.max(*y))
    });
    let xt = nice_ticks(xmin, xmax, 6);
    let yt = nice_ticks(ymin, if ymax > ymin { ymax } else { ymin + 1.0 }, 5);
    let (x0, x1) = (
        xt.first().copied().unwrap_or(0.0),
        xt.last().copied().unwrap_or(1.0),
    );
    let (y0, y1) = (
        yt.first().copied().unwrap_or(0.0),
        yt.last().copied().unwrap_or(1.0),
    );
    let (left, top, plot_h) = (80.0, 70.0, 340.0);
    let sx = PLOT_W / (x1 - x0).max(f64::MIN_POSITIVE);
    let sy = plot_h / (y1 - y0).max(f64::MIN_POSITIVE);
    let px = |x: f64| left + (x - x0) * sx;
    let py = |y: f64| top + plot_h - (y - y0) * sy;
    let mut svg = Svg::new();
    svg.text(20.0, 28.0, 17.0, "bold", "#1a1a1a", Anchor::Start, title);
    for t in &yt {
        let y = py(*t);
        svg.line(left, y, left + PLOT_W, y, "#e5e5e5", 1.0, "");
        svg.text(
            left - 8.0,
            y + 4.0,
            10.5,
            "normal",
            "#444444",
            Anchor::End,
            &tick_text(*t),
        );
    }
    svg.line(left, top, left, top + plot_h, "#666666", 1.0, "");
    axis_x(&mut svg, &xt, left, top + plot_h, sx, x0);
    svg.text(
        left + PLOT_W / 2.0,
        top + plot_h + 40.0,
        12.0,
        "normal",
        "#222222",
        Anchor::Middle,
        x_label,
    );
    svg.text(
        20.0,
        52.0,
        12.0,
        "normal",
        "#222222",
        Anchor::Start,
        y_label,
    );
    let mut ly = top;
    for (k, (name, points)) in series.iter().enumerate() {
        let color = DEFAULT_PALETTE[k % DEFAULT_PALETTE.len()];
        let d: Vec<String> = points
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .enumerate()
            .map(|(i, (x, y))| {
                format!(
                    "{}{} {}",
                    if i == 0 { "M" } else { " L" },
                    num(px(*x)),
                    num(py(*y))
                )
            })
            .collect();
        if !d.is_empty() {
            let extra = format!("{}{}", attr("class", "series"), attr("data-series", name));
            svg.path(&d.concat(), color, 2.2, &extra);
        }
        svg.line(
            left + PLOT_W + 20.0,
            ly,
            left + PLOT_W + 40.0,
            ly,
            color,
            3.0,
            "",
        );
        svg.text(
            left + PLOT_W + 46.0,
            ly + 4.0,
            11.5,
            "normal",
            "#222222",
            Anchor::Start,
            name,
        );
        ly += 20.0;
    }
    let legend_w = series
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(0) as f64
        * 7.0;
    svg.finish(left + PLOT_W + 60.0 + legend_w, top + plot_h + 60.0, title)
}

/// The `width` and `height` of a document's root `<svg>` element, as the charts of this
/// module write them; `None` when the document does not start with such an element.
fn root_size(doc: &str) -> Option<(f64, f64)> {
    let start = doc.find("<svg")?;
    let tag = &doc[start..start + doc[start..].find('>')?];
    let read = |name: &str| -> Option<f64> {
        let key = format!(" {name}=\"");
        let at = tag.find(&key)? + key.len();
        tag[at..at + tag[at..].find('"')?].parse().ok()
    };
    Some((read("width")?, read("height")?))
}

/// Stacks chart documents (as [`stacked_bars`] and [`lines`] return them) top to bottom
/// into one document under a title, each keeping its own coordinates inside a nested
/// `<svg>` in a group of class `chart`. A document whose root size cannot be read takes
/// no room.
pub fn stack(title: &str, charts: &[String]) -> String {
    let mut svg = Svg::new();
    svg.text(20.0, 30.0, 19.0, "bold", "#1a1a1a", Anchor::Start, title);
    let (mut y, mut width) = (44.0, 20.0 + 10.0 * title.chars().count() as f64);
    for chart in charts {
        let (w, h) = root_size(chart).unwrap_or((0.0, 0.0));
        svg.open_group(
            "chart",
            &attr("transform", &format!("translate(0 {})", num(y))),
        );
        svg.raw(chart.trim_start_matches(|c: char| c.is_whitespace()));
        svg.close_group();
        y += h + 12.0;
        width = width.max(w);
    }
    svg.finish(width, y, title)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(s: &str) -> roxmltree::Document<'_> {
        roxmltree::Document::parse(s).unwrap()
    }

    #[test]
    fn bar_widths_are_proportional_to_values() {
        let cats = vec![
            (
                "topoalign",
                vec![("aligned".to_string(), 30.0), ("split".to_string(), 10.0)],
            ),
            (
                "blind <&>",
                vec![("aligned".to_string(), 5.0), ("split".to_string(), 35.0)],
            ),
            ("empty", vec![("aligned".to_string(), f64::NAN)]),
        ];
        let s = stacked_bars("Pods by alignment", &cats, &[]);
        let d = doc(&s);
        let segs: Vec<(String, String, f64)> = d
            .descendants()
            .filter(|n| n.attribute("class") == Some("bar-seg"))
            .map(|n| {
                (
                    n.attribute("data-row").unwrap().to_string(),
                    n.attribute("data-segment").unwrap().to_string(),
                    n.attribute("width").unwrap().parse().unwrap(),
                )
            })
            .collect();
        assert_eq!(segs.len(), 5);
        let w = |row: &str, seg: &str| segs.iter().find(|s| s.0 == row && s.1 == seg).unwrap().2;
        assert!((w("topoalign", "aligned") / w("topoalign", "split") - 3.0).abs() < 0.02);
        assert!((w("blind <&>", "split") / w("blind <&>", "aligned") - 7.0).abs() < 0.05);
        assert!(
            (w("topoalign", "aligned") + w("topoalign", "split")
                - (w("blind <&>", "aligned") + w("blind <&>", "split")))
            .abs()
                < 0.2
        );
        assert_eq!(w("empty", "aligned"), 0.0);
        // One colour per segment name, shared across rows.
        let fill = |row: &str, seg: &str| {
            d.descendants()
                .find(|n| {
                    n.attribute("data-row") == Some(row) && n.attribute("data-segment") == Some(seg)
                })
                .and_then(|n| n.attribute("fill"))
                .unwrap()
                .to_string()
        };
        assert_eq!(fill("topoalign", "split"), fill("blind <&>", "split"));
        assert_ne!(fill("topoalign", "split"), fill("topoalign", "aligned"));
    }

    #[test]
    fn line_chart_has_one_path_per_series_within_the_plot() {
        let series = vec![
            (
                "rate".to_string(),
                vec![(0.0, 1.0), (10.0, 4.0), (20.0, 2.0)],
            ),
            (
                "other".to_string(),
                vec![(0.0, 0.5), (f64::NAN, 3.0), (20.0, 8.0)],
            ),
        ];
        let s = lines("Throughput", "time (s)", "GB/s", &series);
        let d = doc(&s);
        let paths: Vec<_> = d
            .descendants()
            .filter(|n| n.attribute("class") == Some("series"))
            .collect();
        assert_eq!(paths.len(), 2);
        let p0 = paths[0].attribute("d").unwrap();
        assert_eq!(p0.matches('L').count(), 2);
        assert_eq!(
            paths[1].attribute("d").unwrap().matches('L').count(),
            1,
            "NaN point skipped"
        );
        // Higher values are drawn higher (smaller y).
        let ys: Vec<f64> = p0
            .split(['M', 'L'])
            .filter(|s| !s.trim().is_empty())
            .map(|s| s.split_whitespace().nth(1).unwrap().parse().unwrap())
            .collect();
        assert!(ys[1] < ys[2] && ys[2] < ys[0]);
    }

    #[test]
    fn empty_inputs_still_give_valid_documents() {
        doc(&stacked_bars("none", &[], &[]));
        doc(&lines("none", "x", "y", &[]));
    }

    #[test]
    fn ticks_are_nice() {
        assert_eq!(nice_ticks(0.0, 40.0, 5), vec![0.0, 10.0, 20.0, 30.0, 40.0]);
        assert_eq!(nice_ticks(0.0, 7.0, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0]);
        assert!(nice_ticks(f64::NAN, f64::NAN, 5).len() >= 2);
    }

    #[test]
    fn stacked_charts_follow_each_other_in_one_document() {
        let bars = stacked_bars("Bars", &[("a", vec![("x".to_string(), 1.0)])], &[]);
        let line = lines(
            "Line",
            "x",
            "y",
            &[("s".to_string(), vec![(0.0, 1.0), (1.0, 2.0)])],
        );
        let (bw, bh) = root_size(&bars).unwrap();
        let (lw, lh) = root_size(&line).unwrap();
        let s = stack("Report <1>", &[bars, line]);
        let d = doc(&s);
        let root = d.root_element();
        let charts: Vec<_> = root
            .children()
            .filter(|n| n.attribute("class") == Some("chart"))
            .collect();
        assert_eq!(charts.len(), 2);
        let offset = |n: &roxmltree::Node<'_, '_>| -> f64 {
            let t = n.attribute("transform").unwrap();
            t.trim_start_matches("translate(0 ")
                .trim_end_matches(')')
                .parse()
                .unwrap()
        };
        assert!((offset(&charts[1]) - offset(&charts[0]) - bh - 12.0).abs() < 0.11);
        // Each chart is whole inside its group, and the document holds them all.
        assert!(
            charts
                .iter()
                .all(|c| c.first_element_child().unwrap().has_tag_name("svg"))
        );
        let height: f64 = root.attribute("height").unwrap().parse().unwrap();
        assert!(height >= offset(&charts[1]) + lh);
        let width: f64 = root.attribute("width").unwrap().parse().unwrap();
        assert!(width >= bw.max(lw) - 0.1);
        assert!(s.contains("Report &lt;1&gt;"));
        assert_eq!(root_size("<g/>"), None);
        doc(&stack("empty", &[]));
    }
}
