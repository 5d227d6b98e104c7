//! `gauntlet schema` and `gauntlet default-manifest`: print what is compiled in.

use std::io::Write as _;

use crate::terminal::outln;
use gauntlet_engine::manifest::Manifest;

use crate::Outcome;
use crate::exit::Exit;

/// The JSON Schema of the manifest format.
pub(crate) fn schema() -> Outcome {
    outln!("{}", include_str!("../../../../schema/manifest.schema.json").trim_end());
    Ok(Exit::Pass)
}

/// The embedded default manifest, a starting point for one's own.
pub(crate) fn default_manifest() -> Outcome {
    let _ = crate::terminal::stdout().write_all(Manifest::embedded_default_text().as_bytes());
    Ok(Exit::Pass)
}
