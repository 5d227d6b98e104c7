//! Findings → verdict. The rules are data (`Thresholds`, recorded in each run); this module only applies them.

use gauntlet_schema::{CaseStatus, Finding, FindingKind, RunRecord, Severity, Thresholds, Verdict};

use crate::compare;

/// Every finding that follows from the finished record and its baseline (lifecycle findings such as a crash
/// are already in `run.findings`; they are kept and the rest are appended).
pub fn assess(run: &RunRecord, baseline: Option<&RunRecord>, t: &Thresholds) -> Vec<Finding> {
    assess_with(run, baseline, t, None)
}

/// [`assess`], with the decode speed's spread across the identity's promoted history widening its warn band.
pub fn assess_with(
    run: &RunRecord,
    baseline: Option<&RunRecord>,
    t: &Thresholds,
    decode_spread: Option<f64>,
) -> Vec<Finding> {
    let mut out = Vec::new();
    let judged: Vec<_> = run
        .cases
        .iter()
        .filter(|c| {
            c.repeat_of.is_none() && matches!(c.status, CaseStatus::Pass | CaseStatus::Fail | CaseStatus::Error)
        })
        .collect();
    let passed = judged.iter().filter(|c| c.status == CaseStatus::Pass).count();
    if !judged.is_empty() {
        let rate = passed as f64 / judged.len() as f64;
        if rate < t.min_pass_rate {
            out.push(Finding {
                kind: FindingKind::PassRate,
                severity: Severity::Fail,
                message: format!(
                    "{passed} of {} cases pass ({:.0} %), below the minimum {:.0} %",
                    judged.len(),
                    rate * 100.0,
                    t.min_pass_rate * 100.0
                ),
                case: None,
            });
        }
    }
    for c in run.cases.iter().filter(|c| c.repeat_of.is_some() && c.status == CaseStatus::Fail) {
        out.push(Finding {
            kind: FindingKind::RepeatDiffers,
            severity: Severity::Warn,
            message: c.checks.first().map(|r| r.detail.clone()).unwrap_or_else(|| "repeat differs".into()),
            case: Some(c.id.clone()),
        });
    }
    match baseline {
        Some(b) => out.extend(compare::compare_with(run, b, t, decode_spread)),
        None => out.push(Finding {
            kind: FindingKind::NoBaseline,
            severity: Severity::Warn,
            message: "no baseline yet: answers were checked but not compared (promote a run with `gauntlet baseline promote`, or pass --write-baseline)".into(),
            case: None,
        }),
    }
    out
}

/// The worst severity decides: any fail finding fails the run, any warn warns it.
pub fn fold(findings: &[Finding]) -> Verdict {
    match findings.iter().map(|f| f.severity).max() {
        Some(Severity::Fail) => Verdict::Fail,
        Some(Severity::Warn) => Verdict::Warn,
        _ => Verdict::Pass,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(severity: Severity) -> Finding {
        Finding { kind: "x".into(), severity, message: String::new(), case: None }
    }

    #[test]
    fn worst_finding_decides() {
        assert_eq!(fold(&[]), Verdict::Pass);
        assert_eq!(fold(&[f(Severity::Info)]), Verdict::Pass);
        assert_eq!(fold(&[f(Severity::Info), f(Severity::Warn)]), Verdict::Warn);
        assert_eq!(fold(&[f(Severity::Warn), f(Severity::Fail), f(Severity::Warn)]), Verdict::Fail);
    }
}
