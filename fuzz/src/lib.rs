//! What the fuzz targets share: the multi-file input format of the targets that read a folder (the store, a
//! qualification bundle) and a scratch folder on tmpfs that each run empties and fills again.
//!
//! A multi-file input is a sequence of sections, each a line `@@ NAME` followed by the file's bytes:
//!
//! ```text
//! @@ qualification.json
//! {"qualification_version": 1, …}
//! @@ profile.snapshot.json
//! {…}
//! ```
//!
//! Bytes before the first section are ignored. A name is kept only when it is a plain relative name (letters,
//! digits, `.`, `_`, `-`; at most `max_depth` `/`-separated parts, none `.` or `..`), so the fuzzer never writes
//! outside the scratch folder.

use std::path::{Path, PathBuf};

/// At most this many files per input: more would only slow a run down.
const MAX_FILES: usize = 32;

/// The files an input describes, in order; a later file of the same name replaces an earlier one when written.
pub fn sections(data: &[u8], max_depth: usize) -> Vec<(String, &[u8])> {
    let mut out = Vec::new();
    // Find each `@@ ` that starts a line.
    let mut starts = Vec::new();
    let mut at = 0;
    while at < data.len() {
        if (at == 0 || data[at - 1] == b'\n') && data[at..].starts_with(b"@@ ") {
            starts.push(at);
        }
        at += 1;
    }
    starts.push(data.len());
    for w in starts.windows(2) {
        let section = &data[w[0] + 3..w[1]];
        let (name, body) = match section.iter().position(|b| *b == b'\n') {
            Some(nl) => (&section[..nl], &section[nl + 1..]),
            None => (section, &section[section.len()..]),
        };
        // The newline that precedes the next `@@ ` belongs to the format, not to the file.
        let body = if w[1] < data.len() { body.strip_suffix(b"\n").unwrap_or(body) } else { body };
        if let Some(name) = plain_name(name, max_depth) {
            out.push((name, body));
        }
        if out.len() == MAX_FILES {
            break;
        }
    }
    out
}

fn plain_name(raw: &[u8], max_depth: usize) -> Option<String> {
    let name = std::str::from_utf8(raw).ok()?.trim_end_matches('\r');
    let parts: Vec<&str> = name.split('/').collect();
    let plain = |p: &&str| {
        !p.is_empty()
            && p.len() <= 100
            && *p != "."
            && *p != ".."
            && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    };
    (parts.len() <= max_depth && parts.iter().all(plain)).then(|| name.to_owned())
}

/// A folder of this process on tmpfs (`/dev/shm` when it exists), emptied by [`Scratch::fresh`].
pub struct Scratch {
    dir: PathBuf,
}

impl Scratch {
    pub fn new(what: &str) -> Scratch {
        let base = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
        let dir = base.join(format!("gauntlet-fuzz-{what}-{}", std::process::id()));
        Scratch { dir }
    }

    /// The folder, empty.
    pub fn fresh(&self) -> &Path {
        let _ = std::fs::remove_dir_all(&self.dir);
        std::fs::create_dir_all(&self.dir).expect("create the scratch folder");
        &self.dir
    }

    /// Writes `files` under `root` (creating their folders); names were checked by [`sections`].
    pub fn write(root: &Path, files: &[(String, &[u8])]) {
        for (name, body) in files {
            let path = root.join(name);
            if let Some(parent) = path.parent() {
                let _ = std::fs::create_dir_all(parent);
            }
            // A name that is already a folder (`a` then `a/b`) cannot also be a file: skip it.
            let _ = std::fs::write(&path, body);
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_split_on_marker_lines() {
        let s = sections(b"junk\n@@ a.json\n{}\n@@ b/c.jsonl\nx\ny\n@@ ../evil\nz\n@@ d", 2);
        let names: Vec<&str> = s.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["a.json", "b/c.jsonl", "d"]);
        assert_eq!(s[0].1, b"{}");
        assert_eq!(s[1].1, b"x\ny");
        assert_eq!(s[2].1, b"");
        assert!(sections(b"@@ a/b\nx", 1).is_empty());
    }
}
