//! Writing a finished run: `run.json`, `report.md`, `junit.xml`, and the GitHub step summary when asked.

use std::path::Path;

use gauntlet_schema::{RunRecord, Verdict};

use crate::report;
use crate::util::write_atomic;

pub fn write_outputs(run: &RunRecord, baseline: Option<&RunRecord>, out_dir: &Path) -> std::io::Result<()> {
    let json = serde_json::to_vec_pretty(run).map_err(std::io::Error::other)?;
    write_atomic(&out_dir.join("run.json"), &json)?;
    write_atomic(&out_dir.join("report.md"), report::markdown(run, baseline).as_bytes())?;
    write_atomic(&out_dir.join("junit.xml"), report::junit(run).as_bytes())?;
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
    let json = serde_json::to_vec_pretty(run).map_err(|e| e.to_string())?;
    write_atomic(path, &json).map_err(|e| format!("cannot write baseline `{}`: {e}", path.display()))
}
