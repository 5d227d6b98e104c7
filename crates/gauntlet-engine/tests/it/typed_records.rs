//! Typed records (issue 16 item 3): reports read the typed record, older versions convert in one place, and the
//! JSON spellings of every enum stay what earlier versions wrote.
//!
//! The record of a real spawned run on an H200 (docs/validation, written by run record version 4) is the fixture:
//! its report once said `model | \`?\` (served by the attached server)` because the report read keys the identity
//! no longer had.

use gauntlet_engine::{identity, report};
use gauntlet_schema::bench::{BenchVerdict, Better, Call};
use gauntlet_schema::{
    IdentityRecord, KernelLogState, RUN_RECORD_VERSION, ReceiveClock, ServerMode, SkipKind, StopOutcome,
    parse_bench_record, parse_run_record,
};
use serde_json::{Value, json};

const H200_RUN: &str = include_str!("../../../../docs/validation/h200-2026-12-01/run1.json");

fn line<'a>(md: &'a str, key: &str) -> &'a str {
    md.lines().find(|l| l.starts_with(&format!("| {key} |"))).unwrap_or_else(|| panic!("no `{key}` line:\n{md}"))
}

#[test]
fn report_of_a_real_spawned_run_names_its_model_and_server() {
    let run = parse_run_record(H200_RUN).expect("a version-4 record reads");
    let md = report::markdown(&run, None);
    assert_eq!(line(&md, "model"), "| model | smollm2-135m (`model.gguf`, sha256 b179c9523d0e…) |");
    assert_eq!(line(&md, "server"), "| server | llama-server-cuda at http://127.0.0.1:18490 (stop: terminated) |");
}

#[test]
fn report_of_an_attached_run_names_the_requested_model() {
    let mut raw: Value = serde_json::from_str(H200_RUN).unwrap();
    raw["identity"]["recipe"]["model"] = json!({"name": "served-model"});
    raw["identity"]["recipe"]["server"] = json!({"kind": "attached", "base_url": "http://gpu-box:8080"});
    raw["identity"]["recipe"]["request_model"] = json!("served-model");
    raw["server"]["mode"] = json!("attached");
    raw["server"]["base_url"] = json!("http://gpu-box:8080");
    let run = parse_run_record(&raw.to_string()).unwrap();
    let md = report::markdown(&run, None);
    assert_eq!(line(&md, "model"), "| model | `served-model` (served by the attached server) |");
    assert_eq!(line(&md, "server"), "| server | attached to http://gpu-box:8080 |");
}

#[test]
fn version_4_binary_digest_moves_into_the_identity_build_and_the_digest_holds() {
    let run = parse_run_record(H200_RUN).unwrap();
    let build = run.identity.current().and_then(|i| i.build.clone()).expect("typed identity with a build");
    assert_eq!(
        build.binary_sha256.as_deref(),
        Some("e05214607f0659a54f8dce36a2093def2a9fe64f555be4aa4037bcdd0aa1a3a2")
    );
    assert!(!build.built);
    assert!(run.runtime.get("server_binary_sha256").is_none(), "moved, not copied");
    // The digest leaves `build` out: the version-4 record's own digest still matches its (upgraded) identity.
    assert_eq!(identity::identity_digest(&run.identity), run.identity_digest);
    // Written again, it is a current record whose identity reads back typed.
    let again = parse_run_record(&serde_json::to_string(&run).unwrap()).unwrap();
    assert_eq!(again.identity, run.identity);
    assert_eq!(RUN_RECORD_VERSION, 14);
}

#[test]
fn another_build_is_a_note_not_another_identity() {
    let old = parse_run_record(H200_RUN).unwrap();
    let mut new = old.clone();
    new.identity.current_mut().unwrap().build.as_mut().unwrap().binary_sha256 = Some("ff".into());
    assert_eq!(identity::identity_digest(&new.identity), old.identity_digest);
    let d = identity::differences(&old.identity, &new.identity, &old.runtime, &new.runtime);
    assert!(d.refusing.is_empty(), "{d:?}");
    assert_eq!(
        d.warning,
        vec!["build.binary_sha256: e05214607f0659a54f8dce36a2093def2a9fe64f555be4aa4037bcdd0aa1a3a2 → ff"]
    );
    let findings = gauntlet_engine::compare::compare(&new, &old, &new.thresholds);
    let note = findings.iter().find(|f| f.kind == "server-build-differs").expect("a server-build-differs note");
    assert_eq!(note.severity, gauntlet_schema::Severity::Info);
    assert!(!findings.iter().any(|f| f.kind == "identity-differs"), "{findings:?}");
}

#[test]
fn a_version_1_identity_stays_readable_and_is_refused_field_by_field() {
    let mut raw: Value = serde_json::from_str(H200_RUN).unwrap();
    raw["schema_version"] = json!(1);
    raw["identity"] = json!({"model": {"name": "m", "sha256": "aa"}, "server": "llama-server", "arguments": ["-c"]});
    let old = parse_run_record(&raw.to_string()).unwrap();
    assert!(matches!(old.identity, IdentityRecord::Legacy(_)));
    assert!(line(&report::markdown(&old, None), "model").contains("older shape"));
    let now = parse_run_record(H200_RUN).unwrap();
    let d = identity::differences(&old.identity, &now.identity, &old.runtime, &now.runtime);
    assert!(d.refusing.iter().any(|r| r.starts_with("identity_version: (none) → 1")), "{:?}", d.refusing);
    assert!(d.refusing.iter().any(|r| r.starts_with("recipe: (none) → ")), "{:?}", d.refusing);
    assert!(d.refusing.iter().any(|r| r.starts_with("model: ")), "{:?}", d.refusing);
}

#[test]
fn newer_or_foreign_records_are_refused_naming_the_file() {
    let next = gauntlet_schema::RUN_RECORD_VERSION + 1;
    let err = parse_run_record(&format!(r#"{{"schema_version": {next}}}"#)).unwrap_err();
    assert!(err.contains(&format!("schema_version {next} is not readable")), "{err}");
    let next = gauntlet_schema::bench::BENCH_VERSION + 1;
    let err = parse_bench_record(&format!(r#"{{"bench_version": {next}}}"#), "x/bench.json").unwrap_err();
    let want = format!("x/bench.json: bench_version {next} is not readable (reads 1 to {})", next - 1);
    assert!(err.starts_with(&want), "{err}");
    let err = parse_bench_record(H200_RUN, "x/run.json").unwrap_err();
    assert!(err.starts_with("x/run.json: no bench_version"), "{err}");
    let err = parse_bench_record(r#"{"bench_version": 3, "verdict": 7}"#, "y.json").unwrap_err();
    assert!(err.starts_with("y.json: "), "{err}");
}

#[test]
fn a_version_3_bench_record_reads_and_its_binary_digest_moves() {
    let run: Value = serde_json::from_str(H200_RUN).unwrap();
    let bench = json!({
        "bench_version": 3, "gauntlet_version": "0.1.0", "profile": "p", "started_at": "2026-12-01T09:00:00Z",
        "identity": run["identity"], "identity_digest": run["identity_digest"],
        "runtime": {"server_binary_sha256": "abc"},
        "workload": {"concurrency": [1], "max_tokens": 8, "warmups": 0, "repetitions": 2},
        "definitions": {}, "levels": [{"concurrency": 1, "batches": [{"seconds": 1.0, "in_flight_max": 1,
            "receive_clock": "mixed", "requests": []}], "metrics": {}, "samples": {},
            "comparisons": [{"metric": "ttft_mean", "better": "lower", "baseline_mean": 1.0, "mean": 1.0,
                "change": 0.0, "interval": [0.0, 0.0], "p_value": null, "call": "no-change", "why": ""}]}],
        "verdict": "improvement", "rules": {}
    });
    let r = parse_bench_record(&bench.to_string(), "b.json").unwrap();
    assert_eq!(r.verdict, BenchVerdict::Improvement);
    assert_eq!(r.levels[0].batches[0].receive_clock, Some(ReceiveClock::Mixed));
    assert_eq!(r.levels[0].comparisons[0].call, Call::NoChange);
    assert_eq!(r.levels[0].comparisons[0].better, Better::Lower);
    assert_eq!(r.identity.current().unwrap().build.as_ref().unwrap().binary_sha256.as_deref(), Some("abc"));
}

/// A version-9 bench.json (before sub-sessions) reads with no measured spread, its comparison's default spread as
/// it was written; a version-10 level carries its sub-sessions, and one that claims more than a bench ever splits
/// into reads as having none.
#[test]
fn a_version_9_bench_record_reads_without_a_measured_spread() {
    let run: Value = serde_json::from_str(H200_RUN).unwrap();
    let record = |version: u32, level: Value| {
        json!({
            "bench_version": version, "gauntlet_version": "0.1.0", "profile": "p", "started_at": "t",
            "identity": run["identity"], "identity_digest": run["identity_digest"], "runtime": {},
            "workload": {"concurrency": [1], "max_tokens": 8, "warmups": 0, "repetitions": 4},
            "definitions": {}, "levels": [level], "verdict": "inconclusive", "rules": {}
        })
        .to_string()
    };
    let old = json!({"concurrency": 1, "batches": [], "metrics": {}, "samples": {"tpot_mean": [0.1, 0.1, 0.1, 0.1]},
        "comparisons": [{"metric": "tpot_mean", "better": "lower", "baseline_mean": 0.1, "mean": 0.1, "change": 0.0,
            "interval": [-0.5, 0.5], "p_value": 1.0, "call": "inconclusive", "why": "", "mde": 0.8,
            "between_session": {"spread": 0.2, "source": "default", "sessions": 1}}]});
    let r = parse_bench_record(&record(9, old), "old/bench.json").unwrap();
    assert!(r.levels[0].sub_sessions.is_none());
    let b = r.levels[0].comparisons[0].between_session.clone().unwrap();
    assert_eq!((b.source.as_str(), b.spread, b.baseline_side, b.note), ("default", 0.2, None, None));
    let sub = |n: usize| {
        json!({"concurrency": 1, "batches": [], "metrics": {}, "samples": {},
            "sub_sessions": {"batches": vec![1; n], "means": {"tpot_mean": vec![0.1; n]}}})
    };
    let r = parse_bench_record(&record(10, sub(3)), "new/bench.json").unwrap();
    assert_eq!(r.levels[0].sub_sessions.as_ref().unwrap().means["tpot_mean"].len(), 3);
    let r = parse_bench_record(&record(10, sub(100_000)), "forged/bench.json").unwrap();
    assert!(r.levels[0].sub_sessions.is_none());
}

/// Every enum writes exactly the spelling earlier versions wrote, and reads it back.
#[test]
fn enum_spellings_are_the_old_strings() {
    fn spelled<T: serde::Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug>(
        all: &[T],
    ) -> Vec<String> {
        all.iter()
            .map(|v| {
                let s = serde_json::to_value(v).unwrap();
                assert_eq!(&serde_json::from_value::<T>(s.clone()).unwrap(), v);
                s.as_str().unwrap().to_owned()
            })
            .collect()
    }
    assert_eq!(spelled(BenchVerdict::ALL), ["pass", "regression", "inconclusive", "improvement", "candidate", "fail"]);
    assert_eq!(spelled(Call::ALL), ["regression", "improvement", "no-change", "inconclusive"]);
    assert_eq!(spelled(Better::ALL), ["higher", "lower"]);
    assert_eq!(spelled(StopOutcome::ALL), ["terminated", "killed", "stuck", "crashed", "not-started", "attached"]);
    assert_eq!(spelled(KernelLogState::ALL), ["clean", "fault", "incomplete", "blind"]);
    assert_eq!(spelled(ReceiveClock::ALL), ["kernel", "client", "mixed"]);
    assert_eq!(spelled(SkipKind::ALL), ["gpu-busy", "build-timeout"]);
    assert_eq!(spelled(&[ServerMode::Spawned, ServerMode::Attached]), ["spawned", "attached"]);
}

/// Finding kinds keep the names every earlier record used; a name this gauntlet does not know reads and writes back
/// unchanged.
#[test]
fn finding_kinds_keep_their_names() {
    use gauntlet_schema::FindingKind;
    let names: Vec<String> =
        FindingKind::ALL.iter().map(|k| serde_json::to_value(k).unwrap().as_str().unwrap().to_owned()).collect();
    for expected in [
        "crash",
        "never-loaded",
        "request-error",
        "over-budget",
        "killed",
        "stuck",
        "leftover-process",
        "attached",
        "regression",
        "text-drift",
        "repeat-differs",
        "no-baseline",
        "pass-rate",
        "identity-differs",
        "runtime-differs",
        "server-build-differs",
        "server-not-on-gpu",
        "gpu-use-unknown",
        "kernel-fault",
        "runtime-fault",
        "kernel-log-blind",
        "host-rebooted",
    ] {
        assert!(names.iter().any(|n| n == expected), "{expected} missing from {names:?}");
    }
    for k in FindingKind::ALL {
        assert_eq!(&serde_json::from_value::<FindingKind>(serde_json::to_value(k).unwrap()).unwrap(), k);
        assert!(!matches!(k, FindingKind::Other(_)), "{k} is named");
    }
    let later: FindingKind = serde_json::from_value(json!("a-kind-from-later")).unwrap();
    assert_eq!(later, FindingKind::Other("a-kind-from-later".into()));
    assert_eq!(serde_json::to_value(&later).unwrap(), json!("a-kind-from-later"));
    // Every finding of the real run reads as a named kind.
    let run = parse_run_record(H200_RUN).unwrap();
    assert!(!run.findings.is_empty());
    assert!(run.findings.iter().all(|f| !matches!(f.kind, FindingKind::Other(_))), "{:?}", run.findings);
}

/// The evidence manifest is untrusted: an entry naming a path outside the bundle is a problem, never a file read
/// outside it.
#[test]
fn evidence_outside_the_bundle_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    std::fs::create_dir(&bundle).unwrap();
    // A file beside the bundle, with its true digest and size: followed, it would verify.
    std::fs::write(dir.path().join("outside.txt"), "secret").unwrap();
    let sha = gauntlet_engine::util::sha256_hex(b"secret");
    let manifest = gauntlet_engine::manifest::Manifest::parse(
        gauntlet_engine::manifest::Manifest::embedded_default_text(),
        "d",
        dir.path(),
    )
    .unwrap();
    let qualify = serde_json::to_value(&manifest.profiles["default"].qualify).unwrap();
    let run = parse_run_record(H200_RUN).unwrap();
    let write = |name: &str, v: Value| std::fs::write(bundle.join(name), v.to_string()).unwrap();
    write(
        "profile.snapshot.json",
        json!({"run_id": "q", "identity": run.identity, "identity_digest": run.identity_digest, "qualify": qualify}),
    );
    write(
        "qualification.json",
        json!({"qualification_version": 1, "run_id": "q", "gauntlet_version": "0", "profile": "p",
            "identity_digest": run.identity_digest, "started_at": "t", "finished_at": "t", "verdict": "pass",
            "partial": true, "selected": ["R7"], "base_url": "", "command": [], "baseline": null,
            "stages": [{"id": "R7", "title": "evidence", "status": "pass", "file": "evidence-manifest.json",
                "started_at": null, "seconds": 1.0, "timeout_seconds": 1.0, "timed_out": false, "summary": "",
                "failures": []}]}),
    );
    write(
        "evidence-manifest.json",
        json!({"run_id": "q", "stage": "R7", "status": "pass", "failures": [],
            "files": [{"path": "../outside.txt", "sha256": sha, "bytes": 6}]}),
    );
    let problems = gauntlet_engine::qualify::verify_bundle(&bundle);
    assert!(
        problems.iter().any(|p| p == "evidence-manifest.json: `../outside.txt` is not a file name of the bundle"),
        "{problems:?}"
    );
}

/// A version-1 decision (its performance record a version-3 bench record) reads as today's; a newer one and a
/// newer store format are refused.
#[test]
fn older_decisions_and_store_formats_read_newer_ones_are_refused() {
    use gauntlet_schema::qualify::{QualificationVerdict, StageStatus};
    use gauntlet_schema::upgrade::{StoreFormatError, parse_decision, parse_store_format};
    let run: Value = serde_json::from_str(H200_RUN).unwrap();
    let mut decision = json!({
        "decision_version": 1, "run_id": "q", "profile": "p", "identity": run["identity"],
        "identity_digest": run["identity_digest"], "verdict": "pass", "qualified_at": "t",
        "stages": [{"id": "R0", "status": "pass", "summary": ""}, {"id": "R2", "status": "not-run", "summary": ""}],
        "evidence_manifest_sha256": "0",
        "performance": {
            "bench_version": 3, "gauntlet_version": "0.1.0", "profile": "p", "started_at": "t",
            "identity": run["identity"], "identity_digest": run["identity_digest"],
            "runtime": {"server_binary_sha256": "abc"},
            "workload": {"concurrency": [1], "max_tokens": 8, "warmups": 0, "repetitions": 2},
            "definitions": {}, "levels": [], "verdict": "candidate", "rules": {}
        }
    });
    let d = parse_decision(&decision.to_string()).unwrap();
    assert_eq!(d.verdict, QualificationVerdict::Pass);
    assert_eq!(d.stages[1].status, StageStatus::NotRun);
    let build = d.performance.identity.current().unwrap().build.clone().unwrap();
    assert_eq!(build.binary_sha256.as_deref(), Some("abc"));
    decision["decision_version"] = json!(3);
    let err = parse_decision(&decision.to_string()).unwrap_err();
    assert!(err.contains("decision_version 3 is not readable"), "{err}");

    assert_eq!(parse_store_format(r#"{"format": 1}"#), Ok(1));
    assert_eq!(parse_store_format("{\"format\": 2}\n"), Ok(2));
    assert_eq!(parse_store_format(r#"{"format": 3}"#), Err(StoreFormatError::Newer(3)));
    assert!(matches!(parse_store_format("[]"), Err(StoreFormatError::Malformed(_))));
}

/// The answer of `case` spelled by `tokens` (id, text), each with itself as its only alternative.
fn with_tokens(raw: &mut Value, case: &str, content: &str, tokens: &[(u64, &str)]) {
    let items: Vec<Value> = tokens
        .iter()
        .map(|(id, t)| json!({"id": id, "text": t, "logprob": -0.1, "top": [{"id": id, "text": t, "logprob": -0.1}]}))
        .collect();
    let at = raw["cases"].as_array().unwrap().iter().position(|c| c["id"] == case).unwrap();
    let c = &mut raw["cases"][at];
    c["observed"] = json!(content);
    c["answer"]["content"] = json!(content);
    c["answer"]["tokens"] = json!({"source": "ids", "count": items.len(), "items": items});
}

/// #29 item 3, on records: a baseline from llama.cpp and a run on vLLM (attached, each named by what it said about
/// itself). The engine change is named first; the text is traced to a token only where the records show one
/// vocabulary (every id both hold spelled alike), by characters otherwise; speed and load are not compared, however
/// far apart (a tenth of the baseline's decode speed, ten times its load).
#[test]
fn a_baseline_from_another_engine_names_it_and_compares_text_only_as_far_as_tokens_allow() {
    let mut then: Value = serde_json::from_str(H200_RUN).unwrap();
    then["runtime"]["server"] = json!({"engine": "llama.cpp", "props": {"build_info": "b6000"}});
    with_tokens(
        &mut then,
        "capital",
        "Paris is the capital",
        &[(1, "Paris"), (2, " is"), (3, " the"), (4, " capital")],
    );
    let mut now = then.clone();
    now["runtime"]["server"] = json!({"engine": "vllm", "version": {"version": "0.32.0"}});
    now["decode"]["median_tokens_per_second"] = json!(64.0);
    now["server"]["load_seconds"] = json!(7.5);
    let alike = |now: &mut Value| {
        with_tokens(now, "capital", "Paris is a capital", &[(1, "Paris"), (2, " is"), (5, " a"), (4, " capital")]);
    };
    let parse = |v: &Value| parse_run_record(&v.to_string()).unwrap();
    let kinds = |f: &[gauntlet_schema::Finding]| f.iter().map(|f| f.kind.as_str().to_owned()).collect::<Vec<_>>();

    let mut same_vocabulary = now.clone();
    alike(&mut same_vocabulary);
    let (old, new) = (parse(&then), parse(&same_vocabulary));
    let findings = gauntlet_engine::compare::compare(&new, &old, &new.thresholds);
    assert_eq!(findings[0].kind, "server-changed", "{:?}", kinds(&findings));
    assert_eq!(
        findings[0].message,
        "the engine changed since the baseline: llama.cpp → vllm; text is compared token by token: both tokenize \
         alike (3 token ids in both records, each spelled the same); speed is not compared across engines (`gauntlet \
         bench --paired` says which is faster on one machine)"
    );
    // The described fields other than the engine are named one by one as before.
    assert!(findings.iter().any(|f| f.message.ends_with("props: {\"build_info\":\"b6000\"} → (none)")), "{findings:?}");
    assert!(!findings.iter().any(|f| f.message.contains("engine: ")), "the engine is named once: {findings:?}");
    let drift = findings.iter().find(|f| f.kind == "text-drift").expect("text drift");
    assert!(drift.message.starts_with("text differs from the baseline at char 9, token 2 ("), "{}", drift.message);
    let speed = findings.iter().find(|f| f.kind == "decode-not-compared").expect("speed named as not compared");
    assert!(speed.message.contains("64.0 tok/s on vllm now, 644.9 tok/s on llama.cpp on the baseline"), "{speed:?}");
    for never in ["slow-decode", "speed-unsettled", "slow-load"] {
        assert!(!findings.iter().any(|f| f.kind == never), "{never}: {:?}", kinds(&findings));
    }
    assert!(gauntlet_schema::diff::baseline_jitter(&new, &old).is_some());

    // Id 2 spelled " is" there and " was" here: two vocabularies. Characters only, no jitter, and the finding
    // says which id showed it.
    let mut other_vocabulary = now.clone();
    with_tokens(&mut other_vocabulary, "capital", "Paris was a capital", &[(1, "Paris"), (2, " was"), (5, " a")]);
    let new = parse(&other_vocabulary);
    let findings = gauntlet_engine::compare::compare(&new, &old, &new.thresholds);
    assert!(
        findings[0].message.contains(
            "text is compared by characters only: the two tokenize differently (1 of 2 token ids in both records \
             are spelled differently, id 2: \" is\" on the baseline, \" was\" now)"
        ),
        "{}",
        findings[0].message
    );
    let drift = findings.iter().find(|f| f.kind == "text-drift").expect("text drift");
    assert_eq!(drift.message, "text differs from the baseline at char 6");
    assert!(gauntlet_schema::diff::baseline_jitter(&new, &old).is_none());

    // No id in both (the run's answers carry none): across engines nothing shows one vocabulary, so characters
    // only; on one engine, tokens as before.
    let mut no_ids = now.clone();
    with_tokens(&mut no_ids, "capital", "Paris is a capital", &[]);
    let new = parse(&no_ids);
    let findings = gauntlet_engine::compare::compare(&new, &old, &new.thresholds);
    assert!(findings[0].message.contains("by characters only: no token id is in both records"), "{findings:?}");
    let mut one_engine = same_vocabulary.clone();
    one_engine["runtime"]["server"]["engine"] = json!("llama.cpp");
    let new = parse(&one_engine);
    let findings = gauntlet_engine::compare::compare(&new, &old, &new.thresholds);
    assert!(!findings.iter().any(|f| f.message.contains("engine changed")), "{findings:?}");
    assert!(findings.iter().any(|f| f.kind == "slow-load"), "one engine: speed compared: {:?}", kinds(&findings));
}

/// A version-12 bench.json (before structured output) still reads, with nothing judged; a version-13 one carries
/// its format, each request's judgment and the level's tally.
#[test]
fn a_version_12_bench_record_reads_without_structured_output() {
    let run: Value = serde_json::from_str(H200_RUN).unwrap();
    let record = |version: u32, workload: Value, request: Value, level_extra: Value| {
        let mut level = json!({"concurrency": 1, "batches": [{"seconds": 1.0, "in_flight_max": 1,
            "requests": [request]}], "metrics": {}, "samples": {}});
        level.as_object_mut().unwrap().extend(level_extra.as_object().unwrap().clone());
        json!({
            "bench_version": version, "gauntlet_version": "0.1.0", "profile": "p", "started_at": "t",
            "identity": run["identity"], "identity_digest": run["identity_digest"], "runtime": {},
            "workload": workload, "definitions": {}, "levels": [level], "verdict": "candidate", "rules": {}
        })
        .to_string()
    };
    let workload = json!({"concurrency": [1], "max_tokens": 8, "warmups": 0, "repetitions": 2});
    let request = json!({"start": 0.0, "events": [[0.1, "{}", ""]]});
    let r = parse_bench_record(&record(12, workload.clone(), request, json!({})), "old/bench.json").unwrap();
    assert!(r.workload.response_format.is_none());
    assert_eq!(r.levels[0].batches[0].requests[0].structured_ok, None);
    assert!(r.levels[0].structured.is_none());
    let mut structured = workload;
    structured["response_format"] = json!({"type": "json_schema", "json_schema": {"name": "n", "schema": {}}});
    let request = json!({"start": 0.0, "events": [], "structured_ok": false, "structured_error": "invalid JSON"});
    let tally = json!({"structured": {"requests": 1, "judged": 1, "valid": 0, "rate": 0.0}});
    let r = parse_bench_record(&record(13, structured, request, tally), "new/bench.json").unwrap();
    assert_eq!(r.workload.response_format.as_ref().unwrap()["json_schema"]["name"], "n");
    let q = &r.levels[0].batches[0].requests[0];
    assert_eq!((q.structured_ok, q.structured_error.as_deref()), (Some(false), Some("invalid JSON")));
    let s = r.levels[0].structured.clone().unwrap();
    assert_eq!((s.requests, s.judged, s.valid, s.rate), (1, 1, 0, Some(0.0)));
}

/// Version 14 writes each problem with its code; a version-13 record's bare words read as code `other`, and a
/// problem with a code this gauntlet does not know is refused, naming the file.
#[test]
fn bench_problems_carry_codes_and_older_words_read_as_other() {
    use gauntlet_schema::{Problem, ProblemCode};
    let run: Value = serde_json::from_str(H200_RUN).unwrap();
    let record = |version: u32, problems: Value| {
        json!({
            "bench_version": version, "gauntlet_version": "0.1.0", "profile": "p", "started_at": "t",
            "identity": run["identity"], "identity_digest": run["identity_digest"], "runtime": {},
            "workload": {"concurrency": [1], "max_tokens": 8, "warmups": 0, "repetitions": 2}, "definitions": {},
            "levels": [], "verdict": "fail", "rules": {}, "problems": problems
        })
        .to_string()
    };
    let old = parse_bench_record(&record(13, json!(["server stop: killed"])), "old/bench.json").unwrap();
    assert_eq!(old.problems, vec![Problem::new(ProblemCode::Other, "server stop: killed")]);
    let coded = json!([{"code": "server-stop", "text": "server stop: killed"}]);
    let new = parse_bench_record(&record(14, coded.clone()), "new/bench.json").unwrap();
    assert_eq!(new.problems, vec![Problem::new(ProblemCode::ServerStop, "server stop: killed")]);
    assert_eq!(serde_json::to_value(&new.problems).unwrap(), coded);
    let err = parse_bench_record(&record(14, json!([{"code": "made-up", "text": "x"}])), "bad/bench.json").unwrap_err();
    assert!(err.starts_with("bad/bench.json: "), "{err}");
}

/// Version 11's speed check reads back as written; the version-10 record before it reads without one.
#[test]
fn the_speed_check_reads_back_and_older_records_have_none() {
    let mut run = parse_run_record(H200_RUN).unwrap();
    assert_eq!(run.decode.speed_check, None, "written before version 11");
    let cases = vec![
        gauntlet_engine::compare::speed::case_cpu("a", (0.25, 0.2, 0.05, 0.48), 1, None),
        gauntlet_engine::compare::speed::case_cpu("b", (0.24, 0.1, 0.0, 0.35), 1, Some(0.2)),
    ];
    let mut check = gauntlet_engine::compare::speed::speed_check(cases, Some("/sys/fs/cgroup/cpu/g".into()), None);
    let base = run.clone();
    run.decode.speed_check = Some(check.clone());
    check.judgement = gauntlet_engine::compare::speed::judgement(&run, &base);
    run.decode.speed_check = Some(check);
    run.server.load_cpu = Some(gauntlet_schema::LoadCpu {
        cpu_seconds: 1.0,
        wait_seconds: 0.5,
        throttled_seconds: Some(0.2),
        neighbours: Some(0.4),
    });
    let again = parse_run_record(&serde_json::to_string(&run).unwrap()).unwrap();
    assert_eq!(again.decode.speed_check, run.decode.speed_check);
    assert_eq!(again.server.load_cpu, run.server.load_cpu);
    // Version 12's neighbours: per case, pooled over the cases that measured one; a version-11 account (no
    // `neighbours` anywhere) reads with none.
    let check = again.decode.speed_check.as_ref().unwrap();
    assert_eq!((check.cases[0].neighbours, check.cases[1].neighbours), (None, Some(0.2)));
    assert!((check.neighbours.unwrap() - 0.2).abs() < 1e-12, "{check:?}");
    let mut v11 = serde_json::to_value(&run).unwrap();
    v11["schema_version"] = 11.into();
    for c in v11["decode"]["speed_check"]["cases"].as_array_mut().unwrap() {
        c.as_object_mut().unwrap().remove("neighbours");
    }
    v11["decode"]["speed_check"].as_object_mut().unwrap().remove("neighbours");
    v11["server"]["load_cpu"].as_object_mut().unwrap().remove("neighbours");
    let old = parse_run_record(&v11.to_string()).unwrap();
    assert!(old.decode.speed_check.unwrap().cases.iter().all(|c| c.neighbours.is_none()));
    // Version 13's load neighbours read back; without them (version 12 and older) the load's share is unknown.
    assert_eq!(again.server.load_cpu.unwrap().neighbours, Some(0.4));
    assert_eq!(old.server.load_cpu.unwrap().neighbours, None);
}
