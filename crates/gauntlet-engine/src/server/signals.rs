//! Ctrl-C (and SIGTERM, SIGHUP) on gauntlet stops every server group it started before gauntlet exits.
//! Servers live in their own process groups, so the terminal's SIGINT never reaches them directly: we forward it.

use std::io::Write as _;
use std::sync::{Mutex, MutexGuard, Once};
use std::time::{Duration, Instant};

use super::group::{escaped_members, group_members, signal_group, signal_pid};

/// Every live group: its id and the marker its processes carry (see `super::group::MARKER_VAR`).
type Live = Vec<(i32, String)>;

static LIVE: Mutex<Live> = Mutex::new(Vec::new());
static INSTALL: Once = Once::new();

pub(crate) fn lock() -> MutexGuard<'static, Live> {
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

pub(crate) fn register(mut guard: MutexGuard<'static, Live>, pgid: i32, marker: String) {
    guard.push((pgid, marker));
}

pub(crate) fn unregister(pgid: i32) {
    lock().retain(|(p, _)| *p != pgid);
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
                if let Some(sig) = signals.forever().next() {
                    // Hold the lock to the end: no new group can start while we are shutting down.
                    let groups = lock();
                    // Not eprintln!: a closed stderr (a cancelled CI job's log pipe) would panic this thread and
                    // leave every server running.
                    let _ = writeln!(
                        std::io::stderr(),
                        "gauntlet: interrupted (signal {sig}); stopping {} server group(s)",
                        groups.len()
                    );
                    for (pgid, _) in groups.iter() {
                        signal_group(*pgid, libc::SIGTERM);
                    }
                    let deadline = Instant::now() + Duration::from_secs(5);
                    while groups.iter().any(|(g, _)| !group_members(*g).is_empty()) && Instant::now() < deadline {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    for (pgid, marker) in groups.iter() {
                        signal_group(*pgid, libc::SIGKILL);
                        // What left the group (setsid, a double fork) is not reached by killpg.
                        for pid in escaped_members(marker, *pgid) {
                            signal_pid(pid, libc::SIGKILL);
                        }
                    }
                    std::process::exit(128 + sig);
                }
            })
            .ok();
    });
}
