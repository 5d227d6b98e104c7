//! The baseline store: a directory of content-addressed run records and one append-only, hash-chained history
//! per identity.
//!
//! ```text
//! STORE/format.json                  {"format": 2}
//! STORE/records/<sha256>.json        run records and qualification decisions, named by the sha256 of their
//!                                    bytes; never modified
//! STORE/history/<identity>.jsonl     one promotion per line, each naming the previous line's digest
//! STORE/.lock                        short-lived exclusive lock held by every writer
//! ```
//! Every write is atomic (temp file, fsync, rename) and happens under the lock, so two concurrent promoters never
//! interleave and a reader never sees a partial file. Nothing in a store is trusted on read: names are checked
//! before they become paths, and digests are re-computed.
//!
//! Format 2 added qualification decisions: a history entry with `"kind": "qualification"` names a [`Decision`]
//! instead of a run record. Format-1 stores are read as they are; the first decision written into one marks it
//! format 2, so an older gauntlet refuses it instead of misreading it.

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use gauntlet_schema::store::{
    DECISION_VERSION, Decision, DecisionStage, HistoryEntry, KIND_QUALIFICATION, Provenance, STORE_FORMAT,
};
use gauntlet_schema::upgrade::{StoreFormatError, parse_decision, parse_store_format};
use gauntlet_schema::{IdentityRecord, RunRecord, parse_run_record};
use serde_json::Value;

use crate::identity::canonical;
use crate::util::bounded::{self, RECORD_CAP, ReadError, SMALL_CAP};
use crate::util::{sha256_hex, write_atomic};

const LOCK_WAIT: Duration = Duration::from_secs(30);

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("store `{path}`: {reason}")]
    Io { path: PathBuf, reason: String },
    #[error("store `{path}` has format {found}; this gauntlet writes format {STORE_FORMAT}: upgrade gauntlet")]
    Newer { path: PathBuf, found: u32 },
    #[error("store `{path}`: could not take the lock within {}s (another gauntlet is writing)", LOCK_WAIT.as_secs())]
    Locked { path: PathBuf },
    #[error("store `{path}`: its lock `.lock` is not a regular file ({reason}); remove it if no gauntlet is running")]
    BadLock { path: PathBuf, reason: String },
    #[error("store: {0}")]
    Invalid(String),
}

fn io(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Io { path: path.to_owned(), reason: e.to_string() }
}

/// The sha256 of a history entry's canonical JSON without `digest`: what its `digest` and the next entry's
/// `prev` must say.
pub fn entry_digest(entry: &HistoryEntry) -> String {
    sha256_hex(canonical(&entry.digest_input()).as_bytes())
}

#[derive(Debug, Clone)]
pub struct Store {
    root: PathBuf,
}

fn is_digest(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

impl Store {
    /// Opens (creating when absent) a store for reading and writing; refuses a store of a newer format.
    pub fn open(root: &Path) -> Result<Store, StoreError> {
        for dir in [root.to_path_buf(), root.join("records"), root.join("history")] {
            std::fs::create_dir_all(&dir).map_err(|e| io(&dir, e))?;
        }
        // The store is untrusted: its folders are its own, not symlinks that lead elsewhere.
        for dir in [root.join("records"), root.join("history")] {
            if !bounded::is_real_dir(&dir) {
                return Err(io(&dir, "not a directory of the store (a symlink?); refused"));
            }
        }
        let store = Store { root: root.to_owned() };
        let format = root.join("format.json");
        match bounded::read_text(&format, SMALL_CAP) {
            Ok(text) => match parse_store_format(&text) {
                Ok(0) => return Err(io(&format, "format 0 is not a store format")),
                Ok(_) => {}
                Err(StoreFormatError::Newer(found)) => {
                    return Err(StoreError::Newer { path: root.to_owned(), found });
                }
                Err(StoreFormatError::Malformed(e)) => return Err(io(&format, e)),
            },
            Err(e) if !e.is_not_found() => return Err(io(&format, e)),
            Err(_) => {
                let _lock = store.lock()?;
                if !format.exists() {
                    store.write_format()?;
                }
            }
        }
        Ok(store)
    }

    /// Marks the store as written in this gauntlet's format (call under the lock).
    fn write_format(&self) -> Result<(), StoreError> {
        let format = self.root.join("format.json");
        // The bytes earlier versions wrote (`gauntlet_schema::store::StoreFormat` reads them).
        write_atomic(&format, format!("{{\"format\": {STORE_FORMAT}}}\n").as_bytes()).map_err(|e| io(&format, e))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// An exclusive lock on `STORE/.lock`, released when the guard drops. Waits (bounded) for another writer.
    /// The lock file is opened without blocking and without following a symlink, and must be a regular file: a
    /// FIFO in its place would otherwise hang the open itself, before any deadline applies.
    fn lock(&self) -> Result<File, StoreError> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = self.root.join(".lock");
        let bad = |reason: String| StoreError::BadLock { path: self.root.clone(), reason };
        let f = File::options()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(&path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => bad("a symbolic link".into()),
                Some(libc::ENXIO) => bad("a FIFO or device".into()),
                _ => io(&path, e),
            })?;
        match f.metadata() {
            Ok(m) if m.file_type().is_file() => {}
            Ok(m) => return Err(bad(format!("{:?}", m.file_type()))),
            Err(e) => return Err(io(&path, e)),
        }
        let deadline = Instant::now() + LOCK_WAIT;
        loop {
            // SAFETY: flock on a valid, owned file descriptor has no memory-safety preconditions.
            let rc = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
            if rc == 0 {
                return Ok(f);
            }
            if Instant::now() >= deadline {
                return Err(StoreError::Locked { path: self.root.clone() });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn record_path(&self, digest: &str) -> Result<PathBuf, StoreError> {
        if !is_digest(digest) {
            return Err(StoreError::Invalid(format!("`{digest}` is not a record digest")));
        }
        Ok(self.root.join("records").join(format!("{digest}.json")))
    }

    fn history_path(&self, identity: &str) -> Result<PathBuf, StoreError> {
        if !is_digest(identity) {
            return Err(StoreError::Invalid(format!("`{identity}` is not an identity digest")));
        }
        Ok(self.root.join("history").join(format!("{identity}.jsonl")))
    }

    /// A record's text, after checking that its bytes still have `digest`.
    fn read_text(&self, digest: &str) -> Result<(PathBuf, String), StoreError> {
        let path = self.record_path(digest)?;
        let bytes = bounded::read_bytes(&path, RECORD_CAP).map_err(|e| io(&path, e))?;
        let actual = sha256_hex(&bytes);
        if actual != digest {
            return Err(io(&path, format!("content digest is {actual}, not {digest}: the record was modified")));
        }
        let text = String::from_utf8(bytes).map_err(|e| io(&path, e))?;
        Ok((path, text))
    }

    /// Reads a run record by digest and checks that its bytes still have that digest.
    pub fn read_record(&self, digest: &str) -> Result<RunRecord, StoreError> {
        let (path, text) = self.read_text(digest)?;
        parse_run_record(&text).map_err(|e| io(&path, e))
    }

    /// Reads a qualification decision by digest, checked like a run record.
    pub fn read_decision(&self, digest: &str) -> Result<Decision, StoreError> {
        let (path, text) = self.read_text(digest)?;
        parse_decision(&text).map_err(|e| io(&path, e))
    }

    /// The history of one identity, oldest first, parsed but not verified (see [`Store::verify`]).
    pub fn history(&self, identity: &str) -> Result<Vec<HistoryEntry>, StoreError> {
        let path = self.history_path(identity)?;
        let text = match bounded::read_text(&path, RECORD_CAP) {
            Ok(t) => t,
            Err(ReadError::NotFound) => return Ok(Vec::new()),
            Err(e) => return Err(io(&path, e)),
        };
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| serde_json::from_str(l).map_err(|e| io(&path, format!("line {}: {e}", i + 1))))
            .collect()
    }

    /// The newest gate-run promotion for an identity, with its record.
    pub fn latest(&self, identity: &str) -> Result<Option<(HistoryEntry, RunRecord)>, StoreError> {
        let Some(entry) = self.history(identity)?.into_iter().rev().find(|e| !e.is_qualification()) else {
            return Ok(None);
        };
        let record = self.read_record(&entry.record)?;
        Ok(Some((entry, record)))
    }

    /// The newest qualification decision for an identity.
    pub fn latest_decision(&self, identity: &str) -> Result<Option<(HistoryEntry, Decision)>, StoreError> {
        let Some(entry) = self.history(identity)?.into_iter().rev().find(HistoryEntry::is_qualification) else {
            return Ok(None);
        };
        let decision = self.read_decision(&entry.record)?;
        Ok(Some((entry, decision)))
    }

    /// The newest promotion of a profile name under any identity other than `except`: what a run of a changed
    /// configuration would have compared with, so it can say why it has no baseline.
    pub fn latest_of_profile(
        &self,
        profile: &str,
        except: &str,
    ) -> Result<Option<(HistoryEntry, RunRecord)>, StoreError> {
        let mut newest: Option<HistoryEntry> = None;
        for id in self.identities()? {
            if id == except {
                continue;
            }
            if let Some(last) = self.history(&id)?.into_iter().rev().find(|e| !e.is_qualification())
                && last.profile == profile
                && newest.as_ref().is_none_or(|n| last.promoted_at > n.promoted_at)
            {
                newest = Some(last);
            }
        }
        match newest {
            Some(entry) => {
                let record = self.read_record(&entry.record)?;
                Ok(Some((entry, record)))
            }
            None => Ok(None),
        }
    }

    /// Identity digests that have a history.
    pub fn identities(&self) -> Result<Vec<String>, StoreError> {
        let dir = self.root.join("history");
        let mut out: Vec<String> = std::fs::read_dir(&dir)
            .map_err(|e| io(&dir, e))?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.strip_suffix(".jsonl").map(str::to_owned))
            .filter(|n| is_digest(n))
            .collect();
        out.sort();
        Ok(out)
    }

    /// Stores `record` and appends a promotion to its identity's history, atomically and under the lock.
    pub fn promote(&self, record: &RunRecord, provenance: Provenance, note: &str) -> Result<HistoryEntry, StoreError> {
        if crate::identity::identity_digest(&record.identity) != record.identity_digest {
            return Err(StoreError::Invalid(
                "the run record's identity does not match its identity digest (edited record?)".into(),
            ));
        }
        let bytes = serde_json::to_vec_pretty(record).map_err(|e| StoreError::Invalid(e.to_string()))?;
        let head = Head {
            kind: None,
            identity: &record.identity,
            identity_digest: &record.identity_digest,
            profile: &record.profile,
            verdict: record.verdict.as_str(),
        };
        self.append(head, &bytes, provenance, note)
    }

    /// Stores a reviewed qualification decision and appends it to its identity's history; marks the store format 2.
    pub fn promote_decision(
        &self,
        decision: &Decision,
        provenance: Provenance,
        note: &str,
    ) -> Result<HistoryEntry, StoreError> {
        if crate::identity::identity_digest(&decision.identity) != decision.identity_digest
            || decision.performance.identity_digest != decision.identity_digest
        {
            return Err(StoreError::Invalid(
                "the decision's identity, its digest and its performance record's identity do not agree".into(),
            ));
        }
        let bytes = serde_json::to_vec_pretty(decision).map_err(|e| StoreError::Invalid(e.to_string()))?;
        let head = Head {
            kind: Some(KIND_QUALIFICATION),
            identity: &decision.identity,
            identity_digest: &decision.identity_digest,
            profile: &decision.profile,
            verdict: decision.verdict.as_str(),
        };
        self.append(head, &bytes, provenance, note)
    }

    fn append(&self, head: Head, bytes: &[u8], provenance: Provenance, note: &str) -> Result<HistoryEntry, StoreError> {
        // Redacted before it is named: the name must be the digest of the bytes that are written.
        let bytes = crate::util::redact::bytes(bytes);
        let bytes = bytes.as_ref();
        // A record the store's own readers cannot read back (a number written as `null`, JSON nested past the
        // reader's limit) would make every later read of this identity fail: refused here, the store unchanged.
        let text = std::str::from_utf8(bytes).map_err(|e| StoreError::Invalid(e.to_string()))?;
        let reads = match head.kind {
            Some(_) => parse_decision(text).map(drop),
            None => parse_run_record(text).map(drop),
        };
        if let Err(e) = reads {
            return Err(StoreError::Invalid(format!(
                "refused to promote: the record would not read back ({e}); the store keeps its earlier baselines"
            )));
        }
        let digest = sha256_hex(bytes);
        let _lock = self.lock()?;
        // Under the lock no other writer is at work: a temporary file now is one an interrupted writer left.
        self.remove_temporaries();
        if head.kind.is_some() {
            // Entries with a kind are format 2: an older gauntlet must refuse the store rather than misread it.
            self.write_format()?;
        }
        let record_path = self.record_path(&digest)?;
        if !record_path.exists() {
            write_atomic(&record_path, bytes).map_err(|e| io(&record_path, e))?;
        }
        let history_path = self.history_path(head.identity_digest)?;
        let history = self.history(head.identity_digest)?;
        let last = history.last();
        let seq = match last {
            None => 1,
            Some(e) => e.seq.checked_add(1).ok_or_else(|| {
                io(&history_path, format!("sequence number {} cannot be followed (edited history?)", e.seq))
            })?,
        };
        let mut entry = HistoryEntry {
            seq,
            prev: last.map(|e| e.digest.clone()),
            kind: head.kind.map(str::to_owned),
            identity_digest: head.identity_digest.to_owned(),
            recipe_digest: crate::identity::recipe_digest(head.identity),
            record: digest,
            profile: head.profile.to_owned(),
            verdict: head.verdict.to_owned(),
            provenance,
            note: note.to_owned(),
            promoted_at: crate::util::now_rfc3339(),
            digest: String::new(),
        };
        entry.digest = entry_digest(&entry);
        let mut text = match bounded::read_bytes(&history_path, RECORD_CAP) {
            Ok(t) => t,
            Err(ReadError::NotFound) => Vec::new(),
            Err(e) => return Err(io(&history_path, e)),
        };
        if !text.is_empty() && !text.ends_with(b"\n") {
            text.push(b'\n');
        }
        text.extend_from_slice(canonical(&serde_json::to_value(&entry).unwrap_or(Value::Null)).as_bytes());
        text.push(b'\n');
        write_atomic(&history_path, &text).map_err(|e| io(&history_path, e))?;
        Ok(entry)
    }

    /// Latest entries of other identities with the same recipe (the same model and server on other devices).
    pub fn paired(&self, entry: &HistoryEntry) -> Result<Vec<HistoryEntry>, StoreError> {
        let mut out = Vec::new();
        for id in self.identities()? {
            if id == entry.identity_digest {
                continue;
            }
            if let Some(last) = self.history(&id)?.into_iter().rev().find(|e| e.kind == entry.kind)
                && last.recipe_digest == entry.recipe_digest
            {
                out.push(last);
            }
        }
        Ok(out)
    }

    /// The temporary files of atomic writes (`.NAME.tmp-PID`) in `history/` and `records/`, as paths relative to the
    /// store: left by a writer that was killed (SIGKILL, a power cut) between creating and renaming one. They are
    /// never part of the store: readers and `verify` ignore them, and the next promotion removes them.
    pub fn temporaries(&self) -> Vec<String> {
        let mut out = Vec::new();
        for sub in ["history", "records"] {
            let Ok(dir) = std::fs::read_dir(self.root.join(sub)) else { continue };
            for entry in dir.flatten() {
                if let Some(name) = entry.file_name().to_str().filter(|n| crate::util::is_temporary_name(n)) {
                    out.push(format!("{sub}/{name}"));
                }
            }
        }
        out.sort();
        out
    }

    /// Removes [`Store::temporaries`] (call under the lock). Best effort: one that cannot be removed stays ignored.
    fn remove_temporaries(&self) {
        for rel in self.temporaries() {
            let path = self.root.join(&rel);
            // Never through a link, never a directory: only a plain file of that name goes.
            if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_file()) {
                let _ = std::fs::remove_file(&path);
            }
        }
    }

    /// Walks every history chain and every record it names; returns every problem found (empty = intact). The
    /// temporary files an interrupted writer may leave are not problems ([`Store::temporaries`] lists them).
    pub fn verify(&self) -> Result<(usize, Vec<String>), StoreError> {
        let mut problems = Vec::new();
        let mut entries = 0;
        // A record promoted many times is read and hashed once: record digest → its recomputed identity digest.
        let mut checked: std::collections::HashMap<String, Result<(String, String), String>> =
            std::collections::HashMap::new();
        let dir = self.root.join("history");
        let mut files: Vec<PathBuf> =
            std::fs::read_dir(&dir).map_err(|e| io(&dir, e))?.flatten().map(|e| e.path()).collect();
        files.sort();
        for path in files {
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("?").to_owned();
            if crate::util::is_temporary_name(&name) {
                continue;
            }
            let Some(key) = name.strip_suffix(".jsonl").filter(|k| is_digest(k)) else {
                problems.push(format!("history/{name}: not a history file name"));
                continue;
            };
            let text = match bounded::read_text(&path, RECORD_CAP) {
                Ok(t) => t,
                Err(e) => {
                    problems.push(format!("history/{name}: {e}"));
                    continue;
                }
            };
            let mut prev: Option<String> = None;
            for (i, line) in text.lines().enumerate() {
                let at = format!("history/{name} line {}", i + 1);
                entries += 1;
                let entry: HistoryEntry = match serde_json::from_str(line) {
                    Ok(e) => e,
                    Err(e) => {
                        problems.push(format!("{at}: not a history entry ({e})"));
                        prev = None;
                        continue;
                    }
                };
                if entry_digest(&entry) != entry.digest {
                    problems.push(format!("{at}: entry was edited (its digest does not match its content)"));
                }
                if usize::try_from(entry.seq).ok() != i.checked_add(1) {
                    problems.push(format!(
                        "{at}: sequence {} where {} was expected (entry deleted or reordered)",
                        entry.seq,
                        i + 1
                    ));
                }
                if entry.prev != prev {
                    problems.push(format!("{at}: chain broken: previous digest does not match the line before (entry edited, deleted or reordered)"));
                }
                if entry.identity_digest != key {
                    problems
                        .push(format!("{at}: entry is for identity {} but stored under {key}", entry.identity_digest));
                }
                let outcome = checked.entry(entry.record.clone()).or_insert_with(|| {
                    if entry.is_qualification() {
                        self.read_decision(&entry.record)
                            .map(|d| (d.identity_digest.clone(), crate::identity::identity_digest(&d.identity)))
                            .map_err(|e| e.to_string())
                    } else {
                        self.read_record(&entry.record)
                            .map(|r| (r.identity_digest.clone(), crate::identity::identity_digest(&r.identity)))
                            .map_err(|e| e.to_string())
                    }
                });
                match outcome {
                    Ok((claimed, recomputed)) => {
                        if claimed != key || recomputed != key {
                            problems.push(format!(
                                "{at}: identity key {key} reused with different settings (record {} has identity {recomputed})",
                                entry.record
                            ));
                        }
                    }
                    Err(e) => problems.push(format!("{at}: record {}: {e}", entry.record)),
                }
                prev = Some(entry.digest.clone());
            }
        }
        Ok((entries, problems))
    }
}

/// What a history entry says of the record it promotes.
struct Head<'a> {
    kind: Option<&'a str>,
    identity: &'a IdentityRecord,
    identity_digest: &'a str,
    profile: &'a str,
    verdict: &'a str,
}
