//! The bundle reader and `verify` (`qualify::verify_bundle`): a qualification bundle's files written into an
//! empty folder and verified offline, the way `gauntlet verify` checks a bundle someone else produced. The monitor
//! samples are also read on their own.
//!
//! Input: the multi-file format of `gauntlet_fuzz::sections`, plain file names (a bundle has no folders).
#![no_main]

use gauntlet_engine::qualify::{MONITOR_FILE, drift, verify_bundle};
use gauntlet_fuzz::{Scratch, sections};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let files = sections(data, 1);
    for (name, body) in &files {
        if name == MONITOR_FILE
            && let Ok(text) = std::str::from_utf8(body)
        {
            let _ = drift::read_samples(text);
        }
    }
    let scratch = Scratch::new("bundle");
    let dir = scratch.fresh();
    Scratch::write(dir, &files);
    let _ = verify_bundle(dir);
});
