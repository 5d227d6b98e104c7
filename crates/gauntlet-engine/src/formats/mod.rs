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

/// Why no bench level was chosen to put beside another tool's run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LevelError {
    #[error("the bench has no level at concurrency {concurrency} (it has {levels:?}); choose one with --concurrency")]
    NoSuchLevel { concurrency: usize, levels: Vec<usize> },
    #[error(
        "the vLLM run states no max_concurrency and the bench has levels {levels:?}: choose one with --concurrency"
    )]
    VllmStatesNone { levels: Vec<usize> },
    #[error(
        "an AIPerf export states no concurrency (its peak in flight was {peak_in_flight}) and the bench has levels \
         {levels:?}: choose one with --concurrency"
    )]
    AiperfStatesNone { peak_in_flight: usize, levels: Vec<usize> },
}

fn concurrencies(r: &gauntlet_schema::bench::BenchRecord) -> Vec<usize> {
    r.levels.iter().map(|l| l.concurrency).collect()
}

/// The bench level at concurrency `want`, else the bench's only one, else `unstated()`.
fn pick_level(
    r: &gauntlet_schema::bench::BenchRecord,
    want: Option<usize>,
    unstated: impl FnOnce() -> LevelError,
) -> Result<&gauntlet_schema::bench::Level, LevelError> {
    match want {
        Some(c) => r
            .levels
            .iter()
            .find(|l| l.concurrency == c)
            .ok_or_else(|| LevelError::NoSuchLevel { concurrency: c, levels: concurrencies(r) }),
        None if r.levels.len() == 1 => Ok(&r.levels[0]),
        None => Err(unstated()),
    }
}
