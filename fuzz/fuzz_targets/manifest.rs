//! The manifest loader (`manifest::Manifest::parse`): TOML text to validated profiles, then each profile selected
//! the way `check` does. Its folder does not exist, so every relative path it names is absent.
#![no_main]

use std::path::Path;

use gauntlet_engine::manifest::{Manifest, read_corpus};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    // The qualify corpus format is line-based text too.
    let _ = read_corpus(text);
    let Ok(m) = Manifest::parse(text, "fuzz.toml", Path::new("/nonexistent/gauntlet-fuzz")) else { return };
    for name in m.profiles.keys() {
        let _ = m.select_unchecked(Some(name));
        let _ = m.select(Some(name));
    }
    let _ = m.select(None);
});
