//! The content digest of a build's source tree: every regular file's relative path and sha256, every symlink's
//! path and target, in path order. File hashes are remembered by (size, mtime, inode) in a memo file in the build
//! directory, so an unchanged tree costs one walk and no reads.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// No source tree may hold more entries than this (a wrong `source` such as the manifest root must fail, not
/// walk a disk).
const MAX_ENTRIES: usize = 400_000;

/// `(size, mtime_ns, inode) → sha256` per relative path.
type Memo = BTreeMap<String, (u64, i128, u64, String)>;

/// Why a source tree has no digest.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("source `{}`: {source}", dir.display())]
    ReadDir { dir: PathBuf, source: std::io::Error },
    #[error("source `{}` holds more than {max} entries", root.display())]
    TooManyEntries { root: PathBuf, max: usize },
    /// One entry's metadata, link target or content could not be read.
    #[error("{}: {source}", path.display())]
    Entry { path: PathBuf, source: std::io::Error },
}

/// Digest of `root`, leaving out `exclude` (the build directory, when it lies inside the source).
pub fn tree_digest(root: &Path, exclude: &Path, memo_path: &Path) -> Result<String, SourceError> {
    let old: Memo = crate::util::bounded::read_bytes(memo_path, crate::util::bounded::RECORD_CAP)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    let mut new: Memo = BTreeMap::new();
    let mut lines: Vec<String> = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = stack.pop() {
        let unlisted = |source| SourceError::ReadDir { dir: dir.clone(), source };
        let entries = std::fs::read_dir(&dir).map_err(unlisted)?;
        for entry in entries {
            let entry = entry.map_err(unlisted)?;
            seen += 1;
            if seen > MAX_ENTRIES {
                return Err(SourceError::TooManyEntries { root: root.to_owned(), max: MAX_ENTRIES });
            }
            let path = entry.path();
            if path == exclude {
                continue;
            }
            let rel = path.strip_prefix(root).unwrap_or(&path).to_string_lossy().into_owned();
            let unread = |source| SourceError::Entry { path: path.clone(), source };
            let meta = std::fs::symlink_metadata(&path).map_err(unread)?;
            if meta.is_dir() {
                stack.push(path);
            } else if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).map_err(unread)?;
                lines.push(format!("l\0{rel}\0{}", target.display()));
            } else if meta.is_file() {
                let stamp = (meta.len(), meta.mtime() as i128 * 1_000_000_000 + meta.mtime_nsec() as i128, meta.ino());
                let sha = match old.get(&rel) {
                    Some((s, m, i, sha)) if (*s, *m, *i) == stamp => sha.clone(),
                    _ => crate::util::sha256_file(&path).map_err(unread)?,
                };
                lines.push(format!("f\0{rel}\0{sha}"));
                new.insert(rel, (stamp.0, stamp.1, stamp.2, sha));
            }
        }
    }
    lines.sort();
    let mut h = Sha256::new();
    for l in &lines {
        h.update(l.as_bytes());
        h.update(b"\n");
    }
    if new != old
        && let Ok(bytes) = serde_json::to_vec(&new)
    {
        // A memo that cannot be written only costs a re-hash next time.
        let _ = crate::util::write_atomic(memo_path, &bytes);
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_source_is_a_read_dir_error_naming_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let absent = dir.path().join("absent");
        match tree_digest(&absent, &dir.path().join("build"), &dir.path().join("memo.json")) {
            Err(SourceError::ReadDir { dir, source }) => {
                assert_eq!((dir, source.kind()), (absent, std::io::ErrorKind::NotFound));
            }
            other => panic!("expected ReadDir, got {other:?}"),
        }
    }
}
