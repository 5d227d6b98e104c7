//! `server_metrics` in `run.json` (from version 8) and `bench.json` (from version 7): what the server's own
//! Prometheus counters say the run or bench cost it, scraped before the first request and after the last. Every
//! name, label and error text here is the server's (untrusted, bounded when it was recorded).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The two scrapes of one server around a run or a bench, and what changed between them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerMetrics {
    /// The path asked (`/metrics`), under the server's base URL.
    pub path: String,
    pub before: Scrape,
    pub after: Scrape,
    /// Counters, and histograms' and summaries' `_sum` and `_count`, per series (name and labels), in name order;
    /// only when both scrapes succeeded. A series the first scrape lacked counted from 0.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub counters: Vec<CounterDelta>,
    /// Gauges (and untyped samples) as the last scrape saw them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gauges: Vec<GaugeValue>,
    /// The kind's key metrics under common names (`requests_finished`, `generated_tokens` …), each summed over
    /// its series' labels: what the reports show.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key: Vec<KeyDelta>,
    /// Series left out past the cap on kept series.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_series: u64,
    /// Series whose value, or change, or key metric whose sum, is not a finite number (`NaN`, `+Inf`, `-Inf`: legal
    /// Prometheus, or a change past the largest `f64`): kept here with the marker instead of in the lists above,
    /// whose numbers are all finite (a JSON number cannot hold them). Added in run.json 9 and bench.json 9.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub non_finite: Vec<NonFinite>,
}

/// One value that is not a finite number, by the marker that stands for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NonFinite {
    /// The series name (a counter, a gauge) or the key metric's common name.
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Which number: `before` or `after` (a scrape's value), `delta` (a counter's change), `sum` (a key metric).
    pub field: String,
    /// [`marker`] of the value.
    pub value: String,
}

/// The marker written for a number that is not finite: `NaN`, `+Inf` or `-Inf` (Prometheus' spellings); a finite
/// number is written as it is.
pub fn marker(x: f64) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x == f64::INFINITY {
        "+Inf".into()
    } else if x == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        x.to_string()
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// One scrape: whether it succeeded, how many samples it held, or why it failed (a note, never a failed run).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Scrape {
    pub ok: bool,
    #[serde(default)]
    pub samples: u64,
    /// Seconds the scrape took.
    #[serde(default)]
    pub seconds: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterDelta {
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Absent: the series first appeared after the first scrape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<f64>,
    pub after: f64,
    pub delta: f64,
    /// The counter went down (the server restarted it): `delta` is then `after`, as Prometheus counts a reset.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reset: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GaugeValue {
    pub name: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    pub after: f64,
}

/// One key metric: its common name, the server's series it was read from, and the change over the run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KeyDelta {
    /// `requests_finished`, `prompt_tokens`, `generated_tokens`, `prefix_cache_hits`, `prefix_cache_queries`,
    /// `preemptions`, `queue_seconds`, `queued_requests`.
    pub name: String,
    pub series: String,
    pub delta: f64,
}
