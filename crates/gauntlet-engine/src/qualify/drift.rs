//! R6: health and resource drift. A monitor samples the server through every stage (its process group's resident
//! memory, the health endpoint's latency, its GPU memory where the probe can tell); the verdict compares the median
//! of an early window with the median of the last window. The verdict is a pure function of the samples, so `verify`
//! recomputes it from `resource-monitor.jsonl` and demands the stored one be equal.

use serde::{Deserialize, Serialize};

/// One monitor reading. `t` is seconds since the qualification started (a monotonic clock); `at` the wall clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub t: f64,
    pub at: String,
    /// Summed VmRSS of the server's process group; None when it could not be read (attached server, no /proc).
    pub rss_bytes: Option<u64>,
    pub health_ok: bool,
    pub health_seconds: Option<f64>,
    #[serde(default)]
    pub gpu_memory_bytes: Option<u64>,
    #[serde(default)]
    pub error: Option<String>,
}

// The limits are set in the manifest; re-exported so that callers keep their path.
pub use crate::manifest::DriftLimits as Limits;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Drift {
    pub status: String,
    pub sample_count: usize,
    pub limits: Limits,
    pub rss_growth_mib: Option<f64>,
    pub health_latency_growth: Option<f64>,
    pub gpu_memory_growth_mib: Option<f64>,
    pub early_health_seconds: Option<f64>,
    pub late_health_seconds: Option<f64>,
    pub failures: Vec<String>,
}

/// Early (samples `[w, 2w)`) and late (the last `w`) window medians of one series; None when a value is missing.
fn windows(samples: &[Sample], w: usize, value: impl Fn(&Sample) -> Option<f64>) -> Option<(f64, f64)> {
    let early: Option<Vec<f64>> = samples[w..2 * w].iter().map(&value).collect();
    let late: Option<Vec<f64>> = samples[samples.len() - w..].iter().map(&value).collect();
    let median = |v: Vec<f64>| crate::bench::stats::percentile(&v, 0.5);
    Some((median(early?)?, median(late?)?))
}

pub fn evaluate(samples: &[Sample], limits: &Limits) -> Drift {
    let mut failures = Vec::new();
    let w = limits.window.max(1);
    let mut drift = Drift {
        status: String::new(),
        sample_count: samples.len(),
        limits: limits.clone(),
        rss_growth_mib: None,
        health_latency_growth: None,
        gpu_memory_growth_mib: None,
        early_health_seconds: None,
        late_health_seconds: None,
        failures: Vec::new(),
    };
    // Checked: the window is a number from a bundle when `verify` recomputes this.
    if samples.len() < w.saturating_mul(3) {
        failures.push(format!(
            "{} monitor sample(s); at least {} (three windows of {w}) are needed to compare early with late",
            samples.len(),
            w.saturating_mul(3)
        ));
    } else {
        let unhealthy = samples.iter().filter(|s| !s.health_ok).count();
        if unhealthy > 0 {
            let first = samples.iter().find(|s| !s.health_ok).expect("counted");
            failures.push(format!(
                "{unhealthy} health probe(s) failed, the first at {:.1}s: {}",
                first.t,
                first.error.as_deref().unwrap_or("not healthy")
            ));
        }
        let mib = |b: Option<u64>| b.map(|b| b as f64 / (1024.0 * 1024.0));
        match windows(samples, w, |s| mib(s.rss_bytes)) {
            Some((early, late)) => {
                let growth = late - early;
                drift.rss_growth_mib = Some(growth);
                if growth > limits.max_rss_growth_mib {
                    failures.push(format!(
                        "server RSS grew {growth:.1} MiB (early median {early:.1} → late {late:.1}); limit {} MiB",
                        limits.max_rss_growth_mib
                    ));
                }
            }
            None if limits.require_rss => failures.push("RSS samples are missing in a window".into()),
            None => {}
        }
        match windows(samples, w, |s| s.health_seconds) {
            Some((early, _)) if early <= 0.0 => failures.push("the early health-latency window is not positive".into()),
            Some((early, late)) => {
                let growth = (late - early) / early;
                drift.early_health_seconds = Some(early);
                drift.late_health_seconds = Some(late);
                drift.health_latency_growth = Some(growth);
                if growth > limits.max_health_latency_growth && late - early > limits.health_latency_slack_seconds {
                    failures.push(format!(
                        "health latency grew {:.0}% (early median {:.1} ms → late {:.1} ms); limit {:.0}% and {:.0} ms",
                        growth * 100.0,
                        early * 1e3,
                        late * 1e3,
                        limits.max_health_latency_growth * 100.0,
                        limits.health_latency_slack_seconds * 1e3
                    ));
                }
            }
            None => failures.push("health-latency samples are missing in a window".into()),
        }
        if let Some((early, late)) = windows(samples, w, |s| mib(s.gpu_memory_bytes)) {
            let growth = late - early;
            drift.gpu_memory_growth_mib = Some(growth);
            if let Some(limit) = limits.max_gpu_memory_growth_mib
                && growth > limit
            {
                failures.push(format!("GPU memory grew {growth:.1} MiB; limit {limit} MiB"));
            }
        }
    }
    drift.status = if failures.is_empty() { "pass" } else { "fail" }.into();
    drift.failures = failures;
    drift
}

/// A line of `resource-monitor.jsonl` that is not a sample; `line` counts from 1.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {source}")]
pub struct SampleLineError {
    pub line: usize,
    pub source: serde_json::Error,
}

/// Reads `resource-monitor.jsonl`; a line that does not parse is an error (evidence is never skipped silently).
pub fn read_samples(text: &str) -> Result<Vec<Sample>, SampleLineError> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| serde_json::from_str(l).map_err(|source| SampleLineError { line: i + 1, source }))
        .collect()
}

/// Summed VmRSS (bytes) of every process in the group `pgid`; None when none could be read.
pub fn group_rss_bytes(pgid: i32) -> Option<u64> {
    let mut total = None;
    for pid in crate::server::group_members(pgid) {
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { continue };
        let kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<u64>().ok());
        if let Some(kib) = kib {
            total = Some(total.unwrap_or(0) + kib * 1024);
        }
    }
    total
}

#[cfg(test)]
mod read_tests {
    use super::*;

    #[test]
    fn a_line_that_is_no_sample_is_refused_with_its_number() {
        let good =
            r#"{"t": 0.5, "at": "2026-01-01T00:00:00Z", "rss_bytes": null, "health_ok": true, "health_seconds": 0.01}"#;
        assert!(read_samples(&format!("{good}\n\n")).is_ok_and(|s| s.len() == 1));
        let e = read_samples(&format!("{good}\n\n{{\"t\": \"soon\"}}\n")).unwrap_err();
        assert!(matches!(e, SampleLineError { line: 3, .. }), "{e:?}");
        assert!(e.to_string().starts_with("line 3: "), "{e}");
    }
}
