//! R4 (saturation) and R5 (performance against a baseline): the bench's measuring and assessing on the
//! qualification's server (its requests sent and timed by the measuring room, `run::room`, through
//! `run::measure`). R5's stage file is also a bench record. Never spawns or stops the server.

use std::path::Path;

use gauntlet_schema::{Problem, ProblemCode};
use serde_json::{Value, json};

use super::{BASELINE_FILE, Outcome, StageStatus};
use crate::client::Client;
use crate::identity::Identity;
use crate::manifest::Profile;
use crate::run::{BenchRecord, BenchVerdict, Reporter};
use crate::server::ServerProcess;
use crate::util::{now_rfc3339, write_atomic};

pub(super) async fn saturation(
    client: &Client,
    profile: &Profile,
    process: Option<&mut ServerProcess>,
    reporter: &mut dyn Reporter,
) -> Outcome {
    let w = &profile.qualify.saturation;
    let (mut levels, mut problems) = crate::run::measure(client, profile, w, process, None, reporter).await;
    let rules = crate::bench::stats::Rules::default();
    let (verdict, assessed) = crate::run::assess(&mut levels, w, None, true, &rules, &Default::default(), None);
    problems.extend(assessed);
    let summary = levels
        .iter()
        .map(|l| {
            format!(
                "c{}: {:.1} tok/s",
                l.concurrency,
                l.pooled(gauntlet_schema::Metric::OutputThroughput).unwrap_or(0.0)
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    let mut failures: Vec<String> = problems.into_iter().map(|p| p.text).collect();
    if verdict == BenchVerdict::Fail && failures.is_empty() {
        failures.push("requests failed".into());
    }
    Outcome::judged(failures, summary, json!({"workload": w, "levels": levels}))
}

pub(super) async fn performance(
    client: &Client,
    profile: &Profile,
    identity: &Identity,
    process: Option<&mut ServerProcess>,
    baseline: Option<&(BenchRecord, String)>,
    dir: &Path,
    reporter: &mut dyn Reporter,
) -> Outcome {
    let w = &profile.qualify.performance;
    let (mut levels, mut problems) = crate::run::measure(client, profile, w, process, None, reporter).await;
    let rules = crate::bench::stats::Rules::default();
    // The promoted baseline is one session: its comparison counts the two sides' measured spreads, or the default
    // one for a baseline that carries none.
    let spreads = crate::run::between_session_spreads(baseline.map(|(b, _)| b), &[], &levels, w, &rules);
    let deciding = baseline.map(|_| crate::run::stored_deciding(profile.bench_decide.as_deref(), w));
    let (verdict, assessed) =
        crate::run::assess(&mut levels, w, baseline.map(|(b, _)| b), true, &rules, &spreads, deciding.as_ref());
    problems.extend(assessed);
    if let Some((b, _)) = baseline {
        let path = dir.join(BASELINE_FILE);
        if let Err(e) = write_atomic(&path, &serde_json::to_vec_pretty(b).expect("serializable")) {
            problems
                .push(Problem::new(ProblemCode::BundleWrite, format!("cannot keep the baseline in the bundle: {e}")));
        }
    }
    let status = match (verdict, problems.is_empty()) {
        (BenchVerdict::Fail | BenchVerdict::Regression, _) | (_, false) => StageStatus::Fail,
        (BenchVerdict::Inconclusive, true) => StageStatus::Inconclusive,
        _ => StageStatus::Pass,
    };
    let summary = match verdict.as_str() {
        "candidate" => "no baseline: recorded as candidate evidence, no performance gate applied".to_owned(),
        v => {
            let calls: Vec<String> = levels
                .iter()
                .flat_map(|l| l.comparisons.iter().map(move |c| format!("c{} {} {}", l.concurrency, c.metric, c.call)))
                .filter(|s| !s.ends_with("no-change"))
                .collect();
            if calls.is_empty() { format!("{v} against the baseline") } else { format!("{v}: {}", calls.join(", ")) }
        }
    };
    if status == StageStatus::Fail && problems.is_empty() {
        problems.push(Problem::new(ProblemCode::Verdict, format!("bench verdict: {verdict}")));
    }
    let failures: Vec<String> = problems.iter().map(|p| p.text.clone()).collect();
    // The stage file is also a bench record: a later `qualify --baseline` or `bench --baseline` reads it as one.
    let record = BenchRecord {
        bench_version: crate::run::BENCH_VERSION,
        gauntlet_version: env!("CARGO_PKG_VERSION").into(),
        profile: profile.name.clone(),
        started_at: now_rfc3339(),
        identity: identity.value.clone(),
        identity_digest: identity.digest.clone(),
        runtime: identity.runtime.clone(),
        workload: w.clone(),
        definitions: Value::Null,
        levels,
        verdict,
        rules: serde_json::to_value(&rules).unwrap_or(Value::Null),
        baseline: baseline.map(|(_, p)| p.clone()),
        problems,
        confirmation: None,
        findings: Vec::new(),
        sentry: None,
        build: None,
        spill: None,
        server_metrics: None,
        deciding,
    };
    Outcome { status, summary, failures, data: serde_json::to_value(&record).unwrap_or(Value::Null) }
}
