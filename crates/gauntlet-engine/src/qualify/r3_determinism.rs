//! R3, determinism: each case asked by concurrent copies, and the byte-identity rule `verify` recomputes.
//! One sample is never evidence.

use std::time::Instant;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::Outcome;
use crate::client::Client;
use crate::manifest::Profile;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeterminismCase {
    pub id: String,
    /// One per concurrent copy; None where the request failed.
    pub answers: Vec<Option<String>>,
    pub errors: Vec<String>,
    pub deterministic: bool,
    /// Whether the copies equal R1's concurrency-1 answer (information: batching may legitimately change numerics).
    pub matches_c1: Option<bool>,
}

pub(super) async fn determinism(client: &Client, profile: &Profile, c1: &[(String, Option<String>)]) -> Outcome {
    let n = profile.qualify.max_concurrency;
    let mut cases = Vec::new();
    for case in &profile.suite.cases {
        let body = case.request_body(&profile.request_model);
        let deadline = Instant::now() + profile.request_timeout;
        let copies = (0..n).map(|_| client.chat(&body, deadline));
        let results = futures_util::future::join_all(copies).await;
        let mut answers = Vec::new();
        let mut errors = Vec::new();
        for r in results {
            match r {
                Ok(a) => answers.push(Some(crate::suite::observed_text(&a))),
                Err(e) => {
                    answers.push(None);
                    errors.push(e.to_string());
                }
            }
        }
        let reference = c1.iter().find(|(id, _)| id == &case.id).and_then(|(_, o)| o.as_deref());
        let matches_c1 = reference.map(|r| answers.iter().all(|a| a.as_deref() == Some(r)));
        cases.push(DeterminismCase {
            id: case.id.clone(),
            deterministic: is_deterministic(&answers),
            answers,
            errors,
            matches_c1,
        });
    }
    let failures = determinism_failures(&cases);
    let ok = cases.iter().filter(|c| c.deterministic).count();
    let summary = format!("{ok}/{} cases identical across {n} concurrent copies", cases.len());
    Outcome::judged(failures, summary, json!({"concurrency": n, "cases": cases}))
}

/// At least two answers, none failed, none empty, all byte-identical. One sample is never evidence.
pub(crate) fn is_deterministic(answers: &[Option<String>]) -> bool {
    answers.len() >= 2
        && answers.iter().all(|a| a.as_deref().is_some_and(|t| !t.is_empty()))
        && answers.windows(2).all(|w| w[0] == w[1])
}

pub(crate) fn determinism_failures(cases: &[DeterminismCase]) -> Vec<String> {
    let mut failures = Vec::new();
    for c in cases.iter().filter(|c| !c.deterministic) {
        let texts: Vec<&str> = c.answers.iter().map(|a| a.as_deref().unwrap_or("")).collect();
        let why = if !c.errors.is_empty() {
            format!("{} request(s) failed: {}", c.errors.len(), c.errors[0])
        } else if texts.iter().any(|t| t.is_empty()) {
            "an empty answer is no evidence of determinism".into()
        } else if texts.len() < 2 {
            "one sample is no evidence of determinism".into()
        } else {
            let at = texts.windows(2).find_map(|w| gauntlet_schema::diff::first_difference(w[0], w[1])).unwrap_or(0);
            format!("concurrent copies differ at char {at}")
        };
        failures.push(format!("case `{}`: {why}", c.id));
    }
    if cases.is_empty() {
        failures.push("the suite has no cases: no evidence".into());
    }
    failures
}
