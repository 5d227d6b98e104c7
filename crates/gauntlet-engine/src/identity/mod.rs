//! Identity: the canonical record that decides whether two runs may be compared, and its digest.
//!
//! It holds what must be equal for a comparison to mean anything (model bytes, server kind and ordered
//! arguments, features, binding, suite, workload, endpoint, template mode). Its type and JSON shape are
//! `gauntlet_schema::identity`; this module composes it from the facts `crate::session::compute_identity`
//! gathers, and takes its digest. It never probes a device, runs a process or reads a build directory.
//!
//! What the change under test is allowed to change does not refuse a comparison:
//! - the server binary: the identity's `build` member (`binary_sha256`, `source_digest`, `built`). The digest is
//!   taken over the canonical JSON **without** `build`: a change under test rebuilds the binary, and its baseline
//!   must still be found. A different build is reported as the note `server-build-differs`.
//! - the runtime (driver, VBIOS, CPU details) lives in a separate `runtime` record: a difference there warns.
//!
//! A difference anywhere else in the identity refuses.

use std::path::Path;

use gauntlet_schema::identity::{BuildIdentity, IdentityRecord};
use serde_json::{Value, json};

use crate::manifest::{Profile, Target};
use crate::util::{sha256_file_memo, sha256_hex};

/// Bumped when the identity's shape changes; part of the identity, so old and new never compare silently.
pub use gauntlet_schema::identity::IDENTITY_VERSION;

#[derive(Debug, Clone)]
pub struct Identity {
    /// Always the current typed shape when computed here.
    pub value: IdentityRecord,
    /// [`identity_digest`] of `value`.
    pub digest: String,
    /// Warn-only facts: the CPU and GPU details, and the server's reported build once it runs.
    pub runtime: Value,
}

#[derive(Debug, thiserror::Error)]
#[error("model `{path}`: {reason}")]
pub struct IdentityError {
    pub path: String,
    pub reason: String,
}

/// JSON with object keys sorted at every level and no insignificant whitespace, whatever serde_json's map type:
/// the same identity gives the same bytes, hence the same digest, on every machine.
pub fn canonical(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*k).clone()).to_string());
                out.push(':');
                write_canonical(&map[k.as_str()], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// The sha256 of a value's canonical form. The identity's own digest is [`identity_digest`] (without `build`).
pub fn digest(v: &Value) -> String {
    sha256_hex(canonical(v).as_bytes())
}

/// The digest that keys baselines: over the identity without its `build` member (see the module docs).
pub fn identity_digest(identity: &IdentityRecord) -> String {
    digest(&identity.digest_value())
}

/// The identity without its binding: the same recipe on several devices shares this digest ("paired baselines").
pub fn recipe_digest(identity: &IdentityRecord) -> String {
    digest(&identity.to_value()["recipe"])
}

/// What the machine says about a run's identity, gathered by the layer that may probe it
/// (`crate::session::compute_identity`): this module never probes a device nor reads a build directory.
#[derive(Debug, Clone, Default)]
pub struct Facts {
    /// `runtime.cpu`.
    pub cpu: Value,
    /// The device's identity, or `{"error": …}` where it cannot be read.
    pub gpu: Value,
    /// `identity.build` of a spawned server (`crate::build::identity_member`); None for an attached one.
    pub build: Option<Value>,
}

/// The identity of `profile` from the gathered `facts`. Hashing the model uses a stat-keyed memo under `home`, so
/// an unchanged multi-gigabyte file is hashed once per machine, not once per run.
pub fn compose(profile: &Profile, home: &Path, facts: Facts) -> Result<Identity, IdentityError> {
    let Facts { cpu, gpu, build: build_member } = facts;
    let thinking: Vec<&str> = profile.suite.cases.iter().filter(|c| c.thinking).map(|c| c.id.as_str()).collect();
    let mut features = profile.features.clone();
    features.sort();
    features.dedup();
    let suite = json!({"id": profile.suite.id, "version": profile.suite.version, "digest": profile.suite.digest});
    let workload = json!({"concurrency": 1, "temperature": 0, "max_tokens": "per case"});
    let (recipe, build) = match &profile.target {
        Target::Spawn(s) => {
            let fail = |reason: String| IdentityError { path: s.model.path.display().to_string(), reason };
            let file_name = s.model.path.file_name().map(|n| n.to_string_lossy().into_owned());
            let model = match (&s.model.hub, s.model.is_dir) {
                // A hub model is its id and pinned revision: nothing is downloaded or hashed.
                (Some((id, revision)), _) => json!({"name": s.model.name, "hub": id, "revision": revision}),
                (None, true) => {
                    let (sha, files, size) =
                        crate::util::sha256_dir(&s.model.path, home).map_err(|e| fail(e.to_string()))?;
                    json!({"name": s.model.name, "file": file_name, "size": size, "sha256": sha, "files": files})
                }
                (None, false) => {
                    let meta = std::fs::metadata(&s.model.path).map_err(|e| fail(e.to_string()))?;
                    let sha = sha256_file_memo(&s.model.path, home).map_err(|e| fail(e.to_string()))?;
                    if let Some(want) = &s.model.sha256
                        && *want != sha
                    {
                        return Err(fail(format!("sha256 is {sha}, the manifest says {want}")));
                    }
                    json!({"name": s.model.name, "file": file_name, "size": meta.len(), "sha256": sha})
                }
            };
            // The draft (speculative decoding): its file like the model's, its flag and settings. Its bytes are
            // kept out of the digest (`IdentityRecord::digest_value`); a swap is the finding `draft-changed`.
            let draft = match &s.draft {
                None => Value::Null,
                Some(d) => {
                    let fail = |reason: String| IdentityError {
                        path: d.model.path.display().to_string(),
                        reason: format!("draft: {reason}"),
                    };
                    let meta = std::fs::metadata(&d.model.path).map_err(|e| fail(e.to_string()))?;
                    let sha = sha256_file_memo(&d.model.path, home).map_err(|e| fail(e.to_string()))?;
                    if let Some(want) = &d.model.sha256
                        && *want != sha
                    {
                        return Err(fail(format!("sha256 is {sha}, the manifest says {want}")));
                    }
                    let file = d.model.path.file_name().map(|n| n.to_string_lossy().into_owned());
                    json!({
                        "model": {"name": d.model.name, "file": file, "size": meta.len(), "sha256": sha},
                        "flag": d.flag,
                        "arguments": d.arguments.iter().map(|a| crate::util::redact::text(a).into_owned()).collect::<Vec<_>>(),
                    })
                }
            };
            // A server without a kind keeps the identity it always had (its baselines are still found).
            let mut server = json!({"kind": "spawned", "name": s.server_name});
            if let Some(k) = s.kind {
                server["engine"] = json!(k.name);
            }
            if let Some(n) = s.parallel {
                server["parallel"] = json!(n);
            }
            if let Some(n) = s.context {
                server["context"] = json!(n);
            }
            // An unreadable binary has no digest; the server's spawn (or its build) then says why.
            let build = build_member.unwrap_or(Value::Null);
            (
                json!({
                    "model": model,
                    "draft": draft,
                    "server": server,
                    // Secrets are neither identity nor recorded: a secret variable's value is the mark (rotating a
                    // token keeps the identity), and a registered secret inside an argument is redacted before
                    // the digest, so the stored record is the one the digest was computed over.
                    "server_arguments": s.arguments.iter().map(|a| crate::util::redact::text(a).into_owned()).collect::<Vec<_>>(),
                    "environment": crate::util::redact::environment_for_record(&s.environment, &s.secret_environment),
                    "features": features,
                    "request_model": profile.request_model,
                    "endpoint": "chat",
                    "template": {"thinking_cases": thinking},
                }),
                serde_json::from_value::<BuildIdentity>(build).ok(),
            )
        }
        Target::Attach(a) => (
            json!({
                "model": {"name": profile.request_model},
                "draft": Value::Null,
                "server": {"kind": "attached", "base_url": a.base_url},
                "server_arguments": [],
                "environment": {},
                "features": features,
                "request_model": profile.request_model,
                "endpoint": "chat",
                "template": {"thinking_cases": thinking},
            }),
            None,
        ),
    };
    let mut runtime = json!({});
    runtime["cpu"] = cpu;
    if profile.device.is_gpu() {
        runtime["gpu"] = gpu.clone();
    }
    let value = json!({
        "identity_version": IDENTITY_VERSION,
        "recipe": recipe,
        "binding": binding(&profile.device, &gpu),
        "suite": suite,
        "workload": workload,
    });
    let mut value = IdentityRecord::from_value(value);
    if let Some(id) = value.current_mut() {
        id.build = build;
    }
    let digest = identity_digest(&value);
    Ok(Identity { value, digest, runtime })
}

/// Where it runs. On a CPU machine: the processor model and architecture (it changes numerics and speed). On a
/// GPU: its kind (board name, memory size, AMD gfx target); the driver, VBIOS and power limit are runtime facts
/// that only warn, and the UUID is not identity at all (two identical boards share baselines).
fn binding(device: &crate::manifest::Device, gpu: &Value) -> Value {
    let env = crate::util::environment();
    match device {
        crate::manifest::Device::Cpu => {
            json!({"runtime": "cpu", "device": env.cpu_model, "arch": env.arch, "visible_devices": Value::Null})
        }
        d => json!({
            "runtime": if matches!(d, crate::manifest::Device::Nvidia(_)) { "cuda" } else { "rocm" },
            "device": gpu.get("name").or_else(|| gpu.get("gfx_target")).cloned().unwrap_or(Value::Null),
            "memory_total_bytes": gpu.get("memory_total_bytes").cloned().unwrap_or(Value::Null),
            "arch": env.arch,
            "visible_devices": d.label(),
        }),
    }
}

/// Every field that differs, as `path: old → new`, split into those that refuse a comparison (identity without
/// `build`) and those that only warn or note (runtime, and the server build).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Differences {
    pub refusing: Vec<String>,
    pub warning: Vec<String>,
}

pub fn differences(
    old_identity: &IdentityRecord,
    new_identity: &IdentityRecord,
    old_runtime: &Value,
    new_runtime: &Value,
) -> Differences {
    let mut warning: Vec<String> = gauntlet_schema::diff::identity_differences(old_runtime, new_runtime)
        .into_iter()
        .map(|d| format!("runtime.{d}"))
        .collect();
    warning.extend(build_differences(old_identity, new_identity));
    Differences {
        refusing: gauntlet_schema::diff::identity_differences(
            &old_identity.digest_value(),
            &new_identity.digest_value(),
        ),
        warning,
    }
}

// Pure functions of two records: the schema crate's, re-exported so that callers keep their path.
pub use gauntlet_schema::diff::build_differences;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_form_ignores_key_order_but_not_array_order() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": {"y": [1, 2], "x": "s"}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a": {"x": "s", "y": [1, 2]}, "b": 1}"#).unwrap();
        let c: Value = serde_json::from_str(r#"{"a": {"x": "s", "y": [2, 1]}, "b": 1}"#).unwrap();
        assert_eq!(canonical(&a), r#"{"a":{"x":"s","y":[1,2]},"b":1}"#);
        assert_eq!(digest(&a), digest(&b));
        assert_ne!(digest(&a), digest(&c), "argument order is part of the identity");
    }

    #[test]
    fn canonical_escapes_strings_like_json() {
        let v = json!({"k\"ey": "a\nb ü"});
        assert_eq!(canonical(&v), "{\"k\\\"ey\":\"a\\nb ü\"}");
    }

    #[test]
    fn differences_split_refusing_from_warning() {
        let build = |sha: &str| json!({"binary_sha256": sha, "source_digest": null, "built": false});
        let d = differences(
            &IdentityRecord::from_value(json!({"recipe": {"server_arguments": ["-c", "4096"]}, "build": build("aa")})),
            &IdentityRecord::from_value(json!({"recipe": {"server_arguments": ["-c", "2048"]}, "build": build("bb")})),
            &json!({"driver": "1"}),
            &json!({"driver": "2"}),
        );
        assert_eq!(d.refusing, vec!["recipe.server_arguments[1]: 4096 → 2048"]);
        assert_eq!(d.warning, vec!["runtime.driver: 1 → 2", "build.binary_sha256: aa → bb"]);
    }
}
