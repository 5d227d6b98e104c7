//! Ctrl-C (and SIGTERM, SIGHUP) on gauntlet stops every server group it started before gauntlet exits.
//! Servers live in their own process groups, so the terminal's SIGINT never reaches them directly: we forward it.
//!
//! SIGKILL leaves gauntlet no moment to do that. For it, a watchdog: a small `sh` in a session of its own, started
//! with the first group, whose standard input is a pipe that only gauntlet holds. Every live group is announced on
//! it (`add PGID MARKER CGROUP`) and withdrawn once stopped (`del PGID`). When gauntlet dies however it dies, the
//! kernel closes the pipe; the watchdog reads end-of-file and kills each group still announced, every process that
//! carries its marker (what left the group), and everything in its cgroup, which it then removes. The server's
//! leader also has a parent-death signal; the watchdog is what reaches the rest. What it cannot reach: a process
//! that left the group, cleared its environment and is in no cgroup (none could be made): gauntlet's death hands it
//! to init, and nothing of gauntlet is left to find it.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};

use super::cgroup::Cgroup;
use super::group::{escaped_members, group_members, signal_group, signal_pid};

/// Every live group: its id, the marker its processes carry (see `super::group::MARKER_VAR`) and its cgroup.
type Live = Vec<(i32, String, Option<Cgroup>)>;

static LIVE: Mutex<Live> = Mutex::new(Vec::new());
static INSTALL: Once = Once::new();
/// Whether the first signal lets the command finish its record ([`finish_on_interrupt`]).
static FINISH: AtomicBool = AtomicBool::new(false);
/// The signal that asked the command to finish; 0: none.
static INTERRUPTED: AtomicI32 = AtomicI32::new(0);
/// How long a command that finishes on an interrupt has to stop its servers and write its record before the
/// interrupt stops everything anyway. A second signal does so at once.
const FINISH_GRACE: Duration = Duration::from_secs(30);

/// From now on the first SIGINT, SIGTERM or SIGHUP asks the command to stop measuring and write what it has
/// ([`interrupted`] says so), within [`FINISH_GRACE`]; a second signal, or the grace running out, stops every
/// server group and exits as before. For a long bench: an hour of batches is not lost to a Ctrl-C.
pub fn finish_on_interrupt() {
    FINISH.store(true, Ordering::SeqCst);
    install();
}

/// The signal that asked the command to finish, if one did.
pub fn interrupted() -> Option<i32> {
    match INTERRUPTED.load(Ordering::SeqCst) {
        0 => None,
        sig => Some(sig),
    }
}

/// Wakes what [`unless_interrupted`] waits on when the signal thread asks the command to finish.
static ASKED: tokio::sync::Notify = tokio::sync::Notify::const_new();

/// `work`, unless an interrupt asks the command to finish first: then `None`, and `work` is dropped where it stood.
pub async fn unless_interrupted<T>(work: impl std::future::Future<Output = T>) -> Option<T> {
    let asked = async {
        // Registered before the flag is read: a signal between the two still wakes it.
        let notified = ASKED.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        if interrupted().is_none() {
            notified.await;
        }
    };
    tokio::select! {
        done = work => Some(done),
        () = asked => None,
    }
}

pub(crate) fn lock() -> MutexGuard<'static, Live> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn register(mut guard: MutexGuard<'static, Live>, pgid: i32, marker: String, cgroup: Option<Cgroup>) {
    // The cgroup's path holds only characters the watchdog reads as one word (see `super::cgroup`).
    let dir = cgroup.as_ref().map_or("-".into(), |c| c.dir().display().to_string());
    tell_watchdog(&format!("add {pgid} {marker} {dir}"));
    guard.push((pgid, marker, cgroup));
}

pub(crate) fn unregister(pgid: i32) {
    let mut live = lock();
    live.retain(|(p, ..)| *p != pgid);
    tell_watchdog(&format!("del {pgid}"));
}

/// The leaders of the groups that are live now.
pub(crate) fn live_groups() -> Vec<i32> {
    lock().iter().map(|(p, ..)| *p).collect()
}

/// The watchdog's program. Its input: `add PGID MARKER CGROUP` and `del PGID` lines (written by us: the group and
/// marker are digits and dashes, the cgroup a path of plain characters without `:`, or `-`). At end of input,
/// gauntlet is gone: kill what is still announced, empty each cgroup (bounded: 50 rounds) and remove it.
const WATCHDOG: &str = r#"live=""
while read -r op g m c; do
  case $op in
    add) live="$live $g:$m:$c" ;;
    del) next=""; for e in $live; do [ "${e%%:*}" = "$g" ] || next="$next $e"; done; live=$next ;;
  esac
done
for e in $live; do
  g=${e%%:*}; r=${e#*:}; m=${r%%:*}; c=${r#*:}
  kill -9 "-$g" 2>/dev/null
  for f in /proc/[0-9]*/environ; do
    if tr '\0' '\n' <"$f" 2>/dev/null | grep -qx "GAUNTLET_SUPERVISED=$m"; then
      p=${f#/proc/}; kill -9 "${p%/environ}" 2>/dev/null
    fi
  done
  if [ -n "$c" ] && [ "$c" != - ] && [ -d "$c" ]; then
    [ -e "$c/cgroup.kill" ] && echo 1 >"$c/cgroup.kill" 2>/dev/null
    [ -e "$c/pids.max" ] && echo 0 >"$c/pids.max" 2>/dev/null
    n=0
    while [ $n -lt 50 ]; do
      while read -r p; do kill -9 "$p" 2>/dev/null; done 2>/dev/null <"$c/cgroup.procs"
      rmdir "$c" 2>/dev/null && break
      n=$((n + 1)); sleep 0.1
    done
  fi
done
"#;

static WATCHDOG_PIPE: Mutex<Option<std::process::ChildStdin>> = Mutex::new(None);
static WATCHDOG_START: Once = Once::new();

/// Writes one line to the watchdog, starting it first. A watchdog that cannot start or has died is said once on
/// stderr; the run goes on (the parent-death signal and the Ctrl-C path still stand).
fn tell_watchdog(line: &str) {
    WATCHDOG_START.call_once(|| {
        use std::os::unix::process::CommandExt as _;
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args(["-c", WATCHDOG, "gauntlet-watchdog"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .env_clear()
            .env("PATH", "/usr/bin:/bin");
        // SAFETY: setsid is async-signal-safe and has no memory-safety preconditions: the watchdog leaves our
        // session, so the terminal's signals and a kill of gauntlet's group do not reach it.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        match cmd.spawn() {
            // Its stdin's write end is ours alone (close-on-exec: no server inherits it). The child itself is
            // never waited for: it exits when gauntlet does, and is then re-parented and reaped by init.
            Ok(mut child) => {
                // A child of gauntlet, but no leftover of a spawn: the subreaper's sweep leaves it alone.
                super::group::expect_forever(child.id() as i32);
                let stdin = child.stdin.take();
                // Non-blocking: a watchdog that stops reading (stopped, stuck) makes a write fail at once instead
                // of holding the group registry, and the lock around it, without a deadline. Each line is far
                // below PIPE_BUF, so it is written whole or not at all.
                if let Some(fd) = stdin.as_ref().map(std::os::fd::AsRawFd::as_raw_fd) {
                    // SAFETY: fcntl on a descriptor we own, with integer arguments only.
                    unsafe {
                        let flags = libc::fcntl(fd, libc::F_GETFL);
                        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
                    }
                }
                *WATCHDOG_PIPE.lock().unwrap_or_else(|p| p.into_inner()) = stdin;
            }
            Err(e) => {
                let _ = writeln!(
                    std::io::stderr(),
                    "gauntlet: warning: no watchdog ({e}); a SIGKILL of gauntlet may leave server processes behind"
                );
            }
        }
    });
    let mut pipe = WATCHDOG_PIPE.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(stdin) = pipe.as_mut()
        && writeln!(stdin, "{line}").and_then(|()| stdin.flush()).is_err()
    {
        let _ = writeln!(
            std::io::stderr(),
            "gauntlet: warning: the watchdog is gone; a SIGKILL of gauntlet may leave server processes behind"
        );
        *pipe = None;
    }
}

/// Installs the forwarding thread once per process. Call before starting any server.
pub fn install() {
    INSTALL.call_once(|| {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let Ok(mut signals) = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
            eprintln!("gauntlet: warning: cannot install signal handlers; Ctrl-C may leave a server running");
            return;
        };
        std::thread::Builder::new()
            .name("gauntlet-signals".into())
            .spawn(move || {
                let first = signals.forever().next();
                if let Some(sig) = first {
                    if FINISH.load(Ordering::SeqCst) {
                        INTERRUPTED.store(sig, Ordering::SeqCst);
                        ASKED.notify_waiters();
                        let _ = writeln!(
                            std::io::stderr(),
                            "gauntlet: interrupted (signal {sig}); stopping and writing what was measured (a second \
                             signal stops at once)"
                        );
                        // The command exits by itself once its record is written; this thread only waits for a
                        // second signal or the end of the grace.
                        let deadline = Instant::now() + FINISH_GRACE;
                        while Instant::now() < deadline && signals.pending().next().is_none() {
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                    // Hold the lock to the end: no new group can start while we are shutting down.
                    let groups = lock();
                    // Not eprintln!: a closed stderr (a cancelled CI job's log pipe) would panic this thread and
                    // leave every server running.
                    let _ = writeln!(
                        std::io::stderr(),
                        "gauntlet: interrupted (signal {sig}); stopping {} server group(s)",
                        groups.len()
                    );
                    for (pgid, ..) in groups.iter() {
                        signal_group(*pgid, libc::SIGTERM);
                    }
                    let deadline = Instant::now() + Duration::from_secs(5);
                    while groups.iter().any(|(g, ..)| !group_members(*g).is_empty()) && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    for (pgid, marker, cgroup) in groups.iter() {
                        signal_group(*pgid, libc::SIGKILL);
                        // What left the group (setsid, a double fork) is not reached by killpg.
                        for pid in escaped_members(marker, *pgid) {
                            signal_pid(pid, libc::SIGKILL);
                        }
                        if let Some(c) = cgroup {
                            c.kill_all();
                        }
                    }
                    // Everything else of the spawns that was re-parented to gauntlet (it cleared its marker, had
                    // no cgroup): gauntlet is about to exit, so none of its children is still wanted.
                    let leaders: Vec<i32> = groups.iter().map(|(g, ..)| *g).collect();
                    for pid in super::group::adopted(&leaders) {
                        signal_pid(pid, libc::SIGKILL);
                    }
                    // The cgroups go once their members are gone (bounded).
                    let deadline = Instant::now() + Duration::from_secs(1);
                    while groups.iter().filter_map(|(.., c)| c.as_ref()).any(|c| !c.remove())
                        && Instant::now() < deadline
                    {
                        super::group::reap_children();
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    crate::util::quiesce_writes();
                    std::process::exit(128 + sig);
                }
            })
            .ok();
    });
}
