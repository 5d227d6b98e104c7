//! `qualification.html`: the bundle's report for a person, one self-contained file (inline CSS and SVG, no script,
//! no external asset; a Content-Security-Policy forbids fetching any), drawn with the pages' shared pieces in
//! `report::html`. Rebuilt with the JSON and Markdown reports
//! after every stage, from the stage files in the bundle; a file that is missing or unreadable leaves a note in
//! place of its plot, never a broken page.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::Value;

use super::{BASELINE_FILE, MONITOR_FILE, Qualification, StageStatus, drift};
use crate::bench::metrics;
use crate::report::html::chart::{cdf, dot_chart, line_chart};
use crate::report::html::page::{escape, head, none, num};
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
         reference's alternatives is a near-tie; a flip whose swing is within {}× the row's jitter (the largest \
         |Δlogprob| of the tokens its answers share, measured over at least {} of them) is numerical; anything else \
         a behaviour change. Concurrent copies: {}.</p>",
        m.near_tie_nats,
        gauntlet_schema::tokens::JITTER_SWING_FACTOR,
        m.jitter_min_tokens.unwrap_or(gauntlet_schema::tokens::JITTER_MIN_TOKENS),
        m.concurrency
    );
    html.push_str(
        "<table><tr><th>Row</th><th>Compares</th><th>Verdict</th><th>Jitter</th><th>First divergence</th></tr>\n",
    );
    for r in &m.rows {
        let class = match r.verdict {
            RowVerdict::Identical | RowVerdict::NearTieOnly => "pass",
            RowVerdict::NotRun => "not-run",
            RowVerdict::Diverged | RowVerdict::Failed => "fail",
        };
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td class=\"{class}\">{}</td><td>{}</td><td>{}</td></tr>",
            escape(r.row.as_str()),
            escape(&r.what),
            escape(r.verdict.as_str()),
            escape(&r.jitter.as_ref().map_or("not measured".into(), |j| format!(
                "≤ {:.3} nats over {} tokens (median {:.3})",
                j.max_nats, j.tokens, j.median_nats
            ))),
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
    let verdict = q.verdict.as_str();
    let mut html = head(&format!("Release qualification: {}", q.profile));
    let _ = write!(
        html,
        "<p>Verdict: <span class=\"{verdict}\">{v}</span>{partial}</p>\n<dl>",
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
