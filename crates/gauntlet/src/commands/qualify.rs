//! `gauntlet qualify`: release qualification, stages R0–R7 on one server, into an evidence bundle.

use crate::terminal::errln;

use gauntlet_engine::qualify::{QualifyOptions, REPORT_FILE, parse_stages, run_qualify};
use gauntlet_engine::store::{Store, default_store_dir};

use super::{
    baseline, bench_baseline, default_out_dir, identity_of, load_manifest, select_profile, skip_or_fail, store_failure,
};
use crate::Outcome;
use crate::cli::QualifyArgs;
use crate::exit::{Exit, Failure};
use crate::terminal;

pub(crate) fn qualify(args: QualifyArgs) -> Outcome {
    let manifest = load_manifest(args.manifest.as_deref())?;
    let profile = select_profile(&manifest, args.profile.as_deref(), args.port)?;
    let stages = parse_stages(args.stages.as_deref().unwrap_or("R0,R1,R2,R3,R4,R5,R6,R7"))
        .map_err(|e| Failure::bad_input(e.to_string()))?;
    let identity = identity_of(&profile)?;
    let baseline = match args.baseline.as_deref() {
        Some(path) => bench_baseline(Some(path), &identity)?,
        None => {
            // The reference a reviewer promoted (`gauntlet baseline promote BUNDLE`) for exactly this identity.
            let store = Store::open(&default_store_dir(args.store.as_deref(), manifest.store.as_deref()))
                .map_err(store_failure)?;
            match store.latest_decision(&identity.digest).map_err(store_failure)? {
                Some((entry, decision)) => {
                    errln!("gauntlet: R5 baseline: {}", baseline::describe(&entry));
                    Some((decision.performance, format!("store:{} (qualification {})", entry.record, decision.run_id)))
                }
                None => None,
            }
        }
    };
    let out_dir = args.out.unwrap_or_else(|| default_out_dir(&format!("qualify-{}", profile.name)));
    // A folder that holds a qualification already is the user's mistake (bad input), refused before anything
    // runs; the engine refuses it too, but as an output error.
    if out_dir.join(REPORT_FILE).exists() {
        return Err(Failure::bad_input(format!(
            "cannot create output directory `{}`: already holds a qualification; give a new --out so no evidence \
             is lost",
            out_dir.display()
        )));
    }
    let mut view = terminal::View::new(terminal::stderr_is_terminal());
    // With a draft and `lossless_against`, R3 checks losslessness against that profile (run while R3's restart row
    // has this one's server stopped).
    let lossless_against = match &profile.lossless_against {
        Some(other) => Some(select_profile(&manifest, Some(other), None)?),
        None => None,
    };
    let opts = QualifyOptions {
        out_dir: &out_dir,
        identity: &identity,
        stages,
        baseline,
        lossless_against: lossless_against.as_ref(),
    };
    let report = run_qualify(&profile, &opts, &mut view).map_err(|e| skip_or_fail(&out_dir, &profile.name, e))?;
    let mut out = crate::terminal::stdout();
    let _ = terminal::qualification(&mut out, &report, &out_dir);
    use gauntlet_engine::qualify::QualificationVerdict;
    Ok(match report.verdict {
        QualificationVerdict::Pass => Exit::Pass,
        QualificationVerdict::Inconclusive => Exit::Inconclusive,
        QualificationVerdict::Fail | QualificationVerdict::Running => Exit::Fail,
    })
}
