//! Inline SVG charts for the HTML pages: lines through points (with dots when there are few), dot rows, and the
//! empirical CDF they are often fed. Every chart is an `<svg>` with a `<title>` (its accessible name) and draws
//! with the page's classes so that it follows the light or dark theme; a chart without one finite point is
//! `None`, and the page says so instead of drawing an empty frame.

use std::fmt::Write as _;

use super::page::{clip, escape, num};

/// Series colours: mid-tones that read on a light and on a dark background.
pub(crate) const COLOURS: [&str; 6] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"];

/// A chart's size and margins, in pixels.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Size {
    pub(crate) width: f64,
    pub(crate) height: f64,
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
}

/// The full-width chart of a section.
pub(crate) const WIDE: Size = Size { width: 640.0, height: 260.0, left: 64.0, right: 16.0, top: 28.0, bottom: 44.0 };
/// The small chart of one table row (a case's stream).
pub(crate) const SMALL: Size = Size { width: 300.0, height: 120.0, left: 44.0, right: 8.0, top: 20.0, bottom: 30.0 };

/// A series with at most this many points is drawn with a dot on each, so single promotions stand out.
const DOTS_UP_TO: usize = 40;

/// Round tick positions covering `[lo, hi]`: steps of 1, 2 or 5 times a power of ten, about five of them.
pub(crate) fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let raw = (hi - lo).max(1e-12) / 5.0;
    let magnitude = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * magnitude).find(|s| *s >= raw).unwrap_or(10.0 * magnitude);
    let mut t = (lo / step).ceil() * step;
    let mut out = Vec::new();
    while t <= hi + step * 1e-9 && out.len() < 12 {
        out.push(if t.abs() < step * 1e-9 { 0.0 } else { t });
        t += step;
    }
    out
}

/// The range a set of values is drawn on: padded, never empty; `from_zero` keeps 0 on the axis.
fn range(values: impl Iterator<Item = f64>, from_zero: bool) -> Option<(f64, f64)> {
    let (mut lo, hi) =
        values.filter(|v| v.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| (a.min(v), b.max(v)));
    if !lo.is_finite() {
        return None;
    }
    if from_zero {
        lo = lo.min(0.0);
    }
    if hi - lo < 1e-12 {
        let pad = if hi.abs() > 1e-12 { hi.abs() * 0.1 } else { 1.0 };
        return Some((if from_zero && lo >= 0.0 { lo.min(hi - pad).max(0.0) } else { lo - pad }, hi + pad));
    }
    let pad = (hi - lo) * 0.05;
    Some((if from_zero && lo >= 0.0 { lo } else { lo - pad }, hi + pad))
}

struct Axes {
    size: Size,
    x: (f64, f64),
    y: (f64, f64),
}

impl Axes {
    fn px(&self, x: f64) -> f64 {
        let s = &self.size;
        s.left + (x - self.x.0) / (self.x.1 - self.x.0) * (s.width - s.left - s.right)
    }
    fn py(&self, y: f64) -> f64 {
        let s = &self.size;
        s.height - s.bottom - (y - self.y.0) / (self.y.1 - self.y.0) * (s.height - s.top - s.bottom)
    }

    /// The frame, grid, tick labels, axis labels and title.
    fn frame(&self, svg: &mut String, title: &str, x_label: &str, y_label: &str, y_ticks: bool) {
        let s = &self.size;
        let (x0, x1, y0, y1) = (s.left, s.width - s.right, s.top, s.height - s.bottom);
        let font = if s.height < 200.0 { 10 } else { 11 };
        let _ = write!(
            svg,
            r##"<svg width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img" aria-label="{t}"><title>{t}</title><rect class="frame" x="{x0}" y="{y0}" width="{fw}" height="{fh}"/><text x="{x0}" y="{ty}" font-size="{tf}" font-weight="600">{t}</text>"##,
            w = s.width,
            h = s.height,
            t = escape(title),
            fw = x1 - x0,
            fh = y1 - y0,
            ty = y0 - 8.0,
            tf = font + 2,
        );
        for t in ticks(self.x.0, self.x.1) {
            let x = self.px(t);
            let _ = write!(
                svg,
                r##"<line class="grid" x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{y1}"/><text x="{x:.1}" y="{ty}" font-size="{font}" text-anchor="middle">{}</text>"##,
                num(t),
                ty = y1 + 13.0
            );
        }
        if y_ticks {
            for t in ticks(self.y.0, self.y.1) {
                let y = self.py(t);
                let _ = write!(
                    svg,
                    r##"<line class="grid" x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}"/><text x="{tx}" y="{ty:.1}" font-size="{font}" text-anchor="end">{}</text>"##,
                    num(t),
                    tx = x0 - 4.0,
                    ty = y + 4.0
                );
            }
        }
        let _ = write!(
            svg,
            r##"<text x="{cx}" y="{by}" font-size="{font}" text-anchor="middle">{}</text><text x="12" y="{cy}" font-size="{font}" text-anchor="middle" transform="rotate(-90 12 {cy})">{}</text>"##,
            escape(x_label),
            escape(y_label),
            cx = (x0 + x1) / 2.0,
            by = s.height - 4.0,
            cy = (y0 + y1) / 2.0,
        );
    }
}

/// Whether a chart of `size` with `names` gets a legend: always at the full width, on a small chart only for more
/// than one series.
fn has_legend(size: Size, names: usize) -> bool {
    names >= 2 || (names == 1 && size.height >= 200.0)
}

/// The legend, in a margin of its own right of the plot (so it never hides a point).
const LEGEND: f64 = 200.0;

fn legend(svg: &mut String, size: Size, names: &[String]) {
    for (i, name) in names.iter().enumerate() {
        let y = size.top + 14.0 + 16.0 * i as f64;
        let x = size.width - LEGEND + 10.0;
        let _ = write!(
            svg,
            r##"<rect x="{x}" y="{ry}" width="10" height="10" fill="{c}"/><text x="{tx}" y="{y}" font-size="11">{}</text>"##,
            escape(&clip(name, 30).0),
            c = COLOURS[i % COLOURS.len()],
            ry = y - 9.0,
            tx = x + 14.0,
        );
    }
}

/// A vertical marker line at `x` with a short label (a time to first token, say).
pub(crate) struct Marker {
    pub(crate) x: f64,
    pub(crate) label: String,
}

/// Lines through (x, y) points, one colour per series, on a chart of `size`; `None` when no series has a finite
/// point.
pub(crate) fn lines(
    size: Size,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
    marker: Option<&Marker>,
) -> Option<String> {
    let size = if has_legend(size, series.len()) {
        Size { width: size.width + LEGEND, right: size.right + LEGEND, ..size }
    } else {
        size
    };
    let points = || series.iter().flat_map(|(_, p)| p.iter()).filter(|(x, y)| x.is_finite() && y.is_finite());
    let xs = points().map(|p| p.0).chain(marker.map(|m| m.x).filter(|x| x.is_finite()));
    let axes = Axes { size, x: range(xs, true)?, y: range(points().map(|p| p.1), true)? };
    let mut svg = String::new();
    axes.frame(&mut svg, title, x_label, y_label, true);
    if let Some(m) = marker.filter(|m| m.x.is_finite()) {
        let x = axes.px(m.x);
        let _ = write!(
            svg,
            r##"<line class="mark" x1="{x:.1}" y1="{}" x2="{x:.1}" y2="{}"/><text x="{:.1}" y="{}" font-size="10">{}</text>"##,
            size.top,
            size.height - size.bottom,
            x + 3.0,
            size.top + 11.0,
            escape(&m.label)
        );
    }
    for (i, (_, pts)) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        let finite: Vec<(f64, f64)> = pts
            .iter()
            .copied()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|(x, y)| (axes.px(x), axes.py(y)))
            .collect();
        let path: Vec<String> = finite.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
        let _ = write!(
            svg,
            r##"<polyline fill="none" stroke="{colour}" stroke-width="1.6" points="{}"/>"##,
            path.join(" ")
        );
        if finite.len() <= DOTS_UP_TO {
            for (x, y) in &finite {
                let _ = write!(svg, r##"<circle cx="{x:.1}" cy="{y:.1}" r="3" fill="{colour}"/>"##);
            }
        }
    }
    if has_legend(size, series.len()) {
        legend(&mut svg, size, &series.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>());
    }
    svg.push_str("</svg>");
    Some(svg)
}

/// [`lines`] at the full width, without a marker.
pub(crate) fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Option<String> {
    lines(WIDE, title, x_label, y_label, series, None)
}

/// One row of dots per named sample set, with the row's mean as a bar: baseline against candidate at a glance.
pub(crate) fn dot_chart(title: &str, x_label: &str, rows: &[(String, Vec<f64>, usize)]) -> Option<String> {
    let axes = Axes {
        size: WIDE,
        x: range(rows.iter().flat_map(|(_, v, _)| v.iter().copied()), false)?,
        y: (0.0, rows.len() as f64 + 1.0),
    };
    let mut svg = String::new();
    axes.frame(&mut svg, title, x_label, "", false);
    for (i, (name, values, colour)) in rows.iter().enumerate() {
        let y = axes.py(rows.len() as f64 - i as f64);
        let c = COLOURS[colour % COLOURS.len()];
        let _ =
            write!(svg, r##"<text x="{}" y="{:.1}" font-size="11">{}</text>"##, WIDE.left + 4.0, y - 8.0, escape(name));
        let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        for v in &finite {
            let _ =
                write!(svg, r##"<circle cx="{:.1}" cy="{y:.1}" r="3.5" fill="{c}" fill-opacity="0.6"/>"##, axes.px(*v));
        }
        if !finite.is_empty() {
            let mean = finite.iter().sum::<f64>() / finite.len() as f64;
            let x = axes.px(mean);
            let _ = write!(
                svg,
                r##"<line x1="{x:.1}" y1="{:.1}" x2="{x:.1}" y2="{:.1}" stroke="{c}" stroke-width="2.5"/>"##,
                y - 9.0,
                y + 9.0
            );
        }
    }
    svg.push_str("</svg>");
    Some(svg)
}

/// One interval per row: a bar from `lo` to `hi` with a dot at `mid`, and a dashed line at 0 (a forest plot of
/// relative changes, say); `x_scale` multiplies every value (100 for percent).
pub(crate) fn interval_chart(
    title: &str,
    x_label: &str,
    rows: &[(String, f64, f64, f64)],
    x_scale: f64,
) -> Option<String> {
    let finite: Vec<&(String, f64, f64, f64)> =
        rows.iter().filter(|(_, lo, mid, hi)| lo.is_finite() && mid.is_finite() && hi.is_finite()).collect();
    let size = Size { height: (finite.len() as f64 * 22.0 + 80.0).max(120.0), ..WIDE };
    let xs = finite.iter().flat_map(|(_, lo, _, hi)| [lo * x_scale, hi * x_scale]).chain([0.0]);
    let axes = Axes { size, x: range(xs, false)?, y: (0.0, finite.len() as f64 + 1.0) };
    if finite.is_empty() {
        return None;
    }
    let mut svg = String::new();
    axes.frame(&mut svg, title, x_label, "", false);
    let zero = axes.px(0.0);
    let _ = write!(
        svg,
        r##"<line class="mark" x1="{zero:.1}" y1="{}" x2="{zero:.1}" y2="{}"/>"##,
        size.top,
        size.height - size.bottom
    );
    for (i, (name, lo, mid, hi)) in finite.iter().enumerate() {
        let y = axes.py(finite.len() as f64 - i as f64);
        let c = COLOURS[i % COLOURS.len()];
        let _ = write!(
            svg,
            r##"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{c}" stroke-width="3"/><circle cx="{:.1}" cy="{y:.1}" r="4" fill="{c}"/><text x="{}" y="{:.1}" font-size="11">{}</text>"##,
            axes.px(lo * x_scale),
            axes.px(hi * x_scale),
            axes.px(mid * x_scale),
            size.left + 4.0,
            y - 6.0,
            escape(name)
        );
    }
    svg.push_str("</svg>");
    Some(svg)
}

/// Points a CDF is drawn with at most: a long bench's chart (a point per token gap of every request) is no larger
/// than a short one's; at this many evenly spaced ranks a line drawn at a page's width shows the same curve.
pub(crate) const CDF_POINTS: usize = 1000;

/// Empirical CDF points of `values` (sorted), as (value, fraction ≤ value): every value, or past [`CDF_POINTS`]
/// values that many at evenly spaced ranks (the smallest and the largest among them).
pub(crate) fn cdf(mut values: Vec<f64>) -> Vec<(f64, f64)> {
    values.retain(|v| v.is_finite());
    values.sort_by(f64::total_cmp);
    let n = values.len();
    let point = |i: usize| (values[i], (i + 1) as f64 / n as f64);
    if n <= CDF_POINTS {
        return (0..n).map(point).collect();
    }
    (0..CDF_POINTS).map(|k| point(k * (n - 1) / (CDF_POINTS - 1))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 1.0), vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]);
        assert_eq!(ticks(0.0, 250.0), vec![0.0, 50.0, 100.0, 150.0, 200.0, 250.0]);
        assert!(ticks(3.0, 3.0 + 1e-15).len() <= 12);
    }

    #[test]
    fn charts_without_finite_points_are_left_out() {
        assert!(line_chart("t", "x", "y", &[("a".into(), vec![(f64::NAN, 1.0)])]).is_none());
        assert!(dot_chart("t", "x", &[("a".into(), vec![], 0)]).is_none());
        let svg = line_chart("t", "x", "y", &[("a".into(), vec![(0.0, 1.0), (1.0, 2.0)])]).unwrap();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>") && svg.contains("<polyline"), "{svg}");
        assert_eq!(svg.matches("<circle").count(), 2, "few points get a dot each");
        assert_eq!(cdf(vec![3.0, f64::NAN, 1.0]), vec![(1.0, 0.5), (3.0, 1.0)]);
        let many = cdf((0..100_000).rev().map(f64::from).collect());
        assert_eq!(many.len(), CDF_POINTS);
        assert_eq!((many[0], many[CDF_POINTS - 1]), ((0.0, 1e-5), (99_999.0, 1.0)));
        assert!(many.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
    }

    #[test]
    fn a_marker_and_a_title_are_escaped() {
        let m = Marker { x: 0.5, label: "<b>".into() };
        let svg = lines(SMALL, "<i>", "s", "c", &[("a".into(), vec![(0.0, 1.0), (1.0, 2.0)])], Some(&m)).unwrap();
        assert!(svg.contains("&lt;b&gt;") && svg.contains("<title>&lt;i&gt;</title>") && !svg.contains("<b>"), "{svg}");
    }
}
