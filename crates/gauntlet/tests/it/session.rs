//! The server session and the build step, through the gauntlet binary: an attached server on the bound GPU is
//! not "another holder", a build is capped, cached by its source and part of the identity, and a failed build
//! fails the run. Each test checks that nothing it started survives.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::{Reaped, assert_no_survivors, finish, free_port, gauntlet, processes_tagged, workspace_bin};

const SUITE: &str = r#"
id = "session"
version = 1

[[cases]]
id = "alpha"
max_tokens = 64
messages = [{ role = "user", content = "Say alpha." }]
check = { contains = ["alpha"] }
"#;

fn answers(dir: &Path) -> PathBuf {
    let path = dir.join("answers.json");
    std::fs::write(&path, r#"{"Say alpha.": "alpha and so on", "__token_delay_ms": "1"}"#).unwrap();
    path
}

/// `$GAUNTLET_FAKE_GPU` with one holder per pid.
fn fake_gpu(root: &Path, holders: &[(u32, &str)]) -> PathBuf {
    let dir = root.join("fake-gpu");
    let _ = std::fs::remove_dir_all(dir.join("holders"));
    std::fs::create_dir_all(dir.join("holders")).unwrap();
    std::fs::write(dir.join("identity.json"), r#"{"vendor": "nvidia", "name": "NVIDIA H200"}"#).unwrap();
    for (pid, name) in holders {
        std::fs::write(dir.join("holders").join(pid.to_string()), name).unwrap();
    }
    dir
}

/// The attached server under test holds the GPU its profile names: the busy-GPU wait must not count it (it used
/// to wait out `busy_wait` and skip). Another process on that GPU still makes it skip.
#[test]
fn attached_server_on_the_bound_gpu_is_benched_without_a_busy_skip() {
    let dir = tempfile::tempdir().unwrap();
    let tag = format!("gauntlet-session-attach-{}", std::process::id());
    let port = free_port();
    let mut server = Reaped(
        std::process::Command::new(workspace_bin("gauntlet-fake-server"))
            .args(["--port", &port.to_string(), "--tag", &tag, "--lifetime-s", "60"])
            .args(["--answers", answers(dir.path()).to_str().unwrap()])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let manifest = dir.path().join("attach.toml");
    std::fs::write(
        &manifest,
        format!(
            "version = 1\n[profiles.gpu]\nbase_url = \"http://127.0.0.1:{port}\"\ndevice = \"nvidia:0\"\n\
             busy_wait = \"2s\"\nload_timeout = \"10s\"\nrequest_timeout = \"5s\"\n"
        ),
    )
    .unwrap();
    let bench = |out: &str, gpu: &Path| {
        let out = dir.path().join(out);
        let args = [
            "bench",
            "--manifest",
            manifest.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--concurrency",
            "1",
            "--warmups",
            "0",
            "--samples",
            "1",
            "--max-tokens",
            "8",
        ];
        let o = gauntlet(&args, &[("GAUNTLET_FAKE_GPU", gpu.to_str().unwrap())], Duration::from_secs(60));
        (o, out)
    };

    let gpu = fake_gpu(dir.path(), &[(server.0.id(), "gauntlet-fake-s")]);
    let (ours, out) = bench("ours", &gpu);
    let stderr = String::from_utf8_lossy(&ours.stderr).into_owned();
    assert_eq!(ours.status.code(), Some(0), "the server under test is not another holder:\n{stderr}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("bench.json")).unwrap()).unwrap();
    let sentry = &record["sentry"];
    assert!(sentry["gpu_wait_seconds"].as_f64().unwrap() < 1.0, "{sentry}");
    let seen = sentry.get("gpu_holders_seen").and_then(|s| s.as_array()).map_or(0, Vec::len);
    assert_eq!(seen, 0, "nobody else held the GPU: {sentry}");

    let gpu = fake_gpu(dir.path(), &[(server.0.id(), "gauntlet-fake-s"), (4242, "python3")]);
    let (other, _) = bench("other", &gpu);
    let stderr = String::from_utf8_lossy(&other.stderr).into_owned();
    let pid = server.0.id();
    let still_running = server.0.try_wait().unwrap().is_none();
    drop(server);
    assert!(still_running, "gauntlet must not stop a server it attached to");
    assert_eq!(other.status.code(), Some(3), "another holder still skips:\n{stderr}");
    assert!(stderr.contains("pid 4242 (python3)"), "{stderr}");
    assert!(!stderr.contains(&format!("pid {pid} (")), "the server is never named as a holder: {stderr}");
    assert_no_survivors(&tag);
}

/// A manifest whose server `fake` is made by `build` (a TOML inline table body), binary `build/fake-server`.
fn build_manifest(root: &Path, tag: &str, build: &str) -> PathBuf {
    std::fs::create_dir_all(root.join("models")).unwrap();
    std::fs::write(root.join("models/tiny.gguf"), b"GGUF fake weights").unwrap();
    std::fs::write(root.join("suite.toml"), SUITE).unwrap();
    let answers = answers(root);
    let manifest = format!(
        r#"version = 1
[models.tiny]
path = "models/tiny.gguf"
[servers.fake]
binary = "build/fake-server"
[servers.fake.build]
dir = "build"
{build}
[profiles.test]
model = "tiny"
server = "fake"
port = {port}
suite = "suite.toml"
server_arguments = ["--answers", "{answers}", "--tag", "{tag}", "--lifetime-s", "60"]
load_timeout = "10s"
request_timeout = "5s"
stop_grace = "2s"
"#,
        port = free_port(),
        answers = answers.display(),
    );
    let path = root.join("gauntlet.toml");
    std::fs::write(&path, manifest).unwrap();
    path
}

fn run(manifest: &Path, out: &Path) -> crate::common::Run {
    let args = ["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
    finish(gauntlet(&args, &[], Duration::from_secs(90)), out)
}

/// A build past its cap is stopped within seconds, leaves no process, and the run is infrastructure (exit 3)
/// naming the build and its cap, with `skipped.json` like a busy GPU; `bench` likewise.
#[test]
fn build_past_its_cap_is_stopped_and_the_run_is_skipped() {
    let dir = tempfile::tempdir().unwrap();
    // A unique duration, so the sleep can be found in /proc (GNU sleep takes fractions).
    let marker = format!("600.{:09}", std::process::id());
    let manifest =
        build_manifest(dir.path(), "unused", &format!("command = [\"sleep\", \"{marker}\"]\ntimeout = \"5s\""));
    let out = dir.path().join("out");
    let started = Instant::now();
    let r = run(&manifest, &out);
    let took = started.elapsed();
    assert_eq!(r.code, 3, "{}", r.explain());
    assert!(took < Duration::from_secs(20), "stopped at its cap, not later: {took:?}");
    assert!(r.stderr.contains("server `fake`") && r.stderr.contains("cap of 5s"), "{}", r.explain());
    assert!(processes_tagged(&marker).is_empty(), "the build's sleep outlived the run");
    let skip: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("skipped.json")).unwrap()).unwrap();
    assert_eq!(skip["kind"], "build-timeout", "{skip}");
    assert!(dir.path().join("build").is_dir(), "the build directory is created");
    // `bench` opens the same session: the same cap, exit and `skipped.json`.
    let bench_out = dir.path().join("bench-out");
    let args = ["bench", "--manifest", manifest.to_str().unwrap(), "--out", bench_out.to_str().unwrap()];
    let b = finish(gauntlet(&args, &[], Duration::from_secs(90)), &bench_out);
    assert_eq!(b.code, 3, "{}", b.explain());
    assert!(processes_tagged(&marker).is_empty(), "the bench's build sleep outlived it");
    let skip: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(bench_out.join("skipped.json")).unwrap()).unwrap();
    assert_eq!(skip["kind"], "build-timeout", "{skip}");
}

/// A build that exits non-zero fails the run (exit 1) with a `build-failed` finding naming the command and the
/// last lines of its log; the server is never started.
#[test]
fn failing_build_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = build_manifest(
        dir.path(),
        "unused",
        "command = [[\"true\"], [\"sh\", \"-c\", \"echo 'main.c:3: error: expected ;' >&2; exit 7\"]]",
    );
    let out = dir.path().join("out");
    let r = run(&manifest, &out);
    assert_eq!(r.code, 1, "{}", r.explain());
    let failed = r.findings("build-failed");
    let message = failed.first().and_then(|f| f["message"].as_str()).unwrap_or_default().to_owned();
    assert!(message.contains("exit code 7") && message.contains("main.c:3: error"), "{}", r.explain());
    let record = r.record.as_ref().unwrap();
    assert_eq!(record["build"]["ran"], true);
    assert_eq!(record["server"]["stop"], "not-started", "{record}");
    assert!(std::fs::read_to_string(out.join("build.log")).unwrap().contains("expected ;"));
}

/// With an unchanged `source`, the second run (and `gauntlet build`) skips the build; a changed source file
/// rebuilds. run.json's identity holds the binary's digest, and the identity digest does not move with it.
#[test]
fn unchanged_source_is_not_rebuilt_and_the_binary_digest_is_in_the_identity() {
    let dir = tempfile::tempdir().unwrap();
    let tag = format!("gauntlet-session-build-{}", std::process::id());
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(dir.path().join("src/main.c"), "int main() { return 0; }\n").unwrap();
    let fake = workspace_bin("gauntlet-fake-server");
    let build =
        format!("source = \"src\"\ncommand = [\"cp\", \"{}\", \"fake-server\"]\ntimeout = \"60s\"", fake.display());
    let manifest = build_manifest(dir.path(), &tag, &build);
    let first = run(&manifest, &dir.path().join("one"));
    assert_eq!(first.code, 0, "{}", first.explain());
    assert_eq!(first.case("alpha")["status"], "pass", "the built server ran the suite\n{}", first.explain());
    let rec = first.record.as_ref().unwrap();
    assert_eq!(rec["server"]["loaded"], true, "{}", rec["server"]);
    assert_eq!(rec["build"]["ran"], true, "{}", rec["build"]);
    let sha = gauntlet_engine::util::sha256_file(&fake).unwrap();
    assert_eq!(rec["identity"]["build"]["binary_sha256"], sha.as_str());
    assert_eq!(rec["identity"]["build"]["built"], true);
    let source = rec["identity"]["build"]["source_digest"].as_str().unwrap().to_owned();
    assert_eq!(rec["build"]["source_digest"], source.as_str());

    let second = run(&manifest, &dir.path().join("two"));
    assert_eq!(second.code, 0, "{}", second.explain());
    assert_eq!(second.case("alpha")["status"], "pass", "{}", second.explain());
    let rec2 = second.record.as_ref().unwrap();
    assert_eq!(rec2["build"]["ran"], false, "unchanged source: skipped\n{}", rec2["build"]);
    assert_eq!(rec2["identity_digest"], rec["identity_digest"]);
    let out = dir.path().join("b");
    let args = ["build", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let only = gauntlet(&args, &[], Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&only.stdout).into_owned();
    assert_eq!(only.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("server `fake`: up to date"), "{stdout}");

    std::fs::write(dir.path().join("src/main.c"), "int main() { return 1; }\n").unwrap();
    let third = run(&manifest, &dir.path().join("three"));
    assert_eq!(third.code, 0, "{}", third.explain());
    let rec3 = third.record.as_ref().unwrap();
    assert_eq!(rec3["build"]["ran"], true, "a changed source rebuilds");
    assert_ne!(rec3["build"]["source_digest"], source.as_str());
    assert_no_survivors(&tag);
}

/// Unknown keys and a bad command in a build table are manifest errors caught by `check`.
#[test]
fn build_table_is_validated_strictly() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = build_manifest(dir.path(), "unused", "command = [\"/bin/true\", \"\"]\nsource = \"../elsewhere\"");
    let out = gauntlet(&["check", "--manifest", manifest.to_str().unwrap()], &[], Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("servers.fake.build.command[0]"), "absolute program: {stderr}");
    assert!(stderr.contains("servers.fake.build.command[1]: must not be an empty string"), "{stderr}");
    assert!(stderr.contains("servers.fake.build.source"), "{stderr}");
}
