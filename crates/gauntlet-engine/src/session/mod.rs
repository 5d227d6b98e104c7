//! One server session: the single owner of a server's lifecycle for the gate, bench and qualify (doctor shares
//! its device, holder and port checks). Nothing else spawns or stops a server.
//!
//! [`Session::open`] does, in this order:
//! 1. the build step, when the server has one (`crate::build`): a failed build ends the session before anything
//!    starts; a build past its cap is infrastructure ([`SessionError::BuildTimeout`]);
//! 2. the busy-GPU wait (after the host lock), never counting the server under test: for an attached server the
//!    processes that own the listening port of its `base_url` are left out (where they cannot be found, a note
//!    says so and every holder counts);
//! 3. the kernel-log bracket is opened;
//! 4. the server is spawned (its own process group) or attached to;
//! 5. readiness: the health path, else `/v1/models`, and always one tiny real generation, bounded by the load
//!    timeout (see [`steps::wait_ready`]); a profile without `request_model` learns it from `/v1/models`.
//!
//! The issue sketched the bracket and the GPU wait after readiness. They come before the spawn here on purpose:
//! a fault while the model loads (an Xid on the first allocation, an amdgpu page fault) must fall inside the
//! bracket, and before the spawn our own server is not yet on the GPU, so the wait cannot mistake it for someone
//! else. The readiness clock starts at the spawn, so neither adds to the load time.
//!
//! [`Session::close`] stops the server (SIGTERM → grace → SIGKILL → stuck), kills what of its group outlived it,
//! closes the bracket after a short recorded grace, and returns every event and finding. One GPU probe (one NVML
//! handle) serves the whole session. The session must never write to the terminal (it reports [`RunEvent`]s) and
//! never decide a verdict.

pub mod describe;
mod identity;
pub mod metrics;
mod patience;
mod steps;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use gauntlet_schema::{Finding, FindingKind, SentryRecord, ServerEvent, Severity};
use serde_json::Value;

use crate::build::{BuildError, BuildOutcome};
use crate::client::Client;
use crate::manifest::{Profile, Target};
use crate::sentry::gpu;
use crate::server::{ServerProcess, SpawnError};

pub use crate::server::server_pids;
pub use identity::compute_identity;
pub use patience::{Budget, BusyPatience, Look, Threads};
pub use steps::OnGpu;
pub(crate) use steps::server_build_info;
pub(crate) use steps::server_on_gpu;

/// After the server stopped, the kernel log stays open this long. Teardown faults of a process (NVIDIA Xid 45,
/// amdgpu queue-eviction failures) are logged while the driver releases its device files, which happens as the
/// process exits and before its parent can reap it; by the time the stop returns they are in the ring, and the
/// final drain reads to its end. The grace only covers a driver that logs from a deferred worker a moment later.
pub const KERNEL_LOG_GRACE: Duration = Duration::from_millis(50);

/// Progress, for whatever view the caller has (terminal bar, plain lines, nothing).
#[derive(Debug, Clone)]
pub enum RunEvent {
    Started {
        profile: String,
        cases: usize,
        base_url: String,
    },
    Loading,
    Loaded {
        seconds: Option<f64>,
    },
    LoadFailed {
        reason: String,
    },
    CaseFinished {
        index: usize,
        total: usize,
        case: Box<gauntlet_schema::CaseRecord>,
    },
    Stopping,
    Finished {
        verdict: gauntlet_schema::Verdict,
    },
    /// Something worth a line of its own (the GPU was busy and freed, say).
    Note(String),
}

pub trait Reporter {
    fn event(&mut self, event: &RunEvent);
}

/// A reporter that ignores everything (tests, scripts).
pub struct Silent;
impl Reporter for Silent {
    fn event(&mut self, _: &RunEvent) {}
}

/// Why a session did not open: problems with the inputs (exit 2), or infrastructure that was not there (the GPU
/// stayed busy, a build ran past its cap: exit 3), or a GPU whose holders cannot be told (fail closed, exit 1).
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error("api key variable `{0}` is not set")]
    ApiKey(String),
    /// The key would reach an HTTP header: a control character (CR, LF, NUL …) there could inject a header. The
    /// value itself is never shown.
    #[error("api key variable `{0}` holds a control character, which no HTTP header may carry")]
    ApiKeyInvalid(String),
    /// The profile's CA file or extra headers cannot be used (unreadable, not PEM, a variable unset or unsendable).
    /// Never shows a header's value.
    #[error("{0}")]
    Transport(String),
    #[error("cannot create output directory `{path}`: {source}")]
    Out { path: PathBuf, source: std::io::Error },
    /// Someone else still holds the GPU after the wait: the run is skipped, not failed.
    #[error(transparent)]
    GpuBusy(#[from] GpuBusy),
    /// Whether the GPU is free cannot be told: fail closed rather than measure on a shared device.
    #[error("cannot tell whether {device} is free: {source}")]
    GpuUnknown {
        device: String,
        #[source]
        source: gpu::ProbeError,
    },
    /// The build ran past its cap and was stopped: infrastructure, the run is skipped.
    #[error("{0}")]
    BuildTimeout(String),
    /// The build could not start (a missing program, an unwritable build directory).
    #[error("{0}")]
    BuildStart(String),
    /// A tool a stage needs is not installed (lm-eval for R2): infrastructure; the message says how to install it.
    #[error("{0}")]
    ToolMissing(String),
    /// The server serves several models and the profile names none: bad input (exit 2), the models listed.
    #[error("{0}")]
    AmbiguousModel(String),
}

/// Why the GPU was not had: another gauntlet kept the host lock, or another process still held the device after the
/// wait.
#[derive(Debug, thiserror::Error)]
pub enum GpuBusy {
    #[error(transparent)]
    Locked(#[from] gpu::LockError),
    #[error("{device} is still in use after {:.0}s: {}", .waited.as_secs_f64(), listed(.holders))]
    Held { device: String, waited: Duration, holders: Vec<gpu::Holder> },
}

/// The holders, as a message lists them.
fn listed(holders: &[gpu::Holder]) -> String {
    holders.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// Why [`Session::restart`] did not bring the server back.
#[derive(Debug, thiserror::Error)]
pub enum RestartError {
    #[error("attached: gauntlet did not start this server, so it does not restart it")]
    Attached,
    #[error("the server was never started")]
    NeverStarted,
    /// The stop before the restart was not a clean SIGTERM exit (`killed`, `stuck`, `crashed`).
    #[error("the server did not stop cleanly for the restart ({stop})")]
    Unclean { stop: gauntlet_schema::StopOutcome },
    #[error("the restart failed: {0}")]
    Spawn(#[source] SpawnError),
    /// The restarted server did not become ready; the reason is readiness's, as its finding says it.
    #[error("after the restart: {reason}")]
    NotReady { reason: String },
}

impl From<BuildError> for SessionError {
    fn from(e: BuildError) -> SessionError {
        match e {
            BuildError::TimedOut { .. } => SessionError::BuildTimeout(e.to_string()),
            BuildError::Start { .. } => SessionError::BuildStart(e.to_string()),
        }
    }
}

/// The server's events and the lifecycle findings, on the session's clock.
pub struct Lifecycle {
    pub started: Instant,
    pub events: Vec<ServerEvent>,
    pub findings: Vec<Finding>,
}

impl Lifecycle {
    pub fn new() -> Lifecycle {
        Lifecycle { started: Instant::now(), events: Vec::new(), findings: Vec::new() }
    }

    pub fn event(&mut self, kind: &str, detail: impl Into<String>) {
        self.events.push(ServerEvent {
            at: self.started.elapsed().as_secs_f64(),
            kind: kind.into(),
            detail: detail.into(),
        });
    }

    pub fn finding(
        &mut self,
        kind: impl Into<FindingKind>,
        severity: Severity,
        message: impl Into<String>,
        case: Option<&str>,
    ) {
        self.findings.push(Finding {
            kind: kind.into(),
            severity,
            message: message.into(),
            case: case.map(str::to_owned),
        });
    }
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle::new()
    }
}

pub struct SessionOptions<'a> {
    /// The run's folder: `server.log` and `build.log` go here.
    pub out_dir: &'a Path,
    /// A cap on readiness below the load timeout (a qualification's R0 stage budget).
    pub ready_limit: Option<Duration>,
    /// The build already done by the caller (`gauntlet run` builds before its skip-cache lookup).
    pub built: Option<BuildOutcome>,
    /// Announce a `Started` event with this many cases (the gate).
    pub announce_cases: Option<usize>,
}

/// An open session. Dropping it without [`Session::close`] still kills the server group (see `crate::server`).
pub struct Session {
    pub base_url: String,
    /// The spawned server's argv (empty when attached).
    pub command: Vec<String>,
    pub api_key: Option<String>,
    pub client: Client,
    pub life: Lifecycle,
    /// Readiness: the load seconds (None when attached), or why it failed.
    pub load: Result<Option<f64>, String>,
    /// The spawned server's CPU time and wait for a CPU at ready (see [`gauntlet_schema::LoadCpu`]).
    pub load_cpu: Option<gauntlet_schema::LoadCpu>,
    /// Readiness was cut by `ready_limit`.
    pub ready_timed_out: bool,
    /// Which probe answered first, and the model learned from `/v1/models`; None until ready.
    pub readiness: Option<gauntlet_schema::Readiness>,
    /// The `model` every request names: the profile's, or the one readiness discovered.
    pub model: String,
    pub build: Option<BuildOutcome>,
    /// `identity.build` of a spawned server (see `crate::identity`).
    pub build_identity: Option<Value>,
    /// Seconds waited for the GPU and who held it meanwhile.
    pub gpu_wait: Option<(f64, Vec<String>)>,
    pub(crate) process: Option<ServerProcess>,
    /// An attached server's listeners on this machine, found at the first [`Session::threads`] (empty: none seen).
    attached_listeners: std::sync::OnceLock<Vec<i32>>,
    /// The scrape of the server's `/metrics` before the run, where the profile has a metrics path.
    metrics: Option<metrics::MetricsProbe>,
    bracket: Option<Result<crate::sentry::kmsg::Bracket, crate::sentry::KernelLogError>>,
    probe: Box<dyn gpu::Probe>,
    _lock: Option<gpu::HostLock>,
}

/// What [`Session::close`] hands back.
pub struct Closed {
    /// `terminated`, `killed`, `stuck`, `crashed`, `attached`, or `not-started`.
    pub stop: gauntlet_schema::StopOutcome,
    pub sentry: SentryRecord,
    pub life: Lifecycle,
    pub pid: Option<u32>,
    pub log_tail: Vec<String>,
}

impl Session {
    /// Build → busy-GPU wait → kernel-log bracket → spawn or attach → readiness (see the module doc). Readiness
    /// runs on `rt`. A failed build or readiness is not an error: the session is open with `load` saying why.
    pub fn open(
        profile: &Profile,
        opts: SessionOptions,
        rt: &tokio::runtime::Runtime,
        reporter: &mut dyn Reporter,
    ) -> Result<Session, SessionError> {
        let mut life = Lifecycle::new();
        std::fs::create_dir_all(opts.out_dir)
            .map_err(|source| SessionError::Out { path: opts.out_dir.into(), source })?;
        let api_key = match &profile.target {
            Target::Attach(a) => match &a.api_key_env {
                Some(var) => {
                    let key = std::env::var(var).map_err(|_| SessionError::ApiKey(var.clone()))?;
                    if key.chars().any(char::is_control) {
                        return Err(SessionError::ApiKeyInvalid(var.clone()));
                    }
                    // From here on the key is a secret of the process: redacted wherever text leaves it.
                    crate::util::redact::register(&key);
                    Some(key)
                }
                None => None,
            },
            Target::Spawn(_) => None,
        };
        let (base_url, command) = match &profile.target {
            Target::Spawn(s) => (s.base_url(), s.command()),
            Target::Attach(a) => (a.base_url.clone(), Vec::new()),
        };
        let client = match &profile.target {
            Target::Attach(a) => Client::with_transport(&base_url, api_key.clone(), &transport(a)?)
                .map_err(|e| SessionError::Transport(format!("profile `{}`: {e}", profile.name)))?,
            Target::Spawn(_) => Client::new(&base_url, api_key.clone()),
        }
        // The stream's end is the kind's: `[DONE]`, or the body's end after the finish chunk.
        .ending_streams_at_close(profile.stream_end == crate::kinds::StreamEnd::FinishThenClose);
        let probe = gpu::probe();
        let mut session = Session {
            base_url,
            command,
            api_key,
            client,
            life: Lifecycle::new(),
            load: Err("not started".into()),
            load_cpu: None,
            ready_timed_out: false,
            readiness: None,
            model: profile.request_model.clone(),
            build: None,
            build_identity: None,
            gpu_wait: None,
            process: None,
            attached_listeners: std::sync::OnceLock::new(),
            metrics: profile.metrics_path.as_deref().map(metrics::MetricsProbe::new),
            bracket: None,
            probe,
            _lock: None,
        };

        // 1. Build.
        if let Target::Spawn(s) = &profile.target {
            let outcome = match (opts.built, &s.build) {
                (Some(done), _) => Some(done),
                (None, Some(spec)) => Some(crate::build::run(spec, &s.binary, opts.out_dir)?),
                (None, None) => None,
            };
            let mut build_failed = false;
            if let Some(o) = &outcome {
                let what = if o.record.ran { "ran" } else { "skipped (source and commands unchanged)" };
                life.event("build", format!("{what} in {:.2}s", o.record.seconds));
                if let Some((argv, tail)) = &o.failed {
                    let what = format!(
                        "the build of server `{}` failed: `{}` ended with {}; last lines of build.log:\n{}",
                        o.record.server,
                        argv.join(" "),
                        o.record.exit.as_deref().unwrap_or("?"),
                        tail.join("\n")
                    );
                    life.finding(FindingKind::BuildFailed, Severity::Fail, what.clone(), None);
                    session.load = Err(format!("the build of server `{}` failed", o.record.server));
                    build_failed = true;
                } else if let Some(problem) = crate::manifest::executable_problem(&s.binary) {
                    let what = format!("the build of server `{}` ended but left no server: {problem}", o.record.server);
                    life.finding(FindingKind::BuildFailed, Severity::Fail, what, None);
                    session.load = Err(format!("the build of server `{}` left no binary", o.record.server));
                    build_failed = true;
                }
            }
            session.build_identity = Some(crate::build::identity_member(
                &s.binary,
                s.build.as_ref(),
                outcome.as_ref(),
                &crate::util::home_dir(),
            ));
            session.build = outcome;
            if build_failed {
                session.life = life;
                return Ok(session);
            }
        }

        // 2. The GPU, never counting the server under test.
        let exclude = match &profile.target {
            Target::Attach(_) if profile.device.is_gpu() => match server_pids(&session.base_url) {
                Ok(pids) => pids,
                Err(why) => {
                    reporter.event(&RunEvent::Note(format!(
                        "cannot tell which process serves {} ({why}): every process on {} counts as busy",
                        session.base_url,
                        profile.device.label()
                    )));
                    Vec::new()
                }
            },
            _ => Vec::new(),
        };
        let (lock, wait) = steps::claim_device(profile, session.probe.as_ref(), &exclude, reporter)?;
        session._lock = lock;
        session.gpu_wait = wait;

        // 3. The bracket, then 4. the server.
        session.bracket = Some(crate::sentry::open_kernel_log());
        match &profile.target {
            Target::Spawn(s) => {
                let p = ServerProcess::spawn(s, &opts.out_dir.join("server.log"))?;
                life.event("spawned", format!("pid {}", p.pid()));
                life.event("supervision", p.supervision());
                session.process = Some(p);
            }
            Target::Attach(_) => life.event("attached", session.base_url.clone()),
        }
        if let Some(cases) = opts.announce_cases {
            reporter.event(&RunEvent::Started {
                profile: profile.name.clone(),
                cases,
                base_url: session.base_url.clone(),
            });
        }

        // 5. Readiness.
        reporter.event(&RunEvent::Loading);
        let ready = steps::wait_ready(&session.client, profile, session.process.as_mut(), &mut life);
        let ready = match opts.ready_limit {
            Some(limit) => match rt.block_on(async { tokio::time::timeout(limit, ready).await }) {
                Ok(r) => r,
                Err(_) => {
                    session.ready_timed_out = true;
                    Err(steps::NotReady::Failed(format!("not ready within the stage timeout ({limit:.0?})")))
                }
            },
            None => rt.block_on(ready),
        };
        session.load = match ready {
            Ok(r) => {
                // Read at once: what the load cost, before the suite adds to it.
                session.load_cpu = session.process.as_ref().and_then(ServerProcess::cpu_account);
                if let Some(m) = &r.discovered_model {
                    session.model = m.clone();
                }
                session.readiness = Some(gauntlet_schema::Readiness {
                    probe: r.probe.to_owned(),
                    discovered_model: r.discovered_model,
                });
                Ok(r.seconds)
            }
            Err(steps::NotReady::Failed(why)) => Err(why),
            Err(steps::NotReady::Ambiguous(why)) => {
                reporter.event(&RunEvent::LoadFailed { reason: why.clone() });
                return Err(SessionError::AmbiguousModel(why));
            }
        };
        match &session.load {
            Ok(seconds) => reporter.event(&RunEvent::Loaded { seconds: *seconds }),
            Err(reason) => reporter.event(&RunEvent::LoadFailed { reason: reason.clone() }),
        }
        session.life = life;
        Ok(session)
    }

    pub fn loaded(&self) -> bool {
        self.load.is_ok()
    }

    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(ServerProcess::pid)
    }

    pub fn spawned(&self) -> bool {
        self.process.is_some()
    }

    /// The spawned server's exit status once it exited (non-blocking); None while it runs or when attached.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.process.as_mut().and_then(ServerProcess::exited)
    }

    /// Whose threads say whether the server is working ([`BusyPatience`]): the started server's, or an attached
    /// server's listeners on this machine and their descendants.
    pub fn threads(&self) -> Threads<'_> {
        if let Some(p) = &self.process {
            return Threads::Spawned(p);
        }
        let listeners = self.attached_listeners.get_or_init(|| {
            server_pids(&self.base_url).map(|pids| pids.into_iter().map(|p| p as i32).collect()).unwrap_or_default()
        });
        if listeners.is_empty() { Threads::Unreadable } else { Threads::Attached(listeners) }
    }

    pub(crate) fn process_mut(&mut self) -> Option<&mut ServerProcess> {
        self.process.as_mut()
    }

    /// Scrapes the server's Prometheus text before the first measured request (after readiness); nothing when the
    /// profile has no metrics path or the server did not load. Bounded by [`metrics::SCRAPE_TIMEOUT`].
    pub fn scrape_metrics_before(&mut self, rt: &tokio::runtime::Runtime) {
        if !self.loaded() {
            return;
        }
        if let Some(m) = self.metrics.as_mut() {
            rt.block_on(m.before(&self.client));
        }
    }

    /// Scrapes it again after the last request, while the server still runs: the change since
    /// [`Session::scrape_metrics_before`] (None when that did not scrape). A failed scrape is a note in the record.
    pub fn scrape_metrics_after(&mut self, rt: &tokio::runtime::Runtime) -> Option<gauntlet_schema::ServerMetrics> {
        let m = self.metrics.as_mut()?;
        let got = rt.block_on(m.after(&self.client))?;
        self.life.findings.extend(metrics::non_finite_finding(&got));
        Some(got)
    }

    /// The profile as the session speaks to the server: its `request_model` is the model readiness discovered.
    pub fn effective_profile(&self, profile: &Profile) -> Profile {
        let mut p = profile.clone();
        p.request_model = self.model.clone();
        p
    }

    /// Stops the spawned server (SIGTERM, as at the end of a run) and starts it again with the same command, its
    /// output in `log_path`, then waits for readiness under the load timeout: the same lifecycle, its events and
    /// findings in this session's. Returns the new load time. An attached server is not gauntlet's to restart.
    pub async fn restart(&mut self, profile: &Profile, log_path: &Path) -> Result<f64, RestartError> {
        self.restart_after(profile, log_path, || ()).await
    }

    /// [`Session::restart`], with `while_stopped` run once the server has stopped and before it starts again (R3
    /// runs the profile without the draft there, on the port this one freed). It runs only after a clean stop.
    pub async fn restart_after(
        &mut self,
        profile: &Profile,
        log_path: &Path,
        while_stopped: impl FnOnce(),
    ) -> Result<f64, RestartError> {
        let Target::Spawn(spec) = &profile.target else { return Err(RestartError::Attached) };
        let Some(p) = self.process.as_mut() else { return Err(RestartError::NeverStarted) };
        let loaded = self.load.is_ok();
        let stop = steps::stop_server(p, profile.stop_grace, false, loaded, &mut self.life);
        if stop != gauntlet_schema::StopOutcome::Terminated {
            return Err(RestartError::Unclean { stop });
        }
        while_stopped();
        let p = ServerProcess::spawn(spec, log_path).map_err(RestartError::Spawn)?;
        self.life.event("restarted", format!("pid {} (output in {})", p.pid(), log_path.display()));
        self.process = Some(p);
        match steps::wait_ready(&self.client, profile, self.process.as_mut(), &mut self.life).await {
            Ok(r) => Ok(r.seconds.unwrap_or(0.0)),
            Err(steps::NotReady::Failed(reason) | steps::NotReady::Ambiguous(reason)) => {
                Err(RestartError::NotReady { reason })
            }
        }
    }

    /// The server's processes on the bound GPU and their memory, asked while it still runs (see
    /// [`steps::server_on_gpu`]); None unless a spawned, loaded server runs on a GPU profile.
    pub fn on_gpu(&self, profile: &Profile) -> Option<steps::OnGpu> {
        let p = self.process.as_ref()?;
        (profile.device.is_gpu() && self.loaded()).then(|| steps::server_on_gpu(profile, self.probe.as_ref(), p.pid()))
    }

    /// Stops the server (a crash already seen is `crashed`), collects leftovers, closes the bracket and judges it
    /// with the server's stderr. `runtime` names the GPU's PCI address for attribution.
    pub fn close(mut self, profile: &Profile, crashed: bool, runtime: &Value) -> (Closed, Vec<Finding>) {
        let loaded = self.loaded();
        let stop = match self.process.as_mut() {
            Some(p) => steps::stop_server(p, profile.stop_grace, crashed, loaded, &mut self.life),
            None if self.build.as_ref().is_some_and(|b| b.failed.is_some()) || self.bracket.is_none() => {
                gauntlet_schema::StopOutcome::NotStarted
            }
            None => gauntlet_schema::StopOutcome::Attached,
        };
        let (mut sentry, findings) = match self.bracket.take() {
            Some(bracket) => {
                let at = Instant::now();
                let v = steps::kernel_verdict(profile, self.process.as_ref(), runtime, bracket);
                self.life.event(
                    "kernel-log-closed",
                    format!(
                        "{:.3}s after the stop (grace {}ms)",
                        at.elapsed().as_secs_f64(),
                        KERNEL_LOG_GRACE.as_millis()
                    ),
                );
                v
            }
            None => (SentryRecord::default(), Vec::new()),
        };
        if let Some((waited, seen)) = self.gpu_wait.take() {
            sentry.gpu_wait_seconds = Some(waited);
            sentry.gpu_holders_seen = seen;
        }
        let failed = self.life.findings.iter().chain(&findings).any(|f| f.severity == Severity::Fail);
        let log_tail = match &self.process {
            Some(p) if failed || !loaded => p.log_tail(40),
            _ => Vec::new(),
        };
        let pid = self.pid();
        let life = std::mem::take(&mut self.life);
        (Closed { stop, sentry, life, pid, log_tail }, findings)
    }
}

/// Puts the session's `build` member (the binary's digest after the build) into the identity; the identity digest
/// is unchanged, since it leaves `build` out.
pub fn stamp_build(build: Option<&Value>, identity: &mut gauntlet_schema::IdentityRecord) {
    let Some(b) = build else { return };
    if let (Some(id), Ok(b)) = (identity.current_mut(), serde_json::from_value(b.clone())) {
        id.build = Some(b);
    }
}

/// Only the build step of `profile`'s server (`gauntlet build`, and `gauntlet run` before its skip-cache lookup):
/// None when the server has no build or the profile attaches. A failed build is an outcome, not an error.
pub fn build_only(profile: &Profile, out_dir: &Path) -> Result<Option<BuildOutcome>, SessionError> {
    match &profile.target {
        Target::Spawn(s) => match &s.build {
            Some(spec) => Ok(Some(crate::build::run(spec, &s.binary, out_dir)?)),
            None => Ok(None),
        },
        Target::Attach(_) => Ok(None),
    }
}

/// Doctor's view of the device through the session's checks: holders other than gauntlet and the attached
/// server under test.
pub fn other_holders(profile: &Profile, probe: &dyn gpu::Probe) -> Result<Vec<gpu::Holder>, gpu::ProbeError> {
    let exclude = match &profile.target {
        Target::Attach(a) => server_pids(&a.base_url).unwrap_or_default(),
        Target::Spawn(_) => Vec::new(),
    };
    let own = std::process::id();
    Ok(probe.holders(&profile.device)?.into_iter().filter(|h| h.pid != own && !exclude.contains(&h.pid)).collect())
}

/// The attach profile's CA file (read through the bounded reader: at most 1 MiB, a regular file) and its extra
/// headers, each value from its environment variable and from then on a secret of the process.
fn transport(a: &crate::manifest::AttachSpec) -> Result<crate::client::Transport, SessionError> {
    let ca_pem = match &a.ca_file {
        Some(path) => Some(
            crate::util::bounded::read_bytes(path, 1 << 20)
                .map_err(|e| SessionError::Transport(format!("ca_file `{}`: {e}", path.display())))?,
        ),
        None => None,
    };
    let mut headers = Vec::new();
    for (name, var) in &a.headers_env {
        let value = std::env::var(var)
            .map_err(|_| SessionError::Transport(format!("header `{name}`: variable `{var}` is not set")))?;
        if value.chars().any(char::is_control) {
            return Err(SessionError::Transport(format!(
                "header `{name}`: variable `{var}` holds a control character, which no HTTP header may carry"
            )));
        }
        crate::util::redact::register(&value);
        headers.push((name.clone(), value));
    }
    Ok(crate::client::Transport { ca_pem, headers })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GPU not had is `GpuBusy` (the host lock's own words, or who held it how long) or `GpuUnknown` (with the
    /// probe's reason kept as its source).
    #[test]
    fn a_gpu_not_had_is_the_variant_of_why() {
        let dir = tempfile::tempdir().unwrap();
        let gpu = gpu::Device::Nvidia(0);
        let _held = gpu::lock_device(dir.path(), &gpu, Duration::ZERO).unwrap();
        let lock = gpu::lock_device(dir.path(), &gpu, Duration::ZERO).err().unwrap();
        let words = lock.to_string();
        let e = SessionError::from(GpuBusy::from(lock));
        assert!(matches!(&e, SessionError::GpuBusy(GpuBusy::Locked(gpu::LockError::Held { .. }))), "{e:?}");
        assert_eq!(e.to_string(), words);
        let holders = vec![
            gpu::Holder { pid: 4242, name: "python3".into(), memory_bytes: Some(3 << 20) },
            gpu::Holder { pid: 7, name: String::new(), memory_bytes: None },
        ];
        let e = SessionError::from(GpuBusy::Held {
            device: "nvidia:0".into(),
            waited: Duration::from_millis(30_400),
            holders,
        });
        assert!(matches!(&e, SessionError::GpuBusy(GpuBusy::Held { holders, .. }) if holders.len() == 2), "{e:?}");
        assert_eq!(e.to_string(), "nvidia:0 is still in use after 30s: pid 4242 (python3) 3 MiB, pid 7 (?)");
        let e = SessionError::GpuUnknown {
            device: "amd:1".into(),
            source: gpu::ProbeError::Told("NVML: insufficient permissions".into()),
        };
        assert!(
            matches!(&e, SessionError::GpuUnknown { device, source: gpu::ProbeError::Told(_) } if device == "amd:1")
        );
        assert_eq!(e.to_string(), "cannot tell whether amd:1 is free: NVML: insufficient permissions");
        assert!(std::error::Error::source(&e).is_some());
    }

    /// Each way a restart fails is its variant, and says it as before.
    #[test]
    fn a_restart_that_fails_is_the_variant_of_why() {
        let said = |e: RestartError| e.to_string();
        assert_eq!(
            said(RestartError::Attached),
            "attached: gauntlet did not start this server, so it does not restart it"
        );
        assert_eq!(said(RestartError::NeverStarted), "the server was never started");
        assert_eq!(
            said(RestartError::Unclean { stop: gauntlet_schema::StopOutcome::Killed }),
            "the server did not stop cleanly for the restart (killed)"
        );
        let spawn = SpawnError::PortInUse { host: "127.0.0.1".into(), port: 8000 };
        let words = format!("the restart failed: {spawn}");
        let e = RestartError::Spawn(spawn);
        assert!(matches!(&e, RestartError::Spawn(SpawnError::PortInUse { port: 8000, .. })), "{e:?}");
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(said(e), words);
        let e = RestartError::NotReady { reason: "server exited during load (exit code 1)".into() };
        assert_eq!(said(e), "after the restart: server exited during load (exit code 1)");
    }
}
