//! Files gauntlet did not write are untrusted: a bundle, a store or a shard from someone else. Their paths stay
//! inside their root, only regular files are read (never a symlink, a FIFO or a device), and every number is
//! checked before arithmetic. Each test runs the reader on a thread with a deadline, so a reader that hangs fails
//! the test instead of hanging the suite.

use std::path::{Path, PathBuf};
use std::time::Duration;

use gauntlet_engine::store::{Provenance, Store, StoreError};
use gauntlet_schema::*;
use serde_json::{Value, json};

const H200_RUN: &str = include_str!("../../../../docs/validation/h200-2026-12-01/run1.json");

/// Runs `f` on its own thread; panics if it does not return within `limit`.
fn within<T: Send + 'static>(limit: Duration, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).unwrap_or_else(|_| panic!("the reader did not return within {limit:?}"))
}

fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // SAFETY: mkfifo on a valid NUL-terminated path.
    assert_eq!(unsafe { libc_mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo {}", path.display());
}

unsafe extern "C" {
    #[link_name = "mkfifo"]
    fn libc_mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
}

/// A minimal bundle: the snapshot (with `qualify` settings edited by `edit`) and a report whose stages are `rows`
/// (id, file), each recorded as passed.
fn bundle(dir: &Path, edit: impl FnOnce(&mut Value), rows: &[(&str, &str)]) -> PathBuf {
    let bundle = dir.join("bundle");
    std::fs::create_dir_all(&bundle).unwrap();
    let manifest = gauntlet_engine::manifest::Manifest::parse(
        gauntlet_engine::manifest::Manifest::embedded_default_text(),
        "d",
        dir,
    )
    .unwrap();
    let mut qualify = serde_json::to_value(&manifest.profiles["default"].qualify).unwrap();
    edit(&mut qualify);
    let run = parse_run_record(H200_RUN).unwrap();
    let write = |name: &str, v: Value| std::fs::write(bundle.join(name), v.to_string()).unwrap();
    write(
        "profile.snapshot.json",
        json!({"run_id": "q", "identity": run.identity, "identity_digest": run.identity_digest, "qualify": qualify,
            "expected_failures": []}),
    );
    let stages: Vec<Value> = rows
        .iter()
        .map(|(id, file)| {
            json!({"id": id, "title": id, "status": "pass", "file": file, "started_at": null, "seconds": 1.0,
                "timeout_seconds": 1.0, "timed_out": false, "summary": "", "failures": []})
        })
        .collect();
    write(
        "qualification.json",
        json!({"qualification_version": 1, "run_id": "q", "gauntlet_version": "0", "profile": "p",
            "identity_digest": run.identity_digest, "started_at": "t", "finished_at": "t", "verdict": "pass",
            "partial": true, "selected": ["R7"], "base_url": "", "command": [], "baseline": null, "stages": stages}),
    );
    bundle
}

fn stage_file(bundle: &Path, name: &str, stage: &str, extra: Value) {
    let mut v = json!({"run_id": "q", "stage": stage, "status": "pass", "failures": []});
    v.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
    std::fs::write(bundle.join(name), v.to_string()).unwrap();
}

/// Item 3: a symlink in the evidence manifest, a stage file named by an absolute or `..` path, and a JSONL quality
/// set named outside the bundle are refused; nothing outside the bundle is read (a sha256 oracle otherwise).
#[test]
fn verify_reads_nothing_outside_the_bundle() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("outside.txt"), "secret").unwrap();
    std::fs::write(dir.path().join("set.jsonl"), "{\"question\": \"1+1?\", \"answer\": \"#### 2\"}\n").unwrap();
    let set = dir.path().join("set.jsonl");
    let b = bundle(
        dir.path(),
        |q| q["quality"]["set"] = json!({"kind": "jsonl", "path": set}),
        &[
            ("R1", "/etc/hostname"),
            ("R2", "r2-quality.json"),
            ("R3", "../outside.txt"),
            ("R7", "evidence-manifest.json"),
        ],
    );
    stage_file(&b, "r2-quality.json", "R2", json!({"items": [], "accuracy": 0.0}));
    std::os::unix::fs::symlink(dir.path().join("outside.txt"), b.join("linked.txt")).unwrap();
    let sha = gauntlet_engine::util::sha256_hex(b"secret");
    stage_file(
        &b,
        "evidence-manifest.json",
        "R7",
        json!({"files": [{"path": "linked.txt", "sha256": sha, "bytes": 6}]}),
    );
    let problems = within(Duration::from_secs(10), move || gauntlet_engine::qualify::verify_bundle(&b));
    let has = |needle: &str| problems.iter().any(|p| p.contains(needle));
    assert!(has("`/etc/hostname` is not a file name of the bundle"), "{problems:?}");
    assert!(has("`../outside.txt` is not a file name of the bundle"), "{problems:?}");
    assert!(has("linked.txt: is a symbolic link"), "{problems:?}");
    assert!(has("`linked.txt` is not a regular file"), "{problems:?}");
    assert!(has("quality-set.jsonl (the set's copy in the bundle): no such file"), "{problems:?}");
}

/// Item 4: evidence that is a FIFO or a symlink to `/dev/zero` is refused at once: no hang, no unbounded read.
#[test]
fn verify_refuses_fifos_and_devices_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let b = bundle(dir.path(), |_| {}, &[("R7", "evidence-manifest.json")]);
    mkfifo(&b.join("pipe.log"));
    std::os::unix::fs::symlink("/dev/zero", b.join("zero.log")).unwrap();
    let zero = gauntlet_engine::util::sha256_hex(b"");
    stage_file(
        &b,
        "evidence-manifest.json",
        "R7",
        json!({"files": [{"path": "pipe.log", "sha256": zero, "bytes": 0}, {"path": "zero.log", "sha256": zero, "bytes": 0}]}),
    );
    // The monitor log a stage would read, as a FIFO too.
    mkfifo(&b.join("resource-monitor.jsonl"));
    let problems = within(Duration::from_secs(10), move || gauntlet_engine::qualify::verify_bundle(&b));
    let has = |needle: &str| problems.iter().any(|p| p.contains(needle));
    assert!(has("pipe.log: is a FIFO, not a regular file"), "{problems:?}");
    assert!(has("zero.log: is a symbolic link"), "{problems:?}");
}

/// Item 5: numbers in a bundle are checked before they are used: a monitor window of 2^64−1 (which overflowed
/// the window arithmetic), an R2 set of 10^12 problems (which was generated) and 10^12 bootstrap resamples (which
/// were allocated) are problems, not a panic or an abort.
#[test]
fn verify_checks_numbers_before_arithmetic() {
    let dir = tempfile::tempdir().unwrap();
    let b = bundle(
        dir.path(),
        |q| {
            q["monitor"]["window"] = json!(u64::MAX);
            q["quality"]["set"] = json!({"kind": "arithmetic", "version": 1, "seed": 1, "count": 1_000_000_000_000u64});
        },
        &[("R2", "r2-quality.json"), ("R5", "r5-bench.json"), ("R6", "r6-drift.json")],
    );
    stage_file(&b, "r2-quality.json", "R2", json!({"items": [], "accuracy": 0.0}));
    let mut rules = serde_json::to_value(gauntlet_engine::bench::stats::Rules::default()).unwrap();
    rules["resamples"] = json!(1_000_000_000_000u64);
    let workload = serde_json::to_value(gauntlet_schema::bench::Workload::new(vec![1], 8, 1, 2)).unwrap();
    stage_file(
        &b,
        "r5-bench.json",
        "R5",
        json!({"workload": workload, "levels": [], "rules": rules, "baseline": null, "verdict": "pass"}),
    );
    stage_file(&b, "r6-drift.json", "R6", json!({"drift": {}}));
    std::fs::write(b.join("resource-monitor.jsonl"), "").unwrap();
    let problems = within(Duration::from_secs(20), move || gauntlet_engine::qualify::verify_bundle(&b));
    let has = |needle: &str| problems.iter().any(|p| p.contains(needle));
    assert!(has("monitor window 18446744073709551615 is outside 1..=10000"), "{problems:?}");
    assert!(has("the declared set has 1000000000000 problems, r2-quality.json has 0"), "{problems:?}");
    assert!(has("R5: 1000000000000 bootstrap resamples"), "{problems:?}");
}

fn record(profile: &str) -> RunRecord {
    let mut run = parse_run_record(H200_RUN).unwrap();
    run.profile = profile.into();
    run
}

fn trusted() -> Provenance {
    Provenance::default()
}

/// Items 12 and 13: a record that is a symlink (even to a file with the right bytes) is refused; a format number
/// past u32 and format 0 are refused; a history whose last sequence number is 2^64−1 cannot be appended to
/// (no wrap-around, no panic); folders of the store that are symlinks are refused.
#[test]
fn the_store_refuses_symlinks_and_impossible_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let store = Store::open(&root).unwrap();
    let run = record("p");
    let entry = store.promote(&run, trusted(), "first").unwrap();
    assert!(store.read_record(&entry.record).is_ok());
    // The record's own bytes, outside the store, and the record replaced by a link to them.
    let inside = root.join("records").join(format!("{}.json", entry.record));
    let outside = dir.path().join("copy.json");
    std::fs::copy(&inside, &outside).unwrap();
    std::fs::remove_file(&inside).unwrap();
    std::os::unix::fs::symlink(&outside, &inside).unwrap();
    let e = store.read_record(&entry.record).unwrap_err().to_string();
    assert!(e.contains("symbolic link"), "{e}");
    let (_, problems) = store.verify().unwrap();
    assert!(problems.iter().any(|p| p.contains("symbolic link")), "{problems:?}");

    // A history whose last entry claims the largest sequence number: the next promotion is refused.
    let history = root.join("history").join(format!("{}.jsonl", entry.identity_digest));
    let text = std::fs::read_to_string(&history).unwrap();
    let mut last: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    last["seq"] = json!(u64::MAX);
    std::fs::write(&history, format!("{last}\n")).unwrap();
    let e = store.promote(&record("p"), trusted(), "second").unwrap_err().to_string();
    assert!(e.contains("sequence number 18446744073709551615 cannot be followed"), "{e}");
    let (_, problems) = store.verify().unwrap();
    assert!(problems.iter().any(|p| p.contains("sequence 18446744073709551615 where 1 was expected")), "{problems:?}");

    for format in ["{\"format\": 4294967298}", "{\"format\": 0}", "{\"format\": -1}"] {
        std::fs::write(root.join("format.json"), format).unwrap();
        assert!(matches!(Store::open(&root), Err(StoreError::Io { .. })), "format {format} must be refused");
    }
    let other = dir.path().join("other");
    std::fs::create_dir_all(other.join("elsewhere")).unwrap();
    std::fs::create_dir_all(other.join("history")).unwrap();
    std::os::unix::fs::symlink(other.join("elsewhere"), other.join("records")).unwrap();
    let e = Store::open(&other).unwrap_err().to_string();
    assert!(e.contains("not a directory of the store"), "{e}");
}

/// Item 14: a FIFO in place of the store's lock file: a promotion fails with a clear error at once instead of
/// waiting forever in `open`.
#[test]
fn a_fifo_in_place_of_the_store_lock_is_an_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    Store::open(&root).unwrap();
    // Opening a new store took the lock once and left its (empty) file: replace it.
    let _ = std::fs::remove_file(root.join(".lock"));
    mkfifo(&root.join(".lock"));
    let store = Store::open(&root).unwrap();
    let started = std::time::Instant::now();
    let e = within(Duration::from_secs(10), move || store.promote(&record("p"), trusted(), "x").unwrap_err());
    assert!(matches!(e, StoreError::BadLock { .. }), "{e}");
    assert!(e.to_string().contains("is not a regular file"), "{e}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

/// Items 4 and 17: a shard's `reused.json` that is a FIFO does not hang the merge; a shard's profile name and
/// finding text cannot inject Markdown (links, images, HTML, mentions, code spans, table cells) or leave their line.
#[test]
fn merge_reads_shards_bounded_and_escapes_their_text() {
    use gauntlet_engine::report::merge;
    let dir = tempfile::tempdir().unwrap();
    let hostile = "x](https://evil.example/a) ![t](https://evil.example/t.png) <img src=x> @org/team `c` |z";
    let mut run = record(hostile);
    run.findings.push(Finding {
        kind: FindingKind::Crash,
        severity: Severity::Fail,
        case: None,
        message: "boom\n::error::injected\n# heading [l](https://evil.example)".into(),
    });
    let shard = dir.path().join("gauntlet-a");
    std::fs::create_dir_all(&shard).unwrap();
    std::fs::write(shard.join("run.json"), serde_json::to_vec(&run).unwrap()).unwrap();
    mkfifo(&shard.join("reused.json"));
    let paths = vec![dir.path().to_path_buf()];
    let shards = within(Duration::from_secs(10), move || merge::collect(&paths).unwrap());
    let merged = merge::merge(shards, &[]);
    let md = merged.markdown(Some("gauntlet-{profile}"));
    // Read it as GitHub would (CommonMark with tables and strikethrough): the only structure is gauntlet's own.
    use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};
    let mut cells = 0;
    let mut headings = 0;
    for event in Parser::new_ext(&md, Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH) {
        match event {
            Event::Html(h) | Event::InlineHtml(h) => panic!("HTML `{h}` reached the Markdown:\n{md}"),
            Event::Start(Tag::Link { dest_url, .. }) | Event::Start(Tag::Image { dest_url, .. }) => {
                panic!("a link to `{dest_url}` reached the Markdown:\n{md}")
            }
            Event::Start(Tag::Strikethrough) => panic!("strikethrough reached the Markdown:\n{md}"),
            Event::Start(Tag::Heading { .. }) => headings += 1,
            Event::Start(Tag::TableCell) => cells += 1,
            Event::End(TagEnd::TableRow) | Event::End(TagEnd::TableHead) => {
                assert_eq!(cells, 5, "a row of five cells:\n{md}");
                cells = 0;
            }
            _ => {}
        }
    }
    assert_eq!(headings, 1, "only gauntlet's own heading:\n{md}");
    assert!(!md.lines().any(|l| l.trim_start().starts_with("::")), "{md}");
}

/// Issue 32 D7: a bundle whose R2 ran lm-eval. `variant` plants the hostile file; the task name comes from the
/// bundle's snapshot.
fn lm_eval_bundle(dir: &Path, task: &str) -> PathBuf {
    let b = bundle(
        dir,
        |q| {
            q["quality"]["set"] =
                json!({"kind": "lm-eval", "tasks": [task], "limit": null, "include_path": null, "metric": "acc,none"})
        },
        &[("R2", "r2-quality.json")],
    );
    stage_file(
        &b,
        "r2-quality.json",
        "R2",
        json!({"accuracy": 1.0, "lm_eval": {"exit_ok": true, "results": "r2-lm-eval-results.json",
            "scores": [{"task": task, "metric": "acc,none", "value": 1.0}]}}),
    );
    b
}

/// D7: lm-eval's results and samples files are read by the one file rule: a FIFO is refused at once (it hung
/// `verify` and `baseline promote`), a symlink to `/dev/zero` is refused (it was read), and a task name with
/// `/../` from the bundle's snapshot is refused instead of naming a samples file outside the bundle.
#[test]
fn verify_reads_lm_eval_files_by_the_one_file_rule() {
    let results = json!({"results": {"t": {"acc,none": 1.0}}}).to_string();
    let samples = "{\"filter\": \"none\", \"acc\": 1}\n";

    let dir = tempfile::tempdir().unwrap();
    let b = lm_eval_bundle(dir.path(), "t");
    mkfifo(&b.join("r2-lm-eval-results.json"));
    let problems = within(Duration::from_secs(10), move || gauntlet_engine::qualify::verify_bundle(&b));
    assert!(
        problems.iter().any(|p| p.contains("r2-lm-eval-results.json: unreadable: is a FIFO, not a regular file")),
        "{problems:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let b = lm_eval_bundle(dir.path(), "t");
    std::fs::write(b.join("r2-lm-eval-results.json"), &results).unwrap();
    mkfifo(&b.join("r2-lm-eval-samples-t.jsonl"));
    let problems = within(Duration::from_secs(10), move || gauntlet_engine::qualify::verify_bundle(&b));
    assert!(
        problems.iter().any(|p| p.contains("r2-lm-eval-samples-t.jsonl: cannot score the samples again: is a FIFO")),
        "{problems:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let b = lm_eval_bundle(dir.path(), "t");
    std::fs::write(b.join("r2-lm-eval-results.json"), &results).unwrap();
    std::os::unix::fs::symlink("/dev/zero", b.join("r2-lm-eval-samples-t.jsonl")).unwrap();
    let problems = within(Duration::from_secs(10), move || gauntlet_engine::qualify::verify_bundle(&b));
    assert!(
        problems
            .iter()
            .any(|p| p.contains("r2-lm-eval-samples-t.jsonl: cannot score the samples again: is a symbolic link")),
        "{problems:?}"
    );

    // The escape: the samples file of task `/../../outside` would be `r2-lm-eval-samples-/../../outside.jsonl`,
    // a file beside the bundle that says whatever its writer wants.
    let dir = tempfile::tempdir().unwrap();
    let task = "/../../outside";
    let b = lm_eval_bundle(dir.path(), task);
    std::fs::create_dir_all(b.join("r2-lm-eval-samples-")).unwrap();
    std::fs::write(dir.path().join("outside.jsonl"), samples).unwrap();
    std::fs::write(b.join("r2-lm-eval-results.json"), json!({"results": {task: {"acc,none": 1.0}}}).to_string())
        .unwrap();
    let problems = within(Duration::from_secs(10), move || gauntlet_engine::qualify::verify_bundle(&b));
    assert!(
        problems.iter().any(|p| p.contains("`/../../outside` is not an lm-eval task name (refused")),
        "{problems:?}"
    );
}
