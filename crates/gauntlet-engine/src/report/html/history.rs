//! A baseline's history as the pages show it: one [`HistoryPoint`] per promotion (decode speed, load time, passed
//! cases, text changes against the promotion before, who promoted it and why), and `baseline-history.html`, the
//! trend of every identity with its chain's verification status. Pure functions of typed records: the store reads
//! and verifies, this module only draws.

use maud::{Markup, html};

use gauntlet_schema::store::HistoryEntry;
use gauntlet_schema::{CaseStatus, RunRecord};

use super::chart::line_chart;
use super::page::{chart, document, nav, none};

/// One promotion of an identity, with what its record says (when it is a gate run whose record could be read).
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPoint {
    pub seq: u64,
    pub promoted_at: String,
    /// `run` or `qualification`.
    pub kind: &'static str,
    pub profile: String,
    pub verdict: String,
    pub event: String,
    pub actor: Option<String>,
    pub commit: Option<String>,
    pub note: String,
    /// The promoted record's digest.
    pub record: String,
    pub decode: Option<f64>,
    pub load: Option<f64>,
    pub passed: Option<usize>,
    pub cases: Option<usize>,
    /// Cases whose observed text differs from the previous promoted run's (None for the first, or unknown).
    pub text_changes: Option<usize>,
    /// Why the record behind the entry could not be read.
    pub unreadable: Option<String>,
}

impl HistoryPoint {
    /// The point for `entry`: its gate run's `record` (or why it could not be read; a qualification has none),
    /// compared with the `previous` promoted run's texts.
    pub fn new(entry: &HistoryEntry, record: Result<Option<&RunRecord>, String>, previous: Option<&RunRecord>) -> Self {
        let p = &entry.provenance;
        let mut point = HistoryPoint {
            seq: entry.seq,
            promoted_at: entry.promoted_at.clone(),
            kind: if entry.is_qualification() { "qualification" } else { "run" },
            profile: entry.profile.clone(),
            verdict: entry.verdict.clone(),
            event: p.event.clone(),
            actor: p.actor.clone(),
            commit: p.commit.clone(),
            note: entry.note.clone(),
            record: entry.record.clone(),
            decode: None,
            load: None,
            passed: None,
            cases: None,
            text_changes: None,
            unreadable: None,
        };
        match record {
            Ok(Some(r)) => {
                point.decode = r.decode.median_tokens_per_second;
                point.load = r.server.load_seconds;
                point.passed = Some(r.cases.iter().filter(|c| c.status == CaseStatus::Pass).count());
                point.cases = Some(r.cases.len());
                point.text_changes = previous.map(|before| text_changes(before, r));
            }
            Ok(None) => {}
            Err(why) => point.unreadable = Some(why),
        }
        point
    }

    /// The point of a run that is not (yet) promoted: the run being reported, drawn after its baselines.
    pub fn of_run(run: &RunRecord, previous: Option<&RunRecord>, seq: u64) -> Self {
        let entry = HistoryEntry {
            seq,
            prev: None,
            kind: None,
            identity_digest: run.identity_digest.clone(),
            recipe_digest: String::new(),
            record: String::new(),
            profile: run.profile.clone(),
            verdict: run.verdict.as_str().into(),
            provenance: Default::default(),
            note: "this run".into(),
            promoted_at: run.started_at.clone(),
            digest: String::new(),
        };
        HistoryPoint::new(&entry, Ok(Some(run)), previous)
    }
}

/// Cases of `now` answered in both records whose observed text differs from `before`'s.
fn text_changes(before: &RunRecord, now: &RunRecord) -> usize {
    now.cases
        .iter()
        .filter(|c| {
            let old = before.cases.iter().find(|o| o.id == c.id).and_then(|o| o.observed.as_deref());
            matches!((old, c.observed.as_deref()), (Some(a), Some(b)) if a != b)
        })
        .count()
}

/// One identity's history as the page shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct IdentityHistory {
    pub identity_digest: String,
    /// The model named by the newest readable record, when there is one.
    pub model: Option<String>,
    pub points: Vec<HistoryPoint>,
    /// What `baseline verify` found wrong in this identity's chain and records (empty: intact).
    pub problems: Vec<String>,
}

/// The trend charts of a run of history points: decode speed, load time, passed cases and text changes, by
/// promotion number. `extra` is drawn as its own series (the run being reported, say).
pub(crate) fn trend_charts(points: &[HistoryPoint], extra: Option<&HistoryPoint>, what: &[Trend]) -> Markup {
    let drawn = what.iter().map(|trend| {
        let pick = |p: &HistoryPoint| (trend.value)(p).map(|v| (p.seq as f64, v));
        let mut series = vec![("promoted baselines".to_owned(), points.iter().filter_map(pick).collect::<Vec<_>>())];
        if let Some(e) = extra.and_then(|e| pick(e).map(|xy| (e, xy))) {
            series.push((format!("{} ({})", e.0.note, e.0.verdict), vec![e.1]));
        }
        chart(line_chart(trend.title, "promotion #", trend.unit, &series), || format!("no {} recorded", trend.title))
    });
    html! { @for c in drawn { (c) } }
}

/// One trend: its chart title, unit and how a point gives its value.
pub(crate) struct Trend {
    pub(crate) title: &'static str,
    pub(crate) unit: &'static str,
    pub(crate) value: fn(&HistoryPoint) -> Option<f64>,
}

pub(crate) const DECODE: Trend =
    Trend { title: "decode speed across promotions", unit: "tokens/s", value: |p| p.decode };
pub(crate) const LOAD: Trend = Trend { title: "load time across promotions", unit: "seconds", value: |p| p.load };
const PASSED: Trend =
    Trend { title: "passed cases across promotions", unit: "cases", value: |p| p.passed.map(|n| n as f64) };
const CHANGES: Trend = Trend {
    title: "text changes against the promotion before",
    unit: "cases",
    value: |p| p.text_changes.map(|n| n as f64),
};

/// The table of promotions: number, when, by what, verdict, the numbers and the note.
pub(crate) fn promotions_table(points: &[HistoryPoint]) -> Markup {
    let opt = |v: Option<f64>, digits: usize| v.map_or("—".to_owned(), |x| format!("{x:.digits$}"));
    html! {
        table {
            tr {
                th { "#" } th { "Promoted" } th { "Kind" } th { "By" } th { "Commit" } th { "Verdict" }
                th { "Decode tok/s" } th { "Load s" } th { "Passed" } th { "Text changes" } th { "Note" }
            } "\n"
            @for p in points {
                @let by = match &p.actor {
                    Some(a) => format!("{} by {a}", p.event),
                    None => p.event.clone(),
                };
                @let passed = match (p.passed, p.cases) {
                    (Some(n), Some(of)) => format!("{n} / {of}"),
                    _ => "—".into(),
                };
                tr {
                    td { (p.seq) } td { (p.promoted_at) } td { (p.kind) } td { (by) }
                    td { code { (p.commit.as_deref().map_or("—".into(), short)) } }
                    td class=(p.verdict) { (p.verdict) }
                    td { (opt(p.decode, 1)) } td { (opt(p.load, 2)) } td { (passed) }
                    td { (p.text_changes.map_or("—".into(), |n| n.to_string())) }
                    td {
                        (p.note)
                        @if let Some(why) = &p.unreadable { " (record unreadable: " (why) ")" }
                    }
                } "\n"
            }
        } "\n"
    }
}

/// `baseline-history.html`: per identity, the trend of every tracked number across promotions, the promotions
/// with their notes, and whether the chain verifies.
pub fn history_page(store: &str, identities: &[IdentityHistory]) -> String {
    let anchors: Vec<(String, String)> = identities
        .iter()
        .map(|h| {
            let profile = h.points.last().map_or("?", |p| p.profile.as_str());
            (format!("id-{}", h.identity_digest), format!("{profile} ({}…)", short(&h.identity_digest)))
        })
        .collect();
    let refs: Vec<(&str, &str)> = anchors.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
    let body = html! {
        p {
            "Store " code { (store) } ": " (identities.len())
            (if identities.len() == 1 { " identity." } else { " identities." })
        } "\n"
        (nav(&refs))
        @if identities.is_empty() { (none("the store has no promotion yet")) }
        @for (h, (anchor, _)) in identities.iter().zip(&anchors) {
            h2 id=(anchor) { "Profile " (h.points.last().map_or("?", |p| p.profile.as_str())) } "\n"
            dl {
                dt { "Identity" } dd { code { (h.identity_digest) } }
                @if let Some(m) = &h.model { dt { "Model" } dd { (m) } }
                dt { "Promotions" } dd { (h.points.len()) }
                dt { "Chain" }
                dd {
                    @if h.problems.is_empty() {
                        span.pass { "verified" } ": every entry's digest, sequence and link to the one before it, and \
                                                  every record's content digest, check out"
                    } @else {
                        span.fail { "BROKEN" } ": " (h.problems.len()) " problem(s)"
                    }
                }
            } "\n"
            @if !h.problems.is_empty() { ul { @for p in h.problems.iter().take(50) { li { (p) } } } "\n" }
            (trend_charts(&h.points, None, &[DECODE, LOAD, PASSED, CHANGES]))
            (promotions_table(&h.points))
        }
        p.muted { "Written by gauntlet from the store's history files and records." } "\n"
    };
    document("gauntlet baseline history", body)
}

fn short(s: &str) -> String {
    s.chars().take(12).collect()
}
