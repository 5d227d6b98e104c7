//! `gauntlet compare A B [--control A2]`: losslessness, per case identical or the first divergence; and
//! `gauntlet compare-bench BENCH --vllm FILE | --aiperf FILE`: a bench's numbers beside vLLM's or AIPerf's
//! benchmark client's.

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
    let result = gauntlet_engine::compare::lossless::lossless(&av, &bv, cv.as_ref())
        .map_err(|e| Failure::bad_input(e.to_string()))?;
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

/// `gauntlet compare-bench BENCH --vllm FILE | --aiperf FILE`: the other tool's numbers beside the bench level's,
/// side by side.
pub(crate) fn compare_bench(
    bench: &Path,
    vllm: Option<&Path>,
    aiperf: Option<&Path>,
    concurrency: Option<usize>,
    json: bool,
) -> Outcome {
    use gauntlet_engine::formats::{aiperf as ai, vllm as vl};
    let record = gauntlet_engine::run::read_bench(bench).map_err(|e| Failure::bad_input(e.to_string()))?;
    let at_bench = |e: gauntlet_engine::formats::LevelError| Failure::bad_input(format!("{}: {e}", bench.display()));
    // What each tool's file says of its run, for the heading and the JSON.
    let (tool, file, level, rows, about, facts) = match (vllm, aiperf) {
        (Some(path), _) => {
            let theirs = vl::read(path).map_err(|e| Failure::bad_input(e.to_string()))?;
            let level = vl::pick_level(&theirs, &record, concurrency).map_err(at_bench)?;
            let what = [theirs.backend.as_deref(), theirs.model_id.as_deref(), theirs.date.as_deref()];
            let what: Vec<&str> = what.into_iter().flatten().collect();
            let about = format!(
                "vLLM: {} ({} requests, max concurrency {})",
                if what.is_empty() { "save-result".to_owned() } else { what.join(", ") },
                theirs.completed,
                theirs.max_concurrency.map_or("unlimited".into(), |c| c.to_string()),
            );
            let facts = serde_json::json!({
                "vllm_max_concurrency": theirs.max_concurrency, "vllm_completed": theirs.completed,
            });
            ("vllm", path, level, vl::rows(&theirs, level), about, facts)
        }
        (None, Some(path)) => {
            let theirs = ai::read(path).map_err(|e| Failure::bad_input(e.to_string()))?;
            let level = ai::pick_level(&theirs, &record, concurrency).map_err(at_bench)?;
            let warmup = if theirs.other_phase > 0 {
                format!(", {} warm-up left out", theirs.other_phase)
            } else {
                String::new()
            };
            let about = format!(
                "AIPerf: profile export ({} completed, {} failed, peak in flight {}{warmup})",
                theirs.completed, theirs.failed, theirs.peak_in_flight
            );
            let facts = serde_json::json!({
                "aiperf_completed": theirs.completed, "aiperf_failed": theirs.failed,
                "aiperf_peak_in_flight": theirs.peak_in_flight, "aiperf_other_phase": theirs.other_phase,
                "aiperf_duration_s": theirs.duration_s,
            });
            ("aiperf", path, level, ai::rows(&theirs, level), about, facts)
        }
        (None, None) => return Err(Failure::bad_input("compare-bench needs --vllm FILE or --aiperf FILE")),
    };
    let mut out = crate::terminal::stdout();
    if json {
        let mut doc = serde_json::json!({
            "bench": bench.display().to_string(),
            "tool": tool,
            "file": file.display().to_string(),
            "concurrency": level.concurrency,
            "rows": rows,
        });
        if let (Some(d), serde_json::Value::Object(f)) = (doc.as_object_mut(), facts) {
            d.extend(f);
        }
        let _ = writeln!(out, "{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        return Ok(Exit::Pass);
    }
    let theirs_head = if tool == "vllm" { "vLLM" } else { "AIPerf" };
    let _ = writeln!(out, "{about} · gauntlet: profile {} at concurrency {}", record.profile, level.concurrency);
    let _ = writeln!(out, "{:<44} {:>7} {:>12} {:>12} {:>9}", "metric", "unit", theirs_head, "gauntlet", "ratio");
    for r in &rows {
        let ours = r.gauntlet.map_or("—".into(), |g| format!("{g:.2}"));
        let ratio = r.gauntlet.filter(|_| r.theirs > 0.0).map_or("—".into(), |g| format!("{:.2}×", g / r.theirs));
        let _ = writeln!(out, "{:<44} {:>7} {:>12.2} {:>12} {:>9}", r.metric, r.unit, r.theirs, ours, ratio);
    }
    Ok(Exit::Pass)
}
