//! GitHub Actions: workflow-command annotations (worst first) and the step summary.

use gauntlet_schema::{RunRecord, Severity};

/// One `::error` / `::warning` line per finding, a changed server first, then failures.
pub fn annotations(run: &RunRecord) -> String {
    let findings: Vec<_> = super::ordered(&run.findings).into_iter().filter(|f| f.severity != Severity::Info).collect();
    let mut out = String::new();
    for f in findings {
        let level = if f.severity == Severity::Fail { "error" } else { "warning" };
        let title = match &f.case {
            Some(c) => format!("gauntlet {} {}: {}", run.profile, f.kind, c),
            None => format!("gauntlet {} {}", run.profile, f.kind),
        };
        out.push_str(&annotation(level, &title, &f.message));
    }
    out
}

/// One workflow-command line (`::error title=…::message`), escaped as GitHub requires.
pub fn annotation(level: &str, title: &str, message: &str) -> String {
    format!("::{level} title={}::{}\n", property(title), data(message))
}

/// A workflow command's data: `%`, CR and LF escaped as GitHub unescapes them, so server text stays inside its
/// one line; any other control character is shown as its code (never passed to the log as a control).
fn data(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '%' => out.push_str("%25"),
            '\r' => out.push_str("%0D"),
            '\n' => out.push_str("%0A"),
            c if c.is_control() || crate::util::clean::is_hostile(c) => out.push_str(&format!("%{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

fn property(s: &str) -> String {
    data(s).replace(':', "%3A").replace(',', "%2C")
}
