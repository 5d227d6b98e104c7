//! `report.md`: a pure function of the run record, for a person reading a PR or a CI step summary. Every string
//! of the record is data (a server's text, or a record someone else wrote): it goes through [`text`] or [`code`],
//! so it can neither start Markdown of its own (links, images, HTML, mentions, table cells) nor leave its line.

use std::fmt::Write;

use gauntlet_schema::{CaseRecord, CaseStatus, RunRecord, ServerMode, Severity};

use gauntlet_schema::diff::first_difference;

pub fn render(run: &RunRecord, baseline: Option<&RunRecord>) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# gauntlet {}: {}", text(&run.profile), run.verdict.as_str().to_uppercase());
    s.push('\n');
    s.push_str("| | |\n|---|---|\n");
    let _ = writeln!(s, "| verdict | **{}** |", run.verdict.as_str());
    let _ = writeln!(s, "| model | {} |", model_line(run));
    let _ = writeln!(s, "| server | {} |", server_line(run));
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
    if let Some(c) = super::speed_check_line(run) {
        let _ = writeln!(s, "| speed check | {} |", text(&c));
    }
    if let Some(d) = super::draft_line(run) {
        let _ = writeln!(s, "| draft | {} |", text(&d));
    }
    if let Some(l) = super::lossless_line(run) {
        let _ = writeln!(s, "| lossless | {} |", text(&l));
    }
    let base = match &run.baseline {
        Some(b) => format!("{} (profile {}, {})", code(&b.path), text(&b.profile), text(&b.started_at)),
        None => "none".into(),
    };
    let _ = writeln!(s, "| baseline | {base} |");
    if let Some(j) = super::jitter_line(run) {
        let _ = writeln!(s, "| text jitter vs baseline | {} |", text(&j));
    }
    let count = |st: CaseStatus| run.cases.iter().filter(|c| c.status == st).count();
    let _ = writeln!(
        s,
        "| cases | {} pass · {} fail · {} error · {} skipped |",
        count(CaseStatus::Pass),
        count(CaseStatus::Fail),
        count(CaseStatus::Error),
        count(CaseStatus::Skipped)
    );
    let _ = writeln!(s, "| started | {} ({:.1} s) |", text(&run.started_at), run.wall_seconds);
    // A changed server comes first: it explains whatever drift follows.
    let changed: Vec<_> = run.findings.iter().filter(|f| super::is_server_change(f)).collect();
    if !changed.is_empty() {
        s.push_str("\n## Server changed\n\n");
        for f in changed {
            let _ = writeln!(s, "- **{}**: {}", f.kind, text(&f.message));
        }
    }
    for (title, severity) in [("Failures", Severity::Fail), ("Warnings", Severity::Warn), ("Notes", Severity::Info)] {
        let items: Vec<_> =
            run.findings.iter().filter(|f| f.severity == severity && !super::is_server_change(f)).collect();
        if items.is_empty() {
            continue;
        }
        let _ = write!(s, "\n## {title}\n\n");
        for f in items {
            match &f.case {
                Some(case) => {
                    let _ = writeln!(s, "- **{}** {}: {}", f.kind, code(case), text(&f.message));
                }
                None => {
                    let _ = writeln!(s, "- **{}**: {}", f.kind, text(&f.message));
                }
            }
        }
    }
    if let Some(line) = expected_failures_line(run) {
        s.push_str(
            "\n## Expected failures\n\nNo baseline yet, and some cases fail. If these failures are what this server \
             and model do, paste this line into the profile: each case listed is then a note whichever way it fails \
             (a case it does not list is a note only while it fails as on the baseline).\n\n```toml\n",
        );
        s.push_str(&line);
        s.push_str("\n```\n");
    }
    s.push_str(
        "\n## Cases\n\n| case | result | tokens | seconds | vs baseline | detail |\n|---|---|---|---|---|---|\n",
    );
    // Tokens are compared only where the two records show one vocabulary (not across engines without that evidence).
    let tokens_alike = baseline.is_none_or(|b| gauntlet_schema::diff::tokens_comparable(run, b).0);
    for c in &run.cases {
        let old = baseline.and_then(|b| b.cases.iter().find(|o| o.id == c.id)).map(|o| (o, tokens_alike));
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} |",
            text(&c.id),
            status_word(c),
            tokens(c),
            c.seconds.map(|v| format!("{v:.2}")).unwrap_or_else(|| "—".into()),
            text(&versus(c, old, run)),
            text(&detail(c)),
        );
    }
    server_timings(&mut s, run);
    if let Some(m) = &run.server_metrics {
        s.push_str(&server_metrics(m, "suite"));
    }
    if !run.server.log_tail.is_empty() {
        s.push_str("\n## Server log (last lines)\n\n```text\n");
        // Inside a code block a line still reaches a terminal or a CI log that shows the file: cleaned by the one
        // rule (controls and bidi overrides escaped, a line-leading `::` defused).
        for line in &run.server.log_tail {
            s.push_str(&crate::util::clean::line(line).replace("```", "'''"));
            s.push('\n');
        }
        s.push_str("```\n");
    }
    s
}

/// What the server said about its own time per case (`answer.timings`, normalised from each engine's fields) and
/// the prompt tokens it took from its cache (`usage.prompt_tokens_details.cached_tokens`, or llama.cpp's `cache_n`).
/// Left out when no answer carried either.
fn server_timings(s: &mut String, run: &RunRecord) {
    let rows: Vec<_> = run
        .cases
        .iter()
        .filter_map(|c| {
            let a = c.answer.as_ref()?;
            let cached = a.usage.and_then(|u| u.cached_tokens).or(a.timings.and_then(|t| t.cache_tokens));
            (a.timings.is_some() || cached.is_some()).then_some((c, a.timings, cached))
        })
        .collect();
    if rows.is_empty() {
        return;
    }
    s.push_str(
        "\n## Server timings\n\n| case | reported by | prompt tokens | prompt ms | cached tokens | predicted tokens | \
         predicted ms | tok/s |\n|---|---|---|---|---|---|---|---|\n",
    );
    let n = |v: Option<u64>| v.map_or_else(|| "—".into(), |v| v.to_string());
    let f = |v: Option<f64>, digits: usize| v.map_or_else(|| "—".into(), |v| format!("{v:.digits$}"));
    for (c, t, cached) in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            text(&c.id),
            t.map_or("usage", |t| t.source.as_str()),
            n(t.and_then(|t| t.prompt_tokens)),
            f(t.and_then(|t| t.prompt_ms), 1),
            n(cached),
            n(t.and_then(|t| t.predicted_tokens)),
            f(t.and_then(|t| t.predicted_ms), 1),
            f(t.and_then(|t| t.predicted_per_second), 1),
        );
    }
}

/// `server_metrics` as a section of `report.md` and `bench.md`: each scrape that failed with its reason, and the key
/// metrics' changes over the `span` (`suite`, `bench`); every other series is left to the JSON. Names are the
/// server's text.
pub(crate) fn server_metrics(m: &gauntlet_schema::ServerMetrics, span: &str) -> String {
    let mut s = format!("\n## Server metrics\n\n{} scraped before and after the {span}", code(&m.path));
    let failed: Vec<_> = [("before", &m.before), ("after", &m.after)]
        .into_iter()
        .filter_map(|(when, scrape)| Some((when, scrape.error.as_deref().filter(|_| !scrape.ok)?)))
        .collect();
    if !failed.is_empty() {
        s.push_str(".\n\n");
        for (when, why) in failed {
            let _ = writeln!(s, "- the scrape {when} failed: {}", text(why));
        }
        return s;
    }
    let series = m.counters.len() + m.gauges.len();
    if m.key.is_empty() {
        let _ = writeln!(s, ": no key metric of a known engine among its {series} series (all in the JSON record).");
        return s;
    }
    let _ = writeln!(s, " ({series} series in the JSON record).\n\n| metric | series | change |\n|---|---|---:|");
    for k in &m.key {
        let value = if k.delta.fract() == 0.0 { format!("{:.0}", k.delta) } else { format!("{:.3}", k.delta) };
        let _ = writeln!(s, "| {} | {} | {value} |", text(&k.name.replace('_', " ")), code(&k.series));
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
            format!("{} ({}, sha256 {})", text(&m.name), code(file), text(&prefix) + "…")
        }
        _ => format!("{} (served by the attached server)", code(run.identity.request_model().unwrap_or(&m.name))),
    }
}

fn server_line(run: &RunRecord) -> String {
    if run.server.mode == ServerMode::Attached {
        return format!("attached to {}", text(&run.server.base_url));
    }
    let name = run.identity.server().and_then(|s| s.name.as_deref()).unwrap_or("(not recorded)");
    format!("{} at {} (stop: {})", text(name), text(&run.server.base_url), run.server.stop)
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

/// `old`: the baseline's answer, and whether the two records' tokens may be compared.
fn versus(c: &CaseRecord, old: Option<(&CaseRecord, bool)>, run: &RunRecord) -> String {
    match (old.and_then(|(o, _)| o.observed.as_deref()), c.observed.as_deref()) {
        (Some(a), Some(b)) => match first_difference(a, b) {
            None => "same text".into(),
            // At the token where it turned, when both answers carry comparable tokens: a near-tie flip or a change.
            Some(at) => {
                let traced = old
                    .filter(|(_, alike)| *alike)
                    .and_then(|(o, _)| gauntlet_schema::diff::judged_divergence(o, c, run.baseline_jitter.as_ref()));
                match traced {
                    Some(d) => format!("differs at {}", d.describe()),
                    None => format!("differs at char {at}"),
                }
            }
        },
        _ => "—".into(),
    }
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

/// Untrusted text as inline Markdown, safe in a paragraph, a list item and a table cell: one line (line breaks
/// and other control characters become spaces), no raw HTML, and every character that could open a link, an
/// image, emphasis, a code span, a strikethrough, a mention or a new table cell escaped.
pub(crate) fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\\' | '`' | '*' | '_' | '[' | ']' | '|' | '!' | '~' | '@' => {
                out.push('\\');
                out.push(ch);
            }
            c if c == '\t' || crate::util::clean::is_hostile(c) => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Untrusted text as a code span: one line, without backticks of its own (which would close the span) and with
/// `|` escaped (GitHub splits table cells on it even inside code).
pub(crate) fn code(s: &str) -> String {
    let inner: String =
        s.chars().map(|c| if c == '\t' || c == '`' || crate::util::clean::is_hostile(c) { ' ' } else { c }).collect();
    format!("`{}`", inner.replace('|', "\\|"))
}

/// For a run without a baseline in which cases fail: the profile's `expected_failures` line with those cases added
/// (in suite order, after the ones already declared), for the user to paste. None when nothing new fails.
pub fn expected_failures_line(run: &RunRecord) -> Option<String> {
    if run.baseline.is_some() {
        return None;
    }
    let declared = &run.thresholds.expected_failures;
    let failing: Vec<&String> = run
        .cases
        .iter()
        .filter(|c| c.repeat_of.is_none() && c.status == CaseStatus::Fail && !declared.contains(&c.id))
        .map(|c| &c.id)
        .collect();
    if failing.is_empty() {
        return None;
    }
    // A JSON string is a TOML basic string; case ids are the suite's, escaped all the same.
    let ids: Vec<String> = declared
        .iter()
        .chain(failing)
        .map(|id| serde_json::Value::String(id.chars().filter(|c| !c.is_control()).collect()).to_string())
        .collect();
    Some(format!("expected_failures = [{}]", ids.join(", ")))
}
