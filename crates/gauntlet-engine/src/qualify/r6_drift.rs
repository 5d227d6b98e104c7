//! R6, resource drift: the monitor's samples, the kernel log's findings and how the server stopped, judged after
//! the server is down (the drift rule itself is `drift::evaluate`, which `verify` recomputes).

use std::path::Path;

use gauntlet_schema::Severity;
use serde_json::json;

use super::{MONITOR_FILE, Outcome, drift};
use crate::manifest::Profile;

pub(super) fn resource_drift(
    dir: &Path,
    profile: &Profile,
    samples_taken: usize,
    sentry: &gauntlet_schema::SentryRecord,
    sentry_findings: &[gauntlet_schema::Finding],
    stop: Option<gauntlet_schema::StopOutcome>,
) -> Outcome {
    let text =
        crate::util::bounded::read_text(&dir.join(MONITOR_FILE), crate::util::bounded::RECORD_CAP).unwrap_or_default();
    let mut failures = Vec::new();
    let samples = match drift::read_samples(&text) {
        Ok(s) => s,
        Err(e) => {
            failures.push(format!("{MONITOR_FILE}: {e}"));
            Vec::new()
        }
    };
    if samples.len() != samples_taken {
        failures.push(format!("{MONITOR_FILE} holds {} samples, the monitor took {samples_taken}", samples.len()));
    }
    let d = drift::evaluate(&samples, &profile.qualify.monitor);
    failures.extend(d.failures.iter().cloned());
    for f in sentry_findings.iter().filter(|f| f.severity == Severity::Fail) {
        failures.push(format!("kernel log: {}", f.message));
    }
    if let Some(s) = stop
        && s != gauntlet_schema::StopOutcome::Terminated
    {
        failures.push(format!("server stop: {s}"));
    }
    let summary = format!(
        "{} samples; RSS growth {}; health latency growth {}",
        d.sample_count,
        d.rss_growth_mib.map_or("n/a".into(), |g| format!("{g:.1} MiB")),
        d.health_latency_growth.map_or("n/a".into(), |g| format!("{:.0}%", g * 100.0)),
    );
    Outcome::judged(
        failures,
        summary,
        json!({"drift": d, "sentry": sentry, "kernel_findings": sentry_findings, "stop": stop}),
    )
}
