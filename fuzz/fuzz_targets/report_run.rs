//! `gauntlet report RUN`'s reader and renderers, and `report --merge`'s shard reader: a `run.json` read as the
//! command reads it, rendered in every format against itself as baseline, and written again as JSON, which must read
//! back (records are total, #32: what gauntlet writes of a record it read, it reads). The same bytes are then a
//! shard of a merge.
//!
//! Input: the bytes of a `run.json`.
#![no_main]

use gauntlet_engine::report::merge;
use gauntlet_fuzz::Scratch;
use gauntlet_schema::parse_run_record;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(run) = parse_run_record(text)
    {
        let _ = gauntlet_engine::report::markdown(&run, Some(&run));
        let _ = gauntlet_engine::report::html(&run, Some(&run), &[]);
        let _ = gauntlet_engine::report::junit(&run);
        let _ = gauntlet_engine::report::github_annotations(&run);
        let json = serde_json::to_string_pretty(&run).expect("a run record serializes");
        if let Err(e) = parse_run_record(&json) {
            panic!("a run record read and written again does not read back: {e}");
        }
    }
    let scratch = Scratch::new("report-run");
    let dir = scratch.fresh();
    Scratch::write(dir, &[("run.json".to_owned(), data)]);
    if let Ok(shards) = merge::collect(&[dir.to_path_buf()]) {
        let _ = merge::merge(shards, &[]);
    }
});
