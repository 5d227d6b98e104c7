//! `gauntlet bench`: latency and throughput per concurrency, compared with a baseline bench of the same identity.

use std::io::Write;
use std::path::Path;

use gauntlet_engine::run::run_bench;

use super::{bench_baseline, default_out_dir, gate_failure, identity_of, load_manifest, select_profile, skip_or_fail};
use crate::Outcome;
use crate::cli::{BenchArgs, BenchFormat};
use crate::exit::{Exit, Failure};
use crate::terminal;
use crate::terminal::errln;
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
    if args.repetitions.is_some() {
        errln!("gauntlet: warning: --repetitions is deprecated: call it --samples");
    }
    workload.repetitions = args.samples.or(args.repetitions).unwrap_or(workload.repetitions);
    workload.rate = args.rate.or(workload.rate);
    workload.seed = args.seed.or(workload.seed).or(workload.rate.map(|_| 1));
    if let Some(problem) = gauntlet_engine::manifest::workload_problem(&workload) {
        return Err(Failure::bad_input(problem));
    }
    if let Some(a) = args.paired_with.as_deref() {
        if workload.response_format.is_some() {
            // A paired A/B compares speed and keeps no correctness rate: the format would be sent and never counted.
            return Err(Failure::bad_input(format!(
                "--paired-with: profile `{}` sends a structured-output `response_format`, whose rate only a plain \
                 bench records; run the two profiles as plain benches",
                profile.name
            )));
        }
        return super::paired::paired(&manifest, a, profile, workload, args.pairs, args.out);
    }
    let identity = identity_of(&profile)?;
    let baseline = bench_baseline(args.baseline.as_deref(), &identity)?;
    let mut history = Vec::new();
    for path in &args.history {
        history.extend(bench_baseline(Some(path), &identity)?.map(|(b, _)| b));
    }
    let out_dir = args.out.unwrap_or_else(|| default_out_dir(&format!("bench-{}", profile.name)));
    let mut view = terminal::View::new(terminal::stderr_is_terminal());
    let mut measure = |dir: &Path| {
        let base = baseline.as_ref().map(|(b, p)| (b, p.clone()));
        run_bench(&profile, &identity, &workload, base, &history, dir, &mut view)
            .map_err(|e| skip_or_fail(dir, &profile.name, e))
    };
    let mut record = measure(&out_dir)?;
    // `--format csv`: bench.csv beside bench.json, and the CSV (not the table) on stdout, the lines that say what
    // happened on stderr.
    // `--format llmd`: llm-d's Benchmark Report, one file per concurrency beside bench.json.
    let csv_only = matches!(args.format, Some(BenchFormat::Csv));
    let csv = |record: &gauntlet_engine::run::BenchRecord, dir: &Path| -> Result<(), Failure> {
        let write = |name: &str, bytes: &[u8]| {
            gauntlet_engine::util::write_atomic(&dir.join(name), bytes)
                .map_err(|source| gate_failure(gauntlet_engine::run::GateError::Out { path: dir.into(), source }))
        };
        match args.format {
            Some(BenchFormat::Csv) => write("bench.csv", gauntlet_engine::run::bench_report::csv(record).as_bytes()),
            Some(BenchFormat::Llmd) => {
                for (name, report) in gauntlet_engine::formats::llmd::reports(record) {
                    write(&name, serde_json::to_string_pretty(&report).unwrap_or_default().as_bytes())?;
                }
                Ok(())
            }
            None => Ok(()),
        }
    };
    let mut stdout = crate::terminal::stdout();
    let mut stderr = crate::terminal::stderr();
    let out: &mut dyn Write = if csv_only { &mut stderr } else { &mut stdout };
    let _ = terminal::bench(&mut *out, &record, &out_dir);
    csv(&record, &out_dir)?;
    // Interrupted: no second measurement (the exit status says the signal).
    let interrupted = gauntlet_engine::server::interrupted().is_some();
    if args.confirm && record.verdict == BenchVerdict::Regression && !interrupted {
        let _ = writeln!(out, "regression: measuring again to confirm it");
        let again_dir = out_dir.join("confirm");
        let again = measure(&again_dir)?;
        let _ = terminal::bench(&mut *out, &again, &again_dir);
        let outcome = gauntlet_engine::run::confirm(&mut record, &again, "confirm/bench.json");
        gauntlet_engine::run::write_bench(&record, &out_dir).map_err(gate_failure)?;
        csv(&again, &again_dir)?;
        csv(&record, &out_dir)?;
        let _ = writeln!(out, "confirm: {outcome}");
    }
    if csv_only {
        // Raw: the CSV's cells are escaped by its writer (no control character survives), and its CRLFs are its own.
        drop(stdout);
        terminal::write_csv(&gauntlet_engine::run::bench_report::csv(&record));
    }
    Ok(match record.final_verdict() {
        BenchVerdict::Fail | BenchVerdict::Regression => Exit::Fail,
        BenchVerdict::Inconclusive => Exit::Inconclusive,
        _ => Exit::Pass,
    })
}
