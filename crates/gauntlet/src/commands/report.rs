//! `gauntlet report RUN --format md|html|junit|json`: a stored run rendered again, on stdout (with its baseline and
//! the store's history of its identity when they can still be found). `gauntlet report --merge`: fold a CI matrix's
//! run records into one verdict, summary.md, junit.xml and merged.json.

use std::path::Path;

use gauntlet_engine::store::{Store, default_store_dir};
use gauntlet_schema::{RunRecord, parse_run_record};

use std::io::Write as _;

use super::{append_step_summary, unwritable};
use crate::Outcome;
use crate::cli::{ReportArgs, ReportFormat};
use crate::exit::{Exit, Failure};
use crate::terminal::errln;

pub(crate) fn report(args: ReportArgs) -> Outcome {
    match &args.run {
        Some(_)
            if args.out.is_some() || args.matrix.is_some() || args.artifact.is_some() || !args.expect.is_empty() =>
        {
            Err(Failure::bad_input("--out, --matrix, --artifact and --expect belong to --merge, not to RUN"))
        }
        Some(run) => render(run, args.format.unwrap_or(ReportFormat::Md), args.store.as_deref()),
        None if args.format.is_some() || args.store.is_some() => {
            Err(Failure::bad_input("--format and --store belong to RUN, not to --merge"))
        }
        None => merge(args),
    }
}

fn read_run(path: &Path) -> Result<RunRecord, String> {
    let text = gauntlet_engine::util::bounded::read_named_text(path, gauntlet_engine::util::bounded::RECORD_CAP)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    parse_run_record(&text).map_err(|e| format!("`{}`: {e}", path.display()))
}

/// The run's record again, in the format asked for; the verdict is the record's, never recomputed.
fn render(run: &Path, format: ReportFormat, store: Option<&Path>) -> Outcome {
    let path = if run.is_dir() { run.join("run.json") } else { run.to_owned() };
    let record = read_run(&path).map_err(Failure::bad_input)?;
    // A store is only read, and only when it exists: re-rendering never creates one.
    let store_dir = default_store_dir(store, None);
    let store = store_dir.join("history").is_dir().then(|| Store::open(&store_dir).ok()).flatten();
    let text = match format {
        ReportFormat::Json => serde_json::to_string_pretty(&record).unwrap_or_default() + "\n",
        ReportFormat::Junit => gauntlet_engine::report::junit(&record),
        ReportFormat::Md | ReportFormat::Html => {
            let baseline = record.baseline.as_ref().and_then(|b| {
                let found = match b.path.strip_prefix("store:") {
                    Some(digest) => store
                        .as_ref()
                        .ok_or_else(|| "no store".to_owned())
                        .and_then(|s| s.read_record(digest).map_err(|e| e.to_string())),
                    None => read_run(Path::new(&b.path)),
                };
                found
                    .inspect_err(|why| errln!("gauntlet: baseline `{}` not found ({why}): rendered without it", b.path))
                    .ok()
            });
            if matches!(format, ReportFormat::Md) {
                gauntlet_engine::report::markdown(&record, baseline.as_ref())
            } else {
                let history = store
                    .as_ref()
                    .and_then(|s| gauntlet_engine::run::history_points(s, &record.identity_digest).ok())
                    .unwrap_or_default();
                gauntlet_engine::report::html(&record, baseline.as_ref(), &history)
            }
        }
    };
    // Rendered from a stored record: server text, escaped for its format, still goes through the terminal's
    // cleaning (a line a CI system would read as a command is defused).
    let mut out = crate::terminal::stdout();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .map_err(|e| Failure::infrastructure(format!("stdout: {e}")))?;
    Ok(Exit::from(record.verdict))
}

fn merge(args: ReportArgs) -> Outcome {
    use gauntlet_engine::report::merge;
    let mut expected: Vec<String> = args
        .expect
        .iter()
        .flat_map(|e| e.split(','))
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .map(str::to_owned)
        .collect();
    if let Some(path) = &args.matrix {
        let text = gauntlet_engine::util::bounded::read_named_text(path, gauntlet_engine::util::bounded::RECORD_CAP)
            .map_err(|e| Failure::bad_input(format!("--matrix `{}`: {e}", path.display())))?;
        let value: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| Failure::bad_input(format!("--matrix `{}`: not JSON: {e}", path.display())))?;
        let include = value["include"].as_array().ok_or_else(|| {
            Failure::bad_input(format!(
                "--matrix `{}`: want {{\"include\": [{{\"profile\": …}}]}} (gauntlet plan --format github-matrix)",
                path.display()
            ))
        })?;
        for entry in include {
            let profile = entry["profile"].as_str().ok_or_else(|| {
                Failure::bad_input(format!("--matrix `{}`: an entry has no `profile`: {entry}", path.display()))
            })?;
            expected.push(profile.to_owned());
        }
    }
    expected.sort();
    expected.dedup();
    let shards = merge::collect(&args.merge).map_err(|e| Failure::bad_input(e.to_string()))?;
    let merged = merge::merge(shards, &expected);
    let markdown = merged.markdown(args.artifact.as_deref());
    if let Some(out) = &args.out {
        let write = |name: &str, bytes: &[u8]| {
            gauntlet_engine::util::write_atomic(&out.join(name), bytes).map_err(|e| unwritable(&out.join(name), e))
        };
        std::fs::create_dir_all(out).map_err(|e| unwritable(out, e))?;
        write("summary.md", markdown.as_bytes())?;
        write("junit.xml", merged.junit().as_bytes())?;
        write("merged.json", serde_json::to_string_pretty(&merged.json()).unwrap_or_default().as_bytes())?;
    }
    let _ = crate::terminal::stdout().write_all(markdown.as_bytes());
    if std::env::var("GITHUB_ACTIONS").as_deref() == Ok("true") {
        for p in &merged.problems {
            crate::terminal::workflow_commands(&gauntlet_engine::report::github_annotation(
                "error",
                "gauntlet merge",
                p,
            ));
        }
    }
    append_step_summary(markdown.as_bytes());
    Ok(Exit::from(merged.verdict))
}
