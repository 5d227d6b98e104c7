//! The baseline store's files: `format.json`, the history lines (`history/<identity>.jsonl`), qualification
//! decisions (`records/<sha256>.json` beside run records), the skip-cache's `reused.json`. Only types; the engine's
//! `store` module reads, writes, locks and verifies them, and [`crate::upgrade`] converts older versions.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bench::BenchRecord;
use crate::identity::IdentityRecord;
use crate::qualify::{QualificationVerdict, Stage, StageStatus};

/// Version of the store layout this gauntlet writes. Format 2 added qualification decisions.
pub const STORE_FORMAT: u32 = 2;
/// The `kind` of a history entry that records a reviewed qualification bundle.
pub const KIND_QUALIFICATION: &str = "qualification";
/// Version of a qualification decision this gauntlet writes. Version 2: its identity and its performance record
/// carry the server binary's digest as the identity's `build` (bench record version 4). Version 1 is still read.
pub const DECISION_VERSION: u32 = 2;

/// `format.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreFormat {
    pub format: u32,
}

/// Who promoted, from where, and why.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// `push`, `workflow_dispatch`, `manual`, …
    pub event: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "ref")]
    pub git_ref: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_url: Option<String>,
}

/// One promotion. `digest` is the sha256 of the entry's canonical JSON without `digest`; `prev` is the previous
/// entry's digest, so an edit, a reorder or a deletion anywhere before the last entry breaks the chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub seq: u64,
    pub prev: Option<String>,
    /// Absent for a gate run; [`KIND_QUALIFICATION`] for a qualification decision (format 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub identity_digest: String,
    pub recipe_digest: String,
    pub record: String,
    pub profile: String,
    /// The promoted record's verdict: a run's (`pass`, `warn`) or a qualification's (`pass`).
    pub verdict: String,
    pub provenance: Provenance,
    pub note: String,
    pub promoted_at: String,
    pub digest: String,
}

impl HistoryEntry {
    pub fn is_qualification(&self) -> bool {
        self.kind.as_deref() == Some(KIND_QUALIFICATION)
    }

    /// What `digest` is taken over: the entry as JSON without `digest`.
    pub fn digest_input(&self) -> Value {
        let mut v = serde_json::to_value(self).unwrap_or(Value::Null);
        if let Value::Object(m) = &mut v {
            m.remove("digest");
        }
        v
    }
}

/// One stage of a promoted qualification, as its bundle reported it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionStage {
    pub id: Stage,
    pub status: StageStatus,
    pub summary: String,
}

/// What a reviewer promoted from a verified qualification bundle: who it qualified (identity), what every stage
/// said, the digest of the bundle's evidence manifest (so the bundle itself can be matched later), and the R5
/// performance record, which later qualifications of the same identity compare with.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Decision {
    pub decision_version: u32,
    pub run_id: String,
    pub profile: String,
    pub identity: IdentityRecord,
    pub identity_digest: String,
    /// Only a passing qualification is ever promoted.
    pub verdict: QualificationVerdict,
    pub qualified_at: String,
    pub stages: Vec<DecisionStage>,
    /// sha256 of the bundle's `evidence-manifest.json`, which lists every evidence file's sha256.
    pub evidence_manifest_sha256: String,
    pub performance: BenchRecord,
}

/// `reused.json`: written beside a skip-cache hit's run.json and report.md, saying where they come from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reused {
    pub reused_from: String,
    pub original_started_at: String,
    pub at: String,
}
