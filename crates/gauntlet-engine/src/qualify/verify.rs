//! Checking an evidence bundle offline (R7, and `gauntlet verify`). It fails closed: a missing or unreadable file,
//! a file of another run, an identity that does not match, or a stored verdict that its raw data does not give
//! again is a problem, and every problem is listed, not just the first.

use std::path::Path;

use serde_json::Value;

use super::r2_lm_eval;
use super::{
    BASELINE_FILE, EvidenceFile, HTML_FILE, MANIFEST_FILE, MONITOR_FILE, QUALIFICATION_VERSION, Qualification,
    QualityItem, REPORT_FILE, SNAPSHOT_FILE, StageStatus, correctness_failures, drift, fold, quality_problems,
    quality_verdict, words,
};
use crate::manifest::{LmEval, QualifySettings, QualitySet, Stage};
use crate::run::{BenchRecord, Level, Workload};
use crate::util::bounded::{self, EVIDENCE_CAP, RECORD_CAP, ReadError, plain_name};
use gauntlet_schema::IdentityRecord;
use gauntlet_schema::bench::Call;
use gauntlet_schema::determinism::{
    DETERMINISM_FILE, DETERMINISM_READABLE, DeterminismMatrix, matrix_failures, row_verdict,
};

/// Files that describe the bundle rather than being evidence: not hashed into the manifest.
const NOT_HASHED: [&str; 4] = [REPORT_FILE, "qualification.md", MANIFEST_FILE, HTML_FILE];

/// A JSONL quality set is copied into the bundle under this name, so `verify` rebuilds R2's problems from the
/// bundle alone and never reads a path the bundle names.
pub(crate) const QUALITY_SET_FILE: &str = "quality-set.jsonl";

/// Caps on numbers a bundle states, checked before any arithmetic or allocation uses them (the manifest's own
/// limits: a bundle that states more was not produced by gauntlet).
const MAX_MONITOR_WINDOW: usize = 10_000;
const MAX_QUALITY_COUNT: usize = 100_000;
const MAX_RESAMPLES: usize = 1_000_000;

/// Every problem with the finished bundle in `dir`; empty = valid.
pub fn verify_bundle(dir: &Path) -> Vec<String> {
    check(dir, true)
}

fn read_json(dir: &Path, name: &str, problems: &mut Vec<String>) -> Option<Value> {
    if !plain_name(name) {
        problems.push(format!("`{}` is not a file name of the bundle (refused)", name.escape_debug()));
        return None;
    }
    let text = match bounded::read_text(&dir.join(name), RECORD_CAP) {
        Ok(t) => t,
        Err(ReadError::NotFound) => {
            problems.push(format!("missing evidence: {name}"));
            return None;
        }
        Err(e) => {
            problems.push(format!("{name}: unreadable: {e}"));
            return None;
        }
    };
    match serde_json::from_str(&text) {
        Ok(v) => Some(v),
        Err(e) => {
            problems.push(format!("{name}: not JSON: {e}"));
            None
        }
    }
}

fn parse<T: serde::de::DeserializeOwned>(v: &Value, what: &str, problems: &mut Vec<String>) -> Option<T> {
    match serde_json::from_value(v.clone()) {
        Ok(x) => Some(x),
        Err(e) => {
            problems.push(format!("{what}: malformed: {e}"));
            None
        }
    }
}

/// `finished`: the run is over and R7 wrote the manifest (false while R7 itself runs).
pub(super) fn check(dir: &Path, finished: bool) -> Vec<String> {
    let mut problems = Vec::new();
    let Some(report) = read_json(dir, REPORT_FILE, &mut problems) else { return problems };
    if report["qualification_version"].as_u64() != Some(QUALIFICATION_VERSION as u64) {
        problems.push(format!(
            "{REPORT_FILE}: qualification_version {} is not one this gauntlet reads ({QUALIFICATION_VERSION})",
            report["qualification_version"]
        ));
        return problems;
    }
    let Some(report) = parse::<Qualification>(&report, REPORT_FILE, &mut problems) else { return problems };
    let Some(snapshot) = read_json(dir, SNAPSHOT_FILE, &mut problems) else { return problems };
    let run_id = report.run_id.as_str();
    if snapshot["run_id"].as_str() != Some(run_id) {
        problems.push(format!("{SNAPSHOT_FILE} belongs to another run (run_id {})", snapshot["run_id"]));
    }
    let digest = crate::identity::identity_digest(&IdentityRecord::from_value(snapshot["identity"].clone()));
    if snapshot["identity_digest"].as_str() != Some(digest.as_str()) || report.identity_digest != digest {
        problems.push(format!(
            "identity mismatch: {SNAPSHOT_FILE}'s identity hashes to {digest}, it records {} and {REPORT_FILE} {}",
            snapshot["identity_digest"], report.identity_digest
        ));
    }
    let Some(settings) =
        parse::<QualifySettings>(&snapshot["qualify"], "profile.snapshot.json: qualify", &mut problems)
    else {
        return problems;
    };

    for row in &report.stages {
        if row.id == Stage::R7 && !finished {
            continue;
        }
        match row.status {
            StageStatus::NotRun => continue,
            StageStatus::Pass | StageStatus::Fail | StageStatus::Inconclusive => {}
            other => {
                problems.push(format!("{}: stage never finished (status `{other}`)", row.id));
                continue;
            }
        }
        let Some(file) = read_json(dir, &row.file, &mut problems) else { continue };
        if file["run_id"].as_str() != Some(run_id) {
            problems
                .push(format!("{} belongs to another run (run_id {}, this run {run_id})", row.file, file["run_id"]));
            continue;
        }
        if file["stage"].as_str() != Some(row.id.as_str()) {
            problems.push(format!("{}: says it is stage {}, not {}", row.file, file["stage"], row.id));
        }
        if file["status"].as_str() != Some(row.status.as_str()) {
            problems.push(format!("{}: status {} but the report says {}", row.file, file["status"], row.status));
        }
        if row.timed_out || !file["server_down"].is_null() {
            // Abandoned at its timeout, or not started on a dead server: no data to recompute, and it failed.
            if row.status != StageStatus::Fail {
                problems.push(format!("{}: timed out but recorded as {}", row.id, row.status));
            }
            continue;
        }
        let recomputed = match row.id {
            Stage::R0 => r0(&file, &snapshot, &report, &mut problems),
            Stage::R1 => r1(&file, &snapshot, &mut problems),
            Stage::R2 => r2(dir, &file, &settings, &mut problems),
            Stage::R3 => r3(dir, &file, &mut problems),
            Stage::R4 => {
                levels(&file, Stage::R4, &mut problems);
                None
            }
            Stage::R5 => r5(dir, &file, &mut problems),
            Stage::R6 => r6(dir, &file, &settings, &mut problems),
            Stage::R7 => r7(dir, &file, &mut problems),
        };
        if let Some(status) = recomputed
            && status != row.status
        {
            problems
                .push(format!("{}: recomputed from its raw data the stage is {status}, not {}", row.id, row.status));
        }
    }
    if finished {
        if report.finished_at.is_none() {
            problems.push("the run did not finish (no finished_at): the bundle is incomplete".into());
        }
        let verdict = fold(&report.stages);
        if report.verdict != verdict {
            problems.push(format!("{REPORT_FILE}: verdict {} but its stages give {verdict}", report.verdict));
        }
    }
    problems
}

fn r0(file: &Value, snapshot: &Value, report: &Qualification, problems: &mut Vec<String>) -> Option<StageStatus> {
    let digest = crate::identity::identity_digest(&IdentityRecord::from_value(file["identity"].clone()));
    if file["identity_digest"].as_str() != Some(digest.as_str()) || digest != report.identity_digest {
        problems.push(format!(
            "identity mismatch: r0-identity.json's identity hashes to {digest}, the run's identity is {}",
            report.identity_digest
        ));
    }
    let recorded = &snapshot["identity"]["recipe"]["model"]["sha256"];
    if !file["model_sha256"].is_null() && file["model_sha256"] != *recorded && file["status"] == "pass" {
        problems
            .push(format!("r0-identity.json: model sha256 {} is not the identity's {recorded}", file["model_sha256"]));
    }
    if file["command"].is_array() && file["command"] != snapshot["command"] {
        problems.push("r0-identity.json: the server command differs from the snapshot's".into());
    }
    None
}

fn r1(file: &Value, snapshot: &Value, problems: &mut Vec<String>) -> Option<StageStatus> {
    let cases: Vec<gauntlet_schema::CaseRecord> = parse(&file["cases"], "r1-correctness.json: cases", problems)?;
    let expected: Vec<String> = parse(&snapshot["expected_failures"], "profile.snapshot.json", problems)?;
    let failures = correctness_failures(&cases, &expected);
    Some(if failures.is_empty() { StageStatus::Pass } else { StageStatus::Fail })
}

fn r2(dir: &Path, file: &Value, settings: &QualifySettings, problems: &mut Vec<String>) -> Option<StageStatus> {
    if let QualitySet::LmEval(lm) = &settings.quality.set {
        return r2_lm_eval(dir, file, lm, settings.quality.floor, problems);
    }
    let items: Vec<QualityItem> = parse(&file["items"], "r2-quality.json: items", problems)?;
    let rebuilt = match &settings.quality.set {
        // The count is checked before the set is generated: a bundle that claims 10^12 problems is refused, not
        // allocated.
        QualitySet::Arithmetic { count, .. } if *count != items.len() || *count > MAX_QUALITY_COUNT => {
            Err(format!("the declared set has {count} problems, r2-quality.json has {}", items.len()))
        }
        QualitySet::Arithmetic { .. } => quality_problems(&settings.quality.set).map_err(|e| e.to_string()),
        QualitySet::Jsonl { .. } => match bounded::read_text(&dir.join(QUALITY_SET_FILE), RECORD_CAP) {
            Ok(text) => words::read_gsm8k(&text)
                .map(|set| (set, Value::Null))
                .map_err(|e| format!("{QUALITY_SET_FILE}: {}", e.join("; "))),
            Err(e) => Err(format!("{QUALITY_SET_FILE} (the set's copy in the bundle): {e}")),
        },
        // Answered by r2_lm_eval above; never reached.
        QualitySet::LmEval(_) => Err("an lm-eval set has no problems of its own".into()),
    };
    match rebuilt {
        Ok((set, _)) => {
            let same = set.len() == items.len()
                && set.iter().zip(&items).all(|(p, i)| p.id == i.id && p.question == i.question && p.gold == i.gold);
            if !same {
                problems
                    .push("r2-quality.json: its problems are not the declared set's (question or gold changed)".into());
            }
        }
        Err(e) => problems.push(format!("R2: cannot rebuild the problem set: {e}")),
    }
    let mut rescored = items.clone();
    for i in &mut rescored {
        i.correct = i.reply.as_deref().is_some_and(|r| words::is_correct(r, &i.gold));
    }
    let changed: Vec<&str> =
        items.iter().zip(&rescored).filter(|(a, b)| a.correct != b.correct).map(|(a, _)| a.id.as_str()).collect();
    if !changed.is_empty() {
        problems.push(format!("r2-quality.json: scoring the replies again changes {}", changed.join(", ")));
    }
    let (accuracy, failures) = quality_verdict(&rescored, settings.quality.floor);
    if file["accuracy"].as_f64() != Some(accuracy) {
        problems.push(format!("r2-quality.json: accuracy {} but the replies give {accuracy}", file["accuracy"]));
    }
    Some(if failures.is_empty() { StageStatus::Pass } else { StageStatus::Fail })
}

/// R2 by lm-eval: the score is taken again from the results file in the bundle, each task's score is computed
/// again from its per-document samples, and the rule is applied again to both.
fn r2_lm_eval(dir: &Path, file: &Value, lm: &LmEval, floor: f64, problems: &mut Vec<String>) -> Option<StageStatus> {
    let data = &file["lm_eval"];
    let exit_ok = data["exit_ok"].as_bool() == Some(true);
    let scored = match data["results"].as_str() {
        None => Err(vec!["lm-eval wrote no results".to_owned()]),
        Some(name) if name != r2_lm_eval::RESULTS_FILE => {
            problems.push(format!("r2-quality.json: results file `{name}` is not {}", r2_lm_eval::RESULTS_FILE));
            return None;
        }
        Some(name) => {
            let results = match r2_lm_eval::read_bounded(dir, name) {
                Ok(t) => t,
                Err(ReadError::NotFound) => {
                    problems.push(format!("missing evidence: {name}"));
                    return None;
                }
                Err(e) => {
                    problems.push(format!("{name}: unreadable: {e}"));
                    return None;
                }
            };
            let Ok(results) = serde_json::from_str::<Value>(&results) else {
                problems.push(format!("{name}: not JSON"));
                return None;
            };
            r2_lm_eval::scores(&results, lm)
        }
    };
    if let Ok(scores) = &scored {
        let stored: Option<Vec<r2_lm_eval::TaskScore>> = serde_json::from_value(data["scores"].clone()).ok();
        if stored.as_ref() != Some(scores) {
            problems.push(format!("r2-quality.json: its scores are not those of {}", r2_lm_eval::RESULTS_FILE));
        }
        for s in scores {
            let Some(name) = r2_lm_eval::samples_file(&s.task) else {
                problems.push(format!(
                    "{SNAPSHOT_FILE}: `{}` is not an lm-eval task name (refused: it would name a file outside the \
                     bundle)",
                    s.task.escape_debug()
                ));
                continue;
            };
            let again = r2_lm_eval::read_bounded(dir, &name)
                .map_err(|e| e.to_string())
                .and_then(|t| r2_lm_eval::score_from_samples(&t, &s.metric).map_err(|e| e.to_string()));
            match again {
                Err(e) => problems.push(format!("{name}: cannot score the samples again: {e}")),
                Ok((v, _)) if (v - s.value).abs() > 1e-9 => {
                    problems.push(format!("{name}: the samples give {} {v}, the results say {}", s.metric, s.value))
                }
                Ok(_) => {}
            }
        }
    }
    let (score, failures) = r2_lm_eval::lm_eval_verdict(exit_ok, &scored, floor);
    if file["accuracy"].as_f64() != Some(score) {
        problems.push(format!("r2-quality.json: score {} but lm-eval's results give {score}", file["accuracy"]));
    }
    Some(if failures.is_empty() { StageStatus::Pass } else { StageStatus::Fail })
}

/// R3: every comparison's outcome and divergence index again from its texts, every row's verdict from its
/// comparisons, the stage file's rows equal to the matrix's, and the stage's status from the matrix rule.
fn r3(dir: &Path, file: &Value, problems: &mut Vec<String>) -> Option<StageStatus> {
    let name = file["matrix_file"].as_str().unwrap_or(DETERMINISM_FILE);
    if name != DETERMINISM_FILE {
        problems.push(format!("r3-determinism.json: names `{name}` as its matrix, not {DETERMINISM_FILE}"));
        return None;
    }
    let raw = read_json(dir, DETERMINISM_FILE, problems)?;
    let mut matrix: DeterminismMatrix = parse(&raw, DETERMINISM_FILE, problems)?;
    if !DETERMINISM_READABLE.contains(&matrix.determinism_version) {
        problems.push(format!(
            "{DETERMINISM_FILE}: determinism_version {} is not readable here",
            matrix.determinism_version
        ));
        return None;
    }
    let stored_rows: Vec<(String, String)> = file["rows"]
        .as_array()
        .map(|rows| rows.iter().map(|r| (r["row"].to_string(), r["verdict"].to_string())).collect())
        .unwrap_or_default();
    let matrix_rows: Vec<(String, String)> =
        matrix.rows.iter().map(|r| (json_word(&r.row), json_word(&r.verdict))).collect();
    if stored_rows != matrix_rows {
        problems.push(format!(
            "r3-determinism.json: its rows {stored_rows:?} are not {DETERMINISM_FILE}'s {matrix_rows:?}"
        ));
    }
    for r in &mut matrix.rows {
        for c in &r.comparisons {
            // A divergence's class from its recorded gap, swing and jitter: a tampered `near-tie` is caught here.
            if let Some(t) = &c.token
                && t.recomputed_class() != t.class
            {
                problems.push(format!(
                    "{DETERMINISM_FILE}: row {} case `{}` copy {} calls its divergence {} but its numbers give {}",
                    r.row.as_str(),
                    c.case,
                    c.copy,
                    t.class.as_str(),
                    t.recomputed_class().as_str()
                ));
            }
            let (outcome, at) = c.recompute();
            if (outcome, at) != (c.outcome, c.char_index) {
                problems.push(format!(
                    "{DETERMINISM_FILE}: row {} case `{}` copy {} says {:?} at {:?}; its texts give {outcome:?} at {at:?}",
                    r.row.as_str(), c.case, c.copy, c.outcome, c.char_index
                ));
            }
        }
        let again = row_verdict(&r.comparisons);
        // A row that did not run has no comparisons either way; its stored reason stands.
        if again != r.verdict {
            problems.push(format!(
                "{DETERMINISM_FILE}: row {} says {} but its comparisons give {}",
                r.row.as_str(),
                r.verdict.as_str(),
                again.as_str()
            ));
            r.verdict = again;
        }
    }
    let mut failures = matrix_failures(&matrix);
    let mut cannot_tell = Vec::new();
    if !file["lossless"].is_null() {
        let mut read = |name: &str| read_json(dir, name, problems);
        let mut found = Vec::new();
        let (f, c) = super::r3_lossless::recheck(&file["lossless"], &mut read, &mut found);
        problems.extend(found);
        failures.extend(f);
        cannot_tell = c;
    }
    Some(super::r3_lossless::status(&failures, &cannot_tell))
}

fn json_word<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v).map(|v| v.to_string()).unwrap_or_default()
}

/// Recomputes every level's metrics and per-batch samples from its raw batches; they must be equal.
fn levels(file: &Value, stage: Stage, problems: &mut Vec<String>) -> Option<Vec<Level>> {
    let workload: Workload = parse(&file["workload"], &format!("{stage}: workload"), problems)?;
    let stored: Vec<Level> = parse(&file["levels"], &format!("{stage}: levels"), problems)?;
    let mut out = Vec::new();
    for l in &stored {
        let again = crate::run::level(l.concurrency, l.batches.clone(), &workload);
        if again.samples != l.samples || again.batches_per_sample != l.batches_per_sample {
            problems.push(format!("{stage}: c{} samples differ from those its raw timelines give", l.concurrency));
        }
        // A record from before sub-sessions has none to check; one that has them must have the batches' own.
        if l.sub_sessions.is_some() && again.sub_sessions != l.sub_sessions {
            problems.push(format!("{stage}: c{} sub-sessions differ from those its raw timelines give", l.concurrency));
        }
        if again.metrics != l.metrics {
            problems.push(format!("{stage}: c{} metrics differ from those its raw timelines give", l.concurrency));
        }
        out.push(Level { comparisons: l.comparisons.clone(), ..again });
    }
    Some(out)
}

fn r5(dir: &Path, file: &Value, problems: &mut Vec<String>) -> Option<StageStatus> {
    let mut recomputed = levels(file, Stage::R5, problems)?;
    let baseline = if file["baseline"].is_null() {
        None
    } else {
        let v = read_json(dir, BASELINE_FILE, problems)?;
        Some(parse::<BenchRecord>(&v, BASELINE_FILE, problems)?)
    };
    let rules: crate::bench::stats::Rules = parse(&file["rules"], "R5: rules", problems)?;
    if rules.resamples > MAX_RESAMPLES {
        problems.push(format!(
            "R5: {} bootstrap resamples is beyond any gauntlet run (≤ {MAX_RESAMPLES})",
            rules.resamples
        ));
        return None;
    }
    if !(rules.confidence > 0.0 && rules.confidence < 1.0) {
        problems.push(format!("R5: a confidence of {} is not between 0 and 1", rules.confidence));
        return None;
    }
    let workload: Workload = parse(&file["workload"], "R5: workload", problems)?;
    let stored: Vec<Level> = parse(&file["levels"], "R5: levels", problems)?;
    let spreads = crate::run::recorded_spreads(&stored, &rules);
    // The deciding metrics the file names (absent before bench version 15: every compared metric decided).
    let deciding: Option<crate::run::Deciding> = match file.get("deciding") {
        None | Some(Value::Null) => None,
        Some(d) => Some(parse(d, "R5: deciding", problems)?),
    };
    let (verdict, _) =
        crate::run::assess(&mut recomputed, &workload, baseline.as_ref(), true, &rules, &spreads, deciding.as_ref());
    if file["verdict"].as_str() != Some(verdict.as_str()) {
        problems.push(format!("R5: the samples give the verdict {verdict}, the file says {}", file["verdict"]));
    }
    let calls = |ls: &[Level]| -> Vec<(usize, String, Call)> {
        ls.iter().flat_map(|l| l.comparisons.iter().map(|c| (l.concurrency, c.metric.clone(), c.call))).collect()
    };
    if calls(&stored) != calls(&recomputed) {
        problems.push("R5: comparing the samples with the baseline again gives other calls".into());
    }
    None
}

fn r6(dir: &Path, file: &Value, settings: &QualifySettings, problems: &mut Vec<String>) -> Option<StageStatus> {
    if settings.monitor.window == 0 || settings.monitor.window > MAX_MONITOR_WINDOW {
        problems.push(format!(
            "profile.snapshot.json: monitor window {} is outside 1..={MAX_MONITOR_WINDOW}",
            settings.monitor.window
        ));
        return None;
    }
    let text = match bounded::read_text(&dir.join(MONITOR_FILE), RECORD_CAP) {
        Ok(t) => t,
        Err(ReadError::NotFound) => {
            problems.push(format!("missing evidence: {MONITOR_FILE}"));
            return None;
        }
        Err(e) => {
            problems.push(format!("{MONITOR_FILE}: {e}"));
            return None;
        }
    };
    let samples = match drift::read_samples(&text) {
        Ok(s) => s,
        Err(e) => {
            problems.push(format!("{MONITOR_FILE}: {e}"));
            return None;
        }
    };
    let again = drift::evaluate(&samples, &settings.monitor);
    if serde_json::to_value(&again).ok().as_ref() != Some(&file["drift"]) {
        problems.push(format!("R6: the drift verdict recomputed from {MONITOR_FILE} differs from r6-drift.json"));
    }
    if again.status == "fail" && file["status"] == "pass" {
        return Some(StageStatus::Fail);
    }
    None
}

fn r7(dir: &Path, file: &Value, problems: &mut Vec<String>) -> Option<StageStatus> {
    let Some(listed) = file["files"].as_array() else {
        problems.push(format!("{MANIFEST_FILE}: no file list"));
        return None;
    };
    let mut names = Vec::new();
    for f in listed {
        let Ok(EvidenceFile { path, sha256: sha, bytes }) = serde_json::from_value::<EvidenceFile>(f.clone()) else {
            problems.push(format!("{MANIFEST_FILE}: malformed entry {f}"));
            continue;
        };
        // Evidence files are plain names in the bundle's folder: anything else would be read outside it.
        if !plain_name(&path) {
            problems.push(format!("{MANIFEST_FILE}: `{}` is not a file name of the bundle", path.escape_debug()));
            continue;
        }
        names.push(path.clone());
        match bounded::sha256(&dir.join(&path), EVIDENCE_CAP) {
            Err(ReadError::NotFound) => problems.push(format!("missing evidence: {path}")),
            Err(e) => problems.push(format!("{path}: {e}")),
            Ok((actual, _)) if actual != sha => {
                problems.push(format!("{path}: sha256 is {actual}, the manifest says {sha}"))
            }
            Ok((_, size)) if size != bytes => problems.push(format!("{path}: {size} bytes, the manifest says {bytes}")),
            Ok(_) => {}
        }
    }
    problems.extend(not_regular(dir));
    match inventory(dir) {
        Ok(present) => {
            for p in present {
                if !names.contains(&p.path) {
                    problems.push(format!("{} is not in {MANIFEST_FILE}", p.path));
                }
            }
        }
        Err(e) => problems.push(format!("cannot list the bundle: {e}")),
    }
    None
}

/// Evidence is regular files: a symlink (one planted as `server.log`), a FIFO or a device in the bundle is a
/// problem, never followed. R7 and `verify` both judge it, so R7 cannot pass a bundle `verify` calls invalid.
pub(super) fn not_regular(dir: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| !t.is_file() && !t.is_dir()) {
                let name = e.file_name().to_string_lossy().into_owned();
                problems.push(format!("`{}` is not a regular file (refused)", name.escape_debug()));
            }
        }
    }
    problems.sort();
    problems
}

/// Every evidence file of the bundle with its sha256 and size, sorted by name.
pub(super) fn inventory(dir: &Path) -> std::io::Result<Vec<EvidenceFile>> {
    let mut out = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || NOT_HASHED.contains(&name.as_str()) || !e.file_type()?.is_file() {
            continue;
        }
        let (sha256, bytes) = bounded::sha256(&e.path(), EVIDENCE_CAP).map_err(std::io::Error::other)?;
        out.push(EvidenceFile { sha256, path: name, bytes });
    }
    Ok(out)
}
