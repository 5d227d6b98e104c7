//! `bench.html`: a bench record for a person, beside `bench.json` and `bench.md`. The latency distributions per
//! concurrency (TTFT, chunk ITL, E2EL, as cumulative distributions of every successful request), throughput
//! against concurrency, and each compared metric's change with its interval (and the minimum detectable effect
//! when the record has one). A pure function of the record; per-request numbers come from `bench::metrics`, the one
//! owner of their definitions.

use std::fmt::Write as _;

use gauntlet_schema::bench::{BenchRecord, Level, RequestRecord};

use crate::bench::metrics::{self, Values};
use crate::report::html::chart::{CDF_POINTS, cdf, interval_chart, line_chart};
use crate::report::html::page::{escape, head, nav, none, num};

/// Per-request TTFT, chunk gaps (pooled) and E2EL in milliseconds, over every successful request of a level (in
/// bounded memory: a long bench's curves come from buckets), and how many requests failed.
fn latencies(level: &Level, max_tokens: u64) -> ([Values; 3], usize) {
    let mut out = Default::default();
    for r in level.batches.iter().flat_map(|b| &b.requests) {
        add_latencies(r, max_tokens, &mut out);
    }
    out
}

/// One request's latencies added to those [`latencies`] gives.
pub(crate) fn add_latencies(r: &RequestRecord, max_tokens: u64, (out, failed): &mut ([Values; 3], usize)) {
    match metrics::request(&super::to_timeline(r, max_tokens)) {
        Ok(m) => {
            out[0].push(m.ttft * 1e3);
            out[1].extend(m.chunk_gaps.iter().map(|g| g * 1e3));
            out[2].push(m.e2el * 1e3);
        }
        Err(_) => *failed += 1,
    }
}

/// A named line of (x, y) points.
type Series = (String, Vec<(f64, f64)>);

fn pooled(level: &Level, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(&level.metrics, |v, k| v.get(k)).and_then(|v| v.as_f64()).filter(|x| x.is_finite())
}

pub fn render(r: &BenchRecord) -> String {
    render_with(r, &latencies)
}

/// A level's per-request latencies and failures, as [`latencies`] gives them from the level's own requests.
pub(crate) type Latencies<'a> = &'a dyn Fn(&Level, u64) -> ([Values; 3], usize);

/// [`render`], with each level's latencies from `latencies` (a bench that spilled its requests reads them back).
pub(crate) fn render_with(r: &BenchRecord, latencies: Latencies) -> String {
    let mut html = head(&format!("gauntlet bench: {}", r.profile));
    let verdict = r.final_verdict();
    let _ = writeln!(
        html,
        "<p>Verdict: <span class=\"verdict {v}\" id=\"verdict\">{}</span></p>",
        verdict.as_str().to_uppercase(),
        v = verdict.as_str()
    );
    nav(&mut html, &[("latency", "Latency"), ("throughput", "Throughput"), ("comparison", "Against the baseline")]);
    let w = &r.workload;
    let model = r.identity.model().map_or("(not recorded: identity of an older shape)".to_owned(), |m| m.name.clone());
    let mode = match w.rate {
        Some(rate) => format!("open loop: Poisson arrivals at {rate} req/s (seed {})", w.seed.unwrap_or(1)),
        None => "closed loop: each batch released at once".into(),
    };
    let facts = [
        ("Model", model),
        (
            "Workload",
            format!(
                "concurrency {:?}, {} max tokens, {} warm-up and {} measured batch(es) each; {mode}",
                w.concurrency, w.max_tokens, w.warmups, w.repetitions
            ),
        ),
        ("Baseline", r.baseline.clone().unwrap_or_else(|| "none (this record is a candidate)".into())),
        ("Started", r.started_at.clone()),
        ("Identity", r.identity_digest.clone()),
    ];
    html.push_str("<dl>");
    for (k, v) in facts {
        let _ = write!(html, "<dt>{k}</dt><dd id=\"{}\">{}</dd>", k.to_lowercase(), escape(&v));
    }
    if let Some(c) = &r.confirmation {
        let _ = write!(
            html,
            "<dt>Confirmation</dt><dd>re-run <code>{}</code> said {}; what stands: {}</dd>",
            escape(&c.record),
            c.verdict,
            c.stands
        );
    }
    html.push_str("</dl>\n");
    if !r.problems.is_empty() || !r.findings.is_empty() {
        html.push_str("<h2 id=\"problems\">Problems and findings</h2>\n<ul>");
        for p in &r.problems {
            let _ = write!(html, "<li>{}</li>", escape(p));
        }
        for f in &r.findings {
            let _ = write!(
                html,
                "<li><b>{}</b> ({}): {}</li>",
                escape(&f.kind.to_string()),
                format!("{:?}", f.severity).to_lowercase(),
                escape(&f.message)
            );
        }
        html.push_str("</ul>\n");
    }

    html.push_str("<h2 id=\"latency\">Latency per concurrency</h2>\n");
    let mut series: [Vec<Series>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for l in &r.levels {
        let (values, failed) = latencies(l, w.max_tokens);
        for (i, v) in values.into_iter().enumerate() {
            let what = if i == 1 { "gaps" } else { "requests" };
            let name = format!("c{}: {} {what}, {failed} failed", l.concurrency, v.len());
            let points = match v.exact() {
                Some(all) => cdf(all.to_vec()),
                None => v.bucket_cdf(CDF_POINTS),
            };
            series[i].push((name, points));
        }
    }
    let titles = [
        "time to first token (TTFT)",
        "inter-token latency (ITL: gaps between streamed chunks, pooled)",
        "end-to-end latency (E2EL)",
    ];
    for (title, s) in titles.iter().zip(&series) {
        match line_chart(&format!("{title}: cumulative distribution"), "milliseconds", "fraction ≤ x", s) {
            Some(svg) => html.push_str(&svg),
            None => none(&mut html, &format!("no {title} to draw: no request succeeded")),
        }
    }

    html.push_str("<h2 id=\"throughput\">Throughput against concurrency</h2>\n");
    let now: Vec<(f64, f64)> =
        r.levels.iter().filter_map(|l| Some((l.concurrency as f64, pooled(l, &["output_throughput_wall"])?))).collect();
    let base: Vec<(f64, f64)> = r
        .levels
        .iter()
        .filter_map(|l| {
            let c = l.comparisons.iter().find(|c| c.metric == "output_throughput_wall")?;
            Some((l.concurrency as f64, c.baseline_mean))
        })
        .collect();
    let mut tput = vec![("this bench (pooled)".to_owned(), now)];
    if !base.is_empty() {
        tput.push(("baseline (batch mean)".to_owned(), base));
    }
    match line_chart("output throughput against concurrency", "concurrency", "tokens/s", &tput) {
        Some(svg) => html.push_str(&svg),
        None => none(&mut html, "no throughput to draw: no level measured"),
    }
    html.push_str(
        "<table><tr><th>Concurrency</th><th>Requests</th><th>Failed</th><th>TTFT p50 ms</th><th>TTFT p99 ms</th>\
         <th>ITL p99 ms</th><th>E2EL p50 ms</th><th>Output tok/s</th><th>Most in flight</th></tr>\n",
    );
    let ms = |v: Option<f64>| v.map_or("—".to_owned(), |x| num(x * 1e3));
    for l in &r.levels {
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            l.concurrency,
            l.metrics["requests"].as_u64().unwrap_or(0),
            l.metrics["failed"].as_u64().unwrap_or(0),
            ms(pooled(l, &["ttft", "p50"])),
            ms(pooled(l, &["ttft", "p99"])),
            ms(pooled(l, &["itl_chunk", "p99"])),
            ms(pooled(l, &["e2el", "p50"])),
            pooled(l, &["output_throughput_wall"]).map_or("—".into(), num),
            l.tally_or_fold().in_flight_max
        );
    }
    html.push_str("</table>\n");

    html.push_str("<h2 id=\"comparison\">Against the baseline</h2>\n");
    let compared: Vec<_> =
        r.levels.iter().flat_map(|l| l.comparisons.iter().map(move |c| (l.concurrency, c))).collect();
    if compared.is_empty() {
        none(&mut html, "no baseline bench of this identity was given: nothing compared");
    } else {
        let rows: Vec<(String, f64, f64, f64)> = compared
            .iter()
            .map(|(conc, c)| (format!("c{conc} {} ({})", c.metric, c.call), c.interval.0, c.change, c.interval.1))
            .collect();
        if let Some(svg) =
            interval_chart("relative change against the baseline, with its interval", "change (%)", &rows, 100.0)
        {
            html.push_str(&svg);
        }
        html.push_str(
            "<table><tr><th>Concurrency</th><th>Metric</th><th>Baseline → now</th><th>Change (interval)</th>\
             <th>p</th><th>MDE</th><th>Call</th><th>Why</th></tr>\n",
        );
        for &(conc, c) in &compared {
            let _ = writeln!(
                html,
                "<tr><td>{conc}</td><td>{} ({} is better)</td><td>{} → {}</td><td>{:+.1} % ({:+.1} … {:+.1} %)</td>\
                 <td>{}</td><td>{}</td><td class=\"{call}\">{call}</td><td>{}</td></tr>",
                escape(&c.metric),
                c.better,
                num(c.baseline_mean),
                num(c.mean),
                c.change * 100.0,
                c.interval.0 * 100.0,
                c.interval.1 * 100.0,
                c.p_value.map_or("n/a".into(), |p| format!("{p:.3}")),
                escape(&crate::run::bench_report::mde_text(c)),
                escape(&c.why),
                call = c.call,
            );
        }
        html.push_str("</table>\n");
        if compared.iter().any(|(_, c)| c.mde.is_none()) {
            html.push_str("<p class=\"muted\">This record states no minimum detectable effect.</p>\n");
        } else {
            html.push_str(
                "<p class=\"muted\">MDE: the smallest true change each comparison would catch 80 % of the time \
                 (two-sided, 5 %), at the spread within the two sessions and between sessions.</p>\n",
            );
        }
    }
    let _ = writeln!(
        html,
        "<p class=\"muted\">Written by gauntlet {} from <code>bench.json</code>.</p>\n</body></html>",
        escape(&r.gauntlet_version)
    );
    html
}
