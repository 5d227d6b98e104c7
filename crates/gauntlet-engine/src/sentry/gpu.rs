//! The GPU a profile is bound to: who else holds it, whether to wait, a host lock, and its runtime identity.
//!
//! Probes sit behind [`Probe`]: NVML (loaded at run time, so the binary runs where there is no NVIDIA library),
//! AMD's KFD sysfs (read only: opening /dev/kfd would itself register us as a user), and a directory standing
//! in for both in tests (`$GAUNTLET_FAKE_GPU`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

// The device a profile names is the manifest's; re-exported so that callers keep their path.
pub use crate::manifest::Device;

/// A process holding the GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Holder {
    pub pid: u32,
    pub name: String,
    pub memory_bytes: Option<u64>,
}

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} ({})", self.pid, if self.name.is_empty() { "?" } else { &self.name })?;
        if let Some(m) = self.memory_bytes {
            write!(f, " {} MiB", m >> 20)?;
        }
        Ok(())
    }
}

/// Why a probe cannot say who holds a device, or what the device is. The message names the device or the file.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// NVML could not be loaded or initialised (kept for the process: the first failure is every query's).
    #[error("NVML unavailable ({source}): is the NVIDIA driver installed and libnvidia-ml.so visible?")]
    NvmlUnavailable {
        #[source]
        source: std::sync::Arc<nvml_wrapper::error::NvmlError>,
    },
    /// NVML has no device at this index.
    #[error("nvidia:{index}: {source}")]
    NvidiaDevice {
        index: u32,
        #[source]
        source: nvml_wrapper::error::NvmlError,
    },
    /// NVML cannot list the device's compute processes.
    #[error("nvidia:{index}: compute processes: {source}")]
    NvidiaProcesses {
        index: u32,
        #[source]
        source: nvml_wrapper::error::NvmlError,
    },
    /// A KFD sysfs folder or file cannot be read (`path`: the process list, or a GPU node).
    #[error("{}: {source}", .path.display())]
    Kfd {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// KFD has no GPU node at this index.
    #[error("amd:{index}: no such KFD GPU node")]
    NoKfdNode { index: u32 },
    /// The fake probe's `unknown` file: its text is the reason.
    #[error("{0}")]
    Told(String),
    /// The fake probe's identity file cannot be read.
    #[error("{}: {source}", .path.display())]
    IdentityRead {
        path: PathBuf,
        #[source]
        source: crate::util::bounded::ReadError,
    },
    /// The fake probe's identity file is not JSON.
    #[error("{}: {source}", .path.display())]
    IdentityJson {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

pub trait Probe {
    /// Every process holding the device; `Err` when it cannot be told (the caller fails closed).
    fn holders(&self, device: &Device) -> Result<Vec<Holder>, ProbeError>;
    /// Driver, runtime and board facts of the device (warn-only runtime identity).
    fn identity(&self, device: &Device) -> Result<Value, ProbeError>;
}

/// The probe for this machine: the fake directory when `$GAUNTLET_FAKE_GPU` names one, else the real one. The real
/// one is shared by the whole process: NVML is initialised on the first NVIDIA query and kept (its initialisation
/// is the slow part of a query, and a gate asks several times: identity, busy wait, the server's use).
pub fn probe() -> Box<dyn Probe> {
    static REAL: std::sync::OnceLock<RealProbe> = std::sync::OnceLock::new();
    match std::env::var_os("GAUNTLET_FAKE_GPU").filter(|v| !v.is_empty()) {
        Some(dir) => Box::new(DirProbe { dir: dir.into() }),
        None => Box::new(Shared(REAL.get_or_init(RealProbe::default))),
    }
}

/// The process's one [`RealProbe`].
struct Shared(&'static RealProbe);

impl Probe for Shared {
    fn holders(&self, device: &Device) -> Result<Vec<Holder>, ProbeError> {
        self.0.holders(device)
    }

    fn identity(&self, device: &Device) -> Result<Value, ProbeError> {
        self.0.identity(device)
    }
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).map(|s| s.trim().to_owned()).unwrap_or_default()
}

/// NVML for NVIDIA (one handle, initialised once), sysfs for AMD.
#[derive(Default)]
pub struct RealProbe {
    nvml: std::sync::OnceLock<Result<nvml_wrapper::Nvml, std::sync::Arc<nvml_wrapper::error::NvmlError>>>,
}

impl RealProbe {
    fn nvml(&self) -> Result<&nvml_wrapper::Nvml, ProbeError> {
        self.nvml
            .get_or_init(|| nvml_wrapper::Nvml::init().map_err(std::sync::Arc::new))
            .as_ref()
            .map_err(|source| ProbeError::NvmlUnavailable { source: source.clone() })
    }
}

impl Probe for RealProbe {
    fn holders(&self, device: &Device) -> Result<Vec<Holder>, ProbeError> {
        match device {
            Device::Cpu => Ok(Vec::new()),
            Device::Nvidia(i) => {
                let nvml = self.nvml()?;
                let dev = nvml.device_by_index(*i).map_err(|source| ProbeError::NvidiaDevice { index: *i, source })?;
                let procs = dev
                    .running_compute_processes()
                    .map_err(|source| ProbeError::NvidiaProcesses { index: *i, source })?;
                let graphics = dev.running_graphics_processes().unwrap_or_default();
                Ok(procs
                    .into_iter()
                    .chain(graphics)
                    .map(|p| Holder {
                        pid: p.pid,
                        name: comm(p.pid),
                        memory_bytes: match p.used_gpu_memory {
                            nvml_wrapper::enums::device::UsedGpuMemory::Used(b) => Some(b),
                            nvml_wrapper::enums::device::UsedGpuMemory::Unavailable => None,
                        },
                    })
                    .collect())
            }
            Device::Amd(i) => kfd_holders(Path::new("/sys/class/kfd/kfd"), *i),
        }
    }

    fn identity(&self, device: &Device) -> Result<Value, ProbeError> {
        match device {
            Device::Cpu => Ok(Value::Null),
            Device::Nvidia(i) => {
                let nvml = self.nvml()?;
                let dev = nvml.device_by_index(*i).map_err(|source| ProbeError::NvidiaDevice { index: *i, source })?;
                let ok = |r: Result<String, _>| r.ok();
                Ok(json!({
                    "vendor": "nvidia",
                    "driver": nvml.sys_driver_version().ok(),
                    "cuda_driver_version": nvml.sys_cuda_driver_version().ok(),
                    "name": ok(dev.name()),
                    "uuid": ok(dev.uuid()),
                    "pci_bus_id": dev.pci_info().ok().map(|p| p.bus_id),
                    "vbios": ok(dev.vbios_version()),
                    "power_limit_watts": dev.enforced_power_limit().ok().map(|mw| mw as f64 / 1000.0),
                    "ecc_enabled": dev.is_ecc_enabled().ok().map(|e| e.currently_enabled),
                    "memory_total_bytes": dev.memory_info().ok().map(|m| m.total),
                }))
            }
            Device::Amd(i) => amd_identity(Path::new("/sys/class/kfd/kfd"), Path::new("/opt/rocm/.info/version"), *i),
        }
    }
}

/// KFD lists every process with a compute context under `proc/<pid>`; a process's `vram_<gpu_id>` says which
/// GPU. Without per-GPU files every KFD process counts (fail towards "busy").
fn kfd_holders(kfd: &Path, index: u32) -> Result<Vec<Holder>, ProbeError> {
    let procs = kfd.join("proc");
    let gpu_id = kfd_nodes(kfd).get(index as usize).and_then(|n| read_trim(&n.join("gpu_id")));
    let entries = match std::fs::read_dir(&procs) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && kfd.exists() => return Ok(Vec::new()),
        Err(source) => return Err(ProbeError::Kfd { path: procs, source }),
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
        let on_ours = match &gpu_id {
            Some(id) => e.path().join(format!("vram_{id}")).exists() || !has_vram_files(&e.path()),
            None => true,
        };
        if on_ours {
            let memory_bytes =
                gpu_id.as_ref().and_then(|id| read_trim(&e.path().join(format!("vram_{id}")))?.parse().ok());
            out.push(Holder { pid, name: comm(pid), memory_bytes });
        }
    }
    out.sort_by_key(|h| h.pid);
    Ok(out)
}

fn has_vram_files(dir: &Path) -> bool {
    std::fs::read_dir(dir)
        .map(|d| d.flatten().any(|e| e.file_name().to_string_lossy().starts_with("vram_")))
        .unwrap_or(false)
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned())
}

/// KFD topology nodes that are GPUs (a CPU node has gpu_id 0), in index order.
fn kfd_nodes(kfd: &Path) -> Vec<PathBuf> {
    let mut nodes: Vec<(u32, PathBuf)> = std::fs::read_dir(kfd.join("topology/nodes"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path())))
                .filter(|(_, p): &(u32, PathBuf)| read_trim(&p.join("gpu_id")).is_some_and(|g| g != "0"))
                .collect()
        })
        .unwrap_or_default();
    nodes.sort();
    nodes.into_iter().map(|(_, p)| p).collect()
}

fn amd_identity(kfd: &Path, rocm_version: &Path, index: u32) -> Result<Value, ProbeError> {
    let node = kfd_nodes(kfd).get(index as usize).cloned().ok_or(ProbeError::NoKfdNode { index })?;
    let props = match std::fs::read_to_string(node.join("properties")) {
        Ok(props) => props,
        Err(source) => return Err(ProbeError::Kfd { path: node, source }),
    };
    let prop = |key: &str| {
        props.lines().find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')).map(|v| v.trim().to_owned()))
    };
    let gfx = prop("gfx_target_version").and_then(|v| v.parse::<u32>().ok()).map(|v| {
        let (major, minor, step) = (v / 10000, (v / 100) % 100, v % 100);
        format!("gfx{major}{minor}{step:x}")
    });
    Ok(json!({
        "vendor": "amd",
        "gfx_target": gfx,
        "device_id": prop("device_id"),
        "location_id": prop("location_id"),
        "rocm_version": read_trim(rocm_version),
        "amdgpu_driver": read_trim(Path::new("/sys/module/amdgpu/version")),
        "kernel": read_trim(Path::new("/proc/sys/kernel/osrelease")),
    }))
}

/// `$GAUNTLET_FAKE_GPU`: `holders/<pid>` files (content: process name, then optionally bytes held), an `unknown` file (content: why the
/// holders cannot be told), `identity.json`. Each query that finds a holder appends a line to `probes.log`, so a
/// test can free the device once gauntlet has seen it busy instead of guessing when that will be. A host of
/// several GPUs: `devices/<index>/holders/<pid>` hold that device only, and `devices/<index>/identity.json` is
/// that device's identity (the top-level files stand for every device).
pub struct DirProbe {
    pub dir: PathBuf,
}

impl DirProbe {
    fn device_dir(&self, device: &Device) -> PathBuf {
        let index = match device {
            Device::Nvidia(i) | Device::Amd(i) => *i,
            Device::Cpu => 0,
        };
        self.dir.join("devices").join(index.to_string())
    }
}

impl Probe for DirProbe {
    fn holders(&self, device: &Device) -> Result<Vec<Holder>, ProbeError> {
        if !device.is_gpu() {
            return Ok(Vec::new());
        }
        if let Some(why) = read_trim(&self.dir.join("unknown")) {
            return Err(ProbeError::Told(why));
        }
        let per_device = self.device_dir(device).join("holders");
        let mut out: Vec<Holder> = [self.dir.join("holders"), per_device]
            .iter()
            .flat_map(|dir| std::fs::read_dir(dir).into_iter().flatten())
            .flatten()
            .filter_map(|e| {
                let pid = e.file_name().to_str()?.parse().ok()?;
                let text = read_trim(&e.path()).unwrap_or_default();
                let mut words = text.split_whitespace();
                let name = words.next().unwrap_or_default().to_owned();
                Some(Holder { pid, name, memory_bytes: words.next().and_then(|m| m.parse().ok()) })
            })
            .collect();
        out.sort_by_key(|h| h.pid);
        if !out.is_empty() {
            use std::io::Write as _;
            let log = crate::util::bounded::append(&self.dir.join("probes.log"));
            let _ = log.and_then(|mut f| writeln!(f, "busy {}", out.len()));
        }
        Ok(out)
    }

    fn identity(&self, device: &Device) -> Result<Value, ProbeError> {
        if !device.is_gpu() {
            return Ok(Value::Null);
        }
        let own = self.device_dir(device).join("identity.json");
        let path = if own.is_file() { own } else { self.dir.join("identity.json") };
        let text = match crate::util::bounded::read_text(&path, crate::util::bounded::SMALL_CAP) {
            Ok(text) => text,
            Err(source) => return Err(ProbeError::IdentityRead { path, source }),
        };
        serde_json::from_str(&text).map_err(|source| ProbeError::IdentityJson { path, source })
    }
}

/// How the wait for a free GPU ended.
#[derive(Debug)]
pub enum Wait {
    Free { waited: Duration, seen: Vec<Holder> },
    Busy { waited: Duration, holders: Vec<Holder> },
    Unknown(ProbeError),
}

/// Polls until no process other than our own and those in `exclude` (the server under test) holds the device, for
/// at most `limit`. The first poll is immediate; later ones every `every`.
pub fn wait_until_free(probe: &dyn Probe, device: &Device, limit: Duration, every: Duration, exclude: &[u32]) -> Wait {
    let start = Instant::now();
    let mut seen: Vec<Holder> = Vec::new();
    loop {
        let own = std::process::id();
        let holders = match probe.holders(device) {
            Ok(h) => h.into_iter().filter(|h| h.pid != own && !exclude.contains(&h.pid)).collect::<Vec<_>>(),
            Err(why) => return Wait::Unknown(why),
        };
        if holders.is_empty() {
            return Wait::Free { waited: start.elapsed(), seen };
        }
        for h in &holders {
            if !seen.iter().any(|s| s.pid == h.pid) {
                seen.push(h.clone());
            }
        }
        if start.elapsed() >= limit {
            return Wait::Busy { waited: start.elapsed(), holders };
        }
        std::thread::sleep(every.min(limit.saturating_sub(start.elapsed())).max(Duration::from_millis(10)));
    }
}

/// An exclusive host-wide lock for one device, held until dropped; two gauntlets never share a GPU.
pub struct HostLock {
    _file: std::fs::File,
    pub path: PathBuf,
}

/// Where host locks live: `$GAUNTLET_LOCK_DIR`, else `/run/lock/gauntlet`, else under the temporary directory.
pub fn lock_dir() -> PathBuf {
    std::env::var_os("GAUNTLET_LOCK_DIR").filter(|v| !v.is_empty()).map(PathBuf::from).unwrap_or_else(|| {
        if Path::new("/run/lock").is_dir() {
            "/run/lock/gauntlet".into()
        } else {
            std::env::temp_dir().join("gauntlet-locks")
        }
    })
}

/// Why the host lock of a device was not taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The lock folder cannot be made.
    #[error("{}: {source}", .dir.display())]
    Dir {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The lock file cannot be opened.
    #[error("{}: {source}", .path.display())]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Another gauntlet held it for longer than the limit.
    #[error(
        "another gauntlet holds {device} (lock {}) for longer than {}",
        .path.display(),
        humantime::format_duration(*.limit)
    )]
    Held { device: String, path: PathBuf, limit: Duration },
}

pub fn lock_device(dir: &Path, device: &Device, limit: Duration) -> Result<HostLock, LockError> {
    use std::os::fd::AsRawFd;
    std::fs::create_dir_all(dir).map_err(|source| LockError::Dir { dir: dir.to_owned(), source })?;
    let path = dir.join(format!("gpu-{}.lock", device.label().replace(':', "-")));
    let file = match std::fs::File::options().create(true).truncate(false).write(true).open(&path) {
        Ok(file) => file,
        Err(source) => return Err(LockError::File { path, source }),
    };
    let deadline = Instant::now() + limit;
    loop {
        // SAFETY: flock on an owned, open descriptor.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(HostLock { _file: file, path });
        }
        if Instant::now() >= deadline {
            return Err(LockError::Held { device: device.label(), path, limit });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// CPU facts that change numerics or speed: model and the SIMD flags kernels dispatch on.
pub fn cpu_identity(cpuinfo: &str) -> Value {
    const NUMERIC_FLAGS: &[&str] = &[
        "sse4_2",
        "avx",
        "avx2",
        "fma",
        "f16c",
        "avx512f",
        "avx512bw",
        "avx512vl",
        "avx512_vnni",
        "avx512_bf16",
        "avx512_fp16",
        "avx_vnni",
        "amx_tile",
        "amx_bf16",
        "amx_int8",
    ];
    let field = |key: &str| {
        cpuinfo.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == key).then(|| v.trim().to_owned())
        })
    };
    let flags: Vec<&str> = field("flags")
        .or_else(|| field("Features"))
        .map(|f| {
            let have: Vec<String> = f.split_whitespace().map(str::to_owned).collect();
            NUMERIC_FLAGS.iter().copied().filter(|n| have.iter().any(|h| h == n)).collect()
        })
        .unwrap_or_default();
    json!({
        "model": field("model name").or_else(|| field("Hardware")).unwrap_or_default(),
        "numeric_flags": flags,
        "logical_cpus": cpuinfo.lines().filter(|l| l.starts_with("processor")).count(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each way a probe cannot tell is its variant, with the device or the path, and says what it said as words.
    #[test]
    fn a_probe_that_cannot_tell_is_the_variant_of_why() {
        use nvml_wrapper::error::NvmlError;
        let e = ProbeError::NvmlUnavailable { source: std::sync::Arc::new(NvmlError::LibraryNotFound) };
        assert_eq!(
            e.to_string(),
            format!(
                "NVML unavailable ({}): is the NVIDIA driver installed and libnvidia-ml.so visible?",
                NvmlError::LibraryNotFound
            )
        );
        let e = ProbeError::NvidiaDevice { index: 3, source: NvmlError::NotFound };
        assert_eq!(e.to_string(), format!("nvidia:3: {}", NvmlError::NotFound));
        let e = ProbeError::NvidiaProcesses { index: 1, source: NvmlError::NoPermission };
        assert_eq!(e.to_string(), format!("nvidia:1: compute processes: {}", NvmlError::NoPermission));

        // KFD: a process list that is no folder, and no GPU node at the index.
        let kfd = tempfile::tempdir().unwrap();
        std::fs::write(kfd.path().join("proc"), b"").unwrap();
        let e = kfd_holders(kfd.path(), 0).unwrap_err();
        let procs = kfd.path().join("proc");
        assert!(matches!(&e, ProbeError::Kfd { path, .. } if *path == procs), "{e:?}");
        assert!(e.to_string().starts_with(&format!("{}: ", procs.display())), "{e}");
        let e = amd_identity(kfd.path(), Path::new("/nonexistent"), 2).unwrap_err();
        assert!(matches!(e, ProbeError::NoKfdNode { index: 2 }), "{e:?}");
        assert_eq!(e.to_string(), "amd:2: no such KFD GPU node");
        let node = kfd.path().join("topology/nodes/1");
        std::fs::create_dir_all(&node).unwrap();
        std::fs::write(node.join("gpu_id"), "4660").unwrap();
        let e = amd_identity(kfd.path(), Path::new("/nonexistent"), 0).unwrap_err();
        assert!(matches!(&e, ProbeError::Kfd { path, .. } if *path == node), "{e:?}");

        // The fake probe: told why, an identity file missing, one that is not JSON.
        let dir = tempfile::tempdir().unwrap();
        let probe = DirProbe { dir: dir.path().to_owned() };
        let gpu = Device::Nvidia(0);
        let e = probe.identity(&gpu).unwrap_err();
        let path = dir.path().join("identity.json");
        assert!(matches!(&e, ProbeError::IdentityRead { path: p, .. } if *p == path), "{e:?}");
        assert!(e.to_string().starts_with(&format!("{}: ", path.display())), "{e}");
        std::fs::write(&path, "{").unwrap();
        let e = probe.identity(&gpu).unwrap_err();
        assert!(matches!(&e, ProbeError::IdentityJson { path: p, .. } if *p == path), "{e:?}");
        assert!(e.to_string().starts_with(&format!("{}: ", path.display())), "{e}");
        std::fs::write(dir.path().join("unknown"), "NVML: insufficient permissions\n").unwrap();
        let e = probe.holders(&gpu).unwrap_err();
        assert!(matches!(&e, ProbeError::Told(why) if why == "NVML: insufficient permissions"), "{e:?}");
        assert_eq!(e.to_string(), "NVML: insufficient permissions");
    }

    /// A lock folder that cannot be made, a lock file that cannot be opened and a lock held past the limit are each
    /// their variant, with the path.
    #[test]
    fn a_lock_not_taken_is_the_variant_of_why() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, b"").unwrap();
        let gpu = Device::Nvidia(0);
        let e = lock_device(&file.join("locks"), &gpu, Duration::ZERO).err().unwrap();
        assert!(matches!(&e, LockError::Dir { dir, .. } if *dir == file.join("locks")), "{e:?}");
        assert!(e.to_string().starts_with(&format!("{}: ", file.join("locks").display())), "{e}");
        let path = dir.path().join("gpu-nvidia-0.lock");
        std::fs::create_dir(&path).unwrap();
        let e = lock_device(dir.path(), &gpu, Duration::ZERO).err().unwrap();
        assert!(matches!(&e, LockError::File { path: p, .. } if *p == path), "{e:?}");
        std::fs::remove_dir(&path).unwrap();
        let _held = lock_device(dir.path(), &gpu, Duration::ZERO).unwrap();
        let e = lock_device(dir.path(), &gpu, Duration::from_millis(150)).err().unwrap();
        assert!(
            matches!(&e, LockError::Held { device, path: p, limit } if device == "nvidia:0" && *p == path
                && *limit == Duration::from_millis(150)),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!("another gauntlet holds nvidia:0 (lock {}) for longer than 150ms", path.display())
        );
    }
}
