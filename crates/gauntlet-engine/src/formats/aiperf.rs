//! AIPerf's `profile_export.jsonl` (`aiperf profile`'s per-request records, one JSON object a line): each record's
//! `metadata` (`request_start_ns`, `request_end_ns` as epoch nanoseconds, `benchmark_phase`, `was_cancelled`, …),
//! its `metrics` (a name → `{value, unit}` map; `value` a number, or a list for `inter_chunk_latency`) and its
//! `error` (`null`, or `{code, type, message}` for a failed request). The run's totals are not in the file: they
//! are computed here from the records as AIPerf defines them (duration = last response end − first request start
//! over the successful records; throughputs divide by it), and each latency's mean and percentiles from the
//! requests' values.
//!
//! The file is untrusted: read through the bounded reader (the record cap), at most [`RECORDS_MAX`] records, every
//! value used checked (finite, non-negative, a known unit), every error naming the file and the line. The
//! distributions are folded in bounded memory (`bench::summary::Values`, the bench's own): exact up to its limit,
//! then percentiles within its stated relative error. Unknown metrics and keys are ignored (AIPerf adds metrics
//! release by release); records of a phase other than `profiling` (a warm-up) are counted and left out.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use gauntlet_schema::bench::{BenchRecord, Level};

use super::{LevelError, Row};
use crate::bench::summary::{Distribution, HIGHEST, Values};
use crate::util::bounded::ReadError;

/// The most a profile export may weigh (a record carries every chunk gap of its request: the record cap).
pub const CAP: u64 = crate::util::bounded::RECORD_CAP;
/// Records read at most (a line past them is an error, not silently dropped).
pub const RECORDS_MAX: usize = 1_000_000;

/// The latency metrics read, in the order they are shown: AIPerf's name, gauntlet's metric of the same definition
/// (the bench's `definitions`), and the label.
pub const LATENCIES: &[(&str, &str, &str)] = &[
    ("time_to_first_token", "ttft", "time to first token"),
    // AIPerf's ITL is (request latency − TTFT) / (output tokens − 1): gauntlet's (and vLLM's) TPOT.
    ("inter_token_latency", "tpot", "time per output token (excl. first)"),
    // AIPerf's ICL is every gap between streamed chunks: gauntlet's `itl_chunk`.
    ("inter_chunk_latency", "itl_chunk", "inter-token latency (per chunk)"),
    ("request_latency", "e2el", "end-to-end latency"),
];

/// What a profile export says, summed up.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileExport {
    /// Records of the profiling phase: `completed` (no `error`) and `failed`.
    pub completed: u64,
    pub failed: u64,
    /// Failed records that say they were cancelled (`was_cancelled`).
    pub cancelled: u64,
    /// Records of another phase (a warm-up), not counted.
    pub other_phase: u64,
    /// Last response end − first request start over the completed records, seconds (absent: none completed).
    pub duration_s: Option<f64>,
    /// Sum of the completed records' `output_sequence_length` (absent: a record lacked it).
    pub output_tokens: Option<u64>,
    /// The most profiling-phase requests in flight at once (from their start and end times).
    pub peak_in_flight: usize,
    /// Per gauntlet metric (`ttft`, `tpot`, `itl_chunk`, `e2el`): the distribution, in seconds.
    pub latencies: BTreeMap<&'static str, Distribution>,
}

impl ProfileExport {
    pub fn request_throughput(&self) -> Option<f64> {
        self.duration_s.filter(|d| *d > 0.0).map(|d| self.completed as f64 / d)
    }

    pub fn output_throughput(&self) -> Option<f64> {
        let d = self.duration_s.filter(|d| *d > 0.0)?;
        self.output_tokens.map(|n| n as f64 / d)
    }
}

/// Why a profile export was refused; every variant names the file (`origin`), and a record's its line.
#[derive(Debug, thiserror::Error)]
pub enum AiperfError {
    #[error("{origin}: {source}")]
    Read { origin: String, source: ReadError },
    #[error("{origin}: line {line}: more than {max} records")]
    TooManyRecords { origin: String, line: usize, max: usize },
    #[error("{origin}: line {line}: {source}")]
    Record { origin: String, line: usize, source: RecordError },
    #[error("{origin}: not an AIPerf profile export: no record")]
    NoRecord { origin: String },
}

/// What is wrong with one record (one line) of a profile export. `key` is the dotted path of the field at fault;
/// `found` a value as an error shows it ([`short`]).
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("not JSON ({0})")]
    Json(#[source] serde_json::Error),
    #[error("not a JSON object")]
    NotAnObject,
    #[error("no `metadata` (not an AIPerf per-request record)")]
    NoMetadata,
    #[error("no `metrics` in a record without an error")]
    NoMetrics,
    #[error("`{key}` is missing")]
    Missing { key: String },
    #[error("`{key}` must be {expected}, found {found}")]
    Invalid { key: String, expected: &'static str, found: String },
    #[error("`{key}` {unit}: expected {expected}")]
    Unit { key: String, unit: String, expected: &'static str },
    #[error("`metadata.request_end_ns` {end_ns} is before `request_start_ns` {start_ns}")]
    EndBeforeStart { start_ns: u64, end_ns: u64 },
    #[error("`{key}` {value} {unit} is more than a day: not a request's time")]
    OverADay { key: String, value: String, unit: String },
}

fn invalid(key: impl Into<String>, expected: &'static str, found: String) -> RecordError {
    RecordError::Invalid { key: key.into(), expected, found }
}

/// A value as an error message shows it: at most 40 characters, no control character.
fn short(v: &Value) -> String {
    let s = v.to_string();
    let mut out: String = s.chars().take(40).map(|c| if c.is_control() { '?' } else { c }).collect();
    if s.chars().count() > 40 {
        out.push('…');
    }
    out
}

/// Seconds per unit of a time metric (AIPerf writes milliseconds; the others are accepted as what they say).
fn seconds_per(unit: &str) -> Option<f64> {
    match unit {
        "ns" => Some(1e-9),
        "us" | "µs" => Some(1e-6),
        "ms" => Some(1e-3),
        "s" | "sec" => Some(1.0),
        _ => None,
    }
}

fn number(v: &Value, key: &str) -> Result<f64, RecordError> {
    match v.as_f64() {
        Some(x) if v.is_number() && x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(invalid(key, "a finite non-negative number", short(v))),
    }
}

/// One metric's `{value, unit}`, its values in seconds (a time metric) or as they are (`tokens`).
fn metric(metrics: &Map<String, Value>, name: &str, time: bool) -> Result<Option<Vec<f64>>, RecordError> {
    let Some(m) = metrics.get(name) else { return Ok(None) };
    let Value::Object(m) = m else {
        return Err(invalid(format!("metrics.{name}"), "an object of `value` and `unit`", short(m)));
    };
    let unit = match m.get("unit") {
        Some(Value::String(u)) => u.as_str(),
        other => {
            return Err(invalid(format!("metrics.{name}.unit"), "a string", other.map_or("nothing".into(), short)));
        }
    };
    let unit_error = |expected| RecordError::Unit {
        key: format!("metrics.{name}.unit"),
        unit: short(&Value::String(unit.to_owned())),
        expected,
    };
    let scale = if time {
        seconds_per(unit).ok_or_else(|| unit_error("ns, us, ms or s"))?
    } else if unit == "tokens" {
        1.0
    } else {
        return Err(unit_error("tokens"));
    };
    let what = format!("metrics.{name}.value");
    // A time is at most a day: no benchmark request lasts longer, and a bound keeps every sum, mean and millisecond
    // figure made from the values finite (1e308 s is a finite number whose mean or value in ms is not).
    let checked = |x: &Value, at: String| match number(x, &at)? {
        v if time && v * scale > HIGHEST => {
            Err(RecordError::OverADay { key: at, value: short(x), unit: unit.to_owned() })
        }
        v => Ok(v),
    };
    let values = match m.get("value") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Array(a)) => {
            a.iter().enumerate().map(|(i, x)| checked(x, format!("{what}[{i}]"))).collect::<Result<Vec<_>, _>>()?
        }
        Some(x) => vec![checked(x, what)?],
    };
    Ok(Some(values.into_iter().map(|x| x * scale).collect()))
}

fn nanoseconds(metadata: &Map<String, Value>, key: &str) -> Result<u64, RecordError> {
    match metadata.get(key) {
        Some(v) => v.as_u64().ok_or_else(|| invalid(format!("metadata.{key}"), "a whole number of ns", short(v))),
        None => Err(RecordError::Missing { key: format!("metadata.{key}") }),
    }
}

/// One record read: its phase and times, and for a completed one its metrics.
struct Read {
    profiling: bool,
    start_ns: u64,
    end_ns: u64,
    failed: bool,
    cancelled: bool,
    /// Per [`LATENCIES`] entry, its values in seconds.
    latencies: [Option<Vec<f64>>; LATENCIES.len()],
    output_tokens: Option<u64>,
}

fn record(line: &str) -> Result<Read, RecordError> {
    let v: Value = serde_json::from_str(line).map_err(RecordError::Json)?;
    let Value::Object(o) = v else { return Err(RecordError::NotAnObject) };
    let metadata = match o.get("metadata") {
        Some(Value::Object(m)) => m,
        Some(x) => return Err(invalid("metadata", "an object", short(x))),
        None => return Err(RecordError::NoMetadata),
    };
    let start_ns = nanoseconds(metadata, "request_start_ns")?;
    let end_ns = nanoseconds(metadata, "request_end_ns")?;
    if end_ns < start_ns {
        return Err(RecordError::EndBeforeStart { start_ns, end_ns });
    }
    let profiling = match metadata.get("benchmark_phase") {
        None | Some(Value::Null) => true,
        Some(Value::String(p)) => p == "profiling",
        Some(x) => return Err(invalid("metadata.benchmark_phase", "a string", short(x))),
    };
    let cancelled = match metadata.get("was_cancelled") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(x) => return Err(invalid("metadata.was_cancelled", "true or false", short(x))),
    };
    let failed = match o.get("error") {
        None | Some(Value::Null) => false,
        Some(Value::Object(_)) => true,
        Some(x) => return Err(invalid("error", "null or an object", short(x))),
    };
    let mut read =
        Read { profiling, start_ns, end_ns, failed, cancelled, latencies: Default::default(), output_tokens: None };
    if failed {
        return Ok(read);
    }
    let metrics = match o.get("metrics") {
        Some(Value::Object(m)) => m,
        Some(x) => return Err(invalid("metrics", "an object", short(x))),
        None => return Err(RecordError::NoMetrics),
    };
    for (slot, (name, _, _)) in read.latencies.iter_mut().zip(LATENCIES) {
        let values = metric(metrics, name, true)?;
        if let Some(values) = &values
            && values.len() != 1
            && *name != "inter_chunk_latency"
        {
            return Err(invalid(format!("metrics.{name}.value"), "one number", format!("a list of {}", values.len())));
        }
        *slot = values;
    }
    read.output_tokens = match metric(metrics, "output_sequence_length", false)?.as_deref() {
        None => None,
        Some([n]) if n.fract() == 0.0 && *n <= (1u64 << 53) as f64 => Some(*n as u64),
        Some(other) => {
            return Err(invalid("metrics.output_sequence_length.value", "a whole number", format!("{other:?}")));
        }
    };
    Ok(read)
}

/// Parses the text of a profile export; `origin` names it in every error.
pub fn parse(text: &str, origin: &str) -> Result<ProfileExport, AiperfError> {
    let mut out = ProfileExport {
        completed: 0,
        failed: 0,
        cancelled: 0,
        other_phase: 0,
        duration_s: None,
        output_tokens: Some(0),
        peak_in_flight: 0,
        latencies: BTreeMap::new(),
    };
    let mut values: Vec<Values> = LATENCIES.iter().map(|_| Values::default()).collect();
    // (time, +1 start / −1 end) of every profiling record, for the peak in flight.
    let mut edges: Vec<(u64, i8)> = Vec::new();
    let (mut first_start, mut last_end) = (u64::MAX, 0u64);
    let mut records = 0usize;
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let n = i + 1;
        records += 1;
        if records > RECORDS_MAX {
            return Err(AiperfError::TooManyRecords { origin: origin.to_owned(), line: n, max: RECORDS_MAX });
        }
        let r = record(line).map_err(|source| AiperfError::Record { origin: origin.to_owned(), line: n, source })?;
        if !r.profiling {
            out.other_phase += 1;
            continue;
        }
        edges.push((r.start_ns, 1));
        edges.push((r.end_ns, -1));
        if r.failed {
            out.failed += 1;
            out.cancelled += u64::from(r.cancelled);
            continue;
        }
        out.completed += 1;
        first_start = first_start.min(r.start_ns);
        last_end = last_end.max(r.end_ns);
        out.output_tokens = match (out.output_tokens, r.output_tokens) {
            (Some(sum), Some(n)) => sum.checked_add(n),
            _ => None,
        };
        for (v, got) in values.iter_mut().zip(r.latencies) {
            v.extend(got.into_iter().flatten());
        }
    }
    if records == 0 {
        return Err(AiperfError::NoRecord { origin: origin.to_owned() });
    }
    if out.completed > 0 {
        out.duration_s = Some((last_end - first_start) as f64 / 1e9);
    } else {
        out.output_tokens = None;
    }
    // An end sorts before a start at the same nanosecond: a request that ended as another began did not overlap it.
    edges.sort_unstable();
    let mut now = 0i64;
    for (_, step) in edges {
        now += i64::from(step);
        out.peak_in_flight = out.peak_in_flight.max(usize::try_from(now).unwrap_or(0));
    }
    for ((_, ours, _), v) in LATENCIES.iter().zip(&values) {
        if let Some(d) = v.distribution() {
            out.latencies.insert(ours, d);
        }
    }
    Ok(out)
}

/// Reads a profile export the user named (bounded, a regular file; a symlink the user chose is followed).
pub fn read(path: &Path) -> Result<ProfileExport, AiperfError> {
    let text = crate::util::bounded::read_named_text(path, CAP)
        .map_err(|source| AiperfError::Read { origin: path.display().to_string(), source })?;
    parse(&text, &path.display().to_string())
}

/// gauntlet's level to put beside the AIPerf run: the one asked for, else the bench's only one (the export states
/// no concurrency; its peak in flight is named to help choose).
pub fn pick_level<'a>(a: &ProfileExport, r: &'a BenchRecord, asked: Option<usize>) -> Result<&'a Level, LevelError> {
    super::pick_level(r, asked, || LevelError::AiperfStatesNone {
        peak_in_flight: a.peak_in_flight,
        levels: super::concurrencies(r),
    })
}

/// The AIPerf run's numbers beside the bench level's: throughputs (both over AIPerf's duration, first request start
/// to last response end: the bench's `_span` figures), then each latency's mean, median, p90 and p99.
pub fn rows(a: &ProfileExport, level: &Level) -> Vec<Row> {
    let m = &level.metrics;
    let ours =
        |path: &[&str]| path.iter().try_fold(m, |m, k| m.get(k)).and_then(Value::as_f64).filter(|x| x.is_finite());
    let mut out = Vec::new();
    if let Some(theirs) = a.request_throughput() {
        // The bench's successful requests over its span duration (its record keeps the span, not this ratio).
        let ok = ours(&["requests"]).zip(ours(&["failed"])).map(|(n, f)| n - f);
        let gauntlet = ok.zip(ours(&["duration_span"])).filter(|(_, d)| *d > 0.0).map(|(ok, d)| ok / d);
        out.push(Row { metric: "request throughput".into(), unit: "req/s", theirs, gauntlet });
    }
    if let Some(theirs) = a.output_throughput() {
        let gauntlet = ours(&["output_throughput_span"]);
        out.push(Row { metric: "output throughput".into(), unit: "tok/s", theirs, gauntlet });
    }
    for (_, mine, name) in LATENCIES {
        let Some(d) = a.latencies.get(mine) else { continue };
        for (stat, theirs, our_stat) in
            [("mean", d.mean, "mean"), ("median", d.p50, "p50"), ("p90", d.p90, "p90"), ("p99", d.p99, "p99")]
        {
            out.push(Row {
                metric: format!("{name} {stat}"),
                unit: "ms",
                theirs: theirs * 1e3,
                gauntlet: ours(&[mine, our_stat]).map(|s| s * 1e3),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(start: u64, end: u64, ttft_ms: f64, latency_ms: f64, chunks: &str, osl: u64) -> String {
        format!(
            r#"{{"metadata": {{"request_start_ns": {start}, "request_end_ns": {end}, "benchmark_phase": "profiling"}}, "metrics": {{"time_to_first_token": {{"value": {ttft_ms}, "unit": "ms"}}, "request_latency": {{"value": {latency_ms}, "unit": "ms"}}, "inter_chunk_latency": {{"value": [{chunks}], "unit": "ms"}}, "output_sequence_length": {{"value": {osl}, "unit": "tokens"}}}}, "error": null}}"#
        )
    }

    #[test]
    fn totals_and_distributions_are_computed_from_the_records_as_aiperf_defines_them() {
        let text = [
            line(1_000_000_000, 1_100_000_000, 20.0, 100.0, "40, 40", 3),
            line(1_050_000_000, 1_250_000_000, 30.0, 200.0, "85, 85", 3),
            r#"{"metadata": {"request_start_ns": 1200000000, "request_end_ns": 1200500000, "was_cancelled": true}, "metrics": {"error_isl": {"value": 5, "unit": "tokens"}}, "error": {"code": 499, "type": "RequestCancellationError", "message": "cancelled"}}"#.into(),
            r#"{"metadata": {"request_start_ns": 1, "request_end_ns": 2, "benchmark_phase": "warmup"}, "metrics": {}, "error": null}"#.into(),
            String::new(),
        ]
        .join("\n");
        let a = parse(&text, "p.jsonl").unwrap();
        assert_eq!((a.completed, a.failed, a.cancelled, a.other_phase), (2, 1, 1, 1));
        assert_eq!(a.duration_s, Some(0.25));
        assert_eq!(a.output_tokens, Some(6));
        assert_eq!(a.request_throughput(), Some(8.0));
        assert_eq!(a.output_throughput(), Some(24.0));
        assert_eq!(a.peak_in_flight, 2);
        assert!((a.latencies["ttft"].mean - 0.025).abs() < 1e-12);
        assert!((a.latencies["itl_chunk"].p50 - 0.0625).abs() < 1e-12);
        assert_eq!(a.latencies["e2el"].max, 0.2);
        assert!(!a.latencies.contains_key("tpot"), "no record carried inter_token_latency");
    }

    #[test]
    fn errors_name_the_file_and_the_line_and_never_panic() {
        let e = |t: &str| parse(t, "p.jsonl").unwrap_err().to_string();
        assert_eq!(e(""), "p.jsonl: not an AIPerf profile export: no record");
        assert_eq!(e("\n[1]"), "p.jsonl: line 2: not a JSON object");
        assert!(e("{").starts_with("p.jsonl: line 1: not JSON ("));
        assert_eq!(e("{}"), "p.jsonl: line 1: no `metadata` (not an AIPerf per-request record)");
        let ok = line(1, 2, 1.0, 2.0, "1", 2);
        assert!(parse(&ok, "x").is_ok());
        assert_eq!(
            e(&ok.replace("\"value\": 1,", "\"value\": -1,")),
            "p.jsonl: line 1: `metrics.time_to_first_token.value` must be a finite non-negative number, found -1"
        );
        assert_eq!(
            e(&ok.replace("\"unit\": \"ms\"", "\"unit\": \"fortnights\\u001b\"")),
            "p.jsonl: line 1: `metrics.time_to_first_token.unit` \"fortnights\\u001b\": expected ns, us, ms or s"
        );
        assert_eq!(
            e(&ok.replace("[1]", "[1, \"x\"]")),
            "p.jsonl: line 1: `metrics.inter_chunk_latency.value[1]` must be a finite non-negative number, found \"x\""
        );
        assert_eq!(
            e(&ok.replace("\"request_end_ns\": 2", "\"request_end_ns\": 0")),
            "p.jsonl: line 1: `metadata.request_end_ns` 0 is before `request_start_ns` 1"
        );
        assert!(
            e(&format!("{ok}\n{}", ok.replace(": 2,", ": 2.5,")))
                .starts_with("p.jsonl: line 2: `metadata.request_end_ns` must be a whole number")
        );
        assert_eq!(
            e(&ok.replace("\"value\": 2, \"unit\": \"tokens\"", "\"value\": 2.5, \"unit\": \"tokens\"")),
            "p.jsonl: line 1: `metrics.output_sequence_length.value` must be a whole number, found [2.5]"
        );
        assert_eq!(
            e(&ok.replace("\"error\": null", "\"error\": 3")),
            "p.jsonl: line 1: `error` must be null or an object, found 3"
        );
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(e(&deep).contains("not JSON"), "deep nesting is an error, not a stack overflow");
        // A file of nothing but failures reads: no duration, no throughput, no latency.
        let failed =
            r#"{"metadata": {"request_start_ns": 5, "request_end_ns": 9}, "metrics": null, "error": {"code": 500}}"#;
        let a = parse(failed, "x").unwrap();
        assert_eq!((a.completed, a.failed, a.duration_s, a.request_throughput()), (0, 1, None, None));
    }

    /// The line and the field at fault are data a caller can match on, not only words.
    #[test]
    fn a_bad_record_is_the_record_variant_with_its_line_and_key() {
        let ok = line(1, 2, 1.0, 2.0, "1", 2);
        let bad = format!("{ok}\n\n{}", ok.replace("\"error\": null", "\"error\": 3"));
        match parse(&bad, "p.jsonl") {
            Err(AiperfError::Record { line: 3, source: RecordError::Invalid { key, .. }, .. }) => {
                assert_eq!(key, "error")
            }
            other => panic!("expected a bad `error` on line 3, got {other:?}"),
        }
        assert!(matches!(parse("\n \n", "p.jsonl"), Err(AiperfError::NoRecord { .. })));
        let back = ok.replace("\"request_end_ns\": 2", "\"request_end_ns\": 0");
        assert!(matches!(
            parse(&back, "p.jsonl"),
            Err(AiperfError::Record { source: RecordError::EndBeforeStart { start_ns: 1, end_ns: 0 }, .. })
        ));
    }

    /// Found while fuzzing `aiperf_export`: a latency of 1e308 s is a finite number, but its value in milliseconds
    /// (a `compare-bench` row) or the mean of two such is not. A time over a day is refused, naming its key.
    #[test]
    fn a_time_over_a_day_is_refused_so_every_figure_made_from_it_stays_finite() {
        let ok = line(1, 2, 1.0, 2.0, "1", 2);
        let huge = ok.replace("\"value\": 2, \"unit\": \"ms\"", "\"value\": 1e308, \"unit\": \"s\"");
        assert_eq!(
            parse(&huge, "p.jsonl").unwrap_err().to_string(),
            "p.jsonl: line 1: `metrics.request_latency.value` 1e+308 s is more than a day: not a request's time"
        );
        let gap = ok.replace("[1]", "[1, 86400001]");
        assert_eq!(
            parse(&gap, "p.jsonl").unwrap_err().to_string(),
            "p.jsonl: line 1: `metrics.inter_chunk_latency.value[1]` 86400001 ms is more than a day: not a request's \
             time"
        );
        // A day itself reads, and every row made from it is finite.
        let day = ok.replace("\"value\": 2, \"unit\": \"ms\"", "\"value\": 86400, \"unit\": \"s\"");
        let a = parse(&format!("{day}\n{day}"), "p.jsonl").unwrap();
        assert_eq!(a.latencies["e2el"].mean, 86_400.0);
        let level: Level = serde_json::from_value(serde_json::json!({
            "concurrency": 1, "batches": [], "samples": {}, "metrics": {}}))
        .unwrap();
        assert!(rows(&a, &level).iter().all(|r| r.theirs.is_finite()));
    }
}
