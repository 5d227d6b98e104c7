//! The tokens of one answer as the server reported them (id, text, logprob, top alternatives), the first token at
//! which two answers part, and the noise floor that divergence is judged against: how far the logprobs of the tokens
//! both answers share moved between them ([`Jitter`]). A flip is a near-tie (under [`NEAR_TIE_NATS`]), numerical
//! (its swing within the measured jitter, [`DivergenceClass::Numerical`]) or a behaviour change. Types and pure
//! functions only.

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

/// The measured jitter decides only when it rests on at least this many shared tokens; with fewer, a maximum says
/// little about the distribution it samples, and the flip is judged by [`NEAR_TIE_NATS`] alone (and says so). The
/// default suite's answers share 300–800 tokens between two runs of the same server; a single short answer (a
/// repeat of a two-digit product) shares about ten.
pub const JITTER_MIN_TOKENS: u64 = 32;

/// A flip is numerical when its swing is at most this many times the largest |Δlogprob| of the shared tokens: the
/// swing is the change of a difference of two logprobs, and each of the two moved by at most that maximum.
pub const JITTER_SWING_FACTOR: f64 = 2.0;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DivergenceClass {
    /// The two candidates were within [`NEAR_TIE_NATS`] in the baseline's alternatives: numerical drift.
    NearTie,
    /// Further apart than a near-tie, but the swing between the two candidates lies within the jitter measured on
    /// the tokens the two answers share (see [`class_of`]): the server computes the same thing slightly
    /// differently (since run.json 9 and determinism.json 2).
    Numerical,
    /// Outside the measured jitter, outside the alternatives, or not measurable: the answer changed.
    BehaviourChange,
}

impl DivergenceClass {
    pub fn as_str(self) -> &'static str {
        match self {
            DivergenceClass::NearTie => "near-tie",
            DivergenceClass::Numerical => "numerical",
            DivergenceClass::BehaviourChange => "behaviour change",
        }
    }
}

/// How far the logprobs of the tokens two answers share moved between them (same id at the same position, before
/// their first divergence; the chosen token's logprob, |Δ| in nats), pooled over every pair of one comparison: the
/// noise floor of that server on that hardware under that condition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Jitter {
    /// Shared tokens measured (with a logprob on both sides).
    pub tokens: u64,
    pub max_nats: f64,
    /// Type-7 percentiles ([`crate::stats`]).
    pub p99_nats: f64,
    pub median_nats: f64,
}

impl Jitter {
    /// The jitter of the |Δlogprob| values collected by [`shared_deltas`]; None for none.
    pub fn measure(deltas: &[f64]) -> Option<Jitter> {
        let mut v: Vec<f64> = deltas.iter().copied().filter(|d| d.is_finite()).map(f64::abs).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(Jitter {
            tokens: v.len() as u64,
            max_nats: v[v.len() - 1],
            p99_nats: crate::stats::percentile_sorted(&v, 0.99),
            median_nats: crate::stats::percentile_sorted(&v, 0.5),
        })
    }

    /// Whether it rests on enough tokens to decide ([`JITTER_MIN_TOKENS`]).
    pub fn decides(&self) -> bool {
        self.tokens >= JITTER_MIN_TOKENS && self.max_nats.is_finite()
    }

    /// `shared tokens moved ≤ 0.12 nats over 788 tokens (median 0.002)`
    pub fn describe(&self) -> String {
        format!(
            "shared tokens moved ≤ {:.2} nats over {} tokens (median {:.3})",
            self.max_nats, self.tokens, self.median_nats
        )
    }
}

/// One side of a divergence: the token, or the end of the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TokenBrief {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// None: that answer had ended.
    pub text: Option<String>,
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
    /// How far the two candidates' order moved: the baseline's gap plus the run's own gap the other way (its logprob
    /// of its token minus its logprob of the baseline's). A lower bound where either side's other candidate is not
    /// among its alternatives; None where the run recorded no logprobs there (since run.json 9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swing_nats: Option<f64>,
    #[serde(default)]
    pub swing_is_lower_bound: bool,
    /// Both sides at the divergence as they were recorded: the chosen token, its logprob and the alternatives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_token: Option<Token>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_token: Option<Token>,
    /// The jitter of the comparison this divergence was judged against; None where none was measured (older
    /// records, or no shared token carried logprobs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<Jitter>,
    pub class: DivergenceClass,
    /// Whether the flip changed a check's outcome, where the caller judged it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks_changed: Option<bool>,
}

/// The class of a flip (the rule, in one place, that `verify` recomputes): under [`NEAR_TIE_NATS`] of exact gap a
/// near-tie; else, when the jitter [`decides`](Jitter::decides), numerical if the exact swing is at most
/// [`JITTER_SWING_FACTOR`] × the jitter's maximum, otherwise a behaviour change; without a deciding jitter a
/// behaviour change (the constant alone decides, as before run.json 9).
pub fn class_of(
    gap: Option<f64>,
    gap_is_lower_bound: bool,
    swing: Option<f64>,
    swing_is_lower_bound: bool,
    jitter: Option<&Jitter>,
) -> DivergenceClass {
    match (gap, jitter) {
        (Some(g), _) if !gap_is_lower_bound && g < NEAR_TIE_NATS => DivergenceClass::NearTie,
        (_, Some(j)) if j.decides() => match swing {
            Some(s) if !swing_is_lower_bound && s <= JITTER_SWING_FACTOR * j.max_nats => DivergenceClass::Numerical,
            _ => DivergenceClass::BehaviourChange,
        },
        _ => DivergenceClass::BehaviourChange,
    }
}

impl TokenDivergence {
    /// The class its recorded numbers give by [`class_of`].
    pub fn recomputed_class(&self) -> DivergenceClass {
        class_of(
            self.gap_nats,
            self.gap_is_lower_bound,
            self.swing_nats,
            self.swing_is_lower_bound,
            self.jitter.as_ref(),
        )
    }

    /// Judges this divergence against the jitter measured for its comparison.
    pub fn judged(mut self, jitter: Option<Jitter>) -> TokenDivergence {
        self.jitter = jitter;
        self.class = self.recomputed_class();
        self
    }

    /// `token 27 ('8' vs '9', gap 0.03 nats: near-tie)`; with a measured jitter `token 9 ('3' vs '4', gap 1.05
    /// nats, swing 1.63 nats; shared tokens moved ≤ 0.12 nats over 788 tokens (median 0.002): behaviour change; a
    /// check's outcome changed)`. Baseline's token first. Token texts are server text: the caller escapes the line
    /// for its medium.
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
        let mut numbers = gap;
        if self.class != DivergenceClass::NearTie {
            if let Some(s) = self.swing_nats {
                let op = if self.swing_is_lower_bound { "> " } else { "" };
                numbers.push_str(&format!(", swing {op}{s:.2} nats"));
            }
            match &self.jitter {
                Some(j) if j.decides() => numbers.push_str(&format!("; {}", j.describe())),
                Some(j) => numbers.push_str(&format!(
                    "; jitter not measured: {} shared tokens, fewer than {JITTER_MIN_TOKENS}, so {NEAR_TIE_NATS} nats \
                     decides",
                    j.tokens
                )),
                None => {}
            }
        }
        let checks = match self.checks_changed {
            Some(true) => "; a check's outcome changed",
            Some(false) => "; checks unchanged",
            None => "",
        };
        format!(
            "token {} ({} vs {}, {numbers}: {}{checks})",
            self.index,
            side(&self.baseline),
            side(&self.run),
            self.class.as_str()
        )
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

fn same(x: &Token, y: &Token) -> bool {
    same_token(x.id, (&x.text, x.bytes.as_deref()), y.id, (&y.text, y.bytes.as_deref()))
}

/// An end-of-generation token has no text: llama.cpp lists it in a non-streamed answer's logprobs and not in a
/// streamed one's (measured on its CUDA server). It ends the answer; it is not a token the answer differs by.
fn spelled(items: &[Token]) -> &[Token] {
    let n = items.len()
        - items.iter().rev().take_while(|t| t.text.is_empty() && t.bytes.as_ref().is_none_or(|b| b.is_empty())).count();
    &items[..n]
}

/// Appends to `out` the |Δlogprob| of every token the two answers share: the same token at the same position,
/// before their first divergence, with a finite logprob on both sides. Linear in the tokens kept.
pub fn shared_deltas(a: &AnswerTokens, b: &AnswerTokens, out: &mut Vec<f64>) {
    for (x, y) in spelled(&a.items).iter().zip(spelled(&b.items)) {
        if !same(x, y) {
            break;
        }
        if let (Some(p), Some(q)) = (x.logprob, y.logprob)
            && (p - q).is_finite()
        {
            out.push((p - q).abs());
        }
    }
}

/// `own`'s logprob minus `of`'s in `own`'s alternatives (≥ 0), and whether it is only a lower bound (`of` is not
/// among them: the lowest alternative stands in). None without logprobs there.
fn gap_at(own: &Token, of: &Token) -> Option<(f64, bool)> {
    let mine = own.logprob.or_else(|| own.top.first().map(|a| a.logprob))?;
    if own.top.is_empty() {
        return None;
    }
    match own
        .top
        .iter()
        .find(|a| same_token(a.id, (&a.text, a.bytes.as_deref()), of.id, (&of.text, of.bytes.as_deref())))
    {
        Some(alt) => Some(((mine - alt.logprob).max(0.0), false)),
        None => {
            let lowest = own.top.iter().map(|a| a.logprob).fold(f64::INFINITY, f64::min);
            Some(((mine - lowest).max(0.0), true))
        }
    }
}

/// The first token at which `run` parts from `baseline`, or None when they agree over the tokens both kept (the
/// caller falls back to characters). Linear in the tokens kept. Classed by [`NEAR_TIE_NATS`] alone: a caller with
/// a measured jitter judges it again with [`TokenDivergence::judged`].
pub fn first_divergent_token(baseline: &AnswerTokens, run: &AnswerTokens) -> Option<TokenDivergence> {
    let (b, r) = (spelled(&baseline.items), spelled(&run.items));
    let at = b.iter().zip(r).position(|(x, y)| !same(x, y));
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
    let (mut gap_nats, mut gap_is_lower_bound) = (None, false);
    let (mut swing_nats, mut swing_is_lower_bound) = (None, false);
    if let (Some(bt), Some(rt)) = (bt, rt)
        && let Some((gap, lower)) = gap_at(bt, rt)
    {
        (gap_nats, gap_is_lower_bound) = (Some(gap), lower);
        if let Some((back, back_lower)) = gap_at(rt, bt) {
            (swing_nats, swing_is_lower_bound) = (Some(gap + back), lower || back_lower);
        }
    }
    let class = class_of(gap_nats, gap_is_lower_bound, swing_nats, swing_is_lower_bound, None);
    Some(TokenDivergence {
        index,
        baseline: brief(bt),
        run: brief(rt),
        gap_nats,
        gap_is_lower_bound,
        swing_nats,
        swing_is_lower_bound,
        baseline_token: bt.cloned(),
        run_token: rt.cloned(),
        jitter: None,
        class,
        checks_changed: None,
    })
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

    /// `n` shared tokens whose logprobs differ by `delta` between the two answers, then a flip at token `n`: the
    /// baseline chose '3' over '4' by `gap`, the run '4' over '3' by `back`.
    fn flip(n: usize, delta: f64, gap: f64, back: f64) -> (AnswerTokens, AnswerTokens) {
        let shared = |shift: f64| (0..n).map(|i| tok(100 + i as u64, "w", -0.2 + shift, &[])).collect::<Vec<_>>();
        let mut base = shared(0.0);
        base.push(tok(3, "3", -0.3, &[(3, "3", -0.3), (4, "4", -0.3 - gap)]));
        let mut run = shared(delta);
        run.push(tok(4, "4", -0.4, &[(4, "4", -0.4), (3, "3", -0.4 - back)]));
        (answer(base), answer(run))
    }

    #[test]
    fn a_flip_within_the_shared_tokens_jitter_is_numerical_and_one_far_outside_a_behaviour_change() {
        let (base, run) = flip(40, 0.2, 0.15, 0.15);
        let mut pool = Vec::new();
        shared_deltas(&base, &run, &mut pool);
        let j = Jitter::measure(&pool).unwrap();
        assert_eq!(j.tokens, 40);
        assert!((j.max_nats - 0.2).abs() < 1e-9 && j.decides(), "{j:?}");
        let d = first_divergent_token(&base, &run).unwrap();
        assert_eq!(d.class, DivergenceClass::BehaviourChange, "without a jitter the constant decides");
        assert!((d.swing_nats.unwrap() - 0.3).abs() < 1e-9, "{d:?}");
        let d = d.judged(Some(j.clone()));
        assert_eq!(d.class, DivergenceClass::Numerical, "swing 0.30 ≤ 2 × 0.20");
        assert_eq!(d.baseline_token.as_ref().unwrap().top[1].text, "4");
        assert_eq!(d.run_token.as_ref().unwrap().top[1].text, "3");
        assert!(
            d.describe().contains("swing 0.30 nats; shared tokens moved ≤ 0.20 nats over 40 tokens"),
            "{}",
            d.describe()
        );
        assert!(d.describe().ends_with(": numerical)"), "{}", d.describe());
        // The swing of the issue's H200 flip (1.05 + 0.58) against shared tokens that moved by 0.12 at most.
        let (base, run) = flip(40, 0.12, 1.05, 0.58);
        let mut pool = Vec::new();
        shared_deltas(&base, &run, &mut pool);
        let mut d = first_divergent_token(&base, &run).unwrap().judged(Jitter::measure(&pool));
        d.checks_changed = Some(true);
        assert_eq!(d.class, DivergenceClass::BehaviourChange);
        assert!(d.describe().contains("swing 1.63 nats"), "{}", d.describe());
        assert!(d.describe().ends_with(": behaviour change; a check's outcome changed)"), "{}", d.describe());
        // A near-tie stays one, whatever the jitter.
        let (base, run) = flip(40, 0.2, 0.05, 0.05);
        let d = first_divergent_token(&base, &run).unwrap().judged(Some(j));
        assert_eq!(d.class, DivergenceClass::NearTie);
    }

    #[test]
    fn too_few_shared_tokens_say_so_and_the_constant_decides() {
        let (base, run) = flip(9, 0.2, 0.15, 0.15);
        let mut pool = Vec::new();
        shared_deltas(&base, &run, &mut pool);
        let d = first_divergent_token(&base, &run).unwrap().judged(Jitter::measure(&pool));
        assert_eq!(d.class, DivergenceClass::BehaviourChange);
        assert!(d.describe().contains("jitter not measured: 9 shared tokens, fewer than 32"), "{}", d.describe());
        // A swing known only as a lower bound (the other candidate outside the alternatives) is never numerical.
        let j = Jitter { tokens: 100, max_nats: 5.0, p99_nats: 5.0, median_nats: 1.0 };
        assert_eq!(class_of(Some(0.5), false, Some(0.6), true, Some(&j)), DivergenceClass::BehaviourChange);
        assert_eq!(class_of(Some(0.5), false, Some(0.6), false, Some(&j)), DivergenceClass::Numerical);
        assert_eq!(class_of(Some(0.5), false, None, false, Some(&j)), DivergenceClass::BehaviourChange);
    }

    #[test]
    fn a_version_8_divergence_reads_without_jitter_or_swing() {
        let v8 = r#"{"index": 1, "baseline": {"id": 8, "text": "8"}, "run": {"id": 9, "text": "9"},
                     "gap_nats": 0.03, "gap_is_lower_bound": false, "class": "near-tie"}"#;
        let d: TokenDivergence = serde_json::from_str(v8).unwrap();
        assert_eq!((d.swing_nats, d.jitter.is_none(), d.recomputed_class()), (None, true, DivergenceClass::NearTie));
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
