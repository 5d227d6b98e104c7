//! `determinism.json` (qualification stage R3): the determinism matrix. Each row asks the suite's cases under one
//! condition (the same request again, concurrent copies, streamed, a cold prompt cache, after a restart) and
//! compares every answer with the one it must equal; the row's verdict follows from its comparisons by
//! [`row_verdict`], which `verify` recomputes.

use serde::{Deserialize, Serialize};

use crate::diff::first_difference;
use crate::tokens::{DivergenceClass, Jitter, TokenDivergence};

/// Version 2 added each row's measured `jitter`, the `numerical` class of a divergence (its swing within that
/// jitter), both sides' tokens at a divergence and `jitter_min_tokens`; version 1 reads without them.
pub const DETERMINISM_VERSION: u32 = 2;
/// Versions of `determinism.json` this gauntlet reads.
pub const DETERMINISM_READABLE: &[u32] = &[1, 2];
pub const DETERMINISM_FILE: &str = "determinism.json";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MatrixRow {
    Repeat,
    Concurrent,
    Stream,
    PrefixCache,
    Restart,
}

impl MatrixRow {
    pub const ALL: [MatrixRow; 5] =
        [MatrixRow::Repeat, MatrixRow::Concurrent, MatrixRow::Stream, MatrixRow::PrefixCache, MatrixRow::Restart];

    pub fn as_str(self) -> &'static str {
        match self {
            MatrixRow::Repeat => "repeat",
            MatrixRow::Concurrent => "concurrent",
            MatrixRow::Stream => "stream",
            MatrixRow::PrefixCache => "prefix-cache",
            MatrixRow::Restart => "restart",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RowVerdict {
    Identical,
    /// Every difference is a near-tie flip whose checks came out as on the reference: numerical drift.
    NearTieOnly,
    /// Not run, with the reason (a server gauntlet did not start cannot be restarted).
    NotRun,
    Diverged,
    /// A request failed or gave no evidence (an empty answer).
    Failed,
}

impl RowVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            RowVerdict::Identical => "identical",
            RowVerdict::NearTieOnly => "near-tie flips only",
            RowVerdict::NotRun => "not run",
            RowVerdict::Diverged => "diverged",
            RowVerdict::Failed => "failed",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ComparisonOutcome {
    Identical,
    NearTie,
    Diverged,
    Failed,
}

/// One answer compared with the one it must equal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub case: String,
    /// Which copy (concurrent row), from 0.
    #[serde(default)]
    pub copy: usize,
    pub outcome: ComparisonOutcome,
    /// The answer it must equal, and this one (observed text); None where the request failed.
    pub expected: Option<String>,
    pub got: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub char_index: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<TokenDivergence>,
    /// Whether the suite's checks judged both answers alike (a near-tie flip that changes a check is a change).
    pub checks_same: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Comparison {
    /// The outcome its recorded facts give: failed without both texts (or with an empty expected text: no
    /// evidence), identical when nothing differs, near-tie when the first divergent token is a near-tie and the
    /// checks agree, diverged otherwise.
    pub fn recompute(&self) -> (ComparisonOutcome, Option<usize>) {
        let (Some(e), Some(g)) = (&self.expected, &self.got) else { return (ComparisonOutcome::Failed, None) };
        if self.error.is_some() || e.is_empty() {
            return (ComparisonOutcome::Failed, None);
        }
        let at = first_difference(e, g);
        let outcome = match (at, &self.token) {
            (None, None) => ComparisonOutcome::Identical,
            (_, Some(t)) if t.class == DivergenceClass::NearTie && self.checks_same => ComparisonOutcome::NearTie,
            _ => ComparisonOutcome::Diverged,
        };
        (outcome, at)
    }

    /// `case multiply (copy 1): differs at char 27, token 5 ('8' vs '9', gap 0.03 nats: near-tie)`. Server text
    /// inside: the caller escapes it for its medium.
    pub fn describe(&self) -> String {
        let copy = if self.copy > 0 { format!(" (copy {})", self.copy) } else { String::new() };
        let what = match (self.outcome, &self.error) {
            (ComparisonOutcome::Failed, Some(e)) => format!("failed: {e}"),
            (ComparisonOutcome::Failed, None) => "no evidence (an answer is missing or empty)".into(),
            (ComparisonOutcome::Identical, _) => "identical".into(),
            _ => {
                let ch = self.char_index.map(|c| format!("at char {c}")).unwrap_or_else(|| "in its tokens".into());
                match &self.token {
                    Some(t) => format!("differs {ch}, {}", t.describe()),
                    None => format!("differs {ch} (no tokens to tell a near-tie)"),
                }
            }
        };
        format!("case `{}`{copy}: {what}", self.case)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeterminismRow {
    pub row: MatrixRow,
    /// What the row compares, in words.
    pub what: String,
    pub verdict: RowVerdict,
    /// The first comparison that was not identical, described; or why the row did not run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_divergence: Option<String>,
    /// How far the logprobs of the tokens each comparison's two answers share moved, pooled over the row: the noise
    /// floor its divergences are judged against (version 2; None where no shared token carried logprobs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter: Option<Jitter>,
    pub comparisons: Vec<Comparison>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeterminismMatrix {
    pub determinism_version: u32,
    pub near_tie_nats: f64,
    /// A row's jitter decides a flip's class only when it rests on this many shared tokens (version 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_min_tokens: Option<u64>,
    /// Copies in the concurrent row (the profile's `max_concurrency`).
    pub concurrency: usize,
    pub rows: Vec<DeterminismRow>,
}

/// A row's verdict from its comparisons: the worst outcome decides; a row without comparisons did not run.
pub fn row_verdict(comparisons: &[Comparison]) -> RowVerdict {
    match comparisons.iter().map(|c| c.recompute().0).max() {
        None => RowVerdict::NotRun,
        Some(ComparisonOutcome::Identical) => RowVerdict::Identical,
        Some(ComparisonOutcome::NearTie) => RowVerdict::NearTieOnly,
        Some(ComparisonOutcome::Diverged) => RowVerdict::Diverged,
        Some(ComparisonOutcome::Failed) => RowVerdict::Failed,
    }
}

/// R3's rule: every row that ran is identical or differs by near-tie flips only, and at least one row ran.
pub fn matrix_failures(m: &DeterminismMatrix) -> Vec<String> {
    let mut out = Vec::new();
    for r in &m.rows {
        if matches!(r.verdict, RowVerdict::Diverged | RowVerdict::Failed) {
            let first = r.first_divergence.as_deref().unwrap_or("no detail");
            out.push(format!("row {}: {}: {first}", r.row.as_str(), r.verdict.as_str()));
        }
    }
    if m.rows.iter().all(|r| r.verdict == RowVerdict::NotRun) {
        out.push("no row of the determinism matrix ran: no evidence".into());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokens::TokenBrief;

    fn cmp(expected: &str, got: &str, token: Option<DivergenceClass>, checks_same: bool) -> Comparison {
        Comparison {
            case: "c".into(),
            copy: 0,
            outcome: ComparisonOutcome::Identical,
            expected: Some(expected.into()),
            got: Some(got.into()),
            char_index: None,
            token: token.map(|class| TokenDivergence {
                index: 1,
                baseline: TokenBrief { id: Some(8), text: Some("8".into()) },
                run: TokenBrief { id: Some(9), text: Some("9".into()) },
                gap_nats: Some(0.01),
                gap_is_lower_bound: false,
                swing_nats: None,
                swing_is_lower_bound: false,
                baseline_token: None,
                run_token: None,
                jitter: None,
                class,
                checks_changed: None,
            }),
            checks_same,
            error: None,
        }
    }

    #[test]
    fn the_worst_comparison_decides_the_row() {
        let same = cmp("a 8", "a 8", None, true);
        let tie = cmp("a 8", "a 9", Some(DivergenceClass::NearTie), true);
        let tie_changing_a_check = cmp("a 8", "a 9", Some(DivergenceClass::NearTie), false);
        let change = cmp("a 8", "a 9", Some(DivergenceClass::BehaviourChange), true);
        let no_tokens = cmp("a 8", "a 9", None, true);
        let empty = cmp("", "", None, true);
        assert_eq!(row_verdict(&[]), RowVerdict::NotRun);
        assert_eq!(row_verdict(std::slice::from_ref(&same)), RowVerdict::Identical);
        assert_eq!(row_verdict(&[same.clone(), tie.clone()]), RowVerdict::NearTieOnly);
        assert_eq!(row_verdict(&[tie.clone(), tie_changing_a_check]), RowVerdict::Diverged);
        assert_eq!(row_verdict(&[tie.clone(), change]), RowVerdict::Diverged);
        assert_eq!(row_verdict(&[no_tokens]), RowVerdict::Diverged);
        assert_eq!(row_verdict(&[tie, empty]), RowVerdict::Failed);
    }
}
