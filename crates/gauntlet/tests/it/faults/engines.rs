//! Every engine: attached servers that have no `/health`, check the model name, describe themselves (and change
//! behind the same URL), a server that hangs mid-suite, and a server started through a kind's launch template.

use super::*;

/// Starts the fake server on a free port with `extra` flags (and the fixture's answers); returns it and its URL.
fn attached_server(f: &Fixture, extra: &[&str], port: u16) -> std::process::Child {
    f.write();
    std::process::Command::new(workspace_bin("gauntlet-fake-server"))
        .args(["--port", &port.to_string(), "--tag", &f.tag, "--lifetime-s", "60"])
        .args(extra)
        .args(["--answers", f.path().join("answers.json").to_str().unwrap()])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// An attach manifest naming only `base_url` (plus the test's suite and short timeouts, and `extra` lines).
fn attach_manifest(f: &Fixture, port: u16, extra: &str) -> PathBuf {
    let manifest = f.path().join("attach.toml");
    let mut text =
        format!("version = 1\n[profiles.remote]\nbase_url = \"http://127.0.0.1:{port}\"\nsuite = \"suite.toml\"\n");
    for default in ["load_timeout = \"20s\"", "request_timeout = \"3s\""] {
        if !extra.contains(default.split(' ').next().unwrap()) {
            text.push_str(default);
            text.push('\n');
        }
    }
    text.push_str(extra);
    text.push('\n');
    std::fs::write(&manifest, text).unwrap();
    manifest
}

fn run_attached(f: &Fixture, manifest: &Path, out: &str, extra: &[&str]) -> Run {
    let out = f.path().join(out);
    let mut args = vec!["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    finish(gauntlet(&args, &[], Duration::from_secs(60)), &out)
}

fn stop(mut server: std::process::Child) {
    let _ = server.kill();
    let _ = server.wait();
}

/// The new user: a profile naming only `base_url`, in front of a server with no `/health`, one model in
/// `/v1/models` and 404 for any other name. gauntlet gets ready through `/v1/models`, learns the model, records
/// both, and runs the suite with it.
#[test]
fn attach_with_only_a_base_url_discovers_the_model_without_health() {
    let f = Fixture::new("discover");
    let port = free_port();
    let server = attached_server(&f, &["--no-health", "--models", "served/model-1"], port);
    let manifest = attach_manifest(&f, port, "");
    let run = run_attached(&f, &manifest, "out", &[]);
    stop(server);
    assert_eq!(run.code, 0, "{}", run.explain());
    let record = run.record.as_ref().unwrap();
    assert_eq!(record["server"]["readiness"]["probe"], "models", "{}", run.explain());
    assert_eq!(record["server"]["readiness"]["discovered_model"], "served/model-1");
    assert_eq!(record["runtime"]["server"]["discovered_model"], "served/model-1");
    for id in ["alpha", "beta", "gamma", "delta", "alpha-again"] {
        assert_eq!(run.case(id)["status"], "pass", "{id}: {}", run.explain());
        assert_eq!(run.case(id)["request"]["model"], "served/model-1", "{id}");
    }
    assert_no_survivors(&f.tag);
}

/// Several models and no `request_model`: bad input (exit 2), every model listed, escaped.
#[test]
fn several_models_without_request_model_exit_2_listing_them() {
    let f = Fixture::new("several");
    let port = free_port();
    let server = attached_server(&f, &["--models", "first,second\u{1b}[2J"], port);
    let manifest = attach_manifest(&f, port, "");
    let run = run_attached(&f, &manifest, "out", &[]);
    stop(server);
    assert_eq!(run.code, 2, "{}", run.explain());
    assert!(run.stderr.contains("serves 2 models: first, second\\u{1b}[2J"), "{}", run.explain());
    assert!(run.stderr.contains("set `request_model`"), "{}", run.explain());
    assert!(!run.stderr.contains('\u{1b}'), "the server's text reaches the terminal escaped");
    assert_no_survivors(&f.tag);
}

/// mistral.rs lists a `default` entry beside the model it serves (0.8.1, checked on the real server): an alias
/// of its kind, so discovery takes the served model; without the kind the two ids are two models (exit 2 above).
#[test]
fn a_kinds_model_alias_is_no_second_model() {
    let f = Fixture::new("alias");
    let port = free_port();
    let server = attached_server(&f, &["--pose", "mistralrs", "--models", "default,served/model-1"], port);
    let manifest = attach_manifest(&f, port, "kind = \"mistralrs\"");
    let run = run_attached(&f, &manifest, "out", &[]);
    let plain = attach_manifest(&f, port, "");
    let without_kind = run_attached(&f, &plain, "plain", &[]);
    stop(server);
    assert_eq!(run.code, 0, "{}", run.explain());
    let record = run.record.as_ref().unwrap();
    assert_eq!(record["server"]["readiness"]["discovered_model"], "served/model-1", "{}", run.explain());
    assert_eq!(run.case("alpha")["request"]["model"], "served/model-1");
    assert_eq!(without_kind.code, 2, "{}", without_kind.explain());
    assert!(without_kind.stderr.contains("serves 2 models: default, served/model-1"), "{}", without_kind.explain());
    assert_no_survivors(&f.tag);
}

/// An answer waiting cannot change (404 for the model the profile names) ends readiness at once with the server's
/// message, instead of retrying for the whole load timeout.
#[test]
fn an_unknown_model_ends_readiness_at_once_with_the_servers_message() {
    let f = Fixture::new("unknown-model");
    let port = free_port();
    let server = attached_server(&f, &["--models", "right"], port);
    let manifest = attach_manifest(&f, port, "request_model = \"wrong\"\nload_timeout = \"50s\"");
    let started = std::time::Instant::now();
    let run = run_attached(&f, &manifest, "out", &[]);
    let took = started.elapsed();
    stop(server);
    assert_eq!(run.code, 1, "{}", run.explain());
    let never = run.findings("never-loaded");
    let message = never.first().and_then(|f| f["message"].as_str()).unwrap_or_default().to_owned();
    assert!(message.contains("HTTP 404") && message.contains("The model `wrong` does not exist."), "{message}");
    assert!(took < Duration::from_secs(25), "readiness waited {took:?} for an answer that cannot change");
    assert_no_survivors(&f.tag);
}

/// A request that times out, after which the server answers nothing: the hang is named on the case where it began
/// and the remaining cases are skipped, as after a crash, not timed out one by one.
#[test]
fn a_hang_is_named_on_its_case_and_the_rest_are_skipped() {
    let f = Fixture::new("hang")
        .fault(&["--fault", "hang-after", "--fault-on", "Say beta."])
        .profile("request_timeout = \"2s\"\nexpected_failures = []");
    let started = std::time::Instant::now();
    let run = f.run(&[]);
    let took = started.elapsed();
    assert_eq!(run.verdict(), "fail", "{}", run.explain());
    let hang = run.findings("hang");
    assert_eq!(hang.len(), 1, "{}", run.explain());
    assert_eq!(hang[0]["case"], "beta");
    assert!(hang[0]["message"].as_str().unwrap().contains("stopped answering"), "{}", run.explain());
    assert_eq!(run.findings("request-error").len(), 1, "one timeout, not one per remaining case: {}", run.explain());
    assert_eq!(run.case("alpha")["status"], "pass");
    for id in ["gamma", "delta"] {
        assert_eq!(run.case(id)["skip_reason"], "server stopped answering", "{id}: {}", run.explain());
    }
    // One request timeout (2 s) and one short probe (1 s), not three more timeouts.
    assert!(took < Duration::from_secs(20), "{took:?}");
}

/// The baseline against one engine, then another engine behind the same URL: the report and the terminal
/// summary name the server's change first (the engine, then each field, from → to), before the drift it explains;
/// text is compared token by token because the records show one vocabulary, and speed is not compared (#29).
#[test]
fn another_engine_behind_the_same_url_is_named_first() {
    let f = Fixture::new("engine-change");
    let port = free_port();
    let baseline = f.path().join("baseline.json");
    let server = attached_server(&f, &["--pose", "llama.cpp"], port);
    let manifest = attach_manifest(&f, port, "");
    let first = run_attached(&f, &manifest, "out-1", &["--write-baseline", baseline.to_str().unwrap()]);
    stop(server);
    assert_eq!(first.code, 0, "{}", first.explain());
    assert_eq!(first.record.as_ref().unwrap()["runtime"]["server"]["props"]["build_info"], "b6000-fake0001");

    // Another engine on the same port, answering two cases differently.
    let f2 =
        Fixture { answers: vec![("Say alpha.", answer("alpha, said vLLM")), ("Say beta.", answer("beta too"))], ..f };
    let server = attached_server(&f2, &["--pose", "vllm"], port);
    let second = run_attached(&f2, &manifest, "out-2", &["--baseline", baseline.to_str().unwrap()]);
    stop(server);
    let changed = second.findings("server-changed");
    let messages: Vec<&str> = changed.iter().filter_map(|c| c["message"].as_str()).collect();
    assert!(messages.iter().any(|m| m.contains("header: llama.cpp → uvicorn")), "{messages:?}");
    assert!(messages.iter().any(|m| m.contains("version: (none) →") && m.contains("0.17.1")), "{messages:?}");
    assert!(second.has_finding("text-drift"), "{}", second.explain());
    // Each run names the engine it took its server for, and the comparison is one across engines, said first: the
    // fake speaks one vocabulary whatever it poses as (a word's id is a hash of it), so the records show that both
    // tokenize alike and text is compared token by token; speed is not compared (neither is load time).
    assert_eq!(first.record.as_ref().unwrap()["runtime"]["server"]["engine"], "llama.cpp");
    assert_eq!(second.record.as_ref().unwrap()["runtime"]["server"]["engine"], "vllm");
    assert!(messages[0].starts_with("the engine changed since the baseline: llama.cpp → vllm;"), "{messages:?}");
    assert!(messages[0].contains("text is compared token by token: both tokenize alike ("), "{messages:?}");
    let drift = second.findings("text-drift");
    assert!(drift.iter().all(|d| d["message"].as_str().unwrap().contains(" at char ")), "{drift:?}");
    assert!(drift.iter().any(|d| d["message"].as_str().unwrap().contains(", token ")), "traced to a token: {drift:?}");
    let speed = second.findings("decode-not-compared");
    assert_eq!(speed.len(), 1, "{}", second.explain());
    assert!(
        speed[0]["message"].as_str().unwrap().starts_with("decode speed not compared across engines:"),
        "{speed:?}"
    );
    for never in ["slow-decode", "speed-unsettled", "slow-load"] {
        assert!(!second.has_finding(never), "{never} across engines: {}", second.explain());
    }
    // First in run.json, in the report and in the terminal summary.
    assert_eq!(second.record.as_ref().unwrap()["findings"][0]["kind"], "server-changed");
    let report = std::fs::read_to_string(second.out.join("report.md")).unwrap();
    let at = |s: &str| report.find(s).unwrap_or_else(|| panic!("`{s}` not in the report:\n{report}"));
    assert!(at("## Server changed") < at("text-drift"), "{report}");
    let (changed_line, drift_line) = (second.stdout.find("server-changed"), second.stdout.find("text-drift"));
    assert!(changed_line.is_some() && changed_line < drift_line, "{}", second.explain());
    assert_no_survivors(&f2.tag);
}

/// A server started through a kind's launch template, its binary overridden: the argv places the model, host,
/// port, parallel slots and context with llama.cpp's flags (and `--metrics`), and the identity names the kind.
#[test]
fn a_kind_template_starts_the_server() {
    let f = Fixture::new("kind").profile("parallel = 2\ncontext = 4096");
    let manifest = f.write();
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace("[servers.fake]\n", "[servers.fake]\nkind = \"llama.cpp\"\n")).unwrap();
    let out = f.path().join("out");
    let args = ["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let run = finish(gauntlet(&args, &[], Duration::from_secs(60)), &out);
    assert_no_survivors(&f.tag);
    assert_eq!(run.code, 0, "{}", run.explain());
    let record = run.record.as_ref().unwrap();
    let command: Vec<&str> =
        record["server"]["command"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    let model = f.path().join("models/tiny.gguf").display().to_string();
    let port = f.port.to_string();
    assert_eq!(
        command[1..12],
        ["-m", &model, "--host", "127.0.0.1", "--port", &port, "--metrics", "-np", "2", "-c", "4096"]
    );
    // The kind's metrics path is scraped without the profile saying so.
    assert_eq!(record["server_metrics"]["after"]["ok"], true, "{}", record["server_metrics"]);
    assert!(command[0].ends_with("bin/fake-server"), "{command:?}");
    let server = &record["identity"]["recipe"]["server"];
    assert_eq!(server["engine"], "llama.cpp");
    assert_eq!(server["parallel"], 2);
    assert_eq!(record["server"]["readiness"]["probe"], "health");
}

/// `gauntlet init --attach` asks a running server what it is, writes an attach profile with the guessed kind and
/// the model it serves, which `gauntlet check` accepts, and never overwrites a file.
#[test]
fn init_attach_writes_a_manifest_with_the_guessed_kind() {
    let f = Fixture::new("init-attach");
    let port = free_port();
    let server = attached_server(&f, &["--pose", "vllm", "--models", "served/m\"x"], port);
    let out = f.path().join("init.toml");
    let url = format!("http://127.0.0.1:{port}");
    let args = ["init", "--attach", &url, "--out", out.to_str().unwrap()];
    let first = gauntlet(&args, &[], Duration::from_secs(30));
    let again = gauntlet(&args, &[], Duration::from_secs(30));
    stop(server);
    assert_eq!(first.status.code(), Some(0), "{}", String::from_utf8_lossy(&first.stderr));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("kind = \"vllm\""), "{text}");
    assert!(text.contains("request_model = \"served/m\\\"x\""), "{text}");
    assert!(text.contains(&format!("base_url = \"{url}\"")), "{text}");
    let check = gauntlet(&["check", "--manifest", out.to_str().unwrap()], &[], Duration::from_secs(30));
    assert_eq!(check.status.code(), Some(0), "{}{text}", String::from_utf8_lossy(&check.stdout));
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("never overwrites"));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), text, "the first file is untouched");
    assert_no_survivors(&f.tag);
}

/// `gauntlet init --spawn KIND --model PATH` writes a manifest that starts that engine (from PATH) on the model;
/// `gauntlet check` accepts it and shows the kind's argv. An unknown kind is bad input.
#[test]
fn init_spawn_writes_a_manifest_that_starts_the_kind() {
    let f = Fixture::new("init-spawn");
    f.write();
    let bin = f.path().join("path-bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink(workspace_bin("gauntlet-fake-server"), bin.join("llama-server")).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let model = f.path().join("models/tiny.gguf");
    let out = f.path().join("spawn.toml");
    let args = ["init", "--spawn", "llama.cpp", "--model", model.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let made = gauntlet(&args, &[("PATH", &path)], Duration::from_secs(30));
    assert_eq!(made.status.code(), Some(0), "{}", String::from_utf8_lossy(&made.stderr));
    let check = gauntlet(&["check", "--manifest", out.to_str().unwrap()], &[("PATH", &path)], Duration::from_secs(30));
    let said = String::from_utf8_lossy(&check.stdout);
    assert_eq!(check.status.code(), Some(0), "{said}");
    // The kind's bare program is resolved once, on the server's PATH: `check` shows the one that runs (#32 D15).
    assert!(
        said.contains(&format!(
            "spawns {} -m {} --host 127.0.0.1 --port 18490",
            bin.join("llama-server").display(),
            model.display()
        )),
        "{said}"
    );
    let bad = f.path().join("bad.toml");
    let args = ["init", "--spawn", "vlm", "--model", model.to_str().unwrap(), "--out", bad.to_str().unwrap()];
    let refused = gauntlet(&args, &[], Duration::from_secs(30));
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("unknown kind `vlm`"));
    assert!(!bad.exists());
}

/// D15: a kind's program found on a PATH. The server's `environment` sets PATH to B while gauntlet's own PATH
/// finds another program of the same name first (A): one resolution, on the PATH the server is spawned with,
/// decides the program that runs, the one the identity hashes, and the argv the record shows.
#[test]
fn a_kinds_program_is_resolved_once_on_the_path_the_server_gets() {
    let f = Fixture::new("kind-path");
    let manifest = f.write();
    let mut scripts = Vec::new();
    for which in ["A", "B"] {
        let dir = f.path().join(format!("path{which}"));
        std::fs::create_dir_all(&dir).unwrap();
        let script = dir.join("llama-server");
        let fake = workspace_bin("gauntlet-fake-server");
        std::fs::write(&script, format!("#!/bin/sh\necho \"I AM {which}\"\nexec {} \"$@\"\n", fake.display())).unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        scripts.push((dir, script));
    }
    let (a, b) = (&scripts[0], &scripts[1]);
    let text = std::fs::read_to_string(&manifest).unwrap().replace(
        "[servers.fake]\nbinary = \"bin/fake-server\"\n",
        &format!(
            "[servers.fake]\nkind = \"llama.cpp\"\nenvironment = {{ PATH = \"{}:/usr/bin:/bin\" }}\n",
            b.0.display()
        ),
    );
    assert!(text.contains("kind = \"llama.cpp\""), "{text}");
    std::fs::write(&manifest, text).unwrap();
    let out = f.path().join("out");
    let path = format!("{}:{}", a.0.display(), std::env::var("PATH").unwrap_or_default());
    let args = ["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let run = finish(gauntlet(&args, &[("PATH", &path)], Duration::from_secs(60)), &out);
    assert_no_survivors(&f.tag);
    assert_eq!(run.code, 0, "{}", run.explain());
    let log = std::fs::read_to_string(out.join("server.log")).unwrap();
    assert!(log.starts_with("I AM B"), "{log}");
    let record = run.record.as_ref().unwrap();
    assert_eq!(record["server"]["command"][0], b.1.display().to_string(), "{}", record["server"]);
    let want = gauntlet_engine::util::sha256_hex(&std::fs::read(&b.1).unwrap());
    assert_eq!(record["identity"]["build"]["binary_sha256"], want, "{}", record["identity"]);
}
