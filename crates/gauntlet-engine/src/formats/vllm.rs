//! vLLM's `bench serve --save-result` JSON (`benchmarks/benchmark_serving.py` before it moved into `vllm bench`):
//! one object of run totals (`completed`, `duration`, `request_throughput`, `output_throughput`, …) and, per
//! latency metric (`ttft`, `tpot`, `itl`, `e2el`), `mean_…_ms`, `median_…_ms`, `std_…_ms` and `pNN_…_ms`. The
//! per-request arrays some versions add (`ttfts`, `itls`, `generated_texts`, …) are not read.
//!
//! The file is untrusted: read through the bounded reader, every number used checked finite and non-negative,
//! every error naming the file and the key. Unknown keys are ignored: the tool adds keys release by release.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use gauntlet_schema::bench::{BenchRecord, Level};

use super::{LevelError, Row};
use crate::util::bounded::ReadError;

/// The most a save-result file may weigh (its per-request arrays can be large: the record cap).
pub const CAP: u64 = crate::util::bounded::RECORD_CAP;

/// The latency metrics of the format, in the order they are shown, with gauntlet's metric of the same meaning.
pub const LATENCIES: &[(&str, &str, &str)] = &[
    ("ttft", "ttft", "time to first token"),
    ("tpot", "tpot", "time per output token (excl. first)"),
    // vLLM's ITL is between streamed chunks as the client receives them, which is what gauntlet's `itl_chunk` is.
    ("itl", "itl_chunk", "inter-token latency (per chunk)"),
    ("e2el", "e2el", "end-to-end latency"),
];

/// What a save-result file says.
#[derive(Debug, Clone, PartialEq)]
pub struct SaveResult {
    pub backend: Option<String>,
    pub model_id: Option<String>,
    pub date: Option<String>,
    /// `--max-concurrency`; absent or `null`: unlimited.
    pub max_concurrency: Option<u64>,
    /// `--request-rate` in requests per second; `None` for `"inf"` or absent.
    pub request_rate: Option<f64>,
    pub completed: u64,
    pub duration_s: f64,
    pub request_throughput: f64,
    pub output_throughput: f64,
    pub total_input_tokens: Option<u64>,
    pub total_output_tokens: Option<u64>,
    /// `"<metric>.<stat>"` (stat: `mean`, `median`, `std`, `p99`, `p99.9`, …) → milliseconds.
    pub latencies_ms: BTreeMap<String, f64>,
}

fn text(object: &serde_json::Map<String, Value>, key: &str) -> Option<String> {
    // Shown on a terminal later: control characters never pass, and a huge value is cut.
    let s = object.get(key)?.as_str()?;
    Some(s.chars().take(200).map(|c| if c.is_control() { '\u{FFFD}' } else { c }).collect())
}

/// Why a save-result file was refused; every variant names the file (`origin`) and, where one is at fault, the key.
#[derive(Debug, thiserror::Error)]
pub enum VllmError {
    #[error("{origin}: {source}")]
    Read { origin: String, source: ReadError },
    #[error("{origin}: not a vLLM save-result file: invalid JSON ({source})")]
    Json { origin: String, source: serde_json::Error },
    #[error("{origin}: not a vLLM save-result file: expected a JSON object")]
    NotAnObject { origin: String },
    #[error("{origin}: not a vLLM save-result file: `{key}` is missing")]
    Missing { origin: String, key: &'static str },
    #[error("{origin}: `{key}` must be a number, found {found}")]
    NotANumber { origin: String, key: String, found: &'static str },
    /// Negative, or too large to be a finite `f64`.
    #[error("{origin}: `{key}` must be a finite non-negative number, found {found}")]
    OutOfRange { origin: String, key: String, found: serde_json::Number },
    #[error("{origin}: `{key}` must be a whole number, found {found}")]
    NotWhole { origin: String, key: &'static str, found: f64 },
    /// `found` is cut and its control characters replaced.
    #[error("{origin}: `request_rate` must be a number or \"inf\", found \"{found}\"")]
    BadRate { origin: String, found: String },
}

/// Parses the text of a save-result file; `origin` names it in every error.
pub fn parse(text_in: &str, origin: &str) -> Result<SaveResult, VllmError> {
    let origin_ = || origin.to_owned();
    let value: Value = serde_json::from_str(text_in).map_err(|source| VllmError::Json { origin: origin_(), source })?;
    let Value::Object(o) = value else {
        return Err(VllmError::NotAnObject { origin: origin_() });
    };
    let number = |key: &str| -> Result<Option<f64>, VllmError> {
        match o.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => match n.as_f64() {
                Some(x) if x.is_finite() && x >= 0.0 => Ok(Some(x)),
                _ => Err(VllmError::OutOfRange { origin: origin_(), key: key.to_owned(), found: n.clone() }),
            },
            Some(other) => Err(VllmError::NotANumber { origin: origin_(), key: key.to_owned(), found: kind(other) }),
        }
    };
    let required = |key: &'static str| -> Result<f64, VllmError> {
        number(key)?.ok_or_else(|| VllmError::Missing { origin: origin_(), key })
    };
    let integer = |key: &'static str| -> Result<Option<u64>, VllmError> {
        match number(key)? {
            None => Ok(None),
            Some(x) if x.fract() == 0.0 && x <= u64::MAX as f64 => Ok(Some(x as u64)),
            Some(x) => Err(VllmError::NotWhole { origin: origin_(), key, found: x }),
        }
    };
    let completed = integer("completed")?.ok_or_else(|| VllmError::Missing { origin: origin_(), key: "completed" })?;
    let request_rate = match o.get("request_rate") {
        Some(Value::String(s)) if s == "inf" => None,
        Some(Value::String(s)) => {
            let shown: String = s.chars().take(40).map(|c| if c.is_control() { '\u{FFFD}' } else { c }).collect();
            return Err(VllmError::BadRate { origin: origin_(), found: shown });
        }
        _ => number("request_rate")?,
    };
    let mut latencies_ms = BTreeMap::new();
    for (key, _) in o.iter() {
        let Some(stem) = key.strip_suffix("_ms") else { continue };
        let Some((stat, metric)) = stem.split_once('_') else { continue };
        if !LATENCIES.iter().any(|(m, _, _)| *m == metric) {
            continue;
        }
        let stat = match stat {
            "mean" | "median" | "std" => stat.to_owned(),
            p if p.len() > 1 && p.starts_with('p') && p[1..].parse::<f64>().is_ok_and(|x| x > 0.0 && x <= 100.0) => {
                p.to_owned()
            }
            _ => continue,
        };
        if let Some(ms) = number(key)? {
            latencies_ms.insert(format!("{metric}.{stat}"), ms);
        }
    }
    Ok(SaveResult {
        backend: text(&o, "backend"),
        model_id: text(&o, "model_id"),
        date: text(&o, "date"),
        max_concurrency: integer("max_concurrency")?,
        request_rate,
        completed,
        duration_s: required("duration")?,
        request_throughput: required("request_throughput")?,
        output_throughput: required("output_throughput")?,
        total_input_tokens: integer("total_input_tokens")?,
        total_output_tokens: integer("total_output_tokens")?,
        latencies_ms,
    })
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Reads a save-result file the user named (bounded, a regular file; a symlink the user chose is followed).
pub fn read(path: &Path) -> Result<SaveResult, VllmError> {
    let text = crate::util::bounded::read_named_text(path, CAP)
        .map_err(|source| VllmError::Read { origin: path.display().to_string(), source })?;
    parse(&text, &path.display().to_string())
}

/// gauntlet's level to put beside the vLLM run: the one asked for, else the one at vLLM's `max_concurrency`,
/// else the only one.
pub fn pick_level<'a>(v: &SaveResult, r: &'a BenchRecord, asked: Option<usize>) -> Result<&'a Level, LevelError> {
    let want = asked.or(v.max_concurrency.and_then(|c| usize::try_from(c).ok()));
    super::pick_level(r, want, || LevelError::VllmStatesNone { levels: super::concurrencies(r) })
}

/// The vLLM run's numbers beside the bench level's: throughputs, then each latency's mean, median, p99 (and any
/// other percentile the file holds that gauntlet also computes: p90).
pub fn rows(v: &SaveResult, level: &Level) -> Vec<Row> {
    let ours = |path: &[&str]| {
        path.iter().try_fold(&level.metrics, |m, k| m.get(k)).and_then(Value::as_f64).filter(|x| x.is_finite())
    };
    let mut out = vec![
        Row {
            metric: "request throughput".into(),
            unit: "req/s",
            theirs: v.request_throughput,
            gauntlet: ours(&["request_throughput_wall"]),
        },
        Row {
            metric: "output throughput".into(),
            unit: "tok/s",
            theirs: v.output_throughput,
            gauntlet: ours(&["output_throughput_wall"]),
        },
    ];
    for (theirs, mine, name) in LATENCIES {
        for (stat, our_stat) in [("mean", "mean"), ("median", "p50"), ("p90", "p90"), ("p99", "p99")] {
            let Some(ms) = v.latencies_ms.get(&format!("{theirs}.{stat}")) else { continue };
            out.push(Row {
                metric: format!("{name} {stat}"),
                unit: "ms",
                theirs: *ms,
                gauntlet: ours(&[mine, our_stat]).map(|s| s * 1e3),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_file_and_the_key_and_never_panic() {
        let e = |t: &str| parse(t, "run.json").unwrap_err().to_string();
        assert_eq!(e("[1]"), "run.json: not a vLLM save-result file: expected a JSON object");
        assert!(e("{").starts_with("run.json: not a vLLM save-result file: invalid JSON ("));
        assert_eq!(e("{}"), "run.json: not a vLLM save-result file: `completed` is missing");
        let base = r#"{"completed": 3, "duration": 1.5, "request_throughput": 2, "output_throughput": 9"#;
        assert!(parse(&format!("{base}}}"), "x").is_ok());
        assert_eq!(
            e(&format!("{base}, \"mean_ttft_ms\": \"fast\"}}")),
            "run.json: `mean_ttft_ms` must be a number, found a string"
        );
        assert_eq!(
            e(&format!("{base}, \"p99_itl_ms\": -1}}")),
            "run.json: `p99_itl_ms` must be a finite non-negative number, found -1"
        );
        assert_eq!(
            e(&format!("{base}, \"max_concurrency\": 1.5}}")),
            "run.json: `max_concurrency` must be a whole number, found 1.5"
        );
        assert!(e(&format!("{base}, \"request_rate\": \"fast\\u0007\"}}")).contains("found \"fast\u{FFFD}\""));
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert!(e(&deep).contains("invalid JSON"), "deep nesting is an error, not a stack overflow");
        let ok = parse(&format!("{base}, \"backend\": \"vllm\\u001b[31m\", \"request_rate\": \"inf\", \"p99.9_e2el_ms\": 4, \"median_zzz_ms\": 1}}"), "x").unwrap();
        assert_eq!(ok.backend.as_deref(), Some("vllm\u{FFFD}[31m"));
        assert_eq!(ok.request_rate, None);
        assert_eq!(ok.latencies_ms.keys().collect::<Vec<_>>(), vec!["e2el.p99.9"]);
    }

    /// A caller can tell which key was at fault and why without reading the message.
    #[test]
    fn a_missing_required_key_is_the_missing_variant_naming_it() {
        let base = r#"{"completed": 3, "request_throughput": 2, "output_throughput": 9}"#;
        assert!(matches!(parse(base, "x"), Err(VllmError::Missing { key: "duration", .. })));
        let whole = r#"{"completed": 2.5}"#;
        assert!(matches!(parse(whole, "x"), Err(VllmError::NotWhole { key: "completed", .. })));
        let absent = std::path::Path::new("/nonexistent/gauntlet/run.json");
        assert!(matches!(read(absent), Err(VllmError::Read { source: ReadError::NotFound, .. })));
    }
}
