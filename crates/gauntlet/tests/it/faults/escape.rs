//! Processes that leave the server's group, and a gauntlet that dies without cleaning up: nothing a server started
//! may outlive the run. A descendant that calls setsid and double-forks is out of reach of the group's signals; it
//! carries gauntlet's marker in its environment and is re-parented to gauntlet (the child subreaper), so the stop
//! still finds and kills it. A gauntlet killed by SIGKILL runs no cleanup at all: the server's parent-death signal
//! takes the leader down, and gauntlet's watchdog (which sees the end of its pipe) the rest of the group and what
//! left it.

use super::*;
use crate::common::{processes_tagged, send_signal};

/// Waits (bounded) until at least `n` processes carry the fixture's tag.
fn wait_for_processes(f: &Fixture, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while processes_tagged(&f.tag).len() < n {
        assert!(std::time::Instant::now() < deadline, "the server never started: {:?}", processes_tagged(&f.tag));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `gauntlet run` on the fixture in the background.
fn start(f: &Fixture) -> std::process::Child {
    let manifest = f.write();
    let out = f.path().join("out");
    let scratch = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(workspace_bin("gauntlet"));
    crate::common::isolate(&mut cmd, &[], &scratch);
    cmd.args(["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_exit(child: &mut std::process::Child) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            panic!("gauntlet did not exit after the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_server_child_that_left_the_group_is_killed_after_the_run_and_reported() {
    let f = Fixture::new("escape").fault(&["--escape-child"]);
    // `run` asserts that no tagged process (the escaped sleeper included) survives the run.
    let run = f.run(&[]);
    assert_eq!(run.code, 0, "{}", run.explain());
    let found = run.findings("leftover-process");
    assert!(
        found.iter().any(|x| x["message"].as_str().unwrap_or("").contains("left its process group")),
        "{}",
        run.explain()
    );
}

#[test]
fn sigkill_of_gauntlet_takes_its_server_down() {
    let f = Fixture::new("sigkill").fault(&["--token-delay-ms", "200"]);
    let mut child = start(&f);
    wait_for_processes(&f, 1);
    std::thread::sleep(Duration::from_millis(300));
    send_signal(child.id() as i32, 9);
    let status = wait_exit(&mut child);
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9), "{status:?}");
    // Nothing of gauntlet ran after the SIGKILL: only the server's parent-death signal can have stopped it.
    assert_no_survivors(&f.tag);
}

/// A server with a child in its group and a descendant that left it (setsid and a double fork): after a SIGKILL
/// of gauntlet, nothing of either survives. Without the watchdog both did (the parent-death signal reaches only the
/// leader).
#[test]
fn sigkill_of_gauntlet_leaves_neither_group_members_nor_escaped_processes() {
    let f = Fixture::new("sigkill-all").fault(&["--escape-child", "--leak-child", "--token-delay-ms", "200"]);
    let mut child = start(&f);
    // The server, its child in the group and the escaped sleeper.
    wait_for_processes(&f, 3);
    send_signal(child.id() as i32, 9);
    let status = wait_exit(&mut child);
    assert_eq!(std::os::unix::process::ExitStatusExt::signal(&status), Some(9), "{status:?}");
    assert_no_survivors(&f.tag);
}

#[test]
fn ctrl_c_also_kills_what_left_the_server_group() {
    let f = Fixture::new("escape-int").fault(&["--escape-child", "--token-delay-ms", "200"]);
    let mut child = start(&f);
    // The server and its escaped sleeper.
    wait_for_processes(&f, 2);
    std::thread::sleep(Duration::from_millis(300));
    send_signal(child.id() as i32, 2);
    let status = wait_exit(&mut child);
    assert_eq!(status.code(), Some(130), "{status:?}");
    assert_no_survivors(&f.tag);
}

/// A server child started as `env -i setsid …` carries no marker and is in neither the server's group nor its
/// session. It is still found, killed and named in a `leftover-process` finding: through the spawn's cgroup where
/// the machine allows one, else (see the next test) through gauntlet as child subreaper. Before either, it outlived
/// gauntlet with no finding.
#[test]
fn a_child_that_clears_its_environment_and_leaves_the_session_is_killed_and_named() {
    let f = Fixture::new("escape-clean").fault(&["--escape-clean"]);
    // `run` asserts that no tagged process (the escaped sleeper included) survives the run.
    let run = f.run(&[]);
    assert_eq!(run.code, 0, "{}", run.explain());
    let found = run.findings("leftover-process");
    assert!(
        found.iter().any(|x| {
            let m = x["message"].as_str().unwrap_or("");
            m.contains("pid ") && m.contains("--sleeper") && m.contains(&f.tag)
        }),
        "{}",
        run.explain()
    );
}

/// Where no cgroup can be made (`GAUNTLET_CGROUP=off` stands for a read-only cgroup mount), the run record says so,
/// and gauntlet as child subreaper is what finds the marker-less child once the server is gone: re-parented to
/// gauntlet, not started by it, killed and named.
#[test]
fn without_a_cgroup_the_subreaper_finds_what_cleared_its_environment() {
    let f = Fixture::new("escape-clean-nocg").fault(&["--escape-clean"]);
    let run = run_with_env(&f, "out", &[("GAUNTLET_CGROUP", "off")]);
    assert_eq!(run.code, 0, "{}", run.explain());
    let found = run.findings("leftover-process");
    assert!(
        found.iter().any(|x| {
            let m = x["message"].as_str().unwrap_or("");
            m.contains("re-parented") && m.contains("--sleeper") && m.contains(&f.tag)
        }),
        "{}",
        run.explain()
    );
    let record = run.record.as_ref().unwrap().to_string();
    assert!(record.contains("no cgroup (GAUNTLET_CGROUP=off)"), "{record}");
}
