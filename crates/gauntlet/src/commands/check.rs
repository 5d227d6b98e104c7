//! `gauntlet check`: validate a manifest (the embedded default when none is given) and list its profiles.

use crate::terminal::outln;
use std::path::Path;

use gauntlet_engine::manifest::Target;

use super::load_manifest;
use crate::Outcome;
use crate::exit::Exit;

pub(crate) fn check(path: Option<&Path>) -> Outcome {
    let manifest = load_manifest(path)?;
    let mut problems = 0;
    for (name, _) in manifest.profiles.iter() {
        match manifest.select(Some(name)) {
            Ok(p) => {
                let target = match &p.target {
                    Target::Spawn(s) => format!("spawns {}", s.command().join(" ")),
                    Target::Attach(a) => format!("attaches to {}", a.base_url),
                };
                outln!("{name}: ok, suite `{}` ({} cases), {target}", p.suite.id, p.suite.cases.len());
            }
            Err(e) => {
                problems += 1;
                outln!("{name}: {e}");
            }
        }
    }
    Ok(if problems == 0 { Exit::Pass } else { Exit::BadInput })
}
