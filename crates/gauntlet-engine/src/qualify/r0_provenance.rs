//! R0, provenance: the checks that need no server (model bytes, device, source tree, build identity, command).
//! Never starts the server: the session opens only after these pass.

use std::path::Path;

use serde_json::{Value, json};

use super::QualifyOptions;
use crate::manifest::{Profile, Target};
use crate::util::sha256_file;

/// The server binary's bytes and version, and the command that starts it.
fn server_provenance(s: &crate::manifest::SpawnSpec, data: &mut Value, failures: &mut Vec<String>) {
    match sha256_file(&s.binary) {
        Ok(sha) => data["server_binary_sha256"] = json!(sha),
        Err(e) => failures.push(format!("server binary `{}`: {e}", s.binary.display())),
    }
    data["server_version"] = version_output(&s.binary, &s.full_environment());
    data["command"] = json!(s.command());
}

/// R0's checks that need no server: model bytes, device, source tree, build identity, command.
pub(super) fn provenance(profile: &Profile, opts: &QualifyOptions) -> (Vec<String>, Value) {
    let mut failures = Vec::new();
    let mut data = json!({
        "identity": opts.identity.value,
        "identity_digest": opts.identity.digest,
        "runtime": opts.identity.runtime,
    });
    match &profile.target {
        // A model directory cannot be pinned in the manifest (its digest is computed from its files): the identity
        // computed that digest before R0, and it is what a baseline compares. A hub model is pinned by revision.
        Target::Spawn(s) if s.model.is_dir || s.model.hub.is_some() => {
            let model = opts.identity.value.current().map(|i| &i.recipe.model);
            match model.map(|m| (&m.sha256, &m.revision, m.files)) {
                Some((Some(sha), _, files)) => {
                    data["model_sha256"] = json!(sha);
                    data["model_files"] = json!(files);
                }
                Some((None, Some(revision), _)) => data["model_revision"] = json!(revision),
                _ => failures.push(format!("model `{}`: the identity has no digest of it", s.model.name)),
            }
            server_provenance(s, &mut data, &mut failures);
        }
        Target::Spawn(s) => {
            match (sha256_file(&s.model.path), &s.model.sha256) {
                (Err(e), _) => failures.push(format!("model `{}`: {e}", s.model.path.display())),
                (Ok(sha), None) => {
                    failures.push(format!(
                        "model `{}` has no sha256 in the manifest: qualification needs exact provenance",
                        s.model.name
                    ));
                    data["model_sha256"] = json!(sha);
                }
                (Ok(sha), Some(want)) if &sha != want => {
                    failures.push(format!("model sha256 is {sha}, the manifest says {want}"));
                    data["model_sha256"] = json!(sha);
                }
                (Ok(sha), Some(_)) => data["model_sha256"] = json!(sha),
            }
            server_provenance(s, &mut data, &mut failures);
        }
        Target::Attach(a) => failures.push(format!(
            "attached to {}: the model bytes and the server build cannot be proven; qualification needs a spawned \
             server",
            a.base_url
        )),
    }
    if profile.device.is_gpu()
        && let Some(e) = opts.identity.runtime["gpu"]["error"].as_str()
    {
        failures.push(format!("device {} is not visible: {e}", profile.device.label()));
    }
    if let Some((b, path)) = &opts.baseline {
        let d = crate::identity::differences(&b.identity, &opts.identity.value, &b.runtime, &opts.identity.runtime);
        for r in &d.refusing {
            failures.push(format!("identity differs from the baseline `{path}`: {r}"));
        }
        data["runtime_differences"] = json!(d.warning);
    }
    match &profile.qualify.source {
        None => data["source_tree"] = json!({"declared": false}),
        Some(dir) => {
            let git =
                |args: &[&str]| crate::util::run_bounded("git", &[&["-C", &dir.to_string_lossy()], args].concat());
            match (git(&["rev-parse", "HEAD"]), git(&["status", "--porcelain", "--untracked-files=no"])) {
                (Ok(head), Ok(status)) => {
                    let dirty: Vec<&str> = status.lines().filter(|l| !l.trim().is_empty()).collect();
                    if !dirty.is_empty() {
                        failures.push(format!(
                            "source tree `{}` has {} modified tracked file(s): {}",
                            dir.display(),
                            dirty.len(),
                            dirty.iter().take(5).map(|l| l.trim()).collect::<Vec<_>>().join(", ")
                        ));
                    }
                    data["source_tree"] = json!({"declared": true, "path": dir, "commit": head.trim(), "dirty": dirty});
                }
                (Err(e), _) | (_, Err(e)) => {
                    failures.push(format!("source tree `{}` is not a readable git work tree: {e}", dir.display()))
                }
            }
        }
    }
    (failures, data)
}

/// `BINARY --version`, bounded in time and output, in the environment the server is started with.
fn version_output(binary: &Path, environment: &std::collections::BTreeMap<String, String>) -> Value {
    let environment = crate::server::server_environment(environment);
    match crate::util::run_bounded_merged(&binary.to_string_lossy(), &["--version"], &environment) {
        Ok((code, text)) => json!({"exit_code": code, "output": text.chars().take(2000).collect::<String>()}),
        Err(e) => json!({"error": e.to_string()}),
    }
}
