//! `gauntlet bench`: latency and throughput per concurrency, compared with a baseline bench of the same identity.

use std::io::Write;
use std::path::Path;

use gauntlet_engine::run::run_bench;

use super::{bench_baseline, default_out_dir, gate_failure, identity_of, load_manifest, select_profile, skip_or_fail};
use crate::Outcome;
use crate::cli::BenchArgs;
use crate::exit::{Exit, Failure};
use crate::terminal;
use gauntlet_engine::run::BenchVerdict;

pub(crate) fn bench(args: BenchArgs) -> Outcome {
    let manifest = load_manifest(args.manifest.as_deref())?;
    let profile = select_profile(&manifest, args.profile.as_deref(), args.port)?;
    // The profile's `[bench]` workload, each flag overriding its part.
    let mut workload = profile.bench.clone();
    if !args.concurrency.is_empty() {
        workload.concurrency = args.concurrency.clone();
    }
    workload.max_tokens = args.max_tokens.unwrap_or(workload.max_tokens);
    workload.warmups = args.warmups.unwrap_or(workload.warmups);
    workload.repetitions = args.repetitions.unwrap_or(workload.repetitions);
    workload.rate = args.rate.or(workload.rate);
    workload.seed = args.seed.or(workload.seed).or(workload.rate.map(|_| 1));
    if let Some(problem) = gauntlet_engine::manifest::workload_problem(&workload) {
        return Err(Failure::bad_input(problem));
    }
    if let Some(a) = args.paired_with.as_deref() {
        return super::paired::paired(&manifest, a, profile, workload, args.pairs, args.out);
    }
    let identity = identity_of(&profile)?;
    let baseline = bench_baseline(args.baseline.as_deref(), &identity)?;
    let out_dir = args.out.unwrap_or_else(|| default_out_dir(&format!("bench-{}", profile.name)));
    let mut view = terminal::View::new(terminal::stderr_is_terminal());
    let mut measure = |dir: &Path| {
        let base = baseline.as_ref().map(|(b, p)| (b, p.clone()));
        run_bench(&profile, &identity, &workload, base, dir, &mut view).map_err(|e| skip_or_fail(dir, &profile.name, e))
    };
    let mut record = measure(&out_dir)?;
    let mut out = crate::terminal::stdout();
    let _ = terminal::bench(&mut out, &record, &out_dir);
    if args.confirm && record.verdict == BenchVerdict::Regression {
        let _ = writeln!(out, "regression: measuring again to confirm it");
        let again_dir = out_dir.join("confirm");
        let again = measure(&again_dir)?;
        let _ = terminal::bench(&mut out, &again, &again_dir);
        let outcome = gauntlet_engine::run::confirm(&mut record, &again, "confirm/bench.json");
        gauntlet_engine::run::write_bench(&record, &out_dir).map_err(gate_failure)?;
        let _ = writeln!(out, "confirm: {outcome}");
    }
    Ok(match record.final_verdict() {
        BenchVerdict::Fail | BenchVerdict::Regression => Exit::Fail,
        BenchVerdict::Inconclusive => Exit::Inconclusive,
        _ => Exit::Pass,
    })
}
