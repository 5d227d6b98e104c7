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

/// The noise floor the text comparison with the baseline was judged against (run.json `baseline_jitter`), in
/// words: `≤ 0.120 nats over 788 shared tokens (median 0.002, p99 0.001); a flip is numerical when its swing is
/// ≤ 0.240`; None without a baseline comparison that measured one.
pub fn jitter_line(run: &gauntlet_schema::RunRecord) -> Option<String> {
    use gauntlet_schema::tokens::{JITTER_MIN_TOKENS, JITTER_SWING_FACTOR};
    let j = run.baseline_jitter.as_ref()?;
    let rule = if j.decides() {
        format!("a flip is numerical when its swing is ≤ {:.3} nats", JITTER_SWING_FACTOR * j.max_nats)
    } else {
        format!("fewer than {JITTER_MIN_TOKENS} tokens: the 0.1-nat near-tie constant alone decides")
    };
    Some(format!(
        "≤ {:.3} nats over {} shared tokens (median {:.3}, p99 {:.3}); {rule}",
        j.max_nats, j.tokens, j.median_nats, j.p99_nats
    ))
}
