//! `gauntlet baseline promote|show|list|verify`: thin wrappers over the engine's store. A refused promotion
//! (untrusted context, failed run, unverifiable bundle, a record the store refuses) is bad input; a store that
//! cannot be written is infrastructure; neither is an internal error.

use crate::terminal::{errln, outln};
use std::path::{Path, PathBuf};

use gauntlet_engine::store::{HistoryEntry, Store, Trust, decide_trust, default_store_dir};
use gauntlet_schema::{Verdict, parse_run_record};

use super::{identity_of, load_manifest, store_failure};
use crate::Outcome;
use crate::cli::BaselineCommand;
use crate::exit::{Exit, Failure};

pub(crate) fn trust(explicit: bool) -> Trust {
    decide_trust(explicit, &|k| std::env::var(k).ok(), &|p| {
        gauntlet_engine::util::bounded::read_named_text(
            std::path::Path::new(p),
            gauntlet_engine::util::bounded::RECORD_CAP,
        )
        .ok()
    })
}

/// One line: when, by whom, from which commit, and the note.
pub(crate) fn describe(e: &HistoryEntry) -> String {
    let p = &e.provenance;
    let what = if e.is_qualification() { "qualification " } else { "" };
    let mut s = format!("#{} of profile `{}`, {what}promoted {} ({}", e.seq, e.profile, e.promoted_at, p.event);
    if let Some(actor) = &p.actor {
        s.push_str(&format!(" by {actor}"));
    }
    if let Some(commit) = &p.commit {
        s.push_str(&format!(", commit {}", short(commit)));
    }
    s.push(')');
    if !e.note.is_empty() {
        s.push_str(&format!(": \"{}\"", e.note));
    }
    s
}

/// The first 12 characters of a digest or commit read from the store or the environment (which may be shorter,
/// or not ASCII: never sliced by bytes).
fn short(s: &str) -> String {
    s.chars().take(12).collect()
}

/// Paired baselines (same recipe, other devices) from different commits cannot be read side by side.
pub(crate) fn warn_paired(store: &Store, entry: &HistoryEntry) {
    let Ok(paired) = store.paired(entry) else { return };
    for other in paired {
        if other.provenance.commit != entry.provenance.commit {
            errln!(
                "gauntlet: warning: paired baseline for identity {}… ({}) comes from commit {}, this one from {}",
                short(&other.identity_digest),
                other.profile,
                other.provenance.commit.as_deref().unwrap_or("unknown"),
                entry.provenance.commit.as_deref().unwrap_or("unknown"),
            );
        }
    }
}

/// A qualification bundle becomes a decision record only when it verifies offline, is complete, and passed.
fn promote_bundle(
    dir: &Path,
    provenance: gauntlet_engine::store::Provenance,
    note: &str,
    store: Option<&Path>,
) -> Outcome {
    let decision = gauntlet_engine::qualify::decision(dir).map_err(|problems| {
        Failure::bad_input(format!("`{}` is not promoted:\n  {}", dir.display(), problems.join("\n  ")))
    })?;
    if note.trim().is_empty() {
        return Err(Failure::bad_input("promoting a qualification records a reviewer's decision: say why with --note"));
    }
    let store = open(store)?;
    let entry = store.promote_decision(&decision, provenance, note).map_err(store_failure)?;
    outln!("qualified: {}", describe(&entry));
    outln!("identity {}", entry.identity_digest);
    outln!(
        "decision {} (bundle {}, evidence manifest sha256 {})",
        entry.record,
        decision.run_id,
        decision.evidence_manifest_sha256
    );
    Ok(Exit::Pass)
}

fn open(store: Option<&Path>) -> Result<Store, Failure> {
    Store::open(&default_store_dir(store, None)).map_err(store_failure)
}

pub(crate) fn command(cmd: BaselineCommand) -> Outcome {
    match cmd {
        BaselineCommand::Promote { run, note, trusted, store } => {
            let provenance = match trust(trusted) {
                Trust::Trusted(p) => p,
                Trust::Refused(why) => return Err(Failure::bad_input(format!("promote: {why}"))),
            };
            if run.join(gauntlet_engine::qualify::REPORT_FILE).is_file() {
                return promote_bundle(&run, provenance, &note, store.as_deref());
            }
            let path: PathBuf = if run.is_dir() { run.join("run.json") } else { run };
            let text =
                gauntlet_engine::util::bounded::read_named_text(&path, gauntlet_engine::util::bounded::RECORD_CAP)
                    .map_err(|e| Failure::bad_input(format!("cannot read `{}`: {e}", path.display())))?;
            let record =
                parse_run_record(&text).map_err(|e| Failure::bad_input(format!("`{}`: {e}", path.display())))?;
            if record.verdict == Verdict::Fail {
                return Err(Failure::bad_input(format!(
                    "`{}` failed; a failing run is never a baseline",
                    path.display()
                )));
            }
            let store = open(store.as_deref())?;
            let entry = store.promote(&record, provenance, &note).map_err(store_failure)?;
            outln!("promoted: {}", describe(&entry));
            outln!("identity {}", entry.identity_digest);
            warn_paired(&store, &entry);
            Ok(Exit::Pass)
        }
        BaselineCommand::Show { manifest, profile, identity, store } => {
            let store = open(store.as_deref())?;
            let digest = match identity {
                Some(d) => d,
                None => {
                    let m = load_manifest(manifest.as_deref())?;
                    let p = m.select(profile.as_deref()).map_err(|e| Failure::bad_input(e.to_string()))?;
                    identity_of(p)?.digest
                }
            };
            let history = store.history(&digest).map_err(store_failure)?;
            if history.is_empty() {
                outln!("no baseline yet for identity {digest}");
                return Ok(Exit::Pass);
            }
            outln!("identity {digest}");
            for e in &history {
                outln!("  {}  record {}", describe(e), e.record);
            }
            Ok(Exit::Pass)
        }
        BaselineCommand::List { store } => {
            let store = open(store.as_deref())?;
            for id in store.identities().map_err(store_failure)? {
                if let Some(last) = store.history(&id).map_err(store_failure)?.last() {
                    outln!("{id}  {}", describe(last));
                }
            }
            Ok(Exit::Pass)
        }
        BaselineCommand::History { profile, store, html } => {
            let store = open(store.as_deref())?;
            let identities = gauntlet_engine::run::store_history(&store, profile.as_deref()).map_err(store_failure)?;
            for h in &identities {
                let chain = if h.problems.is_empty() {
                    "chain verified".to_owned()
                } else {
                    format!("chain BROKEN ({} problem(s))", h.problems.len())
                };
                outln!("identity {}: {} promotion(s), {chain}", h.identity_digest, h.points.len());
                for p in &h.points {
                    let decode = p.decode.map_or("—".into(), |d| format!("{d:.1} tok/s"));
                    let load = p.load.map_or("—".into(), |l| format!("{l:.2} s"));
                    outln!("  #{} {} {} decode {decode} load {load}: {:?}", p.seq, p.promoted_at, p.kind, p.note);
                }
            }
            if let Some(path) = html {
                let page = gauntlet_engine::report::history_page(&store.root().display().to_string(), &identities);
                gauntlet_engine::util::write_atomic(&path, page.as_bytes()).map_err(|e| super::unwritable(&path, e))?;
                outln!("written: {}", path.display());
            }
            let broken = identities.iter().any(|h| !h.problems.is_empty());
            Ok(if broken { Exit::Fail } else { Exit::Pass })
        }
        BaselineCommand::Verify { store } => {
            let store = open(store.as_deref())?;
            let (entries, problems) = store.verify().map_err(store_failure)?;
            for t in store.temporaries() {
                outln!("note: {t}: left by an interrupted write; ignored (the next promotion removes it)");
            }
            if problems.is_empty() {
                outln!("store {}: {entries} entries, every chain and record intact", store.root().display());
                Ok(Exit::Pass)
            } else {
                for p in &problems {
                    outln!("{p}");
                }
                outln!("store {}: {} problem(s) in {entries} entries", store.root().display(), problems.len());
                Ok(Exit::Fail)
            }
        }
    }
}
