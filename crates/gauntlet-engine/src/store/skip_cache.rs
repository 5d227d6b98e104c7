//! Skip-cache: a clean pass is remembered by everything that could change its outcome, so re-running the gate on
//! an unchanged tree is nearly free. A warn is never remembered: it must show again. Entries are keyed by content
//! and live outside the checkout, so pull-request code cannot plant a pass.

use std::path::{Path, PathBuf};

use gauntlet_schema::{RunRecord, Verdict, parse_run_record};
use serde_json::json;

use crate::identity::{Identity, canonical};
use crate::manifest::{Profile, Target};
use crate::util::{sha256_file, sha256_hex, write_atomic};

/// The parts of the key, recorded beside the entry so a hit can say why it matched.
#[derive(Debug, Clone)]
pub struct CacheKey {
    pub source_tree: String,
    pub identity_digest: String,
    pub model_stat: String,
    pub runtime: String,
    pub baseline_digest: String,
    pub gauntlet_version: String,
}

impl CacheKey {
    /// The key's parts as canonical JSON: hashed into the entry's name, and written beside it.
    fn canonical(&self) -> String {
        canonical(&json!({
            "source_tree": self.source_tree,
            "identity": self.identity_digest,
            "model": self.model_stat,
            "runtime": self.runtime,
            "baseline": self.baseline_digest,
            "gauntlet": self.gauntlet_version,
        }))
    }

    pub fn digest(&self) -> String {
        sha256_hex(self.canonical().as_bytes())
    }
}

/// Why the source tree under test has no hash (so no run can be reused).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SourceTreeError {
    #[error("`{}` is not a git work tree: --source needs one", dir.display())]
    NotAWorkTree { dir: PathBuf },
    /// A dirty tree whose files git would not list (it failed, timed out or wrote past its cap).
    #[error("cannot list files of `{}`", dir.display())]
    CannotList { dir: PathBuf },
}

impl CacheKey {
    /// The key of a run of `profile` (whose identity is `identity`) on the source tree in `source`, compared with
    /// the baseline of digest `baseline_digest` (`none` without one).
    pub fn for_run(
        profile: &Profile,
        identity: &Identity,
        source: &Path,
        baseline_digest: &str,
    ) -> Result<CacheKey, SourceTreeError> {
        Ok(CacheKey {
            source_tree: source_tree_hash(source)?,
            identity_digest: identity.digest.clone(),
            model_stat: match &profile.target {
                Target::Spawn(s) => model_stat(&s.model.path),
                Target::Attach(a) => a.base_url.clone(),
            },
            runtime: canonical(&identity.runtime),
            baseline_digest: baseline_digest.to_owned(),
            gauntlet_version: env!("CARGO_PKG_VERSION").into(),
        })
    }
}

/// A hit: the remembered record and report.
pub struct Hit {
    pub record: RunRecord,
    pub report: String,
    pub dir: PathBuf,
}

pub fn lookup(cache: &Path, key: &CacheKey) -> Option<Hit> {
    let dir = cache.join(key.digest());
    use crate::util::bounded::{RECORD_CAP, read_text};
    let record = parse_run_record(&read_text(&dir.join("run.json"), RECORD_CAP).ok()?).ok()?;
    // Belt and braces: only a pass is ever written, and only a pass is ever reused.
    if record.verdict != Verdict::Pass {
        return None;
    }
    let report = read_text(&dir.join("report.md"), RECORD_CAP).ok()?;
    Some(Hit { record, report, dir })
}

/// Remembers a run; returns false (and writes nothing) unless it is a clean pass.
pub fn remember(cache: &Path, key: &CacheKey, record: &RunRecord, report: &str) -> std::io::Result<bool> {
    if record.verdict != Verdict::Pass {
        return Ok(false);
    }
    let dir = cache.join(key.digest());
    std::fs::create_dir_all(&dir)?;
    write_atomic(&dir.join("report.md"), report.as_bytes())?;
    write_atomic(&dir.join("key.json"), key.canonical().as_bytes())?;
    // run.json last: its presence is what makes the entry visible.
    write_atomic(&dir.join("run.json"), &serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?)?;
    Ok(true)
}

/// The tree hash of the source under test: git's tree id for a clean checkout; for a dirty one (or no git), a
/// digest of every tracked and untracked-but-not-ignored file's path and content.
pub fn source_tree_hash(dir: &Path) -> Result<String, SourceTreeError> {
    // Bounded in time and size (`run_bounded_bytes`): a git that hangs on a lock must not hang the gate.
    let git = |args: &[&str]| -> Option<Vec<u8>> {
        let mut all: Vec<&std::ffi::OsStr> = vec!["-C".as_ref(), dir.as_os_str()];
        all.extend(args.iter().map(std::ffi::OsStr::new));
        crate::util::run_bounded_bytes("git", &all, 256 << 20).ok()
    };
    if git(&["rev-parse", "--is-inside-work-tree"]).is_some() {
        let dirty = git(&["status", "--porcelain"]).map(|o| !o.is_empty()).unwrap_or(true);
        if !dirty && let Some(tree) = git(&["rev-parse", "HEAD^{tree}"]) {
            return Ok(format!("git-tree:{}", String::from_utf8_lossy(&tree).trim()));
        }
        let list = git(&["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
            .ok_or_else(|| SourceTreeError::CannotList { dir: dir.to_owned() })?;
        let mut files: Vec<&[u8]> = list.split(|b| *b == 0).filter(|p| !p.is_empty()).collect();
        files.sort();
        files.dedup();
        let mut acc = String::new();
        for f in files {
            let rel = String::from_utf8_lossy(f);
            let path = dir.join(rel.as_ref());
            // A tracked file deleted in the working tree hashes as absent.
            let digest = sha256_file(&path).unwrap_or_else(|_| "absent".into());
            acc.push_str(&format!("{rel}\0{digest}\n"));
        }
        return Ok(format!("worktree:{}", sha256_hex(acc.as_bytes())));
    }
    Err(SourceTreeError::NotAWorkTree { dir: dir.to_owned() })
}

/// Size, mtime and inode: cheap, and changes whenever the file is replaced.
pub fn model_stat(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(path) {
        Ok(m) => format!("{}:{}:{}.{}", m.ino(), m.len(), m.mtime(), m.mtime_nsec()),
        Err(e) => format!("unreadable: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_outside_any_work_tree_is_not_a_work_tree() {
        // A fresh temporary folder lies outside this repository.
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(source_tree_hash(dir.path()), Err(SourceTreeError::NotAWorkTree { dir: dir.path().to_owned() }));
    }
}
