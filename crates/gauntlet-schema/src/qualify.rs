//! The qualification bundle's files: `qualification.json` (the report, rewritten after every stage), the common
//! header of every stage file (`r0-identity.json` … `r6-drift.json`) and `evidence-manifest.json` (R7). Only
//! types; the engine's `qualify` module runs the stages, writes and verifies the bundle.

use serde::{Deserialize, Serialize};

use crate::string_enum;

/// Version of `qualification.json` this gauntlet writes.
pub const QUALIFICATION_VERSION: u32 = 1;

string_enum! {
    /// A stage of a qualification, in the order they run: R0 provenance, R1 correctness, R2 quality, R3
    /// determinism, R4 saturation, R5 performance, R6 drift, R7 evidence.
    pub enum Stage {
        R0 => "R0",
        R1 => "R1",
        R2 => "R2",
        R3 => "R3",
        R4 => "R4",
        R5 => "R5",
        R6 => "R6",
        R7 => "R7",
    }
}

string_enum! {
    /// Where a stage stands.
    pub enum StageStatus {
        Pending => "pending",
        Running => "running",
        Pass => "pass",
        Fail => "fail",
        Inconclusive => "inconclusive",
        NotRun => "not-run",
    }
}

string_enum! {
    /// The qualification's verdict: `running` until the last stage is written.
    pub enum QualificationVerdict {
        Running => "running",
        Pass => "pass",
        Fail => "fail",
        Inconclusive => "inconclusive",
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageRow {
    pub id: Stage,
    pub title: String,
    pub status: StageStatus,
    pub file: String,
    pub started_at: Option<String>,
    pub seconds: Option<f64>,
    pub timeout_seconds: f64,
    pub timed_out: bool,
    pub summary: String,
    pub failures: Vec<String>,
}

/// `qualification.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Qualification {
    pub qualification_version: u32,
    pub run_id: String,
    pub gauntlet_version: String,
    pub profile: String,
    pub identity_digest: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub verdict: QualificationVerdict,
    /// Some stages were not selected: the bundle is not a full qualification.
    pub partial: bool,
    pub selected: Vec<Stage>,
    pub base_url: String,
    pub command: Vec<String>,
    pub baseline: Option<String>,
    pub stages: Vec<StageRow>,
}

impl Qualification {
    pub fn stage(&self, id: Stage) -> Option<&StageRow> {
        self.stages.iter().find(|s| s.id == id)
    }
}

/// What every stage file starts with; the stage's own data follows in the same object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageHeader {
    pub run_id: String,
    pub stage: Stage,
    pub status: StageStatus,
    pub failures: Vec<String>,
}

/// `evidence-manifest.json` (R7's stage file): the header, then every evidence file with its sha256.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvidenceManifest {
    #[serde(flatten)]
    pub header: StageHeader,
    pub files: Vec<EvidenceFile>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvidenceFile {
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
}
