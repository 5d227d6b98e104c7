//! Losslessness: does run B say exactly what run A said (speculative decoding against plain decoding, two builds)?
//! Per case: identical, or the first divergence (character index, and token index when both records carry token
//! ids). A control run A′ (A's setup again) separates a real difference from nondeterminism: B ≠ A where A′ = A
//! fails; a case where A′ itself differs from A is inconclusive. Records are read as raw JSON: every field is
//! untrusted, and a token id that is not a non-negative integer (a JSON boolean, say) is refused, never coerced.

use serde::Serialize;
use serde_json::Value;

use super::first_difference;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseComparison {
    pub id: String,
    /// identical · differs · inconclusive · missing
    pub status: String,
    pub char_index: Option<usize>,
    pub token_index: Option<usize>,
    /// Whether the control agreed with A on this case (None without a control).
    pub control_identical: Option<bool>,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Lossless {
    /// pass · fail · inconclusive
    pub verdict: String,
    pub controlled: bool,
    pub cases: Vec<CaseComparison>,
}

struct Answer {
    text: Option<String>,
    tokens: Option<Vec<u64>>,
}

/// `case id → answer` of a run record, in the record's order.
fn answers(run: &Value, name: &str) -> Result<Vec<(String, Answer)>, String> {
    let cases =
        run["cases"].as_array().ok_or_else(|| format!("{name}: no `cases` array: not a gauntlet run record"))?;
    let mut out = Vec::new();
    for (i, c) in cases.iter().enumerate() {
        let id = c["id"].as_str().ok_or_else(|| format!("{name}: cases[{i}] has no string `id`"))?;
        let tokens = match &c["answer"]["token_ids"] {
            Value::Null => None,
            Value::Array(items) => Some(
                items
                    .iter()
                    .enumerate()
                    .map(|(j, t)| match t {
                        Value::Number(n) if n.as_u64().is_some() => Ok(n.as_u64().unwrap_or_default()),
                        Value::Bool(_) => {
                            Err(format!("{name}: case `{id}` token_ids[{j}] is a boolean, not a token id"))
                        }
                        other => Err(format!("{name}: case `{id}` token_ids[{j}] is {other}, not a token id")),
                    })
                    .collect::<Result<Vec<u64>, String>>()?,
            ),
            other => return Err(format!("{name}: case `{id}` token_ids is {other}, not an array")),
        };
        let text = match &c["observed"] {
            Value::String(s) => Some(s.clone()),
            Value::Null => None,
            other => return Err(format!("{name}: case `{id}` observed is {other}, not a string")),
        };
        out.push((id.to_owned(), Answer { text, tokens }));
    }
    Ok(out)
}

fn same(a: &Answer, b: &Answer) -> Option<bool> {
    Some(a.text.as_ref()? == b.text.as_ref()? && a.tokens == b.tokens)
}

pub fn lossless(a: &Value, b: &Value, control: Option<&Value>) -> Result<Lossless, String> {
    if a["suite"]["digest"] != b["suite"]["digest"] {
        return Err(format!(
            "A and B ran different suites ({} and {}): their answers cannot be compared",
            a["suite"]["digest"], b["suite"]["digest"]
        ));
    }
    if let Some(c) = control
        && c["suite"]["digest"] != a["suite"]["digest"]
    {
        return Err("the control ran another suite than A".into());
    }
    let (av, bv) = (answers(a, "A")?, answers(b, "B")?);
    let cv = control.map(|c| answers(c, "control")).transpose()?;
    let mut cases = Vec::new();
    for (id, ans_a) in &av {
        let find = |v: &[(String, Answer)]| v.iter().position(|(x, _)| x == id);
        let control_identical = cv.as_ref().map(|cv| find(cv).and_then(|i| same(ans_a, &cv[i].1)).unwrap_or(false));
        let missing = |detail: String| CaseComparison {
            id: id.clone(),
            status: "missing".into(),
            char_index: None,
            token_index: None,
            control_identical,
            detail,
        };
        let Some(bi) = find(&bv) else {
            cases.push(missing("B has no such case".into()));
            continue;
        };
        let ans_b = &bv[bi].1;
        let (Some(ta), Some(tb)) = (&ans_a.text, &ans_b.text) else {
            let who = if ans_a.text.is_none() { "A" } else { "B" };
            cases.push(missing(format!("{who} has no answer for it")));
            continue;
        };
        let char_index = first_difference(ta, tb);
        let token_index = match (&ans_a.tokens, &ans_b.tokens) {
            (Some(x), Some(y)) if x != y => {
                Some(x.iter().zip(y).position(|(p, q)| p != q).unwrap_or(x.len().min(y.len())))
            }
            _ => None,
        };
        let differs = char_index.is_some() || token_index.is_some();
        let (status, detail) = match (differs, control_identical) {
            (false, _) => ("identical", String::new()),
            (true, Some(false)) => {
                ("inconclusive", "the control run differs from A here too: A is not deterministic".into())
            }
            (true, Some(true)) => ("differs", "B differs where the control reproduced A".into()),
            (true, None) => ("differs", "B differs (no control run: nondeterminism is not ruled out)".into()),
        };
        cases.push(CaseComparison {
            id: id.clone(),
            status: status.into(),
            char_index,
            token_index,
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
