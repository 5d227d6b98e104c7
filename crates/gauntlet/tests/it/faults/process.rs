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

/// Starts `gauntlet run` on the fixture, waits (bounded) until `servers` processes of its server are up, optionally
/// closes gauntlet's stdout and stderr, then sends `signal`; returns how gauntlet exited and what it wrote to stderr.
fn interrupt(f: &Fixture, servers: usize, signal: i32, close_pipes: bool) -> (std::process::ExitStatus, String) {
    let manifest = f.write();
    let out = f.path().join("out");
    let scratch = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(workspace_bin("gauntlet"));
    crate::common::isolate(&mut cmd, &[], &scratch);
    let mut child = cmd
        .args(["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while crate::common::processes_tagged(&f.tag).len() < servers {
        assert!(std::time::Instant::now() < deadline, "server never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    if close_pipes {
        drop(child.stdout.take());
        drop(child.stderr.take());
    }
    std::thread::sleep(Duration::from_millis(300));
    crate::common::send_signal(child.id() as i32, signal);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            panic!("gauntlet did not exit after signal {signal}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        std::io::Read::read_to_string(&mut pipe, &mut stderr).unwrap();
    }
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
