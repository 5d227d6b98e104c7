//! Run vs baseline → findings. Pure functions of two run records, kept apart from the store so that the
//! baseline store (identity-keyed history) can reuse them unchanged.

pub mod lossless;

use gauntlet_schema::{CaseStatus, Finding, FindingKind, RunRecord, Severity, Thresholds};
use serde_json::Value;

/// One identity field that differs, as `path: old → new`.
pub fn identity_differences(old: &Value, new: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff(old, new, String::new(), &mut out);
    out
}

fn diff(old: &Value, new: &Value, path: String, out: &mut Vec<String>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = if path.is_empty() { k.clone() } else { format!("{path}.{k}") };
                diff(a.get(k).unwrap_or(&Value::Null), b.get(k).unwrap_or(&Value::Null), p, out);
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                diff(x, y, format!("{path}[{i}]"), out);
            }
        }
        // Lists of other lengths (server arguments): name the first position that differs and what stands there.
        (Value::Array(a), Value::Array(b)) => {
            let at = a.iter().zip(b).position(|(x, y)| x != y).unwrap_or(a.len().min(b.len()));
            let item = |v: Option<&Value>| v.map(short).unwrap_or_else(|| "(end)".into());
            out.push(format!(
                "{path}: {} → {} items; from [{at}]: {} → {}",
                a.len(),
                b.len(),
                item(a.get(at)),
                item(b.get(at))
            ));
        }
        (a, b) if a != b => out.push(format!("{path}: {} → {}", short(a), short(b))),
        _ => {}
    }
}

fn short(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        Value::Null => "(none)".into(),
        other => other.to_string(),
    };
    if s.chars().count() > 80 { format!("{}…", s.chars().take(80).collect::<String>()) } else { s }
}

/// Index (in characters) of the first difference, or None when equal.
pub fn first_difference(a: &str, b: &str) -> Option<usize> {
    let mut ai = a.chars();
    let mut bi = b.chars();
    let mut i = 0;
    loop {
        match (ai.next(), bi.next()) {
            (None, None) => return None,
            (x, y) if x != y => return Some(i),
            _ => i += 1,
        }
    }
}

/// The findings of comparing `run` with `baseline`. Regressions are cases whose checks passed on the baseline
/// and fail now; their severity depends on how many there are (`fail_regressions`).
pub fn compare(run: &RunRecord, baseline: &RunRecord, t: &Thresholds) -> Vec<Finding> {
    let mut out = Vec::new();
    if run.identity_digest != baseline.identity_digest {
        let fields = identity_differences(&baseline.identity.digest_value(), &run.identity.digest_value());
        out.push(Finding {
            kind: FindingKind::IdentityDiffers,
            severity: Severity::Warn,
            message: format!("identity differs from the baseline's: {}", fields.join("; ")),
            case: None,
        });
    }
    // The server's build is what a gate tests, so a new build is a note; a new driver or runtime warns.
    for d in crate::identity::build_differences(&baseline.identity, &run.identity) {
        out.push(Finding {
            kind: FindingKind::ServerBuildDiffers,
            severity: Severity::Info,
            message: format!("identity.{d}"),
            case: None,
        });
    }
    for d in identity_differences(&baseline.runtime, &run.runtime) {
        let server_build = d.starts_with("server_");
        out.push(Finding {
            kind: if server_build { FindingKind::ServerBuildDiffers } else { FindingKind::RuntimeDiffers },
            severity: if server_build { Severity::Info } else { Severity::Warn },
            message: format!("runtime.{d}"),
            case: None,
        });
    }
    let mut regressions = Vec::new();
    for case in &run.cases {
        let Some(old) = baseline.cases.iter().find(|c| c.id == case.id) else {
            continue;
        };
        if case.repeat_of.is_some() {
            continue; // judged by its own identity with its source
        }
        match (old.status, case.status) {
            (CaseStatus::Pass, CaseStatus::Fail) => regressions.push(case),
            (CaseStatus::Fail, CaseStatus::Fail) if t.expected_failures.contains(&case.id) => out.push(Finding {
                kind: FindingKind::ExpectedFailure,
                severity: Severity::Info,
                message: format!("fails as expected by the profile and as on the baseline: {}", failed_checks(case)),
                case: Some(case.id.clone()),
            }),
            (CaseStatus::Fail, CaseStatus::Fail) => out.push(Finding {
                kind: FindingKind::KnownFailure,
                severity: Severity::Warn,
                message: format!("fails as on the baseline: {}", failed_checks(case)),
                case: Some(case.id.clone()),
            }),
            _ => {}
        }
        if let (Some(a), Some(b)) = (&old.observed, &case.observed)
            && let Some(at) = first_difference(a, b)
        {
            out.push(Finding {
                kind: FindingKind::TextDrift,
                severity: Severity::Warn,
                message: format!("text differs from the baseline at char {at}"),
                case: Some(case.id.clone()),
            });
        }
    }
    let severity = if regressions.len() as u32 >= t.fail_regressions { Severity::Fail } else { Severity::Warn };
    for case in regressions {
        out.push(Finding {
            kind: FindingKind::Regression,
            severity,
            message: format!("passed on the baseline, fails now: {}", failed_checks(case)),
            case: Some(case.id.clone()),
        });
    }
    match (
        (&run.decode.median_tokens_per_second, &run.decode.token_source),
        (&baseline.decode.median_tokens_per_second, &baseline.decode.token_source),
    ) {
        ((Some(now), Some(src_now)), (Some(then), Some(src_then))) if src_now == src_then && *then > 0.0 => {
            let ratio = now / then;
            if ratio < t.decode_ratio_warn {
                out.push(Finding {
                    kind: FindingKind::SlowDecode,
                    severity: Severity::Warn,
                    message: format!(
                        "decode {now:.1} tok/s is {:.0} % of the baseline's {then:.1} tok/s (warn below {:.0} %)",
                        ratio * 100.0,
                        t.decode_ratio_warn * 100.0
                    ),
                    case: None,
                });
            }
        }
        ((Some(_), Some(a)), (Some(_), Some(b))) => out.push(Finding {
            kind: FindingKind::DecodeNotCompared,
            severity: Severity::Info,
            message: format!("decode speed not compared: token counts come from `{a}` now and `{b}` on the baseline"),
            case: None,
        }),
        _ => {}
    }
    if let (Some(now), Some(then)) = (run.server.load_seconds, baseline.server.load_seconds)
        && then > 0.0
        && now / then > t.load_ratio_warn
        && now - then > LOAD_NOISE_FLOOR_SECONDS
    {
        out.push(Finding {
            kind: FindingKind::SlowLoad,
            severity: Severity::Warn,
            message: format!(
                "load took {now:.2}s, {:.1}× the baseline's {then:.2}s (warn above {:.1}×)",
                now / then,
                t.load_ratio_warn
            ),
            case: None,
        });
    }
    out
}

/// A load that is slower by less than this is scheduling noise, whatever the ratio: a 20 ms load taking 110 ms on a
/// busy runner (measured: 7×) says nothing about the server.
pub const LOAD_NOISE_FLOOR_SECONDS: f64 = 0.25;

fn failed_checks(case: &gauntlet_schema::CaseRecord) -> String {
    let failed: Vec<String> =
        case.checks.iter().filter(|c| !c.passed).map(|c| format!("{} ({})", c.check, c.detail)).collect();
    if failed.is_empty() { "no check detail".into() } else { failed.join("; ") }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn identity_differences_name_every_field() {
        let old = json!({"model": {"sha256": "aa", "size": 1}, "arguments": ["-c", "4096"], "suite": "x"});
        let new =
            json!({"model": {"sha256": "bb", "size": 1}, "arguments": ["-c", "2048"], "extra": true, "suite": "x"});
        assert_eq!(
            identity_differences(&old, &new),
            vec![
                "arguments[1]: 4096 → 2048".to_owned(),
                "extra: (none) → true".to_owned(),
                "model.sha256: aa → bb".to_owned(),
            ]
        );
    }

    #[test]
    fn first_difference_counts_characters_not_bytes() {
        assert_eq!(first_difference("héllo", "héllo"), None);
        assert_eq!(first_difference("héllo", "hélp"), Some(3));
        assert_eq!(first_difference("ab", "abc"), Some(2));
        assert_eq!(first_difference("", "x"), Some(0));
    }
}
