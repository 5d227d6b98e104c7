//! Losslessness: whether one run's answers are exactly another's (speculative decoding against the same server
//! without its draft), judged with a control (the reference answering again) so that the server's own
//! nondeterminism is not blamed on the draft. The comparison itself is the engine's `compare::lossless`; these are
//! its types, and `run.json`'s `lossless` member (version 10).

use serde::{Deserialize, Serialize};

use crate::tokens::{Jitter, TokenDivergence};

/// One case: identical, or where B first parts from A.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseComparison {
    pub id: String,
    /// identical · differs · drift (a near-tie flip, checks pass) · inconclusive · missing
    pub status: String,
    pub char_index: Option<usize>,
    /// Index (from 0) of the first token at which B parts from A, when both carry tokens.
    pub first_divergent_token: Option<usize>,
    /// Both tokens there, each side's logprob and alternatives, and their gap in A's alternatives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_divergence: Option<TokenDivergence>,
    /// Whether the control agreed with A on this case (None without a control).
    pub control_identical: Option<bool>,
    pub detail: String,
}

/// The verdict over every case of A.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lossless {
    /// pass · fail · inconclusive
    pub verdict: String,
    pub controlled: bool,
    pub cases: Vec<CaseComparison>,
}

/// `run.json`'s `lossless`: the run (with its draft) against the profile named by `lossless_against` (the same
/// server without it), run twice in the same gate: the reference, and the control.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LosslessRecord {
    /// The reference profile's name.
    pub against: String,
    /// Its identity digest (the reference and the control share it).
    pub reference_identity_digest: String,
    /// Where the reference's and the control's own run records were written, relative to the run's folder.
    pub reference_record: String,
    pub control_record: String,
    /// How far the logprobs of the tokens the reference and the control share moved: the server's own jitter
    /// without the draft, against which the draft's divergences are classed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_jitter: Option<Jitter>,
    #[serde(flatten)]
    pub result: Lossless,
}

impl LosslessRecord {
    /// Cases per status, in a fixed order: `identical 3, differs 1`.
    pub fn tally(&self) -> String {
        let mut out = Vec::new();
        for status in ["identical", "drift", "differs", "inconclusive", "missing"] {
            let n = self.result.cases.iter().filter(|c| c.status == status).count();
            if n > 0 {
                out.push(format!("{status} {n}"));
            }
        }
        out.join(", ")
    }
}
