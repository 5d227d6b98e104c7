//! R1, correctness: the suite's cases asked one at a time, and the rule `verify` recomputes from their records.
//! Never judges a case itself: the suite's checks do.

use std::cell::Cell;
use std::time::{Duration, Instant};

use gauntlet_schema::CaseStatus;
use serde_json::json;

use super::Outcome;
use crate::client::Client;
use crate::manifest::Profile;
use crate::session::{Budget, BusyPatience, Threads};

pub(super) async fn correctness(
    client: &Client,
    profile: &Profile,
    threads: Threads<'_>,
    limit: Instant,
    stage_end: &Cell<Instant>,
) -> Outcome {
    let (cases, given_back) = ask_suite(client, profile, threads, limit, Some(stage_end)).await;
    let failures = correctness_failures(&cases, &profile.thresholds.expected_failures);
    let passed = cases.iter().filter(|c| c.status == CaseStatus::Pass).count();
    let summary = format!(
        "{passed}/{} cases pass ({} declared expected failures)",
        cases.len(),
        profile.thresholds.expected_failures.len()
    ) + &if given_back.is_zero() {
        String::new()
    } else {
        format!("; {:.1}s given back for the server's waits for other processes' CPUs", given_back.as_secs_f64())
    };
    Outcome::judged(failures, summary, json!({"cases": cases, "given_back_seconds": given_back.as_secs_f64()}))
}

/// Every case of the suite asked once, one at a time, as the gate asks it (R3's losslessness step asks so too). A
/// request past its timeout is waited on while the server's `threads` work ([`BusyPatience`]), never past `limit`.
/// With `stage_end` (R1's own end, which the stage's timeout reads), the time is counted on the server's clock as
/// the gate's suite budget is ([`Budget`]): after each case, the seconds the server's threads waited for CPUs other
/// processes held move `stage_end` later, up to [`Budget::STRETCH_MAX`] times the time to `limit`. Returns the
/// cases and the seconds given back.
pub(super) async fn ask_suite(
    client: &Client,
    profile: &Profile,
    threads: Threads<'_>,
    limit: Instant,
    stage_end: Option<&Cell<Instant>>,
) -> (Vec<gauntlet_schema::CaseRecord>, Duration) {
    let mut budget = Budget::until(limit);
    let mut cases: Vec<gauntlet_schema::CaseRecord> = Vec::new();
    for case in &profile.suite.cases {
        let mut record = crate::run::new_case_record(case, profile);
        let source = crate::run::repeat_source(case, &cases, profile);
        let asked = Instant::now();
        let deadline = asked + profile.request_timeout;
        let mut patience = BusyPatience::new(threads, profile.request_timeout, budget.deadline());
        let before = stage_end.and(threads.sample());
        if crate::run::answer_case(client, case, &mut record, source, deadline, &mut patience).await.is_err()
            && let Some(line) = patience.describe()
        {
            record.error = record.error.map(|e| format!("{e}; {line}"));
        }
        let wall = asked.elapsed();
        if let (Some(end), Some(b), Some(a)) = (stage_end, before, threads.sample())
            && let Some(acc) = a.since(&b)
        {
            let secs = |ns: u64| ns as f64 / 1e9;
            let share = crate::compare::speed::contention(
                secs(acc.cpu_ns),
                secs(acc.wait_ns),
                secs(acc.throttled_ns),
                wall.as_secs_f64(),
            );
            budget.give_back(wall, share);
            end.set(budget.deadline());
        }
        cases.push(record);
    }
    (cases, budget.credit())
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
