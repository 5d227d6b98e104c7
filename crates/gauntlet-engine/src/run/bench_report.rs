//! What `gauntlet bench` writes beside `bench.json`: `bench.md` for a person, and `bench.bmf.json` in bencher's
//! metric format (BMF) for tracking the numbers over time in bencher or any tool that reads it, and `bench.csv`
//! (`bench --format csv`) for a spreadsheet, written by the `csv` crate (RFC 4180's quoting and CRLF rows from a
//! typed row, rather than cells joined by hand) with the spreadsheet-formula defusing kept here.

use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use gauntlet_schema::bench::{BenchRecord, Level, MetricComparison};
use gauntlet_schema::{Metric, ReceiveClock};

/// The smallest and largest per-batch sample of a sampled metric, in its shown unit.
fn sample_bounds(level: &Level, metric: Metric) -> Option<(f64, f64)> {
    let samples = level.samples_of(metric).filter(|_| metric.sampled())?;
    let factor = metric.unit().export_factor();
    let lo = samples.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((lo * factor, hi * factor))
}

/// `{"<profile>/concurrency-<c>": {"<measure>": {"value", "lower_value", "upper_value"}}}`: the value pooled over
/// every measured batch, bounded by the smallest and largest per-batch sample where the metric is sampled.
pub fn bencher(r: &BenchRecord) -> Value {
    let mut out = Map::new();
    for level in &r.levels {
        let mut measures = Map::new();
        for metric in Metric::BENCH.iter().copied() {
            let Some(value) = level.pooled(metric) else { continue };
            let mut m = json!({"value": value * metric.unit().export_factor()});
            if let Some((lo, hi)) = sample_bounds(level, metric) {
                m["lower_value"] = json!(lo);
                m["upper_value"] = json!(hi);
            }
            measures.insert(metric.slug(), m);
        }
        out.insert(format!("{}/concurrency-{}", r.profile, level.concurrency), Value::Object(measures));
    }
    Value::Object(out)
}

/// One compared metric at one concurrency: "baseline → now (change, interval, p, MDE, call): why", and for the
/// decode metric of a record since version 11, the clock that timed it ("decode: server clock (llama.cpp
/// timings)").
pub fn comparison_line(concurrency: usize, c: &MetricComparison) -> String {
    format!(
        "c{concurrency} {} ({} is better{}): {:.4} → {:.4} ({:+.1} %, interval {:+.1} … {:+.1} %, p {}, {}, {}): {}",
        c.metric,
        c.better,
        c.clock.as_ref().map_or(String::new(), |k| format!("; decode: {k}")),
        c.baseline_mean,
        c.mean,
        c.change * 100.0,
        c.interval.0 * 100.0,
        c.interval.1 * 100.0,
        c.p_value.map_or("n/a".into(), |p| format!("{p:.3}")),
        mde_text(c),
        c.call,
        c.why
    ) + if c.deciding { "" } else { " [reported, not deciding]" }
}

/// "deciding metrics: tpot_mean, e2el_mean (the default for a decode-heavy workload …)": what a comparison with a
/// baseline rests its verdict on. `None` without a baseline, or for a record before version 15.
pub fn deciding_line(r: &gauntlet_schema::bench::BenchRecord) -> Option<String> {
    let d = r.deciding.as_ref()?;
    Some(format!("deciding metrics: {} ({}); the others are reported", d.metrics.join(", "), d.why))
}

/// "MDE 12.3 % (between-session spread ±10.0 %, default)": the smallest change the comparison could have seen. A
/// measured spread names both sides: "±1.2 % / ±0.8 %, measured over 3 + 3 sub-sessions".
pub fn mde_text(c: &MetricComparison) -> String {
    let spread = c.between_session.as_ref().map_or(String::new(), |b| match (&b.baseline_side, &b.candidate_side) {
        (Some(base), Some(own)) if b.source == "measured" => format!(
            " (between-session spread ±{:.1} % / ±{:.1} %, measured over {} + {} sub-sessions)",
            base.spread * 100.0,
            own.spread * 100.0,
            base.sub_sessions,
            own.sub_sessions
        ),
        _ => {
            let from = if b.source == "history" { format!("{} sessions", b.sessions) } else { "default".into() };
            format!(" (between-session spread ±{:.1} %, {from})", b.spread * 100.0)
        }
    });
    match c.mde {
        Some(m) => format!("MDE {:.1} %{spread}", m * 100.0),
        None => "MDE not stated".into(),
    }
}

/// "own between-session spread over 3 sub-sessions (4, 4, 4 batches): tpot_mean ±0.4 %, …": what a level measured
/// of its own spread, which a later comparison with this record as its baseline counts. `None` for a level without
/// sub-sessions (too few batches, or a record before version 10).
pub fn spread_line(level: &Level) -> Option<String> {
    let sub = level.sub_sessions.as_ref()?;
    let spreads: Vec<String> = sub
        .means
        .keys()
        .filter_map(|name| {
            let side = crate::bench::stats::Side::of_level(level, name)?;
            Some(format!("{name} ±{:.1} %", side.spread * 100.0))
        })
        .collect();
    if spreads.is_empty() {
        return None;
    }
    let batches: Vec<String> = sub.batches.iter().map(u64::to_string).collect();
    Some(format!(
        "own between-session spread over {} sub-sessions ({} batches): {}",
        sub.batches.len(),
        batches.join(", "),
        spreads.join(", ")
    ))
}

/// "goodput 3.20 req/s of 4.00 (TTFT ≤ 200 ms, TPOT ≤ 50 ms)": the requests per second that met every limit of the
/// workload's SLO, beside all completed requests per second; `None` without an SLO.
pub fn goodput_line(w: &gauntlet_schema::bench::Workload, level: &Level) -> Option<String> {
    let slo = w.slo.as_ref()?;
    let goodput = level.pooled(Metric::Goodput)?;
    let limits: Vec<String> = [("TTFT", slo.ttft), ("TPOT", slo.tpot), ("E2EL", slo.e2el)]
        .iter()
        .filter_map(|(name, s)| s.map(|s| format!("{name} ≤ {:.0} ms", s * 1e3)))
        .collect();
    Some(format!(
        "goodput {goodput:.2} req/s of {:.2} ({})",
        level.metrics["request_throughput_wall"].as_f64().filter(|x| x.is_finite()).unwrap_or(0.0),
        limits.join(", ")
    ))
}

/// A structured-output level's correctness in words: how many answers kept to the schema of how many judged, and
/// the requests that could not be judged (they failed).
pub fn structured_line(level: &Level) -> Option<String> {
    let s = level.structured.as_ref()?;
    let rate = s.rate.map_or("no rate: no answer to judge".to_owned(), |r| format!("rate {:.1} %", r * 100.0));
    Some(format!(
        "structured output: {} of {} answers kept to the schema ({rate}); {} of {} requests not judged (failed)",
        s.valid,
        s.judged,
        s.requests.saturating_sub(s.judged),
        s.requests
    ))
}

/// The columns of `bench.csv`.
pub const CSV_HEADER: &[&str] = &[
    "profile",
    "concurrency",
    "metric",
    "value",
    "lower_value",
    "upper_value",
    "baseline_mean",
    "mean",
    "change",
    "interval_low",
    "interval_high",
    "p_value",
    "mde",
    "between_session_spread",
    "between_session_source",
    "call",
];

/// `bench --format csv`: one row per concurrency and measure (the measures of `bench.bmf.json`, in their units),
/// with the comparison's numbers where the measure was compared (relative changes as fractions). RFC 4180, by the
/// `csv` crate's writer: every row ends in CRLF, a cell holding a comma, quote or line break is quoted with its
/// quotes doubled. A cell a spreadsheet would read as a formula (starting with `=`, `+`, `-`, `@`, tab or CR) gets
/// a leading `'`, and control characters become U+FFFD ([`defuse`]: ours, the crate quotes but does not defuse).
pub fn csv(r: &BenchRecord) -> String {
    const IN_MEMORY: &str = "a row of text and numbers written into memory";
    // The header from CSV_HEADER, not from the row's field names: a record without a level still has it.
    let mut out =
        csv::WriterBuilder::new().terminator(csv::Terminator::CRLF).has_headers(false).from_writer(Vec::new());
    out.write_record(CSV_HEADER.iter().map(|h| defuse(h))).expect(IN_MEMORY);
    for level in &r.levels {
        for metric in Metric::BENCH.iter().copied() {
            let Some(value) = level.pooled(metric) else { continue };
            let factor = metric.unit().export_factor();
            let bounds = sample_bounds(level, metric);
            let c = level.comparison(metric).filter(|_| metric.sampled());
            let row = CsvRow {
                profile: Cell(r.profile.clone()),
                concurrency: level.concurrency,
                metric: Cell(metric.slug()),
                value: Num(Some(value * factor)),
                lower_value: Num(bounds.map(|b| b.0)),
                upper_value: Num(bounds.map(|b| b.1)),
                baseline_mean: Num(c.map(|c| c.baseline_mean * factor)),
                mean: Num(c.map(|c| c.mean * factor)),
                change: Num(c.map(|c| c.change)),
                interval_low: Num(c.map(|c| c.interval.0)),
                interval_high: Num(c.map(|c| c.interval.1)),
                p_value: Num(c.and_then(|c| c.p_value)),
                mde: Num(c.and_then(|c| c.mde)),
                between_session_spread: Num(c.and_then(|c| c.between_session.as_ref().map(|b| b.spread))),
                between_session_source: Cell(
                    c.and_then(|c| c.between_session.as_ref().map(|b| b.source.clone())).unwrap_or_default(),
                ),
                call: Cell(c.map_or(String::new(), |c| c.call.to_string())),
            };
            out.serialize(row).expect(IN_MEMORY);
        }
    }
    String::from_utf8(out.into_inner().expect(IN_MEMORY)).expect("every cell is UTF-8 text")
}

/// One row of `bench.csv`, its fields in [`CSV_HEADER`]'s order.
#[derive(serde::Serialize)]
struct CsvRow {
    profile: Cell,
    concurrency: usize,
    metric: Cell,
    value: Num,
    lower_value: Num,
    upper_value: Num,
    baseline_mean: Num,
    mean: Num,
    change: Num,
    interval_low: Num,
    interval_high: Num,
    p_value: Num,
    mde: Num,
    between_session_spread: Num,
    between_session_source: Cell,
    call: Cell,
}

/// Text from a record, [`defuse`]d as it is written.
struct Cell(String);

impl serde::Serialize for Cell {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&defuse(&self.0))
    }
}

/// A number as Rust prints it (`{}`: the shortest text that reads back the same, never an exponent); an empty
/// cell when missing or not finite.
struct Num(Option<f64>);

impl serde::Serialize for Num {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text = self.0.filter(|x| x.is_finite()).map_or(String::new(), |x| format!("{x}"));
        s.serialize_str(&defuse(&text))
    }
}

/// A cell as a spreadsheet may read it: tabs and control characters as U+FFFD, and text it would evaluate as a
/// formula behind a leading `'`. The quoting is the writer's.
fn defuse(text: &str) -> String {
    let mut cell: String =
        text.chars().map(|ch| if ch == '\t' || crate::util::clean::is_hostile(ch) { '\u{fffd}' } else { ch }).collect();
    // A negative number stays a number; any other text a spreadsheet would evaluate is defused.
    let is_number = cell.parse::<f64>().is_ok();
    if !is_number && cell.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        cell.insert(0, '\'');
    }
    cell
}

/// The metrics a report's table shows, one column each: every bench metric, latencies first, then rates
/// ([`Metric::section`]).
pub fn table_columns() -> Vec<Metric> {
    let mut columns = Metric::BENCH.to_vec();
    columns.sort_by_key(|m| m.section());
    columns
}

/// `bench.md`: the verdict, the workload, one row per concurrency, and a line per compared metric
/// "baseline → now (change, interval, call)".
pub fn markdown(r: &BenchRecord) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "# gauntlet bench: {} — {}\n", r.profile, r.verdict.as_str().to_uppercase());
    let w = &r.workload;
    let _ = writeln!(
        md,
        "- Workload: concurrency {:?}, {} max tokens, {} warm-up and {} measured batch(es) per concurrency, \
         temperature 0, {}",
        w.concurrency,
        w.max_tokens,
        w.warmups,
        w.repetitions,
        match w.rate {
            Some(rate) => format!(
                "open loop (each batch's requests arrive as a Poisson process at {rate} req/s, seed {})",
                w.seed.unwrap_or(1)
            ),
            None => "closed loop (each batch released at once)".into(),
        }
    );
    if let Some(f) = &w.response_format {
        let name = f["json_schema"]["name"].as_str().map_or("(unnamed)".to_owned(), |n| format!("`{n}`"));
        let _ = writeln!(
            md,
            "- Structured output: every request sends the JSON schema {name}; each answer is judged against it"
        );
    }
    let _ = writeln!(md, "- Identity: `{}` · gauntlet {}", r.identity_digest, r.gauntlet_version);
    let clocks: std::collections::BTreeSet<ReceiveClock> =
        r.levels.iter().flat_map(|l| l.tally_or_fold().receive_clocks).collect();
    let arrival = match clocks.iter().copied().collect::<Vec<_>>()[..] {
        [] => None,
        [ReceiveClock::Kernel] => {
            Some("the kernel's receive stamp of every read: the client's own load is not in them")
        }
        [ReceiveClock::Client] => {
            Some("when the client's reads returned (HTTPS, or no kernel stamps): its own load can be in them")
        }
        _ => Some("the kernel's receive stamps for some reads, when the client's reads returned for others"),
    };
    if let Some(arrival) = arrival {
        let _ = writeln!(md, "- Arrival times: {arrival}");
    }
    let _ =
        writeln!(md, "- Baseline: {}\n", r.baseline.as_deref().map_or("none (candidate)".into(), |b| format!("`{b}`")));
    let columns = table_columns();
    let headings: String = columns.iter().map(|m| format!(" {} |", m.column())).collect();
    let _ = writeln!(md, "| concurrency | requests | failed |{headings} in flight |");
    let _ = writeln!(md, "|---:|---:|---:|{}---:|", "---:|".repeat(columns.len()));
    for l in &r.levels {
        let cells: String = columns.iter().map(|m| format!(" {} |", m.show(l.pooled(*m)))).collect();
        let _ = writeln!(
            md,
            "| {} | {} | {} |{cells} {} |",
            l.concurrency,
            l.requests(),
            l.failed(),
            l.tally_or_fold().in_flight_max
        );
    }
    for l in &r.levels {
        if let Some(g) = goodput_line(w, l) {
            let _ = writeln!(md, "\n- c{}: {g}", l.concurrency);
        }
        if let Some(s) = spread_line(l) {
            let _ = writeln!(md, "\n- c{}: {s}", l.concurrency);
        }
        if let Some(s) = structured_line(l) {
            let _ = writeln!(md, "\n- c{}: {s}", l.concurrency);
        }
    }
    let comparisons: Vec<_> =
        r.levels.iter().flat_map(|l| l.comparisons.iter().map(move |c| (l.concurrency, c))).collect();
    if !comparisons.is_empty() {
        let _ = writeln!(md, "\n## Against the baseline\n");
        if let Some(d) = deciding_line(r) {
            let _ = writeln!(md, "{d}.\n");
        }
        for (conc, c) in comparisons {
            let _ = writeln!(md, "- {}", comparison_line(conc, c));
        }
    }
    for l in &r.levels {
        md.push_str(&crate::bench::field::markdown(l));
    }
    if let Some(m) = &r.server_metrics {
        md.push_str(&crate::report::markdown::server_metrics(m, "bench (warm-ups included)"));
    }
    if !r.problems.is_empty() {
        let _ = writeln!(md, "\n## Problems\n");
        for p in &r.problems {
            let _ = writeln!(md, "- {p}");
        }
    }
    let _ = writeln!(
        md,
        "\nMetric names and conventions follow vLLM and AIPerf (`definitions` in `bench.json`); `bench.bmf.json` \
         has the same numbers in bencher's metric format."
    );
    md
}
