//! Pure differences between record values: which identity fields differ (as `path: old → new`) and where two
//! texts first differ, and where two answers' tokens part, judged against the jitter of the tokens they share. Shared by the engine's identity, comparison, reports and qualification; never does I/O.

use serde_json::Value;

use crate::tokens::{Jitter, TokenDivergence, first_divergent_token, shared_deltas};
use crate::{CaseRecord, IdentityRecord, RunRecord};

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

/// The differences in the identities' `build` members, as `build.<field>: old → new`. A record without `build`
/// (an attached server) differs from none of its fields.
pub fn build_differences(old_identity: &IdentityRecord, new_identity: &IdentityRecord) -> Vec<String> {
    let (old, new) = (old_identity.build_value(), new_identity.build_value());
    if old.is_null() || new.is_null() {
        return Vec::new();
    }
    identity_differences(&old, &new).into_iter().map(|d| format!("build.{d}")).collect()
}

/// The first token at which `case` parts from `old`, when both answers carry tokens.
pub fn token_divergence(old: &CaseRecord, case: &CaseRecord) -> Option<TokenDivergence> {
    let (a, b) = (old.answer.as_ref()?.tokens.as_ref()?, case.answer.as_ref()?.tokens.as_ref()?);
    first_divergent_token(a, b)
}

/// [`token_divergence`] judged against `jitter` (the run's against its baseline), saying whether the case's status
/// changed with it.
pub fn judged_divergence(old: &CaseRecord, case: &CaseRecord, jitter: Option<&Jitter>) -> Option<TokenDivergence> {
    let mut d = token_divergence(old, case)?.judged(jitter.cloned());
    d.checks_changed = Some(old.status != case.status);
    Some(d)
}

/// How far the logprobs of the tokens `run`'s answers share with `baseline`'s moved, pooled over every case both
/// answered (repeats included: each is its own request); None where no shared token carried logprobs.
pub fn baseline_jitter(run: &RunRecord, baseline: &RunRecord) -> Option<Jitter> {
    let mut pool = Vec::new();
    for case in &run.cases {
        let Some(old) = baseline.cases.iter().find(|c| c.id == case.id) else { continue };
        if let (Some(a), Some(b)) =
            (old.answer.as_ref().and_then(|a| a.tokens.as_ref()), case.answer.as_ref().and_then(|a| a.tokens.as_ref()))
        {
            shared_deltas(a, b, &mut pool);
        }
    }
    Jitter::measure(&pool)
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
