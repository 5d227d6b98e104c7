//! One file per command, and the helpers they share, each once: manifest loading, profile selection, output
//! folder naming, GitHub step-summary output, and the mapping of engine errors onto the exit map's kinds. Commands
//! call the engine and draw the terminal; none of them decides a verdict.

pub(crate) mod baseline;
pub(crate) mod bench;
pub(crate) mod build;
pub(crate) mod check;
pub(crate) mod compare;
pub(crate) mod completions;
pub(crate) mod doctor;
pub(crate) mod init;
pub(crate) mod paired;
pub(crate) mod plan;
pub(crate) mod qualify;
pub(crate) mod report;
pub(crate) mod run;
pub(crate) mod schema;
pub(crate) mod verify;

use crate::terminal::errln;
use std::io::Write;
use std::path::{Path, PathBuf};

use gauntlet_engine::manifest::{Manifest, Profile, Target};
use gauntlet_engine::run::GateError;
use gauntlet_engine::server::SpawnError;
use gauntlet_engine::store::StoreError;
use gauntlet_engine::util::bounded;
use gauntlet_schema::RunRecord;

use crate::exit::{Exit, Failure};

/// The manifest at `path`, or the embedded default; any problem (an unknown key included) is bad input.
pub(crate) fn load_manifest(path: Option<&Path>) -> Result<Manifest, Failure> {
    let manifest = match path {
        Some(p) => Manifest::from_file(p),
        None => Manifest::embedded_default(&gauntlet_engine::home_dir()),
    }
    .map_err(|e| Failure::bad_input(e.to_string()))?;
    for w in &manifest.warnings {
        errln!("gauntlet: warning: {}: {w}", manifest.origin);
    }
    Ok(manifest)
}

/// The chosen profile, with `--port` applied to a server gauntlet starts.
pub(crate) fn select_profile(manifest: &Manifest, name: Option<&str>, port: Option<u16>) -> Result<Profile, Failure> {
    let mut profile = manifest.select(name).map_err(|e| Failure::bad_input(e.to_string()))?.clone();
    if let Some(port) = port {
        match &mut profile.target {
            Target::Spawn(s) if port > 0 => s.port = port,
            Target::Spawn(_) => return Err(Failure::bad_input("--port: must be 1..=65535")),
            Target::Attach(_) => {
                return Err(Failure::bad_input(format!(
                    "--port: profile `{}` attaches to a running server; its address is its `base_url`",
                    profile.name
                )));
            }
        }
    }
    Ok(profile)
}

/// A new timestamped folder under `./gauntlet-out/` for `name` (never an existing one).
pub(crate) fn default_out_dir(name: &str) -> PathBuf {
    let stamp = gauntlet_engine::util::now_rfc3339().replace([':', '-'], "");
    let stamp = stamp.split('.').next().unwrap_or("run").to_owned();
    let base = PathBuf::from("gauntlet-out");
    let mut dir = base.join(format!("{stamp}-{name}"));
    let mut n = 2;
    while dir.exists() {
        dir = base.join(format!("{stamp}-{name}-{n}"));
        n += 1;
    }
    dir
}

/// Appends to `$GITHUB_STEP_SUMMARY` when it is set; a failure only warns (the result is already out).
pub(crate) fn append_step_summary(text: &[u8]) {
    if let Some(summary) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|s| !s.is_empty()) {
        let appended = gauntlet_engine::util::bounded::append(Path::new(&summary)).and_then(|mut f| {
            f.write_all(text)?;
            f.write_all(b"\n")
        });
        if let Err(e) = appended {
            errln!("gauntlet: warning: cannot append to GITHUB_STEP_SUMMARY: {e}");
        }
    }
}

/// Annotations on stdout when running under GitHub Actions; the Markdown report appended to the step summary.
pub(crate) fn publish_to_github(record: &RunRecord, out_dir: &Path) {
    if std::env::var("GITHUB_ACTIONS").as_deref() == Ok("true") {
        crate::terminal::workflow_commands(&gauntlet_engine::report::github_annotations(record));
    }
    if let Ok(report) = bounded::read_bytes(&out_dir.join("report.md"), bounded::RECORD_CAP) {
        append_step_summary(&report);
    }
}

/// What a run, bench or qualification that could not be carried out is: a busy GPU, an output that cannot be
/// written or a server log that cannot be created is infrastructure (3); a GPU whose state cannot be told fails
/// closed (1); a server that cannot start, a missing API key or a profile that must name one of the server's
/// several models is bad input (2).
pub(crate) fn gate_failure(e: GateError) -> Failure {
    match e {
        GateError::BuildTimeout(why) | GateError::ToolMissing(why) => Failure::infrastructure(why),
        GateError::GpuBusy(_) => Failure::infrastructure(e.to_string()),
        GateError::BuildStart(why) | GateError::AmbiguousModel(why) => Failure::bad_input(why),
        GateError::GpuUnknown { .. } => Failure::fail_closed(e.to_string()),
        GateError::Out { .. } | GateError::Spawn(SpawnError::Log { .. }) => Failure::infrastructure(e.to_string()),
        GateError::Spawn(_) | GateError::ApiKey(_) | GateError::ApiKeyInvalid(_) | GateError::Transport(_) => {
            Failure::bad_input(e.to_string())
        }
    }
}

/// A store that cannot be read or written (or is locked by another writer) is infrastructure; one that refuses
/// what it was given, or is of a newer format, is bad input.
pub(crate) fn store_failure(e: StoreError) -> Failure {
    match e {
        StoreError::Io { .. } | StoreError::Locked { .. } | StoreError::BadLock { .. } => {
            Failure::infrastructure(e.to_string())
        }
        StoreError::Newer { .. } | StoreError::Invalid(_) => Failure::bad_input(e.to_string()),
    }
}

/// A file gauntlet was asked to write and could not: infrastructure.
pub(crate) fn unwritable(path: &Path, e: impl std::fmt::Display) -> Failure {
    Failure::infrastructure(format!("cannot write `{}`: {e}", path.display()))
}

/// A bench's or a qualification's verdict word: `pass`, `inconclusive`, anything else fails.
pub(crate) fn exit_of_word(verdict: &str) -> Exit {
    match verdict {
        "pass" => Exit::Pass,
        "inconclusive" => Exit::Inconclusive,
        _ => Exit::Fail,
    }
}

/// A bench baseline of the same identity, or a clear refusal.
pub(crate) fn bench_baseline(
    path: Option<&Path>,
    identity: &gauntlet_engine::identity::Identity,
) -> Result<Option<(gauntlet_engine::run::BenchRecord, String)>, Failure> {
    let Some(path) = path else { return Ok(None) };
    let b = gauntlet_engine::run::read_bench(path).map_err(|e| Failure::bad_input(e.to_string()))?;
    if b.identity_digest != identity.digest {
        let null = serde_json::Value::Null;
        let diff = gauntlet_engine::identity::differences(&b.identity, &identity.value, &null, &null);
        return Err(Failure::bad_input(format!(
            "refusing to compare with `{}`: another identity ({})",
            path.display(),
            diff.refusing.join("; ")
        )));
    }
    Ok(Some((b, path.display().to_string())))
}

/// The identity of a profile on this machine; a model or binary that cannot be hashed is bad input.
pub(crate) fn identity_of(profile: &Profile) -> Result<gauntlet_engine::identity::Identity, Failure> {
    gauntlet_engine::session::compute_identity(profile, &gauntlet_engine::home_dir())
        .map_err(|e| Failure::bad_input(e.to_string()))
}

/// A session that could not run: a busy GPU or a build past its cap leaves `skipped.json` in the output folder (so a
/// merged report shows it as skipped, not missing) in every command; then the error's exit kind.
pub(crate) fn skip_or_fail(out_dir: &Path, profile: &str, e: GateError) -> Failure {
    match &e {
        GateError::GpuBusy(why) => write_skip(out_dir, profile, gauntlet_schema::SkipKind::GpuBusy, &why.to_string()),
        GateError::BuildTimeout(why) => write_skip(out_dir, profile, gauntlet_schema::SkipKind::BuildTimeout, why),
        _ => {}
    }
    gate_failure(e)
}

/// A skipped run leaves `skipped.json` in its output folder, so a merged report shows it as skipped, not missing.
fn write_skip(out_dir: &Path, profile: &str, kind: gauntlet_schema::SkipKind, reason: &str) {
    let skip = gauntlet_schema::SkipRecord {
        gauntlet_version: env!("CARGO_PKG_VERSION").into(),
        profile: profile.into(),
        kind,
        reason: reason.into(),
        at: gauntlet_engine::util::now_rfc3339(),
    };
    let written = std::fs::create_dir_all(out_dir).and_then(|_| {
        let text = serde_json::to_vec_pretty(&skip).map_err(std::io::Error::other)?;
        gauntlet_engine::util::write_atomic(&out_dir.join("skipped.json"), &text)
    });
    if let Err(e) = written {
        errln!("gauntlet: warning: cannot write {}: {e}", out_dir.join("skipped.json").display());
    }
}
