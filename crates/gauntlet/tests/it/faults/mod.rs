//! Fault injection: the gauntlet binary against the scripted fake server. Each test asserts the verdict, the
//! finding, the exit code, and that no process of the run survives it. One module per topic; the fixture (a
//! scratch manifest around the fake server) and the helpers more than one topic uses live here.

mod attach;
mod bench;
mod bounds;
mod compare;
mod dialects;
mod engines;
mod escape;
mod field;
mod formats;
mod github;
mod gpu;
mod hostile;
mod html;
mod inputs;
mod lifecycle;
mod lm_eval;
mod lossless;
mod merge;
mod metrics;
mod paired;
mod plan;
mod process;
mod qualify;
mod records;
mod skip_cache;
mod store;
mod stream;
mod structured;
mod tls;
mod tokens;
mod verdict;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::{Reaped, Run, assert_no_survivors, finish, free_port, gauntlet, render_in_chromium, workspace_bin};

const SUITE: &str = r#"
id = "faults"
version = 1

[[cases]]
id = "alpha"
max_tokens = 64
messages = [{ role = "user", content = "Say alpha." }]
check = { contains = ["alpha"] }

[[cases]]
id = "beta"
max_tokens = 64
messages = [{ role = "user", content = "Say beta." }]
check = { contains = ["beta"] }

[[cases]]
id = "gamma"
max_tokens = 64
stream = true
messages = [{ role = "user", content = "Say gamma." }]
check = { contains = ["gamma"] }

[[cases]]
id = "delta"
max_tokens = 64
messages = [{ role = "user", content = "Say delta." }]
check = { contains = ["delta"] }

[[cases]]
id = "alpha-again"
repeat_of = "alpha"
"#;

/// Forty words, so every case counts towards the decode median (≥ 32 completion tokens).
fn answer(word: &str) -> String {
    format!("{word} {}", "and so on".split(' ').cycle().take(39).collect::<Vec<_>>().join(" "))
}

/// Includes an 8 ms pace per word: an instant fake would make decode speed pure timer noise, and runs that are
/// compared with a baseline would then warn about speed at random.
fn good_answers() -> Vec<(&'static str, String)> {
    vec![
        ("__token_delay_ms", "8".into()),
        ("Say alpha.", answer("alpha")),
        ("Say beta.", answer("beta")),
        ("Say gamma.", answer("gamma")),
        ("Say delta.", answer("delta")),
    ]
}

struct Fixture {
    dir: tempfile::TempDir,
    tag: String,
    port: u16,
    args: Vec<String>,
    answers: Vec<(&'static str, String)>,
    profile_extra: String,
    /// Cases appended to [`SUITE`] (TOML `[[cases]]` tables).
    suite_extra: String,
    executable: bool,
    model: bool,
}

impl Fixture {
    fn new(name: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        Fixture {
            tag: format!("gauntlet-test-{name}-{}-{}", std::process::id(), dir.path().display().to_string().len()),
            dir,
            port: free_port(),
            args: Vec::new(),
            answers: good_answers(),
            profile_extra: String::new(),
            suite_extra: String::new(),
            executable: true,
            model: true,
        }
    }

    fn fault(mut self, args: &[&str]) -> Fixture {
        self.args.extend(args.iter().map(|s| s.to_string()));
        self
    }

    fn answers(mut self, answers: Vec<(&'static str, String)>) -> Fixture {
        self.answers = answers;
        self
    }

    fn cases(mut self, toml: &str) -> Fixture {
        self.suite_extra.push_str(toml);
        self
    }

    fn profile(mut self, extra: &str) -> Fixture {
        self.profile_extra.push_str(extra);
        self.profile_extra.push('\n');
        self
    }

    /// Short limits so faults show quickly; a test's own `profile(...)` line replaces the default of its key. The
    /// defaults go before any sub-table the test opens (`[profiles.test.qualify]`), so they stay profile keys.
    fn profile_settings(&self) -> String {
        let lines: Vec<String> = self.profile_extra.lines().filter(|l| !l.is_empty()).map(str::to_owned).collect();
        let split = lines.iter().position(|l| l.starts_with('[')).unwrap_or(lines.len());
        let (mut head, tail) = (lines[..split].to_vec(), &lines[split..]);
        for default in
            ["load_timeout = \"10s\"", "request_timeout = \"3s\"", "suite_budget = \"60s\"", "stop_grace = \"2s\""]
        {
            let key = default.split(' ').next().unwrap_or_default();
            if !head.iter().any(|l| l.starts_with(key)) {
                head.push(default.to_owned());
            }
        }
        head.extend_from_slice(tail);
        head.join("\n")
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self) -> PathBuf {
        let root = self.path();
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::create_dir_all(root.join("models")).unwrap();
        let bin = root.join("bin/fake-server");
        let _ = std::fs::remove_file(&bin);
        if self.executable {
            std::os::unix::fs::symlink(workspace_bin("gauntlet-fake-server"), &bin).unwrap();
        } else {
            std::fs::write(&bin, "#!/bin/sh\n").unwrap();
        }
        if self.model {
            std::fs::write(root.join("models/tiny.gguf"), b"GGUF fake weights").unwrap();
        } else {
            let _ = std::fs::remove_file(root.join("models/tiny.gguf"));
        }
        std::fs::write(root.join("suite.toml"), format!("{SUITE}{}", self.suite_extra)).unwrap();
        let answers: serde_json::Map<String, serde_json::Value> =
            self.answers.iter().map(|(k, v)| (k.to_string(), serde_json::Value::String(v.clone()))).collect();
        std::fs::write(root.join("answers.json"), serde_json::to_string(&answers).unwrap()).unwrap();
        let mut args: Vec<String> = vec!["--answers".into(), root.join("answers.json").display().to_string()];
        args.extend(["--tag".into(), self.tag.clone(), "--lifetime-s".into(), "120".into()]);
        args.extend(self.args.iter().cloned());
        let args_toml: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
        let manifest = format!(
            r#"version = 1
[models.tiny]
path = "models/tiny.gguf"
[servers.fake]
binary = "bin/fake-server"
[profiles.test]
model = "tiny"
server = "fake"
port = {port}
suite = "suite.toml"
server_arguments = [{args}]
{extra}"#,
            port = self.port,
            args = args_toml.join(", "),
            extra = self.profile_settings(),
        );
        let path = root.join("gauntlet.toml");
        std::fs::write(&path, manifest).unwrap();
        path
    }

    /// The manifest with the model's sha256 declared, as qualification demands.
    fn write_qualifiable(&self) -> PathBuf {
        let manifest = self.write();
        let sha = gauntlet_engine::util::sha256_hex(b"GGUF fake weights");
        let text = std::fs::read_to_string(&manifest)
            .unwrap()
            .replace("path = \"models/tiny.gguf\"", &format!("path = \"models/tiny.gguf\"\nsha256 = \"{sha}\""));
        std::fs::write(&manifest, text).unwrap();
        manifest
    }

    /// A fake server that the test starts itself (gauntlet only attaches), answering the fixture's answers, with
    /// `extra` arguments; and `attach.toml`, a profile `remote` for it at `path` (e.g. `/` or `/serving/`) that reads
    /// its key from `key_env`. The caller kills the server.
    fn attached(&self, extra: &[&str], path: &str, key_env: &str) -> (std::process::Child, PathBuf) {
        self.write();
        let port = free_port();
        let server = std::process::Command::new(workspace_bin("gauntlet-fake-server"))
            .args(["--port", &port.to_string(), "--tag", &self.tag, "--lifetime-s", "60"])
            .args(extra)
            .args(["--answers", self.path().join("answers.json").to_str().unwrap()])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let manifest = self.path().join("attach.toml");
        std::fs::write(
            &manifest,
            format!(
                "version = 1\n[profiles.remote]\nbase_url = \"http://127.0.0.1:{port}{path}\"\nsuite = \"suite.toml\"\nload_timeout = \"10s\"\nrequest_timeout = \"3s\"\napi_key_env = \"{key_env}\"\n"
            ),
        )
        .unwrap();
        (server, manifest)
    }

    /// Runs `gauntlet run` on this fixture into `out`, then checks that no process of the run survived.
    fn run_into(&self, out: &str, extra: &[&str]) -> Run {
        let manifest = self.write();
        let out = self.path().join(out);
        let mut args = vec!["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        let output = gauntlet(&args, &[], Duration::from_secs(90));
        let run = finish(output, &out);
        assert_no_survivors(&self.tag);
        run
    }

    fn run(&self, extra: &[&str]) -> Run {
        self.run_into("out", extra)
    }

    /// A healthy run written as a baseline; returns its path.
    fn baseline(&self) -> String {
        let path = self.path().join("baseline.json");
        let run = self.run_into("baseline-out", &["--write-baseline", path.to_str().unwrap()]);
        assert_eq!(run.code, 0, "{}", run.explain());
        assert!(path.is_file(), "{}", run.explain());
        path.display().to_string()
    }
}

fn git_in(repo: &Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .unwrap();
    assert!(ok.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&ok.stderr));
}

fn run_with_env(f: &Fixture, out: &str, env: &[(&str, &str)]) -> Run {
    let manifest = f.write();
    let out = f.path().join(out);
    let args = ["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let run = finish(gauntlet(&args, env, Duration::from_secs(90)), &out);
    assert_no_survivors(&f.tag);
    run
}
