//! `junit.xml`: one test case per suite case, so CI systems show the suite like any test run. Run-level findings
//! (crash, budget, regressions) go into the suite's `system-out`.

use std::fmt::Write;

use gauntlet_schema::{CaseStatus, RunRecord, Severity};

use super::markdown::detail;

pub fn render(run: &RunRecord) -> String {
    let count = |st: CaseStatus| run.cases.iter().filter(|c| c.status == st).count();
    let time: f64 = run.cases.iter().filter_map(|c| c.seconds).sum();
    let mut s = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        s,
        "<testsuites name=\"gauntlet\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{time:.3}\">",
        run.cases.len(),
        count(CaseStatus::Fail),
        count(CaseStatus::Error),
        count(CaseStatus::Skipped)
    );
    s.push_str(&suite(run));
    s.push_str("</testsuites>\n");
    s
}

/// One `<testsuite>` element for one run (a merged report holds one per profile).
pub(crate) fn suite(run: &RunRecord) -> String {
    let count = |st: CaseStatus| run.cases.iter().filter(|c| c.status == st).count();
    let time: f64 = run.cases.iter().filter_map(|c| c.seconds).sum();
    let name = format!("gauntlet.{}", run.profile);
    let mut s = String::new();
    let _ = writeln!(
        s,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{time:.3}\" timestamp=\"{}\">",
        esc(&name),
        run.cases.len(),
        count(CaseStatus::Fail),
        count(CaseStatus::Error),
        count(CaseStatus::Skipped),
        esc(&run.started_at)
    );
    let _ = writeln!(s, "    <properties><property name=\"verdict\" value=\"{}\"/></properties>", run.verdict.as_str());
    for c in &run.cases {
        let _ = write!(
            s,
            "    <testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\"",
            esc(&name),
            esc(&c.id),
            c.seconds.unwrap_or(0.0)
        );
        let d = esc(&detail(c));
        match c.status {
            CaseStatus::Pass => s.push_str("/>\n"),
            CaseStatus::Fail => {
                let _ = writeln!(s, ">\n      <failure message=\"{d}\">{d}</failure>\n    </testcase>");
            }
            CaseStatus::Error => {
                let _ = writeln!(s, ">\n      <error message=\"{d}\">{d}</error>\n    </testcase>");
            }
            CaseStatus::Skipped => {
                let _ = writeln!(s, ">\n      <skipped message=\"{d}\"/>\n    </testcase>");
            }
        }
    }
    let findings: Vec<String> = run
        .findings
        .iter()
        .filter(|f| f.severity != Severity::Info)
        .map(|f| format!("{:?} {}: {}", f.severity, f.kind, f.message))
        .collect();
    if !findings.is_empty() {
        let _ = writeln!(s, "    <system-out>{}</system-out>", esc(&findings.join("\n")));
    }
    s.push_str("  </testsuite>\n");
    s
}

/// XML-escape, dropping characters XML 1.0 cannot carry (server text may contain anything).
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(ch),
            c if crate::util::clean::is_hostile(c) || c == '\u{fffe}' || c == '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}
