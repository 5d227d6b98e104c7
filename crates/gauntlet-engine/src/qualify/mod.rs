//! Release qualification (DESIGN §10): stages R0–R7 on one long-lived server, each under its own timeout and with
//! its own JSON file, collected into an evidence bundle that [`verify_bundle`] checks offline. The report
//! (`qualification.json` + `.md`) is rewritten atomically after every stage, so a killed run still leaves one.
//!
//! This file holds only the run loop and the bundle's bookkeeping; each stage's work and its rule (what `verify`
//! recomputes) live in their own file: `r0_provenance`, `r1_correctness`, `r2_quality`, `r3_determinism`,
//! `r4_r5_bench`, `r6_drift` (with `monitor` and `drift`), R7 in `verify`, the promotion in `decision`.

mod decision;
pub mod drift;
mod html;
mod monitor;
mod r0_provenance;
mod r1_correctness;
pub mod r2_lm_eval;
mod r2_quality;
mod r3_determinism;
mod r3_lossless;
mod r4_r5_bench;
mod r6_drift;
mod report;
mod verify;
pub mod words;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::client::Client;
use crate::identity::Identity;
use crate::manifest::{Profile, Stage, Target};
use crate::run::{BenchRecord, GateError, Reporter, RunEvent};
use crate::server::ServerProcess;
use crate::session::{Session, SessionError, SessionOptions, Threads};
use crate::util::{now_rfc3339, write_atomic};
use gauntlet_schema::FindingKind;

// The bundle's file types live in the schema crate; re-exported so that callers keep their paths.
pub use gauntlet_schema::qualify::{
    EvidenceFile, EvidenceManifest, QUALIFICATION_VERSION, Qualification, QualificationVerdict, StageHeader, StageRow,
    StageStatus,
};
pub use html::render as html;
pub use report::markdown;
pub use verify::verify_bundle;

pub use decision::{decision, fold};
pub(crate) use r1_correctness::correctness_failures;
pub use r2_lm_eval::{LM_EVAL_VERSION, install_command as lm_eval_install_command};
pub(crate) use r2_quality::quality_verdict;
pub use r2_quality::{QualityItem, QualitySetError, quality_problems};

use monitor::Monitor;
use r0_provenance::provenance;
use r1_correctness::correctness;
use r2_quality::quality;
use r3_determinism::{Restart, determinism};
use r4_r5_bench::{performance, saturation};
use r6_drift::resource_drift;

pub const REPORT_FILE: &str = "qualification.json";
pub const SNAPSHOT_FILE: &str = "profile.snapshot.json";
pub const MONITOR_FILE: &str = "resource-monitor.jsonl";
pub const MANIFEST_FILE: &str = "evidence-manifest.json";
pub const BASELINE_FILE: &str = "r5-baseline.json";
pub const HTML_FILE: &str = "qualification.html";

/// What each stage is, and the file it leaves.
pub const STAGE_INFO: [(Stage, &str, &str); 8] = [
    (Stage::R0, "provenance: model, device, source tree, build, command, readiness", "r0-identity.json"),
    (Stage::R1, "correctness suite at concurrency 1", "r1-correctness.json"),
    (Stage::R2, "quality floor on a gold-scored set", "r2-quality.json"),
    (Stage::R3, "determinism matrix: repeat, concurrent, stream, prefix cache, restart", "r3-determinism.json"),
    (Stage::R4, "saturation: concurrency 1, 2 and max", "r4-saturation.json"),
    (Stage::R5, "performance samples against the matching baseline", "r5-performance.json"),
    (Stage::R6, "health and resource drift, kernel log", "r6-drift.json"),
    (Stage::R7, "evidence: files, identities, recomputed verdicts, sha256 manifest", MANIFEST_FILE),
];

/// The instruction R2 puts before every problem (recorded in the stage file).
pub const QUALITY_PROMPT: &str =
    "Solve the following problem step by step. End your reply with a final line of the form '#### <number>'.";

pub struct QualifyOptions<'a> {
    pub out_dir: &'a Path,
    pub identity: &'a Identity,
    /// Stages to run; R0 and R7 always run.
    pub stages: Vec<Stage>,
    pub baseline: Option<(BenchRecord, String)>,
    /// The profile the qualified one names in `lossless_against` (the same server without its draft): R3 then
    /// checks losslessness against it (`r3_lossless`).
    pub lossless_against: Option<&'a Profile>,
}

/// A stage's time limit: the manifest's, and for R3 with a losslessness step the time that step may take on top (its
/// suite once more, and two lifecycles of the reference, each bounded by its own load timeout, suite budget and
/// stop grace).
fn stage_limit(
    settings: &crate::manifest::QualifySettings,
    id: Stage,
    profile: &Profile,
    opts: &QualifyOptions,
) -> Duration {
    let base = settings.timeout(id);
    match opts.lossless_against {
        Some(r) if id == Stage::R3 => {
            base + profile.suite_budget + (r.load_timeout + r.suite_budget + r.stop_grace) * 2
        }
        _ => base,
    }
}

/// A stage name in `--stages` that names no stage; `given` as written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown stage `{given}` (stages are {})",
    Stage::ALL.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
)]
pub struct UnknownStage {
    pub given: String,
}

/// `R0,R1,R3` → the selection, with R0 and R7 added; unknown names are an error.
pub fn parse_stages(text: &str) -> Result<Vec<Stage>, UnknownStage> {
    let mut out = vec![Stage::R0, Stage::R7];
    for s in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let Ok(stage) = s.to_ascii_uppercase().parse::<Stage>() else {
            return Err(UnknownStage { given: s.to_owned() });
        };
        out.push(stage);
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

    fn row(&mut self, id: Stage) -> &mut StageRow {
        self.report.stages.iter_mut().find(|s| s.id == id).expect("every stage has a row")
    }

    fn begin(&mut self, id: Stage, reporter: &mut dyn Reporter) -> Result<Instant, GateError> {
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
        id: Stage,
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
        let header = StageHeader { run_id, stage: id, status: row.status, failures: row.failures.clone() };
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
            if row.status == StageStatus::Pending && (drift_too || row.id != Stage::R6) {
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
    // A tool R2 needs and does not have is infrastructure, told before any server starts.
    r2_lm_eval::preflight(profile, &opts.stages).map_err(|e| GateError::ToolMissing(e.to_string()))?;
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
            let selected = opts.stages.contains(id);
            StageRow {
                id: *id,
                title: (*title).into(),
                status: if selected { StageStatus::Pending } else { StageStatus::NotRun },
                file: (*file).into(),
                started_at: None,
                seconds: None,
                timeout_seconds: stage_limit(settings, *id, profile, opts).as_secs_f64(),
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
    // A JSONL quality set (the manifest's file, read as R2 reads it) travels with its evidence, so `verify` never
    // reads a path outside the bundle.
    if let crate::manifest::QualitySet::Jsonl { path } = &settings.quality.set
        && let Ok(bytes) = crate::util::bounded::read_named_bytes(path, crate::util::bounded::RECORD_CAP)
    {
        write_atomic(&dir.join(verify::QUALITY_SET_FILE), &bytes)
            .map_err(|source| GateError::Out { path: dir.into(), source })?;
    }
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
            partial: Stage::ALL.iter().any(|s| !opts.stages.contains(s)),
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
    let began = bundle.begin(Stage::R0, reporter)?;
    let (mut failures, mut data) = provenance(profile, opts);
    let mut session: Option<Session> = None;
    let mut monitor: Option<Monitor> = None;
    let mut timed_out = false;
    if failures.is_empty() {
        let limit = settings.timeout(Stage::R0).saturating_sub(began.elapsed()).max(Duration::from_secs(1));
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
        failures
            .extend(s.life.findings.iter().filter(|f| f.kind == FindingKind::BuildFailed).map(|f| f.message.clone()));
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
                        let props = crate::util::raw::cap(props);
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
    // R1–R5 name the model the session speaks to (the one readiness discovered, if any).
    let effective = session.as_ref().map(|s| s.effective_profile(profile));
    let profile = effective.as_ref().unwrap_or(profile);
    let summary = match data["load_seconds"].as_f64() {
        Some(s) if failures.is_empty() => format!("ready after {s:.2}s"),
        _ if failures.is_empty() => "ready (attached)".into(),
        _ => failures[0].clone(),
    };
    bundle.finish(Stage::R0, began, Outcome::judged(failures, summary, data), timed_out, reporter)?;
    let r0_passed = bundle.report.stage(Stage::R0).is_some_and(|s| s.status == StageStatus::Pass);
    if !r0_passed {
        bundle.skip_rest("R0 failed: the run stops", true);
    }

    // R1–R5 on the same server, its health checked before each.
    let mut dead: Option<String> = None;
    // Samples of monitors stopped before the end (R3 pauses it around its restart).
    let mut samples_before = 0usize;
    for id in [Stage::R1, Stage::R2, Stage::R3, Stage::R4, Stage::R5] {
        if bundle.report.stage(id).is_none_or(|s| s.status != StageStatus::Pending) {
            continue;
        }
        let began = bundle.begin(id, reporter)?;
        if dead.is_none() {
            // The stage's record says why as words.
            dead = rt
                .block_on(alive(&client, profile, session.as_mut().and_then(Session::process_mut)))
                .err()
                .map(|e| e.to_string());
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
        let limit = stage_limit(settings, id, profile, opts);
        let ends = Instant::now() + limit;
        // When the stage's timeout falls: `ends`, unless R1 gives back the server's waits for other processes' CPUs
        // (`r1_correctness::ask_suite`).
        let stage_end = std::cell::Cell::new(ends);
        let work = async {
            match id {
                Stage::R1 => {
                    let threads = session.as_ref().map_or(Threads::Unreadable, Session::threads);
                    correctness(&client, profile, threads, ends, &stage_end).await
                }
                Stage::R2 => quality(&client, profile, dir).await,
                Stage::R3 => {
                    let restart = Restart {
                        session: session.as_mut(),
                        monitor: &mut monitor,
                        samples_taken: &mut samples_before,
                        dir,
                        base_url: &base_url,
                        clock,
                        lossless_against: opts.lossless_against,
                    };
                    determinism(&client, profile, restart, ends).await
                }
                Stage::R4 => {
                    saturation(&client, profile, session.as_mut().and_then(Session::process_mut), reporter).await
                }
                // R5: the loop runs R1 to R5.
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
        let finished = rt.block_on(async {
            tokio::pin!(work);
            loop {
                let end = stage_end.get();
                tokio::select! {
                    o = &mut work => break Some(o),
                    () = tokio::time::sleep_until(end.into()) => if Instant::now() >= stage_end.get() { break None },
                }
            }
        });
        let given_back = stage_end.get().saturating_duration_since(ends);
        let (outcome, timed_out) = match finished.ok_or(()) {
            Ok(o) => (o, false),
            Err(_) => (
                Outcome::judged(
                    vec![if given_back.is_zero() {
                        format!("stage timeout of {limit:.0?} reached; its requests were abandoned")
                    } else {
                        format!(
                            "stage timeout of {limit:.0?} reached, with {:.1}s given back for the server's waits for \
                             other processes' CPUs; its requests were abandoned",
                            given_back.as_secs_f64()
                        )
                    }],
                    "timed out".into(),
                    json!({}),
                ),
                true,
            ),
        };
        bundle.finish(id, began, outcome, timed_out, reporter)?;
        if let Some(status) = session.as_mut().and_then(Session::exited) {
            dead = Some(format!("exited ({})", crate::server::describe_exit(status)));
        }
    }

    // Down: the monitor stops just before R6, then the server.
    let samples_taken = samples_before + monitor.map(Monitor::stop).unwrap_or(0);
    drop(rt);
    let (stop, sentry, sentry_findings) = match session {
        Some(s) => {
            let (closed, mut findings) = s.close(profile, dead.is_some(), &opts.identity.runtime);
            // The lifecycle's own findings (killed, stuck, leftover processes) are judged with the kernel's in R6.
            let lifecycle = closed
                .life
                .findings
                .into_iter()
                .filter(|f| !matches!(f.kind, FindingKind::BuildFailed | FindingKind::Crash));
            findings.extend(lifecycle);
            (
                Some(closed.stop).filter(|s| {
                    !matches!(s, gauntlet_schema::StopOutcome::Attached | gauntlet_schema::StopOutcome::NotStarted)
                }),
                closed.sentry,
                findings,
            )
        }
        None => (None, gauntlet_schema::SentryRecord::default(), Vec::new()),
    };

    if bundle.report.stage(Stage::R6).is_some_and(|s| s.status == StageStatus::Pending) {
        let began = bundle.begin(Stage::R6, reporter)?;
        let outcome = resource_drift(dir, profile, samples_taken, &sentry, &sentry_findings, stop);
        bundle.finish(Stage::R6, began, outcome, false, reporter)?;
    }

    // R7: the bundle judged as `gauntlet verify` will judge it, then its manifest of sha256s.
    let began = bundle.begin(Stage::R7, reporter)?;
    let mut problems = verify::check(dir, false);
    problems.extend(verify::not_regular(dir));
    let files = verify::inventory(dir).map_err(|source| GateError::Out { path: dir.into(), source })?;
    let count = files.len();
    let status = if problems.is_empty() { StageStatus::Pass } else { StageStatus::Fail };
    let manifest = json!({"status": status, "failures": problems, "files": files});
    let summary = if problems.is_empty() {
        format!("{count} files hashed; every recomputed verdict equals the stored one")
    } else {
        problems[0].clone()
    };
    bundle.finish(
        Stage::R7,
        began,
        Outcome { status, summary, failures: problems, data: manifest },
        false,
        reporter,
    )?;

    bundle.report.verdict = fold(&bundle.report.stages);
    bundle.report.finished_at = Some(now_rfc3339());
    bundle.save()?;
    Ok(bundle.report)
}

/// Why the server is down between stages.
#[derive(Debug, thiserror::Error)]
enum Down {
    /// The spawned process exited; `how` is its exit described (a code or a signal).
    #[error("exited ({how})")]
    Exited { how: String },
    #[error("health answered HTTP {code}")]
    Status { code: u16 },
    #[error("health: {0}")]
    Health(#[source] crate::client::ClientError),
}

/// Between stages: the process still runs and its health endpoint answers 200.
async fn alive(client: &Client, profile: &Profile, process: Option<&mut ServerProcess>) -> Result<(), Down> {
    if let Some(p) = process
        && let Some(status) = p.exited()
    {
        return Err(Down::Exited { how: crate::server::describe_exit(status) });
    }
    match client.health(&profile.health_path, Duration::from_secs(5)).await {
        Ok(200) => Ok(()),
        Ok(code) => Err(Down::Status { code }),
        Err(e) => Err(Down::Health(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server down between stages is `Down`, of its kind, in the words the stage's record has always had.
    #[test]
    fn a_server_down_is_the_variant_of_why() {
        use std::os::unix::process::ExitStatusExt;
        let how = crate::server::describe_exit(std::process::ExitStatus::from_raw(9));
        let e = Down::Exited { how };
        assert_eq!(e.to_string(), "exited (signal 9)");
        assert_eq!(Down::Status { code: 503 }.to_string(), "health answered HTTP 503");
        let missing = crate::client::ClientError::MissingDone;
        let e = Down::Health(missing.clone());
        assert!(matches!(&e, Down::Health(crate::client::ClientError::MissingDone)), "{e:?}");
        assert_eq!(e.to_string(), format!("health: {missing}"));
    }
}
