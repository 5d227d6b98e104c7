//! The published JSON Schema of the manifest agrees with what gauntlet accepts: the embedded default and every
//! example validate against it, and the loader accepts every key the schema names without an unknown-key warning.

use std::path::Path;

use gauntlet_engine::manifest::Manifest;
use serde_json::Value;

fn schema() -> Value {
    serde_json::from_str(include_str!("../../../../schema/manifest.schema.json")).unwrap()
}

fn as_json(toml_text: &str) -> Value {
    let v: toml::Value = toml::from_str(toml_text).unwrap();
    serde_json::to_value(v).unwrap()
}

fn validate(name: &str, text: &str) {
    let validator = jsonschema::validator_for(&schema()).expect("schema compiles");
    let errors: Vec<String> =
        validator.iter_errors(&as_json(text)).map(|e| format!("{} at {}", e, e.instance_path)).collect();
    assert!(errors.is_empty(), "{name} does not validate:\n{}", errors.join("\n"));
}

fn examples() -> Vec<(String, String)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .map(|p| (p.display().to_string(), std::fs::read_to_string(&p).unwrap()))
        .collect();
    out.sort();
    assert!(out.len() >= 2, "examples/ holds the documented manifests");
    out
}

#[test]
fn embedded_default_and_examples_validate() {
    validate("embedded default", Manifest::embedded_default_text());
    for (name, text) in examples() {
        validate(&name, &text);
    }
}

#[test]
fn loader_knows_every_key_the_examples_use() {
    for (name, text) in examples() {
        let m = Manifest::parse(&text, &name, Path::new("/nonexistent")).unwrap_or_else(|e| panic!("{e}"));
        assert!(m.warnings.is_empty(), "{name}: {:?}", m.warnings);
    }
}

#[test]
fn schema_rejects_what_the_loader_rejects() {
    let validator = jsonschema::validator_for(&schema()).unwrap();
    for bad in [
        "version = 1\n[profiles.p]\nmodel = \"m\"\nserver = \"s\"\nport = \"8080\"\n",
        "version = 1\n[profiles.p]\nmodel = \"m\"\nserver = \"s\"\nport = 8080\nserver_arguments = [\"--threads=4\"]\n",
        "version = 1\n[profiles.p]\nbase_url = \"http://x\"\nport = 1\n",
        "version = 2\n[profiles.p]\nbase_url = \"http://x\"\n",
        "version = 1\n[models.m]\npath = \"/abs\"\n[profiles.p]\nbase_url = \"http://x\"\n",
        "version = 1\n[profiles.p]\nbase_url = \"http://x\"\nload_timeout = 30\n",
    ] {
        assert!(!validator.is_valid(&as_json(bad)), "schema accepted:\n{bad}");
        let loader = Manifest::parse(bad, "bad.toml", Path::new("/nonexistent"));
        assert!(loader.is_err(), "loader accepted:\n{bad}");
    }
}

#[test]
fn every_profile_key_in_the_schema_is_known_to_the_loader() {
    let schema = schema();
    let keys: Vec<&String> = schema["$defs"]["Profile"]["properties"].as_object().unwrap().keys().collect();
    for key in keys {
        let text = format!("version = 1\n[profiles.p]\nbase_url = \"http://x\"\n{key} = 1\n");
        // Refused for its value or for meaning nothing here is fine; refused as unknown is not.
        let problems = match Manifest::parse(&text, "k.toml", Path::new("/nonexistent")) {
            Ok(m) => m.warnings,
            Err(e) => e.problems,
        };
        assert!(!problems.iter().any(|w| w.contains("unknown key")), "loader does not know `{key}`: {problems:?}");
    }
}

/// The run records from the H200 validation (docs/validation/h200-2026-12-01) stay readable, and say what the
/// closing note of the sentry issue quotes: the GPU identity, a clean bracket, the server's GPU use, and the
/// warning when the GPU was hidden from the server.
#[test]
fn h200_validation_records_read_and_say_what_they_claim() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/validation/h200-2026-12-01");
    let read = |name: &str| {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        let record = gauntlet_schema::parse_run_record(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        (record, serde_json::from_str::<Value>(&text).unwrap())
    };
    for name in ["run1.json", "run2.json"] {
        let (record, raw) = read(name);
        let sentry = record.sentry.as_ref().unwrap();
        assert_eq!(sentry.kernel_log, "clean", "{name}");
        assert_eq!(sentry.pre_run_records, 359, "{name}: the boot log is pre-run state");
        assert!(sentry.server_gpu_memory_bytes.is_some_and(|b| b > 100 << 20), "{name}");
        assert_eq!(raw["runtime"]["gpu"]["name"], "NVIDIA H200");
        assert_eq!(raw["runtime"]["gpu"]["driver"], "580.159.04");
        assert!(!raw["findings"].as_array().unwrap().iter().any(|f| f["kind"] == "server-not-on-gpu"), "{name}");
    }
    let (run1, _) = read("run1.json");
    assert!(run1.sentry.as_ref().unwrap().gpu_wait_seconds.is_some_and(|s| s > 10.0), "run 1 waited for torch");
    let (run3, raw3) = read("run3.json");
    assert!(run3.sentry.as_ref().unwrap().server_gpu_pids.is_empty());
    assert!(raw3["findings"].as_array().unwrap().iter().any(|f| f["kind"] == "server-not-on-gpu"));
}

/// `gauntlet --version` names the commit it was built from (this checkout's HEAD).
#[test]
fn version_names_the_commit() {
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".into());
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gauntlet")).arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("gauntlet {} (commit {head})\n", env!("CARGO_PKG_VERSION"))
    );
}
