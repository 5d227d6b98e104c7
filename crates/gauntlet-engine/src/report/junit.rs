//! `junit.xml`: one test case per suite case, so CI systems show the suite like any test run. Run-level findings
//! (crash, budget, regressions) go into the suite's `system-out`.
//!
//! The document is quick-junit's (nextest's JUnit model and writer): it counts the cases, escapes the markup and
//! drops C0 controls. Every text a server or a file could have written is cleaned first by the house rule
//! ([`crate::util::clean::markup`]): quick-junit would strip an escape sequence but keep a DEL, a C1 control or a
//! bidi override, which a CI page shows as they are.

use std::time::Duration;

use gauntlet_schema::{CaseStatus, RunRecord, Severity};
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use super::markdown::detail;

pub fn render(run: &RunRecord) -> String {
    let mut report = Report::new("gauntlet");
    let suite = suite(run);
    if let Some(time) = suite.time {
        report.set_time(time);
    }
    report.add_test_suite(suite);
    xml(&report)
}

/// One `<testsuite>` for one run (a merged report holds one per profile).
pub(crate) fn suite(run: &RunRecord) -> TestSuite {
    let name = text(&format!("gauntlet.{}", run.profile));
    let mut suite = TestSuite::new(name.as_str());
    if let Some(time) = seconds(run.cases.iter().filter_map(|c| c.seconds).sum()) {
        suite.set_time(time);
    }
    // A record re-read from disk may carry any string here: a start time that is not RFC 3339 is left out.
    if let Ok(at) = chrono::DateTime::parse_from_rfc3339(&run.started_at) {
        suite.set_timestamp(at);
    }
    suite.add_property(Property::new("verdict", run.verdict.as_str()));
    for c in &run.cases {
        let d = text(&detail(c));
        let status = match c.status {
            CaseStatus::Pass => TestCaseStatus::success(),
            CaseStatus::Fail => not_passed(NonSuccessKind::Failure, &d),
            CaseStatus::Error => not_passed(NonSuccessKind::Error, &d),
            CaseStatus::Skipped => skipped(&d),
        };
        let mut case = TestCase::new(text(&c.id), status);
        case.set_classname(name.as_str());
        if let Some(time) = seconds(c.seconds.unwrap_or(0.0)) {
            case.set_time(time);
        }
        suite.add_test_case(case);
    }
    let findings: Vec<String> = run
        .findings
        .iter()
        .filter(|f| f.severity != Severity::Info)
        .map(|f| format!("{:?} {}: {}", f.severity, f.kind, f.message))
        .collect();
    if !findings.is_empty() {
        suite.set_system_out(text(&findings.join("\n")));
    }
    suite
}

/// A failed (`Failure`) or broken (`Error`) case: why, as its message and as its text.
pub(crate) fn not_passed(kind: NonSuccessKind, why: &str) -> TestCaseStatus {
    let mut status = TestCaseStatus::non_success(kind);
    status.set_message(why).set_description(why);
    status
}

pub(crate) fn skipped(why: &str) -> TestCaseStatus {
    let mut status = TestCaseStatus::skipped();
    status.set_message(why);
    status
}

/// Text that a server or a file may have written, as the house rule lets it into XML. A tab becomes a space:
/// quick-junit drops tabs, which would glue two words together.
pub(crate) fn text(s: &str) -> String {
    crate::util::clean::markup(s).replace('\t', " ")
}

/// The whole document. quick-junit writes into memory from a model whose strings are all valid: it cannot fail
/// there, and a report without its XML would be a bug to see at once, not a run to judge.
pub(crate) fn xml(report: &Report) -> String {
    report.to_string().expect("quick-junit writes a report into memory")
}

/// A case's or a suite's time; a recorded time that is negative or not a number (a record edited by hand) has none.
fn seconds(s: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(s).ok()
}
