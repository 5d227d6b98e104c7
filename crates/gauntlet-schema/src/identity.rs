//! The identity of a run: what must be equal for two runs to be compared, as a typed record.
//!
//! Its JSON shape is the one gauntlet has written since identity version 1: `{identity_version, recipe, binding,
//! suite, workload}`, plus (since run record version 5) an optional `build` member that names the server binary
//! under test. The identity digest is taken over the canonical JSON *without* `build` (see
//! [`IdentityRecord::digest_value`]): a change under test rebuilds the binary, and its baseline must still be found;
//! a different build is reported as the note `server-build-differs`, never as another identity.
//!
//! A record whose identity does not have exactly this shape (a version-1 record, a hand-made one) keeps it
//! verbatim as [`IdentityRecord::Legacy`], so its digest and its field-by-field differences stay what they were.
//! This module must never compute digests (that is the engine's `identity` module) nor lose a byte of an identity
//! it read.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

/// Bumped when the identity's shape changes; part of the identity, so old and new never compare silently.
pub const IDENTITY_VERSION: u32 = 1;

/// How gauntlet reaches the server under test: it started it (`spawned`) or it was already running (`attached`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerMode {
    Spawned,
    Attached,
}

impl ServerMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ServerMode::Spawned => "spawned",
            ServerMode::Attached => "attached",
        }
    }
}

/// The identity as gauntlet computes it today.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Identity {
    pub identity_version: u32,
    pub recipe: Recipe,
    /// Where it runs: CPU model and architecture, or the GPU's kind. Kept as JSON: its members differ by device
    /// and a present `null` is part of the digest.
    pub binding: Value,
    pub suite: SuiteIdentity,
    pub workload: Value,
    /// The server binary under test. Not part of the digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildIdentity>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Recipe {
    pub model: ModelIdentity,
    /// Speculative decoding's draft model, `null` without one: `{"model": {name, file, size, sha256}, "flag",
    /// "arguments"}`. Its `model` (the draft's bytes) is kept out of the digest (see
    /// [`IdentityRecord::digest_value`]); the flag and the settings are identity.
    pub draft: Value,
    pub server: ServerIdentity,
    pub server_arguments: Vec<String>,
    pub environment: BTreeMap<String, String>,
    pub features: Vec<String>,
    pub request_model: String,
    pub endpoint: String,
    pub template: TemplateIdentity,
}

/// The model: for a spawned server its file, size and content digest; for an attached one only the name it is
/// asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelIdentity {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// A directory model: how many files its digest covers (`file` is the directory's name, `size` their total).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<u64>,
    /// A hub model: its id and pinned revision (gauntlet downloads nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

/// The server: a spawned one by its manifest name, an attached one by its base URL.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerIdentity {
    pub kind: ServerMode,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The server's kind (`vllm`, `llama.cpp` …) when the manifest names one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// The profile's `parallel` and `context`, which a kind's template hands to the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TemplateIdentity {
    pub thinking_cases: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SuiteIdentity {
    pub id: String,
    pub version: u32,
    pub digest: String,
}

/// The server binary under test: its content digest, the digest of the source it was built from (when gauntlet
/// built it) and whether gauntlet built it in this run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BuildIdentity {
    pub binary_sha256: Option<String>,
    pub source_digest: Option<String>,
    pub built: bool,
}

/// An identity as read from a record: the current typed shape, or any other shape kept verbatim.
#[derive(Debug, Clone, PartialEq)]
pub enum IdentityRecord {
    Current(Box<Identity>),
    /// An older (version-1) or otherwise foreign shape; it never equals a current identity, and comparing with it
    /// is refused with its differing fields named.
    Legacy(Value),
}

impl IdentityRecord {
    /// Reads any JSON value: the typed shape when it reads back to the very same JSON, else [`Self::Legacy`].
    pub fn from_value(v: Value) -> IdentityRecord {
        match serde_json::from_value::<Identity>(v.clone()) {
            Ok(id) if serde_json::to_value(&id).ok().as_ref() == Some(&v) => IdentityRecord::Current(Box::new(id)),
            _ => IdentityRecord::Legacy(v),
        }
    }

    pub fn current(&self) -> Option<&Identity> {
        match self {
            IdentityRecord::Current(id) => Some(id),
            IdentityRecord::Legacy(_) => None,
        }
    }

    pub fn current_mut(&mut self) -> Option<&mut Identity> {
        match self {
            IdentityRecord::Current(id) => Some(id),
            IdentityRecord::Legacy(_) => None,
        }
    }

    /// The whole identity as JSON, `build` included.
    pub fn to_value(&self) -> Value {
        match self {
            IdentityRecord::Current(id) => serde_json::to_value(id).unwrap_or(Value::Null),
            IdentityRecord::Legacy(v) => v.clone(),
        }
    }

    /// What the identity digest is taken over: the JSON without `build`, so that a rebuilt binary keeps its
    /// identity (and its baseline), and without the draft model's bytes (`recipe.draft.model`): a profile that
    /// runs a draft differs from one that does not, and its draft settings are identity, but a change that swaps
    /// the draft file must still meet the baseline of the draft before it, so that an acceptance rate that
    /// collapses is a finding, not a fresh start (the swap itself is the finding `draft-changed`). A record
    /// without a draft (`draft: null`) has the digest it always had.
    pub fn digest_value(&self) -> Value {
        let mut v = self.to_value();
        if let Value::Object(map) = &mut v {
            map.remove("build");
        }
        if let Some(Value::Object(draft)) = v.get_mut("recipe").and_then(|r| r.get_mut("draft")) {
            draft.remove("model");
        }
        v
    }

    /// The draft model's identity (`recipe.draft.model`), `null` without a draft.
    pub fn draft_model_value(&self) -> Value {
        self.to_value()
            .get("recipe")
            .and_then(|r| r.get("draft"))
            .and_then(|d| d.get("model"))
            .cloned()
            .unwrap_or(Value::Null)
    }

    /// The `build` member, as JSON (`null` when absent).
    pub fn build_value(&self) -> Value {
        self.to_value().get("build").cloned().unwrap_or(Value::Null)
    }

    /// The model named by the recipe, when the identity has the current shape.
    pub fn model(&self) -> Option<&ModelIdentity> {
        self.current().map(|id| &id.recipe.model)
    }

    /// The server named by the recipe, when the identity has the current shape.
    pub fn server(&self) -> Option<&ServerIdentity> {
        self.current().map(|id| &id.recipe.server)
    }

    /// The model name sent in requests, when the identity has the current shape.
    pub fn request_model(&self) -> Option<&str> {
        self.current().map(|id| id.recipe.request_model.as_str())
    }
}

impl From<Identity> for IdentityRecord {
    fn from(id: Identity) -> Self {
        IdentityRecord::Current(Box::new(id))
    }
}

impl Default for IdentityRecord {
    fn default() -> Self {
        IdentityRecord::Legacy(Value::Null)
    }
}

impl Serialize for IdentityRecord {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            IdentityRecord::Current(id) => id.serialize(s),
            IdentityRecord::Legacy(v) => v.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for IdentityRecord {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(IdentityRecord::from_value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spawned() -> Value {
        json!({
            "identity_version": 1,
            "recipe": {
                "model": {"name": "smollm2-135m", "file": "m.gguf", "size": 10, "sha256": "ab"},
                "draft": null,
                "server": {"kind": "spawned", "name": "xllamacpp"},
                "server_arguments": ["-c", "4096"],
                "environment": {},
                "features": [],
                "request_model": "smollm2",
                "endpoint": "chat",
                "template": {"thinking_cases": []},
            },
            "binding": {"runtime": "cpu", "device": "x", "arch": "x86_64", "visible_devices": null},
            "suite": {"id": "s", "version": 1, "digest": "d"},
            "workload": {"concurrency": 1, "temperature": 0, "max_tokens": "per case"},
        })
    }

    #[test]
    fn todays_shape_reads_typed_and_writes_the_same_json() {
        let v = spawned();
        let id = IdentityRecord::from_value(v.clone());
        assert_eq!(id.model().map(|m| m.name.as_str()), Some("smollm2-135m"));
        assert_eq!(id.server().and_then(|s| s.name.as_deref()), Some("xllamacpp"));
        assert_eq!(id.to_value(), v);
    }

    #[test]
    fn build_is_kept_but_left_out_of_the_digest_value() {
        let mut v = spawned();
        v["build"] = json!({"binary_sha256": "ff", "source_digest": null, "built": false});
        let id = IdentityRecord::from_value(v.clone());
        assert!(id.current().is_some());
        assert_eq!(id.to_value(), v);
        assert_eq!(id.digest_value(), spawned());
        assert_eq!(id.build_value()["binary_sha256"], "ff");
    }

    #[test]
    fn the_draft_files_bytes_are_left_out_of_the_digest_value_but_its_settings_are_not() {
        let mut v = spawned();
        v["recipe"]["draft"] = json!({
            "model": {"name": "d", "file": "d.gguf", "size": 5, "sha256": "cd"},
            "flag": "-md",
            "arguments": ["--spec-draft-n-max", "8"],
        });
        let id = IdentityRecord::from_value(v.clone());
        assert!(id.current().is_some());
        assert_eq!(id.to_value(), v);
        let digest = id.digest_value();
        assert_eq!(digest["recipe"]["draft"], json!({"flag": "-md", "arguments": ["--spec-draft-n-max", "8"]}));
        assert_ne!(digest, spawned(), "a profile with a draft never shares the digest of one without");
        assert_eq!(id.draft_model_value()["sha256"], "cd");
        // Without a draft the digest value is what it always was.
        assert_eq!(IdentityRecord::from_value(spawned()).digest_value(), spawned());
        assert!(IdentityRecord::from_value(spawned()).draft_model_value().is_null());
    }

    #[test]
    fn other_shapes_are_kept_verbatim() {
        let old = json!({"model": {"name": "m"}, "server": {"name": "s"}, "extra": null});
        let id = IdentityRecord::from_value(old.clone());
        assert!(id.current().is_none());
        assert_eq!(serde_json::to_value(&id).unwrap(), old);
        // A present null where the typed shape has an optional member would not read back the same: kept verbatim.
        let mut odd = spawned();
        odd["recipe"]["model"]["file"] = Value::Null;
        assert!(IdentityRecord::from_value(odd).current().is_none());
    }
}
