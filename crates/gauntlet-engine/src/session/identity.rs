//! Gathering a run's identity: the facts only this layer may probe (the CPU, the device through the sentry's probe,
//! the server binary's build member), handed to `crate::identity::compose`, which owns what the identity is. Never
//! starts a process.

use std::path::Path;

use serde_json::json;

use crate::identity::{Facts, Identity, IdentityError};
use crate::manifest::{Profile, Target};

/// Computed before the server starts (and before any build step of this run: the build member then says what the
/// binary on disk is). See [`crate::identity::compose`].
pub fn compute_identity(profile: &Profile, home: &Path) -> Result<Identity, IdentityError> {
    let cpu = crate::sentry::gpu::cpu_identity(&std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default());
    let gpu = match crate::sentry::gpu::probe().identity(&profile.device) {
        Ok(v) => v,
        Err(e) => json!({"error": e.to_string()}),
    };
    // An unreadable binary has no digest; the server's spawn (or its build) then says why.
    let build = match &profile.target {
        Target::Spawn(s) => Some(crate::build::identity_member(&s.binary, s.build.as_ref(), None, home)),
        Target::Attach(_) => None,
    };
    crate::identity::compose(profile, home, Facts { cpu, gpu, build })
}
