//! Losslessness end to end against the fake server (#31): a profile `test` with a draft (`draft_arguments` carry the
//! fake's `--diverge draft`, so only the server with the draft changes its answers: the last token of every answer,
//! 4.95 nats below the reference's choice) and `lossless_against = "ar"`, the same fake without it, on the same
//! port. The gate runs `ar` twice (reference and control) after its own run; `qualify` runs it twice in R3 while
//! the restart row has the draft's server stopped. The fake's logprobs jitter by up to 2 × 0.05 nats per request, so
//! the control's measured jitter is small and the draft's flip lies far outside it.

use super::*;
use serde_json::{Value, json};

const DRAFT_BYTES: &[u8] = b"GGUF fake draft weights";

/// The fixture's manifest (model sha256 pinned, as qualification demands) with a draft model, the fake server's
/// draft flag, the draft settings and `lossless_against` on `test`, and the profile `ar`: the same fake on the same
/// port without the draft, counting its starts, with `ar_args` besides.
fn speculative(f: &Fixture, ar_args: &[&str]) -> PathBuf {
    let manifest = f.write_qualifiable();
    std::fs::write(f.path().join("models/draft.gguf"), DRAFT_BYTES).unwrap();
    let draft_sha = gauntlet_engine::util::sha256_hex(DRAFT_BYTES);
    let answers = f.path().join("answers.json").display().to_string();
    // `ar` counts its starts, so that its jitter differs from one start to the next (the reference's and the
    // control's logprobs then differ by up to 2 × 0.05 nats; `--diverge restart` uses the count too).
    let state = f.path().join("ar-starts").display().to_string();
    let mut args = vec!["--answers", &answers, "--tag", &f.tag, "--lifetime-s", "120", "--jitter", "0.05"];
    args.extend_from_slice(&["--state-file", &state]);
    args.extend_from_slice(ar_args);
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    let text = std::fs::read_to_string(&manifest)
        .unwrap()
        .replace("binary = \"bin/fake-server\"", "binary = \"bin/fake-server\"\ndraft_flag = \"-md\"");
    let text = format!(
        "{text}\n[models.draft]\npath = \"models/draft.gguf\"\nsha256 = \"{draft_sha}\"\n\
         [profiles.ar]\nmodel = \"tiny\"\nserver = \"fake\"\nport = {port}\nsuite = \"suite.toml\"\n\
         server_arguments = [{args}]\nload_timeout = \"10s\"\nrequest_timeout = \"3s\"\nsuite_budget = \"60s\"\n\
         stop_grace = \"2s\"\n",
        port = f.port,
        args = args.join(", "),
    );
    std::fs::write(&manifest, text).unwrap();
    manifest
}

/// The draft's profile: `--diverge draft` comes with the draft (its settings), not with the server's arguments.
fn fixture(name: &str) -> Fixture {
    Fixture::new(name)
        .fault(&["--jitter", "0.05"])
        .profile("draft = \"draft\"")
        .profile("draft_arguments = [\"--diverge\", \"draft\"]")
        .profile("lossless_against = \"ar\"")
}

fn gate(f: &Fixture, manifest: &Path) -> Run {
    let out = f.path().join("out");
    let args = ["run", "--manifest", manifest.to_str().unwrap(), "--profile", "test", "--out", out.to_str().unwrap()];
    let run = finish(gauntlet(&args, &[], Duration::from_secs(120)), &out);
    assert_no_survivors(&f.tag);
    run
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// Both sides of a divergence as recorded: the reference's `on` and the draft's `far`, each with its logprob and
/// alternatives; the flip judged against the control's jitter (at most 2 × 0.05 nats over every shared token).
fn assert_far_flip_with_both_sides(d: &Value, jitter: &Value) {
    assert_eq!(d["index"], 39, "{d}");
    assert_eq!((d["baseline_token"]["text"].as_str(), d["run_token"]["text"].as_str()), (Some("on"), Some("far")));
    for side in ["baseline_token", "run_token"] {
        assert!(d[side]["logprob"].is_f64(), "{side}: {d}");
        assert!(!d[side]["top"].as_array().unwrap().is_empty(), "{side} has its alternatives: {d}");
    }
    // `far` is 4.95 nats below `on` in the reference's alternatives.
    let gap = d["gap_nats"].as_f64().unwrap();
    assert!((gap - 4.95).abs() < 1e-9 && d["gap_is_lower_bound"] == false, "{d}");
    assert_eq!(d["class"], "behaviour-change", "{d}");
    let (max, tokens) = (jitter["max_nats"].as_f64().unwrap(), jitter["tokens"].as_u64().unwrap());
    assert!(max > 0.0 && max <= 0.1 && tokens >= 32, "the control's jitter: {jitter}");
    assert_eq!(d["jitter"], *jitter, "judged against the control's jitter");
}

#[test]
fn a_draft_that_changes_a_token_the_steady_control_keeps_fails_lossless_differs() {
    let f = fixture("lossless-differs");
    let manifest = speculative(&f, &[]);
    let run = gate(&f, &manifest);
    assert_eq!(run.code, 1, "{}", run.explain());
    let record = run.record.clone().unwrap();
    let l = &record["lossless"];
    assert_eq!(
        (l["against"].as_str(), l["verdict"].as_str(), l["controlled"].as_bool()),
        (Some("ar"), Some("fail"), Some(true))
    );
    // Every case (the repeat too) flipped at its last token; the control reproduced the reference each time.
    let cases = l["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 5, "{l}");
    for c in cases {
        assert_eq!((c["status"].as_str(), c["control_identical"].as_bool()), (Some("differs"), Some(true)), "{c}");
        assert_far_flip_with_both_sides(&c["token_divergence"], &l["control_jitter"]);
    }
    let found = run.findings("lossless-differs");
    assert_eq!(found.len(), 5, "{}", run.explain());
    let message = found[0]["message"].as_str().unwrap();
    assert!(found.iter().all(|x| x["severity"] == "fail"), "{found:?}");
    assert!(
        message.starts_with("with the draft the answer differs from `ar`'s at token 39 ('on' vs 'far', gap 4.95 nats")
            && message.contains("shared tokens moved ≤ ")
            && message.ends_with("where the control reproduced it"),
        "{message}"
    );
    // The reference and the control wrote their own run records: without the draft, every case passes.
    for side in ["reference", "control"] {
        let r = read(&run.out.join(format!("lossless/{side}/run.json")));
        assert_eq!((r["profile"].as_str(), r["server"]["loaded"].as_bool()), (Some("ar"), Some(true)), "{side}");
        assert!(r["cases"].as_array().unwrap().iter().all(|c| c["status"] == "pass"), "{side}: {}", r["cases"]);
    }
    let md = std::fs::read_to_string(run.out.join("report.md")).unwrap();
    assert!(md.contains("| lossless | FAIL against profile ar with a control"), "{md}");
}

#[test]
fn a_control_that_differs_from_its_reference_makes_lossless_cannot_tell() {
    let f = fixture("lossless-cannot-tell");
    // `ar`'s second start (the control) changes its answers too: the server without the draft differs from itself.
    let manifest = speculative(&f, &["--diverge", "restart"]);
    let run = gate(&f, &manifest);
    let record = run.record.clone().unwrap_or_else(|| panic!("{}", run.explain()));
    assert_eq!(run.code, 0, "a warning: {}", run.explain());
    assert_eq!(record["verdict"], "warn", "{}", run.explain());
    let l = &record["lossless"];
    assert_eq!(l["verdict"], "inconclusive", "{l}");
    for c in l["cases"].as_array().unwrap() {
        assert_eq!(
            (c["status"].as_str(), c["control_identical"].as_bool()),
            (Some("inconclusive"), Some(false)),
            "{c}"
        );
    }
    let found = run.findings("lossless-cannot-tell");
    assert_eq!(found.len(), 5, "{}", run.explain());
    assert!(found.iter().all(|x| x["severity"] == "warn"), "{found:?}");
    assert!(found[0]["message"].as_str().unwrap().contains("but so does the control (`ar` again)"), "{found:?}");
    assert!(!run.has_finding("lossless-differs"), "{}", run.explain());
}

/// `qualify` of the draft's profile, R3 only: the matrix is steady (the draft changes every answer alike), and the
/// losslessness step fails R3, its three answer sets in the bundle. `ar` runs on the port the draft's server uses:
/// it loads only because R3 stopped that server first. `verify` recomputes the step from the bundle's files, and a
/// stored verdict its files do not give is caught.
#[test]
fn qualify_r3_checks_losslessness_against_the_profile_without_the_draft_and_verify_recomputes_it() {
    let f = fixture("lossless-qualify");
    let manifest = speculative(&f, &[]);
    let bundle = f.path().join("bundle");
    let args = [
        "qualify",
        "--manifest",
        manifest.to_str().unwrap(),
        "--profile",
        "test",
        "--stages",
        "R3",
        "--out",
        bundle.to_str().unwrap(),
    ];
    let o = gauntlet(&args, &[], Duration::from_secs(240));
    assert_no_survivors(&f.tag);
    let stdout = format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(1), "{stdout}");
    let r3 = read(&bundle.join("r3-determinism.json"));
    assert_eq!(r3["status"], "fail", "{r3}");
    let rows: Vec<&str> = r3["rows"].as_array().unwrap().iter().map(|r| r["verdict"].as_str().unwrap()).collect();
    assert_eq!(rows, ["identical"; 5], "the matrix itself is steady: {r3}");
    let l = &r3["lossless"];
    assert_eq!((l["verdict"].as_str(), l["draft_record"].as_str()), (Some("fail"), Some("lossless-draft.json")), "{l}");
    let cases = l["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 5, "{l}");
    for c in cases {
        assert_eq!(c["status"], "differs", "{c}");
        assert_far_flip_with_both_sides(&c["token_divergence"], &l["control_jitter"]);
    }
    let failures: Vec<&str> = r3["failures"].as_array().unwrap().iter().map(|f| f.as_str().unwrap()).collect();
    assert_eq!(failures.len(), 5, "{failures:?}");
    assert!(
        failures[0].starts_with("lossless: case `alpha`: with the draft the answer differs from `ar`'s at token 39"),
        "{failures:?}"
    );
    for name in ["lossless-draft.json", "lossless-reference.json", "lossless-control.json"] {
        assert!(bundle.join(name).is_file(), "{name}");
    }
    let report = read(&bundle.join("qualification.json"));
    let row = report["stages"].as_array().unwrap().iter().find(|s| s["id"] == "R3").unwrap();
    assert!(row["summary"].as_str().unwrap().contains("lossless: case `alpha`"), "{row}");
    let manifest_files = read(&bundle.join("evidence-manifest.json"));
    let hashed: Vec<&str> =
        manifest_files["files"].as_array().unwrap().iter().map(|f| f["path"].as_str().unwrap()).collect();
    assert!(hashed.contains(&"lossless-draft.json") && hashed.contains(&"lossless-control.json"), "{hashed:?}");
    let v = gauntlet(&["verify", bundle.to_str().unwrap()], &[], Duration::from_secs(30));
    assert_eq!(v.status.code(), Some(0), "{}", String::from_utf8_lossy(&v.stdout));
    // A stored pass that the answer files do not give is caught.
    let path = bundle.join("r3-determinism.json");
    let mut tampered = r3.clone();
    tampered["lossless"]["verdict"] = json!("pass");
    std::fs::write(&path, tampered.to_string()).unwrap();
    let v = gauntlet(&["verify", bundle.to_str().unwrap()], &[], Duration::from_secs(30));
    let out = String::from_utf8_lossy(&v.stdout);
    assert_ne!(v.status.code(), Some(0), "{out}");
    assert!(out.contains("lossless says pass (differs 5) but its answer files give fail (differs 5)"), "{out}");
}
