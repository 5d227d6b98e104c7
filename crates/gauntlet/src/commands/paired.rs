//! `gauntlet bench --profile B --paired-with A`: a paired A/B bench (`gauntlet_engine::run::paired`).

use std::io::Write;
use std::path::PathBuf;

use gauntlet_engine::manifest::{Manifest, Profile};
use gauntlet_engine::run::BenchVerdict;
use gauntlet_engine::run::Workload;
use gauntlet_engine::run::paired::{PairedMode, PairedOptions, false_call_line, metric_line, period_line, run_paired};

use super::{default_out_dir, identity_of, select_profile, skip_or_fail};
use crate::Outcome;
use crate::exit::{Exit, Failure};
use crate::terminal;

/// The default and the largest `--pairs`.
const PAIRS_DEFAULT: usize = 20;
const PAIRS_MAX: usize = 1000;
/// The first look: fewer pairs cannot reach significance at a useful level (8 pairs all one way: p = 2/256).
const MIN_PAIRS: usize = 8;

pub(crate) fn paired(
    manifest: &Manifest,
    a_name: &str,
    b: Profile,
    mut workload: Workload,
    pairs: Option<usize>,
    out: Option<PathBuf>,
) -> Outcome {
    let a = select_profile(manifest, Some(a_name), None)?;
    if a.name == b.name {
        return Err(Failure::bad_input(format!("--paired-with `{a_name}` is the benched profile itself")));
    }
    let max_pairs = pairs.unwrap_or(PAIRS_DEFAULT);
    if !(1..=PAIRS_MAX).contains(&max_pairs) {
        return Err(Failure::bad_input(format!("--pairs {max_pairs}: expected 1..={PAIRS_MAX}")));
    }
    // One request at a time: the pairs are the samples, the concurrency is 1.
    workload.concurrency = vec![1];
    let mode = if a.paired_alternate || b.paired_alternate { PairedMode::Alternate } else { PairedMode::Both };
    let options = PairedOptions { min_pairs: MIN_PAIRS, max_pairs, mode, decide: b.bench_decide.clone() };
    let (ia, ib) = (identity_of(&a)?, identity_of(&b)?);
    let out_dir = out.unwrap_or_else(|| default_out_dir(&format!("paired-{}-{}", b.name, a.name)));
    let mut view = terminal::View::new(terminal::stderr_is_terminal());
    let record = run_paired(&a, &b, (&ia, &ib), &workload, &options, &out_dir, &mut view)
        .map_err(|e| skip_or_fail(&out_dir, &b.name, e))?;
    let mut o = terminal::stdout();
    let _ = writeln!(
        o,
        "gauntlet bench {} paired with {}: {} after {} pairs ({})",
        record.b.profile,
        record.a.profile,
        record.verdict.as_str().to_uppercase(),
        record.pairs.len(),
        record.stopped
    );
    let _ = writeln!(o, "  deciding: {} ({})", record.deciding.join(", "), record.deciding_why);
    if let Some(clock) = &record.decode_clock {
        let _ = writeln!(o, "  decode: {clock}");
    }
    for v in &record.metrics {
        let _ = writeln!(o, "  {}", metric_line(v));
    }
    for e in &record.period_effects {
        let _ = writeln!(o, "  period effect: {}", period_line(e));
    }
    if let Some(l) = &record.left_out {
        let _ = writeln!(o, "  left out: {l}");
    }
    if let Some(line) = false_call_line(&record) {
        let _ = writeln!(o, "  false calls: {line}");
    }
    for p in &record.problems {
        let _ = writeln!(o, "  problem: {p}");
    }
    let _ = writeln!(o, "paired: {} (paired.md beside it)", out_dir.join("paired.json").display());
    Ok(match record.verdict {
        BenchVerdict::Fail | BenchVerdict::Regression => Exit::Fail,
        BenchVerdict::Inconclusive => Exit::Inconclusive,
        _ => Exit::Pass,
    })
}
