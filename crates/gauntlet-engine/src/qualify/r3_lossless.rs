//! R3's losslessness step, for a profile with a draft and `lossless_against = "PROFILE"` (#31): greedy answers with
//! the draft must be the answers without it. After the matrix, R3 asks the whole suite once more on the draft's
//! server, as the gate asks it; then, while its restart row has the server stopped (so one server runs at a time,
//! on the port it freed), the profile without the draft runs the suite twice through the gate's own lifecycle: the
//! reference and the control. The comparison is the gate's (`crate::compare::lossless`): a divergence the control
//! did not show fails the stage, one the control shows too makes it inconclusive (the server differs from itself
//! there), and a reference that could not be run or compared is inconclusive with the reason, never a pass.
//!
//! The three answer sets are evidence files of the bundle ([`DRAFT_FILE`], [`REFERENCE_FILE`], [`CONTROL_FILE`]);
//! `verify` recomputes the comparison from them ([`recheck`]) and the stage's status with it ([`rule`]).

use std::path::Path;

use gauntlet_schema::lossless::LosslessRecord;
use gauntlet_schema::{CaseRecord, RunRecord, Severity};
use serde_json::{Value, json};

use super::StageStatus;
use crate::compare::lossless::LosslessError;
use crate::manifest::Profile;
use crate::run::{GateOptions, Silent, run_gate};

/// The draft's answers, as `{"suite": {"digest"}, "cases": [...]}` (the shape of a run record that the comparison
/// reads).
pub(crate) const DRAFT_FILE: &str = "lossless-draft.json";
/// The redacted run records of the profile without the draft: the reference and the control.
pub(crate) const REFERENCE_FILE: &str = "lossless-reference.json";
pub(crate) const CONTROL_FILE: &str = "lossless-control.json";

/// The two runs of the profile without the draft, or why there are none.
pub(super) type ReferenceRuns = Result<(RunRecord, RunRecord, String), String>;

/// Runs `reference` twice, the reference then the control, each with its own server (the gate's lifecycle, its
/// files under `lossless-reference/` and `lossless-control/`), and writes both redacted records into the bundle.
/// On a thread of its own: the gate builds its own runtime, which cannot start inside R3's. Returns both records and
/// the reference's identity digest.
pub(super) fn run_reference(reference: &Profile, dir: &Path) -> ReferenceRuns {
    std::thread::scope(|s| {
        s.spawn(|| run_reference_here(reference, dir))
            .join()
            .unwrap_or_else(|_| Err(format!("the runs of `{}` ended in a panic", reference.name)))
    })
}

fn run_reference_here(reference: &Profile, dir: &Path) -> ReferenceRuns {
    let name = &reference.name;
    let identity = crate::session::compute_identity(reference, &crate::home_dir())
        .map_err(|e| format!("the identity of `{name}` cannot be computed: {e}"))?;
    let mut runs = Vec::new();
    for (label, file) in [("reference", REFERENCE_FILE), ("control", CONTROL_FILE)] {
        let out = dir.join(format!("lossless-{label}"));
        let opts = GateOptions { out_dir: &out, identity: &identity, baseline: None, built: None, decode_spread: None };
        let run = run_gate(reference, &opts, &mut Silent).map_err(|e| format!("the {label} run of `{name}`: {e}"))?;
        let run = crate::run::redacted(&run).into_owned();
        let json = serde_json::to_vec_pretty(&run).map_err(|e| format!("{file}: {e}"))?;
        crate::util::write_atomic(&dir.join(file), &json).map_err(|e| format!("{file} could not be written: {e}"))?;
        if !run.server.loaded {
            return Err(format!("the {label} run of `{name}` did not load its server"));
        }
        runs.push(run);
    }
    let control = runs.pop().expect("two runs");
    let reference_run = runs.pop().expect("two runs");
    Ok((reference_run, control, identity.digest))
}

/// What R3 keeps of the step: the `lossless` member of its stage file, and the stage's failures (a divergence the
/// control did not show) and reasons for being inconclusive.
pub(super) struct Judged {
    pub data: Value,
    pub failures: Vec<String>,
    pub cannot_tell: Vec<String>,
    pub summary: String,
}

/// The draft's answers (`draft`, asked on the draft's server) against the reference runs; writes them as
/// [`DRAFT_FILE`].
pub(super) fn judge(
    dir: &Path,
    profile: &Profile,
    against: &str,
    draft: Vec<CaseRecord>,
    runs: ReferenceRuns,
) -> Judged {
    let draft = json!({"suite": {"digest": profile.suite.digest}, "cases": draft});
    let written = serde_json::to_vec_pretty(&draft)
        .map_err(|e| e.to_string())
        .and_then(|j| crate::util::write_atomic(&dir.join(DRAFT_FILE), &j).map_err(|e| e.to_string()));
    let not_checked = |why: String| {
        let why = format!("losslessness against `{against}` not checked: {why}");
        Judged {
            data: json!({"against": against, "not_checked": why}),
            failures: Vec::new(),
            summary: why.clone(),
            cannot_tell: vec![why],
        }
    };
    if let Err(e) = written {
        return not_checked(format!("{DRAFT_FILE} could not be written: {e}"));
    }
    let (reference, control, digest) = match runs {
        Ok(r) => r,
        Err(why) => return not_checked(why),
    };
    let value = |r: &RunRecord| serde_json::to_value(r).unwrap_or_default();
    let record = match compared(&value(&reference), &draft, &value(&control), against, &digest) {
        Ok(r) => r,
        Err(why) => return not_checked(why.to_string()),
    };
    let (failures, cannot_tell) = rule(&record);
    let summary = match (&failures.first(), &cannot_tell.first()) {
        (Some(f), _) => f.to_string(),
        (None, Some(c)) => c.to_string(),
        (None, None) => format!("lossless against `{against}` with a control: {}", record.tally()),
    };
    let mut data = serde_json::to_value(&record).unwrap_or_default();
    data["draft_record"] = json!(DRAFT_FILE);
    Judged { data, failures, cannot_tell, summary }
}

/// Why the three answer sets cannot be compared: the control's jitter cannot be measured, or the draft's answers
/// cannot be set against the reference's.
#[derive(Debug, thiserror::Error)]
enum ComparedError {
    #[error(transparent)]
    Jitter(LosslessError),
    #[error("against `{against}`: {source}")]
    Against {
        against: String,
        #[source]
        source: LosslessError,
    },
}

/// The comparison itself, from the three answer sets as JSON (what `verify` reads back from the bundle).
fn compared(a: &Value, b: &Value, c: &Value, against: &str, digest: &str) -> Result<LosslessRecord, ComparedError> {
    let jitter = crate::compare::lossless::control_jitter(a, c).map_err(ComparedError::Jitter)?;
    let result = crate::compare::lossless::lossless_judged(a, b, Some(c), jitter.as_ref())
        .map_err(|source| ComparedError::Against { against: against.to_owned(), source })?;
    Ok(LosslessRecord {
        against: against.to_owned(),
        reference_identity_digest: digest.to_owned(),
        reference_record: REFERENCE_FILE.into(),
        control_record: CONTROL_FILE.into(),
        control_jitter: jitter,
        result,
    })
}

/// The step's rule (recomputed by `verify`): each case that differs where the control reproduced the reference, or
/// that the draft did not answer, is a failure; each case where the control differs too is a reason the stage
/// cannot tell. The words are the gate's findings'.
pub(super) fn rule(record: &LosslessRecord) -> (Vec<String>, Vec<String>) {
    let (mut failures, mut cannot_tell) = (Vec::new(), Vec::new());
    for f in crate::run::lossless::findings(record) {
        let line = match &f.case {
            Some(case) => format!("lossless: case `{case}`: {}", f.message),
            None => format!("lossless: {}", f.message),
        };
        match f.severity {
            Severity::Fail => failures.push(line),
            Severity::Warn => cannot_tell.push(line),
            _ => {}
        }
    }
    // A verdict that is not a pass always says why, even where no single case does.
    match record.result.verdict.as_str() {
        "fail" if failures.is_empty() => failures.push(format!("lossless against `{}`: fail", record.against)),
        "inconclusive" if failures.is_empty() && cannot_tell.is_empty() => {
            cannot_tell.push(format!("lossless against `{}`: no case to compare", record.against))
        }
        _ => {}
    }
    (failures, cannot_tell)
}

/// R3's status from the matrix's failures and the step's.
pub(super) fn status(failures: &[String], cannot_tell: &[String]) -> StageStatus {
    if !failures.is_empty() {
        StageStatus::Fail
    } else if !cannot_tell.is_empty() {
        StageStatus::Inconclusive
    } else {
        StageStatus::Pass
    }
}

/// `verify`'s half: the comparison recomputed from the bundle's three answer sets must equal the stored one.
/// Returns the step's failures and reasons it cannot tell, as [`rule`] gives them from the recomputed comparison.
pub(super) fn recheck(
    stored: &Value,
    read: &mut dyn FnMut(&str) -> Option<Value>,
    problems: &mut Vec<String>,
) -> (Vec<String>, Vec<String>) {
    if let Some(why) = stored["not_checked"].as_str() {
        return (Vec::new(), vec![why.to_owned()]);
    }
    let record: LosslessRecord = match serde_json::from_value(stored.clone()) {
        Ok(r) => r,
        Err(e) => {
            problems.push(format!("r3-determinism.json: lossless: malformed: {e}"));
            return (Vec::new(), vec!["lossless: unreadable".into()]);
        }
    };
    let names =
        [record.reference_record.as_str(), stored["draft_record"].as_str().unwrap_or(""), &record.control_record];
    if names != [REFERENCE_FILE, DRAFT_FILE, CONTROL_FILE] {
        problems.push(format!("r3-determinism.json: lossless names {names:?}, not the bundle's answer files"));
        return (Vec::new(), vec!["lossless: unreadable".into()]);
    }
    let (Some(a), Some(b), Some(c)) = (read(REFERENCE_FILE), read(DRAFT_FILE), read(CONTROL_FILE)) else {
        return (Vec::new(), vec!["lossless: its answer files are missing".into()]);
    };
    match compared(&a, &b, &c, &record.against, &record.reference_identity_digest) {
        Ok(again) => {
            if again != record {
                problems.push(format!(
                    "r3-determinism.json: lossless says {} ({}) but its answer files give {} ({})",
                    record.result.verdict,
                    record.tally(),
                    again.result.verdict,
                    again.tally()
                ));
            }
            rule(&again)
        }
        Err(e) => {
            problems.push(format!("r3-determinism.json: lossless cannot be recomputed: {e}"));
            (Vec::new(), vec![e.to_string()])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A control whose answers cannot be read is `Jitter` (the comparison's words alone); a draft that cannot be set
    /// against the reference is `Against`, the reference's name first.
    #[test]
    fn answers_that_cannot_be_compared_are_the_variant_of_why() {
        let run = json!({"suite": {"digest": "s1"}, "cases": [{"id": "x", "observed": "a"}]});
        let e = compared(&run, &run, &json!({}), "plain", "d").unwrap_err();
        assert!(matches!(e, ComparedError::Jitter(LosslessError::NoCases { side: "control" })), "{e:?}");
        assert_eq!(e.to_string(), "control: no `cases` array: not a gauntlet run record");
        let e = compared(&run, &json!({"suite": {"digest": "s2"}}), &run, "plain", "d").unwrap_err();
        assert!(
            matches!(&e, ComparedError::Against { against, source: LosslessError::Suites { .. } } if against == "plain"),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "against `plain`: A and B ran different suites (\"s1\" and \"s2\"): their answers cannot be compared"
        );
    }
}
