//! `gauntlet verify`: check an evidence bundle offline and list every problem (fail closed).

use std::io::Write;
use std::path::Path;

use crate::Outcome;
use crate::exit::{Exit, Failure};

pub(crate) fn verify(bundle: &Path, json: bool) -> Outcome {
    if !bundle.is_dir() {
        return Err(Failure::bad_input(format!(
            "`{}` is not a folder (want a qualification bundle)",
            bundle.display()
        )));
    }
    let problems = gauntlet_engine::qualify::verify_bundle(bundle);
    let mut out = crate::terminal::stdout();
    if json {
        let _ = writeln!(
            out,
            "{}",
            serde_json::json!({"bundle": bundle, "valid": problems.is_empty(), "problems": problems})
        );
    } else if problems.is_empty() {
        let _ = writeln!(out, "valid: {} (every file, identity and recomputed verdict checks out)", bundle.display());
    } else {
        for p in &problems {
            let _ = writeln!(out, "problem: {p}");
        }
        let _ = writeln!(out, "INVALID: {} problem(s) in {}", problems.len(), bundle.display());
    }
    Ok(if problems.is_empty() { Exit::Pass } else { Exit::Fail })
}
