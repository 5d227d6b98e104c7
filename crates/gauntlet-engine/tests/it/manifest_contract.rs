//! Issue 33 item 3: one manifest contract. The serde structs of `manifest::contract` are the manifest's shape; the
//! reader takes each table's keys from them, the committed JSON Schema is generated from them (this test fails
//! when `schema/manifest.schema.json` is stale; `GAUNTLET_BLESS=1` writes it again), and every manifest the reader
//! accepts has their shape.

use std::path::{Path, PathBuf};

use gauntlet_engine::manifest::{self, Manifest, ManifestFile};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn the_committed_schema_is_generated_from_the_structs() {
    let path = repo().join("schema/manifest.schema.json");
    let generated = manifest::schema_text();
    if std::env::var_os("GAUNTLET_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &generated).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        committed == generated,
        "{} is stale: regenerate it with `GAUNTLET_BLESS=1 cargo test -p gauntlet-engine --test it \
         manifest_contract::` and commit the result",
        path.display()
    );
}

/// The schema says what the reader's tables hold: the top level, a profile, a server and the stage timeouts
/// refuse other keys, and the stage timeouts are the stages.
#[test]
fn the_schema_closes_every_table() {
    let schema = manifest::schema();
    assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(schema["additionalProperties"], false);
    let defs = schema["$defs"].as_object().expect("$defs");
    for (name, def) in defs {
        if def.get("properties").is_some() {
            assert_eq!(def["additionalProperties"], false, "$defs/{name} takes unknown keys");
        }
    }
    let stages: Vec<&str> = defs["Timeouts"]["properties"].as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(stages, manifest::Stage::ALL.iter().map(|s| s.as_str()).collect::<Vec<_>>());
    // No `null` anywhere: TOML has none, and an optional key is one that is not required.
    let text = manifest::schema_text();
    assert!(!text.contains("\"null\""), "the schema admits null");
}

fn manifests() -> Vec<(String, String)> {
    let mut out = vec![("embedded default".to_owned(), Manifest::embedded_default_text().to_owned())];
    for dir in ["examples", "crates/gauntlet-engine/tests/it/fixtures", "crates/gauntlet/tests/it/fixtures"] {
        let Ok(entries) = std::fs::read_dir(repo().join(dir)) else { continue };
        let mut files: Vec<PathBuf> = entries
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .filter(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains("[profiles")))
            .collect();
        files.sort();
        out.extend(files.into_iter().map(|p| (p.display().to_string(), std::fs::read_to_string(&p).unwrap())));
    }
    out
}

/// Every manifest the reader accepts has the structs' shape: the structs are neither looser nor stricter about
/// keys and types than the reader.
#[test]
fn every_manifest_the_reader_accepts_has_the_structs_shape() {
    let mut accepted = 0;
    for (name, text) in manifests() {
        if Manifest::parse(&text, &name, Path::new("/nonexistent")).is_err() {
            continue;
        }
        accepted += 1;
        if let Err(e) = toml::from_str::<ManifestFile>(&text) {
            panic!("{name}: the reader accepts it but the contract does not: {e}");
        }
    }
    assert!(accepted >= 3, "only {accepted} manifests read");
}

/// Tables built from every table type, each key with a value of the right type: the reader accepts the shape (a
/// refusal, if any, is for a missing file or a cross-reference, never an unknown key or a type).
#[test]
fn a_manifest_with_every_table_reads_and_deserializes() {
    let text = r#"
version = 1
root = "."
default_profile = "p"
store = "store"
[models.m]
path = "m.gguf"
sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
[models.h]
hub = "org/name"
revision = "0123456789abcdef"
[servers.s]
binary = "bin/server"
model_flag = "-m"
host_flag = "--host"
port_flag = "--port"
draft_flag = "-md"
health_path = "/health"
environment = { A = "1" }
secret_environment = ["A"]
[servers.s.build]
command = [["make", "-j2"], ["true"]]
dir = "build"
source = "src"
timeout = "10m"
environment = { CC = "cc" }
[servers.k]
kind = "vllm"
[features.spec]
flags = ["--spec"]
[plan]
shared = ["src/"]
profiles = { p = ["models/"] }
[profiles.p]
model = "m"
server = "s"
host = "127.0.0.1"
port = 8080
server_arguments = ["--spec", "--threads", "2"]
features = ["spec"]
request_model = "m"
load_timeout = "1m"
request_timeout = "30s"
suite_budget = "5m"
stop_grace = "10s"
device = "cpu"
runner = ["ubuntu-latest"]
dialect = "llama.cpp"
metrics = "/metrics"
extra_body = { top_k = 1 }
[profiles.p.verdict]
min_pass_rate = 0.9
fail_regressions = 1
decode_ratio_warn = 0.8
load_ratio_warn = 2
draft_acceptance_ratio_warn = 0.5
[profiles.p.bench]
concurrency = [1, 2]
max_tokens = 16
warmups = 0
samples = 3
rate = 2.5
seed = 7
paired = "alternate"
decide = ["decode"]
slo = { ttft = "500ms" }
response_format = { type = "json_schema", json_schema = { name = "city", strict = true, schema = { type = "object", required = ["city"], properties = { city = { type = "string" } } } } }
[profiles.p.qualify]
max_concurrency = 4
source = "."
quality = { count = 5, floor = 0.5, seed = 2, max_tokens = 64 }
saturation = { concurrency = [1, 2], samples = 2 }
performance = { max_tokens = 16 }
monitor = { interval = "1s", window = 3, max_rss_growth_mib = 10, max_health_latency_growth = 2, max_gpu_memory_growth_mib = 5 }
timeouts = { R0 = "1m", R7 = "2m" }
[profiles.a]
base_url = "https://example.invalid/v1"
api_key_env = "API_KEY"
headers_env = { "X-Org" = "ORG" }
kind = "vllm"
[profiles.a.bench.workload]
conversations = 2
turns = 2
user_words = 4
"#;
    let contract: ManifestFile = toml::from_str(text).unwrap_or_else(|e| panic!("the contract refuses it: {e}"));
    assert_eq!(contract.profiles.len(), 2);
    let problems = match Manifest::parse(text, "all.toml", Path::new("/nonexistent")) {
        Ok(_) => Vec::new(),
        Err(e) => e.problems,
    };
    for problem in &problems {
        assert!(
            !problem.contains("unknown key") && !problem.contains("expected"),
            "the reader refuses the contract's shape: {problem}"
        );
    }
    let schema = manifest::schema();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let json = serde_json::to_value(toml::from_str::<toml::Value>(text).unwrap()).unwrap();
    let errors: Vec<String> = validator.iter_errors(&json).map(|e| format!("{e} at {}", e.instance_path)).collect();
    assert!(errors.is_empty(), "the schema refuses it: {errors:?}");
}

/// An unknown key deep in the manifest is named by its full path, with the key it most likely misspells.
#[test]
fn an_unknown_key_is_named_by_its_path_with_a_suggestion() {
    let text = "version = 1\n[profiles.default]\nbase_url = \"http://127.0.0.1:8000\"\n\
                [profiles.default.bench.workload]\ntrace = \"t.jsonl\"\nformat = \"mooncake\"\nsped = 2\n\
                [profiles.default.qualify.monitor]\nwindwo = 3\n[profiles.default.qualify.timeouts]\nR8 = \"1m\"\n";
    let problems = Manifest::parse(text, "t.toml", Path::new("/nonexistent")).unwrap_err().problems;
    for expected in [
        "profiles.default.bench.workload.sped: unknown key; did you mean `speed`?",
        "profiles.default.qualify.monitor.windwo: unknown key; did you mean `window`?",
        "profiles.default.qualify.timeouts.R8: unknown key",
    ] {
        assert!(problems.iter().any(|p| p.starts_with(expected)), "no `{expected}` in {problems:?}");
    }
    // The structs refuse it too (serde names the table, the reader names the key).
    assert!(toml::from_str::<ManifestFile>(text).is_err());
}

#[test]
fn the_schema_bounds_are_the_readers() {
    // A bound the schema states is the one the reader enforces: the port, a bench level, the build command.
    let schema = manifest::schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for (bad, key) in [
        ("[profiles.p]\nmodel = \"m\"\nserver = \"s\"\nport = 65536\n", "port"),
        ("[profiles.p]\nbase_url = \"http://x\"\n[profiles.p.bench]\nconcurrency = [0]\n", "concurrency"),
        ("[profiles.p]\nbase_url = \"http://x\"\n[profiles.p.bench]\ndecide = [\"speed\"]\n", "decide"),
        ("[profiles.p]\nbase_url = \"http://x\"\nextra_body = { messages = [] }\n", "extra_body"),
        ("[profiles.p]\nbase_url = \"http://x\"\nparallel = 2\n", "parallel"),
        (
            "[servers.s]\nbinary = \"b\"\n[servers.s.build]\ndir = \"d\"\ncommand = []\n[profiles.p]\nbase_url = \"http://x\"\n",
            "command",
        ),
    ] {
        let text = format!("version = 1\n{bad}");
        let json = serde_json::to_value(toml::from_str::<toml::Value>(&text).unwrap()).unwrap();
        assert!(!validator.is_valid(&json), "the schema accepts {key}:\n{text}");
        let problems = Manifest::parse(&text, "b.toml", Path::new("/nonexistent")).unwrap_err().problems;
        assert!(problems.iter().any(|p| p.contains(key)), "the reader does not name {key}: {problems:?}");
    }
}
