//! Process supervision and signals: a server ignoring SIGTERM is killed, a leaked child is found and reaped, a
//! port in use is refused before anything starts, and an interrupt stops the whole server group.

use super::*;

#[test]
fn server_ignoring_sigterm_is_killed() {
    let f = Fixture::new("sigterm").fault(&["--ignore-sigterm"]);
    let run = f.run(&[]);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert!(run.has_finding("killed"), "{}", run.explain());
    assert_eq!(run.record.as_ref().unwrap()["server"]["stop"], "killed");
}

#[test]
fn leaked_child_is_found_and_reaped() {
    let f = Fixture::new("leak").fault(&["--leak-child"]);
    let run = f.run(&[]);
    assert!(run.has_finding("leftover-process"), "{}", run.explain());
}

#[test]
fn port_in_use_is_refused_before_anything_starts() {
    let f = Fixture::new("port");
    let _holder = std::net::TcpListener::bind(("127.0.0.1", f.port)).unwrap();
    let run = f.run(&[]);
    assert_eq!(run.code, 2, "{}", run.explain());
    assert!(run.stderr.contains(&format!("port {} on 127.0.0.1 is already in use", f.port)), "{}", run.explain());
    assert!(run.record.is_none(), "no run happened");
}

/// Starts gauntlet with `args`, isolated, its stdout and stderr piped; killed and reaped if the test ends first.
fn start(args: &[&str]) -> crate::common::Reaped {
    let scratch = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(workspace_bin("gauntlet"));
    crate::common::isolate(&mut cmd, &[], &scratch);
    let child =
        cmd.args(args).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()).spawn().unwrap();
    crate::common::Reaped(child)
}

/// Starts `gauntlet run` on the fixture, waits (bounded) until `servers` processes of its server are up, optionally
/// closes gauntlet's stdout and stderr, then sends `signal`; returns how gauntlet exited and what it wrote to stderr.
fn interrupt(f: &Fixture, servers: usize, signal: i32, close_pipes: bool) -> (std::process::ExitStatus, String) {
    let manifest = f.write();
    let out = f.path().join("out");
    let mut child = start(&["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while crate::common::processes_tagged(&f.tag).len() < servers {
        assert!(std::time::Instant::now() < deadline, "server never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    if close_pipes {
        drop(child.0.stdout.take());
        drop(child.0.stderr.take());
    }
    std::thread::sleep(Duration::from_millis(300));
    crate::common::send_signal(child.0.id() as i32, signal);
    let (status, _, _, stderr) = exit_within(&mut child, Duration::from_secs(20));
    assert_no_survivors(&f.tag);
    (status, stderr)
}

/// Ctrl-C on gauntlet stops the server group it started, even one that ignores SIGTERM.
#[test]
fn interrupt_stops_the_server_group() {
    let f = Fixture::new("sigint").fault(&["--ignore-sigterm", "--leak-child", "--token-delay-ms", "200"]);
    let (status, stderr) = interrupt(&f, 2, 2, false);
    assert_eq!(status.code(), Some(130));
    assert!(stderr.contains("interrupted"), "{stderr}");
}

/// A cancelled CI job closes gauntlet's log pipe and then sends SIGTERM: with nowhere to write, gauntlet must still
/// stop its server group and exit.
#[test]
fn sigterm_with_a_closed_stderr_still_stops_the_server_group() {
    let f = Fixture::new("sigterm-closed").fault(&["--ignore-sigterm", "--token-delay-ms", "200"]);
    let (status, _) = interrupt(&f, 1, 15, true);
    assert_eq!(status.code(), Some(143), "{status:?}");
}

/// Starts a long `gauntlet bench` on the fixture and waits (bounded) until `batches` measured batches are in its
/// spill file; gives the running child and its output folder.
fn bench_until(f: &Fixture, batches: usize) -> (crate::common::Reaped, PathBuf) {
    let manifest = f.write();
    let out = f.path().join("out");
    let args = ["bench", "--manifest", manifest.to_str().unwrap(), "--concurrency", "2", "--warmups", "1"];
    let child = start(&[&args[..], &["--samples", "10000", "--out", out.to_str().unwrap()]].concat());
    let spilled =
        || std::fs::read_to_string(out.join("requests.jsonl")).map_or(0, |t| t.matches("\"header\":").count());
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while spilled() < batches {
        assert!(std::time::Instant::now() < deadline, "the bench never measured {batches} batches");
        std::thread::sleep(Duration::from_millis(20));
    }
    (child, out)
}

/// Waits (bounded by `limit`) for the child to exit; gives its status, how long that took, and its stdout and stderr.
fn exit_within(
    child: &mut crate::common::Reaped,
    limit: Duration,
) -> (std::process::ExitStatus, Duration, String, String) {
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        assert!(started.elapsed() < limit, "gauntlet did not exit within {limit:?} of the signal");
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();
    let read = |pipe: Option<&mut dyn std::io::Read>| {
        let mut text = String::new();
        if let Some(p) = pipe {
            p.read_to_string(&mut text).unwrap();
        }
        text
    };
    let stdout = read(child.0.stdout.as_mut().map(|p| p as &mut dyn std::io::Read));
    let stderr = read(child.0.stderr.as_mut().map(|p| p as &mut dyn std::io::Read));
    (status, elapsed, stdout, stderr)
}

/// Ctrl-C in the middle of a long bench stops the measuring, not the record: the batches that ended are in
/// bench.json and bench.md (the batch in flight is not), the verdict is inconclusive rather than a baseline
/// candidate, the server group is stopped, and gauntlet exits 130 as soon as that is done.
#[test]
fn an_interrupted_bench_writes_what_it_measured_and_stops_its_server() {
    let f = Fixture::new("bench-sigint").fault(&["--token-delay-ms", "20"]);
    let (mut child, out) = bench_until(&f, 3);
    crate::common::send_signal(child.0.id() as i32, 2);
    let (status, elapsed, stdout, stderr) = exit_within(&mut child, Duration::from_secs(45));
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(elapsed < Duration::from_secs(15), "it finished by itself, not at the grace's end: {elapsed:?}");
    assert!(stderr.contains("writing what was measured"), "{stderr}");
    assert_no_survivors(&f.tag);
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("bench.json")).expect("bench.json written")).unwrap();
    let level = &record["levels"][0];
    let batches = level["tally"]["batches"].as_u64().unwrap();
    assert!(batches >= 3, "{level}");
    assert_eq!(level["batches"].as_array().unwrap().len() as u64, batches, "every measured batch, back from the spill");
    assert_eq!(level["metrics"]["requests"].as_u64(), Some(2 * batches), "no request of the batch in flight");
    assert_eq!(record["verdict"], "inconclusive");
    let problems = record["problems"].as_array().unwrap();
    let interrupted = problems.iter().find(|p| p["code"] == "interrupted").unwrap_or_else(|| panic!("{problems:?}"));
    assert!(interrupted["text"].as_str().unwrap().starts_with("interrupted (signal 2) at concurrency 2 after"));
    assert!(std::fs::read_to_string(out.join("bench.md")).unwrap().contains("interrupted (signal 2)"));
    assert!(stdout.contains("INCONCLUSIVE"), "the summary is printed too: {stdout}");
}

/// A second signal does not wait for the record: a server that ignores SIGTERM would hold the bench's orderly stop
/// for its whole 20 s grace, and the second Ctrl-C kills it and exits at once.
#[test]
fn a_second_interrupt_stops_a_bench_at_once() {
    let f = Fixture::new("bench-sigint2")
        .fault(&["--ignore-sigterm", "--token-delay-ms", "20"])
        .profile("stop_grace = \"20s\"");
    let (mut child, _out) = bench_until(&f, 2);
    crate::common::send_signal(child.0.id() as i32, 2);
    std::thread::sleep(Duration::from_millis(500));
    crate::common::send_signal(child.0.id() as i32, 2);
    let (status, elapsed, _, stderr) = exit_within(&mut child, Duration::from_secs(45));
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(elapsed < Duration::from_secs(12), "{elapsed:?}: {stderr}");
    assert!(stderr.contains("stopping 1 server group(s)"), "{stderr}");
    assert_no_survivors(&f.tag);
}
