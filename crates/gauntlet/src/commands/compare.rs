//! `gauntlet compare A B [--control A2]`: losslessness, per case identical or the first divergence; and
//! `gauntlet compare-bench BENCH --vllm FILE`: a bench's numbers beside vLLM's benchmark client's.

use std::io::Write;
use std::path::Path;

use serde_json::Value;

use super::exit_of_word;
use crate::Outcome;
use crate::exit::{Exit, Failure};

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

/// `gauntlet compare-bench BENCH --vllm FILE`: the vLLM run's numbers beside the bench level's, side by side.
pub(crate) fn compare_bench(bench: &Path, vllm: &Path, concurrency: Option<usize>, json: bool) -> Outcome {
    use gauntlet_engine::formats::vllm;
    let record = gauntlet_engine::run::read_bench(bench).map_err(Failure::bad_input)?;
    let theirs = vllm::read(vllm).map_err(Failure::bad_input)?;
    let level = vllm::pick_level(&theirs, &record, concurrency)
        .map_err(|e| Failure::bad_input(format!("{}: {e}", bench.display())))?;
    let rows = vllm::rows(&theirs, level);
    let mut out = crate::terminal::stdout();
    if json {
        let doc = serde_json::json!({
            "bench": bench.display().to_string(),
            "vllm": vllm.display().to_string(),
            "concurrency": level.concurrency,
            "vllm_max_concurrency": theirs.max_concurrency,
            "vllm_completed": theirs.completed,
            "rows": rows,
        });
        let _ = writeln!(out, "{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return Ok(Exit::Pass);
    }
    let what = [theirs.backend.as_deref(), theirs.model_id.as_deref(), theirs.date.as_deref()];
    let what: Vec<&str> = what.into_iter().flatten().collect();
    let _ = writeln!(
        out,
        "vLLM: {} ({} requests, max concurrency {}) · gauntlet: profile {} at concurrency {}",
        if what.is_empty() { "save-result".to_owned() } else { what.join(", ") },
        theirs.completed,
        theirs.max_concurrency.map_or("unlimited".into(), |c| c.to_string()),
        record.profile,
        level.concurrency
    );
    let _ = writeln!(out, "{:<44} {:>7} {:>12} {:>12} {:>9}", "metric", "unit", "vLLM", "gauntlet", "ratio");
    for r in &rows {
        let ours = r.gauntlet.map_or("—".into(), |g| format!("{g:.2}"));
        let ratio = r.gauntlet.filter(|_| r.vllm > 0.0).map_or("—".into(), |g| format!("{:.2}×", g / r.vllm));
        let _ = writeln!(out, "{:<44} {:>7} {:>12.2} {:>12} {:>9}", r.metric, r.unit, r.vllm, ours, ratio);
    }
    Ok(Exit::Pass)
}
