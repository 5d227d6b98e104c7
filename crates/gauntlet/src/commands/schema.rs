//! `gauntlet schema` and `gauntlet default-manifest`: print what is compiled in.

use gauntlet_engine::manifest::Manifest;

use crate::Outcome;
use crate::exit::Exit;

/// The JSON Schema of the manifest format.
pub(crate) fn schema() -> Outcome {
    println!("{}", include_str!("../../../../schema/manifest.schema.json").trim_end());
    Ok(Exit::Pass)
}

/// The embedded default manifest, a starting point for one's own.
pub(crate) fn default_manifest() -> Outcome {
    print!("{}", Manifest::embedded_default_text());
    Ok(Exit::Pass)
}
