//! Manifest TOML → validated [`Profile`]s. All validation lives here and happens before any process starts, so
//! the rest of the engine never re-checks a port, a path or a flag.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::Device;

use gauntlet_schema::Thresholds;
use toml::Table;

use super::contract::{self, keys};
use super::fields::{MAX_FILE_BYTES, Problems, Reader, base_url_problem, inside_root, join, read_capped};
use crate::suite::Suite;

pub const MANIFEST_VERSION: i64 = 1;
const EMBEDDED_DEFAULT: &str = include_str!("default.toml");

/// Flags every server gets from its profile; a user may not set them again in `server_arguments`.
const ALWAYS_RESERVED: &[&str] = &["-m", "--model", "--host", "--port"];

#[derive(Debug, thiserror::Error)]
#[error("invalid manifest `{origin}`:\n  - {}", problems.join("\n  - "))]
pub struct ManifestError {
    pub origin: String,
    pub problems: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Manifest {
    pub origin: String,
    pub root: PathBuf,
    pub default_profile: Option<String>,
    /// Where baselines live, when the manifest says (`--store` and `GAUNTLET_STORE` take precedence).
    pub store: Option<PathBuf>,
    pub plan: PathTable,
    pub profiles: BTreeMap<String, Profile>,
    pub warnings: Vec<String>,
}

/// The wire dialects a profile may name, the default first: the engines of the client's `TOKEN_DIALECTS` table (a
/// client test keeps the two equal; the client sits above the manifest, so the names are listed here).
pub const DIALECTS: &[&str] =
    &["llama.cpp", "vllm", "sglang", "ollama", "tgi", "trtllm", "mistralrs", "transformers", "llama-cpp-python"];

#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    pub target: Target,
    pub suite: Suite,
    /// The `model` field sent in every request (until readiness learns it, see `discover_model`).
    pub request_model: String,
    /// No `request_model` was given and the server checks the name (an attached server, or a kind that does):
    /// readiness asks `/v1/models` and uses the one model it lists.
    pub discover_model: bool,
    /// Ids the server's kind lists in `/v1/models` as other names of its model (mistral.rs's `default`): discovery
    /// passes over them.
    pub model_aliases: &'static [&'static str],
    pub health_path: String,
    pub load_timeout: Duration,
    pub request_timeout: Duration,
    pub suite_budget: Duration,
    pub stop_grace: Duration,
    /// The device the server runs on: `cpu`, `nvidia:N`, `amd:N` (busy wait, runtime identity, fault attribution).
    pub device: Device,
    /// How long to wait for other users of the GPU to leave before skipping.
    pub busy_wait: Duration,
    /// Take a host-wide lock on the GPU for the whole run.
    pub gpu_lock: bool,
    /// CI runner labels this profile's job needs (`runs-on` in the plan's matrix); not part of the identity.
    pub runner: Vec<String>,
    pub thresholds: Thresholds,
    /// Release qualification settings (`[profiles.P.qualify]`), defaults when absent.
    pub qualify: super::qualify::QualifySettings,
    /// `gauntlet bench`'s workload (`[profiles.P.bench]`), defaults when absent; flags override it.
    pub bench: gauntlet_schema::bench::Workload,
    /// `[profiles.P.bench] paired = "alternate"`: in a paired bench this profile's server cannot share the device
    /// with the other's, so the two run one at a time (`"both"`, the default: both up at once).
    pub paired_alternate: bool,
    /// `[profiles.P.bench] decide = ["decode", "e2el"]`: the metrics a paired bench of this profile rests its verdict
    /// on (`gauntlet_schema::Metric::decide_name`); `None`: the default (`run::paired::deciding`).
    pub bench_decide: Option<Vec<String>>,
    /// Feature labels (speculative, …): part of the identity, and consistent with the server arguments.
    pub features: Vec<String>,
    /// The server's wire dialect (`dialect = "vllm"`; `llama.cpp` when not told), one of [`DIALECTS`]: its thinking
    /// switch and token fields (the client's `TokenDialect::of`).
    pub dialect: String,
    /// How the server ends a streamed answer: its dialect's kind's (`kinds::departures`; `[DONE]` for every kind but
    /// `transformers`, whose streams end at the body's end after the finish chunk).
    pub stream_end: crate::kinds::StreamEnd,
    /// Where the server's Prometheus text is scraped before and after a run or bench: the kind's metrics path,
    /// or the profile's `metrics = "/path"`; None with `metrics = false` or when the kind serves none.
    pub metrics_path: Option<String>,
    /// `extra_body`: fields merged into every request of this profile (a case's own `extra_body` wins).
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// `lossless_against = "PROFILE"`: the gate runs that profile (the same server without this one's draft)
    /// twice, a reference and a control, and judges whether this profile's greedy answers are theirs.
    pub lossless_against: Option<String>,
    /// Files this profile needs that are absent or unusable; checked when the profile is selected.
    missing: Vec<String>,
}

#[derive(Debug, Clone)]
pub enum Target {
    /// gauntlet starts, supervises and stops the server.
    Spawn(Box<SpawnSpec>),
    /// The server is already running (a shared deployment); gauntlet only sends requests.
    Attach(AttachSpec),
}

#[derive(Debug, Clone)]
pub struct SpawnSpec {
    pub server_name: String,
    pub binary: PathBuf,
    pub model: ModelSpec,
    pub host: String,
    pub port: u16,
    /// The server's kind (`[servers.NAME] kind`); None for `custom` or no kind: the flags below are the template.
    pub kind: Option<&'static crate::kinds::Kind>,
    /// The launch template after the binary (a kind's, or the server's own `launch`); None: the flags below.
    pub template: Option<Vec<String>>,
    /// The profile's `parallel` and `context`, handed to the server through the kind's template.
    pub parallel: Option<u32>,
    pub context: Option<u32>,
    /// `None` = the model path is the first positional argument.
    pub model_flag: Option<String>,
    pub host_flag: String,
    pub port_flag: String,
    pub arguments: Vec<String>,
    pub environment: BTreeMap<String, String>,
    /// Variables the manifest marks secret (`secret_environment` of the server and the profile) besides those
    /// secret by name (`crate::util::redact::is_secret_name`): their values are redacted wherever gauntlet writes.
    pub secret_environment: Vec<String>,
    /// `[servers.NAME.build]`: gauntlet builds the binary before it starts it.
    pub build: Option<super::BuildSpec>,
    /// The profile's `draft` (speculative decoding): passed after the profile's arguments.
    pub draft: Option<DraftSpec>,
    /// The profile's `device`: a GPU binding makes only that device visible to the server (see
    /// [`Device::visibility_environment`]), so two profiles of one host bound to two GPUs never share one.
    pub device: Device,
}

impl SpawnSpec {
    /// The exact argv: binary, model, host, port, then the profile's arguments in order. With a template (a kind):
    /// binary, the filled template (and the kind's parallel, context and revision flags where set), then the
    /// profile's arguments.
    pub fn command(&self) -> Vec<String> {
        let mut argv = vec![self.binary.display().to_string()];
        if let Some(template) = &self.template {
            argv.extend(crate::kinds::launch_argv(self.kind, template, &self.fill()));
            argv.extend(self.arguments.iter().cloned());
            argv.extend(self.draft.iter().flat_map(DraftSpec::argv));
            return argv;
        }
        if let Some(flag) = &self.model_flag {
            argv.push(flag.clone());
        }
        argv.push(self.model.path.display().to_string());
        argv.extend([self.host_flag.clone(), self.host.clone(), self.port_flag.clone(), self.port.to_string()]);
        argv.extend(self.arguments.iter().cloned());
        argv.extend(self.draft.iter().flat_map(DraftSpec::argv));
        argv
    }

    /// What the template's placeholders stand for.
    pub fn fill(&self) -> crate::kinds::Fill {
        let (model, revision) = match &self.model.hub {
            Some((id, rev)) => (id.clone(), Some(rev.clone())),
            None => (self.model.path.display().to_string(), None),
        };
        let model_file = (self.model.hub.is_none() && !self.model.is_dir).then(|| {
            let dir = self.model.path.parent().map(|d| d.display().to_string()).unwrap_or_default();
            let file = self.model.path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            (dir, file)
        });
        crate::kinds::Fill {
            model,
            model_file,
            host: self.host.clone(),
            port: self.port,
            parallel: self.parallel,
            context: self.context,
            revision,
        }
    }

    /// The server's environment: the device binding's visibility, the kind's (Ollama's settings), then the
    /// server's and the profile's (a profile that sets `CUDA_VISIBLE_DEVICES` itself overrides the binding's).
    pub fn full_environment(&self) -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = self.device.visibility_environment().into_iter().collect();
        if let Some(k) = self.kind {
            env.extend(crate::kinds::launch_environment(k, &self.fill()));
        }
        env.extend(self.environment.clone());
        env
    }

    pub fn base_url(&self) -> String {
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        format!("http://{host}:{}", self.port)
    }
}

/// A draft model for speculative decoding: a `[models]` file, the flag that passes it (the kind's, or a custom
/// server's `draft_flag`) and the profile's `draft_arguments` (its settings), in order.
#[derive(Debug, Clone)]
pub struct DraftSpec {
    pub model: ModelSpec,
    pub flag: String,
    pub arguments: Vec<String>,
}

impl DraftSpec {
    /// `FLAG PATH SETTINGS…`, as the server gets them.
    pub fn argv(&self) -> Vec<String> {
        let mut out = vec![self.flag.clone(), self.model.path.display().to_string()];
        out.extend(self.arguments.iter().cloned());
        out
    }
}

#[derive(Debug, Clone)]
pub struct ModelSpec {
    pub name: String,
    /// A file, or a directory in the Hugging Face layout (`is_dir`); empty for a hub model.
    pub path: PathBuf,
    pub is_dir: bool,
    /// A hub id and its pinned revision: recorded in the identity and handed to the server; nothing is downloaded.
    pub hub: Option<(String, String)>,
    pub sha256: Option<String>,
}

#[derive(Debug, Clone)]
pub struct AttachSpec {
    pub base_url: String,
    /// Name of the environment variable holding the API key; the key itself is never written anywhere.
    pub api_key_env: Option<String>,
    /// A PEM file of certificate authorities trusted for an `https://` server besides the system's (read when the
    /// session opens, inside the manifest's root or absolute).
    pub ca_file: Option<PathBuf>,
    /// Extra request headers: `(header name, environment variable holding its value)`. The values are secrets of
    /// the process like the API key: redacted wherever text leaves it, never written.
    pub headers_env: Vec<(String, String)>,
}

impl Manifest {
    /// The manifest compiled into the binary; its paths live under gauntlet's home (`scripts/setup.sh` fills it).
    pub fn embedded_default(home: &Path) -> Result<Manifest, ManifestError> {
        Manifest::parse(EMBEDDED_DEFAULT, "embedded default", home)
    }

    pub fn embedded_default_text() -> &'static str {
        EMBEDDED_DEFAULT
    }

    pub fn from_file(path: &Path) -> Result<Manifest, ManifestError> {
        let origin = path.display().to_string();
        let text = read_capped(path, MAX_FILE_BYTES)
            .map_err(|e| ManifestError { origin: origin.clone(), problems: vec![e.to_string()] })?;
        let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        Manifest::parse(&text, &origin, dir)
    }

    /// `base_dir` anchors a relative `root` (and is the root when none is given).
    pub fn parse(text: &str, origin: &str, base_dir: &Path) -> Result<Manifest, ManifestError> {
        let fail = |problems| ManifestError { origin: origin.to_owned(), problems };
        if text.len() as u64 > MAX_FILE_BYTES {
            return Err(fail(vec![format!("larger than the {} KiB limit; refused", MAX_FILE_BYTES / 1024)]));
        }
        let doc: Table = text.parse().map_err(|e: toml::de::Error| fail(vec![e.to_string().trim_end().to_owned()]))?;
        let mut p = Problems::default();
        p.control_characters(&doc, "");
        let top = Reader::new(&doc, "");
        p.unknown_keys(&doc, "", keys::<contract::ManifestFile>());
        match top.integer(&mut p, "version", 1, i64::MAX) {
            Some(MANIFEST_VERSION) => {}
            Some(v) => p.error(
                "version",
                format!("manifest version {v} is newer than this gauntlet reads ({MANIFEST_VERSION})"),
            ),
            None if !top.has("version") => p.error("version", "required (this gauntlet reads version 1)"),
            None => {}
        }
        let root = match top.string(&mut p, "root") {
            Some(r) if Path::new(&r).is_absolute() => PathBuf::from(r),
            Some(r) => base_dir.join(r),
            None => base_dir.to_path_buf(),
        };
        let store = top
            .string(&mut p, "store")
            .map(|s| if Path::new(&s).is_absolute() { PathBuf::from(s) } else { base_dir.join(s) });
        let features = read_features(&mut p, &top);
        let models = read_models(&mut p, &top, &root);
        let servers = read_servers(&mut p, &top, &root);
        let mut profiles = BTreeMap::new();
        match top.table_of(&mut p, "profiles") {
            None if !top.has("profiles") => p.error("profiles", "required: at least one profile"),
            None => {}
            Some(t) if t.is_empty() => p.error("profiles", "required: at least one profile"),
            Some(t) => {
                let defs = Defs { models: &models, servers: &servers, features: &features, root: &root, doc: &doc };
                for (name, v) in t {
                    let path = join("profiles", name);
                    // A profile's name becomes part of output folder names: no separator may lead elsewhere.
                    if name.is_empty() || name.contains(['/', '\\']) || name.starts_with('.') {
                        p.error(&path, "a profile name is non-empty, has no `/` or `\\`, and does not start with `.`");
                    }
                    let Some(pt) = v.as_table() else {
                        p.error(&path, "expected a table");
                        continue;
                    };
                    if let Some(profile) = read_profile(&mut p, name, Reader::new(pt, path), &defs) {
                        profiles.insert(name.clone(), profile);
                    }
                }
            }
        }
        let plan = read_plan(&mut p, &top, &profiles);
        let default_profile = top.string(&mut p, "default_profile");
        if let Some(d) = &default_profile
            && !profiles.contains_key(d)
            && p.errors.is_empty()
        {
            p.error("default_profile", format!("`{d}` is not a profile"));
        }
        if !p.errors.is_empty() {
            return Err(fail(p.errors));
        }
        Ok(Manifest { origin: origin.to_owned(), root, default_profile, store, plan, profiles, warnings: p.warnings })
    }

    /// The profile named on the command line, else `default_profile`, else the only one; its files must exist.
    pub fn select(&self, name: Option<&str>) -> Result<&Profile, ManifestError> {
        let profile =
            self.select_name(name).map_err(|e| ManifestError { origin: self.origin.clone(), problems: vec![e] })?;
        if !profile.missing.is_empty() {
            let mut problems = profile.missing.clone();
            if self.origin == "embedded default" {
                problems
                    .push("run `scripts/setup.sh` (add `--native` for the native llama-server) to install them".into());
            }
            return Err(ManifestError { origin: self.origin.clone(), problems });
        }
        Ok(profile)
    }

    /// The profile by name (as `select` chooses it) even when files it needs are missing: `doctor` reports those
    /// itself, one line each.
    pub fn select_unchecked(&self, name: Option<&str>) -> Result<&Profile, ManifestError> {
        self.select_name(name).map_err(|e| ManifestError { origin: self.origin.clone(), problems: vec![e] })
    }

    fn select_name(&self, name: Option<&str>) -> Result<&Profile, String> {
        let names = || self.profiles.keys().cloned().collect::<Vec<_>>().join(", ");
        let wanted = match (name, &self.default_profile) {
            (Some(n), _) => n.to_owned(),
            (None, Some(d)) => d.clone(),
            (None, None) if self.profiles.len() == 1 => self.profiles.keys().next().cloned().unwrap_or_default(),
            (None, None) => {
                return Err(format!("several profiles ({}); choose one with --profile", names()));
            }
        };
        self.profiles
            .get(&wanted)
            .ok_or_else(|| format!("no profile `{wanted}` in {} (profiles: {})", self.origin, names()))
    }
}

struct ServerDef {
    binary: PathBuf,
    kind: Option<&'static crate::kinds::Kind>,
    template: Option<Vec<String>>,
    /// The template is the kind's own (not the server's `launch`).
    template_is_kinds: bool,
    model_flag: Option<String>,
    host_flag: String,
    port_flag: String,
    /// A custom server's flag for a draft model's file (a kind's comes from the kinds table).
    draft_flag: Option<String>,
    health_path: String,
    environment: BTreeMap<String, String>,
    secret_environment: Vec<String>,
    build: Option<super::BuildSpec>,
    missing: Vec<String>,
}

/// `secret_environment = ["NAME", …]`: names of variables whose values are secrets (each a variable name).
fn secret_environment(p: &mut Problems, r: &Reader) -> Vec<String> {
    let names = r.string_array(p, "secret_environment").unwrap_or_default();
    for (i, name) in names.iter().enumerate() {
        if name.is_empty() || name.contains('=') || name.chars().any(char::is_control) {
            p.error(&format!("{}[{i}]", r.at("secret_environment")), "must be an environment variable name");
        }
    }
    names
}

fn read_models(p: &mut Problems, top: &Reader, root: &Path) -> BTreeMap<String, (ModelSpec, Vec<String>)> {
    let mut out = BTreeMap::new();
    let Some(t) = top.table_of(p, "models") else {
        return out;
    };
    for (name, v) in t {
        let path = join("models", name);
        let Some(mt) = v.as_table() else {
            p.error(&path, "expected a table");
            continue;
        };
        p.unknown_keys(mt, &path, keys::<contract::Model>());
        let r = Reader::new(mt, path.clone());
        let sha256 = r.string(p, "sha256");
        if r.has("hub") {
            // A hub model: its id and pinned revision are the identity; gauntlet downloads nothing.
            for key in ["path", "sha256"] {
                if r.has(key) {
                    p.error(&r.at(key), "a `hub` model has no local file (its `revision` pins it)");
                }
            }
            let id = r.string(p, "hub").unwrap_or_default();
            let id_ok = !id.is_empty()
                && id.len() <= 200
                && !id.starts_with(['/', '.', '-'])
                && !id.contains("..")
                && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./:".contains(&b));
            if !id_ok {
                p.error(&r.at("hub"), format!("`{}` is not a hub id (ORG/NAME)", id.escape_debug()));
            }
            let revision = r.required_string(p, "revision").unwrap_or_default();
            if r.has("revision")
                && (!(7..=64).contains(&revision.len()) || !revision.bytes().all(|b| b.is_ascii_hexdigit()))
            {
                p.error(&r.at("revision"), "a pinned revision is a commit hash (7 to 64 hex characters)");
            }
            let spec = ModelSpec {
                name: name.clone(),
                path: PathBuf::new(),
                is_dir: false,
                hub: Some((id, revision)),
                sha256: None,
            };
            out.insert(name.clone(), (spec, Vec::new()));
            continue;
        }
        if r.has("revision") {
            p.error(&r.at("revision"), "needs `hub` (a local file or directory is pinned by its content)");
        }
        let file = r.required_string(p, "path").and_then(|f| inside_root(p, &r.at("path"), root, &f));
        if let Some(s) = &sha256
            && !(s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        {
            p.error(&r.at("sha256"), "expected 64 lowercase hex characters");
        }
        if let Some(file) = file {
            // Existence is checked for the profile that runs, so one unbuilt server does not block the others.
            let mut missing = Vec::new();
            let is_dir = file.is_dir();
            if !file.is_file() && !is_dir {
                missing.push(format!("{}: model file `{}` does not exist", r.at("path"), file.display()));
            }
            if is_dir && sha256.is_some() {
                p.error(&r.at("sha256"), "a directory's digest is computed from its files; give no `sha256`");
            }
            let spec = ModelSpec { name: name.clone(), path: file, is_dir, hub: None, sha256 };
            out.insert(name.clone(), (spec, missing));
        }
    }
    out
}

fn read_servers(p: &mut Problems, top: &Reader, root: &Path) -> BTreeMap<String, ServerDef> {
    let mut out = BTreeMap::new();
    let Some(t) = top.table_of(p, "servers") else {
        return out;
    };
    for (name, v) in t {
        let path = join("servers", name);
        let Some(st) = v.as_table() else {
            p.error(&path, "expected a table");
            continue;
        };
        p.unknown_keys(st, &path, keys::<contract::Server>());
        let r = Reader::new(st, path.clone());
        let kind_name = r.string(p, "kind");
        let kind = kind_name.as_deref().and_then(|k| {
            let found = crate::kinds::find(k);
            if found.is_none() && k != "custom" {
                p.error(&r.at("kind"), unknown_kind(k));
            }
            found
        });
        if kind.is_some() {
            for key in ["model_flag", "host_flag", "port_flag", "draft_flag"] {
                if r.has(key) {
                    p.error(&r.at(key), "is set by the kind's launch template (write `launch` to change it)");
                }
            }
        }
        let template = match r.string_array(p, "launch") {
            Some(t) => {
                if kind_name.is_none() {
                    p.error(&r.at("launch"), "needs a `kind` (\"custom\" gives its fields instead)");
                }
                for (i, token) in t.iter().enumerate() {
                    if let Err(e) = crate::kinds::placeholders(token, crate::kinds::PLACEHOLDERS) {
                        p.error(&format!("{}[{i}]", r.at("launch")), e);
                    }
                }
                if !t.iter().any(|tok| tok.contains("{port}")) && kind.is_none_or(|k| k.environment.is_empty()) {
                    p.error(&r.at("launch"), "the template never passes `{port}`: gauntlet could not reach the server");
                }
                Some(t)
            }
            None => kind.map(|k| crate::kinds::template(k, crate::kinds::ModelForm::Dir)),
        };
        let binary = match (r.has("binary"), kind) {
            // A kind's program on PATH; spawn resolves it, and a missing one is said when the profile is chosen.
            (false, Some(k)) => Some(PathBuf::from(k.program)),
            _ => r.required_string(p, "binary").and_then(|b| inside_root(p, &r.at("binary"), root, &b)),
        };
        let model_flag = r.string(p, "model_flag").unwrap_or_else(|| "-m".into());
        let host_flag = r.string(p, "host_flag").unwrap_or_else(|| "--host".into());
        let port_flag = r.string(p, "port_flag").unwrap_or_else(|| "--port".into());
        let draft_flag = r.string(p, "draft_flag");
        if let Some(f) = &draft_flag
            && !f.starts_with('-')
        {
            p.error(&r.at("draft_flag"), format!("`{f}` is not a flag (must start with -)"));
        }
        for (key, flag) in [("host_flag", &host_flag), ("port_flag", &port_flag)] {
            if !flag.starts_with('-') {
                p.error(&r.at(key), format!("`{flag}` is not a flag (must start with -)"));
            }
        }
        let health_path =
            r.string(p, "health_path").unwrap_or_else(|| kind.map_or("/health", |k| k.health_path).into());
        if !health_path.starts_with('/') {
            p.error(&r.at("health_path"), "must start with /");
        }
        let environment = r.environment(p, "environment").unwrap_or_default();
        let secret_environment = secret_environment(p, &r);
        let build = r.table_of(p, "build").and_then(|bt| {
            let mut resolve = |p: &mut Problems, at: &str, v: &str| inside_root(p, at, root, v);
            super::build::read_build(p, name, bt, &r.at("build"), &mut resolve)
        });
        if let Some(binary) = binary {
            // A server gauntlet builds may not exist yet: its build step makes it (and says so when it does not).
            let missing = match &build {
                Some(_) => Vec::new(),
                // A kind's program is looked up on the PATH the server gets, which a profile's environment may
                // set: each profile resolves it (`resolve_program`).
                None if is_bare(&binary) => Vec::new(),
                None => executable_problem(&binary).map(|m| format!("{}: {m}", r.at("binary"))).into_iter().collect(),
            };
            out.insert(
                name.clone(),
                ServerDef {
                    binary,
                    kind,
                    template_is_kinds: kind.is_some() && !r.has("launch"),
                    template,
                    model_flag: (!model_flag.is_empty()).then_some(model_flag),
                    host_flag,
                    port_flag,
                    draft_flag,
                    health_path,
                    environment,
                    secret_environment,
                    build,
                    missing,
                },
            );
        }
    }
    out
}

/// What a profile may refer to: the manifest's definitions, its root, and the raw document.
#[derive(Clone, Copy)]
struct Defs<'a> {
    models: &'a BTreeMap<String, (ModelSpec, Vec<String>)>,
    servers: &'a BTreeMap<String, ServerDef>,
    features: &'a BTreeMap<String, Vec<String>>,
    root: &'a Path,
    doc: &'a Table,
}

fn read_profile(p: &mut Problems, name: &str, r: Reader, defs: &Defs) -> Option<Profile> {
    let Defs { models, servers, features, root, doc } = *defs;
    p.unknown_keys(r.table, &r.path, keys::<contract::Profile>());
    let errors_before = p.errors.len();
    let attach = r.has("base_url");
    let mut missing = Vec::new();
    let target = if attach {
        // Options that only mean something for a server gauntlet starts are refused rather than ignored.
        for &key in contract::SPAWN_ONLY {
            if r.has(key) {
                p.error(&r.at(key), "has no effect with `base_url` (gauntlet does not start an attached server)");
            }
        }
        let base_url = r.string(p, "base_url").unwrap_or_default();
        if let Some(problem) = base_url_problem(base_url.trim_end_matches('/')) {
            p.error(&r.at("base_url"), problem);
        }
        let api_key_env = r.string(p, "api_key_env");
        if let Some(var) = &api_key_env
            && (var.is_empty() || !var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
        {
            p.error(&r.at("api_key_env"), "must be an environment variable name");
        }
        let ca_file = r.string(p, "ca_file").map(|f| root.join(f));
        if let Some(f) = &ca_file
            && !base_url.to_ascii_lowercase().starts_with("https://")
        {
            p.error(&r.at("ca_file"), format!("`{}` needs an https:// `base_url`", f.display()));
        }
        let headers_env = headers_env(&r, p);
        Some(Target::Attach(AttachSpec {
            base_url: base_url.trim_end_matches('/').to_owned(),
            api_key_env,
            ca_file,
            headers_env,
        }))
    } else {
        if r.has("api_key_env") {
            p.error(&r.at("api_key_env"), "needs `base_url` (a server gauntlet starts takes no API key)");
        }
        for &key in contract::ATTACH_ONLY.iter().filter(|k| **k != "api_key_env") {
            if r.has(key) {
                p.error(&r.at(key), "needs `base_url` (only an attached server is called with it)");
            }
        }
        let model = r.required_string(p, "model").and_then(|m| {
            let found = models.get(&m).cloned();
            // A model that is defined but invalid has its own error already.
            if found.is_none() && !defined(doc, "models", &m) {
                p.error(&r.at("model"), format!("`{m}` is not defined under [models]"));
            }
            found.map(|(spec, problems)| {
                missing.extend(problems);
                spec
            })
        });
        let server = r.required_string(p, "server").and_then(|s| {
            let found = servers.get(&s);
            if found.is_none() && !defined(doc, "servers", &s) {
                p.error(&r.at("server"), format!("`{s}` is not defined under [servers]"));
            }
            found.map(|d| (s, d))
        });
        let host = r.string(p, "host").unwrap_or_else(|| "127.0.0.1".into());
        if host.parse::<std::net::IpAddr>().is_err() {
            p.error(&r.at("host"), format!("`{host}` is not an IP address"));
        }
        let port = if r.has("port") {
            r.integer(p, "port", 1, 65535).map(|n| n as u16)
        } else {
            p.error(&r.at("port"), "required (1..=65535)");
            None
        };
        let arguments = r.string_array(p, "server_arguments").unwrap_or_default();
        let mut environment = r.environment(p, "environment").unwrap_or_default();
        let mut secrets = secret_environment(p, &r);
        let parallel = r.integer(p, "parallel", 1, 65536).map(|n| n as u32);
        let context = r.integer(p, "context", 1, 1 << 24).map(|n| n as u32);
        let draft = read_draft(p, &r, models, doc, server.as_ref().map(|(_, d)| *d), &mut missing);
        if let (Some(model), Some((server_name, def)), Some(port)) = (model, server, port) {
            check_arguments(p, &r.at("server_arguments"), &arguments, def);
            if let Some(d) = &draft {
                check_arguments(p, &r.at("draft_arguments"), &d.arguments, def);
                if let Some(i) = arguments.iter().position(|a| *a == d.flag) {
                    p.error(
                        &format!("{}[{i}]", r.at("server_arguments")),
                        format!("`{}` is the profile's `draft` (give the draft model there, not here)", d.flag),
                    );
                }
            }
            check_kind(p, &r, &model, def, parallel, context);
            missing.extend(def.missing.iter().cloned());
            let mut env = def.environment.clone();
            env.append(&mut environment);
            // One resolution of a kind's program, on the PATH the server is spawned with: the program spawn runs
            // is the one the identity hashes and R0 checks.
            let mut binary = def.binary.clone();
            if def.build.is_none() && is_bare(&binary) {
                match resolve_program(&binary, &env) {
                    Some(found) => binary = found,
                    None => missing.push(format!(
                        "{}.kind: the kind's program `{}` is not on the PATH the server gets{} (set `binary`)",
                        join("servers", &server_name),
                        binary.display(),
                        if env.contains_key("PATH") { " (its `environment` sets PATH)" } else { "" }
                    )),
                }
            }
            let mut marked = def.secret_environment.clone();
            marked.append(&mut secrets);
            marked.sort();
            marked.dedup();
            // From here on these values are secrets of the process: redacted wherever text leaves it (records,
            // reports, logs, the argv echoed in a record).
            crate::util::redact::register_variables(&env, &marked);
            if let Some(b) = &def.build {
                crate::util::redact::register_variables(&b.environment, &marked);
            }
            Some(Target::Spawn(Box::new(SpawnSpec {
                server_name,
                binary,
                kind: def.kind,
                template: def.template.as_ref().map(|t| match (def.kind, model.hub.is_none() && !model.is_dir) {
                    // A kind's own template for a file model, where it has one (mistral.rs: -m DIR -f FILE).
                    (Some(k), true) if def.template_is_kinds => {
                        crate::kinds::template(k, crate::kinds::ModelForm::File)
                    }
                    _ => t.clone(),
                }),
                parallel,
                context,
                model,
                host,
                port,
                model_flag: def.model_flag.clone(),
                host_flag: def.host_flag.clone(),
                port_flag: def.port_flag.clone(),
                arguments,
                environment: env,
                secret_environment: marked,
                build: def.build.clone(),
                draft,
                device: Device::Cpu,
            })))
        } else {
            None
        }
    };
    let server_health = match &target {
        Some(Target::Spawn(s)) => servers.get(&s.server_name).map(|d| d.health_path.clone()),
        // An attached server's kind gives its health path (Ollama has none but `/`).
        Some(Target::Attach(_)) => r.string(p, "kind").and_then(|k| {
            let found = crate::kinds::find(&k);
            if found.is_none() && k != "custom" {
                p.error(&r.at("kind"), unknown_kind(&k));
            }
            found.map(|k| k.health_path.to_owned())
        }),
        None => None,
    };
    if !attach && r.has("kind") {
        p.error(&r.at("kind"), "a started server's kind is `[servers.NAME] kind`");
    }
    let health_path = r.string(p, "health_path").or(server_health).unwrap_or_else(|| "/health".into());
    if !health_path.starts_with('/') {
        p.error(&r.at("health_path"), "must start with /");
    }
    // The profile's kind: its server's, or an attached server's `kind` (checked above); None for `custom`.
    let kind: Option<&'static crate::kinds::Kind> = match &target {
        Some(Target::Spawn(s)) => s.kind,
        Some(Target::Attach(_)) => r.table.get("kind").and_then(|k| k.as_str()).and_then(crate::kinds::find),
        None => None,
    };
    let model_aliases = kind.map_or(&[][..], |k| k.model_aliases);
    let explicit_model = r.string(p, "request_model");
    // A kind whose server must be asked for its model exactly as it was started with, and lists none to learn it
    // from (`transformers serve`): a started one is asked for its launch argument; an attached one needs the name.
    let named_by_launch = kind.is_some_and(|k| crate::kinds::departures(k.name).model_is_launch_argument);
    if named_by_launch && explicit_model.is_none() && matches!(target, Some(Target::Attach(_))) {
        p.error(
            &r.at("request_model"),
            format!(
                "required for kind `{}`: its server refuses any model name but the one it was started with, and \
                 lists none to learn it from",
                kind.map_or("", |k| k.name)
            ),
        );
    }
    let discover_model = explicit_model.is_none()
        && match &target {
            Some(Target::Attach(_)) => !named_by_launch,
            Some(Target::Spawn(s)) => s.kind.is_some_and(|k| k.checks_model_name),
            None => false,
        };
    let request_model = explicit_model.unwrap_or_else(|| match &target {
        Some(Target::Spawn(s)) if named_by_launch => s.fill().model,
        // A hub model is served under its id (the name a kind's server reports).
        Some(Target::Spawn(s)) => s.model.hub.as_ref().map_or_else(|| s.model.name.clone(), |(id, _)| id.clone()),
        _ => "default".into(),
    });
    let declared = r.string_array(p, "features").unwrap_or_default();
    check_features(p, &r, name, &declared, features, &target);
    let suite = match r.string(p, "suite").as_deref() {
        None | Some("default") => Some(Suite::embedded_default()),
        Some(file) => {
            inside_root(p, &r.at("suite"), root, file).and_then(|path| match read_capped(&path, MAX_FILE_BYTES) {
                Ok(text) => {
                    Suite::parse(&text, &path.display().to_string()).map_err(|e| p.error(&r.at("suite"), e)).ok()
                }
                Err(e) => {
                    p.error(&r.at("suite"), format!("`{}`: {e}", path.display()));
                    None
                }
            })
        }
    };
    let hour = Duration::from_secs(3600);
    let load_timeout = r.duration(p, "load_timeout", 2 * hour).unwrap_or(Duration::from_secs(480));
    let request_timeout = r.duration(p, "request_timeout", hour).unwrap_or(Duration::from_secs(120));
    let suite_budget = r.duration(p, "suite_budget", 4 * hour).unwrap_or(Duration::from_secs(300));
    let stop_grace = r.duration(p, "stop_grace", Duration::from_secs(600)).unwrap_or(Duration::from_secs(30));
    let device = match r.string(p, "device") {
        None => Device::Cpu,
        Some(d) => Device::parse(&d).unwrap_or_else(|e| {
            p.error(&r.at("device"), e);
            Device::Cpu
        }),
    };
    let busy_wait = r.duration(p, "busy_wait", Duration::from_secs(3600)).unwrap_or(Duration::from_secs(240));
    let gpu_lock = r.boolean(p, "gpu_lock").unwrap_or(false);
    let runner = r.string_array(p, "runner").unwrap_or_else(|| default_runner(&device));
    if runner.is_empty() || runner.iter().any(|l| l.trim().is_empty()) {
        p.error(&r.at("runner"), "needs at least one non-empty runner label");
    }
    if !device.is_gpu() {
        for key in ["busy_wait", "gpu_lock"] {
            if r.has(key) {
                p.error(&r.at(key), "needs a GPU `device` (\"nvidia:N\" or \"amd:N\")");
            }
        }
    }
    let lossless_against = r.string(p, "lossless_against");
    if let Some(other) = &lossless_against {
        if other == name {
            p.error(
                &r.at("lossless_against"),
                "names this profile itself: it must be the same server without the draft",
            );
        } else if !defined(doc, "profiles", other) {
            p.error(&r.at("lossless_against"), format!("`{other}` is not defined under [profiles]"));
        }
    }
    let mut thresholds = Thresholds {
        min_pass_rate: 0.5,
        fail_regressions: 2,
        decode_ratio_warn: 0.85,
        load_ratio_warn: 1.5,
        load_timeout_seconds: load_timeout.as_secs_f64(),
        request_timeout_seconds: request_timeout.as_secs_f64(),
        suite_budget_seconds: suite_budget.as_secs_f64(),
        expected_failures: Vec::new(),
        draft_acceptance_ratio_warn: gauntlet_schema::default_draft_acceptance_ratio_warn(),
    };
    if let Some(ids) = r.string_array(p, "expected_failures") {
        if let Some(suite) = &suite {
            for (i, id) in ids.iter().enumerate() {
                if !suite.cases.iter().any(|c| &c.id == id) {
                    p.error(
                        &format!("{}[{i}]", r.at("expected_failures")),
                        format!("`{id}` is not a case of suite `{}`", suite.id),
                    );
                }
            }
        }
        thresholds.expected_failures = ids;
    }
    if let Some(vt) = r.table_of(p, "verdict") {
        let path = r.at("verdict");
        p.unknown_keys(vt, &path, keys::<contract::Verdict>());
        let v = Reader::new(vt, path);
        if let Some(x) = v.float(p, "min_pass_rate", 0.0, 1.0) {
            thresholds.min_pass_rate = x;
        }
        if let Some(x) = v.integer(p, "fail_regressions", 1, 1000) {
            thresholds.fail_regressions = x as u32;
        }
        if let Some(x) = v.float(p, "decode_ratio_warn", 0.0, 1.0) {
            thresholds.decode_ratio_warn = x;
        }
        if let Some(x) = v.float(p, "load_ratio_warn", 1.0, 1000.0) {
            thresholds.load_ratio_warn = x;
        }
        if let Some(x) = v.float(p, "draft_acceptance_ratio_warn", 0.0, 1.0) {
            thresholds.draft_acceptance_ratio_warn = x;
        }
    }
    // The dialect follows the server's kind unless the profile names one (the kinds and the dialects are the same
    // engines under the same names); `custom` and no kind speak llama.cpp's.
    let kind_dialect = kind.map(|k| k.name).filter(|k| DIALECTS.contains(k));
    let dialect =
        r.string(p, "dialect").or_else(|| kind_dialect.map(str::to_owned)).unwrap_or_else(|| DIALECTS[0].to_owned());
    if !DIALECTS.contains(&dialect.as_str()) {
        p.error(&r.at("dialect"), format!("unknown dialect `{dialect}` (known: {})", DIALECTS.join(", ")));
    }
    let stream_end = crate::kinds::departures(&dialect).stream_end;
    let extra_body = match r.table_of(p, "extra_body") {
        None => serde_json::Map::new(),
        Some(t) => crate::suite::extra_body(t, &r.at("extra_body")).unwrap_or_else(|problems| {
            for problem in problems {
                p.errors.push(problem);
            }
            serde_json::Map::new()
        }),
    };
    // The kind's Prometheus path unless the profile says otherwise (a server without a kind has none).
    let kind_metrics = kind.and_then(|k| k.metrics_path);
    let metrics_path = match r.table.get("metrics") {
        None | Some(toml::Value::Boolean(true)) => kind_metrics.map(str::to_owned),
        Some(toml::Value::Boolean(false)) => None,
        Some(toml::Value::String(path)) if path.starts_with('/') && !path.chars().any(char::is_control) => {
            Some(path.clone())
        }
        Some(_) => {
            p.error(&r.at("metrics"), "expected `false`, `true` or a path starting with `/` (\"/metrics\")");
            None
        }
    };
    let bench = super::qualify::read_bench_workload(p, &r, root);
    let paired_alternate = super::qualify::read_bench_paired(p, &r);
    let bench_decide = super::qualify::read_bench_decide(p, &r);
    let mut qualify = super::qualify::read_qualify(p, &r, root, load_timeout, suite_budget);
    qualify.monitor.require_rss = !attach;
    if p.errors.len() > errors_before {
        return None;
    }
    let mut target = target?;
    if let Target::Spawn(spec) = &mut target {
        spec.device = device.clone();
    }
    Some(Profile {
        name: name.to_owned(),
        target,
        suite: suite?,
        request_model,
        discover_model,
        model_aliases,
        health_path,
        load_timeout,
        request_timeout,
        suite_budget,
        stop_grace,
        device,
        busy_wait,
        gpu_lock,
        runner,
        thresholds,
        qualify,
        bench,
        paired_alternate,
        bench_decide,
        features: declared,
        dialect,
        stream_end,
        metrics_path,
        extra_body,
        lossless_against,
        missing,
    })
}

/// `draft = "MODEL"` (a `[models]` file) and `draft_arguments`: the draft model of speculative decoding, passed
/// with the kind's draft flag (or a custom server's `draft_flag`). A draft flag given in `server_arguments`
/// instead is refused by the caller: the draft's file must be hashed into the identity.
fn read_draft(
    p: &mut Problems,
    r: &Reader,
    models: &BTreeMap<String, (ModelSpec, Vec<String>)>,
    doc: &Table,
    server: Option<&ServerDef>,
    missing: &mut Vec<String>,
) -> Option<DraftSpec> {
    let arguments = r.string_array(p, "draft_arguments");
    let Some(name) = r.string(p, "draft") else {
        if arguments.is_some() {
            p.error(&r.at("draft_arguments"), "needs `draft` (the draft model)");
        }
        return None;
    };
    let Some((model, problems)) = models.get(&name) else {
        if !defined(doc, "models", &name) {
            p.error(&r.at("draft"), format!("`{name}` is not defined under [models]"));
        }
        return None;
    };
    if model.is_dir || model.hub.is_some() {
        p.error(&r.at("draft"), format!("`{name}` is not a file: a draft model is one file"));
        return None;
    }
    let server = server?;
    let flag = match server.kind {
        Some(k) => match k.draft {
            crate::kinds::Draft::File(f) => f.to_owned(),
            other => {
                p.error(
                    &r.at("draft"),
                    format!(
                        "kind `{}` takes no draft file by flag (its draft: {}); pass it in `server_arguments`",
                        k.name,
                        other.describe()
                    ),
                );
                return None;
            }
        },
        None => match &server.draft_flag {
            Some(f) => f.clone(),
            None => {
                p.error(&r.at("draft"), "the server has no kind and no `draft_flag`: gauntlet cannot pass a draft");
                return None;
            }
        },
    };
    missing.extend(problems.iter().cloned());
    Some(DraftSpec { model: model.clone(), flag, arguments: arguments.unwrap_or_default() })
}

/// Where a profile's CI job runs when the manifest does not say: a hosted runner for the CPU, a self-hosted one
/// with the vendor's label for a GPU.
fn default_runner(device: &Device) -> Vec<String> {
    match device {
        Device::Cpu => vec!["ubuntu-latest".into()],
        Device::Nvidia(_) => vec!["self-hosted".into(), "nvidia".into()],
        Device::Amd(_) => vec!["self-hosted".into(), "amd".into()],
    }
}

/// `[plan]`: which changed paths select which profiles (see `crate::plan`).
#[derive(Debug, Clone, Default)]
pub struct PathTable {
    /// Prefixes that concern every profile (shared engine code, the build system).
    pub shared: Vec<String>,
    /// Prefixes that concern one profile (its model's code, its configuration).
    pub profiles: BTreeMap<String, Vec<String>>,
}

fn read_plan(p: &mut Problems, top: &Reader, profiles: &BTreeMap<String, Profile>) -> PathTable {
    let mut table = PathTable::default();
    let Some(t) = top.table_of(p, "plan") else { return table };
    p.unknown_keys(t, "plan", keys::<contract::Plan>());
    let r = Reader::new(t, "plan");
    table.shared = r.string_array(p, "shared").unwrap_or_default();
    if let Some(pt) = r.table_of(p, "profiles") {
        let pr = Reader::new(pt, "plan.profiles");
        for name in pt.keys() {
            if !profiles.contains_key(name) && p.errors.is_empty() {
                p.error(&pr.at(name), format!("`{name}` is not a profile"));
            }
            if let Some(prefixes) = pr.string_array(p, name) {
                table.profiles.insert(name.clone(), prefixes);
            }
        }
    }
    table
}

fn read_features(p: &mut Problems, top: &Reader) -> BTreeMap<String, Vec<String>> {
    let mut out = BTreeMap::new();
    let Some(t) = top.table_of(p, "features") else { return out };
    for (name, v) in t {
        let path = join("features", name);
        let Some(ft) = v.as_table() else {
            p.error(&path, "expected a table");
            continue;
        };
        p.unknown_keys(ft, &path, keys::<contract::Feature>());
        let r = Reader::new(ft, path);
        match r.string_array(p, "flags") {
            Some(flags) if !flags.is_empty() && flags.iter().all(|f| f.starts_with('-')) => {
                out.insert(name.clone(), flags);
            }
            Some(_) => p.error(&r.at("flags"), "a non-empty list of flags (each starting with -)"),
            None if !r.has("flags") => p.error(&r.at("flags"), "required"),
            None => {}
        }
    }
    out
}

/// A feature flag must be declared by the profile's feature set and a declared feature must be switched on by
/// its flags: a speculative flag in a plain profile would silently change what its baseline means.
fn check_features(
    p: &mut Problems,
    r: &Reader,
    profile: &str,
    declared: &[String],
    features: &BTreeMap<String, Vec<String>>,
    target: &Option<Target>,
) {
    for (i, f) in declared.iter().enumerate() {
        if !features.contains_key(f) {
            p.error(&format!("{}[{i}]", r.at("features")), format!("`{f}` is not defined under [features]"));
        }
    }
    let Some(Target::Spawn(spec)) = target else { return };
    for (i, arg) in spec.arguments.iter().enumerate() {
        for (feature, flags) in features {
            if flags.contains(arg) && !declared.contains(feature) {
                p.error(
                    &format!("{}[{i}]", r.at("server_arguments")),
                    format!(
                        "`{arg}` switches on feature `{feature}`, which profile `{profile}` does not declare; \
                         use a separately named profile with features = [\"{feature}\"]"
                    ),
                );
            }
        }
    }
    for f in declared {
        if let Some(flags) = features.get(f)
            && !spec.arguments.iter().any(|a| flags.contains(a))
        {
            p.error(
                &r.at("features"),
                format!("feature `{f}` is declared but none of its flags {flags:?} is in server_arguments"),
            );
        }
    }
}

/// Reserved flags are the profile's to set; `--opt=value` is refused so that one flag is one token and the
/// reserved-flag check cannot be dodged.
fn check_arguments(p: &mut Problems, path: &str, args: &[String], def: &ServerDef) {
    let mut reserved: Vec<&str> = ALWAYS_RESERVED.to_vec();
    reserved.extend([def.host_flag.as_str(), def.port_flag.as_str()]);
    // A template's flags are gauntlet's too (`--hostname`, `-p`, `--model-path` …).
    if let Some(t) = &def.template {
        reserved.extend(t.iter().filter(|a| a.starts_with('-')).map(String::as_str));
    }
    // So are the kind's slot, context and revision flags: the profile's `parallel` and `context` set them.
    if let Some(k) = def.kind {
        reserved.extend(k.parallel.iter().chain(k.context).chain(k.revision).filter(|a| a.starts_with('-')));
    }
    if let Some(m) = &def.model_flag {
        reserved.push(m);
    }
    for (i, a) in args.iter().enumerate() {
        let at = format!("{path}[{i}]");
        if a.starts_with('-') && a.contains('=') {
            let (flag, value) = a.split_once('=').unwrap_or((a, ""));
            p.error(&at, format!("`{a}`: write the flag and its value as separate tokens (\"{flag}\", \"{value}\")"));
        } else if reserved.contains(&a.as_str()) {
            p.error(&at, format!("`{a}` is set by the profile (model, host and port are owned by gauntlet)"));
        }
    }
}

/// A kind's template must be able to start the profile's model form, and take its parallel and context settings.
fn check_kind(
    p: &mut Problems,
    r: &Reader,
    model: &ModelSpec,
    def: &ServerDef,
    parallel: Option<u32>,
    context: Option<u32>,
) {
    use crate::kinds::ModelForm;
    let Some(kind) = def.kind else {
        for key in ["parallel", "context"] {
            if r.has(key) {
                p.error(&r.at(key), "needs a server `kind` whose template places it (write it in `server_arguments`)");
            }
        }
        if model.hub.is_some() || model.is_dir {
            p.error(&r.at("model"), "a directory or hub model needs a server `kind` (a custom server takes one file)");
        }
        return;
    };
    let form = match (&model.hub, model.is_dir) {
        (Some(_), _) => ModelForm::Hub,
        (None, true) => ModelForm::Dir,
        (None, false) => ModelForm::File,
    };
    // A file a kind does not list may still exist where the path is only known at run time (an unbuilt model
    // file is reported as missing on its own).
    if !kind.models.contains(&form) && (form != ModelForm::File || model.path.exists()) {
        p.error(
            &r.at("model"),
            format!(
                "server kind `{}` starts {} model, not {}",
                kind.name,
                kind.models.iter().map(|f| f.as_str()).collect::<Vec<_>>().join(" or "),
                form.as_str()
            ),
        );
    }
    if form == ModelForm::Hub && kind.revision.is_empty() && def.template_is_kinds {
        p.warnings.push(format!(
            "{}: server kind `{}` has no revision flag: the pinned revision is recorded, not enforced",
            r.at("model"),
            kind.name
        ));
    }
    for (key, set, fragment, env) in [
        ("parallel", parallel.is_some(), kind.parallel, "{parallel}"),
        ("context", context.is_some(), kind.context, "{context}"),
    ] {
        if set && fragment.is_empty() && !kind.environment.iter().any(|(_, v)| v.contains(env)) {
            p.error(&r.at(key), format!("server kind `{}` has no way to set it", kind.name));
        }
    }
}

/// An unknown `kind`, with the likely one.
fn unknown_kind(k: &str) -> String {
    let names = crate::kinds::names();
    match crate::util::suggest::did_you_mean(k, &names) {
        Some(near) => format!("unknown kind `{}`; did you mean `{near}`?", k.escape_debug()),
        None => format!("unknown kind `{}` (kinds: {})", k.escape_debug(), names.join(", ")),
    }
}

/// `program` found on PATH (a kind's default program).
/// A program named without a directory (a kind's program): found on a PATH, not at a path.
fn is_bare(program: &Path) -> bool {
    program.is_relative() && program.components().count() == 1
}

/// The program a bare name stands for: the first executable of that name on the PATH the server will be spawned
/// with (its `environment`'s PATH where it sets one, else gauntlet's, which the spawn passes on).
pub(crate) fn resolve_program(program: &Path, environment: &BTreeMap<String, String>) -> Option<PathBuf> {
    let path = match environment.get("PATH") {
        Some(p) => std::ffi::OsString::from(p),
        None => std::env::var_os("PATH")?,
    };
    std::env::split_paths(&path).map(|d| d.join(program)).find(|f| executable_problem(f).is_none())
}

fn defined(doc: &Table, section: &str, name: &str) -> bool {
    doc.get(section).and_then(|s| s.as_table()).is_some_and(|t| t.contains_key(name))
}

pub(crate) fn executable_problem(file: &Path) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(file) {
        Err(_) => Some(format!("server binary `{}` does not exist", file.display())),
        Ok(m) if !m.is_file() => Some(format!("`{}` is not a file", file.display())),
        Ok(m) if m.permissions().mode() & 0o111 == 0 => {
            Some(format!("server binary `{}` is not executable", file.display()))
        }
        Ok(_) => None,
    }
}

/// `headers_env = { "X-Org" = "ORG_HEADER" }`: header names a server accepts (an HTTP token, not one gauntlet sets
/// itself), each with the environment variable that holds its value.
fn headers_env(r: &Reader, p: &mut Problems) -> Vec<(String, String)> {
    const OWN: &[&str] = &["host", "content-type", "content-length", "authorization", "accept", "transfer-encoding"];
    let mut out = Vec::new();
    for (name, var) in r.string_map(p, "headers_env").unwrap_or_default() {
        let at = join(&r.at("headers_env"), &name);
        let token = !name.is_empty()
            && name.len() <= 64
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !token {
            p.error(&at, "is not a header name (letters, digits and !#$%&'*+-.^_`|~)");
        } else if OWN.contains(&name.to_ascii_lowercase().as_str()) {
            p.error(&at, "is a header gauntlet sets itself (the API key goes in `api_key_env`)");
        } else if var.is_empty() || !var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            p.error(&at, "must name an environment variable");
        } else {
            out.push((name, var));
        }
    }
    out
}
