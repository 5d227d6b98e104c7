//! AIPerf's `profile_export.jsonl` (`formats::aiperf::parse`), and what `compare-bench` builds from a file that
//! reads: its rows beside a bench level. A file that reads must hold only checked numbers (finite, non-negative),
//! counts that add up, and a peak in flight no larger than its records; an error names the file and carries no
//! control character (it reaches a terminal).
#![no_main]

use gauntlet_engine::formats::aiperf;
use libfuzzer_sys::fuzz_target;

const ORIGIN: &str = "profile_export.jsonl";

fn checked(x: f64) -> bool {
    x.is_finite() && x >= 0.0
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let export = match aiperf::parse(text, ORIGIN) {
        Ok(e) => e,
        Err(e) => {
            let e = e.to_string();
            assert!(e.starts_with(&format!("{ORIGIN}: ")), "an error names the file: {e:?}");
            assert!(!e.chars().any(char::is_control), "no control text passes: {e:?}");
            return;
        }
    };
    let records = text.lines().filter(|l| !l.trim().is_empty()).count() as u64;
    assert_eq!(export.completed + export.failed + export.other_phase, records, "every record is counted once");
    assert!(export.cancelled <= export.failed, "only a failed record is cancelled");
    assert!(export.peak_in_flight as u64 <= export.completed + export.failed, "{export:?}");
    assert_eq!(export.duration_s.is_some(), export.completed > 0, "{export:?}");
    for x in [export.duration_s, export.request_throughput(), export.output_throughput()].into_iter().flatten() {
        assert!(checked(x), "{export:?}");
    }
    for d in export.latencies.values() {
        for x in [d.mean, d.p50, d.p90, d.p99, d.max] {
            assert!(checked(x), "a latency is a checked number: {d:?}");
        }
    }
    let level: gauntlet_schema::bench::Level = serde_json::from_value(serde_json::json!({
        "concurrency": 1, "batches": [], "samples": {},
        "metrics": {"requests": 4, "failed": 0, "duration_span": 0.5, "ttft": {"mean": 0.02, "p50": 0.02}},
    }))
    .expect("a level");
    for row in aiperf::rows(&export, &level) {
        assert!(checked(row.theirs), "a row holds a checked number: {row:?}");
    }
});
