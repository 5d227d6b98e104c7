//! Release qualification (DESIGN §10): stages R0–R7 on one long-lived server, each under its own timeout and with
//! its own JSON file, collected into an evidence bundle that [`verify_bundle`] checks offline. The report
//! (`qualification.json` + `.md`) is rewritten atomically after every stage, so a killed run still leaves one.

pub mod drift;
mod html;
mod report;
mod verify;
pub mod words;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use gauntlet_schema::{CaseStatus, Severity};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::client::Client;
use crate::identity::Identity;
use crate::manifest::{Profile, QualitySet, STAGES, Target};
use crate::run::{BenchRecord, BenchVerdict, GateError, Reporter, RunEvent};
use crate::server::ServerProcess;
use crate::session::{Session, SessionError, SessionOptions};
use crate::store::{DECISION_VERSION, Decision, DecisionStage};
use crate::util::{now_rfc3339, sha256_file, write_atomic};

// The bundle's file types live in the schema crate; re-exported so that callers keep their paths.
pub use gauntlet_schema::qualify::{
    EvidenceFile, EvidenceManifest, QUALIFICATION_VERSION, Qualification, QualificationVerdict, StageHeader, StageRow,
    StageStatus,
};
pub use html::render as html;
pub use report::markdown;
pub use verify::verify_bundle;

pub const REPORT_FILE: &str = "qualification.json";
pub const SNAPSHOT_FILE: &str = "profile.snapshot.json";
pub const MONITOR_FILE: &str = "resource-monitor.jsonl";
pub const MANIFEST_FILE: &str = "evidence-manifest.json";
pub const BASELINE_FILE: &str = "r5-baseline.json";
pub const HTML_FILE: &str = "qualification.html";

/// What each stage is, and the file it leaves.
pub const STAGE_INFO: [(&str, &str, &str); 8] = [
    ("R0", "provenance: model, device, source tree, build, command, readiness", "r0-identity.json"),
    ("R1", "correctness suite at concurrency 1", "r1-correctness.json"),
    ("R2", "quality floor on a gold-scored set", "r2-quality.json"),
    ("R3", "determinism at max concurrency (identical answers)", "r3-determinism.json"),
    ("R4", "saturation: concurrency 1, 2 and max", "r4-saturation.json"),
    ("R5", "performance samples against the matching baseline", "r5-performance.json"),
    ("R6", "health and resource drift, kernel log", "r6-drift.json"),
    ("R7", "evidence: files, identities, recomputed verdicts, sha256 manifest", MANIFEST_FILE),
];

/// The instruction R2 puts before every problem (recorded in the stage file).
pub const QUALITY_PROMPT: &str =
    "Solve the following problem step by step. End your reply with a final line of the form '#### <number>'.";

pub struct QualifyOptions<'a> {
    pub out_dir: &'a Path,
    pub identity: &'a Identity,
    /// Stages to run; R0 and R7 always run.
    pub stages: Vec<String>,
    pub baseline: Option<(BenchRecord, String)>,
}

/// `R0,R1,R3` → the selection, with R0 and R7 added; unknown names are an error.
pub fn parse_stages(text: &str) -> Result<Vec<String>, String> {
    let mut out = vec!["R0".to_owned(), "R7".to_owned()];
    for s in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let up = s.to_ascii_uppercase();
        if !STAGES.contains(&up.as_str()) {
            return Err(format!("unknown stage `{s}` (stages are {})", STAGES.join(", ")));
        }
        out.push(up);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// A stage's result before it is written: its status, one summary line, what failed, and its data.
struct Outcome {
    status: StageStatus,
    summary: String,
    failures: Vec<String>,
    data: Value,
}

impl Outcome {
    fn judged(failures: Vec<String>, summary: String, data: Value) -> Outcome {
        Outcome {
            status: if failures.is_empty() { StageStatus::Pass } else { StageStatus::Fail },
            summary,
            failures,
            data,
        }
    }
}

struct Bundle {
    dir: PathBuf,
    report: Qualification,
}

impl Bundle {
    fn save(&self) -> Result<(), GateError> {
        let out = |source| GateError::Out { path: self.dir.clone(), source };
        write_atomic(&self.dir.join(REPORT_FILE), &serde_json::to_vec_pretty(&self.report).expect("serializable"))
            .map_err(out)?;
        write_atomic(&self.dir.join("qualification.md"), markdown(&self.report).as_bytes()).map_err(out)?;
        write_atomic(&self.dir.join(HTML_FILE), html(&self.dir, &self.report).as_bytes()).map_err(out)
    }

    fn row(&mut self, id: &str) -> &mut StageRow {
        self.report.stages.iter_mut().find(|s| s.id == id).expect("every stage has a row")
    }

    fn begin(&mut self, id: &str, reporter: &mut dyn Reporter) -> Result<Instant, GateError> {
        let row = self.row(id);
        row.status = StageStatus::Running;
        row.started_at = Some(now_rfc3339());
        let line = format!("{id}: {}", row.title);
        reporter.event(&RunEvent::Note(line));
        self.save()?;
        Ok(Instant::now())
    }

    /// Writes the stage's file and its row, then the report.
    fn finish(
        &mut self,
        id: &str,
        began: Instant,
        outcome: Outcome,
        timed_out: bool,
        reporter: &mut dyn Reporter,
    ) -> Result<(), GateError> {
        let run_id = self.report.run_id.clone();
        let dir = self.dir.clone();
        let row = self.row(id);
        row.status = outcome.status;
        row.seconds = Some(began.elapsed().as_secs_f64());
        row.timed_out = timed_out;
        row.summary = outcome.summary;
        row.failures = outcome.failures;
        let header = StageHeader { run_id, stage: id.into(), status: row.status, failures: row.failures.clone() };
        let mut file = serde_json::to_value(&header).unwrap_or(Value::Null);
        if let (Value::Object(f), Value::Object(d)) = (&mut file, outcome.data) {
            f.extend(d);
        }
        let line = format!(
            "{id}: {} ({:.1}s) {}",
            row.status.as_str().to_uppercase(),
            row.seconds.unwrap_or(0.0),
            row.summary
        );
        let path = dir.join(&row.file);
        write_atomic(&path, &serde_json::to_vec_pretty(&file).expect("serializable"))
            .map_err(|source| GateError::Out { path, source })?;
        reporter.event(&RunEvent::Note(line));
        self.save()
    }

    /// Marks the pending stages not-run; R6 only with `drift_too` (after a server death its samples still tell).
    fn skip_rest(&mut self, why: &str, drift_too: bool) {
        for row in &mut self.report.stages {
            if row.status == StageStatus::Pending && (drift_too || row.id != "R6") {
                row.status = StageStatus::NotRun;
                row.summary = why.into();
            }
        }
    }
}

/// Runs the selected stages and returns the final report. The bundle is in `opts.out_dir`.
pub fn run_qualify(
    profile: &Profile,
    opts: &QualifyOptions,
    reporter: &mut dyn Reporter,
) -> Result<Qualification, GateError> {
    let dir = opts.out_dir;
    if dir.join(REPORT_FILE).exists() {
        return Err(GateError::Out {
            path: dir.into(),
            source: std::io::Error::other("already holds a qualification; give a new --out so no evidence is lost"),
        });
    }
    std::fs::create_dir_all(dir).map_err(|source| GateError::Out { path: dir.into(), source })?;
    let settings = &profile.qualify;
    let clock = Instant::now();
    let started_at = now_rfc3339();
    let run_id =
        crate::util::sha256_hex(format!("{started_at} {} {:?}", std::process::id(), clock).as_bytes())[..16].to_owned();
    let (base_url, command) = match &profile.target {
        Target::Spawn(s) => (s.base_url(), s.command()),
        Target::Attach(a) => (a.base_url.clone(), Vec::new()),
    };
    let stages = STAGE_INFO
        .iter()
        .map(|(id, title, file)| {
            let selected = opts.stages.iter().any(|s| s == id);
            StageRow {
                id: (*id).into(),
                title: (*title).into(),
                status: if selected { StageStatus::Pending } else { StageStatus::NotRun },
                file: (*file).into(),
                started_at: None,
                seconds: None,
                timeout_seconds: settings.timeout(id).as_secs_f64(),
                timed_out: false,
                summary: if selected { String::new() } else { "not selected".into() },
                failures: Vec::new(),
            }
        })
        .collect();
    let snapshot = json!({
        "run_id": run_id,
        "profile": profile.name,
        "identity": opts.identity.value,
        "identity_digest": opts.identity.digest,
        "runtime": opts.identity.runtime,
        "command": command,
        "base_url": base_url,
        "request_model": profile.request_model,
        "request_timeout_seconds": profile.request_timeout.as_secs_f64(),
        "expected_failures": profile.thresholds.expected_failures,
        "suite": {"id": profile.suite.id, "version": profile.suite.version, "digest": profile.suite.digest},
        "qualify": settings,
    });
    write_atomic(&dir.join(SNAPSHOT_FILE), &serde_json::to_vec_pretty(&snapshot).expect("serializable"))
        .map_err(|source| GateError::Out { path: dir.into(), source })?;
    let mut bundle = Bundle {
        dir: dir.into(),
        report: Qualification {
            qualification_version: QUALIFICATION_VERSION,
            run_id,
            gauntlet_version: env!("CARGO_PKG_VERSION").into(),
            profile: profile.name.clone(),
            identity_digest: opts.identity.digest.clone(),
            started_at,
            finished_at: None,
            verdict: QualificationVerdict::Running,
            partial: STAGES.iter().any(|s| !opts.stages.iter().any(|o| o == s)),
            selected: opts.stages.clone(),
            base_url: base_url.clone(),
            command,
            baseline: opts.baseline.as_ref().map(|(_, p)| p.clone()),
            stages,
        },
    };
    bundle.save()?;

    let rt = crate::util::measuring_runtime();

    // R0: provenance first (nothing starts on a wrong model), then the session: build, GPU, bracket, server,
    // readiness within the stage's budget.
    let began = bundle.begin("R0", reporter)?;
    let (mut failures, mut data) = provenance(profile, opts);
    let mut session: Option<Session> = None;
    let mut monitor: Option<Monitor> = None;
    let mut timed_out = false;
    if failures.is_empty() {
        let limit = settings.timeout("R0").saturating_sub(began.elapsed()).max(Duration::from_secs(1));
        let session_opts = SessionOptions { out_dir: dir, ready_limit: Some(limit), built: None, announce_cases: None };
        match Session::open(profile, session_opts, &rt, reporter) {
            Ok(s) => session = Some(s),
            Err(e @ (SessionError::Spawn(_) | SessionError::BuildStart(_))) => {
                failures.push(format!("the server did not start: {e}"))
            }
            Err(e) => return Err(e),
        }
    }
    if let Some(s) = &mut session {
        timed_out = s.ready_timed_out;
        if let Some(b) = &s.build {
            data["build"] = json!(b.record);
        }
        if let Some(b) = &s.build_identity {
            data["identity_build"] = b.clone();
        }
        failures.extend(s.life.findings.iter().filter(|f| f.kind == "build-failed").map(|f| f.message.clone()));
        match &s.load {
            Err(why) => {
                if failures.is_empty() {
                    failures.push(why.clone());
                }
            }
            Ok(secs) => {
                // Sampling starts once the server is ready: a load is not drift.
                monitor = Some(Monitor::start(profile, dir, &base_url, s.api_key.clone(), s.pid(), clock));
                data["load_seconds"] = json!(secs);
                match rt.block_on(s.client.get_json("props", Duration::from_secs(5))) {
                    Ok(props) => {
                        let path = dir.join("server-props.json");
                        write_atomic(&path, &serde_json::to_vec_pretty(&props).expect("serializable"))
                            .map_err(|source| GateError::Out { path, source })?;
                        data["server_props"] = json!("server-props.json");
                    }
                    Err(e) => data["server_props"] = json!(format!("not available: {e}")),
                }
            }
        }
        data["events"] = json!(s.life.events);
    }
    let client = session.as_ref().map(|s| s.client.clone()).unwrap_or_else(|| Client::new(&base_url, None));
    let summary = match data["load_seconds"].as_f64() {
        Some(s) if failures.is_empty() => format!("ready after {s:.2}s"),
        _ if failures.is_empty() => "ready (attached)".into(),
        _ => failures[0].clone(),
    };
    bundle.finish("R0", began, Outcome::judged(failures, summary, data), timed_out, reporter)?;
    let r0_passed = bundle.report.stage("R0").is_some_and(|s| s.status == StageStatus::Pass);
    if !r0_passed {
        bundle.skip_rest("R0 failed: the run stops", true);
    }

    // R1–R5 on the same server, its health checked before each.
    let mut dead: Option<String> = None;
    let mut r1_answers: Vec<(String, Option<String>)> = Vec::new();
    for id in ["R1", "R2", "R3", "R4", "R5"] {
        if bundle.report.stage(id).is_none_or(|s| s.status != StageStatus::Pending) {
            continue;
        }
        let began = bundle.begin(id, reporter)?;
        if dead.is_none() {
            dead = rt.block_on(alive(&client, profile, session.as_mut().and_then(Session::process_mut))).err();
        }
        if let Some(why) = &dead {
            let outcome = Outcome::judged(
                vec![format!("the server is down before this stage: {why}")],
                "server down".into(),
                json!({"server_down": why}),
            );
            bundle.finish(id, began, outcome, false, reporter)?;
            bundle.skip_rest("the server died in an earlier stage", false);
            break;
        }
        let limit = settings.timeout(id);
        let work = async {
            match id {
                "R1" => correctness(&client, profile).await,
                "R2" => quality(&client, profile).await,
                "R3" => determinism(&client, profile, &r1_answers).await,
                "R4" => saturation(&client, profile, session.as_mut().and_then(Session::process_mut), reporter).await,
                _ => {
                    performance(
                        &client,
                        profile,
                        opts.identity,
                        session.as_mut().and_then(Session::process_mut),
                        opts.baseline.as_ref(),
                        dir,
                        reporter,
                    )
                    .await
                }
            }
        };
        let (outcome, timed_out) = match rt.block_on(async { tokio::time::timeout(limit, work).await }) {
            Ok(o) => (o, false),
            Err(_) => (
                Outcome::judged(
                    vec![format!("stage timeout of {limit:.0?} reached; its requests were abandoned")],
                    "timed out".into(),
                    json!({}),
                ),
                true,
            ),
        };
        if id == "R1" {
            r1_answers = outcome.data["cases"]
                .as_array()
                .map(|cases| {
                    cases
                        .iter()
                        .map(|c| (c["id"].as_str().unwrap_or("").to_owned(), c["observed"].as_str().map(str::to_owned)))
                        .collect()
                })
                .unwrap_or_default();
        }
        bundle.finish(id, began, outcome, timed_out, reporter)?;
        if let Some(status) = session.as_mut().and_then(Session::exited) {
            dead = Some(format!("exited ({})", crate::server::describe_exit(status)));
        }
    }

    // Down: the monitor stops just before R6, then the server.
    let samples_taken = monitor.map(Monitor::stop).unwrap_or(0);
    drop(rt);
    let (stop, sentry, sentry_findings) = match session {
        Some(s) => {
            let (closed, mut findings) = s.close(profile, dead.is_some(), &opts.identity.runtime);
            // The lifecycle's own findings (killed, stuck, leftover processes) are judged with the kernel's in R6.
            let lifecycle = closed.life.findings.into_iter().filter(|f| f.kind != "build-failed" && f.kind != "crash");
            findings.extend(lifecycle);
            (Some(closed.stop).filter(|s| s != "attached" && s != "not-started"), closed.sentry, findings)
        }
        None => (None, gauntlet_schema::SentryRecord::default(), Vec::new()),
    };

    if bundle.report.stage("R6").is_some_and(|s| s.status == StageStatus::Pending) {
        let began = bundle.begin("R6", reporter)?;
        let outcome = resource_drift(
            dir,
            profile,
            samples_taken,
            &sentry,
            &sentry_findings,
            stop.map(|s: gauntlet_schema::StopOutcome| s.as_str()),
        );
        bundle.finish("R6", began, outcome, false, reporter)?;
    }

    // R7: the bundle judged as `gauntlet verify` will judge it, then its manifest of sha256s.
    let began = bundle.begin("R7", reporter)?;
    let problems = verify::check(dir, false);
    let files = verify::inventory(dir).map_err(|source| GateError::Out { path: dir.into(), source })?;
    let count = files.len();
    let status = if problems.is_empty() { StageStatus::Pass } else { StageStatus::Fail };
    let manifest = json!({"status": status, "failures": problems, "files": files});
    let summary = if problems.is_empty() {
        format!("{count} files hashed; every recomputed verdict equals the stored one")
    } else {
        problems[0].clone()
    };
    bundle.finish("R7", began, Outcome { status, summary, failures: problems, data: manifest }, false, reporter)?;

    bundle.report.verdict = fold(&bundle.report.stages);
    bundle.report.finished_at = Some(now_rfc3339());
    bundle.save()?;
    Ok(bundle.report)
}

/// The decision a reviewer may promote from the bundle in `dir`. Refused, with every reason, unless the bundle
/// verifies, every stage was selected, and the verdict is pass: a failed, inconclusive or partial qualification is
/// evidence, never a reference.
pub fn decision(dir: &Path) -> Result<Decision, Vec<String>> {
    let problems = verify_bundle(dir);
    if !problems.is_empty() {
        return Err(problems);
    }
    let read = |name: &str| -> Result<Value, Vec<String>> {
        let text = std::fs::read_to_string(dir.join(name)).map_err(|e| vec![format!("{name}: {e}")])?;
        serde_json::from_str(&text).map_err(|e| vec![format!("{name}: {e}")])
    };
    let report: Qualification = serde_json::from_value(read(REPORT_FILE)?).map_err(|e| vec![e.to_string()])?;
    let mut refusals = Vec::new();
    if report.partial {
        let missing: Vec<&str> = STAGES.iter().copied().filter(|s| !report.selected.iter().any(|x| x == s)).collect();
        refusals.push(format!(
            "a partial qualification ({} not run) is not promoted: qualify every stage",
            missing.join(", ")
        ));
    }
    if report.verdict != QualificationVerdict::Pass {
        refusals.push(format!("the qualification's verdict is {}: only a passing one is promoted", report.verdict));
    }
    if !refusals.is_empty() {
        return Err(refusals);
    }
    let snapshot = read(SNAPSHOT_FILE)?;
    let performance = crate::run::read_bench(dir).map_err(|e| vec![e])?;
    let manifest_sha = sha256_file(&dir.join(MANIFEST_FILE)).map_err(|e| vec![format!("{MANIFEST_FILE}: {e}")])?;
    Ok(Decision {
        decision_version: DECISION_VERSION,
        run_id: report.run_id,
        profile: report.profile,
        identity: gauntlet_schema::IdentityRecord::from_value(snapshot["identity"].clone()),
        identity_digest: report.identity_digest,
        verdict: report.verdict,
        qualified_at: report.finished_at.unwrap_or(report.started_at),
        stages: report
            .stages
            .into_iter()
            .map(|s| DecisionStage { id: s.id, status: s.status, summary: s.summary })
            .collect(),
        evidence_manifest_sha256: manifest_sha,
        performance,
    })
}

/// The overall verdict a set of stage rows gives (also what `verify` recomputes).
pub fn fold(rows: &[StageRow]) -> QualificationVerdict {
    if rows.iter().any(|s| s.status == StageStatus::Fail) {
        QualificationVerdict::Fail
    } else if rows.iter().any(|s| s.status == StageStatus::Inconclusive) {
        QualificationVerdict::Inconclusive
    } else {
        QualificationVerdict::Pass
    }
}

/// R0's checks that need no server: model bytes, device, source tree, build identity, command.
fn provenance(profile: &Profile, opts: &QualifyOptions) -> (Vec<String>, Value) {
    let mut failures = Vec::new();
    let mut data = json!({
        "identity": opts.identity.value,
        "identity_digest": opts.identity.digest,
        "runtime": opts.identity.runtime,
    });
    match &profile.target {
        Target::Spawn(s) => {
            match (sha256_file(&s.model.path), &s.model.sha256) {
                (Err(e), _) => failures.push(format!("model `{}`: {e}", s.model.path.display())),
                (Ok(sha), None) => {
                    failures.push(format!(
                        "model `{}` has no sha256 in the manifest: qualification needs exact provenance",
                        s.model.name
                    ));
                    data["model_sha256"] = json!(sha);
                }
                (Ok(sha), Some(want)) if &sha != want => {
                    failures.push(format!("model sha256 is {sha}, the manifest says {want}"));
                    data["model_sha256"] = json!(sha);
                }
                (Ok(sha), Some(_)) => data["model_sha256"] = json!(sha),
            }
            match sha256_file(&s.binary) {
                Ok(sha) => data["server_binary_sha256"] = json!(sha),
                Err(e) => failures.push(format!("server binary `{}`: {e}", s.binary.display())),
            }
            data["server_version"] = version_output(&s.binary);
            data["command"] = json!(s.command());
        }
        Target::Attach(a) => failures.push(format!(
            "attached to {}: the model bytes and the server build cannot be proven; qualification needs a spawned \
             server",
            a.base_url
        )),
    }
    if profile.device.is_gpu()
        && let Some(e) = opts.identity.runtime["gpu"]["error"].as_str()
    {
        failures.push(format!("device {} is not visible: {e}", profile.device.label()));
    }
    if let Some((b, path)) = &opts.baseline {
        let d = crate::identity::differences(&b.identity, &opts.identity.value, &b.runtime, &opts.identity.runtime);
        for r in &d.refusing {
            failures.push(format!("identity differs from the baseline `{path}`: {r}"));
        }
        data["runtime_differences"] = json!(d.warning);
    }
    match &profile.qualify.source {
        None => data["source_tree"] = json!({"declared": false}),
        Some(dir) => {
            let git =
                |args: &[&str]| crate::util::run_bounded("git", &[&["-C", &dir.to_string_lossy()], args].concat());
            match (git(&["rev-parse", "HEAD"]), git(&["status", "--porcelain", "--untracked-files=no"])) {
                (Ok(head), Ok(status)) => {
                    let dirty: Vec<&str> = status.lines().filter(|l| !l.trim().is_empty()).collect();
                    if !dirty.is_empty() {
                        failures.push(format!(
                            "source tree `{}` has {} modified tracked file(s): {}",
                            dir.display(),
                            dirty.len(),
                            dirty.iter().take(5).map(|l| l.trim()).collect::<Vec<_>>().join(", ")
                        ));
                    }
                    data["source_tree"] = json!({"declared": true, "path": dir, "commit": head.trim(), "dirty": dirty});
                }
                (Err(e), _) | (_, Err(e)) => {
                    failures.push(format!("source tree `{}` is not a readable git work tree: {e}", dir.display()))
                }
            }
        }
    }
    (failures, data)
}

fn version_output(binary: &Path) -> Value {
    match crate::util::run_bounded_merged(&binary.to_string_lossy(), &["--version"]) {
        Ok((code, text)) => json!({"exit_code": code, "output": text.chars().take(2000).collect::<String>()}),
        Err(e) => json!({"error": e}),
    }
}

/// Between stages: the process still runs and its health endpoint answers 200.
async fn alive(client: &Client, profile: &Profile, process: Option<&mut ServerProcess>) -> Result<(), String> {
    if let Some(p) = process
        && let Some(status) = p.exited()
    {
        return Err(format!("exited ({})", crate::server::describe_exit(status)));
    }
    match client.health(&profile.health_path, Duration::from_secs(5)).await {
        Ok(200) => Ok(()),
        Ok(code) => Err(format!("health answered HTTP {code}")),
        Err(e) => Err(format!("health: {e}")),
    }
}

async fn correctness(client: &Client, profile: &Profile) -> Outcome {
    let mut cases: Vec<gauntlet_schema::CaseRecord> = Vec::new();
    let mut failures = Vec::new();
    for case in &profile.suite.cases {
        let mut record = crate::run::new_case_record(case, &profile.request_model);
        let source = case.repeat_of.as_ref().and_then(|src| cases.iter().find(|c| &c.id == src)?.observed.clone());
        let deadline = tokio::time::Instant::now().into_std() + profile.request_timeout;
        let _ = crate::run::answer_case(client, case, &mut record, source.as_deref(), deadline).await;
        cases.push(record);
    }
    failures.extend(correctness_failures(&cases, &profile.thresholds.expected_failures));
    let passed = cases.iter().filter(|c| c.status == CaseStatus::Pass).count();
    let summary = format!(
        "{passed}/{} cases pass ({} declared expected failures)",
        cases.len(),
        profile.thresholds.expected_failures.len()
    );
    Outcome::judged(failures, summary, json!({"cases": cases}))
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

/// The problems of R2's set, and a digest of them.
pub fn quality_problems(set: &QualitySet) -> Result<(Vec<words::Problem>, Value), String> {
    match set {
        QualitySet::Arithmetic { version, seed, count } => {
            if *version != words::ARITH_VERSION {
                return Err(format!(
                    "arith-v{version} is not generated by this gauntlet (it has v{})",
                    words::ARITH_VERSION
                ));
            }
            let problems = words::arithmetic(*seed, *count);
            Ok((problems, json!({"id": format!("arith-v{version}"), "seed": seed, "count": count})))
        }
        QualitySet::Jsonl { path } => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("`{}`: {e}", path.display()))?;
            let problems = words::read_gsm8k(&text).map_err(|e| format!("`{}`: {}", path.display(), e.join("; ")))?;
            let sha = crate::util::sha256_hex(text.as_bytes());
            Ok((problems, json!({"id": path.file_name().map(|n| n.to_string_lossy().into_owned()), "sha256": sha})))
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QualityItem {
    pub id: String,
    pub question: String,
    pub gold: String,
    pub reply: Option<String>,
    pub extracted: Option<String>,
    pub how: Option<words::Extraction>,
    pub correct: bool,
    pub error: Option<String>,
}

async fn quality(client: &Client, profile: &Profile) -> Outcome {
    let q = &profile.qualify.quality;
    let (problems, set) = match quality_problems(&q.set) {
        Ok(p) => p,
        Err(e) => return Outcome::judged(vec![e], "no problem set".into(), json!({})),
    };
    let mut items = Vec::with_capacity(problems.len());
    for p in &problems {
        let body = json!({
            "model": profile.request_model,
            "messages": [{"role": "user", "content": format!("{QUALITY_PROMPT}\n\n{}", p.question)}],
            "max_tokens": q.max_tokens,
            "temperature": 0,
        });
        let deadline = Instant::now() + profile.request_timeout;
        let (reply, error) = match client.chat(&body, deadline).await {
            Ok(a) => (Some(a.content), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let extracted = reply.as_deref().and_then(words::extract_answer);
        items.push(QualityItem {
            id: p.id.clone(),
            question: p.question.clone(),
            gold: p.gold.clone(),
            correct: reply.as_deref().is_some_and(|r| words::is_correct(r, &p.gold)),
            extracted: extracted.as_ref().map(|(n, _)| n.clone()),
            how: extracted.map(|(_, h)| h),
            reply,
            error,
        });
    }
    let (accuracy, failures) = quality_verdict(&items, q.floor);
    let correct = items.iter().filter(|i| i.correct).count();
    let summary = format!("{correct}/{} correct, accuracy {accuracy:.3} (floor {})", items.len(), q.floor);
    Outcome::judged(
        failures,
        summary,
        json!({"set": set, "prompt": QUALITY_PROMPT, "floor": q.floor, "accuracy": accuracy, "correct": correct, "items": items}),
    )
}

/// R2's rule (recomputed by `verify`): no request failed and accuracy ≥ floor.
pub(crate) fn quality_verdict(items: &[QualityItem], floor: f64) -> (f64, Vec<String>) {
    let mut failures = Vec::new();
    let errors = items.iter().filter(|i| i.error.is_some()).count();
    if errors > 0 {
        failures.push(format!("{errors} request(s) failed"));
    }
    let accuracy =
        if items.is_empty() { 0.0 } else { items.iter().filter(|i| i.correct).count() as f64 / items.len() as f64 };
    if items.is_empty() {
        failures.push("the set is empty: no evidence".into());
    } else if accuracy < floor {
        failures.push(format!("accuracy {accuracy:.3} is below the floor {floor}"));
    }
    (accuracy, failures)
}

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

async fn determinism(client: &Client, profile: &Profile, c1: &[(String, Option<String>)]) -> Outcome {
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
            let at = texts.windows(2).find_map(|w| crate::compare::first_difference(w[0], w[1])).unwrap_or(0);
            format!("concurrent copies differ at char {at}")
        };
        failures.push(format!("case `{}`: {why}", c.id));
    }
    if cases.is_empty() {
        failures.push("the suite has no cases: no evidence".into());
    }
    failures
}

async fn saturation(
    client: &Client,
    profile: &Profile,
    process: Option<&mut ServerProcess>,
    reporter: &mut dyn Reporter,
) -> Outcome {
    let w = &profile.qualify.saturation;
    let (mut levels, mut problems) = crate::run::measure(client, profile, w, process, reporter).await;
    let rules = crate::bench::stats::Rules::default();
    let (verdict, assessed) = crate::run::assess(&mut levels, w, None, true, &rules);
    problems.extend(assessed);
    let summary = levels
        .iter()
        .map(|l| {
            format!("c{}: {:.1} tok/s", l.concurrency, l.metrics["output_throughput_wall"].as_f64().unwrap_or(0.0))
        })
        .collect::<Vec<_>>()
        .join(", ");
    let mut failures = problems;
    if verdict == BenchVerdict::Fail && failures.is_empty() {
        failures.push("requests failed".into());
    }
    Outcome::judged(failures, summary, json!({"workload": w, "levels": levels}))
}

async fn performance(
    client: &Client,
    profile: &Profile,
    identity: &Identity,
    process: Option<&mut ServerProcess>,
    baseline: Option<&(BenchRecord, String)>,
    dir: &Path,
    reporter: &mut dyn Reporter,
) -> Outcome {
    let w = &profile.qualify.performance;
    let (mut levels, mut problems) = crate::run::measure(client, profile, w, process, reporter).await;
    let rules = crate::bench::stats::Rules::default();
    let (verdict, assessed) = crate::run::assess(&mut levels, w, baseline.map(|(b, _)| b), true, &rules);
    problems.extend(assessed);
    if let Some((b, _)) = baseline {
        let path = dir.join(BASELINE_FILE);
        if let Err(e) = write_atomic(&path, &serde_json::to_vec_pretty(b).expect("serializable")) {
            problems.push(format!("cannot keep the baseline in the bundle: {e}"));
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
    let mut failures = problems;
    if status == StageStatus::Fail && failures.is_empty() {
        failures.push(format!("bench verdict: {verdict}"));
    }
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
        problems: failures.clone(),
        confirmation: None,
        findings: Vec::new(),
        sentry: None,
        build: None,
    };
    Outcome { status, summary, failures, data: serde_json::to_value(&record).unwrap_or(Value::Null) }
}

fn resource_drift(
    dir: &Path,
    profile: &Profile,
    samples_taken: usize,
    sentry: &gauntlet_schema::SentryRecord,
    sentry_findings: &[gauntlet_schema::Finding],
    stop: Option<&str>,
) -> Outcome {
    let text = std::fs::read_to_string(dir.join(MONITOR_FILE)).unwrap_or_default();
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
        && s != "terminated"
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

/// Samples the server through every stage on its own thread (and its own runtime, so a busy stage cannot delay a
/// reading), appending one JSON line per sample so a killed run keeps what was seen.
struct Monitor {
    stop: mpsc::Sender<()>,
    handle: std::thread::JoinHandle<usize>,
}

impl Monitor {
    fn start(
        profile: &Profile,
        dir: &Path,
        base_url: &str,
        api_key: Option<String>,
        pid: Option<u32>,
        clock: Instant,
    ) -> Monitor {
        let (stop, stopped) = mpsc::channel::<()>();
        let profile = profile.clone();
        let path = dir.join(MONITOR_FILE);
        let base_url = base_url.to_owned();
        let handle = std::thread::spawn(move || {
            use std::io::Write as _;
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
            let client = Client::new(&base_url, api_key);
            let Ok(mut file) = std::fs::OpenOptions::new().create(true).append(true).open(&path) else { return 0 };
            // One GPU probe (one NVML handle) for the monitor's life.
            let probe = crate::sentry::gpu::probe();
            let every = Duration::from_secs_f64(profile.qualify.monitor_interval_seconds);
            let mut taken = 0;
            loop {
                let t = clock.elapsed().as_secs_f64();
                let at = now_rfc3339();
                let sent = Instant::now();
                let health = rt.block_on(client.health(&profile.health_path, Duration::from_secs(5)));
                let health_seconds = sent.elapsed().as_secs_f64();
                let (health_ok, error) = match health {
                    Ok(200) => (true, None),
                    Ok(code) => (false, Some(format!("health answered HTTP {code}"))),
                    Err(e) => (false, Some(e.to_string())),
                };
                let gpu_memory_bytes = match pid {
                    Some(pid) if profile.device.is_gpu() => {
                        crate::session::server_on_gpu(&profile, probe.as_ref(), pid).1
                    }
                    _ => None,
                };
                let sample = drift::Sample {
                    t,
                    at,
                    rss_bytes: pid.and_then(|p| drift::group_rss_bytes(p as i32)),
                    health_ok,
                    health_seconds: health_ok.then_some(health_seconds),
                    gpu_memory_bytes,
                    error,
                };
                let mut line = serde_json::to_vec(&sample).expect("serializable");
                line.push(b'\n');
                if file.write_all(&line).and_then(|_| file.flush()).is_ok() {
                    taken += 1;
                }
                match stopped.recv_timeout(every.saturating_sub(sent.elapsed())) {
                    Err(mpsc::RecvTimeoutError::Timeout) => continue,
                    _ => break,
                }
            }
            taken
        });
        Monitor { stop, handle }
    }

    /// Stops sampling; returns how many samples were written.
    fn stop(self) -> usize {
        let _ = self.stop.send(());
        self.handle.join().unwrap_or(0)
    }
}
