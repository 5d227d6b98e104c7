//! R1, correctness: the suite's cases asked one at a time, and the rule `verify` recomputes from their records.
//! Never judges a case itself: the suite's checks do.

use std::time::Instant;

use gauntlet_schema::CaseStatus;
use serde_json::json;

use super::Outcome;
use crate::client::Client;
use crate::manifest::Profile;
use crate::session::{BusyPatience, Threads};

pub(super) async fn correctness(client: &Client, profile: &Profile, threads: Threads<'_>, limit: Instant) -> Outcome {
    let cases = ask_suite(client, profile, threads, limit).await;
    let failures = correctness_failures(&cases, &profile.thresholds.expected_failures);
    let passed = cases.iter().filter(|c| c.status == CaseStatus::Pass).count();
    let summary = format!(
        "{passed}/{} cases pass ({} declared expected failures)",
        cases.len(),
        profile.thresholds.expected_failures.len()
    );
    Outcome::judged(failures, summary, json!({"cases": cases}))
}

/// Every case of the suite asked once, one at a time, as the gate asks it (R3's losslessness step asks so too).
/// A request past its timeout is waited on while the server's `threads` work ([`BusyPatience`]), never past `limit`
/// (the stage's end, where the stage's own timeout takes over).
pub(super) async fn ask_suite(
    client: &Client,
    profile: &Profile,
    threads: Threads<'_>,
    limit: Instant,
) -> Vec<gauntlet_schema::CaseRecord> {
    let mut cases: Vec<gauntlet_schema::CaseRecord> = Vec::new();
    for case in &profile.suite.cases {
        let mut record = crate::run::new_case_record(case, profile);
        let source = crate::run::repeat_source(case, &cases, profile);
        let deadline = Instant::now() + profile.request_timeout;
        let mut patience = BusyPatience::new(threads, profile.request_timeout, limit);
        if crate::run::answer_case(client, case, &mut record, source, deadline, &mut patience).await.is_err()
            && let Some(line) = patience.describe()
        {
            record.error = record.error.map(|e| format!("{e}; {line}"));
        }
        cases.push(record);
    }
    cases
}

/// R1's rule (recomputed by `verify`): every case answers; every case not declared an expected failure passes.
pub(crate) fn correctness_failures(cases: &[gauntlet_schema::CaseRecord], expected: &[String]) -> Vec<String> {
    let mut failures = Vec::new();
    for c in cases {
        match c.status {
            CaseStatus::Pass => {}
            CaseStatus::Fail if expected.contains(&c.id) => {}
            CaseStatus::Fail => {
                let detail = c.checks.iter().find(|k| !k.passed).map(|k| format!("{}: {}", k.check, k.detail));
                failures.push(format!("case `{}` failed ({})", c.id, detail.unwrap_or_default()));
            }
            CaseStatus::Error => {
                failures.push(format!("case `{}`: {}", c.id, c.error.as_deref().unwrap_or("request failed")))
            }
            CaseStatus::Skipped => failures.push(format!("case `{}` was not asked", c.id)),
        }
    }
    if cases.is_empty() {
        failures.push("the suite has no cases: no evidence".into());
    }
    failures
}
