//! The store readers (`store`): a baseline store folder (`format.json`, `history/<identity>.jsonl`,
//! `records/<digest>.json`) read by every query a command makes of it, and a skip-cache entry (`skip/run.json`,
//! `skip/report.md`) looked up. Every file's bytes also go straight to the parser that reads its kind, so a
//! mutated record is parsed even when its digest no longer matches its name.
//!
//! Input: the multi-file format of `gauntlet_fuzz::sections`, names relative to the store (`skip/…` for the
//! cache entry).
#![no_main]

use gauntlet_engine::store::skip_cache::{CacheKey, lookup};
use gauntlet_engine::store::{HistoryEntry, Store, entry_digest};
use gauntlet_fuzz::{Scratch, sections};
use gauntlet_schema::parse_run_record;
use gauntlet_schema::upgrade::{parse_decision, parse_store_format};
use libfuzzer_sys::fuzz_target;

fn key() -> CacheKey {
    CacheKey {
        source_tree: "fuzz".into(),
        identity_digest: "fuzz".into(),
        model_stat: "fuzz".into(),
        runtime: "fuzz".into(),
        baseline_digest: "fuzz".into(),
        gauntlet_version: "fuzz".into(),
    }
}

fuzz_target!(|data: &[u8]| {
    let files = sections(data, 2);
    for (_, body) in &files {
        let Ok(text) = std::str::from_utf8(body) else { continue };
        let _ = parse_run_record(text);
        let _ = parse_decision(text);
        let _ = parse_store_format(text);
        for line in text.lines() {
            if let Ok(entry) = serde_json::from_str::<HistoryEntry>(line) {
                let _ = entry_digest(&entry);
            }
        }
    }

    let scratch = Scratch::new("store");
    let base = scratch.fresh();
    let (root, cache) = (base.join("store"), base.join("cache"));
    let (skip, store): (Vec<_>, Vec<_>) = files.into_iter().partition(|(n, _)| n.starts_with("skip/"));
    Scratch::write(&root, &store);
    let skip: Vec<(String, &[u8])> = skip.into_iter().map(|(n, b)| (n["skip/".len()..].to_owned(), b)).collect();
    let entry = cache.join(key().digest());
    Scratch::write(&entry, &skip);
    let _ = lookup(&cache, &key());

    let Ok(store) = Store::open(&root) else { return };
    let _ = store.verify();
    let Ok(identities) = store.identities() else { return };
    for id in &identities {
        if let Ok(history) = store.history(id) {
            if let Some(last) = history.last() {
                let _ = store.paired(last);
                let _ = store.latest_of_profile(&last.profile, id);
            }
        }
        let _ = store.latest(id);
        let _ = store.latest_decision(id);
    }
});
