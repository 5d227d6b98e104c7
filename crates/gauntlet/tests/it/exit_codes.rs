//! The one exit map, seen from outside: the same condition exits with the same code in every command, a strict
//! manifest refuses what it does not know (exit 2, with a "did you mean"), an output that cannot be written is
//! infrastructure (3), and nothing a user can type or write makes gauntlet exit 101.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn explain(&self) -> String {
        format!("exit {:?}\nstdout:\n{}\nstderr:\n{}", self.code, self.stdout, self.stderr)
    }
}

/// gauntlet with `args`, its store and home inside `scratch`, no CI context but what `env` gives; killed (and the
/// test failed) past `limit`.
fn gauntlet(scratch: &Path, args: &[&str], env: &[(&str, &str)], limit: Duration) -> Ran {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_gauntlet"));
    cmd.args(args).current_dir(scratch).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    for k in ["GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY", "GITHUB_EVENT_NAME", "GITHUB_SHA", "GAUNTLET_FAKE_GPU"] {
        cmd.env_remove(k);
    }
    cmd.env("GAUNTLET_STORE", scratch.join("store")).env("GAUNTLET_HOME", scratch.join("home"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn gauntlet");
    let deadline = Instant::now() + limit;
    let out: Output = loop {
        if child.try_wait().expect("try_wait").is_some() {
            break child.wait_with_output().expect("output");
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!("gauntlet {args:?} did not finish within {limit:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

const LIMIT: Duration = Duration::from_secs(60);

/// A scratch folder with an attach profile (to a port nobody listens on, short timeouts) in `m.toml`.
fn attach_manifest(extra: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let text = format!(
        "version = 1\n[profiles.p]\nbase_url = \"http://127.0.0.1:{port}\"\nload_timeout = \"2s\"\n\
         request_timeout = \"2s\"\nsuite_budget = \"5s\"\n{extra}\n"
    );
    let path = dir.path().join("m.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// The embedded default manifest in a folder that holds stand-ins for its model and server binaries, so that
/// `check` passes it as written.
fn default_manifest_with_files() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let ran = gauntlet(dir.path(), &["default-manifest"], &[], LIMIT);
    assert_eq!(ran.code, Some(0), "{}", ran.explain());
    let text = ran.stdout;
    // A model without a digest is a directory in the Hugging Face layout (vLLM's): its stand-in is a folder.
    let manifest: toml::Table = text.parse().unwrap();
    let folders: Vec<&str> = manifest["models"]
        .as_table()
        .unwrap()
        .values()
        .filter(|m| m.get("sha256").is_none())
        .filter_map(|m| m.get("path")?.as_str())
        .collect();
    for line in text.lines() {
        let Some(value) = line.strip_prefix("path = \"").or_else(|| line.strip_prefix("binary = \"")) else {
            continue;
        };
        let value = value.trim_end_matches('"');
        let file = dir.path().join(value);
        if folders.contains(&value) {
            std::fs::create_dir_all(&file).unwrap();
            std::fs::write(file.join("config.json"), "{}").unwrap();
            continue;
        }
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, "#!/bin/sh\nexit 0\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    (dir, text)
}

#[test]
fn a_misspelt_key_in_the_default_manifest_exits_2_and_names_the_right_key() {
    let (dir, text) = default_manifest_with_files();
    let good = dir.path().join("good.toml");
    std::fs::write(&good, &text).unwrap();
    let ran = gauntlet(dir.path(), &["check", "--manifest", good.to_str().unwrap()], &[], LIMIT);
    assert_eq!(ran.code, Some(0), "the default as written passes: {}", ran.explain());

    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, text.replacen("request_timeout", "request_timout", 1)).unwrap();
    for args in [
        vec!["check", "--manifest", bad.to_str().unwrap()],
        vec!["doctor", "--manifest", bad.to_str().unwrap()],
        vec!["plan", "--manifest", bad.to_str().unwrap(), "--all"],
        vec!["run", "--manifest", bad.to_str().unwrap()],
        vec!["bench", "--manifest", bad.to_str().unwrap()],
        vec!["qualify", "--manifest", bad.to_str().unwrap()],
    ] {
        let ran = gauntlet(dir.path(), &args, &[], LIMIT);
        assert_eq!(ran.code, Some(2), "{args:?}: {}", ran.explain());
        assert!(
            ran.stderr.contains("profiles.default.request_timout: unknown key; did you mean `request_timeout`?"),
            "{args:?}: {}",
            ran.explain()
        );
    }
}

#[test]
fn an_unknown_key_in_a_suite_exits_2_with_its_path() {
    let (dir, manifest) = attach_manifest("suite = \"suite.toml\"");
    std::fs::write(
        dir.path().join("suite.toml"),
        "id = \"s\"\nversion = 1\n[[cases]]\nid = \"a\"\nmax_tokens = 8\n\
         messages = [{ role = \"user\", content = \"hi\" }]\ncheck = { contians = [\"x\"] }\n",
    )
    .unwrap();
    let ran = gauntlet(dir.path(), &["check", "--manifest", manifest.to_str().unwrap()], &[], LIMIT);
    assert_eq!(ran.code, Some(2), "{}", ran.explain());
    assert!(ran.stderr.contains("cases[0].check.contians: unknown key; did you mean `contains`?"), "{}", ran.explain());
}

/// `extra_body` may add request fields but not those gauntlet sets itself, and `dialect` names a known engine:
/// both are manifest errors naming the key.
#[test]
fn check_refuses_extra_body_fields_gauntlet_owns_and_unknown_dialects() {
    let (dir, manifest) = attach_manifest("");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let check = |extra: &str| {
        std::fs::write(&manifest, format!("{text}{extra}\n")).unwrap();
        gauntlet(dir.path(), &["check", "--manifest", manifest.to_str().unwrap()], &[], LIMIT)
    };
    let ran = check("dialect = \"vllm\"\nextra_body = { seed = 1, chat_template_kwargs = { x = 1 } }");
    assert_eq!(ran.code, Some(0), "{}", ran.explain());
    let ran = check("extra_body = { seed = 1, messages = [], stream = true }");
    assert_eq!(ran.code, Some(2), "{}", ran.explain());
    for key in ["messages", "stream"] {
        let want = format!("profiles.p.extra_body.{key}: gauntlet sets this request field itself");
        assert!(ran.stderr.contains(&want), "{}", ran.explain());
    }
    let ran = check("dialect = \"vlm\"");
    assert_eq!(ran.code, Some(2), "{}", ran.explain());
    assert!(ran.stderr.contains("profiles.p.dialect: unknown dialect `vlm`"), "{}", ran.explain());
}

#[test]
fn check_refuses_impossible_ports_hosts_and_control_characters() {
    let (dir, manifest) = attach_manifest("");
    let text = std::fs::read_to_string(&manifest).unwrap();
    let url = text.lines().find_map(|l| l.strip_prefix("base_url = ")).unwrap().to_owned();
    let ran = gauntlet(dir.path(), &["check", "--manifest", manifest.to_str().unwrap()], &[], LIMIT);
    assert_eq!(ran.code, Some(0), "{}", ran.explain());
    for (what, bad_url) in [
        ("port 99999", "\"http://127.0.0.1:99999\""),
        ("CR LF", "\"http://127.0.0.1:8000\\r\\nX-Injected: 1\""),
        ("LF", "\"http://127.0.0.1:8000/\\n\""),
        ("NUL", "\"http://127.0.0.1:8000/\\u0000\""),
        ("non-ASCII host", "\"http://exämple.com:8000\""),
        ("no host", "\"http://:8000\""),
    ] {
        std::fs::write(&manifest, text.replace(&url, bad_url)).unwrap();
        let ran = gauntlet(dir.path(), &["check", "--manifest", manifest.to_str().unwrap()], &[], LIMIT);
        assert_eq!(ran.code, Some(2), "{what}: {}", ran.explain());
        assert!(ran.stderr.contains("profiles.p.base_url:"), "{what}: {}", ran.explain());
    }
    std::fs::write(&manifest, format!("{text}request_model = \"m\\u0000\"\n")).unwrap();
    let ran = gauntlet(dir.path(), &["check", "--manifest", manifest.to_str().unwrap()], &[], LIMIT);
    assert_eq!(ran.code, Some(2), "NUL in a string: {}", ran.explain());
    assert!(ran.stderr.contains("profiles.p.request_model: control character U+0000"), "{}", ran.explain());
}

#[test]
fn a_70_mb_manifest_is_refused_in_well_under_5_seconds() {
    let (dir, manifest) = attach_manifest("");
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&manifest).unwrap();
        let block = format!("# {}\n", "x".repeat(1 << 20));
        for _ in 0..70 {
            f.write_all(block.as_bytes()).unwrap();
        }
    }
    let started = Instant::now();
    let ran = gauntlet(dir.path(), &["check", "--manifest", manifest.to_str().unwrap()], &[], LIMIT);
    let took = started.elapsed();
    assert_eq!(ran.code, Some(2), "{}", ran.explain());
    assert!(ran.stderr.contains("larger than the 1024 KiB limit"), "{}", ran.explain());
    assert!(took < Duration::from_secs(2), "refusing took {took:?}");
}

#[test]
fn absurd_bench_rates_exit_2_with_a_message_never_a_panic() {
    let (dir, manifest) = attach_manifest("");
    for rate in ["1e-300", "NaN", "inf", "-1", "0", "1e300"] {
        let flag = format!("--rate={rate}");
        let ran = gauntlet(dir.path(), &["bench", "--manifest", manifest.to_str().unwrap(), &flag], &[], LIMIT);
        assert_eq!(ran.code, Some(2), "--rate {rate}: {}", ran.explain());
        assert!(ran.stderr.contains("--rate"), "--rate {rate}: {}", ran.explain());
        assert!(!ran.stderr.contains("panicked"), "--rate {rate}: {}", ran.explain());
    }
    let ran = gauntlet(
        dir.path(),
        &["bench", "--manifest", manifest.to_str().unwrap(), "--concurrency", "1000000"],
        &[],
        LIMIT,
    );
    assert_eq!(ran.code, Some(2), "{}", ran.explain());
    // Out of range, the one name of the setting is the one the message gives (not its deprecated other name).
    let ran =
        gauntlet(dir.path(), &["bench", "--manifest", manifest.to_str().unwrap(), "--samples", "100000"], &[], LIMIT);
    assert_eq!(ran.code, Some(2), "{}", ran.explain());
    assert!(ran.stderr.contains("--samples: must be within 1..="), "{}", ran.explain());
}

/// Whether a GPU is free cannot be told: every command that measures on it fails closed, with exit 1. (`qualify`
/// opens its server through the same session, but an attached profile fails its R0 provenance before any wait.)
#[test]
fn an_unknown_gpu_state_fails_closed_with_1_in_run_and_bench() {
    let (dir, manifest) = attach_manifest("device = \"nvidia:0\"");
    let gpu = dir.path().join("fake-gpu");
    std::fs::create_dir_all(gpu.join("holders")).unwrap();
    std::fs::write(gpu.join("unknown"), "NVML: insufficient permissions").unwrap();
    let kmsg = dir.path().join("kmsg");
    std::fs::write(&kmsg, "").unwrap();
    let env = [
        ("GAUNTLET_FAKE_GPU", gpu.to_str().unwrap()),
        ("GAUNTLET_KMSG_FILE", kmsg.to_str().unwrap()),
        ("GAUNTLET_LOCK_DIR", dir.path().to_str().unwrap()),
    ];
    for command in ["run", "bench"] {
        let out = dir.path().join(format!("out-{command}"));
        let args = [command, "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
        let ran = gauntlet(dir.path(), &args, &env, LIMIT);
        assert_eq!(ran.code, Some(1), "{command}: {}", ran.explain());
        assert!(
            ran.stderr.contains("failed closed: cannot tell whether nvidia:0 is free: NVML: insufficient permissions"),
            "{command}: {}",
            ran.explain()
        );
    }
}

/// An output folder that cannot be created is infrastructure (3), in every command that writes one.
#[test]
fn outputs_that_cannot_be_written_exit_3() {
    let (dir, manifest) = attach_manifest("");
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, "not a folder").unwrap();
    let out = blocker.join("out");
    let m = manifest.to_str().unwrap();
    let o = out.to_str().unwrap();
    let shard = dir.path().join("shard");
    std::fs::create_dir_all(&shard).unwrap();
    let run1 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/validation/h200-2026-12-01/run1.json");
    std::fs::copy(&run1, shard.join("run.json")).unwrap();
    for args in [
        vec!["run", "--manifest", m, "--out", o],
        vec!["bench", "--manifest", m, "--out", o],
        vec!["qualify", "--manifest", m, "--out", o],
        vec!["report", "--merge", shard.to_str().unwrap(), "--out", o],
    ] {
        let ran = gauntlet(dir.path(), &args, &[], LIMIT);
        assert_eq!(ran.code, Some(3), "{args:?}: {}", ran.explain());
        assert!(ran.stderr.contains(o), "{args:?} names the folder: {}", ran.explain());
    }
}

/// A promotion that is refused is bad input (2), one whose store cannot be written is infrastructure (3), and
/// provenance read from the environment (a commit that is not ASCII) never makes it an internal error.
#[test]
fn promotions_exit_by_what_went_wrong_never_101() {
    let dir = tempfile::tempdir().unwrap();
    let run1 = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/validation/h200-2026-12-01/run1.json");
    let run = run1.to_str().unwrap();
    let refused = gauntlet(dir.path(), &["baseline", "promote", run, "--note", "n"], &[], LIMIT);
    assert_eq!(refused.code, Some(2), "{}", refused.explain());
    let blocker = dir.path().join("a-file");
    std::fs::write(&blocker, "not a folder").unwrap();
    let store = blocker.join("store");
    let unwritable = gauntlet(
        dir.path(),
        &["baseline", "promote", run, "--trusted", "--store", store.to_str().unwrap()],
        &[],
        LIMIT,
    );
    assert_eq!(unwritable.code, Some(3), "{}", unwritable.explain());

    let event = dir.path().join("event.json");
    std::fs::write(&event, r#"{"repository": {"default_branch": "main"}}"#).unwrap();
    let ci = [
        ("GITHUB_ACTIONS", "true"),
        ("GITHUB_EVENT_NAME", "push"),
        ("GITHUB_REF", "refs/heads/main"),
        ("GITHUB_EVENT_PATH", event.to_str().unwrap()),
        ("GITHUB_SHA", "aaé€€€€"),
    ];
    let promoted = gauntlet(dir.path(), &["baseline", "promote", run, "--note", "n"], &ci, LIMIT);
    assert_eq!(promoted.code, Some(0), "{}", promoted.explain());
    assert!(promoted.stdout.contains("commit aaé€€€€"), "{}", promoted.explain());
}

/// An API key that would carry a control character into the Authorization header (CR/LF: header injection) is
/// refused before any request, exit 2, in run and bench alike; the message names the variable, never the value.
#[test]
fn an_api_key_with_a_control_character_is_refused_without_showing_it() {
    let (dir, manifest) = attach_manifest("api_key_env = \"GAUNTLET_TEST_KEY\"");
    let env = [("GAUNTLET_TEST_KEY", "sekrit\r\nX-Injected: 1")];
    for command in ["run", "bench"] {
        let out = dir.path().join(format!("out-{command}"));
        let args = [command, "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
        let ran = gauntlet(dir.path(), &args, &env, LIMIT);
        assert_eq!(ran.code, Some(2), "{command}: {}", ran.explain());
        assert!(ran.stderr.contains("`GAUNTLET_TEST_KEY` holds a control character"), "{command}: {}", ran.explain());
        assert!(!ran.stderr.contains("sekrit") && !ran.stdout.contains("sekrit"), "{command}: {}", ran.explain());
    }
}
