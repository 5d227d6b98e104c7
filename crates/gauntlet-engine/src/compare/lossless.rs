//! Losslessness: does run B say exactly what run A said (speculative decoding against plain decoding, two builds)?
//! Per case: identical, or the first divergence (character index, and the first divergent token when both records
//! carry tokens, with the gap that tells a near-tie flip from a changed answer). A control run A′ (A's setup again) separates a real difference from nondeterminism: B ≠ A where A′ = A
//! fails; a case where A′ itself differs from A is inconclusive. A near-tie flip in a case whose checks pass in B is
//! `drift` (numerical noise), not a difference. Records are read as raw JSON: every field is untrusted, and a token
//! id that is not a non-negative integer (a JSON boolean, say) is refused, never coerced. The work is linear in the
//! records' size: cases are found through an index, never by a scan per case.

use std::collections::HashMap;

use gauntlet_schema::tokens::{AnswerTokens, DivergenceClass, Jitter, first_divergent_token, shared_deltas};
use serde::Deserialize;
use serde_json::Value;

use super::first_difference;

pub use gauntlet_schema::lossless::{CaseComparison, Lossless};

/// Why two run records cannot be compared: a record that is not a run record, or runs of different suites. `side`
/// is `A`, `B` or `control`.
#[derive(Debug, thiserror::Error)]
pub enum LosslessError {
    #[error("{side}: no `cases` array: not a gauntlet run record")]
    NoCases { side: &'static str },
    #[error("{side}: cases[{index}] has no string `id`")]
    NoId { side: &'static str, index: usize },
    #[error("{side}: case `{case}` answer.tokens is malformed: {source}")]
    Tokens {
        side: &'static str,
        case: String,
        #[source]
        source: serde_json::Error,
    },
    /// `observed` is neither a string nor absent; `found` is the JSON it holds.
    #[error("{side}: case `{case}` observed is {found}, not a string")]
    Observed { side: &'static str, case: String, found: Value },
    /// The suites' digests, as the records hold them (JSON: a string, or `null`).
    #[error("A and B ran different suites ({a} and {b}): their answers cannot be compared")]
    Suites { a: Value, b: Value },
    #[error("the control ran another suite than A")]
    ControlSuite,
}

struct Answer {
    text: Option<String>,
    tokens: Option<AnswerTokens>,
    passed: bool,
}

/// `case id → answer` of a run record, in the record's order.
fn answers(run: &Value, side: &'static str) -> Result<Vec<(String, Answer)>, LosslessError> {
    let cases = run["cases"].as_array().ok_or(LosslessError::NoCases { side })?;
    let mut out = Vec::new();
    for (index, c) in cases.iter().enumerate() {
        let id = c["id"].as_str().ok_or(LosslessError::NoId { side, index })?;
        let tokens = match &c["answer"]["tokens"] {
            Value::Null => None,
            v => Some(AnswerTokens::deserialize(v).map_err(|source| LosslessError::Tokens {
                side,
                case: id.to_owned(),
                source,
            })?),
        };
        let text = match &c["observed"] {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            other => return Err(LosslessError::Observed { side, case: id.to_owned(), found: other.clone() }),
        };
        out.push((id.to_owned(), Answer { text, tokens, passed: c["status"] == "pass" }));
    }
    Ok(out)
}

/// Same text, and the same tokens where both recorded them.
fn same(a: &Answer, b: &Answer) -> Option<bool> {
    let tokens_agree = match (&a.tokens, &b.tokens) {
        (Some(x), Some(y)) => first_divergent_token(x, y).is_none(),
        _ => true,
    };
    Some(a.text.as_ref()? == b.text.as_ref()? && tokens_agree)
}

/// Case id → position, the first of each id.
fn index(v: &[(String, Answer)]) -> HashMap<&str, usize> {
    let mut m = HashMap::with_capacity(v.len());
    for (i, (id, _)) in v.iter().enumerate() {
        m.entry(id.as_str()).or_insert(i);
    }
    m
}

pub fn lossless(a: &Value, b: &Value, control: Option<&Value>) -> Result<Lossless, LosslessError> {
    lossless_judged(a, b, control, None)
}

/// How far the logprobs of the tokens A and its control share moved, pooled over every case both answered: the
/// server's own jitter without the draft. None without logprobs on both sides.
pub fn control_jitter(a: &Value, control: &Value) -> Result<Option<Jitter>, LosslessError> {
    let (av, cv) = (answers(a, "A")?, answers(control, "control")?);
    let ci = index(&cv);
    let mut pool = Vec::new();
    for (id, ans) in &av {
        if let (Some(i), Some(x)) = (ci.get(id.as_str()), &ans.tokens)
            && let Some(y) = &cv[*i].1.tokens
        {
            shared_deltas(x, y, &mut pool);
        }
    }
    Ok(Jitter::measure(&pool))
}

/// [`lossless`], each divergence of B from A judged against `jitter` (the control's, [`control_jitter`]): its
/// words then say whether B's swing lies within the server's own jitter. The statuses do not change with it: a
/// divergence the control did not show is a difference whatever its class, save a near-tie flip whose checks pass.
pub fn lossless_judged(
    a: &Value,
    b: &Value,
    control: Option<&Value>,
    jitter: Option<&Jitter>,
) -> Result<Lossless, LosslessError> {
    if a["suite"]["digest"] != b["suite"]["digest"] {
        return Err(LosslessError::Suites { a: a["suite"]["digest"].clone(), b: b["suite"]["digest"].clone() });
    }
    if let Some(c) = control
        && c["suite"]["digest"] != a["suite"]["digest"]
    {
        return Err(LosslessError::ControlSuite);
    }
    let (av, bv) = (answers(a, "A")?, answers(b, "B")?);
    let cv = control.map(|c| answers(c, "control")).transpose()?;
    let (b_index, c_index) = (index(&bv), cv.as_deref().map(index));
    let mut cases = Vec::new();
    for (id, ans_a) in &av {
        let control_identical = cv
            .as_ref()
            .zip(c_index.as_ref())
            .map(|(cv, ci)| ci.get(id.as_str()).and_then(|i| same(ans_a, &cv[*i].1)).unwrap_or(false));
        let missing = |detail: String| CaseComparison {
            id: id.clone(),
            status: "missing".into(),
            char_index: None,
            first_divergent_token: None,
            token_divergence: None,
            control_identical,
            detail,
        };
        let Some(bi) = b_index.get(id.as_str()) else {
            cases.push(missing("B has no such case".into()));
            continue;
        };
        let ans_b = &bv[*bi].1;
        let (Some(ta), Some(tb)) = (&ans_a.text, &ans_b.text) else {
            let who = if ans_a.text.is_none() { "A" } else { "B" };
            cases.push(missing(format!("{who} has no answer for it")));
            continue;
        };
        let char_index = first_difference(ta, tb);
        let token_divergence = match (&ans_a.tokens, &ans_b.tokens) {
            (Some(x), Some(y)) => first_divergent_token(x, y).map(|d| match jitter {
                Some(j) => d.judged(Some(j.clone())),
                None => d,
            }),
            _ => None,
        };
        let differs = char_index.is_some() || token_divergence.is_some();
        let near_tie = token_divergence.as_ref().is_some_and(|d| d.class == DivergenceClass::NearTie);
        let at = token_divergence.as_ref().map(|d| format!(" at {}", d.describe())).unwrap_or_default();
        let (status, detail) = match (differs, control_identical) {
            (false, _) => ("identical", String::new()),
            (true, Some(false)) => {
                ("inconclusive", "the control run differs from A here too: A is not deterministic".into())
            }
            (true, _) if near_tie && ans_b.passed => {
                ("drift", format!("numerical drift: a near-tie flip{at}; B's checks pass"))
            }
            (true, Some(true)) => ("differs", format!("B differs{at} where the control reproduced A")),
            (true, None) => ("differs", format!("B differs{at} (no control run: nondeterminism is not ruled out)")),
        };
        cases.push(CaseComparison {
            id: id.clone(),
            status: status.into(),
            char_index,
            first_divergent_token: token_divergence.as_ref().map(|d| d.index),
            token_divergence,
            control_identical,
            detail,
        });
    }
    let verdict = if cases.iter().any(|c| c.status == "differs" || c.status == "missing") {
        "fail"
    } else if cases.is_empty() || cases.iter().any(|c| c.status == "inconclusive") {
        "inconclusive"
    } else {
        "pass"
    };
    Ok(Lossless { verdict: verdict.into(), controlled: control.is_some(), cases })
}
