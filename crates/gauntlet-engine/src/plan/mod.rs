//! Changed paths → the profiles worth running. A model-specific prefix selects its profile, a shared prefix
//! selects all, anything else selects none; a very large change selects all (it is cheaper than being wrong).

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::Path;

use serde_json::json;

use crate::manifest::PathTable;

/// At this many changed files every profile runs.
pub const ALL_AT: usize = 300;

#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    pub profiles: Vec<String>,
    /// One line per reason, for people reading CI logs.
    pub reasons: Vec<String>,
}

pub fn select(table: &PathTable, all: &[String], changed: &[String], fallback_all: bool) -> Selection {
    let mut chosen = BTreeSet::new();
    let mut reasons = Vec::new();
    let everything = |reasons: &mut Vec<String>, why: String| {
        reasons.push(why);
        Selection { profiles: all.to_vec(), reasons: reasons.clone() }
    };
    if changed.len() >= ALL_AT {
        return everything(&mut reasons, format!("{} changed files (≥ {ALL_AT}): all profiles", changed.len()));
    }
    for path in changed {
        let path = path.trim_start_matches("./");
        if let Some(prefix) = table.shared.iter().find(|p| path.starts_with(p.as_str())) {
            return everything(&mut reasons, format!("`{path}` is under shared prefix `{prefix}`: all profiles"));
        }
        for (profile, prefixes) in &table.profiles {
            if let Some(prefix) = prefixes.iter().find(|p| path.starts_with(p.as_str()))
                && chosen.insert(profile.clone())
            {
                reasons.push(format!("`{path}` is under `{prefix}`: {profile}"));
            }
        }
    }
    if chosen.is_empty() && fallback_all {
        return everything(&mut reasons, "no changed path selected a profile; --fallback-all: all profiles".into());
    }
    if chosen.is_empty() {
        reasons.push(format!("none of {} changed path(s) concerns a profile", changed.len()));
    }
    Selection { profiles: chosen.into_iter().collect(), reasons }
}

/// The most bytes of changed paths read from git: hundreds of thousands of paths.
const GIT_OUTPUT_CAP: usize = 64 << 20;

/// Why [`changed_since`] has no list of paths.
#[derive(Debug, thiserror::Error)]
pub enum ChangedError {
    /// A revision that git would read as an option (`--output=…`): refused before git runs.
    #[error("`{rev}` is not a revision")]
    NotARevision { rev: String },
    #[error("git diff {range} failed: {source}")]
    Git { range: String, source: crate::util::HelperError },
}

/// Paths changed between `since` and `until` (default HEAD) in the git repository at `repo`, by a git bounded
/// in time ([`crate::util::HELPER_TIMEOUT`]) and in output.
pub fn changed_since(repo: &Path, since: &str, until: Option<&str>) -> Result<Vec<String>, ChangedError> {
    for rev in std::iter::once(since).chain(until) {
        if rev.starts_with('-') {
            return Err(ChangedError::NotARevision { rev: rev.to_owned() });
        }
    }
    let range = format!("{since}..{}", until.unwrap_or("HEAD"));
    let mut args: Vec<&OsStr> = vec![OsStr::new("-C"), repo.as_os_str()];
    args.extend(["diff", "--name-only", "-z", range.as_str(), "--"].map(OsStr::new));
    // Bounded in time (a git waiting on a lock or a slow filesystem) and in size.
    let out = crate::util::run_bounded_bytes("git", &args, GIT_OUTPUT_CAP)
        .map_err(|source| ChangedError::Git { range: range.clone(), source })?;
    Ok(out.split(|b| *b == 0).filter(|p| !p.is_empty()).map(|p| String::from_utf8_lossy(p).into_owned()).collect())
}

/// A GitHub Actions matrix: `{"include": [{"profile": "…"}, …]}`.
/// A GitHub Actions matrix: one entry per profile with the runner labels its job needs (`runs-on`).
pub fn github_matrix(profiles: &[(String, Vec<String>)]) -> String {
    json!({"include": profiles.iter().map(|(p, runner)| json!({"profile": p, "runner": runner})).collect::<Vec<_>>()})
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn table() -> PathTable {
        PathTable {
            shared: vec!["server/core/".into(), "CMakeLists.txt".into()],
            profiles: BTreeMap::from([
                ("qwen".into(), vec!["server/models/qwen/".into()]),
                ("ds4".into(), vec!["server/models/ds4/".into(), "configs/ds4.toml".into()]),
            ]),
        }
    }

    fn all() -> Vec<String> {
        vec!["ds4".into(), "qwen".into()]
    }

    #[test]
    fn prefixes_select_profiles() {
        let s = select(&table(), &all(), &["server/models/qwen/attn.cu".into(), "README.md".into()], false);
        assert_eq!(s.profiles, vec!["qwen"]);
        let s = select(&table(), &all(), &["configs/ds4.toml".into(), "server/models/qwen/x".into()], false);
        assert_eq!(s.profiles, vec!["ds4", "qwen"]);
        let s = select(&table(), &all(), &["server/core/sched.cpp".into()], false);
        assert_eq!(s.profiles, all());
        assert!(s.reasons[0].contains("shared prefix"));
    }

    #[test]
    fn unrelated_paths_select_none_unless_fallback() {
        let s = select(&table(), &all(), &["docs/intro.md".into()], false);
        assert!(s.profiles.is_empty());
        let s = select(&table(), &all(), &["docs/intro.md".into()], true);
        assert_eq!(s.profiles, all());
    }

    #[test]
    fn three_hundred_files_select_all() {
        let many: Vec<String> = (0..ALL_AT).map(|i| format!("docs/{i}.md")).collect();
        assert_eq!(select(&table(), &all(), &many, false).profiles, all());
        assert!(select(&table(), &all(), &many[..ALL_AT - 1], false).profiles.is_empty());
    }

    #[test]
    fn an_option_as_a_revision_is_refused_and_a_failing_git_is_said_with_its_range() {
        let dir = tempfile::tempdir().unwrap();
        let e = changed_since(dir.path(), "main", Some("--output=/tmp/x")).unwrap_err();
        assert!(matches!(&e, ChangedError::NotARevision { rev } if rev == "--output=/tmp/x"), "{e:?}");
        assert_eq!(e.to_string(), "`--output=/tmp/x` is not a revision");
        // Not a repository: git itself refuses, and the range asked for is kept.
        let e = changed_since(dir.path(), "v1", None).unwrap_err();
        assert!(
            matches!(&e, ChangedError::Git { range, source: crate::util::HelperError::Failed { .. } } if range == "v1..HEAD"),
            "{e:?}"
        );
        assert!(e.to_string().starts_with("git diff v1..HEAD failed: `git` exited with "), "{e}");
    }

    #[test]
    fn matrix_shape() {
        assert_eq!(
            github_matrix(&[("qwen".into(), vec!["self-hosted".into(), "h200".into()])]),
            r#"{"include":[{"profile":"qwen","runner":["self-hosted","h200"]}]}"#
        );
        assert_eq!(github_matrix(&[]), r#"{"include":[]}"#);
    }
}
