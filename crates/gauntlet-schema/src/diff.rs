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

/// The engine behind a run: the kind its manifest named for a spawned server (`identity.recipe.server.engine`), else
/// the kind an attached server's self-description points to (`runtime.server.engine`); None when neither says
/// (a spawned server of no kind, or a record written before attached servers were named).
pub fn engine(run: &RunRecord) -> Option<String> {
    let named = run.identity.server().and_then(|s| s.engine.clone());
    let described = || run.runtime.get("server")?.get("engine")?.as_str().map(str::to_owned);
    named.or_else(described).filter(|e| !e.is_empty() && e.len() <= 64)
}

/// Whether a run's token ids may be compared with its baseline's, as far as the two records show: the ids both
/// records hold (chosen tokens and their alternatives), each spelled by both. One id spelled two ways means two
/// vocabularies, and then a token-level comparison would pair unrelated tokens.
#[derive(Debug, Clone, PartialEq)]
pub enum Tokenization {
    /// Every id both records hold is spelled alike; `shared` ids were checked.
    Alike { shared: usize },
    /// `conflicts` of the `shared` ids are spelled differently (the first: its id and both spellings).
    Differ { shared: usize, conflicts: usize, first: (u64, String, String) },
    /// No id is in both records (or a side has no ids): nothing shows whether they tokenize alike.
    Unknown,
}

impl Tokenization {
    /// Words for a finding: how the comparison was made and on what evidence.
    pub fn describe(&self) -> String {
        match self {
            Tokenization::Alike { shared } => {
                format!("both tokenize alike ({shared} token ids in both records, each spelled the same)")
            }
            Tokenization::Differ { shared, conflicts, first: (id, a, b) } => format!(
                "the two tokenize differently ({conflicts} of {shared} token ids in both records are spelled \
                 differently, id {id}: {a:?} on the baseline, {b:?} now)"
            ),
            Tokenization::Unknown => "no token id is in both records, so nothing shows they tokenize alike".into(),
        }
    }
}

/// Each id's spelling in a record's answers (bytes where the server gave them, else text), the first seen kept.
/// Tokens with no spelling (an end-of-generation token some servers list with empty text) say nothing. Bounded by
/// the tokens a record keeps ([`crate::tokens::MAX_TOKENS_KEPT`] per answer, their alternatives).
fn spellings(run: &RunRecord) -> std::collections::BTreeMap<u64, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut add = |id: Option<u64>, text: &str, bytes: Option<&[u8]>| {
        let spelled = bytes.map(<[u8]>::to_vec).unwrap_or_else(|| text.as_bytes().to_vec());
        if let Some(id) = id
            && !spelled.is_empty()
        {
            out.entry(id).or_insert(spelled);
        }
    };
    for tokens in run.cases.iter().filter_map(|c| c.answer.as_ref()?.tokens.as_ref()) {
        for t in &tokens.items {
            add(t.id, &t.text, t.bytes.as_deref());
            for a in &t.top {
                add(a.id, &a.text, a.bytes.as_deref());
            }
        }
    }
    out
}

/// How `run`'s tokens relate to `baseline`'s ([`Tokenization`]).
pub fn tokenization(run: &RunRecord, baseline: &RunRecord) -> Tokenization {
    let (old, new) = (spellings(baseline), spellings(run));
    let (mut shared, mut conflicts, mut first) = (0usize, 0usize, None);
    for (id, a) in &old {
        let Some(b) = new.get(id) else { continue };
        shared += 1;
        if a != b {
            conflicts += 1;
            let show = |s: &[u8]| String::from_utf8_lossy(s).chars().filter(|c| !c.is_control()).take(40).collect();
            first.get_or_insert_with(|| (*id, show(a), show(b)));
        }
    }
    match first {
        Some(first) => Tokenization::Differ { shared, conflicts, first },
        None if shared == 0 => Tokenization::Unknown,
        None => Tokenization::Alike { shared },
    }
}

/// Whether the run's answers are compared with the baseline's token by token: not when the records show two
/// vocabularies, nor across engines unless the records show that both tokenize alike. Otherwise text is compared by
/// characters only, and no jitter is measured.
pub fn tokens_comparable(run: &RunRecord, baseline: &RunRecord) -> (bool, Tokenization) {
    let t = tokenization(run, baseline);
    let cross_engine = matches!((engine(baseline), engine(run)), (Some(a), Some(b)) if a != b);
    let comparable = match t {
        Tokenization::Alike { .. } => true,
        Tokenization::Differ { .. } => false,
        Tokenization::Unknown => !cross_engine,
    };
    (comparable, t)
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
/// answered (repeats included: each is its own request); None where no shared token carried logprobs, or where the
/// tokens are not comparable ([`tokens_comparable`]).
pub fn baseline_jitter(run: &RunRecord, baseline: &RunRecord) -> Option<Jitter> {
    if !tokens_comparable(run, baseline).0 {
        return None;
    }
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
