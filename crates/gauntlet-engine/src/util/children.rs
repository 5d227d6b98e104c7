//! The children gauntlet starts itself and waits for (helper commands such as git, the watchdog). The server's
//! supervision sweeps every other child of gauntlet (a process a spawn left behind, re-parented to gauntlet as
//! child subreaper), so a helper is registered here, below every module that runs one, before the sweep can see it.

use std::process::{Child, Command};
use std::sync::{Mutex, MutexGuard};

/// The children gauntlet starts itself and waits for (helper commands such as git while they run, the watchdog):
/// every other child of gauntlet is a process some spawn left behind, re-parented to gauntlet as child subreaper
/// (`server::group::adopted`).
static EXPECTED: Mutex<Vec<i32>> = Mutex::new(Vec::new());

pub(crate) fn expected_lock() -> MutexGuard<'static, Vec<i32>> {
    EXPECTED.lock().unwrap_or_else(|p| p.into_inner())
}

/// A child gauntlet expects while this lives (see [`spawn_expected`]).
#[derive(Debug)]
pub struct ExpectedChild(i32);

impl Drop for ExpectedChild {
    fn drop(&mut self) {
        expected_lock().retain(|p| *p != self.0);
    }
}

/// Spawns `cmd` as a child gauntlet expects (and will wait for itself): until the guard is dropped, the sweep of
/// `server::group::adopted` never counts it. Registered under the same lock the sweep takes, so no sweep sees it unregistered.
pub fn spawn_expected(cmd: &mut Command) -> std::io::Result<(Child, ExpectedChild)> {
    let mut expected = expected_lock();
    let child = cmd.spawn()?;
    let pid = child.id() as i32;
    expected.push(pid);
    Ok((child, ExpectedChild(pid)))
}

/// Marks `pid` as expected for the rest of the process (the watchdog).
pub(crate) fn expect_forever(pid: i32) {
    expected_lock().push(pid);
}
