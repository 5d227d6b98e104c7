//! One server process group: spawn with an explicit environment, watch for a crash, stop by escalation, and
//! find anything of the group that outlives its leader. The group is also registered with [`super::signals`]
//! so that Ctrl-C on gauntlet stops it, and `Drop` kills it so that a panic leaves no orphan.
//!
//! Processes that leave the group (setsid, setpgid, a double fork) are found too: every process of a spawn
//! carries a marker in its environment ([`super::group::MARKER_VAR`]), gauntlet is their child subreaper (an
//! orphan comes back to it, not to init), and the stop kills and reaps every marked process outside the group.
//! The leader dies with gauntlet even when gauntlet is killed outright: it is spawned with a parent-death signal
//! (SIGKILL). That signal follows the spawning *thread*, so a `ServerProcess` must be spawned on a thread that
//! lives as long as it does (the session's own thread).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::net::TcpListener;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::manifest::SpawnSpec;

use super::group::{self, MARKER_VAR, escaped_members, group_members, signal_group};
use super::signals;

/// How long the stop waits for killed leftovers to vanish: killed processes go in milliseconds; one in
/// uninterruptible sleep may not, and the run must still end.
const LEFTOVER_WAIT: Duration = Duration::from_secs(5);

/// Variables passed through from gauntlet's environment; everything else is dropped so that ambient settings do
/// not leak into a measurement. The profile's own `environment` is added on top.
const ENV_ALLOW: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LANG",
    "LC_ALL",
    "TZ",
    "TMPDIR",
    "LD_LIBRARY_PATH",
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
];

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error("port {port} on {host} is already in use; stop what holds it or choose another port")]
    PortInUse { host: String, port: u16 },
    #[error("cannot bind {host}:{port} to check it is free: {source}")]
    PortCheck { host: String, port: u16, source: std::io::Error },
    #[error("cannot create server log `{path}`: {source}")]
    Log { path: PathBuf, source: std::io::Error },
    #[error("cannot start `{binary}`: {source}")]
    Exec { binary: String, source: std::io::Error },
}

/// How a stop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopOutcome {
    /// Exited on SIGTERM within the grace period.
    Terminated(ExitStatus),
    /// Needed SIGKILL.
    Killed,
    /// Still alive after SIGKILL and a second grace period.
    Stuck,
    /// Had already exited before we asked (a crash, unless we stopped it).
    AlreadyExited(ExitStatus),
}

/// What of a stopped group outlived its leader, killed: members of its process group, and marked descendants
/// that had left the group (setsid, setpgid, a double fork).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Leftovers {
    pub group: Vec<i32>,
    pub escaped: Vec<i32>,
}

#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    pgid: i32,
    /// The value of [`MARKER_VAR`] in the environment of this spawn and everything it starts.
    marker: String,
    spawned_at: Instant,
    log_path: PathBuf,
    exit: Option<ExitStatus>,
    stopped: bool,
}

/// Refuse a port something else listens on: our client would talk to that server instead of ours.
pub fn check_port_free(host: &str, port: u16) -> Result<(), SpawnError> {
    match TcpListener::bind((host, port)) {
        Ok(listener) => {
            drop(listener);
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            Err(SpawnError::PortInUse { host: host.to_owned(), port })
        }
        Err(source) => Err(SpawnError::PortCheck { host: host.to_owned(), port, source }),
    }
}

impl ServerProcess {
    pub fn spawn(spec: &SpawnSpec, log_path: &Path) -> Result<ServerProcess, SpawnError> {
        check_port_free(&spec.host, spec.port)?;
        let log = File::create(log_path).map_err(|source| SpawnError::Log { path: log_path.into(), source })?;
        ServerProcess::spawn_group(&spec.command(), &spec.full_environment(), None, log, log_path)
    }

    /// Starts `argv` (never through a shell) as the leader of a new process group, with the allow-listed
    /// environment plus `environment`, its output into `log`. Servers and build steps share this supervision.
    pub(crate) fn spawn_group(
        argv: &[String],
        environment: &std::collections::BTreeMap<String, String>,
        cwd: Option<&Path>,
        log: File,
        log_path: &Path,
    ) -> Result<ServerProcess, SpawnError> {
        let log2 = log.try_clone().map_err(|source| SpawnError::Log { path: log_path.into(), source })?;
        let Some(program) = argv.first() else {
            return Err(SpawnError::Exec { binary: String::new(), source: std::io::Error::other("empty argv") });
        };
        let mut cmd = Command::new(program);
        cmd.args(&argv[1..])
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log2))
            .process_group(0);
        if let Some(dir) = cwd {
            cmd.current_dir(dir);
        }
        for key in ENV_ALLOW {
            if let Some(v) = std::env::var_os(key) {
                cmd.env(key, v);
            }
        }
        cmd.envs(environment);
        let marker = group::new_marker();
        cmd.env(MARKER_VAR, &marker);
        group::become_subreaper();
        let parent = std::process::id() as i32;
        // SAFETY: the closure runs between fork and exec and calls only async-signal-safe functions (prctl,
        // getppid); the error it may return is built without allocating.
        unsafe {
            cmd.pre_exec(move || {
                // Dies with gauntlet, even a gauntlet killed by SIGKILL that can run no cleanup of its own.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL as libc::c_ulong, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // gauntlet died between the fork and the prctl: the signal will never come.
                if libc::getppid() != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
        // Register before the group exists, under a lock the signal thread also takes, so there is no moment in
        // which Ctrl-C could miss a freshly started group.
        super::signals::install();
        let guard = signals::lock();
        let child = cmd.spawn().map_err(|source| SpawnError::Exec { binary: program.clone(), source })?;
        let pgid = child.id() as i32;
        signals::register(guard, pgid, marker.clone());
        Ok(ServerProcess {
            child,
            pgid,
            marker,
            spawned_at: Instant::now(),
            log_path: log_path.to_owned(),
            exit: None,
            stopped: false,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn spawned_at(&self) -> Instant {
        self.spawned_at
    }

    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// `Some(status)` once the leader has exited. Non-blocking.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        if self.exit.is_none()
            && let Ok(Some(status)) = self.child.try_wait()
        {
            self.exit = Some(status);
        }
        self.exit
    }

    /// SIGTERM to the group → `grace` → SIGKILL → `grace` → stuck. Then kill anything of the group that is left,
    /// and every marked descendant that left the group, and return their pids (a leaked child is a finding, and it
    /// must not outlive the run).
    pub fn stop(&mut self, grace: Duration) -> (StopOutcome, Leftovers) {
        self.stopped = true;
        let outcome = if let Some(status) = self.exited() {
            StopOutcome::AlreadyExited(status)
        } else {
            signal_group(self.pgid, libc::SIGTERM);
            if let Some(status) = self.wait_until(Instant::now() + grace) {
                StopOutcome::Terminated(status)
            } else {
                signal_group(self.pgid, libc::SIGKILL);
                match self.wait_until(Instant::now() + grace) {
                    Some(_) => StopOutcome::Killed,
                    None => StopOutcome::Stuck,
                }
            }
        };
        let leftovers = self.kill_leftovers();
        if outcome != StopOutcome::Stuck {
            signals::unregister(self.pgid);
        }
        (outcome, leftovers)
    }

    /// Kills what is left of the group and every marked process outside it, until none is left or
    /// [`LEFTOVER_WAIT`] passed; reaps those that were re-parented to gauntlet. Killing an escaped process can
    /// orphan its own children (marked too), so the scan repeats.
    fn kill_leftovers(&mut self) -> Leftovers {
        let mut seen = Leftovers { group: group_members(self.pgid), escaped: Vec::new() };
        let deadline = Instant::now() + LEFTOVER_WAIT;
        loop {
            let members = group_members(self.pgid);
            let escaped = escaped_members(&self.marker, self.pgid);
            for pid in &members {
                if !seen.group.contains(pid) {
                    seen.group.push(*pid);
                }
            }
            for pid in &escaped {
                if !seen.escaped.contains(pid) {
                    seen.escaped.push(*pid);
                }
            }
            group::reap(&seen.group);
            group::reap(&seen.escaped);
            if (members.is_empty() && escaped.is_empty()) || Instant::now() >= deadline {
                break;
            }
            if !members.is_empty() {
                signal_group(self.pgid, libc::SIGKILL);
            }
            for pid in &escaped {
                group::signal_pid(*pid, libc::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        seen
    }

    /// Waits for the leader to exit, at most until `deadline`; polls every few milliseconds.
    pub(crate) fn wait_until(&mut self, deadline: Instant) -> Option<ExitStatus> {
        loop {
            if let Some(status) = self.exited() {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5).min(deadline.saturating_duration_since(Instant::now())));
        }
    }

    /// The last `n` lines of the server log (reads at most the last 64 KiB).
    /// What the server's process group has spent until now (see [`gauntlet_schema::LoadCpu`]); None when /proc
    /// says nothing of it.
    pub fn cpu_account(&self) -> Option<gauntlet_schema::LoadCpu> {
        let members = group_members(self.pid() as i32);
        let mut account = gauntlet_schema::LoadCpu { cpu_seconds: 0.0, wait_seconds: 0.0 };
        let mut seen = false;
        for pid in members {
            if let Some(cpu) = cpu_seconds(pid) {
                account.cpu_seconds += cpu;
                account.wait_seconds += wait_seconds(pid);
                seen = true;
            }
        }
        seen.then_some(account)
    }

    pub fn log_tail(&self, n: usize) -> Vec<String> {
        log_tail(&self.log_path, n)
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if !self.stopped {
            signal_group(self.pgid, libc::SIGKILL);
            // Bounded: a leader in uninterruptible sleep must not hang the unwinding; it stays registered so that
            // Ctrl-C still tries to kill it.
            let reaped = self.wait_until(Instant::now() + LEFTOVER_WAIT).is_some();
            self.kill_leftovers();
            if reaped {
                signals::unregister(self.pgid);
            }
        }
    }
}

/// User + system CPU seconds of `pid` (all its threads) and of its reaped children, from `/proc/PID/stat`.
fn cpu_seconds(pid: i32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may itself contain spaces or parentheses.
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    // SAFETY: sysconf reads a constant of the system.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks <= 0 {
        return None;
    }
    // utime, stime, cutime, cstime: fields 14–17 of the line, 11–14 after the name.
    let sum: u64 = fields.get(11..15)?.iter().map(|f| f.parse::<u64>().ok()).sum::<Option<u64>>()?;
    Some(sum as f64 / ticks as f64)
}

/// Seconds the threads of `pid` alive now waited, runnable, for a CPU: the second field of each
/// `/proc/PID/task/TID/schedstat` (nanoseconds), summed. 0 where the kernel keeps no schedstat.
fn wait_seconds(pid: i32) -> f64 {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0.0;
    };
    let mut ns: u64 = 0;
    for task in tasks.flatten() {
        let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        if let Some(wait) = text.split_whitespace().nth(1).and_then(|f| f.parse::<u64>().ok()) {
            ns = ns.saturating_add(wait);
        }
    }
    ns as f64 / 1e9
}

pub fn log_tail(path: &Path, n: usize) -> Vec<String> {
    let Ok(mut f) = File::open(path) else {
        return Vec::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(64 * 1024);
    if f.seek(SeekFrom::Start(start)).is_err() {
        return Vec::new();
    }
    let mut buf = Vec::new();
    let _ = f.take(64 * 1024).read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    let lines: Vec<&str> = text.lines().collect();
    let skip = lines.len().saturating_sub(n);
    lines[skip..].iter().map(|l| l.to_string()).collect()
}

/// Human words for how a process ended.
pub fn describe_exit(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(sig)) => format!("signal {sig}"),
        _ => "unknown status".into(),
    }
}
