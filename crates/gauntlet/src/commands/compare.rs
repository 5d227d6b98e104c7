//! `gauntlet compare A B [--control A2]`: losslessness, per case identical or the first divergence.

use std::io::Write;
use std::path::Path;

use serde_json::Value;

use super::exit_of_word;
use crate::Outcome;
use crate::exit::Failure;

/// A run record as raw JSON: `run.json`, or a folder holding one.
fn read_run_value(path: &Path) -> Result<Value, Failure> {
    let file = if path.is_dir() { path.join("run.json") } else { path.to_owned() };
    let text = gauntlet_engine::util::bounded::read_named_text(&file, gauntlet_engine::util::bounded::RECORD_CAP)
        .map_err(|e| Failure::bad_input(format!("`{}`: {e}", file.display())))?;
    serde_json::from_str(&text).map_err(|e| Failure::bad_input(format!("`{}`: not JSON: {e}", file.display())))
}

pub(crate) fn compare(a: &Path, b: &Path, control: Option<&Path>, json: bool) -> Outcome {
    let (av, bv) = (read_run_value(a)?, read_run_value(b)?);
    let cv = control.map(read_run_value).transpose()?;
    let result = gauntlet_engine::compare::lossless::lossless(&av, &bv, cv.as_ref()).map_err(Failure::bad_input)?;
    let mut out = crate::terminal::stdout();
    if json {
        let _ = writeln!(out, "{}", serde_json::to_string_pretty(&result).unwrap_or_default());
    } else {
        for c in &result.cases {
            // The token itself is named in the detail; here only where.
            let at = match (c.char_index, c.first_divergent_token) {
                (Some(ch), Some(t)) => format!(" at char {ch}, token {t}"),
                (Some(ch), None) => format!(" at char {ch}"),
                (None, Some(t)) => format!(" at token {t}"),
                _ => String::new(),
            };
            let _ = writeln!(out, "{:<14} {}{at} {}", c.status, c.id, c.detail);
        }
        let control = if result.controlled { "with a control run" } else { "without a control run" };
        let drift = result.cases.iter().filter(|c| c.status == "drift").count();
        let drift = if drift > 0 { format!("; {drift} near-tie flip(s): numerical drift") } else { String::new() };
        let _ = writeln!(out, "lossless: {} ({control}{drift})", result.verdict.to_uppercase());
    }
    Ok(exit_of_word(&result.verdict))
}
