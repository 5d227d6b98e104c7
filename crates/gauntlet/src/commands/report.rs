//! `gauntlet report --merge`: fold a CI matrix's run records into one verdict, summary.md, junit.xml and
//! merged.json.

use std::io::Write as _;

use super::{append_step_summary, unwritable};
use crate::Outcome;
use crate::cli::ReportArgs;
use crate::exit::{Exit, Failure};

pub(crate) fn report(args: ReportArgs) -> Outcome {
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
    let shards = merge::collect(&args.merge).map_err(Failure::bad_input)?;
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
