//! The decision a reviewer may promote from a bundle, and the fold of stage rows into one verdict (the fold is
//! also what `verify` recomputes). Reads the bundle only; never runs a stage or writes a file.

use std::path::Path;

use serde_json::Value;

use super::{
    MANIFEST_FILE, Qualification, QualificationVerdict, REPORT_FILE, SNAPSHOT_FILE, StageRow, StageStatus,
    verify_bundle,
};
use crate::manifest::Stage;
use crate::store::{DECISION_VERSION, Decision, DecisionStage};
use crate::util::sha256_file;

/// The decision a reviewer may promote from the bundle in `dir`. Refused, with every reason, unless the bundle
/// verifies, every stage was selected, and the verdict is pass: a failed, inconclusive or partial qualification is
/// evidence, never a reference.
pub fn decision(dir: &Path) -> Result<Decision, Vec<String>> {
    let problems = verify_bundle(dir);
    if !problems.is_empty() {
        return Err(problems);
    }
    let read = |name: &str| -> Result<Value, Vec<String>> {
        let text = crate::util::bounded::read_text(&dir.join(name), crate::util::bounded::RECORD_CAP)
            .map_err(|e| vec![format!("{name}: {e}")])?;
        serde_json::from_str(&text).map_err(|e| vec![format!("{name}: {e}")])
    };
    let report: Qualification = serde_json::from_value(read(REPORT_FILE)?).map_err(|e| vec![e.to_string()])?;
    let mut refusals = Vec::new();
    if report.partial {
        let missing: Vec<&str> =
            Stage::ALL.iter().filter(|s| !report.selected.contains(s)).map(|s| s.as_str()).collect();
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
    let performance = crate::run::read_bench(dir).map_err(|e| vec![e.to_string()])?;
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
