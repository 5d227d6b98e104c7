//! Losslessness in the gate (`lossless_against = "PROFILE"`): after a profile with a draft ran its suite, the
//! named profile (the same server without the draft) runs the same suite twice, one server lifecycle each (the
//! gate's own, [`run_gate`]): the reference, then the control. The draft's greedy answers are compared with the
//! reference's, and the control says how far the server without the draft differs from itself, so that its own
//! nondeterminism is never blamed on the draft (`crate::compare::lossless`):
//! - the draft's answer differs where the control reproduced the reference: `lossless-differs`, a failure, naming
//!   the token, both sides' logprobs and alternatives (in run.json), the gap and the class against the control's
//!   measured jitter;
//! - both differ: `lossless-cannot-tell`, a warning saying that this case cannot tell;
//! - a near-tie flip whose checks pass, or no difference at all: the note `lossless`.

use std::path::Path;

use gauntlet_schema::lossless::LosslessRecord;
use gauntlet_schema::{Finding, FindingKind, RunRecord, Severity};

use super::gate::{GateError, GateOptions, Reporter, run_gate};
use crate::manifest::Profile;

/// The reference's and the control's run records, under the run's folder.
pub const REFERENCE_RECORD: &str = "lossless/reference/run.json";
pub const CONTROL_RECORD: &str = "lossless/control/run.json";

/// Runs `reference` twice and judges `record` against it; the findings go into `record`, its verdict is folded
/// again, and `record.lossless` holds the comparison. A reference that cannot be compared (another suite, a run
/// that did not load) is a `lossless-cannot-tell` warning with the reason, never a pass.
pub fn check_lossless(
    record: &mut RunRecord,
    reference: &Profile,
    out_dir: &Path,
    reporter: &mut dyn Reporter,
) -> Result<(), GateError> {
    let home = crate::home_dir();
    let identity = match crate::session::compute_identity(reference, &home) {
        Ok(id) => id,
        Err(e) => {
            cannot_tell(record, format!("the identity of `{}` cannot be computed: {e}", reference.name));
            return Ok(());
        }
    };
    let mut runs = Vec::new();
    for (label, rel) in [("reference", REFERENCE_RECORD), ("control", CONTROL_RECORD)] {
        let dir = out_dir.join(Path::new(rel).parent().unwrap_or(Path::new(label)));
        let opts = GateOptions { out_dir: &dir, identity: &identity, baseline: None, built: None, decode_spread: None };
        let run = run_gate(reference, &opts, reporter)?;
        let run = super::redacted(&run).into_owned();
        let written = serde_json::to_string_pretty(&run)
            .map_err(std::io::Error::other)
            .and_then(|json| crate::util::write_atomic(&dir.join("run.json"), json.as_bytes()));
        written.map_err(|source| GateError::Out { path: dir.clone(), source })?;
        runs.push(run);
    }
    let (reference_run, control_run) = (&runs[0], &runs[1]);
    for (label, run) in [("reference", reference_run), ("control", control_run)] {
        if !run.server.loaded {
            cannot_tell(record, format!("the {label} run of `{}` did not load its server", reference.name));
            return Ok(());
        }
    }
    let value = |r: &RunRecord| serde_json::to_value(r).unwrap_or_default();
    let (a, b, c) = (value(reference_run), value(record), value(control_run));
    let jitter = match crate::compare::lossless::control_jitter(&a, &c) {
        Ok(j) => j,
        Err(e) => {
            cannot_tell(record, e.to_string());
            return Ok(());
        }
    };
    let result = match crate::compare::lossless::lossless_judged(&a, &b, Some(&c), jitter.as_ref()) {
        Ok(r) => r,
        Err(e) => {
            cannot_tell(record, format!("against `{}`: {e}", reference.name));
            return Ok(());
        }
    };
    let lossless = LosslessRecord {
        against: reference.name.clone(),
        reference_identity_digest: identity.digest.clone(),
        reference_record: REFERENCE_RECORD.into(),
        control_record: CONTROL_RECORD.into(),
        control_jitter: jitter,
        result,
    };
    record.findings.extend(findings(&lossless));
    record.lossless = Some(lossless);
    record.verdict = crate::verdict::fold(&record.findings);
    Ok(())
}

fn cannot_tell(record: &mut RunRecord, why: String) {
    record.findings.push(Finding {
        kind: FindingKind::LosslessCannotTell,
        severity: Severity::Warn,
        message: format!("losslessness not checked: {why}"),
        case: None,
    });
    record.verdict = crate::verdict::fold(&record.findings);
}

/// One finding per case that is not identical, and one summary note when none differs.
pub fn findings(l: &LosslessRecord) -> Vec<Finding> {
    let against = &l.against;
    let mut out = Vec::new();
    for c in &l.result.cases {
        let at =
            c.token_divergence.as_ref().map(|d| d.describe()).or_else(|| c.char_index.map(|i| format!("char {i}")));
        let at = at.unwrap_or_else(|| "an unknown place".into());
        let (kind, severity, message) = match c.status.as_str() {
            "identical" => continue,
            "differs" => (
                FindingKind::LosslessDiffers,
                Severity::Fail,
                format!(
                    "with the draft the answer differs from `{against}`'s at {at}, where the control reproduced it"
                ),
            ),
            "drift" => (
                FindingKind::Lossless,
                Severity::Info,
                format!(
                    "with the draft the answer differs from `{against}`'s by a near-tie flip at {at}; its checks pass"
                ),
            ),
            "inconclusive" => (
                FindingKind::LosslessCannotTell,
                Severity::Warn,
                format!(
                    "cannot tell: with the draft the answer differs from `{against}`'s at {at}, but so does the \
                     control (`{against}` again): the server differs from itself here"
                ),
            ),
            _ => (FindingKind::LosslessCannotTell, Severity::Warn, format!("cannot tell: {}", c.detail)),
        };
        out.push(Finding { kind, severity, message, case: Some(c.id.clone()) });
    }
    if out.iter().all(|f| f.severity == Severity::Info) {
        let same = l.result.cases.iter().filter(|c| c.status == "identical").count();
        out.push(Finding {
            kind: FindingKind::Lossless,
            severity: Severity::Info,
            message: format!(
                "lossless against `{against}`: {same} of {} answers token for token the same as without the draft{}",
                l.result.cases.len(),
                match &l.control_jitter {
                    Some(j) => format!("; the control's shared tokens moved ≤ {:.3} nats over {} tokens", j.max_nats, j.tokens),
                    None => String::new(),
                }
            ),
            case: None,
        });
    }
    out
}
