//! The schema record readers and their upgrade path (`gauntlet_schema::upgrade`): `run.json`, `bench.json`, a
//! qualification decision and the store's `format.json`, of every readable version. A run record that reads is
//! rendered the way `report`, `compare` and the CI output render stored records.
#![no_main]

use gauntlet_schema::upgrade::{parse_decision, parse_store_format};
use gauntlet_schema::{parse_bench_record, parse_run_record};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(run) = parse_run_record(text) {
        serde_json::to_string(&run).expect("a run record serializes");
        let _ = gauntlet_engine::report::markdown(&run, Some(&run));
        let _ = gauntlet_engine::report::junit(&run);
        let _ = gauntlet_engine::report::github_annotations(&run);
    }
    if let Ok(bench) = parse_bench_record(text, "bench.json") {
        serde_json::to_string(&bench).expect("a bench record serializes");
    }
    if let Ok(decision) = parse_decision(text) {
        serde_json::to_string(&decision).expect("a decision serializes");
    }
    let _ = parse_store_format(text);
});
