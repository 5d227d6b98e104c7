//! A run's server lifecycle against the fake server: a healthy run, a crash during load or mid-suite, a hang
//! before the first byte or mid-stream.

use super::*;

#[test]
fn healthy_run_against_its_baseline_passes() {
    let f = Fixture::new("healthy");
    let first = f.run(&[]);
    assert_eq!(first.code, 0, "{}", first.explain());
    assert_eq!(first.verdict(), "warn", "no baseline yet warns\n{}", first.explain());
    assert!(first.has_finding("no-baseline"));
    let baseline = f.baseline();
    let run = f.run(&["--baseline", &baseline]);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.verdict(), "pass", "{}", run.explain());
    assert_eq!(run.case("alpha-again")["status"], "pass", "repeat is identical");
    let record = run.record.as_ref().unwrap();
    assert_eq!(record["server"]["stop"], "terminated");
    assert_eq!(record["decode"]["token_source"], "usage");
    for file in ["run.json", "report.md", "junit.xml", "server.log"] {
        assert!(run.out.join(file).is_file(), "{file} missing");
    }
    let report = std::fs::read_to_string(run.out.join("report.md")).unwrap();
    assert!(report.starts_with("# gauntlet test: PASS"), "{report}");
    assert!(report.contains("| alpha | pass |"), "{report}");
    assert!(report.contains("same text"), "{report}");
}

#[test]
fn crash_during_load_fails() {
    let f = Fixture::new("crash-load").fault(&["--fault", "crash-load"]);
    let run = f.run(&[]);
    assert_eq!(run.code, 1, "{}", run.explain());
    assert_eq!(run.verdict(), "fail");
    let crash = run.findings("crash");
    assert_eq!(crash.len(), 1, "{}", run.explain());
    assert!(crash[0]["message"].as_str().unwrap().contains("during load (exit code 3)"), "{crash:?}");
    assert_eq!(run.case("alpha")["skip_reason"], "server did not load");
    let report = std::fs::read_to_string(run.out.join("report.md")).unwrap();
    assert!(report.contains("simulated crash during load"), "log tail in the report:\n{report}");
}

#[test]
fn crash_mid_suite_skips_the_rest_and_is_reported_once() {
    // Request 1 is the warm-up, 2 is `alpha`; the server dies on request 3 (`beta`).
    let f = Fixture::new("crash-mid").fault(&["--fault", "crash-after", "--crash-after", "2"]);
    let run = f.run(&[]);
    assert_eq!(run.code, 1, "{}", run.explain());
    assert_eq!(run.verdict(), "fail");
    assert_eq!(run.findings("crash").len(), 1, "{}", run.explain());
    assert_eq!(run.case("alpha")["status"], "pass");
    assert_eq!(run.case("beta")["status"], "error");
    for id in ["gamma", "delta", "alpha-again"] {
        assert_eq!(run.case(id)["skip_reason"], "server is not running", "{id}");
    }
    assert_eq!(run.record.as_ref().unwrap()["server"]["stop"], "crashed");
}

#[test]
fn hang_before_first_byte_times_out_and_fails() {
    let f = Fixture::new("hang-first").fault(&["--fault", "hang-first-byte", "--fault-on", "beta"]);
    let run = f.run(&[]);
    assert_eq!(run.code, 1, "{}", run.explain());
    assert_eq!(run.verdict(), "fail");
    let err = run.case("beta")["error"].as_str().unwrap_or_default().to_owned();
    assert!(err.contains("waiting for the first byte"), "{err}");
    assert!(run.has_finding("request-error"));
    assert_eq!(run.case("delta")["status"], "pass", "later cases still run");
}

#[test]
fn hang_mid_stream_times_out_and_fails() {
    let f = Fixture::new("hang-mid").fault(&["--fault", "hang-mid-stream", "--fault-on", "gamma"]);
    let run = f.run(&[]);
    assert_eq!(run.code, 1, "{}", run.explain());
    let err = run.case("gamma")["error"].as_str().unwrap_or_default().to_owned();
    assert!(err.contains("while reading the answer"), "{err}");
}
