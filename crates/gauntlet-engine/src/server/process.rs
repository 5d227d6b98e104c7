//! One server process group: spawn with an explicit environment, watch for a crash, stop by escalation, and
//! find anything of the group that outlives its leader. The group is also registered with [`super::signals`]
//! so that Ctrl-C on gauntlet stops it, and `Drop` kills it so that a panic leaves no orphan.
//!
//! Processes that leave the group (setsid, setpgid, a double fork) are found too, by three threads that do not
//! depend on one another: the spawn's own control group where the machine allows one ([`super::cgroup`]: nothing
//! leaves it without the rights to move itself), a marker in the environment of every process of the spawn
//! ([`super::group::MARKER_VAR`]: `env -i` cuts it), and gauntlet as child subreaper (an orphan comes back to
//! gauntlet, not to init): when the last live spawn stops, every child of gauntlet it did not start and wait for
//! itself is killed with its descendants ([`super::group::adopted`]). Each is reported with its pid and command.
//! The leader dies with gauntlet even when gauntlet is killed outright: it is spawned with a parent-death signal
//! (SIGKILL). That signal follows the spawning *thread*, so a `ServerProcess` must be spawned on a thread that
//! lives as long as it does (the session's own thread).

use std::fs::File;

use std::net::TcpListener;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::manifest::SpawnSpec;

use super::cgroup::{Cgroup, CgroupError};
use super::group::{self, MARKER_VAR, escaped_members, group_members, signal_group};
use super::port_owner::PortOwnerError;
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

/// The environment a server program gets (the spawn adds its marker): the allow-listed variables of gauntlet's
/// own, then `environment` (the profile's, the kind's, the device's) on top. R0's `--version` probe of the program
/// gets the same, so that it reports the program as the server runs it.
pub fn server_environment(
    environment: &std::collections::BTreeMap<String, String>,
) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let mut env: std::collections::BTreeMap<std::ffi::OsString, std::ffi::OsString> =
        ENV_ALLOW.iter().filter_map(|key| std::env::var_os(key).map(|v| (std::ffi::OsString::from(key), v))).collect();
    env.extend(environment.iter().map(|(k, v)| (k.into(), v.into())));
    env.into_iter().collect()
}

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

/// What of a stopped group outlived its leader, killed: members of its process group; descendants that had left
/// the group (setsid, setpgid, a double fork), found by their marker or their cgroup; and processes re-parented to
/// gauntlet that it did not start itself (found when the last live spawn stops, so they may be another spawn's).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Leftovers {
    pub group: Vec<Leftover>,
    pub escaped: Vec<Leftover>,
    pub adopted: Vec<Leftover>,
}

/// One process that outlived its server: its pid and its command line as it was when found (redacted, escaped,
/// capped: see `group::command_line`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leftover {
    pub pid: i32,
    pub command: String,
}

impl std::fmt::Display for Leftover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pid {} `{}`", self.pid, self.command)
    }
}

/// Adds the processes of `pids` not seen yet to `seen`, with their command lines read now (before they are killed).
fn note(seen: &mut Vec<Leftover>, pids: &[i32], elsewhere: &[&[Leftover]]) {
    for &pid in pids {
        if !seen.iter().chain(elsewhere.iter().flat_map(|l| l.iter())).any(|l| l.pid == pid) {
            seen.push(Leftover { pid, command: group::command_line(pid) });
        }
    }
}

#[derive(Debug)]
pub struct ServerProcess {
    child: Child,
    pgid: i32,
    /// The value of [`MARKER_VAR`] in the environment of this spawn and everything it starts.
    marker: String,
    /// The spawn's own control group, or why it has none.
    cgroup: Result<Cgroup, CgroupError>,
    spawned_at: Instant,
    log_path: PathBuf,
    exit: Option<ExitStatus>,
    stopped: bool,
    /// The CPU group the leader started in (gauntlet's own) and its throttled ns at the spawn: what the load's
    /// throttled time is counted from.
    spawn_throttle: Option<(PathBuf, u64)>,
    /// The machine's CPU counters just before the spawn: the load's neighbours are counted from them.
    spawn_machine: Option<super::sched::Machine>,
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

/// A process gauntlet did not start listens on the spawned server's port: what answered there may not be the server
/// under test.
#[derive(Debug, thiserror::Error)]
#[error(
    "port {port} is held by a process that gauntlet did not start ({}){}; the server it spawned (pid {spawned}) {}",
    named(.foreign),
    if *.beside { " beside the spawned server" } else { "" },
    if *.beside {
        "shares the port with it, so an answer there may come from either"
    } else {
        "does not listen there, so what answered was not the server under test"
    }
)]
pub struct PortTaken {
    pub port: u16,
    /// The foreign listeners: pid and command line.
    pub foreign: Vec<(u32, String)>,
    /// The spawned server listens there too (`SO_REUSEPORT`).
    pub beside: bool,
    /// The spawned server's pid (its process group's).
    pub spawned: i32,
}

/// `pid 12 `cmd``, comma-separated.
fn named(foreign: &[(u32, String)]) -> String {
    foreign.iter().map(|(pid, cmd)| format!("pid {pid} `{cmd}`")).collect::<Vec<_>>().join(", ")
}

impl ServerProcess {
    pub fn spawn(spec: &SpawnSpec, log_path: &Path) -> Result<ServerProcess, SpawnError> {
        check_port_free(&spec.host, spec.port)?;
        let log = crate::util::bounded::create(log_path)
            .map_err(|source| SpawnError::Log { path: log_path.into(), source })?;
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
        cmd.envs(server_environment(environment));
        let marker = group::new_marker();
        cmd.env(MARKER_VAR, &marker);
        group::become_subreaper();
        let parent = std::process::id() as i32;
        let mut cgroup = Cgroup::create();
        let spawn_throttle = super::sched::cpu_group_of(std::process::id() as i32)
            .and_then(|g| Some((g.clone(), super::sched::throttled_ns(&g)?)));
        let spawn_machine = super::sched::Machine::now();
        // The path, ready before the fork: the child may not allocate.
        let procs = cgroup
            .as_ref()
            .ok()
            .and_then(|c| std::ffi::CString::new(c.procs_file().into_os_string().into_encoded_bytes()).ok());
        // SAFETY: the closure runs between fork and exec and calls only async-signal-safe functions (prctl,
        // getppid, getpid, open, write, close) on memory prepared before the fork; the error it may return is built
        // without allocating.
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
                // Into the spawn's cgroup before anything of the server runs. A failure is seen by the parent
                // (the leader is then not a member) and costs only the cgroup.
                if let Some(path) = &procs {
                    join_cgroup(path);
                }
                Ok(())
            });
        }
        // Register before the group exists, under a lock the signal thread also takes, so there is no moment in
        // which Ctrl-C could miss a freshly started group.
        super::signals::install();
        let guard = signals::lock();
        let child = match cmd.spawn() {
            Ok(child) => child,
            Err(source) => {
                if let Ok(c) = &cgroup {
                    c.remove();
                }
                return Err(SpawnError::Exec { binary: program.clone(), source });
            }
        };
        let pgid = child.id() as i32;
        if let Ok(c) = &cgroup
            && !c.members().contains(&pgid)
            && child_alive(pgid)
        {
            let why = CgroupError::NotJoined { dir: c.dir().to_owned() };
            c.remove();
            cgroup = Err(why);
        }
        signals::register(guard, pgid, marker.clone(), cgroup.as_ref().ok().cloned());
        Ok(ServerProcess {
            child,
            pgid,
            marker,
            cgroup,
            spawned_at: Instant::now(),
            log_path: log_path.to_owned(),
            exit: None,
            stopped: false,
            spawn_throttle,
            spawn_machine,
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

    /// How this spawn's processes are found at the stop, in words for the run record: its cgroup, or why it has
    /// none and what finds them instead.
    pub fn supervision(&self) -> String {
        match &self.cgroup {
            Ok(c) => format!("every process of the server is in {}", c.describe()),
            Err(why) => format!(
                "no cgroup ({why}); leftovers are found through the process group, the environment marker and \
                 gauntlet as child subreaper"
            ),
        }
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
    /// every descendant that left the group (marked, or in the spawn's cgroup), and, when no other spawn is live,
    /// every process re-parented to gauntlet that it did not start itself; return them (a leaked child is a
    /// finding, and it must not outlive the run).
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

    /// Kills what is left of the group, every marked process outside it, everything in the spawn's cgroup, and (when
    /// this is the last live spawn) every process re-parented to gauntlet that it did not start itself, until none
    /// is left or [`LEFTOVER_WAIT`] passed; reaps those that were re-parented to gauntlet; removes the cgroup.
    /// Killing an escaped process can orphan its own children, so the scan repeats.
    fn kill_leftovers(&mut self) -> Leftovers {
        let mut seen = Leftovers::default();
        note(&mut seen.group, &group_members(self.pgid), &[]);
        let deadline = Instant::now() + LEFTOVER_WAIT;
        loop {
            let members = group_members(self.pgid);
            let mut escaped = escaped_members(&self.marker, self.pgid);
            if let Ok(c) = &self.cgroup {
                escaped.extend(c.members().into_iter().filter(|p| !members.contains(p) && *p != self.pgid));
            }
            // Only when no other spawn is live: an orphan re-parented to gauntlet cannot tell which spawn it was
            // of, and a live server's own daemonized helpers are not leftovers.
            let live = signals::live_groups();
            let adopted = if live.iter().all(|g| *g == self.pgid) {
                group::adopted(&live).into_iter().filter(|p| !members.contains(p) && !escaped.contains(p)).collect()
            } else {
                Vec::new()
            };
            note(&mut seen.group, &members, &[]);
            note(&mut seen.escaped, &escaped, &[&seen.group]);
            note(&mut seen.adopted, &adopted, &[&seen.group, &seen.escaped]);
            for l in seen.group.iter().chain(&seen.escaped).chain(&seen.adopted) {
                group::reap(&[l.pid]);
            }
            if (members.is_empty() && escaped.is_empty() && adopted.is_empty()) || Instant::now() >= deadline {
                break;
            }
            if !members.is_empty() {
                signal_group(self.pgid, libc::SIGKILL);
            }
            if let Ok(c) = &self.cgroup {
                c.kill_all();
            }
            for pid in escaped.iter().chain(&adopted) {
                group::signal_pid(*pid, libc::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        if let Ok(c) = &self.cgroup {
            // Members that were just killed leave the group as the kernel finishes them: a short, bounded wait.
            let until = Instant::now() + Duration::from_secs(1);
            while !c.remove() && Instant::now() < until {
                for l in seen.group.iter().chain(&seen.escaped).chain(&seen.adopted) {
                    group::reap(&[l.pid]);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
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
    /// Every live process of this spawn: its cgroup's members (when it has one) and its process group's.
    pub fn members(&self) -> Vec<i32> {
        let mut all = group_members(self.pgid);
        if let Ok(c) = &self.cgroup {
            all.extend(c.members());
        }
        all.sort_unstable();
        all.dedup();
        all
    }

    /// Whether what listens on `port` is this spawn. Another program may hold the port by the time the server
    /// tries to bind it (it was free when [`check_port_free`] looked; the server then fails to bind, or binds with
    /// `SO_REUSEPORT` beside it), and a health probe cannot tell who answered. Ok(None): every listener is ours.
    /// Ok(Some(why)): the listeners cannot be told (no socket visible in /proc/net, or its holder in another PID
    /// namespace), which proves nothing either way. Err: a listener that is not this spawn's, named.
    pub fn owns_listener(&self, port: u16) -> Result<Option<PortOwnerError>, PortTaken> {
        let pids = match super::port_owner::listening_pids(port) {
            Ok(pids) => pids,
            Err(why) => return Ok(Some(why)),
        };
        let ours = self.members();
        let foreign: Vec<(u32, String)> = pids
            .iter()
            .filter(|p| !ours.contains(&(**p as i32)))
            .map(|p| (*p, group::command_line(*p as i32)))
            .collect();
        if foreign.is_empty() {
            return Ok(None);
        }
        let beside = pids.iter().any(|p| ours.contains(&(*p as i32)));
        Err(PortTaken { port, foreign, beside, spawned: self.pgid })
    }

    /// What the server's process group has spent until now (see [`gauntlet_schema::LoadCpu`]); None when /proc
    /// says nothing of it. Throttled time counts from the spawn when the server is still in the CPU group it
    /// started in, else from its group's creation (a server that moved itself into a group of its own).
    pub fn cpu_account(&self) -> Option<gauntlet_schema::LoadCpu> {
        let members = group_members(self.pid() as i32);
        let mut account =
            gauntlet_schema::LoadCpu { cpu_seconds: 0.0, wait_seconds: 0.0, throttled_seconds: None, neighbours: None };
        let mut seen = false;
        for &pid in &members {
            if let Some(cpu) = cpu_seconds(pid) {
                account.cpu_seconds += cpu;
                seen = true;
            }
        }
        account.wait_seconds = super::sched::Sample::take(&members, None).total_wait_ns() as f64 / 1e9;
        account.throttled_seconds = super::sched::cpu_group_of(self.pgid).and_then(|g| {
            let now = super::sched::throttled_ns(&g)?;
            let from = self.spawn_throttle.as_ref().filter(|(g0, _)| *g0 == g).map_or(0, |(_, t)| *t);
            Some(now.saturating_sub(from) as f64 / 1e9)
        });
        account.neighbours =
            self.spawn_machine.as_ref().and_then(|m| m.neighbours_until_now((account.cpu_seconds * 1e9) as u64));
        seen.then_some(account)
    }

    /// The schedstat of every thread of this spawn's processes now, and their CPU group's throttled time (the
    /// leader's group): read before and after each case ([`super::sched::Sample::since`]).
    pub fn sched_sample(&self) -> super::sched::Sample {
        let group = super::sched::cpu_group_of(self.pgid);
        super::sched::Sample::take(&self.members(), group.as_deref())
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

/// Writes the calling process's pid into the `cgroup.procs` file `path`. Runs between fork and exec: only
/// async-signal-safe calls, no allocation. Errors are left for the parent to see.
fn join_cgroup(path: &std::ffi::CStr) {
    // SAFETY: getpid, open, write and close are async-signal-safe; `path` is a valid C string and `digits` a
    // stack buffer that outlives the write.
    unsafe {
        let mut pid = libc::getpid() as u32;
        let mut digits = [0u8; 12];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (pid % 10) as u8;
            pid /= 10;
            if pid == 0 || at == 0 {
                break;
            }
        }
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd >= 0 {
            libc::write(fd, digits[at..].as_ptr().cast(), digits.len() - at);
            libc::close(fd);
        }
    }
}

/// Whether `pid` is still running (not gone, not a zombie): a leader that already exited is in no cgroup.
fn child_alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rfind(')').map(|i| s[i + 1..].trim_start().starts_with('Z')))
        .is_some_and(|zombie| !zombie)
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

pub fn log_tail(path: &Path, n: usize) -> Vec<String> {
    let Ok(buf) = crate::util::bounded::read_tail(path, 64 * 1024) else {
        return Vec::new();
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A foreign listener is `PortTaken` with the pids, whether the spawn listens beside it, and the words the
    /// readiness finding has always had.
    #[test]
    fn a_taken_port_names_its_holders_as_before() {
        let e = PortTaken { port: 8000, foreign: vec![(12, "nc -l 8000".into())], beside: false, spawned: 40 };
        assert_eq!(
            e.to_string(),
            "port 8000 is held by a process that gauntlet did not start (pid 12 `nc -l 8000`); the server it spawned \
             (pid 40) does not listen there, so what answered was not the server under test"
        );
        let e = PortTaken { port: 9, foreign: vec![(1, "a".into()), (2, "b c".into())], beside: true, spawned: 3 };
        assert_eq!(
            e.to_string(),
            "port 9 is held by a process that gauntlet did not start (pid 1 `a`, pid 2 `b c`) beside the spawned \
             server; the server it spawned (pid 3) shares the port with it, so an answer there may come from either"
        );
    }
}
