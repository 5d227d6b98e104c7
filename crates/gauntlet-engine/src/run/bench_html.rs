//! `bench.html`: a bench record for a person, beside `bench.json` and `bench.md`. The latency distributions per
//! concurrency (TTFT, chunk ITL, E2EL, as cumulative distributions of every successful request), throughput
//! against concurrency, and each compared metric's change with its interval (and the minimum detectable effect
//! when the record has one), and a field workload's own numbers (#34: per-turn TTFT, the prefix cache's measured
//! hit rate against the one the workload should produce, how late a trace replay sent its requests). A pure
//! function of the record; per-request numbers come from `bench::metrics`, the one owner of their definitions. A
//! maud template like the other pages (see report/html/page.rs).

use std::collections::BTreeMap;

use maud::{Markup, PreEscaped, html};

use gauntlet_schema::Metric;
use gauntlet_schema::bench::{BenchRecord, Level, RequestRecord};
use gauntlet_schema::field::{FieldSummary, FieldWorkload};

use crate::bench::metrics::{self, Values};
use crate::report::html::chart::{CDF_POINTS, cdf, interval_chart, line_chart};
use crate::report::html::page::{chart, document, nav, none, num};

/// Per-request TTFT, chunk gaps (pooled) and E2EL in milliseconds, over every successful request of a level (in
/// bounded memory: a long bench's curves come from buckets), and how many requests failed.
fn latencies(level: &Level, max_tokens: u64, requests: Requests) -> ([Values; 3], usize) {
    let mut out = Default::default();
    requests(level, &mut |r| add_latencies(r, max_tokens, &mut out));
    out
}

/// One request's latencies added to those [`latencies`] gives.
fn add_latencies(r: &RequestRecord, max_tokens: u64, (out, failed): &mut ([Values; 3], usize)) {
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

pub fn render(r: &BenchRecord) -> String {
    render_with(r, &|level, f| level.batches.iter().flat_map(|b| &b.requests).for_each(f))
}

/// Visits every request of a level, one at a time: from the level's own batches, or read back from the spill file
/// of a bench that stored them apart (so that no chart of a spilled bench draws from the record's empty batches).
pub(crate) type Requests<'a> = &'a dyn Fn(&Level, &mut dyn FnMut(&RequestRecord));

/// [`render`], with each level's requests from `requests` (a bench that spilled its requests reads them back).
pub(crate) fn render_with(r: &BenchRecord, requests: Requests) -> String {
    let verdict = r.final_verdict();
    let field = r.levels.iter().filter_map(|l| Some((l, field_summary(l)?))).collect::<Vec<_>>();
    let mut sections = vec![("latency", "Latency"), ("throughput", "Throughput")];
    if !field.is_empty() {
        sections.push(("field", "Field workload"));
    }
    sections.push(("comparison", "Against the baseline"));
    let body = html! {
        p {
            "Verdict: "
            span class={ "verdict " (verdict.as_str()) } id="verdict" { (verdict.as_str().to_uppercase()) }
        } "\n"
        (nav(&sections))
        (facts(r))
        @if !r.problems.is_empty() || !r.findings.is_empty() {
            h2 id="problems" { "Problems and findings" } "\n"
            ul {
                @for p in &r.problems { li { (p) } }
                @for f in &r.findings {
                    li {
                        b { (f.kind.to_string()) } " (" (format!("{:?}", f.severity).to_lowercase()) "): " (f.message)
                    }
                }
            } "\n"
        }
        (latency_section(r, requests))
        (throughput_section(r))
        @if !field.is_empty() { (field_section(r, &field, requests)) }
        (comparison_section(r))
        p.muted { "Written by gauntlet " (r.gauntlet_version) " from " code { "bench.json" } "." } "\n"
    };
    document(&format!("gauntlet bench: {}", r.profile), body)
}

fn facts(r: &BenchRecord) -> Markup {
    let w = &r.workload;
    let model = r.identity.model().map_or("(not recorded: identity of an older shape)".to_owned(), |m| m.name.clone());
    let mode = match w.rate {
        Some(rate) => format!("open loop: Poisson arrivals at {rate} req/s (seed {})", w.seed.unwrap_or(1)),
        None => "closed loop: each batch released at once".into(),
    };
    let workload = match &w.field {
        Some(FieldWorkload::Trace { path, format, block_size, speed, rows, span_ms, .. }) => format!(
            "trace replay of {path} ({format}, {rows} rows over {:.1} s, {block_size} tokens per hash id) at {speed}× \
             its recorded times, {} max tokens",
            *span_ms as f64 / 1e3,
            w.max_tokens
        ),
        Some(FieldWorkload::Conversations { source, path, conversations, turns, .. }) => format!(
            "{conversations} {source} conversation(s){} at once, at most {turns} turn(s) each, every turn carrying \
             the conversation so far; {} max tokens",
            path.as_deref().map_or(String::new(), |p| format!(" from {p}")),
            w.max_tokens
        ),
        None => format!(
            "concurrency {:?}, {} max tokens, {} warm-up and {} measured batch(es) each; {mode}{}",
            w.concurrency,
            w.max_tokens,
            w.warmups,
            w.repetitions,
            w.response_format.as_ref().map_or(String::new(), |f| format!(
                "; structured output: every request sends the JSON schema {}",
                f["json_schema"]["name"].as_str().map_or("(unnamed)".to_owned(), |n| format!("`{n}`"))
            ))
        ),
    };
    let facts = [
        ("Model", model),
        ("Workload", workload),
        ("Baseline", r.baseline.clone().unwrap_or_else(|| "none (this record is a candidate)".into())),
        ("Started", r.started_at.clone()),
        ("Identity", r.identity_digest.clone()),
    ];
    html! {
        dl {
            @for (k, v) in &facts { dt { (k) } dd id=(k.to_lowercase()) { (v) } }
            @if let Some(c) = &r.confirmation {
                dt { "Confirmation" }
                dd { "re-run " code { (c.record) } " said " (c.verdict) "; what stands: " (c.stands) }
            }
        } "\n"
    }
}

fn latency_section(r: &BenchRecord, requests: Requests) -> Markup {
    let mut series: [Vec<Series>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    for l in &r.levels {
        let (values, failed) = latencies(l, r.workload.max_tokens, requests);
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
    let charts = titles.iter().zip(&series).map(|(title, s)| {
        let svg = line_chart(&format!("{title}: cumulative distribution"), "milliseconds", "fraction ≤ x", s);
        chart(svg, || format!("no {title} to draw: no request succeeded"))
    });
    html! { h2 id="latency" { "Latency per concurrency" } "\n" @for c in charts { (c) } }
}

fn throughput_section(r: &BenchRecord) -> Markup {
    let now: Vec<(f64, f64)> =
        r.levels.iter().filter_map(|l| Some((l.concurrency as f64, l.pooled(Metric::OutputThroughput)?))).collect();
    let base: Vec<(f64, f64)> = r
        .levels
        .iter()
        .filter_map(|l| {
            let c = l.comparison(Metric::OutputThroughput)?;
            Some((l.concurrency as f64, c.baseline_mean))
        })
        .collect();
    let mut tput = vec![("this bench (pooled)".to_owned(), now)];
    if !base.is_empty() {
        tput.push(("baseline (batch mean)".to_owned(), base));
    }
    let svg = line_chart("output throughput against concurrency", "concurrency", "tokens/s", &tput);
    let columns = crate::run::bench_report::table_columns();
    let shown = |m: Metric, l: &Level| l.pooled(m).map_or("—".to_owned(), |x| num(x * m.unit().shown_factor()));
    html! {
        h2 id="throughput" { "Throughput against concurrency" } "\n"
        (chart(svg, || "no throughput to draw: no level measured".into()))
        table {
            tr {
                th { "Concurrency" } th { "Requests" } th { "Failed" }
                @for m in &columns { th { (capitalized(&m.column())) } }
                th { "Most in flight" }
            } "\n"
            @for l in &r.levels {
                tr {
                    td { (l.concurrency) }
                    td { (l.requests()) }
                    td { (l.failed()) }
                    @for m in &columns { td { (shown(*m, l)) } }
                    td { (l.tally_or_fold().in_flight_max) }
                } "\n"
            }
        } "\n"
        @if r.levels.iter().any(|l| l.structured.is_some()) {
            h3 { "Structured output" } "\n"
            ul {
                @for l in &r.levels {
                    @if let Some(line) = super::bench_report::structured_line(l) {
                        li id={ "structured-c" (l.concurrency) } { "c" (l.concurrency) ": " (line) }
                    }
                }
            } "\n"
        }
    }
}

/// "Output tok/s": a column heading as a table's first word is written.
fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or(String::new(), |first| first.to_uppercase().chain(chars).collect())
}

/// A field level's summary (`metrics.field`), when it has one that reads.
fn field_summary(level: &Level) -> Option<FieldSummary> {
    serde_json::from_value(level.metrics.get("field")?.clone()).ok()
}

/// Per turn, the prompt tokens the level's requests reported and those the workload shares with what was sent
/// before them (what a prefix cache that kept everything would reuse).
fn expected_by_turn(level: &Level, requests: Requests) -> BTreeMap<u32, (u64, u64)> {
    let mut out = BTreeMap::new();
    requests(level, &mut |r| {
        if let (Some(turn), Some(prompt), Some(expected)) = (r.turn, r.prompt_tokens, r.expected_cached) {
            let e: &mut (u64, u64) = out.entry(turn).or_default();
            e.0 = e.0.saturating_add(prompt);
            e.1 = e.1.saturating_add(expected);
        }
    });
    out
}

fn rate(part: u64, whole: u64) -> Option<f64> {
    (whole > 0).then(|| part as f64 / whole as f64)
}

/// The field workload's own numbers per level: the replay's lateness, the prefix cache's measured against
/// expected hit rate, per-turn TTFT and tokens, and the notes a reader should see; `bench.md` says the same in text.
fn field_section(r: &BenchRecord, field: &[(&Level, FieldSummary)], requests: Requests) -> Markup {
    let ms = |x: Option<f64>| x.map_or("—".to_owned(), |x| format!("{:.1}", x * 1e3));
    let pct = |x: Option<f64>| x.map_or("—".to_owned(), |x| format!("{:.1} %", x * 100.0));
    let mut ttft = Vec::new();
    let mut hits = Vec::new();
    let mut late = Vec::new();
    for (l, s) in field {
        let points: Vec<(f64, f64)> =
            s.turns.iter().filter_map(|t| Some((f64::from(t.turn) + 1.0, t.ttft_mean? * 1e3))).collect();
        ttft.push((format!("c{} TTFT mean", l.concurrency), points));
        let measured = s
            .turns
            .iter()
            .filter_map(|t| Some((f64::from(t.turn) + 1.0, rate(t.cached_tokens, t.prompt_tokens)? * 100.0)));
        hits.push((format!("c{} measured", l.concurrency), measured.collect()));
        let expected = expected_by_turn(l, requests)
            .into_iter()
            .filter_map(|(turn, (p, e))| Some((f64::from(turn) + 1.0, rate(e, p)? * 100.0)));
        hits.push((format!("c{} expected", l.concurrency), expected.collect()));
        // Read like the latencies, in bounded memory: a long trace's curve comes from buckets.
        let mut lateness = Values::default();
        requests(l, &mut |q| {
            if let Some(x) = q.lateness {
                lateness.push(x * 1e3);
            }
        });
        if !lateness.is_empty() {
            let points = match lateness.exact() {
                Some(all) => cdf(all.to_vec()),
                None => lateness.bucket_cdf(CDF_POINTS),
            };
            late.push((format!("c{}: {} requests", l.concurrency, lateness.len()), points));
        }
    }
    let conversations = matches!(r.workload.field, Some(FieldWorkload::Conversations { .. }));
    let trace = matches!(r.workload.field, Some(FieldWorkload::Trace { .. }));
    html! {
        h2 id="field" { "Field workload" } "\n"
        @for (l, s) in field {
            @let expected = expected_by_turn(l, requests);
            h3 { "Concurrency " (l.concurrency) } "\n"
            dl {
                dt { "Prefixes" } dd { (if s.prefix.is_empty() { "not stated" } else { s.prefix.as_str() }) }
                @if let Some(x) = &s.lateness {
                    dt { "Lateness" }
                    dd id={ "lateness-c" (l.concurrency) } {
                        "sent behind the trace's schedule: p50 " (ms(Some(x.p50))) " ms, p99 " (ms(Some(x.p99)))
                        " ms, max " (ms(Some(x.max))) " ms; " (x.late) " of " (x.requests) " over "
                        (ms(Some(x.limit))) " ms"
                    }
                }
                @if let Some(c) = &s.cache {
                    dt { "Prefix cache" }
                    dd id={ "cache-c" (l.concurrency) } {
                        "measured " (pct(c.measured_rate)) " (" (c.cached_tokens) " of " (c.prompt_tokens)
                        " prompt tokens, " (c.reported) " of " (c.answered) " answers reporting), expected "
                        (pct(c.expected_rate)) "; cache block "
                        @match c.block {
                            Some(b) => { (b) " token(s), " (c.block_source) }
                            None => "unknown",
                        }
                    }
                }
            } "\n"
            @if !s.turns.is_empty() {
                table {
                    tr {
                        th { "Turn" } th { "Requests" } th { "TTFT mean ms" } th { "TTFT p50 ms" }
                        th { "Prompt tokens" } th { "Cached tokens" } th { "Hit rate measured" }
                        th { "Hit rate expected" }
                    } "\n"
                    @for t in &s.turns {
                        tr id={ "turn-c" (l.concurrency) "-" (t.turn + 1) } {
                            td { (t.turn + 1) } td { (t.requests) } td { (ms(t.ttft_mean)) } td { (ms(t.ttft_p50)) }
                            td { (t.prompt_tokens) } td { (t.cached_tokens) }
                            td { (pct(rate(t.cached_tokens, t.prompt_tokens))) }
                            td { (pct(expected.get(&t.turn).and_then(|(p, e)| rate(*e, *p)))) }
                        } "\n"
                    }
                } "\n"
            }
            @if !s.notes.is_empty() { ul { @for n in &s.notes { li { (n) } } } "\n" }
        }
        @if conversations {
            (chart(line_chart("time to first token per turn", "turn", "milliseconds", &ttft), || {
                "no per-turn TTFT to draw: no turn was answered".into()
            }))
            (chart(line_chart(HIT_RATE, "turn", "% of prompt tokens", &hits), || {
                "no hit rate to draw: no answer said how many prompt tokens were cached".into()
            }))
        }
        @if trace {
            (chart(line_chart(LATENESS, "milliseconds", "fraction ≤ x", &late), || {
                "no lateness to draw: the record has no request's lateness".into()
            }))
        }
    }
}

const HIT_RATE: &str = "prefix-cache hit rate per turn: measured against expected";
const LATENESS: &str = "lateness: how far behind the trace's schedule each request was sent";

fn comparison_section(r: &BenchRecord) -> Markup {
    let title = html! { h2 id="comparison" { "Against the baseline" } "\n" };
    let compared: Vec<_> =
        r.levels.iter().flat_map(|l| l.comparisons.iter().map(move |c| (l.concurrency, c))).collect();
    if compared.is_empty() {
        return html! { (title) (none("no baseline bench of this identity was given: nothing compared")) };
    }
    let rows: Vec<(String, f64, f64, f64)> = compared
        .iter()
        .map(|(conc, c)| (format!("c{conc} {} ({})", c.metric, c.call), c.interval.0, c.change, c.interval.1))
        .collect();
    let svg = interval_chart("relative change against the baseline, with its interval", "change (%)", &rows, 100.0);
    let pct = |x: f64| format!("{:+.1}", x * 100.0);
    html! {
        (title)
        @if let Some(svg) = svg { (PreEscaped(svg)) }
        @if let Some(d) = crate::run::bench_report::deciding_line(r) { p { (d) "." } }
        table {
            tr {
                th { "Concurrency" } th { "Metric" } th { "Baseline → now" } th { "Change (interval)" } th { "p" }
                th { "MDE" } th { "Call" } th { "Why" }
            } "\n"
            @for &(conc, c) in &compared {
                tr {
                    td { (conc) } td { (c.metric) " (" (c.better) " is better)" }
                    td { (num(c.baseline_mean)) " → " (num(c.mean)) }
                    td { (pct(c.change)) " % (" (pct(c.interval.0)) " … " (pct(c.interval.1)) " %)" }
                    td { (c.p_value.map_or("n/a".into(), |p| format!("{p:.3}"))) }
                    td { (crate::run::bench_report::mde_text(c)) }
                    td class=(c.call) { (c.call) @if !c.deciding { " (reported, not deciding)" } }
                    td { (c.why) }
                } "\n"
            }
        } "\n"
        @if compared.iter().any(|(_, c)| c.mde.is_none()) {
            p.muted { "This record states no minimum detectable effect." } "\n"
        } @else {
            p.muted {
                "MDE: the smallest true change each comparison would catch 80 % of the time (two-sided, 5 %), at \
                 the spread within the two sessions and between sessions."
            } "\n"
        }
    }
}
