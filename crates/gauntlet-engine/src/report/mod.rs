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

/// The speed check in words (`contention 52 % (1 decode thread, 0.00 s throttled); other processes used 3 % of the
/// CPU time the server left; judged: 8 cases compared on …;
/// median 98 % of the baseline's (uncorrected 97 %)`); None for a run without a CPU account (attached servers,
/// older records).
pub fn speed_check_line(run: &gauntlet_schema::RunRecord) -> Option<String> {
    let c = run.decode.speed_check.as_ref()?;
    let pct = |v: f64| format!("{:.0} %", v * 100.0);
    let mut line = format!(
        "contention {} ({} decode thread{}, {:.2} s throttled)",
        c.contention.map_or("?".into(), pct),
        c.busy_threads,
        if c.busy_threads == 1 { "" } else { "s" },
        c.throttled_seconds
    );
    if let Some(n) = c.neighbours {
        line.push_str(&format!("; other processes used {} of the CPU time the server left", pct(n)));
    }
    if let Some(m) = c.machine {
        line.push_str(&format!(
            "; the machine: {:.1} GB/s through a cache-sized buffer, {:.0} M dependent steps/s ({} readings)",
            m.memory_bytes_per_second / 1e9,
            m.steps_per_second / 1e6,
            m.readings
        ));
        if let Some(shift) = c.judgement.as_ref().and_then(|j| j.machine_shift) {
            line.push_str(&format!(", {} apart from the baseline's", pct(shift)));
        }
    }
    if let Some(j) = &c.judgement {
        if j.judged {
            line.push_str(&format!("; judged: {}", j.reason));
            if let Some(m) = j.median_ratio {
                line.push_str(&format!("; median {} of the baseline's", pct(m)));
                if let Some(u) = j.uncorrected_median_ratio.filter(|_| j.corrected) {
                    line.push_str(&format!(" (uncorrected {})", pct(u)));
                }
            }
        } else {
            line.push_str(&format!("; not judged: {}", j.reason));
        }
    }
    Some(line)
}

/// Speculative decoding in words: the draft (file, digest prefix, settings) and what it achieved
/// (`acceptance 71.2 % (534 of 750 drafted tokens, 12 answers), 2.31 tokens per target step`); None for a run with
/// no draft in its identity and no draft counts.
pub fn draft_line(run: &gauntlet_schema::RunRecord) -> Option<String> {
    let draft = run.identity.current().map(|i| i.recipe.draft.clone()).unwrap_or(serde_json::Value::Null);
    let counts = run.decode.draft.as_ref();
    if draft.is_null() && counts.is_none() {
        return None;
    }
    let mut parts = Vec::new();
    if let Some(m) = draft.get("model") {
        let file = m.get("file").and_then(|f| f.as_str()).unwrap_or("?");
        let sha: String = m.get("sha256").and_then(|f| f.as_str()).unwrap_or("?").chars().take(12).collect();
        let settings: Vec<&str> = draft
            .get("arguments")
            .and_then(|a| a.as_array())
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str())
            .collect();
        let settings = if settings.is_empty() { "default settings".to_owned() } else { settings.join(" ") };
        parts.push(format!("{file} (sha256 {sha}…; {settings})"));
    }
    match counts {
        Some(d) => {
            let rate =
                d.acceptance_rate.map_or("no token drafted".to_owned(), |r| format!("acceptance {:.1} %", r * 100.0));
            let length = d.mean_accepted_length.map_or(String::new(), |l| format!(", {l:.2} tokens per target step"));
            parts.push(format!(
                "{rate} ({} of {} drafted tokens, {} answers){length}",
                d.accepted_tokens, d.drafted_tokens, d.answers
            ));
        }
        None => parts.push("the server reported no draft counts".to_owned()),
    }
    Some(parts.join("; "))
}

/// Losslessness against the profile without the draft, in words: `PASS against profile native with a control:
/// identical 14, drift 1`; None when the run did not check it.
pub fn lossless_line(run: &gauntlet_schema::RunRecord) -> Option<String> {
    let l = run.lossless.as_ref()?;
    let jitter = match &l.control_jitter {
        Some(j) => format!("; the control moved ≤ {:.3} nats over {} shared tokens", j.max_nats, j.tokens),
        None => String::new(),
    };
    Some(format!(
        "{} against profile {} with a control: {}{jitter}",
        l.result.verdict.to_uppercase(),
        l.against,
        l.tally()
    ))
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
