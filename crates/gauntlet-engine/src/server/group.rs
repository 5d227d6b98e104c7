//! Process-group primitives shared by the supervisor (`process`) and the Ctrl-C forwarding (`signals`): signal a
//! group, list its live members. Never spawns nor waits for anything.

/// Sends `sig` to every process of the group `pgid`.
pub(crate) fn signal_group(pgid: i32, sig: i32) {
    // SAFETY: killpg has no memory-safety preconditions; a vanished group only yields ESRCH.
    unsafe {
        libc::killpg(pgid, sig);
    }
}

/// Live (non-zombie) processes whose process group is `pgid`, from /proc.
pub fn group_members(pgid: i32) -> Vec<i32> {
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
        let (Some(state), Some(pgrp)) = (fields.first(), fields.get(2)) else {
            continue;
        };
        if *state != "Z" && pgrp.parse::<i32>() == Ok(pgid) {
            out.push(pid);
        }
    }
    out
}
