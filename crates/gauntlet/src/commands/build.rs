//! `gauntlet build`: a profile's build step alone (`[servers.NAME.build]`), e.g. in CI before the tests. Exit 1
//! when the build fails, 3 when it ran past its cap, 0 when it built or was up to date.

use crate::terminal::{errln, outln};
use std::path::{Path, PathBuf};

use super::{default_out_dir, gate_failure, load_manifest, select_profile};
use crate::Outcome;
use crate::exit::Exit;

pub(crate) fn build(path: Option<&Path>, profile: Option<&str>, out: Option<PathBuf>) -> Outcome {
    let manifest = load_manifest(path)?;
    let profile = select_profile(&manifest, profile, None)?;
    let out_dir = out.unwrap_or_else(|| default_out_dir(&format!("{}-build", profile.name)));
    match gauntlet_engine::session::build_only(&profile, &out_dir).map_err(gate_failure)? {
        None => {
            outln!("profile `{}`: its server has no build step", profile.name);
            Ok(Exit::Pass)
        }
        Some(o) => {
            let r = &o.record;
            let what = if r.ran { "built" } else { "up to date (source and commands unchanged), skipped" };
            outln!("server `{}`: {what} in {:.2}s; log: {}", r.server, r.seconds, out_dir.join(&r.log).display());
            match &o.failed {
                None => Ok(Exit::Pass),
                Some((argv, tail)) => {
                    errln!(
                        "gauntlet: build failed: `{}` ended with {}",
                        argv.join(" "),
                        r.exit.as_deref().unwrap_or("?")
                    );
                    for line in tail {
                        errln!("  {line}");
                    }
                    Ok(Exit::Fail)
                }
            }
        }
    }
}
