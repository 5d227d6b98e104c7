//! The formats peers read and write, so a team can put gauntlet's numbers beside the ones it already has:
//! llm-d's Benchmark Report v0.2 (written from a bench record), vLLM's `bench serve --save-result` JSON and AIPerf's
//! `profile_export.jsonl` (read). What is read is untrusted: bounded, validated, every error naming the file.

pub mod aiperf;
pub mod llmd;
pub mod vllm;

/// One line of a side-by-side table: another tool's number beside gauntlet's of the same meaning.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Row {
    pub metric: String,
    pub unit: &'static str,
    /// The other tool's number.
    pub theirs: f64,
    /// gauntlet's number of the same meaning, when its record has one.
    pub gauntlet: Option<f64>,
}
