//! `report.html`: a gate run for a person, a pure function of the run record, its baseline and the baseline's
//! history. The verdict and the facts first, then the findings, the identity against the baseline's field by
//! field, one row per case (its answer against the baseline's with the first divergence marked, and its stream as
//! a small chart), and decode speed and load time against the promoted baselines. Every text that came from the
//! server or a file is escaped.

use std::fmt::Write as _;

use serde_json::Value;

use gauntlet_schema::diff::first_difference;
use gauntlet_schema::{CaseRecord, CaseStatus, RunRecord, ServerMode, Severity};

use super::chart::{Marker, SMALL, lines};
use super::history::{DECODE, HistoryPoint, LOAD, promotions_table, trend_charts};
use super::page::{clip, escape, head, nav, none};
use crate::report::markdown::{detail, status_word};

/// Characters of an answer shown around its first divergence; the record has the whole text.
const CONTEXT_BEFORE: usize = 160;
const SHOWN: usize = 1600;
/// Identity fields shown; a record with more is cut, saying how many were left out.
const MAX_FIELDS: usize = 400;

pub fn render(run: &RunRecord, baseline: Option<&RunRecord>, history: &[HistoryPoint]) -> String {
    let mut html = head(&format!("gauntlet run: {}", run.profile));
    let v = run.verdict.as_str();
    let _ = writeln!(html, "<p>Verdict: <span class=\"verdict {v}\" id=\"verdict\">{}</span></p>", v.to_uppercase());
    nav(
        &mut html,
        &[("findings", "Findings"), ("identity", "Identity"), ("cases", "Cases"), ("history", "Decode and load")],
    );
    facts(&mut html, run);
    findings(&mut html, run);
    identity(&mut html, run, baseline);
    cases(&mut html, run, baseline);
    speed(&mut html, run, baseline, history);
    if !run.server.log_tail.is_empty() {
        html.push_str("<h2 id=\"log\">Server log (last lines)</h2>\n<pre>");
        for line in &run.server.log_tail {
            html.push_str(&escape(line));
            html.push('\n');
        }
        html.push_str("</pre>\n");
    }
    let _ = writeln!(
        html,
        "<p class=\"muted\">Written by gauntlet {} from <code>run.json</code>; <code>gauntlet report run.json \
         --format html</code> writes it again.</p>\n</body></html>",
        escape(&run.gauntlet_version)
    );
    html
}

fn facts(html: &mut String, run: &RunRecord) {
    let model = match run.identity.model() {
        Some(m) => match (&m.file, &m.sha256) {
            (Some(file), Some(sha)) => {
                format!("{} ({file}, sha256 {}…)", m.name, sha.chars().take(12).collect::<String>())
            }
            _ => format!("{} (served by the attached server)", run.identity.request_model().unwrap_or(&m.name)),
        },
        None => "(not recorded: identity of an older shape)".into(),
    };
    let server = if run.server.mode == ServerMode::Attached {
        format!("attached to {}", run.server.base_url)
    } else {
        let name = run.identity.server().and_then(|s| s.name.as_deref()).unwrap_or("(not recorded)");
        format!("{name} at {} (stop: {})", run.server.base_url, run.server.stop)
    };
    let load = match (run.server.load_seconds, run.server.mode) {
        (Some(s), _) => format!("{s:.2} s"),
        (None, ServerMode::Attached) => "not measured (attached)".into(),
        (None, _) => "did not load".into(),
    };
    let decode = match (run.decode.median_tokens_per_second, &run.decode.token_source) {
        (Some(v), Some(src)) => {
            format!("{v:.1} tok/s (median of {} cases, tokens from {src})", run.decode.cases_counted)
        }
        _ => "not measured (no case with ≥ 32 completion tokens)".into(),
    };
    let count = |st: CaseStatus| run.cases.iter().filter(|c| c.status == st).count();
    let cases = format!(
        "{} pass · {} fail · {} error · {} skipped",
        count(CaseStatus::Pass),
        count(CaseStatus::Fail),
        count(CaseStatus::Error),
        count(CaseStatus::Skipped)
    );
    let base = match &run.baseline {
        Some(b) => format!("{} (profile {}, {})", b.path, b.profile, b.started_at),
        None => "none".into(),
    };
    html.push_str("<dl>");
    for (k, v) in [
        ("Model", model),
        ("Server", server),
        ("Load time", load),
        ("Decode", decode),
        ("Cases", cases),
        ("Baseline", base),
        ("Text jitter vs baseline", super::super::jitter_line(run).unwrap_or_else(|| "not measured".into())),
        ("Started", format!("{} ({:.1} s)", run.started_at, run.wall_seconds)),
        ("Identity", run.identity_digest.clone()),
    ] {
        let _ = write!(html, "<dt>{k}</dt><dd id=\"{}\">{}</dd>", k.to_lowercase().replace(' ', "-"), escape(&v));
    }
    for (k, v) in [("Draft", super::super::draft_line(run)), ("Lossless", super::super::lossless_line(run))] {
        if let Some(v) = v {
            let _ = write!(html, "<dt>{k}</dt><dd id=\"{}\">{}</dd>", k.to_lowercase(), escape(&v));
        }
    }
    html.push_str("</dl>\n");
}

fn findings(html: &mut String, run: &RunRecord) {
    html.push_str("<h2 id=\"findings\">Findings</h2>\n");
    if run.findings.is_empty() {
        return none(html, "no finding");
    }
    html.push_str("<ul>\n");
    {
        for f in crate::report::ordered(&run.findings) {
            let class = match f.severity {
                Severity::Fail => "fail",
                Severity::Warn => "warn",
                Severity::Info => "muted",
            };
            let case = f.case.as_deref().map(|c| format!(" <code>{}</code>", escape(c))).unwrap_or_default();
            let _ = writeln!(
                html,
                "<li><span class=\"{class}\">{}</span> <b>{}</b>{case}: {}</li>",
                class.replace("muted", "note"),
                escape(&f.kind.to_string()),
                escape(&f.message)
            );
        }
    }
    html.push_str("</ul>\n");
}

/// `path → value` for every leaf of a JSON value, in key order.
fn leaves(v: &Value, path: String, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                leaves(x, if path.is_empty() { k.clone() } else { format!("{path}.{k}") }, out);
            }
        }
        Value::Array(a) if !a.is_empty() => {
            for (i, x) in a.iter().enumerate() {
                leaves(x, format!("{path}[{i}]"), out);
            }
        }
        Value::String(s) => out.push((path, s.clone())),
        other => out.push((path, other.to_string())),
    }
}

fn identity(html: &mut String, run: &RunRecord, baseline: Option<&RunRecord>) {
    html.push_str("<h2 id=\"identity\">Identity against the baseline</h2>\n");
    let mut now = Vec::new();
    leaves(&run.identity.to_value(), "identity".into(), &mut now);
    leaves(&run.runtime, "runtime".into(), &mut now);
    let Some(b) = baseline else {
        none(html, "no baseline: the identity as this run recorded it");
        let _ = writeln!(html, "<details><summary>Every field ({})</summary>", now.len());
        html.push_str("<table class=\"fields\"><tr><th>Field</th><th>This run</th></tr>\n");
        for (k, v) in now.iter().take(MAX_FIELDS) {
            let _ = writeln!(html, "<tr><td><code>{}</code></td><td>{}</td></tr>", escape(k), escape(v));
        }
        html.push_str("</table></details>\n");
        return;
    };
    let mut old = Vec::new();
    leaves(&b.identity.to_value(), "identity".into(), &mut old);
    leaves(&b.runtime, "runtime".into(), &mut old);
    // In the record's order (array items by index), fields only the baseline has after them.
    let mut keys: Vec<&String> = now.iter().map(|(k, _)| k).collect();
    keys.extend(old.iter().map(|(k, _)| k).filter(|k| !now.iter().any(|(n, _)| n == *k)));
    let get = |list: &[(String, String)], k: &str| list.iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
    let differing: Vec<&String> = keys.iter().copied().filter(|k| get(&now, k) != get(&old, k)).collect();
    let same_digest = b.identity_digest == run.identity_digest;
    let _ = writeln!(
        html,
        "<p>{} field(s), <span class=\"{}\">{} differ</span>; identity digest {}. Fields under \
         <code>runtime</code> and <code>identity.build</code> only warn.</p>",
        keys.len(),
        if differing.is_empty() { "pass" } else { "differs" },
        differing.len(),
        if same_digest { "the same" } else { "differs" }
    );
    let table = |html: &mut String, keys: &[&String]| {
        html.push_str("<table class=\"fields\"><tr><th>Field</th><th>Baseline</th><th>This run</th></tr>\n");
        for k in keys.iter().take(MAX_FIELDS) {
            let (o, n) = (get(&old, k), get(&now, k));
            let _ = writeln!(
                html,
                "<tr{}><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                if o == n { "" } else { " class=\"differs\"" },
                escape(k),
                escape(o.as_deref().unwrap_or("(none)")),
                escape(n.as_deref().unwrap_or("(none)")),
            );
        }
        if keys.len() > MAX_FIELDS {
            let _ = writeln!(html, "<tr><td colspan=\"3\">… {} more in run.json</td></tr>", keys.len() - MAX_FIELDS);
        }
        html.push_str("</table>\n");
    };
    if !differing.is_empty() {
        table(html, &differing);
    }
    let _ = writeln!(html, "<details><summary>Every field ({})</summary>", keys.len());
    table(html, &keys);
    html.push_str("</details>\n");
}

/// The answer against the baseline's: the common start (its last characters), then each side's differing middle
/// with the first differing character marked, then the common end.
fn diff(old: &str, new: &str) -> (String, String) {
    let Some(at) = first_difference(old, new) else {
        let (shown, cut) = clip(new, SHOWN);
        return (format!("same text as the baseline: <pre>{}{}</pre>", escape(&shown), more(cut)), String::new());
    };
    let a: Vec<char> = old.chars().collect();
    let b: Vec<char> = new.chars().collect();
    let mut tail = 0;
    while tail < a.len() - at && tail < b.len() - at && a[a.len() - 1 - tail] == b[b.len() - 1 - tail] {
        tail += 1;
    }
    let from = at.saturating_sub(CONTEXT_BEFORE);
    let lead = if from > 0 { "…" } else { "" };
    let side = |chars: &[char], tag: &str| {
        let common: String = chars[from..at].iter().collect();
        let middle: Vec<char> = chars[at..chars.len() - tail].to_vec();
        let (first, rest) = match middle.split_first() {
            Some((f, r)) => (f.to_string(), r.iter().collect::<String>()),
            None => (String::new(), String::new()),
        };
        let (rest, cut) = clip(&rest, SHOWN);
        let (end, end_cut) = clip(&chars[chars.len() - tail..].iter().collect::<String>(), CONTEXT_BEFORE);
        let first = if first.is_empty() {
            "<mark title=\"nothing here\">‸</mark>".to_owned()
        } else {
            format!("<mark>{}</mark>", escape(&first))
        };
        format!(
            "<pre>{lead}{}<{tag}>{first}{}{}</{tag}>{}{}</pre>",
            escape(&common),
            escape(&rest),
            more(cut),
            escape(&end),
            more(end_cut)
        )
    };
    (
        format!("differs at character {at}"),
        format!("<p>Baseline:</p>{}<p>This run:</p>{}", side(&a, "del"), side(&b, "ins")),
    )
}

fn more(cut: usize) -> String {
    if cut == 0 { String::new() } else { format!("… ({cut} more characters in run.json)") }
}

/// The stream of a case as a small chart: characters received against seconds since the request, with the first
/// event that carried text marked.
fn stream(c: &CaseRecord) -> Option<String> {
    let a = c.answer.as_ref()?;
    if a.timeline.is_empty() {
        return None;
    }
    let mut total = 0usize;
    let points: Vec<(f64, f64)> = a
        .timeline
        .iter()
        .map(|e| {
            total += e.content.chars().count() + e.reasoning.chars().count();
            (e.t, total as f64)
        })
        .collect();
    let first = a.timeline.iter().find(|e| !e.content.is_empty() || !e.reasoning.is_empty()).map(|e| e.t);
    let marker = first.map(|t| Marker { x: t, label: format!("first text {:.0} ms", t * 1e3) });
    lines(
        SMALL,
        &format!("{}: {} events", c.id, a.timeline.len()),
        "seconds",
        "chars",
        &[("received".to_owned(), points)],
        marker.as_ref(),
    )
}

fn cases(html: &mut String, run: &RunRecord, baseline: Option<&RunRecord>) {
    html.push_str("<h2 id=\"cases\">Cases</h2>\n");
    if run.cases.is_empty() {
        return none(html, "no case ran");
    }
    html.push_str(
        "<table><tr><th>Case</th><th>Result</th><th>Tokens · seconds</th><th>Answer against the baseline</th>\
         <th>Stream</th></tr>\n",
    );
    for c in &run.cases {
        let old = baseline.and_then(|b| b.cases.iter().find(|o| o.id == c.id));
        let tokens = c.answer.as_ref().and_then(|a| a.usage).and_then(|u| u.completion_tokens);
        let took = format!(
            "{} · {}",
            tokens.map_or("—".into(), |t| t.to_string()),
            c.seconds.map_or("—".into(), |s| format!("{s:.2} s"))
        );
        let why = detail(c);
        let answer = match (old.and_then(|o| o.observed.as_deref()), c.observed.as_deref()) {
            (Some(a), Some(b)) => {
                let (summary, body) = diff(a, b);
                if body.is_empty() {
                    format!("<details><summary>same text</summary>{summary}</details>")
                } else {
                    format!("<details open><summary class=\"differs\">{}</summary>{body}</details>", escape(&summary))
                }
            }
            (None, Some(b)) => {
                let (shown, cut) = clip(b, SHOWN);
                let reason = if baseline.is_some() { "not in the baseline" } else { "no baseline" };
                format!(
                    "<details><summary>{reason}: the answer</summary><pre>{}{}</pre></details>",
                    escape(&shown),
                    more(cut)
                )
            }
            (_, None) => "—".into(),
        };
        let chart = stream(c).unwrap_or_else(|| {
            if c.stream {
                "<span class=\"muted\">no event</span>".into()
            } else {
                "<span class=\"muted\">not streamed</span>".into()
            }
        });
        let word = status_word(c);
        let _ = writeln!(
            html,
            "<tr id=\"case-{id}\"><td><code>{id}</code></td><td><span class=\"{word}\">{word}</span>{}</td>\
             <td class=\"nowrap\">{took}</td><td>{answer}</td><td class=\"chart\">{chart}</td></tr>",
            if why.is_empty() { String::new() } else { format!("<br><small>{}</small>", escape(&why)) },
            id = escape(&c.id),
        );
    }
    html.push_str("</table>\n");
}

fn speed(html: &mut String, run: &RunRecord, baseline: Option<&RunRecord>, history: &[HistoryPoint]) {
    html.push_str("<h2 id=\"history\">Decode speed and load time against the baselines</h2>\n");
    let t = &run.thresholds;
    if let Some(b) = baseline {
        let ratio = |now: Option<f64>, then: Option<f64>| match (now, then) {
            (Some(n), Some(t)) if t > 0.0 => format!("{:.2} ×", n / t),
            _ => "—".into(),
        };
        let _ = writeln!(
            html,
            "<table><tr><th></th><th>Baseline</th><th>This run</th><th>Ratio</th><th>Warns when</th></tr>\
             <tr><td>Decode tok/s</td><td>{}</td><td>{}</td><td>{}</td><td>&lt; {} × baseline</td></tr>\
             <tr><td>Load s</td><td>{}</td><td>{}</td><td>{}</td><td>&gt; {} × baseline</td></tr></table>",
            b.decode.median_tokens_per_second.map_or("—".into(), |v| format!("{v:.1}")),
            run.decode.median_tokens_per_second.map_or("—".into(), |v| format!("{v:.1}")),
            ratio(run.decode.median_tokens_per_second, b.decode.median_tokens_per_second),
            t.decode_ratio_warn,
            b.server.load_seconds.map_or("—".into(), |v| format!("{v:.2}")),
            run.server.load_seconds.map_or("—".into(), |v| format!("{v:.2}")),
            ratio(run.server.load_seconds, b.server.load_seconds),
            t.load_ratio_warn,
        );
    }
    if history.is_empty() {
        return none(html, "no promoted baseline of this identity in the store: no history to draw");
    }
    let this = HistoryPoint::of_run(run, baseline, history.last().map_or(1, |p| p.seq + 1));
    trend_charts(html, history, Some(&this), &[DECODE, LOAD]);
    html.push_str("<details><summary>The promotions</summary>\n");
    promotions_table(html, history);
    html.push_str("</details>\n");
}
