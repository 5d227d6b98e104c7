//! Process-group primitives shared by the supervisor (`process`) and the Ctrl-C forwarding (`signals`): signal a
//! group, list its live members, find the processes that left it, and adopt orphans. Never spawns anything; the
//! only waits are non-blocking reaps of children that are already dead.

use std::io::Read as _;
use std::sync::Once;

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

/// Pid, state and process group of every process in /proc (the state and group from `/proc/PID/stat`).
fn processes() -> Vec<(i32, char, i32)> {
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
        let (Some(state), Some(Ok(pgrp))) = (fields.first(), fields.get(2).map(|g| g.parse::<i32>())) else {
            continue;
        };
        out.push((pid, state.chars().next().unwrap_or('?'), pgrp));
    }
    out
}

/// Live (non-zombie) processes whose process group is `pgid`, from /proc.
pub fn group_members(pgid: i32) -> Vec<i32> {
    processes().into_iter().filter(|(_, state, pgrp)| *state != 'Z' && *pgrp == pgid).map(|(pid, ..)| pid).collect()
}

/// Live processes outside the group `pgid` whose environment carries `MARKER_VAR=marker`: descendants of the
/// group that left it. gauntlet itself is never one (it does not carry the marker).
pub(crate) fn escaped_members(marker: &str, pgid: i32) -> Vec<i32> {
    let needle = format!("{MARKER_VAR}={marker}");
    let own = std::process::id() as i32;
    processes()
        .into_iter()
        .filter(|(pid, state, pgrp)| *state != 'Z' && *pgrp != pgid && *pid != own)
        .filter(|(pid, ..)| carries(*pid, needle.as_bytes()))
        .map(|(pid, ..)| pid)
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
