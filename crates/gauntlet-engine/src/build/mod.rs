//! A server's build step (`[servers.NAME.build]`): its argvs run in order in a persistent build directory, in
//! their own process group under the same supervision as a server (`crate::server`), capped by the build's
//! timeout, output into `build.log` of the run's folder. With a `source`, a content digest of that tree and the
//! commands key the build: when both equal those of the last successful build recorded in the build directory
//! (and the binary exists), nothing runs.
//!
//! It must never run a shell, never leave a process behind (a build past its cap has its whole group killed),
//! and never delete a build directory: an existing tree is reused (`cmake --build` on it is a quick no-op).

mod source;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use gauntlet_schema::BuildRecord;
use serde::{Deserialize, Serialize};

use crate::manifest::BuildSpec;
use crate::server::{ServerProcess, StopOutcome, describe_exit};

pub use source::{SourceError, tree_digest};

/// The record of the last successful build, kept in the build directory.
const STATE_FILE: &str = ".gauntlet-build.json";
/// How long a stopped build may take to exit on SIGTERM before its group is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// Problems that are not the change's fault: the build could not be started, or it ran past its cap.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Infrastructure (exit 3): the build was stopped at its cap, its process group killed.
    #[error("the build of server `{server}` ran past its cap of {cap} and was stopped (log: {log})")]
    TimedOut { server: String, cap: String, log: String },
    /// The build could not start (a missing program, an unwritable directory): the manifest or the machine.
    #[error("the build of server `{server}` could not start: {reason}")]
    Start { server: String, reason: String },
}

/// How a build step ended when it ran to the end (or was skipped).
#[derive(Debug, Clone)]
pub struct BuildOutcome {
    pub record: BuildRecord,
    /// The command that failed, and the last lines of the log, when a command exited non-zero.
    pub failed: Option<(Vec<String>, Vec<String>)>,
}

#[derive(Debug, Serialize, Deserialize, PartialEq)]
struct State {
    commands: Vec<Vec<String>>,
    environment: BTreeMap<String, String>,
    source_digest: Option<String>,
    binary_sha256: Option<String>,
}

/// The content digest of `spec.source` (the build directory left out when it lies inside), when it has one.
fn source_digest(spec: &BuildSpec) -> Result<Option<String>, BuildError> {
    let Some(src) = &spec.source else { return Ok(None) };
    tree_digest(src, &spec.dir, &spec.dir.join(".gauntlet-source-memo.json"))
        .map(Some)
        .map_err(|e| BuildError::Start { server: spec.server.clone(), reason: e.to_string() })
}

/// The digest recorded by the last successful build in `spec.dir`, if any (for a run that did not build).
pub fn recorded_source_digest(spec: &BuildSpec) -> Option<String> {
    read_state(&spec.dir).and_then(|s| s.source_digest)
}

fn read_state(dir: &Path) -> Option<State> {
    let text = crate::util::bounded::read_bytes(&dir.join(STATE_FILE), crate::util::bounded::SMALL_CAP).ok()?;
    serde_json::from_slice(&text).ok()
}

/// The environment of the build: the manifest's, plus ccache as the compiler launcher when it is on `PATH` and
/// the manifest does not choose a launcher itself.
fn environment(spec: &BuildSpec) -> BTreeMap<String, String> {
    let mut env = spec.environment.clone();
    if on_path("ccache") {
        for key in ["CMAKE_C_COMPILER_LAUNCHER", "CMAKE_CXX_COMPILER_LAUNCHER"] {
            env.entry(key.into()).or_insert_with(|| "ccache".into());
        }
    }
    env
}

fn on_path(program: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH").is_some_and(|path| {
        std::env::split_paths(&path).any(|d| {
            std::fs::metadata(d.join(program)).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
    })
}

/// Runs (or skips) the build of `spec` for `binary`; its output goes to `out_dir/build.log`.
pub fn run(spec: &BuildSpec, binary: &Path, out_dir: &Path) -> Result<BuildOutcome, BuildError> {
    let started = Instant::now();
    let start_err = |reason: String| BuildError::Start { server: spec.server.clone(), reason };
    std::fs::create_dir_all(&spec.dir).map_err(|e| start_err(format!("{}: {e}", spec.dir.display())))?;
    std::fs::create_dir_all(out_dir).map_err(|e| start_err(format!("{}: {e}", out_dir.display())))?;
    let log_path = out_dir.join("build.log");
    let environment = environment(spec);
    // The environment as the state file holds it: its secrets redacted, as every written file's are.
    let recorded: BTreeMap<String, String> =
        environment.iter().map(|(k, v)| (k.clone(), crate::util::redact::text(v).into_owned())).collect();
    let digest = source_digest(spec)?;
    let mut record = BuildRecord {
        server: spec.server.clone(),
        commands: spec.commands.clone(),
        ran: false,
        seconds: 0.0,
        exit: None,
        timeout_seconds: spec.timeout.as_secs_f64(),
        source_digest: digest.clone(),
        log: "build.log".into(),
    };
    let home = crate::util::home_dir();
    let binary_sha = || crate::util::sha256_file_memo(binary, &home).ok();
    if digest.is_some()
        && let Some(state) = read_state(&spec.dir)
        && state.commands == spec.commands
        && state.environment == recorded
        && state.source_digest == digest
        && state.binary_sha256.is_some()
        && state.binary_sha256 == binary_sha()
    {
        let _ = crate::util::bounded::create(&log_path).and_then(|mut f| {
            use std::io::Write as _;
            f.write_all(b"build skipped: source and commands unchanged since the last build\n")
        });
        record.seconds = started.elapsed().as_secs_f64();
        return Ok(BuildOutcome { record, failed: None });
    }
    record.ran = true;
    let deadline = started + spec.timeout;
    for argv in &spec.commands {
        let log =
            crate::util::bounded::append(&log_path).map_err(|e| start_err(format!("{}: {e}", log_path.display())))?;
        let mut p = ServerProcess::spawn_group(argv, &environment, Some(&spec.dir), log, &log_path)
            .map_err(|e| start_err(e.to_string()))?;
        match p.wait_until(deadline) {
            Some(status) => {
                // The leader exited: anything it left in its group is killed now (a build leaves nothing).
                let _ = p.stop(STOP_GRACE);
                record.exit = Some(describe_exit(status));
                if !status.success() {
                    record.seconds = started.elapsed().as_secs_f64();
                    let tail = crate::server::log_tail(&log_path, 20);
                    return Ok(BuildOutcome { record, failed: Some((argv.clone(), tail)) });
                }
            }
            None => {
                let (outcome, _) = p.stop(STOP_GRACE);
                let cap = humantime::format_duration(spec.timeout).to_string();
                let how = if outcome == StopOutcome::Stuck { "; a process survived SIGKILL" } else { "" };
                return Err(BuildError::TimedOut {
                    server: spec.server.clone(),
                    cap: format!("{cap}{how}"),
                    log: log_path.display().to_string(),
                });
            }
        }
    }
    record.seconds = started.elapsed().as_secs_f64();
    let state = State {
        commands: spec.commands.clone(),
        environment: recorded,
        source_digest: digest,
        binary_sha256: binary_sha(),
    };
    if let Ok(bytes) = serde_json::to_vec_pretty(&state) {
        // A state that cannot be written only costs a rebuild next time.
        let _ = crate::util::write_atomic(&spec.dir.join(STATE_FILE), &bytes);
    }
    Ok(BuildOutcome { record, failed: None })
}

/// `identity.build` of a spawned server: its binary's sha256, the source digest it was built from (when
/// gauntlet built it from a `source`), and whether gauntlet's build step made it.
pub fn identity_member(
    binary: &Path,
    build: Option<&BuildSpec>,
    outcome: Option<&BuildOutcome>,
    home: &Path,
) -> serde_json::Value {
    let sha = crate::util::sha256_file_memo(binary, home).ok();
    let source = match (outcome, build) {
        (Some(o), _) => o.record.source_digest.clone(),
        (None, Some(spec)) => recorded_source_digest(spec),
        (None, None) => None,
    };
    serde_json::json!({"binary_sha256": sha, "source_digest": source, "built": build.is_some()})
}
