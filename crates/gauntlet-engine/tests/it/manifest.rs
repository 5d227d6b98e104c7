//! Manifest validation: every problem is reported with its key path, before anything starts. The full error
//! texts are snapshots, so a change in wording is a reviewed change.

use std::path::Path;

use gauntlet_engine::manifest::{Manifest, Target};

const ROOT: &str = "/nonexistent/gauntlet-root";

fn errors(text: &str) -> String {
    match Manifest::parse(text, "test.toml", Path::new(ROOT)) {
        Ok(_) => panic!("expected the manifest to be refused"),
        Err(e) => e.to_string(),
    }
}

const HEADER: &str = r#"
version = 1
[models.m]
path = "models/m.gguf"
[servers.s]
binary = "bin/server"
"#;

#[test]
fn wrong_types_are_refused_not_coerced() {
    let text = format!(
        r#"{HEADER}
[profiles.p]
model = "m"
server = "s"
port = true
load_timeout = 30
request_timeout = "soon"
server_arguments = ["-c", 4096]
verdict = {{ min_pass_rate = "0.5", fail_regressions = 1.5, decode_ratio_warn = 2 }}
[profiles.q]
model = "m"
server = "s"
port = "8080"
[profiles.r]
model = "m"
server = "s"
port = 70000
"#
    );
    insta::assert_snapshot!(errors(&text));
}

#[test]
fn reserved_flags_and_joined_values_are_refused() {
    let text = format!(
        r#"{HEADER}
[profiles.p]
model = "m"
server = "s"
port = 8080
server_arguments = ["--port", "9000", "-c", "4096", "--threads=4", "--host", "0.0.0.0", "-m", "other.gguf"]
"#
    );
    insta::assert_snapshot!(errors(&text));
}

#[test]
fn paths_stay_inside_the_root_and_hashes_are_hex() {
    let text = r#"
version = 1
[models.up]
path = "../outside.gguf"
sha256 = "B179C9523D0E6A0F98A330C7562B682750A6F8C8C15E5BC70EA373728110DB53"
[models.abs]
path = "/etc/passwd"
sha256 = "abc"
[models.sneaky]
path = "models/../../x.gguf"
[servers.s]
binary = "bin/../../../usr/bin/python3"
[profiles.p]
model = "up"
server = "s"
port = 8080
"#;
    insta::assert_snapshot!(errors(text));
}

#[test]
fn options_that_mean_nothing_alone_are_refused() {
    let text = format!(
        r#"{HEADER}
[profiles.attached]
base_url = "http://10.0.0.5:8000/serving"
port = 8000
server_arguments = ["-c", "1"]
[profiles.spawned]
model = "m"
server = "s"
port = 8080
api_key_env = "KEY"
[profiles.ftp]
base_url = "ftp://example"
[profiles.missing]
model = "nope"
server = "also-nope"
expected_failures = ["multiply", "no-such-case"]
"#
    );
    insta::assert_snapshot!(errors(&text));
}

#[test]
fn version_is_required_and_newer_versions_are_refused() {
    insta::assert_snapshot!(errors("[profiles.p]\nbase_url = \"http://127.0.0.1:1\"\n"), @r"
    invalid manifest `test.toml`:
      - version: required (this gauntlet reads version 1)
    ");
    insta::assert_snapshot!(errors("version = 2\n[profiles.p]\nbase_url = \"http://127.0.0.1:1\"\n"), @r"
    invalid manifest `test.toml`:
      - version: manifest version 2 is newer than this gauntlet reads (1)
    ");
    insta::assert_snapshot!(errors("version = 1\n"), @r"
    invalid manifest `test.toml`:
      - profiles: required: at least one profile
    ");
    let e = errors("version = 1\n[profiles\n");
    assert!(e.contains("TOML parse error"), "{e}");
}

#[test]
fn unknown_keys_are_errors_with_their_path_and_the_likely_key() {
    insta::assert_snapshot!(errors(
        "version = 1\ncolour = 1\n[profiles.p]\nbase_url = \"http://127.0.0.1:1\"\nlaod_timeout = \"1s\"\n[profiles.p.verdict]\nmin_pass = 1\n",
    ), @r"
    invalid manifest `test.toml`:
      - colour: unknown key (known here: version, root, default_profile, store, models, servers, features, plan, profiles)
      - profiles.p.laod_timeout: unknown key; did you mean `load_timeout`?
      - profiles.p.verdict.min_pass: unknown key; did you mean `min_pass_rate`?
    ");
}

#[test]
fn missing_files_are_reported_for_the_selected_profile_only() {
    let text = format!(
        "{HEADER}\n[profiles.local]\nmodel = \"m\"\nserver = \"s\"\nport = 8080\n[profiles.remote]\nbase_url = \"http://127.0.0.1:8000/\"\n"
    );
    let m = Manifest::parse(&text, "test.toml", Path::new(ROOT)).unwrap();
    let remote = m.select(Some("remote")).unwrap();
    match &remote.target {
        Target::Attach(a) => assert_eq!(a.base_url, "http://127.0.0.1:8000"),
        Target::Spawn(_) => panic!("remote attaches"),
    }
    insta::assert_snapshot!(m.select(Some("local")).unwrap_err().to_string(), @r"
    invalid manifest `test.toml`:
      - models.m.path: model file `/nonexistent/gauntlet-root/models/m.gguf` does not exist
      - servers.s.binary: server binary `/nonexistent/gauntlet-root/bin/server` does not exist
    ");
    let e = m.select(None).unwrap_err().to_string();
    assert!(e.contains("several profiles (local, remote); choose one with --profile"), "{e}");
    let e = m.select(Some("nope")).unwrap_err().to_string();
    assert!(e.contains("no profile `nope`"), "{e}");
}

#[test]
fn spawn_command_is_binary_model_host_port_then_arguments_in_order() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("bin")).unwrap();
    std::fs::create_dir_all(dir.path().join("models")).unwrap();
    std::fs::write(dir.path().join("models/m.gguf"), b"x").unwrap();
    let bin = dir.path().join("bin/server");
    std::fs::write(&bin, "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let text = format!(
        "{HEADER}\n[profiles.p]\nmodel = \"m\"\nserver = \"s\"\nport = 8080\nserver_arguments = [\"-c\", \"4096\", \"-t\", \"2\"]\n"
    );
    let m = Manifest::parse(&text, "test.toml", dir.path()).unwrap();
    let p = m.select(None).unwrap();
    let Target::Spawn(s) = &p.target else { panic!("spawns") };
    let root = dir.path().display().to_string();
    assert_eq!(
        s.command(),
        vec![
            format!("{root}/bin/server"),
            "-m".into(),
            format!("{root}/models/m.gguf"),
            "--host".into(),
            "127.0.0.1".into(),
            "--port".into(),
            "8080".into(),
            "-c".into(),
            "4096".into(),
            "-t".into(),
            "2".into(),
        ]
    );
    assert_eq!(s.base_url(), "http://127.0.0.1:8080");
    assert_eq!(p.suite.cases.len(), 16, "the default suite when none is named");
    assert_eq!(p.load_timeout.as_secs(), 480, "DESIGN §4 default caps");
    assert_eq!(p.request_timeout.as_secs(), 120);
    assert_eq!(p.suite_budget.as_secs(), 300);
}

#[test]
fn embedded_default_is_valid_and_names_its_servers() {
    let m = Manifest::embedded_default(Path::new(ROOT)).unwrap();
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);
    assert_eq!(m.profiles.keys().collect::<Vec<_>>(), vec!["default", "mistralrs", "native", "transformers", "vllm"]);
    assert_eq!(m.default_profile.as_deref(), Some("default"));
}

/// Server kinds and model forms are checked before anything starts: an unknown kind (with the likely one), a
/// template with an unknown placeholder, a template for a server without a kind, explicit flags beside a kind, a
/// hub model without a pinned revision, a model form the kind cannot start, and parallel slots a kind cannot set.
#[test]
fn kinds_and_model_forms_are_checked() {
    let text = r#"
version = 1
[models.hub]
hub = "org/model"
[models.file]
path = "models/m.gguf"
[models.pinned]
hub = "org/model"
revision = "0123456789abcdef"
[servers.typo]
kind = "vlm"
binary = "bin/x"
[servers.bad-template]
kind = "vllm"
binary = "bin/x"
launch = ["serve", "{modle}", "--port", "{port}"]
[servers.no-kind]
binary = "bin/x"
launch = ["{model}", "--port", "{port}"]
[servers.flags]
kind = "tgi"
binary = "bin/x"
port_flag = "-p"
[servers.vllm]
kind = "vllm"
binary = "bin/x"
[servers.llama]
kind = "llama.cpp"
binary = "bin/x"
[profiles.a]
model = "pinned"
server = "llama"
port = 8000
[profiles.b]
model = "pinned"
server = "vllm"
port = 8000
parallel = 4
context = 8192
[profiles.c]
model = "file"
server = "no-kind"
port = 8000
parallel = 2
"#;
    let e = errors(text);
    for want in [
        "models.hub.revision: required",
        "servers.typo.kind: unknown kind `vlm`; did you mean `vllm`?",
        "unknown placeholder `{modle}`",
        "servers.no-kind.launch: needs a `kind`",
        "servers.flags.port_flag: is set by the kind's launch template",
        "profiles.a.model: server kind `llama.cpp` starts a file model, not a hub id",
        "profiles.c.parallel: needs a server `kind`",
    ] {
        assert!(e.contains(want), "missing `{want}` in:\n{e}");
    }
    assert!(!e.contains("profiles.b"), "a vLLM profile with a pinned hub model is fine:\n{e}");
}

/// A kind's template places the model, host, port, slots, context and the pinned revision; the hub model is asked
/// for under its id and learned from `/v1/models` when the kind checks names.
#[test]
fn a_kind_profile_builds_its_command() {
    let text = r#"
version = 1
[models.pinned]
hub = "org/model"
revision = "0123456789abcdef"
[servers.vllm]
kind = "vllm"
binary = "bin/vllm"
[profiles.p]
model = "pinned"
server = "vllm"
port = 8000
parallel = 4
context = 8192
server_arguments = ["--dtype", "half"]
"#;
    let m = Manifest::parse(text, "test.toml", Path::new(ROOT)).unwrap();
    let p = m.select_unchecked(Some("p")).unwrap();
    let Target::Spawn(s) = &p.target else { panic!("spawns") };
    assert_eq!(
        s.command()[1..].join(" "),
        "-m vllm.entrypoints.openai.api_server --model org/model --host 127.0.0.1 --port 8000 --max-num-seqs 4 \
         --max-model-len 8192 --revision \
         0123456789abcdef --dtype half"
    );
    assert_eq!(p.request_model, "org/model");
    assert!(p.discover_model);
    // The kind sets the wire dialect; a profile may still name another; no kind speaks llama.cpp's.
    assert_eq!(p.dialect, "vllm");
    let named = text.replace("port = 8000\n", "port = 8000\ndialect = \"sglang\"\n");
    assert_eq!(
        Manifest::parse(&named, "t.toml", Path::new(ROOT)).unwrap().select_unchecked(Some("p")).unwrap().dialect,
        "sglang"
    );
    let attached = "version = 1\n[profiles.o]\nbase_url = \"http://127.0.0.1:11434\"\nkind = \"ollama\"\n\
                    [profiles.plain]\nbase_url = \"http://127.0.0.1:8080\"\n";
    let m = Manifest::parse(attached, "t.toml", Path::new(ROOT)).unwrap();
    assert_eq!(m.select_unchecked(Some("o")).unwrap().dialect, "ollama");
    assert_eq!(m.select_unchecked(Some("plain")).unwrap().dialect, "llama.cpp");
    let mut bad = text.replace("[\"--dtype\", \"half\"]", "[\"--max-model-len\", \"1\"]");
    bad = bad.replace("parallel = 4\ncontext = 8192\n", "");
    assert!(errors(&bad).contains("`--max-model-len`"), "a template's flag is the profile's to set");
}

/// `transformers serve` refuses any model name but its launch argument and lists none: a started one is asked
/// for that argument (no discovery), an attached one must name it; its streams end at the body's end (kind data),
/// every other kind's with `[DONE]`.
#[test]
fn a_transformers_profile_names_its_launch_argument_and_ends_streams_at_close() {
    use gauntlet_engine::kinds::StreamEnd;
    let text = r#"
version = 1
[models.dir]
path = "models/m.hf"
[servers.t]
kind = "transformers"
binary = "bin/transformers"
[profiles.p]
model = "dir"
server = "t"
port = 8000
"#;
    let m = Manifest::parse(text, "test.toml", Path::new(ROOT)).unwrap();
    let p = m.select_unchecked(Some("p")).unwrap();
    let Target::Spawn(s) = &p.target else { panic!("spawns") };
    let model = Path::new(ROOT).join("models/m.hf").display().to_string();
    assert_eq!(s.command()[1..].join(" "), format!("serve --host 127.0.0.1 --port 8000 {model}"));
    assert_eq!((p.request_model.as_str(), p.discover_model), (model.as_str(), false));
    assert_eq!((p.dialect.as_str(), p.stream_end), ("transformers", StreamEnd::FinishThenClose));
    let attached = "version = 1\n[profiles.o]\nbase_url = \"http://127.0.0.1:8000\"\nkind = \"transformers\"\n";
    assert!(
        errors(attached).contains("profiles.o.request_model: required for kind `transformers`"),
        "{}",
        errors(attached)
    );
    let named = attached.replace("kind =", "request_model = \"/m\"\nkind =");
    let m = Manifest::parse(&named, "t.toml", Path::new(ROOT)).unwrap();
    let o = m.select_unchecked(Some("o")).unwrap();
    assert_eq!((o.request_model.as_str(), o.discover_model, o.stream_end), ("/m", false, StreamEnd::FinishThenClose));
    let vllm = "version = 1\n[profiles.v]\nbase_url = \"http://127.0.0.1:8000\"\nkind = \"vllm\"\n";
    let m = Manifest::parse(vllm, "t.toml", Path::new(ROOT)).unwrap();
    assert_eq!(m.select_unchecked(Some("v")).unwrap().stream_end, StreamEnd::DoneLine);
}

#[test]
fn a_paired_bench_decides_on_the_metrics_the_profile_names() {
    let profile = |decide: &str| {
        format!("{HEADER}\n[profiles.p]\nmodel = \"m\"\nserver = \"s\"\nport = 8080\n[profiles.p.bench]\n{decide}\n")
    };
    let m = Manifest::parse(&profile("decide = [\"e2el\", \"ttft\"]"), "test.toml", Path::new(ROOT)).unwrap();
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);
    assert_eq!(m.profiles["p"].bench_decide, Some(vec!["e2el".to_owned(), "ttft".to_owned()]));
    let m = Manifest::parse(&profile(""), "test.toml", Path::new(ROOT)).unwrap();
    assert_eq!(m.profiles["p"].bench_decide, None, "absent: the default");
    for (decide, why) in [
        (
            "decide = []",
            "profiles.p.bench.decide: an empty list decides nothing: expected some of decode, ttft, itl, e2el",
        ),
        (
            "decide = [\"decode\", \"speed\"]",
            "profiles.p.bench.decide: \"speed\": expected some of decode, ttft, itl, e2el",
        ),
        ("decide = [\"e2el\", \"e2el\"]", "profiles.p.bench.decide: \"e2el\" is named twice"),
        ("decide = \"e2el\"", "profiles.p.bench.decide: expected an array of strings"),
        ("decide = [\"e2el\\u001b[31m\"]", "profiles.p.bench.decide: \"e2el\\u{1b}[31m\": expected"),
    ] {
        let e = errors(&profile(decide));
        assert!(e.contains(why), "{decide}: {e}");
    }
}

/// `draft` (#31): a `[models]` file passed with the server's draft flag after the profile's arguments, then its
/// settings; refused where gauntlet could not pass or hash it.
#[test]
fn a_draft_is_passed_by_the_servers_flag_and_refused_where_it_cannot_be() {
    let text = r#"
version = 1
[models.m]
path = "models/m.gguf"
[models.d]
path = "models/d.gguf"
[servers.s]
binary = "bin/server"
draft_flag = "-md"
[profiles.ar]
model = "m"
server = "s"
port = 8080
server_arguments = ["-c", "2048"]
[profiles.spec]
model = "m"
server = "s"
port = 8080
server_arguments = ["-c", "2048"]
draft = "d"
draft_arguments = ["--spec-type", "draft-simple"]
lossless_against = "ar"
"#;
    let m = Manifest::parse(text, "test.toml", Path::new(ROOT)).unwrap();
    let spec = &m.profiles["spec"];
    assert_eq!(spec.lossless_against.as_deref(), Some("ar"));
    let Target::Spawn(s) = &spec.target else { panic!("spawned") };
    let argv = s.command();
    let tail: Vec<&str> = argv[argv.len() - 4..].iter().map(String::as_str).collect();
    assert_eq!(tail, ["-md", &format!("{ROOT}/models/d.gguf"), "--spec-type", "draft-simple"]);
    let Target::Spawn(a) = &m.profiles["ar"].target else { panic!("spawned") };
    assert!(a.draft.is_none() && !a.command().contains(&"-md".to_owned()));

    // The draft flag in server_arguments, settings without a draft, an unknown reference, a server with no way
    // to pass a draft, a kind that takes none by flag, and a profile checked against itself: each refused.
    let bad = r#"
version = 1
[models.m]
path = "models/m.gguf"
[models.d]
path = "models/d.gguf"
[servers.s]
binary = "bin/server"
draft_flag = "-md"
[servers.plain]
binary = "bin/server"
[servers.v]
kind = "vllm"
binary = "bin/python"
[profiles.a]
model = "m"
server = "s"
port = 8080
server_arguments = ["-md", "other.gguf"]
draft = "d"
[profiles.b]
model = "m"
server = "s"
port = 8080
draft_arguments = ["--spec-type", "draft-simple"]
lossless_against = "nowhere"
[profiles.c]
model = "m"
server = "plain"
port = 8080
draft = "d"
lossless_against = "c"
[profiles.e]
model = "m"
server = "v"
port = 8080
draft = "missing"
[profiles.f]
model = "m"
server = "v"
port = 8080
draft = "d"
"#;
    let e = errors(bad);
    for want in [
        "profiles.a.server_arguments[0]: `-md` is the profile's `draft`",
        "profiles.b.draft_arguments: needs `draft`",
        "profiles.b.lossless_against: `nowhere` is not defined under [profiles]",
        "profiles.c.draft: the server has no kind and no `draft_flag`",
        "profiles.c.lossless_against: names this profile itself",
        "profiles.e.draft: `missing` is not defined under [models]",
        "profiles.f.draft: kind `vllm` takes no draft file by flag",
    ] {
        assert!(e.contains(want), "missing {want:?} in:\n{e}");
    }
}
