//! `qualification.html`: the bundle's report for a person, one self-contained file (inline CSS and SVG, no script,
//! no external asset; a Content-Security-Policy forbids fetching any), drawn with the pages' shared pieces in
//! `report::html`. Rebuilt with the JSON and Markdown reports
//! after every stage, from the stage files in the bundle; a file that is missing or unreadable leaves a note in
//! place of its plot, never a broken page.

use std::path::Path;

use maud::{Markup, PreEscaped, html};
use serde_json::Value;

use super::{BASELINE_FILE, MONITOR_FILE, Qualification, StageStatus, drift};
use crate::bench::metrics;
use crate::manifest::Stage;
use crate::report::html::chart::{cdf, dot_chart, line_chart};
use crate::report::html::page::{chart, document, none, num};
use crate::run::{BenchRecord, Level};
use gauntlet_schema::determinism::{DETERMINISM_FILE, DeterminismMatrix, RowVerdict};

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

/// One row per condition of R3's matrix: its verdict and its first divergence (server text, escaped).
fn determinism_section(dir: &Path, q: &Qualification) -> Markup {
    if q.stage(Stage::R3).is_none_or(|s| !matches!(s.status, StageStatus::Pass | StageStatus::Fail)) {
        return none("R3 did not run: no matrix");
    }
    let parsed = read(dir, DETERMINISM_FILE).and_then(|t| {
        serde_json::from_str::<DeterminismMatrix>(&t).map_err(|e| format!("`{DETERMINISM_FILE}` is not a matrix ({e})"))
    });
    let m = match parsed {
        Ok(m) => m,
        Err(why) => return none(&why),
    };
    html! {
        p {
            "Each answer against the one it must equal; a flip between candidates closer than " (m.near_tie_nats)
            " nats in the reference's alternatives is a near-tie; a flip whose swing is within "
            (gauntlet_schema::tokens::JITTER_SWING_FACTOR) "× the row's jitter (the largest |Δlogprob| of the \
            tokens its answers share, measured over at least "
            (m.jitter_min_tokens.unwrap_or(gauntlet_schema::tokens::JITTER_MIN_TOKENS))
            " of them) is numerical; anything else a behaviour change. Concurrent copies: " (m.concurrency) "."
        } "\n"
        table {
            tr { th { "Row" } th { "Compares" } th { "Verdict" } th { "Jitter" } th { "First divergence" } } "\n"
            @for r in &m.rows {
                @let class = match r.verdict {
                    RowVerdict::Identical | RowVerdict::NearTieOnly => "pass",
                    RowVerdict::NotRun => "not-run",
                    RowVerdict::Diverged | RowVerdict::Failed => "fail",
                };
                tr {
                    td { (r.row.as_str()) } td { (r.what) } td class=(class) { (r.verdict.as_str()) }
                    td {
                        @match &r.jitter {
                            Some(j) => { "≤ " (format!("{:.3}", j.max_nats)) " nats over " (j.tokens)
                                " tokens (median " (format!("{:.3}", j.median_nats)) ")" }
                            None => "not measured",
                        }
                    }
                    td { (r.first_divergence.as_deref().unwrap_or("—")) }
                } "\n"
            }
        } "\n"
    }
}

/// The latency-distribution plots of a stage file holding `levels` (R4 or R5).
fn latency_section(dir: &Path, stage: &str, file: &str) -> Markup {
    let title = html! { h3 { (stage) ": " code { (file) } } "\n" };
    let parsed = read(dir, file).and_then(|t| {
        let v: Value = serde_json::from_str(&t).map_err(|e| format!("`{file}` is not JSON ({e})"))?;
        let max_tokens = v["workload"]["max_tokens"].as_u64().unwrap_or(0);
        let levels: Vec<Level> = serde_json::from_value(v["levels"].clone())
            .map_err(|e| format!("`{file}` has no readable levels ({e})"))?;
        Ok((levels, max_tokens))
    });
    let (levels, max_tokens) = match parsed {
        Ok(x) => x,
        Err(why) => return html! { (title) (none(&format!("no plot: {why}"))) },
    };
    let mut ttft = Vec::new();
    let mut e2el = Vec::new();
    for l in &levels {
        let (t, e) = latencies(l, max_tokens);
        let name = format!("concurrency {} ({} requests)", l.concurrency, t.len());
        ttft.push((name.clone(), cdf(t)));
        e2el.push((name, cdf(e)));
    }
    let charts = [("time to first token", ttft), ("end-to-end latency", e2el)].map(|(what, series)| {
        let svg =
            line_chart(&format!("{stage} {what}: cumulative distribution"), "milliseconds", "fraction ≤ x", &series);
        chart(svg, || format!("no {what} to plot: no request of {stage} succeeded"))
    });
    html! { (title) @for c in charts { (c) } }
}

fn monitor_section(dir: &Path) -> Markup {
    let samples = match read(dir, MONITOR_FILE).and_then(|t| drift::read_samples(&t).map_err(|e| e.to_string())) {
        Ok(s) => s,
        Err(why) => return none(&format!("no plot: {why}")),
    };
    let rss: Vec<(f64, f64)> =
        samples.iter().filter_map(|s| Some((s.t, s.rss_bytes? as f64 / (1024.0 * 1024.0)))).collect();
    let health: Vec<(f64, f64)> =
        samples.iter().filter(|s| s.health_ok).filter_map(|s| Some((s.t, s.health_seconds? * 1e3))).collect();
    let gpu: Vec<(f64, f64)> =
        samples.iter().filter_map(|s| Some((s.t, s.gpu_memory_bytes? as f64 / (1024.0 * 1024.0)))).collect();
    let failed = samples.iter().filter(|s| !s.health_ok).count();
    let charts = [
        ("server RSS (process group)", "MiB", rss),
        ("health latency", "milliseconds", health),
        ("GPU memory used", "MiB", gpu),
    ]
    .map(|(title, unit, points)| {
        if points.is_empty() {
            return none(&format!("no {title} samples"));
        }
        let svg = line_chart(
            &format!("{title} over time"),
            "seconds since the monitor started",
            unit,
            &[(title.to_owned(), points)],
        );
        PreEscaped(svg.unwrap_or_default())
    });
    html! {
        p {
            (samples.len()) " samples over " (format!("{:.0}", samples.last().map_or(0.0, |s| s.t))) " s; "
            (failed) " failed health probe(s)."
        } "\n"
        @for c in charts { (c) }
    }
}

/// Baseline against candidate per compared metric and concurrency, from R5's samples.
fn comparison_section(dir: &Path, q: &Qualification) -> Markup {
    let Some(baseline) = &q.baseline else {
        return none("no baseline: R5 is candidate evidence, nothing to compare with");
    };
    let title = html! { p { "Baseline: " code { (baseline) } } "\n" };
    let load = |name: &str| -> Result<BenchRecord, String> {
        serde_json::from_str(&read(dir, name)?).map_err(|e| format!("`{name}` is not a bench record ({e})"))
    };
    let r5 = q.stage(Stage::R5).map_or("r5-performance.json", |s| s.file.as_str());
    let (base, now) = match (load(BASELINE_FILE), load(r5)) {
        (Ok(b), Ok(n)) => (b, n),
        (Err(why), _) | (_, Err(why)) => return html! { (title) (none(&format!("no plot: {why}"))) },
    };
    let metrics: Vec<&String> = now.levels.iter().flat_map(|l| l.samples.keys()).collect();
    let mut seen = std::collections::BTreeSet::new();
    let mut charts = Vec::new();
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
        charts.extend(dot_chart(&format!("{metric}: one dot per measured batch, bar = mean"), metric, &rows));
    }
    let pct = |x: f64| format!("{:+.1}%", x * 100.0);
    html! {
        (title)
        table {
            tr {
                th { "Concurrency" } th { "Metric" } th { "Baseline → now" } th { "Change (interval)" } th { "Call" }
            } "\n"
            @for level in &now.levels {
                @for c in &level.comparisons {
                    tr {
                        td { (level.concurrency) } td { (c.metric) }
                        td { (num(c.baseline_mean)) " → " (num(c.mean)) }
                        td { (pct(c.change)) " (" (pct(c.interval.0)) " … " (pct(c.interval.1)) ")" }
                        td { (c.call.as_str()) }
                    } "\n"
                }
            }
        } "\n"
        @for svg in charts { (PreEscaped(svg)) }
    }
}

/// The whole page for the bundle in `dir` whose report is `q`.
pub fn render(dir: &Path, q: &Qualification) -> String {
    let verdict = q.verdict.as_str();
    let facts = [
        ("Identity", q.identity_digest.clone()),
        ("Run", format!("{} · gauntlet {}", q.run_id, q.gauntlet_version)),
        ("Server", format!("{} at {}", q.command.join(" "), q.base_url)),
        ("Started", q.started_at.clone()),
        ("Finished", q.finished_at.clone().unwrap_or_else(|| "in progress (or killed)".into())),
        ("Baseline", q.baseline.clone().unwrap_or_else(|| "none".into())),
    ];
    let failures: Vec<(&str, &String)> =
        q.stages.iter().flat_map(|s| s.failures.iter().map(move |f| (s.id.as_str(), f))).collect();
    let latency = [Stage::R4, Stage::R5].into_iter().filter_map(|id| q.stage(id)).map(|row| {
        let stage = row.id.as_str();
        if matches!(row.status, StageStatus::Pass | StageStatus::Fail | StageStatus::Inconclusive) {
            latency_section(dir, stage, &row.file)
        } else {
            none(&format!("{stage} is {}: no latencies", row.status))
        }
    });
    let body = html! {
        p {
            "Verdict: " span class=(verdict) { (verdict.to_uppercase()) }
            @if q.partial { " (partial: not every stage was selected)" }
        } "\n"
        dl { @for (k, v) in &facts { dt { (k) } dd { code { (v) } } } } "\n"
        h2 { "Stages" } "\n"
        table {
            tr { th { "Stage" } th { "What" } th { "Status" } th { "Seconds" } th { "Summary" } th { "Evidence" } } "\n"
            @for s in &q.stages {
                @let status = if s.timed_out { format!("{} (timed out)", s.status) } else { s.status.to_string() };
                tr {
                    td { (s.id) } td { (s.title) } td class=(s.status.as_str()) { (status.to_uppercase()) }
                    td { (s.seconds.map_or(String::new(), |x| format!("{x:.1}"))) }
                    td { (s.summary) } td { code { (s.file) } }
                } "\n"
            }
        } "\n"
        h2 { "Findings" } "\n"
        @if failures.is_empty() {
            (none("no stage reported a failure"))
        } @else {
            ul {
                "\n"
                @for (id, f) in failures.iter().take(200) { li { b { (id) } " " (f) } "\n" }
                @if failures.len() > 200 { li { "… and " (failures.len() - 200) " more: see the stage files" } "\n" }
            } "\n"
        }
        h2 { "Determinism matrix (R3)" } "\n"
        (determinism_section(dir, q))
        h2 { "Latency distributions per concurrency" } "\n"
        @for section in latency { (section) }
        h2 { "Server health over time (R6 monitor)" } "\n"
        (monitor_section(dir))
        h2 { "Baseline against candidate (R5)" } "\n"
        (comparison_section(dir, q))
        p.none {
            "Written by gauntlet " (q.gauntlet_version) " from the files in this folder; " code { "gauntlet verify" }
            " checks them offline."
        } "\n"
    };
    document(&format!("Release qualification: {}", q.profile), body)
}
