//! The baseline store: concurrent writers never corrupt it, and `verify` catches every kind of tampering.

use std::path::Path;

use gauntlet_engine::identity;
use gauntlet_engine::store::{Provenance, Store};
use gauntlet_schema::*;
use serde_json::json;

pub(crate) fn record(args: &[&str], note: &str) -> RunRecord {
    let identity = gauntlet_schema::IdentityRecord::from_value(
        json!({"identity_version": 1, "recipe": {"server_arguments": args}, "binding": {"runtime": "cpu"}}),
    );
    RunRecord {
        schema_version: RUN_RECORD_VERSION,
        gauntlet_version: "0.1.0".into(),
        profile: "p".into(),
        started_at: format!("2026-12-01T08:00:00.000Z {note}"),
        finished_at: String::new(),
        wall_seconds: 1.0,
        identity_digest: identity::identity_digest(&identity),
        identity,
        runtime: json!({}),
        environment: Environment::default(),
        server: ServerRecord {
            mode: gauntlet_schema::ServerMode::Spawned,
            base_url: String::new(),
            command: Vec::new(),
            pid: None,
            load_seconds: Some(1.0),
            load_cpu: None,
            loaded: true,
            stop: gauntlet_schema::StopOutcome::Terminated,
            events: Vec::new(),
            log_tail: Vec::new(),
            readiness: None,
        },
        suite: SuiteRecord {
            id: "s".into(),
            version: 1,
            digest: "d".into(),
            budget_seconds: 1.0,
            request_timeout_seconds: 1.0,
            over_budget: false,
        },
        cases: Vec::new(),
        decode: DecodeSummary::default(),
        findings: Vec::new(),
        verdict: Verdict::Pass,
        thresholds: Thresholds {
            min_pass_rate: 0.5,
            fail_regressions: 2,
            decode_ratio_warn: 0.85,
            load_ratio_warn: 1.5,
            load_timeout_seconds: 1.0,
            request_timeout_seconds: 1.0,
            suite_budget_seconds: 1.0,
            expected_failures: Vec::new(),
            draft_acceptance_ratio_warn: 0.9,
        },
        baseline: None,
        sentry: None,
        build: None,
        server_metrics: None,
        baseline_jitter: None,
        lossless: None,
    }
}

pub(crate) fn manual() -> Provenance {
    Provenance { event: "manual".into(), commit: Some("c0ffee".into()), ..Provenance::default() }
}

/// A store with one identity promoted three times; returns it and the history file.
fn three(dir: &Path) -> (Store, std::path::PathBuf, RunRecord) {
    let store = Store::open(dir).unwrap();
    let r = record(&["-c", "4096"], "");
    for i in 0..3 {
        store.promote(&record(&["-c", "4096"], &i.to_string()), manual(), &format!("note {i}")).unwrap();
    }
    let history = dir.join("history").join(format!("{}.jsonl", r.identity_digest));
    assert_eq!(store.verify().unwrap(), (3, Vec::new()));
    (store, history, r)
}

fn problems(store: &Store) -> String {
    let (_, p) = store.verify().unwrap();
    assert!(!p.is_empty(), "tampering went unnoticed");
    p.join("\n")
}

fn edit_lines(path: &Path, f: impl FnOnce(&mut Vec<String>)) {
    let mut lines: Vec<String> = std::fs::read_to_string(path).unwrap().lines().map(str::to_owned).collect();
    f(&mut lines);
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn chain_links_each_entry_to_the_previous() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, r) = three(dir.path());
    let h = store.history(&r.identity_digest).unwrap();
    assert_eq!(h.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2, 3]);
    assert_eq!(h[0].prev, None);
    assert_eq!(h[1].prev.as_deref(), Some(h[0].digest.as_str()));
    assert_eq!(h[2].note, "note 2");
    let (entry, latest) = store.latest(&r.identity_digest).unwrap().unwrap();
    assert_eq!(entry.seq, 3);
    assert_eq!(latest.started_at, "2026-12-01T08:00:00.000Z 2");
}

#[test]
fn edited_entry_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let (store, history, _) = three(dir.path());
    edit_lines(&history, |l| l[1] = l[1].replace("note 1", "note X"));
    assert!(problems(&store).contains("line 2: entry was edited"));
}

#[test]
fn edited_last_entry_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let (store, history, _) = three(dir.path());
    edit_lines(&history, |l| l[2] = l[2].replace("manual", "push"));
    assert!(problems(&store).contains("line 3: entry was edited"));
}

#[test]
fn reordered_entries_are_found() {
    let dir = tempfile::tempdir().unwrap();
    let (store, history, _) = three(dir.path());
    edit_lines(&history, |l| l.swap(0, 1));
    let p = problems(&store);
    assert!(p.contains("chain broken"), "{p}");
}

#[test]
fn deleted_entry_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let (store, history, _) = three(dir.path());
    edit_lines(&history, |l| {
        l.remove(1);
    });
    let p = problems(&store);
    assert!(p.contains("line 2: sequence 3 where 2 was expected"), "{p}");
    assert!(p.contains("chain broken"), "{p}");
}

#[test]
fn modified_record_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, r) = three(dir.path());
    let entry = store.history(&r.identity_digest).unwrap().remove(0);
    let path = dir.path().join("records").join(format!("{}.json", entry.record));
    let text = std::fs::read_to_string(&path).unwrap().replace("\"pass\"", "\"warn\"");
    std::fs::write(&path, text).unwrap();
    assert!(problems(&store).contains("the record was modified"));
}

#[test]
fn identity_key_reused_with_other_settings_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let (store, history, r) = three(dir.path());
    // A record with other settings that claims the same identity key, chained in correctly by a forger.
    let mut forged = record(&["-c", "8"], "forged");
    forged.identity_digest = r.identity_digest.clone();
    let bytes = serde_json::to_vec_pretty(&forged).unwrap();
    let digest = gauntlet_engine::util::sha256_hex(&bytes);
    std::fs::write(dir.path().join("records").join(format!("{digest}.json")), &bytes).unwrap();
    let mut last = store.history(&r.identity_digest).unwrap().pop().unwrap();
    last.prev = Some(last.digest.clone());
    last.seq = 4;
    last.record = digest;
    last.digest = gauntlet_engine::store::entry_digest(&last);
    let line = identity::canonical(&serde_json::to_value(&last).unwrap());
    edit_lines(&history, |l| l.push(line));
    let p = problems(&store);
    assert!(p.contains("reused with different settings"), "{p}");
    // And promote itself refuses a record whose identity does not match its digest.
    assert!(store.promote(&forged, manual(), "").is_err());
}

#[test]
fn two_concurrent_writers_never_corrupt_the_store() {
    let dir = tempfile::tempdir().unwrap();
    Store::open(dir.path()).unwrap();
    let writers: Vec<_> = (0..2)
        .map(|w| {
            let root = dir.path().to_owned();
            std::thread::spawn(move || {
                let store = Store::open(&root).unwrap();
                for i in 0..25 {
                    store.promote(&record(&["-c", "4096"], &format!("{w}-{i}")), manual(), "").unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let store = Store::open(dir.path()).unwrap();
    assert_eq!(store.verify().unwrap(), (50, Vec::new()));
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("history"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_newer_store_format_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("format.json"), "{\"format\": 99}").unwrap();
    let e = Store::open(dir.path()).unwrap_err().to_string();
    assert!(e.contains("has format 99"), "{e}");
}

#[test]
fn names_from_outside_never_become_paths() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    assert!(store.read_record("../../etc/passwd").is_err());
    assert!(store.history("../x").is_err());
}

/// Paired baselines: the same recipe bound to another device is found (so a promotion from another commit can be
/// warned about); a profile's newest baseline under another identity is found (so a run can say what changed).
#[test]
fn paired_baselines_and_the_profiles_other_identities() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut on_gpu = record(&["-c", "4096"], "gpu");
    let mut value = on_gpu.identity.to_value();
    value["binding"] = json!({"runtime": "cuda", "device": "H200"});
    on_gpu.identity = gauntlet_schema::IdentityRecord::from_value(value);
    on_gpu.identity_digest = identity::identity_digest(&on_gpu.identity);
    let commit = |c: &str| Provenance { event: "push".into(), commit: Some(c.into()), ..Provenance::default() };
    let cpu_entry = store.promote(&record(&["-c", "4096"], "cpu"), commit("aaa"), "cpu").unwrap();
    let gpu_entry = store.promote(&on_gpu, commit("bbb"), "gpu").unwrap();
    assert_eq!(cpu_entry.recipe_digest, gpu_entry.recipe_digest);
    let paired = store.paired(&gpu_entry).unwrap();
    assert_eq!(paired.len(), 1);
    assert_eq!(paired[0].provenance.commit.as_deref(), Some("aaa"), "the pair comes from another commit");
    let other_recipe = store.promote(&record(&["-c", "2048"], "x"), commit("ccc"), "other").unwrap();
    assert!(store.paired(&other_recipe).unwrap().is_empty(), "another recipe is not a pair");

    let (entry, found) = store.latest_of_profile("p", &other_recipe.identity_digest).unwrap().unwrap();
    assert_ne!(entry.identity_digest, other_recipe.identity_digest);
    assert_eq!(found.identity_digest, entry.identity_digest);
    assert!(store.latest_of_profile("nobody", "").unwrap().is_none());
}

fn decision(r: &RunRecord, verdict: &str) -> gauntlet_engine::store::Decision {
    let performance = serde_json::from_value(json!({
        "bench_version": gauntlet_engine::run::BENCH_VERSION, "gauntlet_version": "0.1.0", "profile": "p",
        "started_at": "2026-12-01T09:00:00Z", "identity": r.identity, "identity_digest": r.identity_digest,
        "runtime": {}, "workload": {"concurrency": [1], "max_tokens": 8, "warmups": 0, "repetitions": 3},
        "definitions": {}, "levels": [], "verdict": "candidate", "rules": {}
    }))
    .unwrap();
    gauntlet_engine::store::Decision {
        decision_version: gauntlet_engine::store::DECISION_VERSION,
        run_id: "q1".into(),
        profile: "p".into(),
        identity: r.identity.clone(),
        identity_digest: r.identity_digest.clone(),
        verdict: verdict.parse().unwrap(),
        qualified_at: "2026-12-01T09:10:00Z".into(),
        stages: Vec::new(),
        evidence_manifest_sha256: "0".repeat(64),
        performance,
    }
}

#[test]
fn a_qualification_decision_joins_a_format_1_chain_without_becoming_its_gate_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let (store, history, r) = three(dir.path());
    std::fs::write(dir.path().join("format.json"), "{\"format\": 1}").unwrap();
    let store = Store::open(dir.path()).unwrap_or(store);
    let entry = store.promote_decision(&decision(&r, "pass"), manual(), "reviewed").unwrap();
    assert_eq!((entry.seq, entry.kind.as_deref()), (4, Some("qualification")));
    assert_eq!(store.verify().unwrap(), (4, Vec::new()));
    let format = std::fs::read_to_string(dir.path().join("format.json")).unwrap();
    assert!(format.contains("\"format\": 2"), "the first decision marks the store format 2: {format}");
    // The gate's baseline is still the newest run; the qualification's is the decision.
    assert_eq!(store.latest(&r.identity_digest).unwrap().unwrap().0.seq, 3);
    let (found, d) = store.latest_decision(&r.identity_digest).unwrap().unwrap();
    assert_eq!((found.seq, d.run_id.as_str()), (4, "q1"));
    // A decision whose identity was edited breaks like a record does.
    let record = dir.path().join("records").join(format!("{}.json", entry.record));
    let text = std::fs::read_to_string(&record).unwrap().replace("\"q1\"", "\"q2\"");
    std::fs::write(&record, text).unwrap();
    assert!(problems(&store).contains("the record was modified"));
    // A decision that does not match its own identity is refused before anything is written.
    let mut wrong = decision(&r, "pass");
    wrong.identity_digest = "f".repeat(64);
    assert!(store.promote_decision(&wrong, manual(), "x").is_err());
    assert_eq!(std::fs::read_to_string(&history).unwrap().lines().count(), 4);
}

/// D6: a writer killed between creating and renaming its temporary file leaves `.NAME.tmp-PID` behind. Such files
/// are no part of the store: `verify` finds the chains intact and lists them as temporaries, and the next
/// promotion (under the lock, so no writer is at work) removes them. A directory of that name is not touched.
#[test]
fn temporary_files_of_an_interrupted_write_are_ignored_and_then_removed() {
    let dir = tempfile::tempdir().unwrap();
    let (store, history, r) = three(dir.path());
    let name = history.file_name().unwrap().to_str().unwrap();
    let stale = dir.path().join("history").join(format!(".{name}.tmp-4242"));
    std::fs::write(&stale, b"{\"seq\": 4, \"partial").unwrap();
    let stale_record = dir.path().join("records").join(".0123.json.tmp-77");
    std::fs::write(&stale_record, b"").unwrap();
    let kept = dir.path().join("history").join(".x.tmp-9");
    std::fs::create_dir(&kept).unwrap();
    assert_eq!(store.verify().unwrap(), (3, Vec::new()), "a temporary file is not a problem of the store");
    let mut want = vec![
        "history/.x.tmp-9".to_owned(),
        format!("history/.{name}.tmp-4242"),
        "records/.0123.json.tmp-77".to_owned(),
    ];
    want.sort();
    assert_eq!(store.temporaries(), want);
    store.promote(&r, manual(), "after the interruption").unwrap();
    assert!(!stale.exists() && !stale_record.exists(), "{:?}", store.temporaries());
    assert!(kept.is_dir(), "only plain files are removed");
    assert_eq!(store.verify().unwrap(), (4, Vec::new()));
}
