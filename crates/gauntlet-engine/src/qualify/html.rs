//! `qualification.html`: the bundle's report for a person, one self-contained file (inline CSS and SVG, no script,
//! no external asset; a Content-Security-Policy forbids fetching any). Rebuilt with the JSON and Markdown reports
//! after every stage, from the stage files in the bundle; a file that is missing or unreadable leaves a note in
//! place of its plot, never a broken page.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use super::{BASELINE_FILE, MONITOR_FILE, Qualification, StageStatus, drift};
use crate::bench::metrics;
use crate::run::{BenchRecord, Level};
use gauntlet_schema::determinism::{DETERMINISM_FILE, DeterminismMatrix, RowVerdict};

const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 28.0;
const BOTTOM: f64 = 44.0;
const COLOURS: [&str; 6] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf"];

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:980px;color:#222}\
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}\
table{border-collapse:collapse;width:100%}td,th{border:1px solid #ddd;padding:4px 6px;text-align:left;\
vertical-align:top}th{background:#f4f4f4}.pass{color:#176c2b;font-weight:600}.fail{color:#b00020;font-weight:600}\
.inconclusive,.running{color:#9a6700;font-weight:600}.not-run,.pending{color:#777}.none{color:#777;font-style:italic}\
svg{display:block;margin:8px 0}code{background:#f4f4f4;padding:0 3px}dl{display:grid;\
grid-template-columns:max-content auto;gap:2px 12px}dt{font-weight:600}dd{margin:0}";

/// Text for HTML: every byte that may come from a server or a file is escaped (XML escaping is HTML-safe).
use crate::report::junit::esc as escape;

/// A tick-label number: three significant figures at most, no trailing zeros.
fn num(v: f64) -> String {
    let s = if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else if v.abs() >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_owned() } else { s }
}

/// Round tick positions covering `[lo, hi]`: steps of 1, 2 or 5 times a power of ten, about five of them.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
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
        return Some((lo - pad, hi + pad));
    }
    let pad = (hi - lo) * 0.05;
    Some((if from_zero && lo >= 0.0 { lo } else { lo - pad }, hi + pad))
}

struct Axes {
    x: (f64, f64),
    y: (f64, f64),
}

impl Axes {
    fn px(&self, x: f64) -> f64 {
        LEFT + (x - self.x.0) / (self.x.1 - self.x.0) * (WIDTH - LEFT - RIGHT)
    }
    fn py(&self, y: f64) -> f64 {
        HEIGHT - BOTTOM - (y - self.y.0) / (self.y.1 - self.y.0) * (HEIGHT - TOP - BOTTOM)
    }

    /// The frame, grid, tick labels, axis labels and title.
    fn frame(&self, svg: &mut String, title: &str, x_label: &str, y_label: &str, y_ticks: bool) {
        let (x0, x1, y0, y1) = (LEFT, WIDTH - RIGHT, TOP, HEIGHT - BOTTOM);
        let _ = write!(
            svg,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{t}"><title>{t}</title><rect x="{x0}" y="{y0}" width="{w}" height="{h}" fill="#fff" stroke="#999"/><text x="{x0}" y="18" font-size="13" font-weight="600">{t}</text>"##,
            t = escape(title),
            w = x1 - x0,
            h = y1 - y0,
        );
        for t in ticks(self.x.0, self.x.1) {
            let x = self.px(t);
            let _ = write!(
                svg,
                r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{y1}" stroke="#eee"/><text x="{x:.1}" y="{ty}" font-size="11" text-anchor="middle">{}</text>"##,
                num(t),
                ty = y1 + 14.0
            );
        }
        if y_ticks {
            for t in ticks(self.y.0, self.y.1) {
                let y = self.py(t);
                let _ = write!(
                    svg,
                    r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#eee"/><text x="{tx}" y="{ty:.1}" font-size="11" text-anchor="end">{}</text>"##,
                    num(t),
                    tx = x0 - 4.0,
                    ty = y + 4.0
                );
            }
        }
        let _ = write!(
            svg,
            r##"<text x="{cx}" y="{by}" font-size="12" text-anchor="middle">{}</text><text x="14" y="{cy}" font-size="12" text-anchor="middle" transform="rotate(-90 14 {cy})">{}</text>"##,
            escape(x_label),
            escape(y_label),
            cx = (x0 + x1) / 2.0,
            by = HEIGHT - 8.0,
            cy = (y0 + y1) / 2.0,
        );
    }
}

fn legend(svg: &mut String, names: &[String]) {
    for (i, name) in names.iter().enumerate() {
        let y = TOP + 14.0 + 16.0 * i as f64;
        let x = WIDTH - RIGHT - 150.0;
        let _ = write!(
            svg,
            r##"<rect x="{x}" y="{ry}" width="10" height="10" fill="{c}"/><text x="{tx}" y="{y}" font-size="11">{}</text>"##,
            escape(name),
            c = COLOURS[i % COLOURS.len()],
            ry = y - 9.0,
            tx = x + 14.0,
        );
    }
}

/// Lines through (x, y) points, one colour per series; `None` when no series has a finite point.
fn line_chart(title: &str, x_label: &str, y_label: &str, series: &[(String, Vec<(f64, f64)>)]) -> Option<String> {
    let points = || series.iter().flat_map(|(_, p)| p.iter()).filter(|(x, y)| x.is_finite() && y.is_finite());
    let axes = Axes { x: range(points().map(|p| p.0), true)?, y: range(points().map(|p| p.1), true)? };
    let mut svg = String::new();
    axes.frame(&mut svg, title, x_label, y_label, true);
    for (i, (_, pts)) in series.iter().enumerate() {
        let path: Vec<String> = pts
            .iter()
            .filter(|(x, y)| x.is_finite() && y.is_finite())
            .map(|(x, y)| format!("{:.1},{:.1}", axes.px(*x), axes.py(*y)))
            .collect();
        let _ = write!(
            svg,
            r##"<polyline fill="none" stroke="{}" stroke-width="1.6" points="{}"/>"##,
            COLOURS[i % COLOURS.len()],
            path.join(" ")
        );
    }
    legend(&mut svg, &series.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>());
    svg.push_str("</svg>");
    Some(svg)
}

/// One row of dots per named sample set, with the row's mean as a bar: baseline against candidate at a glance.
fn dot_chart(title: &str, x_label: &str, rows: &[(String, Vec<f64>, usize)]) -> Option<String> {
    let axes = Axes {
        x: range(rows.iter().flat_map(|(_, v, _)| v.iter().copied()), false)?,
        y: (0.0, rows.len() as f64 + 1.0),
    };
    let mut svg = String::new();
    axes.frame(&mut svg, title, x_label, "", false);
    for (i, (name, values, colour)) in rows.iter().enumerate() {
        let y = axes.py(rows.len() as f64 - i as f64);
        let c = COLOURS[colour % COLOURS.len()];
        let _ = write!(svg, r##"<text x="{}" y="{:.1}" font-size="11">{}</text>"##, LEFT + 4.0, y - 8.0, escape(name));
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

/// Empirical CDF points of `values` (sorted), as (value, fraction ≤ value).
fn cdf(mut values: Vec<f64>) -> Vec<(f64, f64)> {
    values.retain(|v| v.is_finite());
    values.sort_by(f64::total_cmp);
    let n = values.len() as f64;
    values.iter().enumerate().map(|(i, v)| (*v, (i + 1) as f64 / n)).collect()
}

/// Per-request TTFT and E2EL (milliseconds) of every successful request of a level.
fn latencies(level: &Level, max_tokens: u64) -> (Vec<f64>, Vec<f64>) {
    let mut ttft = Vec::new();
    let mut e2el = Vec::new();
    for r in level.batches.iter().flat_map(|b| &b.requests) {
        if let Ok(m) = metrics::request(&crate::run::to_timeline(r, max_tokens)) {
            ttft.push(m.ttft * 1e3);
            e2el.push(m.e2el * 1e3);
        }
    }
    (ttft, e2el)
}

fn read(dir: &Path, name: &str) -> Result<String, String> {
    crate::util::bounded::read_text(&dir.join(name), crate::util::bounded::RECORD_CAP)
        .map_err(|e| format!("`{name}` could not be read ({e})"))
}

fn none(html: &mut String, why: &str) {
    let _ = writeln!(html, "<p class=\"none\">{}</p>", escape(why));
}

/// One row per condition of R3's matrix: its verdict and its first divergence (server text, escaped).
fn determinism_section(html: &mut String, dir: &Path, q: &Qualification) {
    if q.stage("R3").is_none_or(|s| !matches!(s.status, StageStatus::Pass | StageStatus::Fail)) {
        return none(html, "R3 did not run: no matrix");
    }
    let parsed = read(dir, DETERMINISM_FILE).and_then(|t| {
        serde_json::from_str::<DeterminismMatrix>(&t).map_err(|e| format!("`{DETERMINISM_FILE}` is not a matrix ({e})"))
    });
    let m = match parsed {
        Ok(m) => m,
        Err(why) => return none(html, &why),
    };
    let _ = writeln!(
        html,
        "<p>Each answer against the one it must equal; a flip between candidates closer than {} nats in the \
         reference's alternatives is a near-tie (numerical drift). Concurrent copies: {}.</p>",
        m.near_tie_nats, m.concurrency
    );
    html.push_str("<table><tr><th>Row</th><th>Compares</th><th>Verdict</th><th>First divergence</th></tr>\n");
    for r in &m.rows {
        let class = match r.verdict {
            RowVerdict::Identical | RowVerdict::NearTieOnly => "pass",
            RowVerdict::NotRun => "not-run",
            RowVerdict::Diverged | RowVerdict::Failed => "fail",
        };
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td class=\"{class}\">{}</td><td>{}</td></tr>",
            escape(r.row.as_str()),
            escape(&r.what),
            escape(r.verdict.as_str()),
            escape(r.first_divergence.as_deref().unwrap_or("—"))
        );
    }
    html.push_str("</table>\n");
}

/// The latency-distribution plots of a stage file holding `levels` (R4 or R5).
fn latency_section(html: &mut String, dir: &Path, stage: &str, file: &str) {
    let _ = writeln!(html, "<h3>{stage}: <code>{}</code></h3>", escape(file));
    let parsed = read(dir, file).and_then(|t| {
        let v: Value = serde_json::from_str(&t).map_err(|e| format!("`{file}` is not JSON ({e})"))?;
        let max_tokens = v["workload"]["max_tokens"].as_u64().unwrap_or(0);
        let levels: Vec<Level> = serde_json::from_value(v["levels"].clone())
            .map_err(|e| format!("`{file}` has no readable levels ({e})"))?;
        Ok((levels, max_tokens))
    });
    let (levels, max_tokens) = match parsed {
        Ok(x) => x,
        Err(why) => return none(html, &format!("no plot: {why}")),
    };
    let mut ttft = Vec::new();
    let mut e2el = Vec::new();
    for l in &levels {
        let (t, e) = latencies(l, max_tokens);
        let name = format!("concurrency {} ({} requests)", l.concurrency, t.len());
        ttft.push((name.clone(), cdf(t)));
        e2el.push((name, cdf(e)));
    }
    for (what, series) in [("time to first token", ttft), ("end-to-end latency", e2el)] {
        match line_chart(&format!("{stage} {what}: cumulative distribution"), "milliseconds", "fraction ≤ x", &series)
        {
            Some(svg) => html.push_str(&svg),
            None => none(html, &format!("no {what} to plot: no request of {stage} succeeded")),
        }
    }
}

fn monitor_section(html: &mut String, dir: &Path) {
    let samples = match read(dir, MONITOR_FILE).and_then(|t| drift::read_samples(&t)) {
        Ok(s) => s,
        Err(why) => return none(html, &format!("no plot: {why}")),
    };
    let rss: Vec<(f64, f64)> =
        samples.iter().filter_map(|s| Some((s.t, s.rss_bytes? as f64 / (1024.0 * 1024.0)))).collect();
    let health: Vec<(f64, f64)> =
        samples.iter().filter(|s| s.health_ok).filter_map(|s| Some((s.t, s.health_seconds? * 1e3))).collect();
    let gpu: Vec<(f64, f64)> =
        samples.iter().filter_map(|s| Some((s.t, s.gpu_memory_bytes? as f64 / (1024.0 * 1024.0)))).collect();
    let failed = samples.iter().filter(|s| !s.health_ok).count();
    let _ = writeln!(
        html,
        "<p>{} samples over {:.0} s; {failed} failed health probe(s).</p>",
        samples.len(),
        samples.last().map_or(0.0, |s| s.t)
    );
    let charts = [
        ("server RSS (process group)", "MiB", rss),
        ("health latency", "milliseconds", health),
        ("GPU memory used", "MiB", gpu),
    ];
    for (title, unit, points) in charts {
        if points.is_empty() {
            none(html, &format!("no {title} samples"));
            continue;
        }
        if let Some(svg) = line_chart(
            &format!("{title} over time"),
            "seconds since the monitor started",
            unit,
            &[(title.to_owned(), points)],
        ) {
            html.push_str(&svg);
        }
    }
}

/// Baseline against candidate per compared metric and concurrency, from R5's samples.
fn comparison_section(html: &mut String, dir: &Path, q: &Qualification) {
    let Some(baseline) = &q.baseline else {
        return none(html, "no baseline: R5 is candidate evidence, nothing to compare with");
    };
    let _ = writeln!(html, "<p>Baseline: <code>{}</code></p>", escape(baseline));
    let load = |name: &str| -> Result<BenchRecord, String> {
        serde_json::from_str(&read(dir, name)?).map_err(|e| format!("`{name}` is not a bench record ({e})"))
    };
    let r5 = q.stage("R5").map_or("r5-performance.json", |s| s.file.as_str());
    let (base, now) = match (load(BASELINE_FILE), load(r5)) {
        (Ok(b), Ok(n)) => (b, n),
        (Err(why), _) | (_, Err(why)) => return none(html, &format!("no plot: {why}")),
    };
    let _ = writeln!(
        html,
        "<table><tr><th>Concurrency</th><th>Metric</th><th>Baseline → now</th><th>Change (interval)</th><th>Call</th></tr>"
    );
    for level in &now.levels {
        for c in &level.comparisons {
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td>{}</td><td>{} → {}</td><td>{:+.1}% ({:+.1}% … {:+.1}%)</td><td>{}</td></tr>",
                level.concurrency,
                escape(&c.metric),
                num(c.baseline_mean),
                num(c.mean),
                c.change * 100.0,
                c.interval.0 * 100.0,
                c.interval.1 * 100.0,
                escape(c.call.as_str())
            );
        }
    }
    html.push_str("</table>\n");
    let metrics: Vec<&String> = now.levels.iter().flat_map(|l| l.samples.keys()).collect();
    let mut seen = std::collections::BTreeSet::new();
    for metric in metrics.into_iter().filter(|m| seen.insert(m.as_str())) {
        let mut rows = Vec::new();
        for level in &now.levels {
            let before = base.levels.iter().find(|b| b.concurrency == level.concurrency);
            if let Some(b) = before.and_then(|b| b.samples.get(metric)) {
                rows.push((format!("c{} baseline", level.concurrency), b.clone(), 0));
            }
            if let Some(n) = level.samples.get(metric) {
                rows.push((format!("c{} now", level.concurrency), n.clone(), 1));
            }
        }
        if let Some(svg) = dot_chart(&format!("{metric}: one dot per measured batch, bar = mean"), metric, &rows) {
            html.push_str(&svg);
        }
    }
}

/// The whole page for the bundle in `dir` whose report is `q`.
pub fn render(dir: &Path, q: &Qualification) -> String {
    let mut html = String::new();
    let verdict = q.verdict.as_str();
    let _ = write!(
        html,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\
         <title>Release qualification: {p}</title><style>{STYLE}</style></head><body>\n\
         <h1>Release qualification: {p}</h1>\n<p>Verdict: <span class=\"{verdict}\">{v}</span>{partial}</p>\n<dl>",
        p = escape(&q.profile),
        verdict = escape(verdict),
        v = escape(&verdict.to_uppercase()),
        partial = if q.partial { " (partial: not every stage was selected)" } else { "" },
    );
    let facts = [
        ("Identity", q.identity_digest.clone()),
        ("Run", format!("{} · gauntlet {}", q.run_id, q.gauntlet_version)),
        ("Server", format!("{} at {}", q.command.join(" "), q.base_url)),
        ("Started", q.started_at.clone()),
        ("Finished", q.finished_at.clone().unwrap_or_else(|| "in progress (or killed)".into())),
        ("Baseline", q.baseline.clone().unwrap_or_else(|| "none".into())),
    ];
    for (k, v) in facts {
        let _ = write!(html, "<dt>{k}</dt><dd><code>{}</code></dd>", escape(&v));
    }
    html.push_str("</dl>\n<h2>Stages</h2>\n<table><tr><th>Stage</th><th>What</th><th>Status</th><th>Seconds</th><th>Summary</th><th>Evidence</th></tr>\n");
    for s in &q.stages {
        let status = if s.timed_out { format!("{} (timed out)", s.status) } else { s.status.to_string() };
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td class=\"{}\">{}</td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            escape(&s.id),
            escape(&s.title),
            escape(s.status.as_str()),
            escape(&status.to_uppercase()),
            s.seconds.map_or(String::new(), |x| format!("{x:.1}")),
            escape(&s.summary),
            escape(&s.file)
        );
    }
    html.push_str("</table>\n<h2>Findings</h2>\n");
    let failures: Vec<(&str, &String)> =
        q.stages.iter().flat_map(|s| s.failures.iter().map(move |f| (s.id.as_str(), f))).collect();
    if failures.is_empty() {
        none(&mut html, "no stage reported a failure");
    } else {
        html.push_str("<ul>\n");
        for (id, f) in failures.iter().take(200) {
            let _ = writeln!(html, "<li><b>{}</b> {}</li>", escape(id), escape(f));
        }
        if failures.len() > 200 {
            let _ = writeln!(html, "<li>… and {} more: see the stage files</li>", failures.len() - 200);
        }
        html.push_str("</ul>\n");
    }
    html.push_str("<h2>Determinism matrix (R3)</h2>\n");
    determinism_section(&mut html, dir, q);
    html.push_str("<h2>Latency distributions per concurrency</h2>\n");
    for row in ["R4", "R5"].iter().filter_map(|id| q.stage(id)) {
        let stage = row.id.as_str();
        if matches!(row.status, StageStatus::Pass | StageStatus::Fail | StageStatus::Inconclusive) {
            latency_section(&mut html, dir, stage, &row.file);
        } else {
            none(&mut html, &format!("{stage} is {}: no latencies", row.status));
        }
    }
    html.push_str("<h2>Server health over time (R6 monitor)</h2>\n");
    monitor_section(&mut html, dir);
    html.push_str("<h2>Baseline against candidate (R5)</h2>\n");
    comparison_section(&mut html, dir, q);
    let _ = writeln!(
        html,
        "<p class=\"none\">Written by gauntlet {} from the files in this folder; <code>gauntlet verify</code> checks \
         them offline.</p>\n</body></html>",
        escape(&q.gauntlet_version)
    );
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        assert_eq!(ticks(0.0, 1.0), vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]);
        assert_eq!(ticks(0.0, 250.0), vec![0.0, 50.0, 100.0, 150.0, 200.0, 250.0]);
        assert!(ticks(3.0, 3.0 + 1e-15).len() <= 12);
        assert_eq!(num(0.6000000000000001), "0.6");
        assert_eq!(num(123.4), "123");
    }

    #[test]
    fn server_text_is_escaped() {
        assert_eq!(
            escape("<script>\"x\" & 'y'</script>\u{7}"),
            "&lt;script&gt;&quot;x&quot; &amp; &apos;y&apos;&lt;/script&gt;\u{fffd}"
        );
    }

    #[test]
    fn charts_without_finite_points_are_left_out() {
        assert!(line_chart("t", "x", "y", &[("a".into(), vec![(f64::NAN, 1.0)])]).is_none());
        assert!(dot_chart("t", "x", &[("a".into(), vec![], 0)]).is_none());
        let svg = line_chart("t", "x", "y", &[("a".into(), vec![(0.0, 1.0), (1.0, 2.0)])]).unwrap();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>") && svg.contains("<polyline"), "{svg}");
        assert_eq!(cdf(vec![3.0, f64::NAN, 1.0]), vec![(1.0, 0.5), (3.0, 1.0)]);
    }
}
