//! `gauntlet doctor`: before a run, what will and will not work for one profile on this machine. Each check is
//! one line (ok / warn / fail) and, when it is not ok, the fix. Nothing here starts a server or changes anything
//! but gauntlet's own hash memo and a probe file in the store.

use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

use crate::manifest::{Profile, Target};
use crate::sentry::gpu::{self, Device, Probe};
use crate::sentry::{Ours, assess};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// What was looked at: `kernel log`, `device`, `gpu holders`, `host lock`, `server binary`, `model`, `port`,
    /// `supervision`, `server`, `store`.
    pub subject: &'static str,
    pub status: Status,
    pub detail: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    fn ok(subject: &'static str, detail: impl Into<String>) -> Check {
        Check { subject, status: Status::Ok, detail: detail.into(), fix: None }
    }
    fn warn(subject: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check { subject, status: Status::Warn, detail: detail.into(), fix: Some(fix.into()) }
    }
    fn fail(subject: &'static str, detail: impl Into<String>, fix: impl Into<String>) -> Check {
        Check { subject, status: Status::Fail, detail: detail.into(), fix: Some(fix.into()) }
    }
}

/// Everything doctor found, plus the runtime facts a run would record (so a reviewer sees them without a run).
#[derive(Debug, Clone, Serialize)]
pub struct Examination {
    pub profile: String,
    pub device: String,
    pub checks: Vec<Check>,
    pub runtime: Value,
}

impl Examination {
    pub fn worst(&self) -> Status {
        self.checks.iter().map(|c| c.status).max().unwrap_or(Status::Ok)
    }
}

/// Where the fix for a missing file of the embedded default lies.
pub struct Hints<'a> {
    pub setup: Option<&'a str>,
}

pub fn examine(profile: &Profile, home: &Path, store_dir: &Path, hints: &Hints) -> Examination {
    let probe = gpu::probe();
    let mut checks = vec![kernel_log(profile)];
    let mut runtime = serde_json::json!({
        "cpu": gpu::cpu_identity(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default()),
    });
    checks.push(device(profile, probe.as_ref(), &mut runtime));
    if profile.device.is_gpu() {
        checks.push(holders(profile, probe.as_ref()));
        if profile.gpu_lock {
            checks.push(host_lock(&profile.device));
        }
    }
    match &profile.target {
        Target::Spawn(s) => {
            checks.push(binary(&s.binary, home, hints));
            checks.push(model(&s.model, home, hints));
            checks.push(port(&s.host, s.port));
            checks.push(supervision());
        }
        Target::Attach(a) => checks.push(reachable(&a.base_url)),
    }
    checks.push(store(store_dir));
    Examination { profile: profile.name.clone(), device: profile.device.label(), checks, runtime }
}

/// Whether a spawned server gets a cgroup of its own (`crate::server`): without one, a process that clears its
/// environment and leaves its group is still found while gauntlet lives, but not after a SIGKILL of gauntlet.
fn supervision() -> Check {
    match crate::server::cgroup_availability() {
        Ok(group) => Check::ok("supervision", format!("each spawn gets its own cgroup, beside {group}")),
        Err(why) => Check::warn(
            "supervision",
            format!(
                "no cgroup for spawns ({why}); leftovers are found through the process group, the environment \
                     marker and gauntlet as child subreaper"
            ),
            "give gauntlet a writable cgroup (v2, or v1 `pids`) of its own, e.g. a delegated systemd scope, so that \
             a SIGKILL of gauntlet cannot leave a server's detached processes running",
        ),
    }
}

const KMSG_FIX: &str = "run as root or give gauntlet CAP_SYSLOG (in a container: `--cap-add SYSLOG --device /dev/kmsg`); \
     until then a run reports `kernel_log: blind` and cannot rule out GPU faults";

fn kernel_log(profile: &Profile) -> Check {
    let bracket = match crate::sentry::open_kernel_log() {
        Ok(b) => b,
        Err(why) => return Check::warn("kernel log", format!("not readable: {why}"), KMSG_FIX),
    };
    let observed = bracket.finish(Duration::ZERO);
    if let Some(why) = &observed.broken {
        return Check::warn("kernel log", format!("opened, but reading failed: {why}"), KMSG_FIX);
    }
    let ours = Ours { on_gpu: profile.device.is_gpu(), ..Ours::default() };
    let (sentry, _) = assess(Ok(&observed), "", &ours);
    let source = std::env::var("GAUNTLET_KMSG_FILE").ok().filter(|v| !v.is_empty());
    let mut detail = format!(
        "{} readable: {} kernel record(s) in the buffer{}",
        source.as_deref().unwrap_or(crate::sentry::kmsg::DEV_KMSG),
        observed.before.len(),
        observed.last_seq.map(|s| format!(" (up to seq {s})")).unwrap_or_default(),
    );
    if sentry.pre_run.is_empty() {
        detail.push_str(", none matches a fault pattern");
        return Check::ok("kernel log", detail);
    }
    let devices = sentry.pre_run.iter().filter(|h| h.class == "device").count();
    detail.push_str(&format!(
        "; {} already match a fault pattern ({devices} device-class), kept as pre-run state; first: {}",
        sentry.pre_run.len(),
        sentry.pre_run[0].text.replace('\n', " ⏎ ")
    ));
    if devices > 0 && profile.device.is_gpu() {
        Check::warn(
            "kernel log",
            detail,
            "a device fault before any run: check the GPU (nvidia-smi -q / amd-smi) or reboot before trusting results",
        )
    } else {
        Check::ok("kernel log", detail)
    }
}

fn device(profile: &Profile, probe: &dyn Probe, runtime: &mut Value) -> Check {
    let label = profile.device.label();
    if !profile.device.is_gpu() {
        let cpu = &runtime["cpu"];
        let flags: Vec<&str> =
            cpu["numeric_flags"].as_array().map(|a| a.iter().filter_map(Value::as_str).collect()).unwrap_or_default();
        return Check::ok(
            "device",
            format!(
                "cpu: {} ({} logical), numeric flags: {}",
                cpu["model"].as_str().unwrap_or("?"),
                cpu["logical_cpus"],
                if flags.is_empty() { "none".to_owned() } else { flags.join(" ") }
            ),
        );
    }
    match probe.identity(&profile.device) {
        Ok(id) => {
            let text = |k: &str| {
                id.get(k).and_then(|v| v.as_str().map(str::to_owned).or_else(|| v.as_u64().map(|n| n.to_string())))
            };
            let mut facts: Vec<String> = Vec::new();
            if let Some(n) = text("name").or_else(|| text("gfx_target")) {
                facts.push(n);
            }
            if let Some(m) = id.get("memory_total_bytes").and_then(Value::as_u64) {
                facts.push(format!("{} MiB", m >> 20));
            }
            for (key, label) in [
                ("driver", "driver"),
                ("amdgpu_driver", "amdgpu"),
                ("rocm_version", "ROCm"),
                ("pci_bus_id", "bus"),
                ("location_id", "location"),
            ] {
                if let Some(v) = text(key) {
                    facts.push(format!("{label} {v}"));
                }
            }
            if let Some(cuda) = id.get("cuda_driver_version").and_then(Value::as_u64) {
                facts.push(format!("CUDA {}.{}", cuda / 1000, (cuda % 1000) / 10));
            }
            runtime["gpu"] = id;
            Check::ok("device", format!("{label}: {}", facts.join(", ")))
        }
        Err(why) => {
            runtime["gpu"] = serde_json::json!({"error": why.to_string()});
            let fix = match profile.device {
                Device::Nvidia(_) => {
                    "install the NVIDIA driver and make libnvidia-ml.so.1 loadable (ldconfig or LD_LIBRARY_PATH); `nvidia-smi` should list the GPU"
                }
                _ => "load the amdgpu driver (KFD exposes /sys/class/kfd/kfd/topology); check the device index",
            };
            Check::fail("device", format!("{label}: not visible: {why}"), fix)
        }
    }
}

fn holders(profile: &Profile, probe: &dyn Probe) -> Check {
    let label = profile.device.label();
    // The session's own rule: gauntlet and an attached server under test are not "others".
    match crate::session::other_holders(profile, probe) {
        Ok(h) => {
            let others: Vec<String> = h.iter().map(ToString::to_string).collect();
            if others.is_empty() {
                Check::ok("gpu holders", format!("no other process holds {label}"))
            } else {
                Check::warn(
                    "gpu holders",
                    format!("{label} is in use: {}", others.join(", ")),
                    format!(
                        "a run waits up to {} for it to be free, then skips (exit 3); stop those processes or raise `busy_wait`",
                        humantime::format_duration(profile.busy_wait)
                    ),
                )
            }
        }
        Err(why) => Check::fail(
            "gpu holders",
            format!("cannot tell who holds {label}: {why}"),
            "a run fails closed (exit 1) rather than share a GPU unknowingly; make NVML or /sys/class/kfd readable",
        ),
    }
}

fn host_lock(device: &Device) -> Check {
    let dir = gpu::lock_dir();
    match gpu::lock_device(&dir, device, Duration::ZERO) {
        Ok(lock) => Check::ok("host lock", format!("{} is free", lock.path.display())),
        Err(why) => Check::warn(
            "host lock",
            why.to_string(),
            "another gauntlet is running on this GPU; a run waits for it up to `busy_wait`",
        ),
    }
}

fn missing_fix(hints: &Hints, what: &str) -> String {
    match hints.setup {
        Some(setup) => format!("run `{setup}` (installs the embedded default's {what})"),
        None => format!("install it, or point the manifest's `{what}` at it"),
    }
}

fn binary(path: &Path, home: &Path, hints: &Hints) -> Check {
    if let Some(problem) = crate::manifest::executable_problem(path) {
        return Check::fail("server binary", problem, missing_fix(hints, "binary"));
    }
    if let Some(arch) = elf_machine(path)
        && arch != std::env::consts::ARCH
    {
        return Check::fail(
            "server binary",
            format!("`{}` is built for {arch}, this machine is {}", path.display(), std::env::consts::ARCH),
            "build the server for this machine",
        );
    }
    let digest =
        crate::util::sha256_file_memo(path, home).map(|d| d[..16].to_owned()).unwrap_or_else(|e| e.to_string());
    Check::ok("server binary", format!("{} is executable (sha256 {digest}…)", path.display()))
}

/// The architecture an ELF executable was built for (`None` for scripts and anything unreadable).
fn elf_machine(path: &Path) -> Option<&'static str> {
    use std::io::Read;
    let mut head = [0u8; 20];
    crate::util::bounded::open_named(path).ok()?.0.read_exact(&mut head).ok()?;
    if &head[..4] != b"\x7fELF" {
        return None;
    }
    let machine =
        if head[5] == 2 { u16::from_be_bytes([head[18], head[19]]) } else { u16::from_le_bytes([head[18], head[19]]) };
    Some(match machine {
        0x3e => "x86_64",
        0xb7 => "aarch64",
        0x03 => "x86",
        0x28 => "arm",
        0xf3 => "riscv64",
        0x15 => "powerpc64",
        _ => "another architecture",
    })
}

fn model(model: &crate::manifest::ModelSpec, home: &Path, hints: &Hints) -> Check {
    let meta = match std::fs::metadata(&model.path) {
        Ok(m) if m.is_file() => m,
        Ok(_) => {
            return Check::fail(
                "model",
                format!("`{}` is not a file", model.path.display()),
                missing_fix(hints, "model"),
            );
        }
        Err(e) => {
            return Check::fail(
                "model",
                format!("{}: `{}`: {e}", model.name, model.path.display()),
                missing_fix(hints, "model"),
            );
        }
    };
    let sha = match crate::util::sha256_file_memo(&model.path, home) {
        Ok(s) => s,
        Err(e) => {
            return Check::fail("model", format!("cannot read `{}`: {e}", model.path.display()), "fix its permissions");
        }
    };
    let size = format!("{:.1} MB", meta.len() as f64 / 1e6);
    match &model.sha256 {
        Some(want) if *want != sha => Check::fail(
            "model",
            format!("{}: `{}` has sha256 {sha}, the manifest says {want}", model.name, model.path.display()),
            "replace the file with the one the manifest pins, or update `sha256` on purpose (the baseline identity changes)",
        ),
        Some(_) => Check::ok(
            "model",
            format!("{}: {} ({size}), sha256 {}… matches the manifest", model.name, model.path.display(), &sha[..16]),
        ),
        None => {
            Check::ok("model", format!("{}: {} ({size}), sha256 {}…", model.name, model.path.display(), &sha[..16]))
        }
    }
}

fn port(host: &str, port: u16) -> Check {
    // The same check the session makes before it spawns.
    match crate::server::check_port_free(host, port) {
        Ok(()) => Check::ok("port", format!("{host}:{port} is free")),
        Err(e) => Check::warn(
            "port",
            format!("cannot listen on {host}:{port}: {e}"),
            "something else listens there, so the server would fail to start: stop it, or pass `--port`",
        ),
    }
}

fn reachable(base_url: &str) -> Check {
    let authority = base_url.split("://").nth(1).unwrap_or(base_url).split('/').next().unwrap_or_default();
    let default_port = if base_url.starts_with("https://") { 443 } else { 80 };
    let with_port = if authority.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
        authority.to_owned()
    } else {
        format!("{authority}:{default_port}")
    };
    let addrs: Vec<_> = match with_port.to_socket_addrs() {
        Ok(a) => a.collect(),
        Err(e) => {
            return Check::fail("server", format!("{base_url}: cannot resolve {with_port}: {e}"), "check `base_url`");
        }
    };
    for addr in &addrs {
        if TcpStream::connect_timeout(addr, Duration::from_secs(3)).is_ok() {
            return Check::ok("server", format!("{base_url} accepts connections ({addr})"));
        }
    }
    Check::fail(
        "server",
        format!("nothing accepts connections at {base_url}"),
        "start the server first (an attach profile never starts one), or check `base_url`",
    )
}

fn store(dir: &Path) -> Check {
    let probe = dir.join(format!(".doctor-{}", std::process::id()));
    let written = std::fs::create_dir_all(dir).and_then(|_| {
        use std::io::Write as _;
        crate::util::bounded::create_new(&probe)?.write_all(b"ok")
    });
    let _ = std::fs::remove_file(&probe);
    match written {
        Ok(()) => Check::ok("store", format!("{} is writable", dir.display())),
        Err(e) => Check::fail(
            "store",
            format!("{}: {e}", dir.display()),
            "pass `--store` or set GAUNTLET_STORE to a writable folder (runs compare with and promote into it)",
        ),
    }
}
