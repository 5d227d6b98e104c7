//! The server's own Prometheus counters around a run or a bench: one scrape before the first measured request and
//! one after the last ([`MetricsProbe`], held by the session, so the gate, `bench` and the paired bench share it),
//! then the change per series ([`compare`]) and the kinds' key metrics under common names.
//!
//! The body is untrusted text: at most [`MAX_BODY`] bytes, read within [`SCRAPE_TIMEOUT`], at most
//! [`MAX_SERIES`] series kept, names and labels cleaned and cut. A scrape that fails in any way (no answer, a
//! status, too large, not Prometheus text) is recorded with its reason and never fails the run.
//!
//! Parser: `prom_text_format_parser` (MIT/Apache-2.0, `forbid(unsafe_code)`). `prometheus-parse`, the most used
//! crate, matches names with `\w+` and so skips every `vllm:`, `sglang:` and `llamacpp:` series (their names
//! hold colons); `openmetrics-parser` is LGPL-3.0. This one takes the full name grammar, types histogram
//! `_sum`/`_count`, returns an error rather than panicking (its one `unwrap`, `Float::as_f64`, is not called
//! here: values are parsed below), and survived 200 000 mutated inputs. It has had one release (0.1.0); a
//! parse error makes the whole scrape a note, so a parser gap costs a record, never a run.
//!
//! `NaN`, `+Inf` and `-Inf` are legal values, and a change between two large values can overflow: no JSON number
//! holds these, so such a series never reaches the record's numbers; it is a marker in `non_finite` and the record
//! carries a `non-finite-value` note ([`non_finite_finding`]). Everything a record keeps here reads back.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use gauntlet_schema::server_metrics::{CounterDelta, GaugeValue, KeyDelta, NonFinite, Scrape, ServerMetrics, marker};
use prom_text_format_parser::{ScrapeParseError, Type, ValueType};

use crate::client::Client;

/// The largest body read (vLLM's, with every histogram bucket of a few models, is some hundreds of KiB).
pub const MAX_BODY: usize = 4 << 20;
/// Series kept per scrape; the rest are counted in `dropped_series`.
pub const MAX_SERIES: usize = 2000;
/// One scrape, the body included.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(3);
const MAX_LABELS: usize = 16;
const MAX_CHARS: usize = 200;

/// A series: its name and labels.
type Key = (String, BTreeMap<String, String>);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Role {
    /// Only goes up: a counter, a histogram's or summary's `_sum` and `_count`.
    Counter,
    /// Any value: a gauge, an untyped sample.
    Gauge,
}

/// Why a scrape gave no snapshot; recorded as words in the record's `error`, and never fails the run.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// The parser refused the body; `first` is its first complaint, cleaned.
    #[error("not Prometheus text: {first}")]
    NotPrometheus { first: String },
    /// A sample's value is not a number (cleaned).
    #[error("`{value}`: not a number")]
    NotANumber { value: String },
    /// The GET failed (no answer, a status, too large). Its words are cleaned and redacted, as they reach reports.
    #[error("{}", said(.0))]
    Request(#[source] crate::client::ClientError),
}

/// A failed request's words as a record keeps them: control characters dropped, cut, secrets redacted.
fn said(e: &crate::client::ClientError) -> String {
    crate::util::redact::text(&clean(&e.to_string())).into_owned()
}

/// One parsed scrape.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    series: BTreeMap<Key, (Role, f64)>,
    samples: u64,
    dropped: u64,
}

/// Prometheus text → the series kept. Buckets and quantiles are left out (their `_sum` and `_count` say enough
/// for a delta); a value that is not a number is an error like any other malformed line.
pub fn parse(text: &str) -> Result<Snapshot, MetricsError> {
    let (metrics, error) = prom_text_format_parser::parse_scrape(text);
    if let Some(e) = error {
        let first = match e {
            ScrapeParseError::Parse(text) => text.lines().next().unwrap_or("").to_owned(),
            ScrapeParseError::Collect(errors) => {
                errors.first().map(|m| format!("line {}: {}", m.line_no.start + 1, m.error)).unwrap_or_default()
            }
        };
        return Err(MetricsError::NotPrometheus { first: clean(&first) });
    }
    let mut snap = Snapshot::default();
    for m in metrics {
        for s in &m.samples {
            snap.samples += 1;
            let (role, suffix) = match (m.kind, s.value.value_type) {
                (Type::Counter, _) => (Role::Counter, ""),
                (Type::Histogram | Type::Summary, ValueType::Sum) => (Role::Counter, "_sum"),
                (Type::Histogram | Type::Summary, ValueType::Count) => (Role::Counter, "_count"),
                (Type::Histogram | Type::Summary, ValueType::Sample) => continue,
                (Type::Gauge | Type::Untyped, _) => (Role::Gauge, ""),
            };
            let raw = s.value.value.as_str();
            let value: f64 = raw.parse().map_err(|_| MetricsError::NotANumber { value: clean(raw) })?;
            if snap.series.len() >= MAX_SERIES {
                snap.dropped += 1;
                continue;
            }
            let labels = s.labels.iter().take(MAX_LABELS).map(|l| (clean(&l.key), clean(&l.value))).collect();
            snap.series.insert((clean(&format!("{}{suffix}", m.name)), labels), (role, value));
        }
    }
    Ok(snap)
}

/// GET `path` and parse it: the snapshot, or why not; and the seconds it took.
pub async fn scrape(client: &Client, path: &str) -> (Result<Snapshot, MetricsError>, f64) {
    let at = Instant::now();
    let got = match client.get_text(path, SCRAPE_TIMEOUT, MAX_BODY).await {
        Ok(body) => parse(&body),
        Err(e) => Err(MetricsError::Request(e)),
    };
    (got, at.elapsed().as_secs_f64())
}

fn outcome(got: &Result<Snapshot, MetricsError>, seconds: f64) -> Scrape {
    match got {
        Ok(s) => Scrape { ok: true, samples: s.samples, seconds, error: None },
        Err(e) => Scrape { ok: false, samples: 0, seconds, error: Some(e.to_string()) },
    }
}

/// The record of two scrapes: per series the change (counters) or the last value (gauges), and the key metrics
/// of every kind whose series are there (the names carry the engine's prefix, so they never clash).
pub fn compare(
    path: &str,
    before: (Result<Snapshot, MetricsError>, f64),
    after: (Result<Snapshot, MetricsError>, f64),
) -> ServerMetrics {
    let mut out = ServerMetrics {
        path: path.to_owned(),
        before: outcome(&before.0, before.1),
        after: outcome(&after.0, after.1),
        ..Default::default()
    };
    let (Ok(b), Ok(a)) = (before.0, after.0) else { return out };
    out.dropped_series = a.dropped.max(b.dropped);
    // Every counter's change, finite or not, for the key metrics' sums.
    let mut deltas: Vec<(String, f64)> = Vec::new();
    for ((name, labels), (role, value)) in a.series {
        // A value that is not a finite number (or a change that is not) goes to `non_finite` with its marker: the
        // lists hold only numbers that JSON holds, so the record reads back (#32).
        let odd = |field: &str, x: f64| NonFinite {
            name: name.clone(),
            labels: labels.clone(),
            field: field.into(),
            value: marker(x),
        };
        match role {
            Role::Counter => {
                let old = b.series.get(&(name.clone(), labels.clone())).map(|(_, v)| *v);
                let reset = old.is_some_and(|o| value < o);
                let delta = if reset { value } else { value - old.unwrap_or(0.0) };
                deltas.push((name.clone(), delta));
                let bad: Vec<NonFinite> = [("before", old.unwrap_or(0.0)), ("after", value), ("delta", delta)]
                    .into_iter()
                    .filter(|(_, x)| !x.is_finite())
                    .map(|(field, x)| odd(field, x))
                    .collect();
                if bad.is_empty() {
                    out.counters.push(CounterDelta { name, labels, before: old, after: value, delta, reset });
                } else {
                    out.non_finite.extend(bad);
                }
            }
            Role::Gauge if value.is_finite() => out.gauges.push(GaugeValue { name, labels, after: value }),
            Role::Gauge => out.non_finite.push(odd("after", value)),
        }
    }
    for common in crate::kinds::KEY_METRICS {
        for kind in crate::kinds::KINDS {
            for (_, series) in kind.key_metrics.iter().filter(|(c, _)| c == common) {
                let matching: Vec<f64> = deltas.iter().filter(|(n, _)| n == series).map(|(_, d)| *d).collect();
                let sum: f64 = matching.iter().sum();
                if !sum.is_finite() {
                    let name = (*common).to_owned();
                    out.non_finite.push(NonFinite {
                        name,
                        labels: BTreeMap::new(),
                        field: "sum".into(),
                        value: marker(sum),
                    });
                } else if !matching.is_empty() {
                    out.key.push(KeyDelta { name: (*common).to_owned(), series: (*series).to_owned(), delta: sum });
                }
            }
        }
    }
    out
}

/// The note a record carries when some of the server's numbers were not finite (kept as markers in
/// `server_metrics.non_finite`); None when every number was.
pub fn non_finite_finding(m: &ServerMetrics) -> Option<gauntlet_schema::Finding> {
    let first = m.non_finite.first()?;
    let what = if first.labels.is_empty() {
        format!("{} {} = {}", first.name, first.field, first.value)
    } else {
        let labels: Vec<String> = first.labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
        format!("{}{{{}}} {} = {}", first.name, labels.join(","), first.field, first.value)
    };
    Some(gauntlet_schema::Finding {
        kind: gauntlet_schema::FindingKind::NonFiniteValue,
        severity: gauntlet_schema::Severity::Info,
        message: format!(
            "{} server metric value(s) not a finite number, kept as markers in server_metrics.non_finite and left \
             out of the deltas (first: {what})",
            m.non_finite.len()
        ),
        case: None,
    })
}

/// The scrape before a run, kept until the one after it.
pub struct MetricsProbe {
    path: String,
    before: Option<(Result<Snapshot, MetricsError>, f64)>,
}

impl MetricsProbe {
    pub fn new(path: &str) -> MetricsProbe {
        MetricsProbe { path: path.to_owned(), before: None }
    }

    pub async fn before(&mut self, client: &Client) {
        self.before = Some(scrape(client, &self.path).await);
    }

    /// The record, once a scrape before was taken; None otherwise (the server never loaded).
    pub async fn after(&mut self, client: &Client) -> Option<ServerMetrics> {
        let before = self.before.take()?;
        let after = scrape(client, &self.path).await;
        Some(compare(&self.path, before, after))
    }
}

/// At most [`MAX_CHARS`] characters, control characters dropped: names, labels and errors reach reports.
fn clean(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(MAX_CHARS).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "# TYPE vllm:prompt_tokens_total counter\n\
        vllm:prompt_tokens_total{model_name=\"m\"} 10\n\
        # TYPE vllm:request_success_total counter\n\
        vllm:request_success_total{finished_reason=\"stop\",model_name=\"m\"} 1\n\
        # TYPE vllm:num_requests_running gauge\n\
        vllm:num_requests_running{model_name=\"m\"} 0\n\
        # TYPE vllm:request_queue_time_seconds histogram\n\
        vllm:request_queue_time_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 1\n\
        vllm:request_queue_time_seconds_sum{model_name=\"m\"} 0.25\n\
        vllm:request_queue_time_seconds_count{model_name=\"m\"} 1\n";

    fn after() -> String {
        // A family's samples stay together: the new `length` series goes right after its sibling.
        BEFORE
            .replace("} 10\n", "} 30\n")
            .replace("0.25", "0.75")
            .replace("_count{model_name=\"m\"} 1", "_count{model_name=\"m\"} 3")
            .replace(
                "model_name=\"m\"} 1\n# TYPE vllm:num",
                "model_name=\"m\"} 1\nvllm:request_success_total{finished_reason=\"length\",model_name=\"m\"} 2\n# TYPE vllm:num",
            )
    }

    #[test]
    fn deltas_per_series_and_key_metrics() {
        let m = compare("/metrics", (parse(BEFORE), 0.0), (parse(&after()), 0.0));
        assert!(m.before.ok && m.after.ok, "{m:?}");
        let d = |name: &str| m.counters.iter().filter(|c| c.name == name).map(|c| c.delta).sum::<f64>();
        assert_eq!(d("vllm:prompt_tokens_total"), 20.0);
        assert_eq!(d("vllm:request_queue_time_seconds_sum"), 0.5);
        assert_eq!(d("vllm:request_queue_time_seconds_count"), 2.0);
        // A series that appeared after the first scrape counts from 0.
        let length = m.counters.iter().find(|c| c.labels.get("finished_reason").map(String::as_str) == Some("length"));
        assert_eq!(length.map(|c| (c.before, c.delta)), Some((None, 2.0)));
        assert!(m.counters.iter().all(|c| !c.name.ends_with("_bucket")));
        assert_eq!(m.gauges.len(), 1);
        let key: Vec<_> = m.key.iter().map(|k| (k.name.as_str(), k.delta)).collect();
        assert_eq!(key, vec![("requests_finished", 2.0), ("prompt_tokens", 20.0), ("queue_seconds", 0.5)]);
    }

    #[test]
    fn a_reset_counter_counts_from_zero() {
        let m = compare("/metrics", (parse(&after()), 0.0), (parse(BEFORE), 0.0));
        let c = m.counters.iter().find(|c| c.name == "vllm:prompt_tokens_total").unwrap();
        assert!(c.reset && c.delta == 10.0, "{c:?}");
    }

    #[test]
    fn malformed_text_and_failed_scrapes_are_notes() {
        assert!(parse("<html>not metrics</html>").unwrap_err().to_string().starts_with("not Prometheus text"));
        assert!(parse("# TYPE x counter\nx abc\n").is_err());
        let status =
            crate::client::ClientError::Status { status: 404, url: "http://h/metrics".into(), body: String::new() };
        let m = compare("/metrics", (Err(MetricsError::Request(status)), 0.1), (parse(BEFORE), 0.0));
        assert!(!m.before.ok && m.after.ok && m.counters.is_empty() && m.key.is_empty(), "{m:?}");
        assert!(m.before.error.as_deref().is_some_and(|e| e.contains("404")), "{m:?}");
    }

    /// A body the parser refuses, a value that is no number and a failed request are each their variant, and the
    /// record keeps the words it kept before (the request's cleaned).
    #[test]
    fn a_scrape_without_a_snapshot_is_the_variant_of_why() {
        let e = parse("<html>not metrics</html>").unwrap_err();
        assert!(matches!(&e, MetricsError::NotPrometheus { first } if !first.is_empty()), "{e:?}");
        let MetricsError::NotPrometheus { first } = &e else { unreachable!() };
        assert_eq!(e.to_string(), format!("not Prometheus text: {first}"));
        // The parser refuses a value that is no number itself; `NotANumber` is the guard behind it.
        assert!(matches!(parse("# TYPE x counter\nx abc\n"), Err(MetricsError::NotPrometheus { .. })));
        let e = MetricsError::NotANumber { value: clean("ab\u{7}c") };
        assert_eq!(e.to_string(), "`abc`: not a number");
        let status = crate::client::ClientError::Status {
            status: 500,
            url: "http://h/metrics".into(),
            body: "line\u{1b}[31m one".into(),
        };
        let e = MetricsError::Request(status.clone());
        assert!(matches!(&e, MetricsError::Request(crate::client::ClientError::Status { status: 500, .. })), "{e:?}");
        assert_eq!(e.to_string(), clean(&status.to_string()));
        assert!(!e.to_string().contains('\u{1b}'));
        assert!(std::error::Error::source(&e).is_some());
    }

    #[test]
    fn series_names_and_counts_are_bounded() {
        let mut text = String::from("# TYPE c counter\n");
        for i in 0..MAX_SERIES + 10 {
            text.push_str(&format!("c{{i=\"{i}\",x=\"{}\"}} 1\n", "v".repeat(500)));
        }
        let s = parse(&text).unwrap();
        assert_eq!((s.series.len(), s.dropped), (MAX_SERIES, 10));
        assert!(s.series.keys().all(|(_, l)| l["x"].chars().count() == MAX_CHARS));
    }

    #[test]
    fn mutated_input_never_panics() {
        let text = after();
        let bytes = text.as_bytes();
        let mut seed = 7u64;
        for _ in 0..5000 {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let mut b = bytes.to_vec();
            for k in 0..4 {
                let i = ((seed >> (8 * k)) as usize) % b.len();
                b[i] = (seed >> (16 + k * 8)) as u8 & 0x7f;
            }
            b.truncate(((seed >> 40) as usize % b.len()).max(1));
            let _ = parse(&String::from_utf8_lossy(&b));
        }
    }
}
