//! `report.html`: a gate run for a person, a pure function of the run record, its baseline and the baseline's
//! history. The verdict and the facts first, then the findings, the identity against the baseline's field by
//! field, one row per case (its answer against the baseline's with the first divergence marked, and its stream as
//! a small chart), and decode speed and load time against the promoted baselines. Every text that came from the
//! server or a file is escaped.

use maud::{Markup, PreEscaped, html};
use serde_json::Value;

use gauntlet_schema::diff::first_difference;
use gauntlet_schema::{CaseRecord, CaseStatus, RunRecord, ServerMode, Severity};

use super::chart::{Marker, SMALL, lines};
use super::history::{DECODE, HistoryPoint, LOAD, promotions_table, trend_charts};
use super::page::{clip, document, nav, none};
use crate::report::markdown::{detail, status_word};

/// Characters of an answer shown around its first divergence; the record has the whole text.
const CONTEXT_BEFORE: usize = 160;
const SHOWN: usize = 1600;
/// Identity fields shown; a record with more is cut, saying how many were left out.
const MAX_FIELDS: usize = 400;

pub fn render(run: &RunRecord, baseline: Option<&RunRecord>, history: &[HistoryPoint]) -> String {
    let v = run.verdict.as_str();
    let body = html! {
        p { "Verdict: " span class={ "verdict " (v) } id="verdict" { (v.to_uppercase()) } } "\n"
        (nav(&[("findings", "Findings"), ("identity", "Identity"), ("cases", "Cases"), ("history", "Decode and load")]))
        (facts(run))
        (findings(run))
        (identity(run, baseline))
        (cases(run, baseline))
        (speed(run, baseline, history))
        @if !run.server.log_tail.is_empty() {
            h2 id="log" { "Server log (last lines)" } "\n"
            pre { @for line in &run.server.log_tail { (line) "\n" } } "\n"
        }
        p.muted {
            "Written by gauntlet " (run.gauntlet_version) " from " code { "run.json" } "; "
            code { "gauntlet report run.json --format html" } " writes it again."
        } "\n"
    };
    document(&format!("gauntlet run: {}", run.profile), body)
}

fn facts(run: &RunRecord) -> Markup {
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
    let jitter = super::super::jitter_line(run).unwrap_or_else(|| "not measured".into());
    let mut rows = vec![
        ("Model", model),
        ("Server", server),
        ("Load time", load),
        ("Decode", decode),
        ("Cases", cases),
        ("Baseline", base),
        ("Text jitter vs baseline", jitter),
        ("Started", format!("{} ({:.1} s)", run.started_at, run.wall_seconds)),
        ("Identity", run.identity_digest.clone()),
    ];
    for (k, v) in [
        ("Speed check", super::super::speed_check_line(run)),
        ("Draft", super::super::draft_line(run)),
        ("Lossless", super::super::lossless_line(run)),
    ] {
        rows.extend(v.map(|v| (k, v)));
    }
    html! {
        dl { @for (k, v) in &rows { dt { (k) } dd id=(k.to_lowercase().replace(' ', "-")) { (v) } } } "\n"
    }
}

fn findings(run: &RunRecord) -> Markup {
    html! {
        h2 id="findings" { "Findings" } "\n"
        @if run.findings.is_empty() {
            (none("no finding"))
        } @else {
            ul {
                "\n"
                @for f in crate::report::ordered(&run.findings) {
                    @let class = match f.severity {
                        Severity::Fail => "fail",
                        Severity::Warn => "warn",
                        Severity::Info => "muted",
                    };
                    li {
                        span class=(class) { (class.replace("muted", "note")) } " " b { (f.kind.to_string()) }
                        @if let Some(c) = &f.case { " " code { (c) } }
                        ": " (f.message)
                    } "\n"
                }
            } "\n"
        }
    }
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

fn identity(run: &RunRecord, baseline: Option<&RunRecord>) -> Markup {
    let mut now = Vec::new();
    leaves(&run.identity.to_value(), "identity".into(), &mut now);
    leaves(&run.runtime, "runtime".into(), &mut now);
    let title = html! { h2 id="identity" { "Identity against the baseline" } "\n" };
    let Some(b) = baseline else {
        return html! {
            (title)
            (none("no baseline: the identity as this run recorded it"))
            details {
                summary { "Every field (" (now.len()) ")" } "\n"
                table.fields {
                    tr { th { "Field" } th { "This run" } } "\n"
                    @for (k, v) in now.iter().take(MAX_FIELDS) { tr { td { code { (k) } } td { (v) } } "\n" }
                }
            } "\n"
        };
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
    let table = |keys: &[&String]| {
        html! {
            table.fields {
                tr { th { "Field" } th { "Baseline" } th { "This run" } } "\n"
                @for k in keys.iter().take(MAX_FIELDS) {
                    @let (o, n) = (get(&old, k), get(&now, k));
                    tr class=[(o != n).then_some("differs")] {
                        td { code { (k) } }
                        td { (o.as_deref().unwrap_or("(none)")) }
                        td { (n.as_deref().unwrap_or("(none)")) }
                    } "\n"
                }
                @if keys.len() > MAX_FIELDS {
                    tr { td colspan="3" { "… " (keys.len() - MAX_FIELDS) " more in run.json" } } "\n"
                }
            } "\n"
        }
    };
    html! {
        (title)
        p {
            (keys.len()) " field(s), "
            span class=(if differing.is_empty() { "pass" } else { "differs" }) { (differing.len()) " differ" }
            "; identity digest " (if same_digest { "the same" } else { "differs" }) ". Fields under "
            code { "runtime" } " and " code { "identity.build" } " only warn."
        } "\n"
        @if !differing.is_empty() { (table(&differing)) }
        details { summary { "Every field (" (keys.len()) ")" } "\n" (table(&keys)) } "\n"
    }
}

/// The answer against the baseline's: the common start (its last characters), then each side's differing middle
/// with the first differing character marked, then the common end. `None` when the texts are the same.
fn diff(old: &str, new: &str) -> Option<(usize, Markup)> {
    let at = first_difference(old, new)?;
    let a: Vec<char> = old.chars().collect();
    let b: Vec<char> = new.chars().collect();
    let mut tail = 0;
    while tail < a.len() - at && tail < b.len() - at && a[a.len() - 1 - tail] == b[b.len() - 1 - tail] {
        tail += 1;
    }
    let from = at.saturating_sub(CONTEXT_BEFORE);
    let lead = if from > 0 { "…" } else { "" };
    let side = |chars: &[char], inserted: bool| {
        let common: String = chars[from..at].iter().collect();
        let middle: Vec<char> = chars[at..chars.len() - tail].to_vec();
        let (first, rest) = match middle.split_first() {
            Some((f, r)) => (f.to_string(), r.iter().collect::<String>()),
            None => (String::new(), String::new()),
        };
        let (rest, cut) = clip(&rest, SHOWN);
        let (end, end_cut) = clip(&chars[chars.len() - tail..].iter().collect::<String>(), CONTEXT_BEFORE);
        let changed = html! {
            @if first.is_empty() { mark title="nothing here" { "‸" } } @else { mark { (first) } }
            (rest) (more(cut))
        };
        html! {
            pre {
                (lead) (common)
                @if inserted { ins { (changed) } } @else { del { (changed) } }
                (end) (more(end_cut))
            }
        }
    };
    Some((at, html! { p { "Baseline:" } (side(&a, false)) p { "This run:" } (side(&b, true)) }))
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

fn cases(run: &RunRecord, baseline: Option<&RunRecord>) -> Markup {
    let title = html! { h2 id="cases" { "Cases" } "\n" };
    if run.cases.is_empty() {
        return html! { (title) (none("no case ran")) };
    }
    let answer = |c: &CaseRecord| {
        let old = baseline.and_then(|b| b.cases.iter().find(|o| o.id == c.id));
        match (old.and_then(|o| o.observed.as_deref()), c.observed.as_deref()) {
            (Some(a), Some(b)) => match diff(a, b) {
                Some((at, body)) => html! {
                    details open { summary.differs { "differs at character " (at) } (body) }
                },
                None => {
                    let (shown, cut) = clip(b, SHOWN);
                    html! {
                        details { summary { "same text" } "same text as the baseline: " pre { (shown) (more(cut)) } }
                    }
                }
            },
            (None, Some(b)) => {
                let (shown, cut) = clip(b, SHOWN);
                let reason = if baseline.is_some() { "not in the baseline" } else { "no baseline" };
                html! { details { summary { (reason) ": the answer" } pre { (shown) (more(cut)) } } }
            }
            (_, None) => html! { "—" },
        }
    };
    html! {
        (title)
        table {
            tr {
                th { "Case" } th { "Result" } th { "Tokens · seconds" } th { "Answer against the baseline" }
                th { "Stream" }
            } "\n"
            @for c in &run.cases {
                @let tokens = c.answer.as_ref().and_then(|a| a.usage).and_then(|u| u.completion_tokens);
                @let why = detail(c);
                @let word = status_word(c);
                tr id={ "case-" (c.id) } {
                    td { code { (c.id) } }
                    td { span class=(word) { (word) } @if !why.is_empty() { br; small { (why) } } }
                    td.nowrap {
                        (tokens.map_or("—".into(), |t| t.to_string())) " · "
                        (c.seconds.map_or("—".into(), |s| format!("{s:.2} s")))
                    }
                    td { (answer(c)) }
                    td.chart {
                        @match stream(c) {
                            Some(svg) => (PreEscaped(svg)),
                            None => span.muted { (if c.stream { "no event" } else { "not streamed" }) },
                        }
                    }
                } "\n"
            }
        } "\n"
    }
}

fn speed(run: &RunRecord, baseline: Option<&RunRecord>, history: &[HistoryPoint]) -> Markup {
    let t = &run.thresholds;
    let ratio = |now: Option<f64>, then: Option<f64>| match (now, then) {
        (Some(n), Some(t)) if t > 0.0 => format!("{:.2} ×", n / t),
        _ => "—".into(),
    };
    let fixed = |v: Option<f64>, digits: usize| v.map_or("—".into(), |v| format!("{v:.digits$}"));
    let (decode, load) = (run.decode.median_tokens_per_second, run.server.load_seconds);
    html! {
        h2 id="history" { "Decode speed and load time against the baselines" } "\n"
        @if let Some(b) = baseline {
            @let (b_decode, b_load) = (b.decode.median_tokens_per_second, b.server.load_seconds);
            table {
                tr { th {} th { "Baseline" } th { "This run" } th { "Ratio" } th { "Warns when" } }
                tr {
                    td { "Decode tok/s" } td { (fixed(b_decode, 1)) } td { (fixed(decode, 1)) }
                    td { (ratio(decode, b_decode)) } td { "< " (t.decode_ratio_warn) " × baseline" }
                }
                tr {
                    td { "Load s" } td { (fixed(b_load, 2)) } td { (fixed(load, 2)) }
                    td { (ratio(load, b_load)) } td { "> " (t.load_ratio_warn) " × baseline" }
                }
            } "\n"
        }
        @if history.is_empty() {
            (none("no promoted baseline of this identity in the store: no history to draw"))
        } @else {
            @let this = HistoryPoint::of_run(run, baseline, history.last().map_or(1, |p| p.seq + 1));
            (trend_charts(history, Some(&this), &[DECODE, LOAD]))
            details { summary { "The promotions" } "\n" (promotions_table(history)) } "\n"
        }
    }
}
