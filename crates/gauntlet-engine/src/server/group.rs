//! Process-group primitives shared by the supervisor (`process`) and the Ctrl-C forwarding (`signals`): signal a
//! group, list its live members, find the processes that left it, and adopt orphans. Never spawns anything; the
//! only waits are non-blocking reaps of children that are already dead.

use std::io::Read as _;
use std::sync::Once;

pub(crate) use crate::util::children::expect_forever;
use crate::util::children::expected_lock;
pub use crate::util::children::{ExpectedChild, spawn_expected};

/// The environment variable that marks every process of one supervised group, descendants included: a process
/// that leaves the group (setsid, setpgid, a double fork) keeps its environment, so it can still be found. Its
/// value is unique per spawn ([`new_marker`]).
pub(crate) const MARKER_VAR: &str = "GAUNTLET_SUPERVISED";

/// A marker no other spawn of any gauntlet shares: our pid, a per-process counter and the clock.
pub(crate) fn new_marker() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{}-{}-{nanos}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Makes gauntlet the child subreaper of everything it starts (Linux): a descendant whose parent exits is
/// re-parented to gauntlet instead of init, so a double-forked process stays ours to kill and reap. Once per
/// process; a failure only weakens the reaping (the marker scan still finds escaped processes).
pub(crate) fn become_subreaper() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: prctl(PR_SET_CHILD_SUBREAPER) takes plain integers and has no memory-safety preconditions.
        unsafe {
            libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1 as libc::c_ulong, 0, 0, 0);
        }
    });
}

/// Sends `sig` to every process of the group `pgid`.
pub(crate) fn signal_group(pgid: i32, sig: i32) {
    // SAFETY: killpg has no memory-safety preconditions; a vanished group only yields ESRCH.
    unsafe {
        libc::killpg(pgid, sig);
    }
}

/// Sends `sig` to one process.
pub(crate) fn signal_pid(pid: i32, sig: i32) {
    // SAFETY: kill has no memory-safety preconditions; a vanished process only yields ESRCH.
    unsafe {
        libc::kill(pid, sig);
    }
}

/// Reaps `pids` that are gauntlet's children and already dead (orphans adopted as subreaper); never blocks.
pub(crate) fn reap(pids: &[i32]) {
    for &pid in pids {
        let mut status = 0;
        // SAFETY: waitpid with WNOHANG writes only to `status`; a pid that is not our child yields ECHILD.
        unsafe {
            libc::waitpid(pid, &mut status, libc::WNOHANG);
        }
    }
}

/// One process as /proc shows it: pid, state, parent and process group (from `/proc/PID/stat`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Proc {
    pub pid: i32,
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
}

/// Every process in /proc.
fn processes() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name, which is in parentheses and may itself contain spaces or parentheses.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let (Some(state), Some(Ok(ppid)), Some(Ok(pgrp))) =
            (fields.first(), fields.get(1).map(|g| g.parse::<i32>()), fields.get(2).map(|g| g.parse::<i32>()))
        else {
            continue;
        };
        out.push(Proc { pid, state: state.chars().next().unwrap_or('?'), ppid, pgrp });
    }
    out
}

/// Live (non-zombie) processes whose process group is `pgid`, from /proc.
pub fn group_members(pgid: i32) -> Vec<i32> {
    processes().into_iter().filter(|p| p.state != 'Z' && p.pgrp == pgid).map(|p| p.pid).collect()
}

/// `roots` and every live process descended from them (by parent pid), sorted: an attached server's listener and
/// the workers it started (vLLM's engine core and worker are its children).
pub fn process_tree(roots: &[i32]) -> Vec<i32> {
    let procs: Vec<Proc> = processes().into_iter().filter(|p| p.state != 'Z').collect();
    let mut tree: Vec<i32> = roots.iter().copied().filter(|r| procs.iter().any(|p| p.pid == *r)).collect();
    let mut at = 0;
    while at < tree.len() {
        let parent = tree[at];
        for p in &procs {
            if p.ppid == parent && !tree.contains(&p.pid) {
                tree.push(p.pid);
            }
        }
        at += 1;
    }
    tree.sort_unstable();
    tree
}

/// Live processes outside the group `pgid` whose environment carries `MARKER_VAR=marker`: descendants of the
/// group that left it. gauntlet itself is never one (it does not carry the marker).
pub(crate) fn escaped_members(marker: &str, pgid: i32) -> Vec<i32> {
    let needle = format!("{MARKER_VAR}={marker}");
    let own = std::process::id() as i32;
    processes()
        .into_iter()
        .filter(|p| p.state != 'Z' && p.pgrp != pgid && p.pid != own)
        .filter(|p| carries(p.pid, needle.as_bytes()))
        .map(|p| p.pid)
        .collect()
}

/// Whether `/proc/PID/environ` holds the entry `needle`. Read with a cap: an environment is at most a few hundred
/// KiB (the kernel's argument limit), and a process we may not read is not ours.
fn carries(pid: i32, needle: &[u8]) -> bool {
    const CAP: u64 = 1 << 20;
    let Ok(f) = std::fs::File::open(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let mut env = Vec::new();
    if f.take(CAP).read_to_end(&mut env).is_err() {
        return false;
    }
    env.split(|b| *b == 0).any(|entry| entry == needle)
}

/// The processes a spawn left behind that gauntlet, as child subreaper, inherited: every live child of gauntlet
/// that is neither expected ([`spawn_expected`], the watchdog) nor the leader of a group in `live`, and every
/// descendant of those. Zombies among such children are reaped. A process that cleared its environment and left
/// its group and session is still found here: only gauntlet's death takes it out of gauntlet's tree.
pub(crate) fn adopted(live: &[i32]) -> Vec<i32> {
    let expected = expected_lock();
    let own = std::process::id() as i32;
    let all = processes();
    let mut out: Vec<i32> = Vec::new();
    for p in all.iter().filter(|p| p.ppid == own && !expected.contains(&p.pid) && !live.contains(&p.pid)) {
        if p.state == 'Z' {
            reap(&[p.pid]);
        } else {
            out.push(p.pid);
        }
    }
    // Their descendants: killing only the top would hand its children to gauntlet one generation at a time.
    let mut i = 0;
    while i < out.len() {
        let parent = out[i];
        for p in all.iter().filter(|p| p.ppid == parent && p.state != 'Z') {
            if !out.contains(&p.pid) {
                out.push(p.pid);
            }
        }
        i += 1;
    }
    out
}

/// `pid`'s command line for a finding: arguments joined by spaces, control characters escaped, at most 200
/// characters, and every registered secret redacted; its name in brackets when it has no command line (a kernel
/// thread, a zombie), `?` when it is gone.
pub(crate) fn command_line(pid: i32) -> String {
    const CAP: u64 = 4096;
    let mut raw = Vec::new();
    if let Ok(f) = std::fs::File::open(format!("/proc/{pid}/cmdline")) {
        let _ = f.take(CAP).read_to_end(&mut raw);
    }
    let text = if raw.iter().any(|b| *b != 0) {
        let trimmed: &[u8] = raw.strip_suffix(&[0]).unwrap_or(&raw);
        String::from_utf8_lossy(trimmed).replace('\0', " ")
    } else {
        match std::fs::read_to_string(format!("/proc/{pid}/comm")) {
            Ok(name) => format!("[{}]", name.trim_end()),
            Err(_) => "?".into(),
        }
    };
    let text = crate::util::redact::text(&text).into_owned();
    let mut out = String::new();
    for c in text.chars().take(200) {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if text.chars().count() > 200 {
        out.push('…');
    }
    out
}

/// Reaps every child of gauntlet that has exited, without blocking. Only on the way out (an interrupt that ends
/// the process): it would take an exit status from a helper still being waited for.
pub(crate) fn reap_children() {
    loop {
        let mut status = 0;
        // SAFETY: waitpid with WNOHANG writes only to `status`.
        if unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) } <= 0 {
            break;
        }
    }
}

#[cfg(test)]
mod tree_tests {
    use super::*;

    /// A shell's tree holds the shell and the child it started; a pid that is gone has no tree. The shell leads a
    /// process group of its own, killed whole, so its child never outlives the test.
    #[test]
    fn a_process_tree_holds_the_root_and_its_descendants() {
        use std::os::unix::process::CommandExt as _;
        let mut sh = std::process::Command::new("sh").args(["-c", "sleep 30 & wait"]).process_group(0).spawn().unwrap();
        let root = sh.id() as i32;
        let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let mut tree = process_tree(&[root]);
        while tree.len() < 2 && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(20));
            tree = process_tree(&[root]);
        }
        let child = tree.iter().copied().find(|p| *p != root);
        // SAFETY: kill(2) on the group this test made; no memory is touched.
        unsafe { libc::kill(-root, libc::SIGKILL) };
        let _ = sh.wait();
        assert!(tree.contains(&root) && child.is_some(), "{tree:?}");
        assert_eq!(process_tree(&[root]), Vec::<i32>::new(), "a reaped root has no tree");
    }
}
