//! `report.md`: a pure function of the run record, for a person reading a PR or a CI step summary.

use std::fmt::Write;

use gauntlet_schema::{CaseRecord, CaseStatus, RunRecord, ServerMode, Severity};

use gauntlet_schema::diff::first_difference;

pub fn render(run: &RunRecord, baseline: Option<&RunRecord>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# gauntlet {}: {}", run.profile, run.verdict.as_str().to_uppercase());
    s.push('\n');
    s.push_str("| | |\n|---|---|\n");
    let _ = writeln!(s, "| verdict | **{}** |", run.verdict.as_str());
    let _ = writeln!(s, "| model | {} |", cell(&model_line(run)));
    let _ = writeln!(s, "| server | {} |", cell(&server_line(run)));
    let load = match (run.server.load_seconds, run.server.mode) {
        (Some(secs), _) => format!("{secs:.2} s"),
        (None, ServerMode::Attached) => "not measured (attached)".into(),
        (None, _) => "did not load".into(),
    };
    let _ = writeln!(s, "| load time | {load} |");
    let decode = match (&run.decode.median_tokens_per_second, &run.decode.token_source) {
        (Some(v), Some(src)) => {
            format!("{v:.1} tok/s (median of {} cases, tokens from {src})", run.decode.cases_counted)
        }
        _ => "not measured (no case with ≥ 32 completion tokens)".into(),
    };
    let _ = writeln!(s, "| decode | {decode} |");
    let base = match &run.baseline {
        Some(b) => format!("`{}` (profile {}, {})", b.path, b.profile, b.started_at),
        None => "none".into(),
    };
    let _ = writeln!(s, "| baseline | {} |", cell(&base));
    let count = |st: CaseStatus| run.cases.iter().filter(|c| c.status == st).count();
    let _ = writeln!(
        s,
        "| cases | {} pass · {} fail · {} error · {} skipped |",
        count(CaseStatus::Pass),
        count(CaseStatus::Fail),
        count(CaseStatus::Error),
        count(CaseStatus::Skipped)
    );
    let _ = writeln!(s, "| started | {} ({:.1} s) |", run.started_at, run.wall_seconds);
    for (title, severity) in [("Failures", Severity::Fail), ("Warnings", Severity::Warn), ("Notes", Severity::Info)] {
        let items: Vec<_> = run.findings.iter().filter(|f| f.severity == severity).collect();
        if items.is_empty() {
            continue;
        }
        let _ = write!(s, "\n## {title}\n\n");
        for f in items {
            match &f.case {
                Some(case) => {
                    let _ = writeln!(s, "- **{}** `{case}`: {}", f.kind, inline(&f.message));
                }
                None => {
                    let _ = writeln!(s, "- **{}**: {}", f.kind, inline(&f.message));
                }
            }
        }
    }
    s.push_str(
        "\n## Cases\n\n| case | result | tokens | seconds | vs baseline | detail |\n|---|---|---|---|---|---|\n",
    );
    for c in &run.cases {
        let old = baseline.and_then(|b| b.cases.iter().find(|o| o.id == c.id));
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            c.id,
            status_word(c),
            tokens(c),
            c.seconds.map(|v| format!("{v:.2}")).unwrap_or_else(|| "—".into()),
            cell(&versus(c, old)),
            cell(&detail(c)),
        );
    }
    if !run.server.log_tail.is_empty() {
        s.push_str("\n## Server log (last lines)\n\n```text\n");
        for line in &run.server.log_tail {
            s.push_str(&line.replace("```", "'''"));
            s.push('\n');
        }
        s.push_str("```\n");
    }
    s
}

/// The model as the identity's recipe names it: a spawned server's model file and digest, or the name an
/// attached server is asked for. A record whose identity has an older shape says so instead of guessing.
fn model_line(run: &RunRecord) -> String {
    let Some(m) = run.identity.model() else {
        return "(not recorded: identity of an older shape)".into();
    };
    match (&m.file, &m.sha256) {
        (Some(file), Some(sha)) => {
            let prefix: String = sha.chars().take(12).collect();
            format!("{} (`{file}`, sha256 {prefix}…)", m.name)
        }
        _ => format!("`{}` (served by the attached server)", run.identity.request_model().unwrap_or(&m.name)),
    }
}

fn server_line(run: &RunRecord) -> String {
    if run.server.mode == ServerMode::Attached {
        return format!("attached to {}", run.server.base_url);
    }
    let name = run.identity.server().and_then(|s| s.name.as_deref()).unwrap_or("(not recorded)");
    format!("{name} at {} (stop: {})", run.server.base_url, run.server.stop)
}

pub(crate) fn status_word(c: &CaseRecord) -> &'static str {
    match c.status {
        CaseStatus::Pass => "pass",
        CaseStatus::Fail => "fail",
        CaseStatus::Error => "error",
        CaseStatus::Skipped => "skipped",
    }
}

fn tokens(c: &CaseRecord) -> String {
    c.answer
        .as_ref()
        .and_then(|a| a.usage)
        .and_then(|u| u.completion_tokens)
        .map(|t| t.to_string())
        .unwrap_or_else(|| "—".into())
}

fn versus(c: &CaseRecord, old: Option<&CaseRecord>) -> String {
    match (old.and_then(|o| o.observed.as_deref()), c.observed.as_deref()) {
        (Some(a), Some(b)) => match first_difference(a, b) {
            None => "same text".into(),
            // At the token where it turned, when both answers carry tokens: a near-tie flip or a changed answer.
            Some(at) => match old.and_then(|o| divergence(o, c)) {
                Some(d) => format!("differs at {}", d.describe()),
                None => format!("differs at char {at}"),
            },
        },
        _ => "—".into(),
    }
}

fn divergence(old: &CaseRecord, c: &CaseRecord) -> Option<gauntlet_schema::TokenDivergence> {
    let (a, b) = (old.answer.as_ref()?.tokens.as_ref()?, c.answer.as_ref()?.tokens.as_ref()?);
    gauntlet_schema::tokens::first_divergent_token(a, b)
}

pub(crate) fn detail(c: &CaseRecord) -> String {
    if let Some(reason) = &c.skip_reason {
        return reason.clone();
    }
    if let Some(e) = &c.error {
        return e.clone();
    }
    c.checks.iter().filter(|r| !r.passed).map(|r| format!("{}: {}", r.check, r.detail)).collect::<Vec<_>>().join("; ")
}

/// Text that must stay inside one table cell.
fn cell(s: &str) -> String {
    inline(s).replace('|', "\\|")
}

/// Server text is untrusted: no line breaks, and no raw HTML that a Markdown renderer would interpret.
fn inline(s: &str) -> String {
    s.replace(['\n', '\r'], " ").replace('<', "&lt;").replace('>', "&gt;")
}
