//! Writing a finished run: `run.json`, `report.md`, `junit.xml`, and the GitHub step summary when asked. What is
//! written is the [`redacted`] record: a secret the server echoed never reaches a file, a report or a store.

use std::borrow::Cow;
use std::path::Path;

use gauntlet_schema::{RunRecord, Verdict};

use crate::report;
use crate::util::{redact, write_atomic};

/// The record as it may leave the process: every registered secret redacted from every string, including one
/// that a streamed answer split across its events (which no single string contains).
pub fn redacted(run: &RunRecord) -> Cow<'_, RunRecord> {
    if !redact::active() {
        return Cow::Borrowed(run);
    }
    let mut r = run.clone();
    for a in r.cases.iter_mut().filter_map(|c| c.answer.as_mut()) {
        redact::fragments(a.timeline.iter_mut().map(|e| &mut e.content));
        redact::fragments(a.timeline.iter_mut().map(|e| &mut e.reasoning));
    }
    let Ok(mut v) = serde_json::to_value(&r) else { return Cow::Owned(r) };
    redact::value(&mut v);
    // Every other string: the file writer redacts the bytes again, so a record that does not round-trip is
    // still covered there.
    Cow::Owned(serde_json::from_value(v).unwrap_or(r))
}

pub fn write_outputs(run: &RunRecord, baseline: Option<&RunRecord>, out_dir: &Path) -> std::io::Result<()> {
    let run = redacted(run);
    let json = serde_json::to_vec_pretty(&*run).map_err(std::io::Error::other)?;
    write_atomic(&out_dir.join("run.json"), &json)?;
    write_atomic(&out_dir.join("report.md"), report::markdown(&run, baseline).as_bytes())?;
    write_atomic(&out_dir.join("junit.xml"), report::junit(&run).as_bytes())?;
    Ok(())
}

/// Writes the run as a baseline file, atomically, unless it failed: a failing run never becomes the reference.
pub fn write_baseline(run: &RunRecord, path: &Path) -> Result<(), String> {
    if run.verdict == Verdict::Fail {
        return Err(format!("not writing baseline `{}`: the run failed", path.display()));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("cannot create `{}`: {e}", dir.display()))?;
    }
    let json = serde_json::to_vec_pretty(&*redacted(run)).map_err(|e| e.to_string())?;
    write_atomic(path, &json).map_err(|e| format!("cannot write baseline `{}`: {e}", path.display()))
}
