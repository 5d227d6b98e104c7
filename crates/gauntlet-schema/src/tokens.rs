//! The tokens of one answer as the server reported them (id, text, logprob, top alternatives), and the first token
//! at which two answers part, classed as a near-tie flip or a behaviour change. Types and pure functions only.

use serde::{Deserialize, Serialize};

/// Tokens kept per answer at most; the rest are counted in [`AnswerTokens::count`] and dropped. With five
/// alternatives a token costs about 300 bytes of JSON, so one answer's record stays under about 600 kB. The default
/// suite's longest answer is 160 tokens.
pub const MAX_TOKENS_KEPT: usize = 2048;

/// Alternatives asked for and kept per token.
pub const TOP_ALTERNATIVES: usize = 5;

/// A flip whose gap in the baseline's alternatives is below this many nats is a near-tie: numerical noise (another
/// batch shape, another kernel) can reorder two candidates this close, so the flip says nothing about behaviour.
/// How it was chosen, from measurement: docs/validation/2026-12-03-token-gaps.md.
pub const NEAR_TIE_NATS: f64 = 0.1;

/// Where an answer's tokens came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TokenSource {
    /// Token ids with their logprobs and alternatives.
    Ids,
    /// Token texts with logprobs, but no ids (the server does not give them).
    NoIds,
    /// Asked for, but the server gave no token information at all: the answer is text only.
    TextOnly,
}

impl TokenSource {
    pub fn as_str(self) -> &'static str {
        match self {
            TokenSource::Ids => "ids",
            TokenSource::NoIds => "no-ids",
            TokenSource::TextOnly => "text-only",
        }
    }
}

/// An answer's tokens (run.json `cases[].answer.tokens`, since version 6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AnswerTokens {
    pub source: TokenSource,
    /// Tokens the server reported; more than `items` holds when the answer was longer than [`MAX_TOKENS_KEPT`].
    pub count: u64,
    /// The first tokens, in order, at most [`MAX_TOKENS_KEPT`].
    #[serde(default)]
    pub items: Vec<Token>,
}

impl AnswerTokens {
    pub fn text_only() -> AnswerTokens {
        AnswerTokens { source: TokenSource::TextOnly, count: 0, items: Vec::new() }
    }

    /// Whether every reported token is in `items`.
    pub fn complete(&self) -> bool {
        self.items.len() as u64 == self.count
    }
}

/// One generated token.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Token {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// The token's text (lossy where its bytes are not UTF-8 on their own; then `bytes` holds them).
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<Vec<u8>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logprob: Option<f64>,
    /// The most likely candidates at this position (the chosen one among them), best first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub top: Vec<Alternative>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alternative {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<Vec<u8>>,
    pub logprob: f64,
}

/// One side of a divergence: the token, or the end of the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenBrief {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// None: that answer had ended.
    pub text: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DivergenceClass {
    /// The two candidates were within [`NEAR_TIE_NATS`] in the baseline's alternatives: numerical drift.
    NearTie,
    /// Further apart, outside the baseline's alternatives, or the gap is unknown: the answer changed.
    BehaviourChange,
}

/// The first token at which an answer parts from its baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenDivergence {
    /// From 0.
    pub index: usize,
    pub baseline: TokenBrief,
    pub run: TokenBrief,
    /// The baseline's logprob of its own token minus its logprob of the run's token, in nats. When the run's token
    /// is not among the baseline's alternatives this is a lower bound (`gap_is_lower_bound`); None when the
    /// baseline recorded no logprobs there.
    pub gap_nats: Option<f64>,
    #[serde(default)]
    pub gap_is_lower_bound: bool,
    pub class: DivergenceClass,
}

impl TokenDivergence {
    /// `token 27 ('8' vs '9', gap 0.03 nats: near-tie)`: baseline's token first. Token texts are server text: the
    /// caller escapes the line for its medium.
    pub fn describe(&self) -> String {
        let side = |b: &TokenBrief| match &b.text {
            Some(t) => format!("'{}'", t.escape_debug()),
            None => "(end)".into(),
        };
        let gap = match (self.gap_nats, self.gap_is_lower_bound) {
            (Some(g), false) => format!("gap {g:.2} nats"),
            (Some(g), true) => format!("gap > {g:.2} nats, not in the baseline's top {TOP_ALTERNATIVES}"),
            (None, _) => "gap unknown".into(),
        };
        let class = match self.class {
            DivergenceClass::NearTie => "near-tie",
            DivergenceClass::BehaviourChange => "behaviour change",
        };
        format!("token {} ({} vs {}, {gap}: {class})", self.index, side(&self.baseline), side(&self.run))
    }
}

/// Whether two tokens are the same: by id when both have one, else by bytes (or text).
fn same_token(a_id: Option<u64>, a: (&str, Option<&[u8]>), b_id: Option<u64>, b: (&str, Option<&[u8]>)) -> bool {
    match (a_id, b_id) {
        (Some(x), Some(y)) => x == y,
        _ => match (a.1, b.1) {
            (Some(x), Some(y)) => x == y,
            _ => a.0 == b.0,
        },
    }
}

/// The first token at which `run` parts from `baseline`, or None when they agree over the tokens both kept (the
/// caller falls back to characters). Linear in the tokens kept.
pub fn first_divergent_token(baseline: &AnswerTokens, run: &AnswerTokens) -> Option<TokenDivergence> {
    // An end-of-generation token has no text: llama.cpp lists it in a non-streamed answer's logprobs and not in a
    // streamed one's (measured on its CUDA server). It ends the answer; it is not a token the answer differs by.
    let spelled = |items: &[Token]| {
        items.len()
            - items
                .iter()
                .rev()
                .take_while(|t| t.text.is_empty() && t.bytes.as_ref().is_none_or(|b| b.is_empty()))
                .count()
    };
    let (b, r) = (&baseline.items[..spelled(&baseline.items)], &run.items[..spelled(&run.items)]);
    let at = b
        .iter()
        .zip(r)
        .position(|(x, y)| !same_token(x.id, (&x.text, x.bytes.as_deref()), y.id, (&y.text, y.bytes.as_deref())));
    let index = match at {
        Some(i) => i,
        // One ended inside the kept tokens while the other went on.
        None if b.len() != r.len()
            && (b.len() < r.len() && baseline.complete() || r.len() < b.len() && run.complete()) =>
        {
            b.len().min(r.len())
        }
        None => return None,
    };
    let brief = |t: Option<&Token>| TokenBrief { id: t.and_then(|t| t.id), text: t.map(|t| t.text.clone()) };
    let (bt, rt) = (b.get(index), r.get(index));
    let mut gap_nats = None;
    let mut gap_is_lower_bound = false;
    if let (Some(bt), Some(rt)) = (bt, rt)
        && let Some(own) = bt.logprob.or_else(|| bt.top.first().map(|a| a.logprob))
        && !bt.top.is_empty()
    {
        match bt
            .top
            .iter()
            .find(|a| same_token(a.id, (&a.text, a.bytes.as_deref()), rt.id, (&rt.text, rt.bytes.as_deref())))
        {
            Some(alt) => gap_nats = Some((own - alt.logprob).max(0.0)),
            None => {
                let lowest = bt.top.iter().map(|a| a.logprob).fold(f64::INFINITY, f64::min);
                gap_nats = Some((own - lowest).max(0.0));
                gap_is_lower_bound = true;
            }
        }
    }
    let class = match gap_nats {
        Some(g) if !gap_is_lower_bound && g < NEAR_TIE_NATS => DivergenceClass::NearTie,
        _ => DivergenceClass::BehaviourChange,
    };
    Some(TokenDivergence { index, baseline: brief(bt), run: brief(rt), gap_nats, gap_is_lower_bound, class })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(id: u64, text: &str, logprob: f64, top: &[(u64, &str, f64)]) -> Token {
        Token {
            id: Some(id),
            text: text.into(),
            bytes: None,
            logprob: Some(logprob),
            top: top
                .iter()
                .map(|(i, t, l)| Alternative { id: Some(*i), text: (*t).into(), bytes: None, logprob: *l })
                .collect(),
        }
    }

    fn answer(items: Vec<Token>) -> AnswerTokens {
        AnswerTokens { source: TokenSource::Ids, count: items.len() as u64, items }
    }

    #[test]
    fn a_trailing_end_token_without_text_is_not_a_divergence() {
        let words = || vec![tok(1, "Paris", -0.1, &[]), tok(3, ".", -0.2, &[])];
        let mut with_end = words();
        with_end.push(tok(2, "", -0.01, &[(2, "", -0.01)]));
        let (non_streamed, streamed) = (answer(with_end), answer(words()));
        assert_eq!(first_divergent_token(&non_streamed, &streamed), None);
        assert_eq!(first_divergent_token(&streamed, &non_streamed), None);
        // A token that spells something is still one the answers differ by.
        let mut longer = words();
        longer.push(tok(4, "!", -0.3, &[]));
        let d = first_divergent_token(&answer(longer), &streamed).unwrap();
        assert_eq!(d.index, 2);
    }

    #[test]
    fn a_close_flip_is_a_near_tie_and_a_far_one_a_behaviour_change() {
        let base = answer(vec![
            tok(1, "The", -0.1, &[(1, "The", -0.1)]),
            tok(8, "8", -0.70, &[(8, "8", -0.70), (9, "9", -0.73), (7, "7", -3.0)]),
        ]);
        let near = answer(vec![tok(1, "The", -0.1, &[]), tok(9, "9", -0.69, &[])]);
        let d = first_divergent_token(&base, &near).unwrap();
        assert_eq!((d.index, d.class), (1, DivergenceClass::NearTie));
        assert_eq!(d.describe(), "token 1 ('8' vs '9', gap 0.03 nats: near-tie)");
        let far = answer(vec![tok(1, "The", -0.1, &[]), tok(7, "7", -0.5, &[])]);
        let d = first_divergent_token(&base, &far).unwrap();
        assert_eq!(d.class, DivergenceClass::BehaviourChange);
        assert_eq!(d.describe(), "token 1 ('8' vs '7', gap 2.30 nats: behaviour change)");
        let outside = answer(vec![tok(1, "The", -0.1, &[]), tok(5, "5", -0.5, &[])]);
        let d = first_divergent_token(&base, &outside).unwrap();
        assert!(d.gap_is_lower_bound && d.class == DivergenceClass::BehaviourChange, "{d:?}");
        assert_eq!(first_divergent_token(&base, &base), None);
    }

    #[test]
    fn an_answer_that_ends_early_diverges_at_its_end_unless_it_was_capped() {
        let base = answer(vec![tok(1, "a", -0.1, &[]), tok(2, "b", -0.1, &[])]);
        let short = answer(vec![tok(1, "a", -0.1, &[])]);
        let d = first_divergent_token(&base, &short).unwrap();
        assert_eq!((d.index, d.run.text.clone(), d.class), (1, None, DivergenceClass::BehaviourChange));
        let capped = AnswerTokens { count: 9, ..short };
        assert_eq!(first_divergent_token(&base, &capped), None, "the rest was not kept: unknown, not different");
    }

    #[test]
    fn a_version_6_answer_keeps_its_tokens_and_a_version_5_one_reads_without() {
        let a = crate::Answer {
            content: "8".into(),
            tokens: Some(answer(vec![tok(8, "8", -0.7, &[(8, "8", -0.7), (9, "9", -0.72)])])),
            ..crate::Answer::default()
        };
        let text = serde_json::to_string(&a).unwrap();
        assert!(text.contains(r#""tokens":{"source":"ids","count":1"#), "{text}");
        assert_eq!(serde_json::from_str::<crate::Answer>(&text).unwrap(), a);
        let v5: crate::Answer = serde_json::from_str(r#"{"content": "8"}"#).unwrap();
        assert_eq!(v5.tokens, None);
    }

    #[test]
    fn without_ids_tokens_compare_by_text() {
        let strip = |mut a: AnswerTokens| {
            a.items.iter_mut().for_each(|t| t.id = None);
            a
        };
        let base = strip(answer(vec![tok(1, "x", -0.1, &[]), tok(2, "y", -0.1, &[])]));
        let run = strip(answer(vec![tok(7, "x", -0.1, &[]), tok(2, "z", -0.1, &[])]));
        assert_eq!(first_divergent_token(&base, &run).unwrap().index, 1);
    }
}
