//! The gate, end to end: identity → server up → cases under a budget → server down → checks → verdict.
//! It reports progress as [`RunEvent`]s and never writes to the terminal itself.

use std::path::{Path, PathBuf};

use crate::identity::Identity;
use std::time::{Duration, Instant};

use gauntlet_schema::{
    Answer, BaselineRef, CaseRecord, CaseStatus, CheckResult, DecodeSummary, Finding, RUN_RECORD_VERSION, RunRecord,
    ServerEvent, ServerMode, ServerRecord, Severity, StopOutcome as Stop, SuiteRecord, Verdict,
};
use serde_json::{Value, json};

use crate::client::{Client, ClientError};
use crate::manifest::{Profile, Target};
use crate::sentry::{Ours, gpu};
use crate::server::{ServerProcess, SpawnError, StopOutcome, describe_exit};
use crate::suite::{Case, evaluate, observed_text};
use crate::util::{environment, now_rfc3339};
use crate::verdict;

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
        case: Box<CaseRecord>,
    },
    Stopping,
    Finished {
        verdict: Verdict,
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

/// Problems with the inputs: nothing was started, exit code 2.
#[derive(Debug, thiserror::Error)]
pub enum GateError {
    #[error(transparent)]
    Spawn(#[from] SpawnError),
    #[error("api key variable `{0}` is not set")]
    ApiKey(String),
    #[error("cannot create output directory `{path}`: {source}")]
    Out { path: PathBuf, source: std::io::Error },
    /// Someone else still holds the GPU after the wait: the run is skipped, not failed.
    #[error("{0}")]
    GpuBusy(String),
    /// Whether the GPU is free cannot be told: fail closed rather than measure on a shared device.
    #[error("{0}")]
    GpuUnknown(String),
}

pub struct GateOptions<'a> {
    pub out_dir: &'a Path,
    /// Computed before the run (see [`crate::identity::compute`]), so the caller can pick a baseline with it.
    pub identity: &'a Identity,
    pub baseline: Option<(&'a RunRecord, String)>,
}

pub(crate) struct Lifecycle {
    pub(crate) started: Instant,
    pub(crate) events: Vec<ServerEvent>,
    pub(crate) findings: Vec<Finding>,
}

impl Lifecycle {
    pub(crate) fn event(&mut self, kind: &str, detail: impl Into<String>) {
        self.events.push(ServerEvent {
            at: self.started.elapsed().as_secs_f64(),
            kind: kind.into(),
            detail: detail.into(),
        });
    }

    pub(crate) fn new() -> Lifecycle {
        Lifecycle { started: Instant::now(), events: Vec::new(), findings: Vec::new() }
    }

    fn finding(&mut self, kind: &str, severity: Severity, message: impl Into<String>, case: Option<&str>) {
        self.findings.push(Finding {
            kind: kind.into(),
            severity,
            message: message.into(),
            case: case.map(str::to_owned),
        });
    }
}

/// Runs the gate for one profile. Returns the finished record (also written into `out_dir`).
pub fn run_gate(profile: &Profile, opts: &GateOptions, reporter: &mut dyn Reporter) -> Result<RunRecord, GateError> {
    let started = Instant::now();
    let started_at = now_rfc3339();
    std::fs::create_dir_all(opts.out_dir).map_err(|source| GateError::Out { path: opts.out_dir.into(), source })?;
    let identity = opts.identity.value.clone();
    let identity_digest = opts.identity.digest.clone();
    let mut runtime = opts.identity.runtime.clone();
    let api_key = match &profile.target {
        Target::Attach(a) => match &a.api_key_env {
            Some(var) => Some(std::env::var(var).map_err(|_| GateError::ApiKey(var.clone()))?),
            None => None,
        },
        Target::Spawn(_) => None,
    };
    let (_gpu_lock, gpu_wait) = claim_device(profile, reporter)?;
    let bracket = crate::sentry::open_kernel_log();
    let (base_url, mut process, command) = match &profile.target {
        Target::Spawn(s) => {
            crate::server::install_signal_forwarding();
            let p = ServerProcess::spawn(s, &opts.out_dir.join("server.log"))?;
            (s.base_url(), Some(p), s.command())
        }
        Target::Attach(a) => (a.base_url.clone(), None, Vec::new()),
    };
    let mut life = Lifecycle { started, events: Vec::new(), findings: Vec::new() };
    if let Some(p) = &process {
        life.event("spawned", format!("pid {}", p.pid()));
    } else {
        life.event("attached", base_url.clone());
    }
    reporter.event(&RunEvent::Started {
        profile: profile.name.clone(),
        cases: profile.suite.cases.len(),
        base_url: base_url.clone(),
    });
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let client = Client::new(&base_url, api_key);

    reporter.event(&RunEvent::Loading);
    let load = rt.block_on(wait_ready(&client, profile, process.as_mut(), &mut life));
    if load.is_ok()
        && let Some(build) = rt.block_on(server_build(&client))
        && let Value::Object(m) = &mut runtime
    {
        m.insert("server_build".into(), Value::String(build));
    }
    let (loaded, load_seconds) = match &load {
        Ok(secs) => {
            reporter.event(&RunEvent::Loaded { seconds: *secs });
            (true, *secs)
        }
        Err(reason) => {
            reporter.event(&RunEvent::LoadFailed { reason: reason.clone() });
            (false, None)
        }
    };

    let budget_deadline = Instant::now() + profile.suite_budget;
    let mut over_budget = false;
    let mut crashed = process.as_mut().and_then(|p| p.exited()).is_some();
    let mut cases: Vec<CaseRecord> = Vec::with_capacity(profile.suite.cases.len());
    let total = profile.suite.cases.len();
    for (index, case) in profile.suite.cases.iter().enumerate() {
        let mut record = new_case_record(case, &profile.request_model);
        let source_observed =
            case.repeat_of.as_ref().map(|src| cases.iter().find(|c| &c.id == src).and_then(|c| c.observed.clone()));
        let now = Instant::now();
        let skip = if !loaded {
            Some("server did not load")
        } else if crashed {
            Some("server is not running")
        } else if now >= budget_deadline {
            over_budget = true;
            Some("suite budget spent")
        } else if matches!(source_observed, Some(None)) {
            Some("repeat source got no answer")
        } else {
            None
        };
        if let Some(reason) = skip {
            record.skip_reason = Some(reason.into());
        } else {
            let deadline = (now + profile.request_timeout).min(budget_deadline);
            let source = source_observed.as_ref().and_then(|s| s.as_deref());
            if let Err(e) = rt.block_on(answer_case(&client, case, &mut record, source, deadline)) {
                if matches!(e, ClientError::Timeout { .. }) && Instant::now() >= budget_deadline {
                    over_budget = true;
                }
                life.finding("request-error", Severity::Fail, e.to_string(), Some(&case.id));
                // A failed request is often the first sign of a dying server: give it a moment to show.
                if let Some(p) = process.as_mut() {
                    let until = Instant::now() + Duration::from_secs(1);
                    while p.exited().is_none() && Instant::now() < until {
                        std::thread::sleep(Duration::from_millis(25));
                    }
                }
            }
        }
        if !crashed
            && let Some(p) = process.as_mut()
            && let Some(status) = p.exited()
        {
            crashed = true;
            let what = format!("server exited during the suite ({}) after case `{}`", describe_exit(status), case.id);
            life.event("crashed", what.clone());
            life.finding("crash", Severity::Fail, what, None);
        }
        reporter.event(&RunEvent::CaseFinished { index, total, case: Box::new(record.clone()) });
        cases.push(record);
    }
    if over_budget {
        life.finding(
            "over-budget",
            Severity::Fail,
            format!("suite budget of {} spent before every case ran", humantime::format_duration(profile.suite_budget)),
            None,
        );
    }
    let skipped_crash = cases.iter().filter(|c| c.skip_reason.as_deref() == Some("server is not running")).count();
    if skipped_crash > 0 {
        life.event("skipped", format!("{skipped_crash} case(s) skipped: server is not running"));
    }

    // Does the server compute on the GPU it is bound to? Asked while it still runs, after the suite.
    let on_gpu = match process.as_ref() {
        Some(p) if profile.device.is_gpu() && loaded && !crashed => Some(server_on_gpu(profile, p.pid())),
        _ => None,
    };

    reporter.event(&RunEvent::Stopping);
    let stop = match process.as_mut() {
        None => Stop::Attached,
        Some(p) => stop_server(p, profile.stop_grace, crashed, loaded, &mut life),
    };
    drop(rt);
    let (mut sentry, sentry_findings) = kernel_verdict(profile, process.as_ref(), &runtime, bracket);
    if let Some((waited, seen)) = gpu_wait {
        sentry.gpu_wait_seconds = Some(waited);
        sentry.gpu_holders_seen = seen;
    }
    life.findings.extend(sentry_findings);
    if let Some((pids, memory, finding)) = on_gpu {
        sentry.server_gpu_pids = pids;
        sentry.server_gpu_memory_bytes = memory;
        life.findings.extend(finding);
    }

    let decode = decode_summary(&cases);
    let failed_lifecycle = life.findings.iter().any(|f| f.severity == Severity::Fail);
    let log_tail = match &process {
        Some(p) if failed_lifecycle || !loaded => p.log_tail(40),
        _ => Vec::new(),
    };
    let mut record = RunRecord {
        schema_version: RUN_RECORD_VERSION,
        gauntlet_version: env!("CARGO_PKG_VERSION").into(),
        profile: profile.name.clone(),
        started_at,
        finished_at: String::new(),
        wall_seconds: 0.0,
        identity,
        identity_digest,
        runtime,
        environment: environment(),
        server: ServerRecord {
            mode: if process.is_some() { ServerMode::Spawned } else { ServerMode::Attached },
            base_url,
            command,
            pid: process.as_ref().map(|p| p.pid()),
            load_seconds,
            loaded,
            stop,
            events: life.events,
            log_tail,
        },
        suite: SuiteRecord {
            id: profile.suite.id.clone(),
            version: profile.suite.version,
            digest: profile.suite.digest.clone(),
            budget_seconds: profile.suite_budget.as_secs_f64(),
            request_timeout_seconds: profile.request_timeout.as_secs_f64(),
            over_budget,
        },
        cases,
        decode,
        findings: life.findings,
        verdict: Verdict::Pass,
        thresholds: profile.thresholds.clone(),
        baseline: opts.baseline.as_ref().map(|(b, path)| BaselineRef {
            path: path.clone(),
            profile: b.profile.clone(),
            started_at: b.started_at.clone(),
            identity_digest: b.identity_digest.clone(),
        }),
        sentry: Some(sentry),
    };
    if process.is_none() {
        record.findings.push(Finding {
            kind: "attached".into(),
            severity: Severity::Info,
            message: "attached to a running server: load time and crash detection were not available".into(),
            case: None,
        });
    }
    let assessed = verdict::assess(&record, opts.baseline.as_ref().map(|(b, _)| *b), &profile.thresholds);
    record.findings.extend(assessed);
    record.verdict = verdict::fold(&record.findings);
    record.finished_at = now_rfc3339();
    record.wall_seconds = started.elapsed().as_secs_f64();
    reporter.event(&RunEvent::Finished { verdict: record.verdict });
    Ok(record)
}

/// Closes the kernel-log bracket and judges it together with the server's stderr, knowing which processes, names
/// and PCI address are ours.
pub(crate) fn kernel_verdict(
    profile: &Profile,
    process: Option<&ServerProcess>,
    runtime: &Value,
    bracket: Result<crate::sentry::kmsg::Bracket, String>,
) -> (gauntlet_schema::SentryRecord, Vec<Finding>) {
    let observed = bracket.map(|b| b.finish(KERNEL_LOG_GRACE));
    let ours = Ours {
        pids: process.map(|p| vec![p.pid()]).unwrap_or_default(),
        names: match &profile.target {
            Target::Spawn(s) => {
                s.binary.file_name().map(|n| n.to_string_lossy().chars().take(15).collect()).into_iter().collect()
            }
            Target::Attach(_) => Vec::new(),
        },
        bdf: runtime["gpu"]["pci_bus_id"].as_str().map(crate::sentry::patterns::normalise_bdf),
        on_gpu: profile.device.is_gpu(),
    };
    let stderr = process.map(|p| read_tail(p.log_path(), 8 << 20)).unwrap_or_default();
    crate::sentry::assess(observed.as_ref().map_err(String::as_str), &stderr, &ours)
}

/// The server's own build string, when it reports one (llama.cpp: `/props` → `build_info`). Best effort, bounded.
/// Teardown faults (NVIDIA Xid 45, amdgpu queue eviction failures, resets) are logged after the process exits.
const KERNEL_LOG_GRACE: Duration = Duration::from_secs(1);

/// `/dev/kmsg`, or the file `$GAUNTLET_KMSG_FILE` names (fault-injection tests); `Err` = blind, with the reason.
/// The host lock (held for the run) and, on a GPU, the seconds waited and who held it meanwhile.
pub(crate) type Claimed = (Option<gpu::HostLock>, Option<(f64, Vec<String>)>);

/// On a GPU: take the host lock when asked, then wait (bounded) until no other process holds the device.
pub(crate) fn claim_device(profile: &Profile, reporter: &mut dyn Reporter) -> Result<Claimed, GateError> {
    if !profile.device.is_gpu() {
        return Ok((None, None));
    }
    let label = profile.device.label();
    let lock = if profile.gpu_lock {
        Some(gpu::lock_device(&gpu::lock_dir(), &profile.device, profile.busy_wait).map_err(GateError::GpuBusy)?)
    } else {
        None
    };
    let probe = gpu::probe();
    let every = Duration::from_millis(500).min(profile.busy_wait / 4).max(Duration::from_millis(20));
    match gpu::wait_until_free(probe.as_ref(), &profile.device, profile.busy_wait, every) {
        gpu::Wait::Free { waited, seen } => {
            if !seen.is_empty() {
                reporter.event(&RunEvent::Note(format!("{label} was busy; free after {:.1}s", waited.as_secs_f64())));
            }
            Ok((lock, Some((waited.as_secs_f64(), seen.iter().map(ToString::to_string).collect()))))
        }
        gpu::Wait::Busy { waited, holders } => Err(GateError::GpuBusy(format!(
            "{label} is still in use after {:.0}s: {}",
            waited.as_secs_f64(),
            holders.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
        ))),
        gpu::Wait::Unknown(why) => Err(GateError::GpuUnknown(format!("cannot tell whether {label} is free: {why}"))),
    }
}

/// The server's processes (its process group) that hold the bound GPU, the memory they hold, and a finding when
/// none does: a GPU profile whose server computes on the CPU (a build without GPU support, no layers offloaded)
/// would otherwise be measured and filed under the GPU's identity.
pub(crate) fn server_on_gpu(profile: &Profile, server_pid: u32) -> (Vec<u32>, Option<u64>, Option<Finding>) {
    let label = profile.device.label();
    let holders = match gpu::probe().holders(&profile.device) {
        Ok(h) => h,
        Err(why) => {
            let msg = format!("cannot tell whether the server used {label}: {why}");
            return (
                Vec::new(),
                None,
                Some(Finding { kind: "gpu-use-unknown".into(), severity: Severity::Info, message: msg, case: None }),
            );
        }
    };
    let mut group: Vec<u32> = crate::server::group_members(server_pid as i32).into_iter().map(|p| p as u32).collect();
    group.push(server_pid);
    let ours: Vec<&gpu::Holder> = holders.iter().filter(|h| group.contains(&h.pid)).collect();
    if !ours.is_empty() {
        let mut pids: Vec<u32> = ours.iter().map(|h| h.pid).collect();
        pids.sort_unstable();
        pids.dedup();
        let memory = ours.iter().map(|h| h.memory_bytes).sum::<Option<u64>>();
        return (pids, memory, None);
    }
    let finding = if holders.is_empty() {
        Finding {
            kind: "server-not-on-gpu".into(),
            severity: Severity::Warn,
            message: format!(
                "no process held {label} while the server ran: it probably computed on the CPU (a build without GPU \
                 support, or no layers offloaded), yet the run is filed under the GPU's identity"
            ),
            case: None,
        }
    } else {
        Finding {
            kind: "gpu-use-unknown".into(),
            severity: Severity::Info,
            message: format!(
                "{label} was held by {}, none of them the server's processes (a PID namespace can hide them)",
                holders.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
            ),
            case: None,
        }
    };
    (Vec::new(), None, Some(finding))
}

/// The last `limit` bytes of a file, lossily decoded (a server log can be large and is never trusted).
fn read_tail(path: &Path, limit: u64) -> String {
    use std::io::{Read as _, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else { return String::new() };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(limit)));
    let mut buf = Vec::new();
    let _ = f.take(limit).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

async fn server_build(client: &Client) -> Option<String> {
    let props = client.get_json("props", Duration::from_secs(2)).await.ok()?;
    let build = props.get("build_info")?.as_str()?;
    Some(build.chars().take(200).collect())
}

/// A case's record before it is asked: skipped until [`answer_case`] says otherwise.
pub(crate) fn new_case_record(case: &Case, request_model: &str) -> CaseRecord {
    CaseRecord {
        id: case.id.clone(),
        status: CaseStatus::Skipped,
        skip_reason: None,
        repeat_of: case.repeat_of.clone(),
        stream: case.stream,
        request: case.request_body(request_model),
        answer: None,
        error: None,
        seconds: None,
        observed: None,
        checks: Vec::new(),
    }
}

/// Asks one case and judges the answer: by its checks, or for a repeat by equality with its source's text.
pub(crate) async fn answer_case(
    client: &Client,
    case: &Case,
    record: &mut CaseRecord,
    source_observed: Option<&str>,
    deadline: Instant,
) -> Result<(), ClientError> {
    let sent = Instant::now();
    let result = client.chat(&record.request, deadline).await;
    record.seconds = Some(sent.elapsed().as_secs_f64());
    match result {
        Ok(answer) => {
            let observed = observed_text(&answer);
            record.checks = match source_observed {
                Some(src) => vec![repeat_check(src, &observed)],
                None => evaluate(&case.check, &answer),
            };
            record.status = if record.checks.iter().all(|c| c.passed) { CaseStatus::Pass } else { CaseStatus::Fail };
            record.observed = Some(observed);
            record.answer = Some(answer);
            Ok(())
        }
        Err(e) => {
            record.status = CaseStatus::Error;
            record.error = Some(e.to_string());
            Err(e)
        }
    }
}

fn repeat_check(source: &str, observed: &str) -> CheckResult {
    match crate::compare::first_difference(source, observed) {
        None => CheckResult { check: "identical".into(), passed: true, detail: String::new() },
        Some(at) => CheckResult {
            check: "identical".into(),
            passed: false,
            detail: format!("differs from its source at char {at}"),
        },
    }
}

/// Readiness = the health endpoint answers 200 AND one tiny real generation succeeds (a lazy server loads the
/// model on its first request). Load time = spawn → that reply. Bounded by the load timeout.
pub(crate) async fn wait_ready(
    client: &Client,
    profile: &Profile,
    mut process: Option<&mut ServerProcess>,
    life: &mut Lifecycle,
) -> Result<Option<f64>, String> {
    let spawned_at = process.as_ref().map(|p| p.spawned_at()).unwrap_or_else(Instant::now);
    let deadline = spawned_at + profile.load_timeout;
    let warmup = json!({
        "model": profile.request_model,
        "messages": [{"role": "user", "content": "Say hello."}],
        "max_tokens": 8,
        "temperature": 0,
    });
    let mut last = String::from("no answer yet");
    loop {
        if let Some(p) = process.as_deref_mut()
            && let Some(status) = p.exited()
        {
            let what = format!("server exited during load ({})", describe_exit(status));
            life.event("crashed", what.clone());
            life.finding("crash", Severity::Fail, what.clone(), None);
            return Err(what);
        }
        let now = Instant::now();
        if now >= deadline {
            let what = format!(
                "server did not become ready within {} (last: {last})",
                humantime::format_duration(profile.load_timeout)
            );
            life.event("load-timeout", what.clone());
            life.finding("never-loaded", Severity::Fail, what.clone(), None);
            return Err(what);
        }
        let probe = Duration::from_secs(2).min(deadline - now);
        match client.health(&profile.health_path, probe).await {
            Ok(200) => {
                let until = (Instant::now() + profile.request_timeout).min(deadline);
                match client.chat(&warmup, until).await {
                    Ok(_) => {
                        let secs = spawned_at.elapsed().as_secs_f64();
                        life.event("ready", format!("health 200 and a first generation after {secs:.2}s"));
                        return Ok(process.is_some().then_some(secs));
                    }
                    Err(e) => last = format!("warm-up generation: {e}"),
                }
            }
            Ok(code) => last = format!("health answered HTTP {code}"),
            Err(e) => last = format!("health: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub(crate) fn stop_server(
    p: &mut ServerProcess,
    grace: Duration,
    crashed: bool,
    loaded: bool,
    life: &mut Lifecycle,
) -> Stop {
    let (outcome, leftovers) = p.stop(grace);
    let stop = match &outcome {
        StopOutcome::Terminated(status) => {
            life.event("stopped", format!("exited on SIGTERM ({})", describe_exit(*status)));
            Stop::Terminated
        }
        StopOutcome::Killed => {
            let what = format!("server ignored SIGTERM for {}; killed with SIGKILL", humantime::format_duration(grace));
            life.event("killed", what.clone());
            life.finding("killed", Severity::Warn, what, None);
            Stop::Killed
        }
        StopOutcome::Stuck => {
            let what = format!("server survived SIGKILL (pid {}); it may be in uninterruptible sleep", p.pid());
            life.event("stuck", what.clone());
            life.finding("stuck", Severity::Fail, what, None);
            Stop::Stuck
        }
        StopOutcome::AlreadyExited(status) => {
            // Seen already if it died during load or the suite; otherwise it died unnoticed after the last case.
            if !crashed && loaded {
                let what = format!("server exited before it was asked to stop ({})", describe_exit(*status));
                life.event("crashed", what.clone());
                life.finding("crash", Severity::Fail, what, None);
            }
            Stop::Crashed
        }
    };
    if !leftovers.is_empty() {
        let what =
            format!("{} process(es) of the server's group outlived it and were killed: {leftovers:?}", leftovers.len());
        life.event("leftover", what.clone());
        life.finding("leftover-process", Severity::Warn, what, None);
    }
    stop
}

/// Median over cases with ≥ 32 completion tokens of tokens / request seconds. Token counts come from `usage`
/// when every counted case has it, else from an estimate for all of them; never a mix.
pub fn decode_summary(cases: &[CaseRecord]) -> DecodeSummary {
    let answered: Vec<(&Answer, f64)> =
        cases.iter().filter_map(|c| Some((c.answer.as_ref()?, c.seconds?))).filter(|(_, s)| *s > 0.0).collect();
    let all_usage = answered.iter().all(|(a, _)| a.usage.and_then(|u| u.completion_tokens).is_some());
    let source = if all_usage { "usage" } else { "estimate" };
    let mut rates: Vec<f64> = answered
        .iter()
        .filter_map(|(a, secs)| {
            let tokens = if all_usage { a.usage?.completion_tokens? } else { estimate_tokens(a) };
            (tokens >= 32).then(|| tokens as f64 / secs)
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    let median = match rates.len() {
        0 => None,
        n if n % 2 == 1 => Some(rates[n / 2]),
        n => Some((rates[n / 2 - 1] + rates[n / 2]) / 2.0),
    };
    DecodeSummary {
        median_tokens_per_second: median,
        token_source: (!answered.is_empty()).then(|| source.to_owned()),
        cases_counted: rates.len(),
    }
}

/// Without `usage`, about four characters per token (and at least one per streamed event).
fn estimate_tokens(a: &Answer) -> u64 {
    let chars = (a.content.chars().count() + a.reasoning.chars().count()) as u64;
    let events = a.timeline.iter().filter(|e| !e.content.is_empty() || !e.reasoning.is_empty()).count() as u64;
    chars.div_ceil(4).max(events)
}
