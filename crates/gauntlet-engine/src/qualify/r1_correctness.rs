//! R1, correctness: the suite's cases asked one at a time, and the rule `verify` recomputes from their records.
//! Never judges a case itself: the suite's checks do.

use gauntlet_schema::CaseStatus;
use serde_json::json;

use super::Outcome;
use crate::client::Client;
use crate::manifest::Profile;

pub(super) async fn correctness(client: &Client, profile: &Profile) -> Outcome {
    let cases = ask_suite(client, profile).await;
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
pub(super) async fn ask_suite(client: &Client, profile: &Profile) -> Vec<gauntlet_schema::CaseRecord> {
    let mut cases: Vec<gauntlet_schema::CaseRecord> = Vec::new();
    for case in &profile.suite.cases {
        let mut record = crate::run::new_case_record(case, profile);
        let source = crate::run::repeat_source(case, &cases, profile);
        let deadline = tokio::time::Instant::now().into_std() + profile.request_timeout;
        let _ = crate::run::answer_case(client, case, &mut record, source, deadline).await;
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
