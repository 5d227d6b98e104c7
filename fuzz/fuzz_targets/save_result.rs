//! vLLM's `bench serve --save-result` JSON (`formats::vllm::parse`), and what `compare-bench` builds from a file
//! that reads: its rows beside a bench level.
#![no_main]

use gauntlet_engine::formats::vllm;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(result) = vllm::parse(text, "save-result.json") {
        let level: gauntlet_schema::bench::Level = serde_json::from_value(serde_json::json!({
            "concurrency": 1, "batches": [], "samples": {},
            "metrics": {"ttft": {"mean": 0.02, "p50": 0.02}, "output_throughput_wall": 10.0},
        }))
        .expect("a level");
        for row in vllm::rows(&result, &level) {
            assert!(row.theirs.is_finite() && row.theirs >= 0.0, "a row holds a checked number");
        }
        for s in [&result.backend, &result.model_id, &result.date].into_iter().flatten() {
            assert!(!s.chars().any(char::is_control), "no control text passes");
        }
    }
});
