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
    // The spawned server's threads sleep: a server that is not working on the request keeps its timeout.
    assert!(err.contains("the server was idle") && err.contains("not working on the request"), "{err}");
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

/// Another program takes the port after gauntlet found it free and before the spawned server binds it (here the
/// server is a launcher still loading, as vLLM is before it binds). The foreign server answers health and the
/// warm-up correctly, so without the ownership check the run would pass on answers of a server it never tested:
/// readiness must name the foreign listener, fail the load, and leave that program alone.
#[test]
fn a_foreign_listener_on_the_spawned_servers_port_is_never_taken_for_the_server() {
    let f = Fixture::new("foreign-port");
    let manifest = f.write();
    let dir = f.path().to_path_buf();
    let (spawned, go) = (dir.join("spawned"), dir.join("foreign-up"));
    // The server under test: says it started, waits (bounded) until the foreign listener is up, then loads
    // forever without binding; gauntlet ends it.
    let script = format!(
        "#!/bin/sh\necho $$ > {spawned:?}\ni=0\nwhile [ ! -e {go:?} ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); \
         done\nexec sleep 60\n"
    );
    let bin = dir.join("bin/fake-server");
    std::fs::remove_file(&bin).unwrap();
    std::fs::write(&bin, script).unwrap();
    std::fs::set_permissions(&bin, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();

    let out = dir.join("out");
    let args: Vec<String> =
        ["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()].map(str::to_owned).to_vec();
    let run = std::thread::spawn(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        gauntlet(&args, &[], Duration::from_secs(90))
    });
    let until = std::time::Instant::now() + Duration::from_secs(30);
    while !spawned.is_file() || std::fs::read_to_string(&spawned).unwrap_or_default().trim().is_empty() {
        assert!(std::time::Instant::now() < until, "the spawned server never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let ours: i32 = std::fs::read_to_string(&spawned).unwrap().trim().parse().unwrap();
    let foreign_tag = format!("gauntlet-test-foreign-listener-{}", std::process::id());
    let mut foreign = Reaped(
        std::process::Command::new(workspace_bin("gauntlet-fake-server"))
            .args(["--port", &f.port.to_string(), "--tag", &foreign_tag, "--lifetime-s", "90"])
            .args(["--answers", dir.join("answers.json").to_str().unwrap()])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    while std::net::TcpStream::connect(("127.0.0.1", f.port)).is_err() {
        assert!(std::time::Instant::now() < until, "the foreign server never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::write(&go, "").unwrap();
    let run = finish(run.join().unwrap(), &out);

    assert_eq!(run.code, 1, "{}", run.explain());
    assert_eq!(run.verdict(), "fail", "{}", run.explain());
    let never = run.findings("never-loaded");
    assert_eq!(never.len(), 1, "{}", run.explain());
    let message = never[0]["message"].as_str().unwrap();
    let foreign_pid = foreign.0.id().to_string();
    assert!(
        message.contains(&format!("pid {foreign_pid}")) && message.contains("did not start"),
        "the finding names the foreign listener: {message}"
    );
    assert_eq!(run.case("alpha")["skip_reason"], "server did not load", "{}", run.explain());
    assert!(run.case("alpha")["answer"].is_null(), "no case was answered by the foreign server");
    assert!(foreign.0.try_wait().unwrap().is_none(), "the foreign server is not gauntlet's to stop");
    assert!(!Path::new(&format!("/proc/{ours}")).exists(), "the spawned server was stopped");
    assert_no_survivors(&f.tag);
}
