//! `gauntlet plan`: which profiles a change concerns, from the manifest's `[plan]`, as a list or a CI matrix.

use super::load_manifest;
use crate::Outcome;
use crate::cli::{PlanArgs, PlanFormat};
use crate::exit::{Exit, Failure};
use crate::terminal::{errln, outln};

/// `--changed-files`: a list of paths, one a line; a larger file is refused, never read whole.
const CHANGED_FILES_CAP: u64 = 64 << 20;

pub(crate) fn plan(args: PlanArgs) -> Outcome {
    let manifest = load_manifest(args.manifest.as_deref())?;
    let all: Vec<String> = manifest.profiles.keys().cloned().collect();
    let wanted: Vec<String> = args
        .profiles
        .iter()
        .flat_map(|p| p.split(','))
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect();
    let selected: Vec<String> = if args.all {
        all.clone()
    } else if !wanted.is_empty() {
        for p in &wanted {
            if !all.contains(p) {
                return Err(Failure::bad_input(format!("--profiles: no profile `{p}` (profiles: {})", all.join(", "))));
            }
        }
        let mut w = wanted;
        w.sort();
        w.dedup();
        w
    } else {
        let changed: Vec<String> = match (&args.changed_files, &args.since) {
            // A list from process substitution (`<(git diff --name-only …)`) is a pipe: read with a deadline.
            (Some(file), None) => gauntlet_engine::util::bounded::read_text_or_pipe(
                file,
                CHANGED_FILES_CAP,
                gauntlet_engine::util::bounded::PIPE_DEADLINE,
            )
            .map_err(|e| Failure::bad_input(format!("cannot read `{}`: {e}", file.display())))?
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect(),
            (None, Some(rev)) => gauntlet_engine::plan::changed_since(&args.repo, rev, args.until.as_deref())
                .map_err(|e| Failure::bad_input(e.to_string()))?,
            _ => {
                return Err(Failure::bad_input(
                    "plan needs --changed-files FILE, --since REV, --profiles P[,P…] or --all",
                ));
            }
        };
        let selection = gauntlet_engine::plan::select(&manifest.plan, &all, &changed, args.fallback_all);
        for reason in &selection.reasons {
            errln!("gauntlet plan: {reason}");
        }
        selection.profiles
    };
    let entries: Vec<(String, Vec<String>)> = selected
        .iter()
        .map(|p| (p.clone(), manifest.profiles.get(p).map(|x| x.runner.clone()).unwrap_or_default()))
        .collect();
    match args.format {
        PlanFormat::List => {
            for p in &selected {
                outln!("{p}");
            }
        }
        PlanFormat::GithubMatrix => outln!("{}", gauntlet_engine::plan::github_matrix(&entries)),
        PlanFormat::GithubOutput => {
            outln!("matrix={}", gauntlet_engine::plan::github_matrix(&entries));
            outln!("count={}", entries.len());
        }
    }
    Ok(Exit::Pass)
}
