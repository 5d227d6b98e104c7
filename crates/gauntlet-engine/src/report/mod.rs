//! Views of a run record: Markdown, HTML, JUnit, GitHub annotations. Each is a pure function of the record.

mod github;
pub mod html;
pub(crate) mod junit;
pub(crate) mod markdown;
pub use markdown::expected_failures_line;
pub mod merge;

pub use github::{annotation as github_annotation, annotations as github_annotations};
pub use html::{HistoryPoint, IdentityHistory, history_page, run_page as html};
pub use junit::render as junit;
pub use markdown::render as markdown;

use gauntlet_schema::{Finding, FindingKind, Severity};

/// The order every view lists findings in: a changed server first (it explains whatever drift follows), then the
/// worst first, each group in the record's order.
pub fn ordered(findings: &[Finding]) -> Vec<&Finding> {
    let mut out: Vec<&Finding> = findings.iter().collect();
    out.sort_by_key(|f| (f.kind != FindingKind::ServerChanged, std::cmp::Reverse(f.severity)));
    out
}

/// Whether a finding is the server's change (listed under its own heading, first).
pub fn is_server_change(f: &Finding) -> bool {
    f.kind == FindingKind::ServerChanged && f.severity != Severity::Info
}
