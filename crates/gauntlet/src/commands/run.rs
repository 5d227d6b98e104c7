//! `gauntlet run`: the gate. Start (or attach to) the profile's server, run the suite, judge it against a
//! baseline, write the outputs, and promote when asked and trusted. The skip-cache may answer first.

use crate::terminal::{errln, outln};
use std::io::Write;
use std::path::Path;

use gauntlet_engine::run::{GateOptions, run_gate, write_baseline, write_outputs};
use gauntlet_engine::store::skip_cache::{self, CacheKey};
use gauntlet_engine::store::{Store, Trust, default_store_dir};
use gauntlet_engine::util::bounded;
use gauntlet_schema::{RunRecord, Verdict, parse_run_record};

use super::{
    append_step_summary, baseline, default_out_dir, identity_of, load_manifest, publish_to_github, select_profile,
    skip_or_fail, store_failure, unwritable,
};
use crate::Outcome;
use crate::cli::RunArgs;
use crate::exit::{Exit, Failure};
use crate::terminal;

pub(crate) fn run(args: RunArgs) -> Outcome {
    let manifest = load_manifest(args.manifest.as_deref())?;
    let profile = select_profile(&manifest, args.profile.as_deref(), args.port)?;
    if (!args.note.is_empty() || args.trusted) && !args.promote {
        return Err(Failure::bad_input("--note and --trusted mean something only with --promote"));
    }
    let home = gauntlet_engine::home_dir();
    let out_dir = args.out.clone().unwrap_or_else(|| default_out_dir(&profile.name));
    // The build comes first: the binary it makes is part of the identity and of the skip-cache key.
    let built = gauntlet_engine::session::build_only(&profile, &out_dir)
        .map_err(|e| skip_or_fail(&out_dir, &profile.name, e))?;
    let identity = identity_of(&profile)?;
    let store_dir = default_store_dir(args.store.as_deref(), manifest.store.as_deref());
    let store = Store::open(&store_dir).map_err(store_failure)?;
    // Trust is decided before the run, so a refused promotion costs nothing.
    let provenance = if args.promote {
        match baseline::trust(args.trusted) {
            Trust::Trusted(p) => Some(p),
            Trust::Refused(why) => return Err(Failure::bad_input(format!("--promote: {why}"))),
        }
    } else {
        None
    };

    let (baseline, baseline_digest) = match &args.baseline {
        Some(path) => {
            let record = read_baseline(path)?;
            refuse_other_identity(&record, &identity, &path.display().to_string(), &store)?;
            let digest = gauntlet_engine::util::sha256_file(path).unwrap_or_default();
            (Some((record, path.display().to_string())), digest)
        }
        None => match store.latest(&identity.digest).map_err(store_failure)? {
            Some((entry, record)) => {
                errln!("gauntlet: baseline: {}", baseline::describe(&entry));
                (Some((record, format!("store:{}", entry.record))), entry.record.clone())
            }
            None => {
                explain_missing_baseline(&store, &profile.name, &identity);
                (None, "none".to_owned())
            }
        },
    };

    let cache_key = match &args.source {
        Some(dir) => Some(
            CacheKey::for_run(&profile, &identity, dir, &baseline_digest)
                .map_err(|e| Failure::bad_input(e.to_string()))?,
        ),
        None => None,
    };
    let cache_dir = home.join("skip-cache");
    if let Some(key) = &cache_key
        && !args.no_cache
        && let Some(hit) = skip_cache::lookup(&cache_dir, key)
    {
        let line = format!(
            "gauntlet: reused the pass of {} ({}): same source tree, identity, model file, runtime, baseline and \
             gauntlet version; --no-cache runs again",
            hit.record.started_at,
            hit.dir.display()
        );
        let _ = crate::terminal::stdout().write_all(hit.report.as_bytes());
        outln!("\n{line}");
        // With --out, the remembered evidence is put where this run's would be, so a CI merge finds the shard.
        if let Some(out) = &args.out {
            write_reused(out, &hit).map_err(|e| unwritable(out, e))?;
        }
        append_step_summary(format!("{}\n{line}\n", hit.report).as_bytes());
        return Ok(Exit::Pass);
    }

    let mut view = terminal::View::new(terminal::stderr_is_terminal());
    // The decode speeds the identity's promoted runs had: their spread widens the decode warn band.
    let promoted = gauntlet_engine::run::history_points(&store, &identity.digest).unwrap_or_default();
    let decodes: Vec<f64> = promoted.iter().filter_map(|p| p.decode).collect();
    let opts = GateOptions {
        decode_spread: gauntlet_engine::compare::decode_spread(&decodes),
        out_dir: &out_dir,
        identity: &identity,
        baseline: baseline.as_ref().map(|(r, p)| (r, p.clone())),
        built,
    };
    let mut record = run_gate(&profile, &opts, &mut view).map_err(|e| skip_or_fail(&out_dir, &profile.name, e))?;
    // Losslessness: the profile named by `lossless_against` (the same server without the draft) answers the suite
    // twice, a reference and a control, each with its own server lifecycle.
    if let Some(other) = &profile.lossless_against {
        let reference = select_profile(&manifest, Some(other), None)?;
        errln!(
            "gauntlet: losslessness: running `{other}` twice (reference and control) to compare its answers with these"
        );
        gauntlet_engine::run::lossless::check_lossless(
            &mut record,
            &reference,
            &out_dir,
            &mut gauntlet_engine::run::Silent,
        )
        .map_err(|e| skip_or_fail(&out_dir, &profile.name, e))?;
    }
    // Everything below writes or prints the record: only its redacted form goes on.
    let record = gauntlet_engine::run::redacted(&record).into_owned();
    let history = gauntlet_engine::run::history_points(&store, &identity.digest).unwrap_or_default();
    write_outputs(&record, baseline.as_ref().map(|(r, _)| r), &history, &out_dir)
        .map_err(|e| Failure::infrastructure(format!("cannot write outputs into `{}`: {e}", out_dir.display())))?;
    publish_to_github(&record, &out_dir);
    let mut stdout = crate::terminal::stdout();
    let _ = terminal::summary(&mut stdout, &record, &out_dir);
    if let Some(line) = gauntlet_engine::report::expected_failures_line(&record) {
        let _ = writeln!(
            stdout,
            "no baseline yet and cases fail; if that is what this server does, declare them in the profile:\n  {line}"
        );
    }
    if let Some(key) = &cache_key {
        let report = bounded::read_text(&out_dir.join("report.md"), bounded::RECORD_CAP).unwrap_or_default();
        if let Err(e) = skip_cache::remember(&cache_dir, key, &record, &report) {
            errln!("gauntlet: warning: skip-cache not written: {e}");
        }
    }
    if let Some(path) = &args.write_baseline {
        match write_baseline(&record, path) {
            Ok(()) => {
                let _ = writeln!(stdout, "baseline written: {}", path.display());
            }
            Err(e) => errln!("gauntlet: {e}"),
        }
    }
    if let Some(provenance) = provenance {
        if record.verdict == Verdict::Fail {
            let _ = writeln!(stdout, "not promoted: the run failed");
        } else {
            let entry = store.promote(&record, provenance, &args.note).map_err(|e| {
                let f = store_failure(e);
                Failure { message: format!("promotion failed: {}", f.message), ..f }
            })?;
            let _ = writeln!(stdout, "promoted: {}", baseline::describe(&entry));
            baseline::warn_paired(&store, &entry);
        }
    }
    Ok(Exit::from(record.verdict))
}

/// A skip-cache hit's remembered run.json and report.md, and `reused.json` saying where they come from.
fn write_reused(out: &Path, hit: &skip_cache::Hit) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    let run = bounded::read_bytes(&hit.dir.join("run.json"), bounded::RECORD_CAP).map_err(std::io::Error::other)?;
    gauntlet_engine::util::write_atomic(&out.join("run.json"), &run)?;
    gauntlet_engine::util::write_atomic(&out.join("report.md"), hit.report.as_bytes())?;
    let reused = gauntlet_schema::store::Reused {
        reused_from: hit.dir.display().to_string(),
        original_started_at: hit.record.started_at.clone(),
        at: gauntlet_engine::util::now_rfc3339(),
    };
    gauntlet_engine::util::write_atomic(&out.join("reused.json"), serde_json::to_string_pretty(&reused)?.as_bytes())
}

fn read_baseline(path: &Path) -> Result<RunRecord, Failure> {
    let text = gauntlet_engine::util::bounded::read_named_text(path, gauntlet_engine::util::bounded::RECORD_CAP)
        .map_err(|e| Failure::bad_input(format!("cannot read baseline `{}`: {e}", path.display())))?;
    parse_run_record(&text).map_err(|e| Failure::bad_input(format!("baseline `{}`: {e}", path.display())))
}

/// A baseline of another identity is refused, listing every differing field, and naming the stored baseline
/// whose identity does match when there is one.
fn refuse_other_identity(
    record: &RunRecord,
    identity: &gauntlet_engine::identity::Identity,
    origin: &str,
    store: &Store,
) -> Result<(), Failure> {
    if record.identity_digest == identity.digest {
        return Ok(());
    }
    let d =
        gauntlet_engine::identity::differences(&record.identity, &identity.value, &record.runtime, &identity.runtime);
    let mut msg = format!("refusing to compare with baseline `{origin}`: it has another identity");
    push_differences(&mut msg, &d);
    if let Ok(Some((entry, _))) = store.latest(&identity.digest) {
        msg.push_str(&format!("\nthe store has a baseline of this identity: {}", baseline::describe(&entry)));
    }
    Err(Failure::bad_input(msg))
}

/// No baseline of this identity: when the profile has one under another identity, say what changed, so a
/// "no baseline yet" after an edited manifest is not a mystery.
fn explain_missing_baseline(store: &Store, profile: &str, identity: &gauntlet_engine::identity::Identity) {
    let Ok(Some((entry, record))) = store.latest_of_profile(profile, &identity.digest) else { return };
    let d =
        gauntlet_engine::identity::differences(&record.identity, &identity.value, &record.runtime, &identity.runtime);
    let mut msg = format!(
        "gauntlet: no baseline of this identity yet; the newest baseline of profile `{profile}` ({}) has another:",
        baseline::describe(&entry)
    );
    push_differences(&mut msg, &d);
    errln!("{msg}");
}

/// One indented line per differing field; those that only warn under a heading of their own.
fn push_differences(msg: &mut String, d: &gauntlet_engine::identity::Differences) {
    for f in &d.refusing {
        msg.push_str(&format!("\n  {f}"));
    }
    if !d.warning.is_empty() {
        msg.push_str("\n(these only warn:)");
        for f in &d.warning {
            msg.push_str(&format!("\n  {f}"));
        }
    }
}
