//! `gauntlet schema` and `gauntlet default-manifest`: print what is compiled in.

use std::io::Write as _;

use crate::terminal::outln;
use gauntlet_engine::manifest::Manifest;

use crate::Outcome;
use crate::exit::Exit;

/// The JSON Schema of the manifest format, generated from the manifest's structs (the same text as the committed
/// `schema/manifest.schema.json`, which a test keeps equal).
pub(crate) fn schema() -> Outcome {
    outln!("{}", gauntlet_engine::manifest::schema_text().trim_end());
    Ok(Exit::Pass)
}

/// The embedded default manifest, a starting point for one's own.
pub(crate) fn default_manifest() -> Outcome {
    let _ = crate::terminal::stdout().write_all(Manifest::embedded_default_text().as_bytes());
    Ok(Exit::Pass)
}
