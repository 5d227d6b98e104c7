//! Writing a finished run: `run.json`, `report.md`, `report.html`, `junit.xml`, and the GitHub step summary
//! when asked; and reading a baseline's history out of the store for the HTML views (bounded: the newest
//! promotions only). What is written is the [`redacted`] record: a secret the server echoed never reaches a
//! file, a report or a store.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use gauntlet_schema::{RunRecord, Verdict};

use crate::report::{self, HistoryPoint, IdentityHistory};
use crate::store::Store;
use crate::util::{redact, write_atomic};

/// Promotions drawn per identity: the newest ones (each reads one record from the store).
pub const HISTORY_SHOWN: usize = 100;

/// The record as it may leave the process: every registered secret redacted from every string, including one
/// that a streamed answer split across its events (which no single string contains).
pub fn redacted(run: &RunRecord) -> Cow<'_, RunRecord> {
    if !redact::active() {
        return Cow::Borrowed(run);
    }
    let mut r = run.clone();
    for a in r.cases.iter_mut().filter_map(|c| c.answer.as_mut()) {
        redact::fragments(a.timeline.iter_mut().map(|e| &mut e.content));
        redact::fragments(a.timeline.iter_mut().map(|e| &mut e.reasoning));
        if let Some(t) = a.tokens.as_mut() {
            // The tokens spell the answer again, one piece each: a token that held part of a secret keeps only its
            // redacted text; its id, bytes and alternatives would spell the secret again, so they go.
            let before: Vec<String> = t.items.iter().map(|i| i.text.clone()).collect();
            redact::fragments(t.items.iter_mut().map(|i| &mut i.text));
            for (item, old) in t.items.iter_mut().zip(&before) {
                if item.text != *old {
                    item.id = None;
                    item.bytes = None;
                    item.top.clear();
                }
            }
        }
    }
    let Ok(mut v) = serde_json::to_value(&r) else { return Cow::Owned(r) };
    redact::value(&mut v);
    // Every other string: the file writer redacts the bytes again, so a record that does not round-trip is
    // still covered there.
    Cow::Owned(serde_json::from_value(v).unwrap_or(r))
}

/// `history`: the baseline's promotions, oldest first, for `report.html`'s trend (empty when the store has none).
pub fn write_outputs(
    run: &RunRecord,
    baseline: Option<&RunRecord>,
    history: &[HistoryPoint],
    out_dir: &Path,
) -> std::io::Result<()> {
    let run = redacted(run);
    let json = serde_json::to_vec_pretty(&*run).map_err(std::io::Error::other)?;
    write_atomic(&out_dir.join("run.json"), &json)?;
    write_atomic(&out_dir.join("report.md"), report::markdown(&run, baseline).as_bytes())?;
    write_atomic(&out_dir.join("report.html"), report::html(&run, baseline, history).as_bytes())?;
    write_atomic(&out_dir.join("junit.xml"), report::junit(&run).as_bytes())?;
    Ok(())
}

/// Why [`write_baseline`] wrote nothing.
#[derive(Debug, thiserror::Error)]
pub enum BaselineWriteError {
    /// A failing run never becomes the reference.
    #[error("not writing baseline `{}`: the run failed", path.display())]
    Failed { path: PathBuf },
    #[error("cannot create `{}`: {source}", dir.display())]
    CreateDir { dir: PathBuf, source: std::io::Error },
    #[error("{0}")]
    Serialize(#[from] serde_json::Error),
    #[error("cannot write baseline `{}`: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

/// Writes the run as a baseline file, atomically, unless it failed: a failing run never becomes the reference.
pub fn write_baseline(run: &RunRecord, path: &Path) -> Result<(), BaselineWriteError> {
    if run.verdict == Verdict::Fail {
        return Err(BaselineWriteError::Failed { path: path.to_owned() });
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| BaselineWriteError::CreateDir { dir: dir.to_owned(), source })?;
    }
    let json = serde_json::to_vec_pretty(&*redacted(run))?;
    write_atomic(path, &json).map_err(|source| BaselineWriteError::Write { path: path.to_owned(), source })
}

/// The newest [`HISTORY_SHOWN`] promotions of `identity`, oldest first, each with what its record says; a record
/// that cannot be read (or no longer has its digest) is a point that says why, never a failure of the caller.
pub fn history_points(store: &Store, identity: &str) -> Result<Vec<HistoryPoint>, crate::store::StoreError> {
    let entries = store.history(identity)?;
    let skip = entries.len().saturating_sub(HISTORY_SHOWN);
    let mut points = Vec::new();
    let mut previous: Option<RunRecord> = None;
    for entry in &entries[skip..] {
        if entry.is_qualification() {
            points.push(HistoryPoint::new(entry, Ok(None), None));
            continue;
        }
        match store.read_record(&entry.record) {
            Ok(record) => {
                points.push(HistoryPoint::new(entry, Ok(Some(&record)), previous.as_ref()));
                previous = Some(record);
            }
            Err(e) => points.push(HistoryPoint::new(entry, Err(e.to_string()), None)),
        }
    }
    Ok(points)
}

/// Every identity of the store (or only those whose newest promotion is of `profile`) with its points and what
/// verifying the store found wrong in its chain.
pub fn store_history(store: &Store, profile: Option<&str>) -> Result<Vec<IdentityHistory>, crate::store::StoreError> {
    let (_, problems) = store.verify()?;
    let mut out = Vec::new();
    for id in store.identities()? {
        let points = history_points(store, &id)?;
        if profile.is_some_and(|p| points.last().is_none_or(|last| last.profile != p)) {
            continue;
        }
        let file = format!("history/{id}.jsonl");
        let model = points
            .iter()
            .rev()
            .filter(|p| p.kind == "run" && p.unreadable.is_none())
            .find_map(|p| store.read_record(&p.record).ok()?.identity.model().map(|m| m.name.clone()));
        out.push(IdentityHistory {
            identity_digest: id,
            model,
            points,
            problems: problems.iter().filter(|p| p.starts_with(&file)).cloned().collect(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A failing run is refused before anything is touched; a folder that cannot be made, or a file that cannot be
    /// written, is said with its path.
    #[test]
    fn a_baseline_not_written_is_the_variant_of_why() {
        let mut run =
            gauntlet_schema::parse_run_record(include_str!("../../../../docs/validation/h200-2026-12-01/run1.json"))
                .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("baselines").join("p.json");
        run.verdict = Verdict::Fail;
        let e = write_baseline(&run, &path).unwrap_err();
        assert!(matches!(&e, BaselineWriteError::Failed { path: p } if *p == path), "{e:?}");
        assert_eq!(e.to_string(), format!("not writing baseline `{}`: the run failed", path.display()));
        assert!(!dir.path().join("baselines").exists(), "nothing is made for a failing run");
        run.verdict = Verdict::Pass;
        let file = dir.path().join("file");
        std::fs::write(&file, b"").unwrap();
        let e = write_baseline(&run, &file.join("p.json")).unwrap_err();
        assert!(matches!(&e, BaselineWriteError::CreateDir { dir, .. } if *dir == file), "{e:?}");
        std::fs::create_dir_all(&path).unwrap();
        let e = write_baseline(&run, &path).unwrap_err();
        assert!(matches!(&e, BaselineWriteError::Write { path: p, .. } if *p == path), "{e:?}");
        std::fs::remove_dir(&path).unwrap();
        write_baseline(&run, &path).unwrap();
    }
}
