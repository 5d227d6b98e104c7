//! Shared pieces of the whole-binary tests: a scratch manifest around the scripted fake server, running the
//! gauntlet binary with a deadline, and the check that no process of a run survives it.
#![allow(dead_code)]

pub mod fidelity;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// A binary of this workspace, next to the test executable's `deps/` folder.
pub fn workspace_bin(name: &str) -> PathBuf {
    if name == "gauntlet" {
        return PathBuf::from(env!("CARGO_BIN_EXE_gauntlet"));
    }
    let exe = std::env::current_exe().expect("current_exe");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let path = dir.join(name);
    assert!(path.is_file(), "{} is not built: run the tests with `cargo nextest run --workspace`", path.display());
    path
}

/// A child the test started, killed and reaped when the test ends, however it ends (a failed assertion too).
pub struct Reaped(pub std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free TCP port on 127.0.0.1 (bound and released; tests then own it for their run).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap().local_addr().unwrap().port()
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub record: Option<Value>,
    pub out: PathBuf,
}

impl Run {
    pub fn verdict(&self) -> &str {
        self.record.as_ref().and_then(|r| r["verdict"].as_str()).unwrap_or("(no run.json)")
    }

    pub fn findings(&self, kind: &str) -> Vec<Value> {
        self.record
            .as_ref()
            .and_then(|r| r["findings"].as_array())
            .map(|f| f.iter().filter(|x| x["kind"] == kind).cloned().collect())
            .unwrap_or_default()
    }

    pub fn has_finding(&self, kind: &str) -> bool {
        !self.findings(kind).is_empty()
    }

    pub fn case(&self, id: &str) -> Value {
        self.record
            .as_ref()
            .and_then(|r| r["cases"].as_array())
            .and_then(|c| c.iter().find(|c| c["id"] == id).cloned())
            .unwrap_or(Value::Null)
    }

    pub fn explain(&self) -> String {
        format!("exit {}\nstdout:\n{}\nstderr:\n{}", self.code, self.stdout, self.stderr)
    }
}

/// Runs the gauntlet binary with `args`, killing it if it outlives `limit` (a hung gauntlet fails the test
/// instead of hanging the suite).
/// Every run gets a store and a home of its own unless the test names them: no test sees another's baselines,
/// skip-cache or digest memos, and none writes into the user's `~/.cache/gauntlet`.
pub fn isolate(cmd: &mut Command, env: &[(&str, &str)], scratch: &tempfile::TempDir) {
    for (key, dir) in [("GAUNTLET_STORE", "store"), ("GAUNTLET_HOME", "home")] {
        if !env.iter().any(|(k, _)| *k == key) {
            cmd.env(key, scratch.path().join(dir));
        }
    }
}

/// The process `cmd` starts gets SIGTERM when the thread that started it dies: a test ended from outside (a timeout,
/// Ctrl-C) ends what it started.
pub fn terminated_with_test(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe and takes plain integers.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            Ok(())
        });
    }
}

pub fn gauntlet(args: &[&str], env: &[(&str, &str)], limit: Duration) -> Output {
    let mut cmd = Command::new(workspace_bin("gauntlet"));
    cmd.args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    // The test's own CI context never leaks in; a test that wants one passes it in `env`.
    cmd.env_remove("GITHUB_ACTIONS").env_remove("GITHUB_STEP_SUMMARY").env_remove("GITHUB_EVENT_NAME");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let scratch = tempfile::tempdir().expect("scratch store");
    isolate(&mut cmd, env, &scratch);
    // A test ended from outside (nextest's timeout, Ctrl-C) must not leave its gauntlet running on: gauntlet stops
    // its server on SIGTERM as it does on Ctrl-C. (Seen 2026-12-07: a `timeout` around nextest ended two gate tests,
    // and their gauntlet runs and servers went on for minutes.)
    terminated_with_test(&mut cmd);
    let mut child = cmd.spawn().expect("spawn gauntlet");
    let deadline = Instant::now() + limit;
    loop {
        if child.try_wait().expect("try_wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "gauntlet did not finish within {limit:?}\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn finish(output: Output, out: &Path) -> Run {
    let record = std::fs::read_to_string(out.join("run.json")).ok().and_then(|t| serde_json::from_str(&t).ok());
    Run {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        record,
        out: out.to_owned(),
    }
}

/// Pids of live processes whose command line contains `tag`.
pub fn processes_tagged(tag: &str) -> Vec<i32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let zombie = stat.rfind(')').is_some_and(|i| stat[i + 1..].trim_start().starts_with('Z'));
        if !zombie && String::from_utf8_lossy(&cmdline).replace('\0', " ").contains(tag) {
            out.push(pid);
        }
    }
    out
}

/// Asserts that nothing tagged survives; waits briefly (bounded) for processes that are already dying.
pub fn assert_no_survivors(tag: &str) {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = processes_tagged(tag);
        if left.is_empty() {
            return;
        }
        if Instant::now() >= deadline {
            for pid in &left {
                send_signal(*pid, 9); // clean up before failing
            }
            panic!("processes of the run survived it: {left:?} (tag {tag})");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends `sig` to `pid` (tests only: no libc dependency for one call).
pub fn send_signal(pid: i32, sig: i32) {
    unsafe extern "C" {
        fn kill(pid: i32, sig: i32) -> i32;
    }
    // SAFETY: kill has no memory-safety preconditions.
    unsafe {
        kill(pid, sig);
    }
}

/// Renders `page` in headless Chromium (Debian's `chromium`, installed by `scripts/setup.sh`) and writes a
/// screenshot to `png`. Returns every console message the page produced (a script error, a refused load, a
/// Content-Security-Policy violation): a report page must produce none. Chromium and every helper process it
/// started are killed as a group when it finishes or outlives its deadline.
pub fn render_in_chromium(page: &Path, png: &Path) -> Vec<String> {
    use std::os::unix::process::CommandExt;
    let browser = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|b| Command::new(b).arg("--version").output().is_ok_and(|o| o.status.success()))
        .expect("Chromium is not installed: run scripts/setup.sh (it installs Debian's chromium)");
    let profile = tempfile::tempdir().expect("browser profile");
    let mut child = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--enable-logging=stderr", "--v=0"])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", png.display()))
        .arg("--window-size=1000,2400")
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("spawn chromium");
    let pgid = child.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(90);
    while child.try_wait().expect("try_wait").is_none() {
        if Instant::now() >= deadline {
            send_signal(-pgid, 9);
            let _ = child.wait();
            panic!("chromium did not finish rendering {} within 90 s", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("chromium output");
    send_signal(-pgid, 9); // helpers Chromium left behind, if any
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chromium failed on {}: {log}", page.display());
    let png_bytes = std::fs::read(png).unwrap_or_default();
    assert!(png_bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "no screenshot written: {log}");
    log.lines().filter(|l| l.contains(":CONSOLE")).map(str::to_owned).collect()
}

/// Loads `page` in headless Chromium and returns the DOM it built (`--dump-dom`) and its console messages. Output
/// goes to files, so a large page never blocks on a full pipe; the browser is killed past 90 s.
pub fn dom_in_chromium(page: &Path) -> (String, Vec<String>) {
    use std::os::unix::process::CommandExt;
    let browser = ["chromium", "chromium-browser"]
        .into_iter()
        .find(|b| Command::new(b).arg("--version").output().is_ok_and(|o| o.status.success()))
        .expect("Chromium is not installed: run scripts/setup.sh (it installs Debian's chromium)");
    let scratch = tempfile::tempdir().expect("browser profile");
    let (out_path, err_path) = (scratch.path().join("dom.html"), scratch.path().join("log.txt"));
    let mut child = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--enable-logging=stderr", "--v=0"])
        .arg(format!("--user-data-dir={}", scratch.path().join("profile").display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).expect("dom file"))
        .stderr(std::fs::File::create(&err_path).expect("log file"))
        .process_group(0)
        .spawn()
        .expect("spawn chromium");
    let pgid = child.id() as i32;
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() >= deadline {
            send_signal(-pgid, 9);
            let _ = child.wait();
            panic!("chromium did not finish loading {} within 90 s", page.display());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    send_signal(-pgid, 9); // helpers Chromium left behind, if any
    let log = std::fs::read_to_string(&err_path).unwrap_or_default();
    assert!(status.success(), "chromium failed on {}: {log}", page.display());
    let dom = std::fs::read_to_string(&out_path).expect("dom");
    (dom, log.lines().filter(|l| l.contains(":CONSOLE")).map(str::to_owned).collect())
}

/// Runs the gauntlet binary like [`gauntlet`], with its stdout in a file (for outputs larger than a pipe holds);
/// returns the exit code, stdout and stderr.
pub fn gauntlet_to_file(args: &[&str], env: &[(&str, &str)], limit: Duration) -> (Option<i32>, String, String) {
    let scratch = tempfile::tempdir().expect("scratch");
    let (out_path, err_path) = (scratch.path().join("stdout"), scratch.path().join("stderr"));
    let mut cmd = Command::new(workspace_bin("gauntlet"));
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).expect("stdout file"))
        .stderr(std::fs::File::create(&err_path).expect("stderr file"));
    cmd.env_remove("GITHUB_ACTIONS").env_remove("GITHUB_STEP_SUMMARY").env_remove("GITHUB_EVENT_NAME");
    for (k, v) in env {
        cmd.env(k, v);
    }
    isolate(&mut cmd, env, &scratch);
    let mut child = cmd.spawn().expect("spawn gauntlet");
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gauntlet {args:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    (status.code(), read(&out_path), read(&err_path))
}

/// What no self-contained page may hold outside its text: a script, a stylesheet link, an outside source or any
/// network address in a tag, or a style that fetches. Text (escaped server answers) may say anything.
pub fn assert_self_contained(html: &str, what: &str) {
    let mut tags = String::new();
    let mut inside = false;
    for ch in html.chars() {
        match ch {
            '<' => inside = true,
            '>' if inside => {
                inside = false;
                tags.push_str(">\n");
            }
            _ => {}
        }
        if inside {
            tags.push(ch);
        }
    }
    for outside in ["<script", "<link", "<img", "<iframe", "<object", "http://", "https://", " src=", "srcset="] {
        assert!(!tags.contains(outside), "{what} refers outside itself: `{outside}` in a tag");
    }
    for outside in ["url(", "@import"] {
        assert!(!html.contains(outside), "{what} refers outside itself: `{outside}`");
    }
}
