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

#[cfg(test)]
mod tests {
    use super::*;
    use gauntlet_schema::bench::BenchRecord;

    fn bench(concurrencies: &[usize]) -> BenchRecord {
        let levels: Vec<_> = concurrencies
            .iter()
            .map(|c| serde_json::json!({"concurrency": c, "batches": [], "metrics": {}, "samples": {}}))
            .collect();
        serde_json::from_value(serde_json::json!({
            "bench_version": 2, "gauntlet_version": "0", "profile": "p", "started_at": "t", "identity": {},
            "identity_digest": "d", "runtime": {}, "definitions": {}, "verdict": "candidate", "rules": {},
            "workload": {"concurrency": concurrencies, "max_tokens": 4, "warmups": 0, "repetitions": 1},
            "levels": levels,
        }))
        .unwrap()
    }

    /// Each tool says why no level was chosen in its own terms: vLLM states no concurrency, AIPerf only a peak.
    #[test]
    fn a_level_absent_or_not_stated_is_the_variant_of_the_tool_that_did_not_say() {
        let two = bench(&[1, 4]);
        let base = r#"{"completed": 3, "duration": 1.5, "request_throughput": 2, "output_throughput": 9"#;
        let unstated = vllm::parse(&format!("{base}}}"), "v.json").unwrap();
        let at_four = vllm::parse(&format!("{base}, \"max_concurrency\": 4}}"), "v.json").unwrap();
        assert_eq!(vllm::pick_level(&at_four, &two, None).unwrap().concurrency, 4);
        let e = vllm::pick_level(&at_four, &two, Some(8)).unwrap_err();
        assert_eq!(e, LevelError::NoSuchLevel { concurrency: 8, levels: vec![1, 4] });
        assert_eq!(
            e.to_string(),
            "the bench has no level at concurrency 8 (it has [1, 4]); choose one with --concurrency"
        );
        assert_eq!(
            vllm::pick_level(&unstated, &two, None).unwrap_err(),
            LevelError::VllmStatesNone { levels: vec![1, 4] }
        );
        assert_eq!(vllm::pick_level(&unstated, &bench(&[2]), None).unwrap().concurrency, 2, "the only level");
        let line = r#"{"metadata": {"request_start_ns": 1000000000, "request_end_ns": 1100000000, "benchmark_phase": "profiling"}, "metrics": {"time_to_first_token": {"value": 20, "unit": "ms"}, "request_latency": {"value": 100, "unit": "ms"}, "output_sequence_length": {"value": 3, "unit": "tokens"}}, "error": null}"#;
        let export = aiperf::parse(line, "p.jsonl").unwrap();
        assert_eq!(
            aiperf::pick_level(&export, &two, None).unwrap_err(),
            LevelError::AiperfStatesNone { peak_in_flight: 1, levels: vec![1, 4] }
        );
    }
}
