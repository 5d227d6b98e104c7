//! The real thing: llama.cpp's server with SmolLM2-135M-Instruct, both installed by `scripts/setup.sh --native`.
//! These tests fail (never skip) when the installation is missing: a green run must mean the real server ran.
//! Run them one at a time (`scripts/test.sh` does): they measure speed, and a second run's decode is compared
//! with the first's.

mod common;

use std::path::PathBuf;
use std::time::Duration;

use common::{Run, finish, free_port, gauntlet, processes_tagged};
use serde_json::Value;

fn home() -> PathBuf {
    std::env::var_os("GAUNTLET_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join(".cache/gauntlet"))
}

fn run_profile(profile: &str, port: u16, out: &std::path::Path, extra: &[&str], store: &std::path::Path) -> Run {
    let port_s = port.to_string();
    let mut args = vec!["run", "--profile", profile, "--port", &port_s, "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let home = home();
    let env = [("GAUNTLET_STORE", store.to_str().unwrap()), ("GAUNTLET_HOME", home.to_str().unwrap())];
    let output = gauntlet(&args, &env, Duration::from_secs(400));
    finish(output, out)
}

/// How the first run becomes the second's baseline: a file (`--write-baseline`, `--baseline`) or the store
/// (`--promote --trusted`, then picked by identity).
#[derive(Clone, Copy, PartialEq)]
enum Via {
    File,
    Store,
}

/// No process of the run may survive it: nothing may still listen on (or be started for) its port.
fn assert_server_gone(port: u16) {
    let tag = format!("--port {port}");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !processes_tagged(&tag).is_empty() {
        assert!(std::time::Instant::now() < deadline, "server processes survived: {:?}", processes_tagged(&tag));
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn assert_whole_suite_answered(run: &Run) {
    let record = run.record.as_ref().unwrap_or_else(|| panic!("no run.json\n{}", run.explain()));
    let cases = record["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 16);
    for c in cases {
        assert!(
            c["status"] == "pass" || c["status"] == "fail",
            "case {} was not answered: {}\n{}",
            c["id"],
            c,
            run.explain()
        );
    }
    assert_eq!(run.case("multiply-again")["status"], "pass", "greedy repeat must be byte-identical");
    assert_eq!(run.case("multiply-again")["observed"], run.case("multiply")["observed"]);
    assert!(record["server"]["load_seconds"].as_f64().unwrap() > 0.0);
    assert_eq!(record["server"]["stop"], "terminated");
    assert!(record["decode"]["median_tokens_per_second"].as_f64().unwrap() > 0.0);
    assert_eq!(record["decode"]["token_source"], "usage");
    let stream = run.case("stream");
    let events = stream["answer"]["timeline"].as_array().unwrap();
    assert!(events.len() > 3, "streamed answer has its events: {stream}");
    let times: Vec<f64> = events.iter().map(|e| e["t"].as_f64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "monotonic timestamps");
    let needle = run.case("needle");
    assert!(needle["answer"]["usage"]["prompt_tokens"].as_u64().unwrap() > 2000, "the needle prompt is long");
}

fn gate_twice(profile: &str, via: Via) -> (tempfile::TempDir, Run) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let port = free_port();
    let baseline = dir.path().join("baseline.json");
    let first_extra: Vec<&str> = match via {
        Via::File => vec!["--write-baseline", baseline.to_str().unwrap()],
        Via::Store => vec!["--promote", "--trusted", "--note", "real first run"],
    };
    let first = run_profile(profile, port, &dir.path().join("first"), &first_extra, &store);
    assert_server_gone(port);
    assert_eq!(first.code, 0, "{}", first.explain());
    assert_eq!(first.verdict(), "warn", "first run has no baseline\n{}", first.explain());
    assert!(first.has_finding("no-baseline"));
    assert!(first.stdout.contains("no baseline yet"), "{}", first.explain());
    assert_whole_suite_answered(&first);
    let second_extra: Vec<&str> = match via {
        Via::File => {
            assert!(baseline.is_file());
            vec!["--baseline", baseline.to_str().unwrap()]
        }
        Via::Store => {
            assert!(first.stdout.contains(&format!("promoted: #1 of profile `{profile}`")), "{}", first.explain());
            vec![]
        }
    };

    let second = run_profile(profile, port, &dir.path().join("second"), &second_extra, &store);
    assert_server_gone(port);
    assert_eq!(second.code, 0, "{}", second.explain());
    if via == Via::Store {
        let named = format!("baseline: #1 of profile `{profile}`, promoted ");
        assert!(second.stderr.contains(&named), "the baseline is named\n{}", second.explain());
        assert!(second.stderr.contains("(manual): \"real first run\""), "{}", second.explain());
        assert_eq!(
            second.record.as_ref().unwrap()["baseline"]["identity_digest"],
            first.record.as_ref().unwrap()["identity_digest"]
        );
    }
    // Same server, same model, greedy: every answer and check must agree with the baseline, so the verdict is pass.
    // One exception is stated rather than hidden: on a shared VM, decode and load speed drift by more than 15 %
    // between minutes (DESIGN §8 measured 43–128 tok/s for one binary), so a speed warning alone is tolerated
    // here and printed; any other finding fails the test.
    let record: &Value = second.record.as_ref().unwrap();
    let findings: Vec<&Value> =
        record["findings"].as_array().unwrap().iter().filter(|f| f["severity"] != "info").collect();
    let speed_only = findings.iter().all(|f| f["kind"] == "slow-decode" || f["kind"] == "slow-load");
    assert!(speed_only, "only speed may differ between two identical runs: {findings:?}\n{}", second.explain());
    if findings.is_empty() {
        assert_eq!(second.verdict(), "pass", "{}", second.explain());
    } else {
        eprintln!("note: speed drifted between two identical runs on this machine: {findings:?}");
        assert_eq!(second.verdict(), "warn", "{}", second.explain());
    }
    let report = std::fs::read_to_string(second.out.join("report.md")).unwrap();
    assert!(!report.contains("differs at char"), "{report}");
    let expected = record["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "expected-failure").count();
    assert_eq!(expected, 8, "the demo profile's declared failures fail as on the baseline");
    (dir, first)
}

#[test]
fn embedded_default_gate_passes_against_its_promoted_baseline() {
    assert!(home().join("bin/xllamacpp-server").is_file(), "run scripts/setup.sh first");
    let (dir, first) = gate_twice("default", Via::Store);

    // The same profile with one server argument changed is another identity: comparing it with the first run is
    // refused before any server starts, naming the argument.
    let embedded = gauntlet(&["default-manifest"], &[], Duration::from_secs(30));
    let manifest = String::from_utf8(embedded.stdout).unwrap().replacen(
        "server_arguments = [\"-c\", \"4096\"",
        "server_arguments = [\"-c\", \"2048\"",
        1,
    );
    assert!(manifest.contains("\"2048\""));
    let path = dir.path().join("changed.toml");
    std::fs::write(&path, format!("root = {:?}\n{manifest}", home().display().to_string())).unwrap();
    let port = free_port();
    let out = dir.path().join("changed");
    let output = gauntlet(
        &[
            "run",
            "--manifest",
            path.to_str().unwrap(),
            "--port",
            &port.to_string(),
            "--out",
            out.to_str().unwrap(),
            "--baseline",
            first.out.join("run.json").to_str().unwrap(),
        ],
        &[("GAUNTLET_HOME", home().to_str().unwrap())],
        Duration::from_secs(60),
    );
    let refused = finish(output, &out);
    assert_eq!(refused.code, 2, "{}", refused.explain());
    assert!(refused.stderr.contains("refusing to compare with baseline"), "{}", refused.explain());
    assert!(refused.stderr.contains("recipe.server_arguments[1]: 4096 → 2048"), "{}", refused.explain());
    assert!(refused.record.is_none(), "nothing ran");
    assert_server_gone(port);
}

#[test]
fn native_llama_server_gate_passes_against_its_own_baseline() {
    assert!(home().join("bin/llama-server").exists(), "run scripts/setup.sh --native first");
    gate_twice("native", Via::File);
}

/// Doctor on the installed embedded default: the real kernel log, this CPU, the real binaries and the pinned model.
#[test]
fn doctor_finds_the_installed_default_ready() {
    let home = home();
    for profile in ["default", "native"] {
        let store = tempfile::tempdir().unwrap();
        let env = [("GAUNTLET_STORE", store.path().to_str().unwrap()), ("GAUNTLET_HOME", home.to_str().unwrap())];
        let out = gauntlet(&["doctor", "--profile", profile, "--json"], &env, Duration::from_secs(120));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_str(&stdout).unwrap();
        let checks = v["checks"].as_array().unwrap();
        let subjects: Vec<&str> = checks.iter().filter_map(|c| c["subject"].as_str()).collect();
        assert_eq!(subjects, ["kernel log", "device", "server binary", "model", "port", "store"], "{stdout}");
        assert!(checks.iter().all(|c| c["status"] == "ok"), "{profile}: {stdout}");
        assert!(checks[0]["detail"].as_str().unwrap().starts_with("/dev/kmsg readable"), "{stdout}");
        assert!(checks[3]["detail"].as_str().unwrap().contains("sha256 b179c9523d0e6a0f… matches the manifest"));
        assert!(v["runtime"]["cpu"]["model"].as_str().is_some_and(|m| !m.is_empty()), "{stdout}");
    }
}
