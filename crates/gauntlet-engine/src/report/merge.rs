//! `gauntlet report --merge`: the run records of a CI matrix (one shard per profile) folded into one verdict, one
//! Markdown summary and one JUnit file. A shard that is expected and absent, unreadable or duplicated makes the
//! merge fail: silence is never read as a pass.

use std::fmt::Write;
use std::path::{Path, PathBuf};

use gauntlet_schema::{CaseStatus, RunRecord, Severity, SkipRecord, Verdict, parse_run_record};

use super::markdown::{code, text as md};
use crate::util::bounded::{self, RECORD_CAP, SMALL_CAP};

/// One shard as found on disk.
#[derive(Debug, Clone)]
pub enum Shard {
    /// `reused`: the original start time when a skip-cache hit put a remembered pass here (`reused.json`).
    Ran {
        source: PathBuf,
        record: Box<RunRecord>,
        reused: Option<String>,
    },
    Skipped {
        source: PathBuf,
        skip: SkipRecord,
    },
    Unreadable {
        source: PathBuf,
        reason: String,
    },
}

impl Shard {
    fn profile(&self) -> Option<&str> {
        match self {
            Shard::Ran { record, .. } => Some(&record.profile),
            Shard::Skipped { skip, .. } => Some(&skip.profile),
            Shard::Unreadable { .. } => None,
        }
    }

    fn source(&self) -> &Path {
        match self {
            Shard::Ran { source, .. } | Shard::Skipped { source, .. } | Shard::Unreadable { source, .. } => source,
        }
    }
}

/// How deep below each given folder shards are looked for (CI artifacts land as `<dir>/<artifact>/<files>`).
const SEARCH_DEPTH: usize = 4;

/// A path given to `--merge` that is neither a file nor a folder (a shard that is absent is found by [`merge`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{}` does not exist", path.display())]
pub struct CollectError {
    pub path: PathBuf,
}

/// Every `run.json` and `skipped.json` at the given paths (files, or folders searched a few levels down), in a
/// stable order. A folder holding both counts as a run.
pub fn collect(paths: &[PathBuf]) -> Result<Vec<Shard>, CollectError> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_file() {
            files.push(p.clone());
        } else if p.is_dir() {
            find(p, SEARCH_DEPTH, &mut files);
        } else {
            return Err(CollectError { path: p.clone() });
        }
    }
    files.sort();
    files.dedup();
    let ran_dirs: Vec<PathBuf> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n == "run.json"))
        .filter_map(|f| f.parent().map(Path::to_path_buf))
        .collect();
    Ok(files
        .into_iter()
        .filter(|f| {
            !(f.file_name().is_some_and(|n| n == "skipped.json")
                && f.parent().is_some_and(|d| ran_dirs.iter().any(|r| r == d)))
        })
        .map(|f| read(&f))
        .collect())
}

fn find(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let path = e.path();
        let Ok(kind) = e.file_type() else { continue };
        if kind.is_dir() && depth > 0 {
            find(&path, depth - 1, out);
        } else if kind.is_file() && e.file_name().to_str().is_some_and(|n| n == "run.json" || n == "skipped.json") {
            out.push(path);
        }
    }
}

fn read(path: &Path) -> Shard {
    let source = path.to_path_buf();
    // Shards are artifacts of other jobs: bounded, regular files only.
    let text = match bounded::read_text(path, RECORD_CAP) {
        Ok(t) => t,
        Err(e) => return Shard::Unreadable { source, reason: e.to_string() },
    };
    if path.file_name().is_some_and(|n| n == "skipped.json") {
        return match serde_json::from_str::<SkipRecord>(&text) {
            Ok(skip) => Shard::Skipped { source, skip },
            Err(e) => Shard::Unreadable { source, reason: format!("not a skip record: {e}") },
        };
    }
    let reused = path.parent().and_then(|d| bounded::read_text(&d.join("reused.json"), SMALL_CAP).ok()).map(|t| {
        match serde_json::from_str::<gauntlet_schema::store::Reused>(&t) {
            Ok(r) => r.original_started_at,
            Err(_) => "an earlier run".to_owned(),
        }
    });
    match parse_run_record(&text) {
        Ok(record) => Shard::Ran { source, record: Box::new(record), reused },
        Err(reason) => Shard::Unreadable { source, reason },
    }
}

/// One line of the merged report.
#[derive(Debug, Clone)]
pub struct Row {
    pub profile: String,
    pub verdict: Verdict,
    /// `pass/fail/error/skipped` counts, the decode median, or why it skipped / is missing.
    pub summary: String,
    /// The worst finding of this profile, when any is above info.
    pub worst: Option<(Severity, String)>,
    pub source: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct Merged {
    pub verdict: Verdict,
    pub rows: Vec<Row>,
    /// Problems of the merge itself (missing, unreadable or duplicated shards); each fails it.
    pub problems: Vec<String>,
    records: Vec<RunRecord>,
}

/// Folds shards into one verdict. `expected`: the profiles the matrix ran (a missing one fails the merge); empty
/// means "whatever is there", which must then be at least one shard.
pub fn merge(shards: Vec<Shard>, expected: &[String]) -> Merged {
    let mut rows: Vec<Row> = Vec::new();
    let mut problems = Vec::new();
    let mut records = Vec::new();
    for shard in &shards {
        if let Some(profile) = shard.profile()
            && let Some(first) = rows.iter().find(|r| r.profile == profile)
        {
            problems.push(format!(
                "two shards for profile `{profile}`: {} and {}",
                first.source.as_deref().map(|p| p.display().to_string()).unwrap_or_default(),
                shard.source().display()
            ));
            continue;
        }
        match shard {
            Shard::Unreadable { source, reason } => {
                problems.push(format!("`{}` is unreadable: {reason}", source.display()))
            }
            Shard::Skipped { source, skip } => rows.push(Row {
                profile: skip.profile.clone(),
                verdict: Verdict::Skip,
                summary: format!("skipped ({}): {}", skip.kind, skip.reason),
                worst: None,
                source: Some(source.clone()),
            }),
            Shard::Ran { source, record, reused } => {
                let count = |st: CaseStatus| record.cases.iter().filter(|c| c.status == st).count();
                let mut summary = format!(
                    "{} pass, {} fail, {} error, {} skipped",
                    count(CaseStatus::Pass),
                    count(CaseStatus::Fail),
                    count(CaseStatus::Error),
                    count(CaseStatus::Skipped)
                );
                if let Some(tps) = record.decode.median_tokens_per_second {
                    let _ = write!(summary, "; decode {tps:.1} tok/s");
                }
                if let Some(at) = reused {
                    let _ = write!(summary, "; reused the pass of {at} (skip-cache: same source tree and inputs)");
                }
                let worst = record
                    .findings
                    .iter()
                    .filter(|f| f.severity > Severity::Info)
                    .max_by_key(|f| f.severity)
                    .map(|f| (f.severity, format!("{}: {}", f.kind, f.message)));
                rows.push(Row {
                    profile: record.profile.clone(),
                    verdict: record.verdict,
                    summary,
                    worst,
                    source: Some(source.clone()),
                });
                records.push((**record).clone());
            }
        }
    }
    for want in expected {
        if !rows.iter().any(|r| &r.profile == want) {
            problems.push(format!("no shard for profile `{want}`: its job did not report (cancelled, crashed, or its artifact was not uploaded)"));
            rows.push(Row {
                profile: want.clone(),
                verdict: Verdict::Fail,
                summary: "missing: no run.json or skipped.json".into(),
                worst: None,
                source: None,
            });
        }
    }
    if rows.is_empty() && problems.is_empty() {
        problems.push("nothing to merge: no run.json or skipped.json found".into());
    }
    // Worst first, then by name.
    rows.sort_by(|a, b| b.verdict.cmp(&a.verdict).then_with(|| a.profile.cmp(&b.profile)));
    let mut verdict = rows.iter().map(|r| r.verdict).max().unwrap_or(Verdict::Fail);
    if !problems.is_empty() {
        verdict = Verdict::Fail;
    }
    Merged { verdict, rows, problems, records }
}

impl Merged {
    /// The step summary: the verdict, the worst finding first, one line per profile. `artifact` turns
    /// `{profile}` into the name of each shard's artifact.
    pub fn markdown(&self, artifact: Option<&str>) -> String {
        let mut s = String::new();
        let count = |v: Verdict| self.rows.iter().filter(|r| r.verdict == v).count();
        let mut tally: Vec<String> = Vec::new();
        for v in [Verdict::Fail, Verdict::Skip, Verdict::Inconclusive, Verdict::Warn, Verdict::Pass] {
            if count(v) > 0 {
                tally.push(format!("{} {}", count(v), v.as_str()));
            }
        }
        let _ = writeln!(
            s,
            "## gauntlet: {} — {} profile(s): {}\n",
            self.verdict.as_str().to_uppercase(),
            self.rows.len(),
            tally.join(", ")
        );
        for p in &self.problems {
            let _ = writeln!(s, "- **merge problem:** {}", md(p));
        }
        // The most severe finding; among equals, the one of the worst row (rows are sorted worst first).
        let worst = self.rows.iter().filter_map(|r| r.worst.as_ref().map(|w| (r, w))).fold(
            None,
            |best: Option<(&Row, &(Severity, String))>, cur| match best {
                Some(b) if b.1.0 >= cur.1.0 => Some(b),
                _ => Some(cur),
            },
        );
        if let Some((row, (sev, text))) = worst {
            let _ = writeln!(
                s,
                "- **worst finding** ({}, {}): {}",
                severity(*sev),
                code(&row.profile),
                md(&one_line(text))
            );
        }
        if !self.problems.is_empty() || worst.is_some() {
            s.push('\n');
        }
        let _ = writeln!(s, "| profile | verdict | result | worst finding | evidence |");
        let _ = writeln!(s, "|---|---|---|---|---|");
        for r in &self.rows {
            let evidence = match (artifact, &r.source) {
                (_, None) => "—".to_owned(),
                (Some(pattern), Some(_)) => format!("artifact {}", code(&pattern.replace("{profile}", &r.profile))),
                (None, Some(p)) => code(&p.display().to_string()),
            };
            let worst = r
                .worst
                .as_ref()
                .map(|(sev, t)| format!("{}: {}", severity(*sev), md(&one_line(t))))
                .unwrap_or_else(|| "—".into());
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                md(&r.profile),
                r.verdict.as_str(),
                md(&one_line(&r.summary)),
                worst,
                evidence
            );
        }
        s
    }

    /// One `<testsuite>` per profile that ran; a skipped or missing profile is one test case, skipped or failed,
    /// and so is each problem of the merge, in a `gauntlet.merge` suite.
    pub fn junit(&self) -> String {
        use super::junit::{not_passed, skipped, text};
        use quick_junit::{NonSuccessKind, Report, TestCase, TestSuite};

        let mut report = Report::new("gauntlet");
        report.add_test_suites(self.records.iter().map(super::junit::suite));
        let others: Vec<&Row> =
            self.rows.iter().filter(|r| !self.records.iter().any(|x| x.profile == r.profile)).collect();
        if !others.is_empty() || !self.problems.is_empty() {
            let mut merge = TestSuite::new("gauntlet.merge");
            let why = |r: &Row| text(&r.summary);
            let cases = others
                .into_iter()
                .map(|r| {
                    let status = if r.verdict == Verdict::Skip {
                        skipped(&why(r))
                    } else {
                        not_passed(NonSuccessKind::Failure, &why(r))
                    };
                    (text(&r.profile), status)
                })
                .chain(
                    self.problems
                        .iter()
                        .enumerate()
                        .map(|(i, p)| (format!("problem-{}", i + 1), not_passed(NonSuccessKind::Failure, &text(p)))),
                );
            for (name, status) in cases {
                let mut case = TestCase::new(name, status);
                case.set_classname("gauntlet.merge");
                merge.add_test_case(case);
            }
            report.add_test_suite(merge);
        }
        super::junit::xml(&report)
    }

    /// The merged result as JSON (verdict, rows, problems) for later steps.
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "verdict": self.verdict.as_str(),
            "problems": self.problems,
            "profiles": self.rows.iter().map(|r| serde_json::json!({
                "profile": r.profile,
                "verdict": r.verdict.as_str(),
                "summary": r.summary,
                "worst_finding": r.worst.as_ref().map(|(_, t)| t),
                "source": r.source.as_ref().map(|p| p.display().to_string()),
            })).collect::<Vec<_>>(),
        })
    }
}

fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Fail => "fail",
        Severity::Warn => "warn",
        Severity::Info => "info",
    }
}

fn one_line(s: &str) -> String {
    let flat = s.replace(['\n', '\r'], " ");
    if flat.chars().count() > 200 { format!("{}…", flat.chars().take(200).collect::<String>()) } else { flat }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_path_that_is_neither_file_nor_folder_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let absent = dir.path().join("shard-7");
        let given = [dir.path().to_path_buf(), absent.clone()];
        assert_eq!(collect(&given).unwrap_err(), CollectError { path: absent.clone() });
        assert_eq!(CollectError { path: absent.clone() }.to_string(), format!("`{}` does not exist", absent.display()));
        assert!(collect(&given[..1]).unwrap().is_empty());
    }
}
