//! The session's steps: the GPU claim, readiness, the stop, the kernel verdict and the server's use of the GPU.
//! Called only by [`super::Session`]; they never decide a verdict and never write to the terminal.

use std::path::Path;
use std::time::{Duration, Instant};

use gauntlet_schema::{Finding, Severity, StopOutcome as Stop};
use serde_json::{Value, json};

use super::{KERNEL_LOG_GRACE, Lifecycle, Reporter, RunEvent, SessionError};
use crate::client::Client;
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
        Some(gpu::lock_device(&gpu::lock_dir(), &profile.device, profile.busy_wait).map_err(SessionError::GpuBusy)?)
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
        gpu::Wait::Busy { waited, holders } => Err(SessionError::GpuBusy(format!(
            "{label} is still in use after {:.0}s: {}",
            waited.as_secs_f64(),
            holders.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
        ))),
        gpu::Wait::Unknown(why) => Err(SessionError::GpuUnknown(format!("cannot tell whether {label} is free: {why}"))),
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
    use std::io::{Read as _, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else { return String::new() };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(limit)));
    let mut buf = Vec::new();
    let _ = f.take(limit).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Readiness = the health endpoint answers 200 AND one tiny real generation succeeds (a lazy server loads the
/// model on its first request). Load time = spawn → that reply. Bounded by the load timeout.
pub(super) async fn wait_ready(
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
    // Polls fast at first (a small model is ready in well under a second) and backs off to 100 ms: the poll's
    // granularity is measured as load time.
    let mut pause = Duration::from_millis(10);
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
        tokio::time::sleep(pause).await;
        pause = (pause * 3 / 2).min(Duration::from_millis(100));
    }
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
    if !leftovers.group.is_empty() {
        let group = &leftovers.group;
        let what = format!("{} process(es) of the server's group outlived it and were killed: {group:?}", group.len());
        life.event("leftover", what.clone());
        life.finding("leftover-process", Severity::Warn, what, None);
    }
    if !leftovers.escaped.is_empty() {
        let escaped = &leftovers.escaped;
        let what = format!(
            "{} process(es) started by the server left its process group (setsid, setpgid or a double fork) and \
             outlived it; killed: {escaped:?}",
            escaped.len()
        );
        life.event("leftover", what.clone());
        life.finding("leftover-process", Severity::Warn, what, None);
    }
    stop
}

/// The server's own build string, when it reports one (llama.cpp: `/props` → `build_info`). Best effort, bounded.
pub(crate) async fn server_build_info(client: &Client) -> Option<String> {
    let props = client.get_json("props", Duration::from_secs(2)).await.ok()?;
    let build = props.get("build_info")?.as_str()?;
    Some(build.chars().take(200).collect())
}
