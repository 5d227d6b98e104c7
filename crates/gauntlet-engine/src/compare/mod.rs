//! Run vs baseline → findings. Pure functions of two run records, kept apart from the store so that the
//! baseline store (identity-keyed history) can reuse them unchanged.

pub mod lossless;
pub mod speed;

use gauntlet_schema::tokens::{DivergenceClass, Jitter};
use gauntlet_schema::{CaseRecord, CaseStatus, Finding, FindingKind, RunRecord, Severity, Thresholds};

// Pure helpers shared with identity, reports and qualification: the schema crate's, re-exported so that callers
// keep their path.
pub use gauntlet_schema::diff::{
    Tokenization, baseline_jitter, engine, first_difference, identity_differences, judged_divergence, token_divergence,
    tokens_comparable,
};

/// At most this many changed fields are named one by one; the rest are counted.
const MAX_SERVER_CHANGES: usize = 12;

/// One `server-changed` finding per field of the server's self-description that differs (field: from → to): a
/// different engine, version, build or model behind the same URL. Listed first, before any answer drift.
fn server_changed(fields: &[String]) -> Vec<Finding> {
    let mut out: Vec<Finding> = fields
        .iter()
        .take(MAX_SERVER_CHANGES)
        .map(|d| Finding {
            kind: FindingKind::ServerChanged,
            severity: Severity::Warn,
            message: format!("the server changed since the baseline: {d}"),
            case: None,
        })
        .collect();
    if fields.len() > MAX_SERVER_CHANGES {
        out.push(Finding {
            kind: FindingKind::ServerChanged,
            severity: Severity::Warn,
            message: format!(
                "… and {} more changed field(s) of the server's self-description",
                fields.len() - MAX_SERVER_CHANGES
            ),
            case: None,
        });
    }
    out
}

/// The findings of comparing `run` with `baseline`. Regressions are cases whose checks passed on the baseline
/// and fail now; their severity depends on how many there are (`fail_regressions`).
pub fn compare(run: &RunRecord, baseline: &RunRecord, t: &Thresholds) -> Vec<Finding> {
    compare_with(run, baseline, t, None)
}

/// The relative spread (sample standard deviation / mean) of the decode speeds of an identity's promoted runs;
/// None below three of them.
pub fn decode_spread(decodes: &[f64]) -> Option<f64> {
    let v: Vec<f64> = decodes.iter().copied().filter(|x| x.is_finite() && *x > 0.0).collect();
    if v.len() < 3 {
        return None;
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
    Some(var.sqrt() / mean)
}

/// [`compare`], with `decode_spread` (see [`decode_spread`]) widening the decode warn band by two of it: a run
/// warns only below `decode_ratio_warn − 2 · spread` of the baseline's decode. Decode is compared case against
/// case ([`speed::case_ratios`]): it warns when the upper end of the median ratio's 95 % interval is below the
/// line, and a median below it that the cases' spread does not establish is a note. Each case is timed by the
/// server's own timings when every compared case has them on both sides, else by the client's clock; without a
/// case to compare, the runs' medians are. A speed finding is a warning, never a failure: one run is one session,
/// and a busy machine moves it.
pub fn compare_with(run: &RunRecord, baseline: &RunRecord, t: &Thresholds, decode_spread: Option<f64>) -> Vec<Finding> {
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
    for d in gauntlet_schema::diff::build_differences(&baseline.identity, &run.identity) {
        out.push(Finding {
            kind: FindingKind::ServerBuildDiffers,
            severity: Severity::Info,
            message: format!("identity.{d}"),
            case: None,
        });
    }
    // The draft's bytes are outside the digest (so its baseline is still found): a swap is named, never silent.
    let (draft_then, draft_now) = (baseline.identity.draft_model_value(), run.identity.draft_model_value());
    if draft_then != draft_now {
        let fields = identity_differences(&draft_then, &draft_now);
        out.push(Finding {
            kind: FindingKind::DraftChanged,
            severity: Severity::Warn,
            message: format!(
                "the draft model differs from the baseline's: {}",
                fields.iter().map(|f| format!("draft.model.{f}")).collect::<Vec<_>>().join("; ")
            ),
            case: None,
        });
    }
    // What an attached server says about itself, compared only when both runs asked (older records did not). The
    // engine it was taken for is named by its own finding below, only when both records name one.
    if let (Some(old), Some(new)) = (baseline.runtime.get("server"), run.runtime.get("server")) {
        let without_engine = |v: &serde_json::Value| {
            let mut v = v.clone();
            if let Some(m) = v.as_object_mut() {
                m.remove("engine");
            }
            v
        };
        let changed = identity_differences(&without_engine(old), &without_engine(new));
        let mut first = server_changed(&changed);
        first.append(&mut out);
        out = first;
    }
    // Another engine (llama.cpp on the baseline, vLLM now): named first; its text is compared token by token only
    // where both tokenize alike, and its speed is not compared at all (a different engine is not a regression).
    let (tokens_alike, tokenization) = tokens_comparable(run, baseline);
    let cross_engine = match (engine(baseline), engine(run)) {
        (Some(then), Some(now)) if then != now => Some((then, now)),
        _ => None,
    };
    if let Some((then, now)) = &cross_engine {
        let text = if tokens_alike {
            format!("text is compared token by token: {}", tokenization.describe())
        } else {
            format!("text is compared by characters only: {}", tokenization.describe())
        };
        out.insert(
            0,
            Finding {
                kind: FindingKind::ServerChanged,
                severity: Severity::Warn,
                message: format!(
                    "the engine changed since the baseline: {then} → {now}; {text}; speed is not compared across \
                     engines (`gauntlet bench --paired` says which is faster on one machine)"
                ),
                case: None,
            },
        );
    }
    for d in identity_differences(&baseline.runtime, &run.runtime) {
        if d.starts_with("server.") || d.starts_with("server:") {
            continue;
        }
        let server_build = d.starts_with("server_");
        out.push(Finding {
            kind: if server_build { FindingKind::ServerBuildDiffers } else { FindingKind::RuntimeDiffers },
            severity: if server_build { Severity::Info } else { Severity::Warn },
            message: format!("runtime.{d}"),
            case: None,
        });
    }
    let jitter =
        if tokens_alike { run.baseline_jitter.clone().or_else(|| baseline_jitter(run, baseline)) } else { None };
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
            (CaseStatus::Fail, CaseStatus::Fail) => out.push(unchanged_failure(old, case, t)),
            _ => {}
        }
        if let (Some(a), Some(b)) = (&old.observed, &case.observed)
            && let Some(at) = first_difference(a, b)
        {
            out.push(text_drift(old, case, at, tokens_alike.then_some(jitter.as_ref())));
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
    let server = (run.decode.server_median_tokens_per_second, baseline.decode.server_median_tokens_per_second);
    if let Some((then, now)) = &cross_engine {
        let speed = |r: &RunRecord| {
            r.decode.median_tokens_per_second.map_or("no decode speed".into(), |v| format!("{v:.1} tok/s"))
        };
        out.push(Finding {
            kind: FindingKind::DecodeNotCompared,
            severity: Severity::Info,
            message: format!(
                "decode speed not compared across engines: {} on {now} now, {} on {then} on the baseline; another \
                 engine is not a regression of this one (load time is not compared either)",
                speed(run),
                speed(baseline)
            ),
            case: None,
        });
    }
    match (
        (&run.decode.median_tokens_per_second, &run.decode.token_source),
        (&baseline.decode.median_tokens_per_second, &baseline.decode.token_source),
    ) {
        _ if cross_engine.is_some() => {}
        // Case against case needs only the same token source (cases of 8 tokens count); the runs' medians (cases of
        // 32) are the fallback when no case compares.
        ((client_now, Some(src_now)), (client_then, Some(src_then))) if src_now == src_then => {
            let widened = decode_spread.filter(|s| s.is_finite() && *s > 0.0).map(|s| 2.0 * s);
            let warn_below = (t.decode_ratio_warn - widened.unwrap_or(0.0)).max(0.0);
            let band = match widened {
                Some(w) => format!(
                    "warn below {:.0} %: {:.0} % widened by twice the ±{:.1} % spread of the promoted history",
                    warn_below * 100.0,
                    t.decode_ratio_warn * 100.0,
                    w * 50.0
                ),
                None => format!("warn below {:.0} %", warn_below * 100.0),
            };
            let (ratios, corrected, why_not, not_judged) = match speed::decode_check(run, baseline) {
                speed::DecodeCheck::Ratios { ratios, corrected, why_not } => (Some(ratios), corrected, why_not, false),
                speed::DecodeCheck::NotJudged { contention, limit, threads, side } => {
                    out.push(Finding {
                        kind: FindingKind::SpeedNotJudged,
                        severity: Severity::Info,
                        message: format!(
                            "decode speed not judged: {}",
                            speed::not_judged_reason(contention, limit, threads, side)
                        ),
                        case: None,
                    });
                    (None, false, None, true)
                }
                speed::DecodeCheck::Crowded { neighbours, side, .. } => {
                    out.push(Finding {
                        kind: FindingKind::SpeedNotJudged,
                        severity: Severity::Info,
                        message: format!("decode speed not judged: {}", speed::crowded_reason(neighbours, side)),
                        case: None,
                    });
                    (None, false, None, true)
                }
                speed::DecodeCheck::MachineMoved { shift, memory, slower } => {
                    out.push(Finding {
                        kind: FindingKind::SpeedNotJudged,
                        severity: Severity::Info,
                        message: format!(
                            "decode speed not judged: {}",
                            speed::machine_moved_reason(shift, memory, slower)
                        ),
                        case: None,
                    });
                    (None, false, None, true)
                }
                speed::DecodeCheck::NoCases => (None, false, None, false),
            };
            let clock = |r: &speed::CaseRatios| match (&why_not, corrected) {
                (_, true) => format!("{}, corrected onto the server's CPU clock", r.clock),
                (Some(why), _) => format!("{}, {why}", r.clock),
                (None, _) => r.clock.to_owned(),
            };
            match ratios {
                // Case against case: the whole interval of the median ratio must be below the line.
                Some(r) if r.upper < warn_below => out.push(Finding {
                    kind: FindingKind::SlowDecode,
                    severity: Severity::Warn,
                    message: format!(
                        "decode is {:.0} % of the baseline's, the median of {} cases each against itself ({}; {band}); \
                         the upper end of its 95 % interval is {:.0} %",
                        r.median * 100.0,
                        r.cases,
                        clock(&r),
                        r.upper * 100.0
                    ),
                    case: None,
                }),
                Some(r) if r.median < warn_below => out.push(Finding {
                    kind: FindingKind::SpeedUnsettled,
                    severity: Severity::Info,
                    message: format!(
                        "decode is {:.0} % of the baseline's, the median of {} cases each against itself ({}; {band}), \
                         but the cases disagree: the upper end of its 95 % interval is {:.0} %, so the machine's \
                         load, not the server, may explain it; not a warning",
                        r.median * 100.0,
                        r.cases,
                        clock(&r),
                        r.upper * 100.0
                    ),
                    case: None,
                }),
                Some(_) => {}
                // Not judged: said above.
                None if not_judged => {}
                // No case has a speed on both sides (token counts estimated, or older records): the medians.
                None => {
                    let (now, then, whose) = match (server, client_now, client_then) {
                        ((Some(a), Some(b)), _, _) if b > 0.0 => (a, b, "the server's timings"),
                        (_, Some(a), Some(b)) if *b > 0.0 => (*a, *b, "the client's clock"),
                        _ => (0.0, 0.0, ""),
                    };
                    let ratio = now / then;
                    if then > 0.0 && ratio < warn_below {
                        out.push(Finding {
                            kind: FindingKind::SlowDecode,
                            severity: Severity::Warn,
                            message: format!(
                                "decode {now:.1} tok/s is {:.0} % of the baseline's {then:.1} tok/s ({whose}; {band})",
                                ratio * 100.0,
                            ),
                            case: None,
                        });
                    }
                }
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
    // A draft that accepts less makes speculative decoding slower without changing a word: compared like decode.
    if let (Some(now), Some(then)) = (
        run.decode.draft.as_ref().and_then(|d| d.acceptance_rate),
        baseline.decode.draft.as_ref().and_then(|d| d.acceptance_rate),
    ) && then > 0.0
        && now / then < t.draft_acceptance_ratio_warn
    {
        let length = |r: &RunRecord| {
            r.decode.draft.as_ref().and_then(|d| d.mean_accepted_length).map_or("?".into(), |l| format!("{l:.2}"))
        };
        out.push(Finding {
            kind: FindingKind::DraftAcceptanceDropped,
            severity: Severity::Warn,
            message: format!(
                "the draft's acceptance rate {:.1} % is {:.0} % of the baseline's {:.1} % (warn below {:.0} %); \
                 tokens per target step {} against {}",
                now * 100.0,
                now / then * 100.0,
                then * 100.0,
                t.draft_acceptance_ratio_warn * 100.0,
                length(run),
                length(baseline)
            ),
            case: None,
        });
    }
    if let (Some(now), Some(then), None) = (run.server.load_seconds, baseline.server.load_seconds, &cross_engine) {
        out.extend(speed::load_finding(now, then, run.server.load_cpu, baseline.server.load_cpu, t));
    }
    out
}

/// A case that failed on the baseline and fails now. It fails "the same way" when no check fails now that passed on
/// the baseline (checks named by their place in the case and their name; their detail, which quotes the answer,
/// is left to the text comparison): a note, as is any failure of a case the profile lists in `expected_failures`.
/// A check that passed on the baseline and fails now is a new way of failing: a warning (`failure-changed`).
fn unchanged_failure(old: &CaseRecord, case: &CaseRecord, t: &Thresholds) -> Finding {
    let failing = |c: &CaseRecord| -> Vec<(usize, String)> {
        c.checks.iter().enumerate().filter(|(_, r)| !r.passed).map(|(i, r)| (i, r.check.clone())).collect()
    };
    let then = failing(old);
    let new_ways: Vec<String> = case
        .checks
        .iter()
        .enumerate()
        .filter(|(i, r)| !r.passed && !then.iter().any(|(j, name)| j == i && *name == r.check))
        .map(|(_, r)| format!("{} ({})", r.check, r.detail))
        .collect();
    let (kind, severity, message) = if t.expected_failures.contains(&case.id) {
        (
            FindingKind::ExpectedFailure,
            Severity::Info,
            format!("fails as expected by the profile and as on the baseline: {}", failed_checks(case)),
        )
    } else if new_ways.is_empty() {
        (FindingKind::KnownFailure, Severity::Info, format!("fails as on the baseline: {}", failed_checks(case)))
    } else {
        (
            FindingKind::FailureChanged,
            Severity::Warn,
            format!("failed on the baseline and fails in a new way: {}", new_ways.join("; ")),
        )
    };
    Finding { kind, severity, message, case: Some(case.id.clone()) }
}

/// A changed answer, traced to its first divergent token when both records carry tokens, and judged against the
/// jitter of the tokens the run shares with its baseline. A near-tie flip (the two candidates within
/// [`gauntlet_schema::tokens::NEAR_TIE_NATS`] in the baseline's alternatives) in a case that still passes is
/// numerical drift, a note; any other change is text drift, a warning, whose words say whether its swing lies within
/// the measured jitter (numerical) or outside it (behaviour change). A case that now fails is a regression either
/// way.
fn text_drift(old: &CaseRecord, case: &CaseRecord, at: usize, jitter: Option<Option<&Jitter>>) -> Finding {
    // `None`: the two records' tokens are not comparable (see `tokens_comparable`), so characters only.
    let divergence = jitter.and_then(|j| judged_divergence(old, case, j));
    let near_tie = divergence.as_ref().is_some_and(|d| d.class == DivergenceClass::NearTie);
    let (kind, severity, what) = if near_tie && case.status == CaseStatus::Pass {
        (FindingKind::NumericalDrift, Severity::Info, "numerical drift: text differs from the baseline")
    } else {
        (FindingKind::TextDrift, Severity::Warn, "text differs from the baseline")
    };
    let message = match divergence {
        Some(d) => format!("{what} at char {at}, {}", d.describe()),
        None => format!("{what} at char {at}"),
    };
    Finding { kind, severity, message, case: Some(case.id.clone()) }
}

/// A load that is slower by less than this is scheduling noise, whatever the ratio: a 20 ms load taking 110 ms on a
/// busy runner (measured: 7×) says nothing about the server.
pub const LOAD_NOISE_FLOOR_SECONDS: f64 = 0.25;

fn failed_checks(case: &gauntlet_schema::CaseRecord) -> String {
    let failed: Vec<String> =
        case.checks.iter().filter(|c| !c.passed).map(|c| format!("{} ({})", c.check, c.detail)).collect();
    if failed.is_empty() { "no check detail".into() } else { failed.join("; ") }
}
