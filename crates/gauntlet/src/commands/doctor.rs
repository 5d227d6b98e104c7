//! `gauntlet doctor`: what will and will not work for a profile on this machine, one line each with its fix.

use crate::terminal::outln;
use std::path::Path;

use gauntlet_engine::doctor::{self, Hints, Status};
use gauntlet_engine::store::default_store_dir;

use super::load_manifest;
use crate::Outcome;
use crate::exit::{Exit, Failure};
use crate::terminal;

pub(crate) fn doctor(path: Option<&Path>, profile: Option<&str>, store: Option<&Path>, json: bool) -> Outcome {
    let manifest = load_manifest(path)?;
    let profile = manifest.select_unchecked(profile).map_err(|e| Failure::bad_input(e.to_string()))?;
    let store_dir = default_store_dir(store, manifest.store.as_deref());
    let hints = Hints { setup: path.is_none().then_some("scripts/setup.sh --native") };
    let exam = doctor::examine(profile, &gauntlet_engine::home_dir(), &store_dir, &hints);
    let worst = exam.worst();
    if json {
        let text = serde_json::to_string_pretty(&exam).map_err(|e| Failure::internal(e.to_string()))?;
        outln!("{text}");
    } else {
        let mut out = crate::terminal::stdout();
        let _ = terminal::doctor(&mut out, &exam, &manifest.origin);
    }
    Ok(if worst == Status::Fail { Exit::Fail } else { Exit::Pass })
}
