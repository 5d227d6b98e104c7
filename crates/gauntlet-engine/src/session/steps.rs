//! The session's steps: the GPU claim, readiness, the stop, the kernel verdict and the server's use of the GPU.
//! Called only by [`super::Session`]; they never decide a verdict and never write to the terminal.

use std::path::Path;
use std::time::{Duration, Instant};

use gauntlet_schema::{Finding, FindingKind, Severity, StopOutcome as Stop};
use serde_json::{Value, json};

use super::{GpuBusy, KERNEL_LOG_GRACE, Lifecycle, Reporter, RunEvent, SessionError};
use crate::client::{Client, ClientError};
use crate::manifest::{Profile, Target};
use crate::sentry::{Ours, gpu};
use crate::server::{ServerProcess, StopOutcome, describe_exit};

/// The server's pids on the GPU, the memory they hold, and a finding when it does not compute there.
pub type OnGpu = (Vec<u32>, Option<u64>, Option<Finding>);

/// Closes the kernel-log bracket and judges it together with the server's stderr, knowing which processes, names
/// and PCI address are ours.
pub(super) fn kernel_verdict(
    profile: &Profile,
    process: Option<&ServerProcess>,
    runtime: &Value,
    bracket: Result<crate::sentry::kmsg::Bracket, crate::sentry::KernelLogError>,
) -> (gauntlet_schema::SentryRecord, Vec<Finding>) {
    // The record keeps why the run was blind as words.
    let observed = bracket.map(|b| b.finish(KERNEL_LOG_GRACE)).map_err(|e| e.to_string());
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

/// The host lock (held for the run) and, on a GPU, the seconds waited and who held it meanwhile.
pub(super) type Claimed = (Option<gpu::HostLock>, Option<(f64, Vec<String>)>);

/// On a GPU: take the host lock when asked, then wait (bounded) until no other process holds the device.
pub(super) fn claim_device(
    profile: &Profile,
    probe: &dyn gpu::Probe,
    exclude: &[u32],
    reporter: &mut dyn Reporter,
) -> Result<Claimed, SessionError> {
    if !profile.device.is_gpu() {
        return Ok((None, None));
    }
    let label = profile.device.label();
    let lock = if profile.gpu_lock {
        Some(gpu::lock_device(&gpu::lock_dir(), &profile.device, profile.busy_wait).map_err(GpuBusy::Locked)?)
    } else {
        None
    };
    let every = Duration::from_millis(500).min(profile.busy_wait / 4).max(Duration::from_millis(20));
    match gpu::wait_until_free(probe, &profile.device, profile.busy_wait, every, exclude) {
        gpu::Wait::Free { waited, seen } => {
            if !seen.is_empty() {
                reporter.event(&RunEvent::Note(format!("{label} was busy; free after {:.1}s", waited.as_secs_f64())));
            }
            Ok((lock, Some((waited.as_secs_f64(), seen.iter().map(ToString::to_string).collect()))))
        }
        gpu::Wait::Busy { waited, holders } => Err(GpuBusy::Held { device: label, waited, holders }.into()),
        gpu::Wait::Unknown(source) => Err(SessionError::GpuUnknown { device: label, source }),
    }
}

/// The server's processes (its process group) that hold the bound GPU, the memory they hold, and a finding when
/// none does: a GPU profile whose server computes on the CPU (a build without GPU support, no layers offloaded)
/// would otherwise be measured and filed under the GPU's identity.
pub(crate) fn server_on_gpu(profile: &Profile, probe: &dyn gpu::Probe, server_pid: u32) -> OnGpu {
    let label = profile.device.label();
    let holders = match probe.holders(&profile.device) {
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
    crate::util::bounded::read_tail(path, limit).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default()
}

/// A server that became ready: the load seconds (None when attached), the probe that answered first, and the
/// model name learned from `/v1/models` (when the profile names none).
#[derive(Debug, Clone)]
pub struct Ready {
    pub seconds: Option<f64>,
    pub probe: &'static str,
    pub discovered_model: Option<String>,
}

/// Why readiness ended without a ready server.
#[derive(Debug, Clone)]
pub enum NotReady {
    /// The load failed, timed out, or got an answer that waiting cannot change (the reason says which).
    Failed(String),
    /// `/v1/models` lists several models and the profile names none: bad input, the list is in the message.
    Ambiguous(String),
}

/// What a load that timed out names when no probe got any answer.
const NO_ANSWER_YET: &str = "no answer yet";
/// The longest one readiness probe waits; less when the load deadline is nearer.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether a probe's error is a timeout only because the load deadline cut the probe short (`probe` under
/// [`PROBE_TIMEOUT`]) while an earlier answer (`last`: a refused certificate, a status) says more: then that answer
/// stays the one a load timeout names. (Under load a TLS test's last probe started 0.04 s before the deadline and
/// its "timed out after 0.0s" hid the certificate error.)
fn cut_by_the_deadline(e: &ClientError, probe: Duration, last: &str) -> bool {
    matches!(e, ClientError::Timeout { .. }) && probe < PROBE_TIMEOUT && last != NO_ANSWER_YET
}

/// At most this many model ids are listed in a message, each at most 200 characters (escaped).
const MAX_LISTED_MODELS: usize = 20;

/// Readiness degrades gracefully, and a tiny real generation always has to succeed (a lazy server loads the model
/// on its first request): the health path first; where it answers 404 (no such endpoint), `/v1/models`; where
/// that is absent too, the generation alone. The first probe that answered is recorded. A profile without
/// `request_model` learns it from `/v1/models` (one model: used; several: [`NotReady::Ambiguous`]). An answer that
/// waiting cannot change ends the wait at once with the server's message: a 4xx (but 404 on the health path), or
/// an error that names the unknown model. Load time = spawn → the generation's reply. Bounded by the load timeout.
pub(super) async fn wait_ready(
    client: &Client,
    profile: &Profile,
    mut process: Option<&mut ServerProcess>,
    life: &mut Lifecycle,
) -> Result<Ready, NotReady> {
    let spawned_at = process.as_ref().map(|p| p.spawned_at()).unwrap_or_else(Instant::now);
    let deadline = spawned_at + profile.load_timeout;
    let mut model = profile.request_model.clone();
    let mut discovered = None;
    let mut last = String::from(NO_ANSWER_YET);
    let fatal = |life: &mut Lifecycle, what: String| {
        let what = format!("the server refused readiness: {what}");
        life.event("load-refused", what.clone());
        life.finding(FindingKind::NeverLoaded, Severity::Fail, what.clone(), None);
        NotReady::Failed(what)
    };
    // Polls fast at first (a small model is ready in well under a second) and backs off to 100 ms: the poll's
    // granularity is measured as load time.
    let mut pause = Duration::from_millis(10);
    loop {
        if let Some(p) = process.as_deref_mut()
            && let Some(status) = p.exited()
        {
            let what = format!("server exited during load ({})", describe_exit(status));
            life.event("crashed", what.clone());
            life.finding(FindingKind::Crash, Severity::Fail, what.clone(), None);
            return Err(NotReady::Failed(what));
        }
        let now = Instant::now();
        if now >= deadline {
            let what = format!(
                "server did not become ready within {} (last: {last})",
                humantime::format_duration(profile.load_timeout)
            );
            life.event("load-timeout", what.clone());
            life.finding(FindingKind::NeverLoaded, Severity::Fail, what.clone(), None);
            return Err(NotReady::Failed(what));
        }
        let probe = PROBE_TIMEOUT.min(deadline - now);
        let cut = |e: &ClientError, last: &str| cut_by_the_deadline(e, probe, last);
        let mut answered: Option<&'static str> = None;
        let mut try_models = profile.discover_model && discovered.is_none();
        match client.health(&profile.health_path, probe).await {
            Ok(200) => answered = Some("health"),
            Ok(404) => try_models = true,
            Ok(code) if (400..500).contains(&code) => {
                return Err(fatal(life, format!("{} answered HTTP {code}", profile.health_path)));
            }
            Ok(code) => last = format!("health answered HTTP {code}"),
            Err(e) if cut(&e, &last) => {}
            Err(e) => last = format!("health: {e}"),
        }
        if try_models {
            match client.get_json("v1/models", probe).await {
                Ok(list) => {
                    answered = answered.or(Some("models"));
                    if profile.discover_model && discovered.is_none() {
                        let mut ids = model_ids(&list);
                        // An alias of the served model (the kind's) is no second model, unless it is all there is.
                        if ids.iter().any(|id| !profile.model_aliases.contains(&id.as_str())) {
                            ids.retain(|id| !profile.model_aliases.contains(&id.as_str()));
                        }
                        match ids.as_slice() {
                            [one] => {
                                model = one.clone();
                                discovered = Some(one.clone());
                                life.event("model-discovered", format!("/v1/models lists one model: {}", escape(one)));
                            }
                            [] => {
                                last = "/v1/models lists no model yet".into();
                                answered = None;
                            }
                            several => {
                                let mut listed: Vec<String> =
                                    several.iter().take(MAX_LISTED_MODELS).map(|m| escape(m)).collect();
                                if several.len() > MAX_LISTED_MODELS {
                                    listed.push(format!("… and {} more", several.len() - MAX_LISTED_MODELS));
                                }
                                return Err(NotReady::Ambiguous(format!(
                                    "profile `{}` names no `request_model` and {} serves {} models: {}; set \
                                     `request_model` to one of them",
                                    profile.name,
                                    client.base_url(),
                                    several.len(),
                                    listed.join(", ")
                                )));
                            }
                        }
                    }
                }
                Err(ClientError::Status { status: 404, .. }) if profile.discover_model => {
                    return Err(fatal(
                        life,
                        "profile names no `request_model` and the server has no /v1/models to learn it from \
                         (HTTP 404); set `request_model`"
                            .into(),
                    ));
                }
                // Neither health nor models: the generation alone says whether the server is ready.
                Err(ClientError::Status { status: 404, .. }) => answered = answered.or(Some("generation")),
                Err(ClientError::Status { status, .. }) if (400..500).contains(&status) => {
                    return Err(fatal(life, format!("/v1/models answered HTTP {status}")));
                }
                Err(e) if cut(&e, &last) => {}
                Err(e) => last = format!("/v1/models: {e}"),
            }
        }
        // Whatever answered must be the server spawned here: another program may have taken the port between
        // the free-port check and the server's bind (the server then exits, or has not bound yet), and its answers
        // would be judged as ours.
        if answered.is_some()
            && let (Some(p), crate::manifest::Target::Spawn(spec)) = (process.as_deref(), &profile.target)
            && let Err(why) = p.owns_listener(spec.port)
        {
            let why = why.to_string();
            life.event("port-taken", why.clone());
            life.finding(FindingKind::NeverLoaded, Severity::Fail, why.clone(), None);
            return Err(NotReady::Failed(why));
        }
        if let Some(probe) = answered {
            let warmup = json!({
                "model": model,
                "messages": [{"role": "user", "content": "Say hello."}],
                "max_tokens": 8,
                "temperature": 0,
            });
            let until = (Instant::now() + profile.request_timeout).min(deadline);
            match client.chat(&warmup, until).await {
                Ok(_) => {
                    let secs = spawned_at.elapsed().as_secs_f64();
                    // Asked again after the generation: the port may have changed hands while it ran.
                    if let (Some(p), crate::manifest::Target::Spawn(spec)) = (process.as_deref(), &profile.target) {
                        match p.owns_listener(spec.port) {
                            Err(why) => {
                                let why = why.to_string();
                                life.event("port-taken", why.clone());
                                life.finding(FindingKind::NeverLoaded, Severity::Fail, why.clone(), None);
                                return Err(NotReady::Failed(why));
                            }
                            Ok(Some(why)) => life.event("port-owner-unknown", why.to_string()),
                            Ok(None) => {}
                        }
                    }
                    let how = match probe {
                        "health" => format!("health {} 200", profile.health_path),
                        "models" => format!("no {} (404), /v1/models 200", profile.health_path),
                        _ => format!("no {} nor /v1/models (404)", profile.health_path),
                    };
                    life.event("ready", format!("{how} and a first generation after {secs:.2}s"));
                    return Ok(Ready {
                        seconds: process.is_some().then_some(secs),
                        probe,
                        discovered_model: discovered,
                    });
                }
                Err(ClientError::Status { status, body, .. })
                    if (400..500).contains(&status) || names_unknown_model(&body, &model) =>
                {
                    return Err(fatal(
                        life,
                        format!("the first generation (model `{}`) got HTTP {status}: {body}", escape(&model)),
                    ));
                }
                Err(e) => last = format!("warm-up generation: {e}"),
            }
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 3 / 2).min(Duration::from_millis(100));
    }
}

/// The ids `/v1/models` lists (`data[].id`), in its order; anything else in the body is ignored.
pub(crate) fn model_ids(list: &Value) -> Vec<String> {
    list["data"]
        .as_array()
        .map(|a| a.iter().filter_map(|m| m["id"].as_str()).map(str::to_owned).collect())
        .unwrap_or_default()
}

/// An error body that says the requested model is unknown (mistral.rs answers HTTP 500 "model not available"):
/// waiting cannot change it.
fn names_unknown_model(body: &str, model: &str) -> bool {
    let lower = body.to_ascii_lowercase();
    lower.contains("model")
        && ["not available", "not found", "does not exist", "unknown model", "no such model"]
            .iter()
            .any(|p| lower.contains(p))
        && (body.contains(model) || lower.contains("model not"))
}

/// A server's text for one line of a message: escaped, at most 200 characters.
fn escape(text: &str) -> String {
    text.chars().take(200).collect::<String>().escape_debug().to_string()
}

pub(super) fn stop_server(
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
            life.finding(FindingKind::Killed, Severity::Warn, what, None);
            Stop::Killed
        }
        StopOutcome::Stuck => {
            let what = format!("server survived SIGKILL (pid {}); it may be in uninterruptible sleep", p.pid());
            life.event("stuck", what.clone());
            life.finding(FindingKind::Stuck, Severity::Fail, what, None);
            Stop::Stuck
        }
        StopOutcome::AlreadyExited(status) => {
            // Seen already if it died during load or the suite; otherwise it died unnoticed after the last case.
            if !crashed && loaded {
                let what = format!("server exited before it was asked to stop ({})", describe_exit(*status));
                life.event("crashed", what.clone());
                life.finding(FindingKind::Crash, Severity::Fail, what, None);
            }
            Stop::Crashed
        }
    };
    let list = |l: &[crate::server::Leftover]| l.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ");
    if !leftovers.group.is_empty() {
        let group = &leftovers.group;
        let what =
            format!("{} process(es) of the server's group outlived it and were killed: {}", group.len(), list(group));
        life.event("leftover", what.clone());
        life.finding(FindingKind::LeftoverProcess, Severity::Warn, what, None);
    }
    if !leftovers.escaped.is_empty() {
        let escaped = &leftovers.escaped;
        let what = format!(
            "{} process(es) started by the server left its process group (setsid, setpgid or a double fork) and \
             outlived it; killed: {}",
            escaped.len(),
            list(escaped)
        );
        life.event("leftover", what.clone());
        life.finding(FindingKind::LeftoverProcess, Severity::Warn, what, None);
    }
    if !leftovers.adopted.is_empty() {
        let adopted = &leftovers.adopted;
        let what = format!(
            "{} process(es) that gauntlet did not start were re-parented to it (their parent, started by a server \
             or a tool of this run, exited) and outlived the server; killed: {}",
            adopted.len(),
            list(adopted)
        );
        life.event("leftover", what.clone());
        life.finding(FindingKind::LeftoverProcess, Severity::Warn, what, None);
    }
    stop
}

/// The server's own build string, when it reports one (llama.cpp: `/props` → `build_info`). Best effort, bounded.
pub(crate) async fn server_build_info(client: &Client) -> Option<String> {
    let props = client.get_json("props", Duration::from_secs(2)).await.ok()?;
    let build = props.get("build_info")?.as_str()?;
    Some(build.chars().take(200).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_cut_short_by_the_load_deadline_does_not_hide_an_earlier_answer() {
        let timeout = ClientError::Timeout { seconds: 0.0, during_body: false };
        let cert = "health: invalid peer certificate: UnknownIssuer";
        // Cut short (0.04 s left) after a certificate error: the certificate error stays named.
        assert!(cut_by_the_deadline(&timeout, Duration::from_millis(40), cert));
        // A full probe that timed out is news: it replaces what came before.
        assert!(!cut_by_the_deadline(&timeout, PROBE_TIMEOUT, cert));
        // With nothing heard yet, even a cut probe's timeout is all there is to say.
        assert!(!cut_by_the_deadline(&timeout, Duration::from_millis(40), NO_ANSWER_YET));
        // Another error is never a cut probe.
        let refused = ClientError::Status { url: "h".into(), status: 503, body: String::new() };
        assert!(!cut_by_the_deadline(&refused, Duration::from_millis(40), cert));
    }
}
