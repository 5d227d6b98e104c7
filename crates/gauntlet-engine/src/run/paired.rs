//! `gauntlet bench --profile B --paired-with A`: one request at a time, A and B in ABBA / BAAB order with the same
//! prompt for both members of a pair, per-pair log ratios judged per ABBA block by `crate::bench::paired` (the
//! crossover analysis), stopping at the first look where every deciding metric is decided ([`deciding`]). Writes
//! `paired.json` (versioned: [`PAIRED_VERSION`]) and `paired.md`.
//!
//! Both servers are up at once (`both`), or, when `[profiles.B.bench] paired = "alternate"` says they cannot share
//! the device, one at a time (`alternate`): the server of the next member is started when the order switches
//! member (once per pair in ABBA order, since a pair ends with the member the next one starts with), and the
//! previous one stopped first. Each such start costs a load, and its first request is a discarded warm-up.
//!
//! Each member's requests go through its own measuring room (`super::room`): the same transport, limits and
//! timelines as the bench's, one request a batch.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use gauntlet_schema::bench::{BenchVerdict, Better, Call, RequestRecord, Workload};
pub use gauntlet_schema::paired::{EqualWork, PAIRED_VERSION, Pair, PairedRecord, PeriodEffect, Side};
use gauntlet_schema::{Metric, Problem, ProblemCode, StopOutcome};
use serde_json::{Map, Value, json};

use super::room::{Ask, Limits, Room, to_timeline};
use super::{GateError, Reporter, RunEvent};
use crate::bench::metrics::{self, RequestMetrics, server_clock_words};
use crate::bench::paired::{self as stats, Member, MetricVerdict, PairedRules};
use crate::client::TokenDialect;
use crate::identity::Identity;
use crate::manifest::Profile;
use crate::session::{Session, SessionOptions};

/// How the two servers share the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PairedMode {
    Both,
    Alternate,
}

#[derive(Debug, Clone)]
pub struct PairedOptions {
    pub min_pairs: usize,
    pub max_pairs: usize,
    pub mode: PairedMode,
    /// The benched profile's `[profiles.P.bench] decide` (names of [`Metric::decide_name`]); `None`: the default
    /// ([`deciding`]).
    pub decide: Option<Vec<String>>,
}

/// A prompt of at least this many characters (about 500 tokens of English) is long: its prefill is a real part
/// of a request, and TTFT decides by default.
pub const LONG_PROMPT_CHARS: usize = 2000;

/// The metrics the verdict rests on (their `paired.json` names) and why those: the profile's `decide` list when
/// it gives one; else decode rate and E2EL, and TTFT too when the prompts this bench sends (one per pair, after
/// the warm-ups) are long: their median at least [`LONG_PROMPT_CHARS`] characters.
pub fn deciding(decide: Option<&[String]>, workload: &Workload, max_pairs: usize) -> (Vec<String>, String) {
    let (metrics, why) = deciding_metrics(decide, workload, max_pairs);
    (metrics.iter().filter_map(|m| m.paired_key()).map(str::to_owned).collect(), why)
}

/// The metrics a bench's verdict rests on, as [`Metric::PAIRED`]'s (the names `decide` takes), and why those: the
/// profile's `decide` list when it gives one; else decode rate and E2EL, and TTFT too when the first `prompts`
/// prompts after the warm-ups are long (their median at least [`LONG_PROMPT_CHARS`] characters). The paired bench
/// judges them under their paired keys ([`deciding`]), a comparison with a stored baseline under its own
/// (`run::bench`).
pub fn deciding_metrics(decide: Option<&[String]>, workload: &Workload, prompts: usize) -> (Vec<Metric>, String) {
    let full = |short: &str| Metric::PAIRED.iter().copied().find(|m| m.decide_name() == Some(short));
    if let Some(names) = decide.filter(|d| !d.is_empty()) {
        let chosen: Vec<Metric> = Metric::PAIRED
            .iter()
            .copied()
            .filter(|m| m.decide_name().is_some_and(|short| names.iter().any(|n| n == short)))
            .collect();
        if !chosen.is_empty() {
            return (chosen, format!("the profile's `decide = [{}]`", names.join(", ")));
        }
    }
    let mut lengths: Vec<usize> =
        (0..prompts.max(1)).map(|i| workload.prompt(workload.warmups + i).chars().count()).collect();
    lengths.sort_unstable();
    let median = lengths[lengths.len() / 2];
    let long = median >= LONG_PROMPT_CHARS;
    let shorts: &[&str] = if long { &["decode", "ttft", "e2el"] } else { &["decode", "e2el"] };
    let chosen = shorts.iter().filter_map(|s| full(s)).collect();
    let why = if long {
        format!(
            "the default for long prompts (median {median} characters, at least {LONG_PROMPT_CHARS}): decode, \
             TTFT and E2EL"
        )
    } else {
        format!(
            "the default for a decode-heavy workload (median prompt {median} characters, under \
             {LONG_PROMPT_CHARS}): decode and E2EL"
        )
    };
    (chosen, why)
}

/// The paired metrics with their keys in `paired.json`, in [`Metric::PAIRED`]'s order.
fn judged_metrics() -> impl Iterator<Item = (Metric, &'static str)> {
    Metric::PAIRED.iter().map(|m| (*m, m.paired_key().unwrap_or(m.key())))
}

/// A paired metric's value in one request: [`Metric::PAIRED`]'s computation.
fn value_of(m: &RequestMetrics, metric: Metric) -> Option<f64> {
    match metric {
        Metric::DecodeRate => m.decode_tokens_per_second,
        Metric::TtftMean => Some(m.ttft),
        // The request's mean gap per output token: (e2el − ttft) / (n − 1), vLLM's TPOT.
        Metric::TpotMean => m.tpot,
        Metric::E2elMean => Some(m.e2el),
        Metric::OutputThroughput
        | Metric::TtftP50
        | Metric::TtftP99
        | Metric::ItlP99
        | Metric::E2elP50
        | Metric::E2elP99
        | Metric::ErrorRate
        | Metric::Goodput
        | Metric::StructuredRate => None,
    }
    .filter(|v| v.is_finite() && *v > 0.0)
}

/// The decode metric's key in `paired.json` ([`Metric::DecodeRate`]'s).
fn decode_name() -> &'static str {
    Metric::DecodeRate.paired_key().unwrap_or(Metric::DecodeRate.key())
}
/// A pair's decode rates on the servers' own clocks (llama.cpp's `timings.predicted_per_second`, and each engine's
/// equivalent: `ServerTimings`), kept beside the client's: the decode metric is judged on them when every pair has
/// them from one engine ([`decode_key`]).
pub const SERVER_DECODE: &str = "server_decode_tokens_per_second";

/// The server's own decode rate of one request, when it sent one.
fn server_rate(r: &RequestRecord) -> Option<f64> {
    r.timings.and_then(|t| t.predicted_per_second).filter(|v| v.is_finite() && *v > 0.0)
}

/// Which of a pair's values the decode metric is judged on, and the words for that clock: the servers' own rates
/// ([`SERVER_DECODE`]) when every pair with a decode value has both members' server rates from one engine (a
/// request's rate on the client's clock carries the client's scheduling; the server's does not), else the
/// client's ([`Metric::DecodeRate`]) with the reason.
pub fn decode_key(pairs: &[Pair]) -> (&'static str, String) {
    let mut engine = None;
    for p in pairs.iter().filter(|p| p.values.contains_key(decode_name())) {
        if !p.values.contains_key(SERVER_DECODE) {
            return (decode_name(), "client clock (not every request carried the server's own decode rate)".into());
        }
        let (a, b) = (p.a.timings.map(|t| t.source), p.b.timings.map(|t| t.source));
        if a != b || (engine.is_some() && engine != a) {
            return (decode_name(), "client clock (the two servers' timings come from different engines)".into());
        }
        engine = a;
    }
    match engine {
        Some(e) => (SERVER_DECODE, server_clock_words(e.as_str())),
        None => (decode_name(), "client clock (no pair with a decode rate)".into()),
    }
}

/// Per metric, `[A, B]` of one pair; a metric missing or zero on a side is left out.
fn values(a: &RequestMetrics, b: &RequestMetrics) -> BTreeMap<String, [f64; 2]> {
    judged_metrics()
        .filter_map(|(metric, name)| Some((name.to_owned(), [value_of(a, metric)?, value_of(b, metric)?])))
        .collect()
}

/// One member's server and its measuring room.
struct Server {
    session: Session,
    room: Room,
}

impl Server {
    /// One streamed request with prompt `index`, on a connection opened before it was sent.
    async fn request(&mut self, workload: &Workload, index: usize, extra: &Map<String, Value>) -> RequestRecord {
        let mut batch = self.room.batch(&Ask { workload, concurrency: 1, index, extra }).await;
        batch.requests.pop().unwrap_or(RequestRecord {
            start: 0.0,
            events: Vec::new(),
            completion_tokens: None,
            error: Some("no request was sent".into()),
            connected: false,
            text_dropped: 0,
            timings: None,
            ..Default::default()
        })
    }
}

/// What happened to the sessions: their stops, starts, findings and problems.
#[derive(Default)]
struct Ledger {
    stops: [Vec<String>; 2],
    starts: [usize; 2],
    server_metrics: [Vec<gauntlet_schema::ServerMetrics>; 2],
    findings: Vec<gauntlet_schema::Finding>,
    problems: Vec<Problem>,
}

fn slot(m: Member) -> usize {
    match m {
        Member::A => 0,
        Member::B => 1,
    }
}

#[allow(clippy::too_many_arguments)]
fn open(
    member: Member,
    profile: &Profile,
    out_dir: &Path,
    rt: &tokio::runtime::Runtime,
    reporter: &mut dyn Reporter,
    ledger: &mut Ledger,
    workload: &Workload,
    extra: &Map<String, Value>,
) -> Result<Option<Server>, GateError> {
    let dir = out_dir.join(match member {
        Member::A => "a",
        Member::B => "b",
    });
    let opts = SessionOptions { out_dir: &dir, ready_limit: None, built: None, announce_cases: None };
    let mut session = Session::open(profile, opts, rt, reporter)?;
    ledger.starts[slot(member)] += 1;
    if let Err(why) = &session.load {
        let text = format!("{member:?} (`{}`): the server did not load: {why}", profile.name);
        ledger.problems.push(Problem::new(ProblemCode::NotLoaded, text));
        close(member, profile, session, rt, ledger);
        return Ok(None);
    }
    session.scrape_metrics_before(rt);
    let limits = Limits::of(profile.request_timeout, workload);
    let room = rt.block_on(Room::open(&session.client, &profile.request_model, limits)).without_settle();
    let mut server = Server { session, room };
    // Warm-ups, discarded: a fresh server's first answers are slower than its steady state.
    for i in 0..workload.warmups {
        rt.block_on(server.request(workload, i, extra));
    }
    Ok(Some(server))
}

fn close(member: Member, profile: &Profile, mut session: Session, rt: &tokio::runtime::Runtime, ledger: &mut Ledger) {
    // None when the session did not scrape before (it did not load, or no metrics path).
    if let Some(m) = session.scrape_metrics_after(rt) {
        ledger.server_metrics[slot(member)].push(m);
    }
    let (closed, sentry_findings) = session.close(profile, false, &Value::Null);
    let stop = closed.stop;
    if !matches!(stop, StopOutcome::Terminated | StopOutcome::Attached) {
        let text = format!("{member:?} (`{}`): server stop: {stop}", profile.name);
        ledger.problems.push(Problem::new(ProblemCode::ServerStop, text));
    }
    ledger.stops[slot(member)].push(stop.as_str().to_owned());
    ledger.findings.extend(closed.life.findings);
    ledger.findings.extend(sentry_findings);
}

/// Runs the paired bench of `b` against `a` and writes `paired.json` and `paired.md` into `out_dir`.
#[allow(clippy::too_many_arguments)]
pub fn run_paired(
    a: &Profile,
    b: &Profile,
    identities: (&Identity, &Identity),
    workload: &Workload,
    options: &PairedOptions,
    out_dir: &Path,
    reporter: &mut dyn Reporter,
) -> Result<PairedRecord, GateError> {
    let started_at = crate::util::now_rfc3339();
    let rules = PairedRules::default();
    let schedule = stats::looks(options.min_pairs, options.max_pairs);
    let alpha_look = rules.alpha / schedule.len() as f64;
    let (decide, deciding_why) = deciding(options.decide.as_deref(), workload, options.max_pairs);
    // Equal work: the same number of decoded tokens (llama.cpp and vLLM honour `ignore_eos`), and the whole
    // prompt prefilled by both (a shared server would otherwise answer the second member from its prompt cache).
    let mut extra = Map::new();
    extra.insert("ignore_eos".into(), json!(true));
    let mut cache_body = Value::Object(Map::new());
    let prompt_cache_off = TokenDialect::default_engine().skip_prompt_cache(&mut cache_body);
    if let Value::Object(m) = cache_body {
        extra.extend(m);
    }
    let profiles = [a, b];
    let rt = crate::util::measuring_runtime();
    let mut ledger = Ledger::default();
    let mut servers: [Option<Server>; 2] = [None, None];
    let mut load_failed = false;
    if options.mode == PairedMode::Both {
        for m in [Member::A, Member::B] {
            match open(m, profiles[slot(m)], out_dir, &rt, reporter, &mut ledger, workload, &extra) {
                Ok(s) => {
                    load_failed |= s.is_none();
                    servers[slot(m)] = s;
                }
                Err(e) => {
                    // B could not be opened (a busy GPU, …): A's server is stopped before the error goes up.
                    if let Some(s) = servers[0].take() {
                        close(Member::A, a, s.session, &rt, &mut ledger);
                    }
                    return Err(e);
                }
            }
        }
    }
    let mut pairs: Vec<Pair> = Vec::new();
    let mut verdicts: Vec<MetricVerdict> = Vec::new();
    let mut stopped = String::new();
    let order = stats::order(options.max_pairs);
    'pairs: for (i, members) in order.iter().enumerate() {
        if load_failed {
            stopped = "a server did not load".into();
            break;
        }
        let prompt = workload.warmups + i;
        let mut got: [Option<RequestRecord>; 2] = [None, None];
        for &m in members {
            if servers[slot(m)].is_none() {
                // Alternate: stop the other member's server, then start this one's.
                let other = 1 - slot(m);
                if let Some(s) = servers[other].take() {
                    let other_member = if other == 0 { Member::A } else { Member::B };
                    close(other_member, profiles[other], s.session, &rt, &mut ledger);
                }
                match open(m, profiles[slot(m)], out_dir, &rt, reporter, &mut ledger, workload, &extra)? {
                    Some(s) => servers[slot(m)] = Some(s),
                    None => {
                        load_failed = true;
                        stopped = "a server did not load".into();
                        break 'pairs;
                    }
                }
            }
            let server = servers[slot(m)].as_mut().expect("opened above");
            let record = rt.block_on(server.request(workload, prompt, &extra));
            if server.session.exited().is_some() {
                let text = format!("{m:?} (`{}`): the server died at pair {}", profiles[slot(m)].name, i + 1);
                ledger.problems.push(Problem::new(ProblemCode::ServerDied, text));
                got[slot(m)] = Some(record);
                stopped = "a server died".into();
                break 'pairs;
            }
            got[slot(m)] = Some(record);
        }
        let [Some(ra), Some(rb)] = got else { break };
        let (ma, mb) = (metrics::request(&to_timeline(&ra, workload.max_tokens)), {
            metrics::request(&to_timeline(&rb, workload.max_tokens))
        });
        let values = match (&ma, &mb) {
            (Ok(x), Ok(y)) => {
                let mut v = values(x, y);
                if let (Some(sa), Some(sb), true) = (server_rate(&ra), server_rate(&rb), v.contains_key(decode_name()))
                {
                    v.insert(SERVER_DECODE.to_owned(), [sa, sb]);
                }
                v
            }
            _ => BTreeMap::new(),
        };
        let ratios = values.iter().map(|(k, [a, b])| (k.clone(), (b / a).ln())).collect();
        for (m, r) in [(Member::A, &ma), (Member::B, &mb)] {
            if let Err(e) = r {
                let text = format!("pair {}: {m:?}'s request failed: {e}", i + 1);
                ledger.problems.push(Problem::new(ProblemCode::RequestFailed, text));
            }
        }
        pairs.push(Pair { order: *members, prompt, a: ra, b: rb, log_ratios: ratios, values });
        reporter.event(&RunEvent::Note(format!("pair {} of at most {}", pairs.len(), options.max_pairs)));
        if ma.is_err() || mb.is_err() {
            stopped = "a request failed".into();
            break;
        }
        let done = pairs.len();
        if schedule.contains(&done) {
            verdicts = judge_all(&pairs, &rules, alpha_look, &decide);
            if stats::stop_after(done, &schedule, &verdicts) {
                stopped = if verdicts.iter().filter(|v| v.deciding).all(|v| v.call != Call::Inconclusive) {
                    format!("every deciding metric decided at the look after {done} pairs")
                } else {
                    format!("the last look ({done} pairs) left a deciding metric undecided")
                };
                break;
            }
        }
    }
    for (i, s) in servers.into_iter().enumerate() {
        if let Some(s) = s {
            let m = if i == 0 { Member::A } else { Member::B };
            close(m, profiles[i], s.session, &rt, &mut ledger);
        }
    }
    drop(rt);
    let failed = load_failed
        || pairs.iter().any(|p| p.a.error.is_some() || p.b.error.is_some())
        || ledger.findings.iter().any(|f| f.severity == gauntlet_schema::Severity::Fail)
        || ledger.problems.iter().any(|p| p.code == ProblemCode::ServerDied);
    for f in ledger.findings.iter().filter(|f| f.severity == gauntlet_schema::Severity::Fail) {
        ledger.problems.push(Problem::new(ProblemCode::FailFinding, format!("{}: {}", f.kind, f.message)));
    }
    // Only the deciding metrics make the verdict; the others are reported.
    let calls: Vec<Call> = verdicts.iter().filter(|v| v.deciding).map(|v| v.call).collect();
    let verdict = if failed {
        BenchVerdict::Fail
    } else if calls.contains(&Call::Regression) {
        BenchVerdict::Regression
    } else if calls.contains(&Call::Inconclusive) || calls.is_empty() {
        BenchVerdict::Inconclusive
    } else if calls.contains(&Call::Improvement) {
        BenchVerdict::Improvement
    } else {
        BenchVerdict::Pass
    };
    let equal_pairs = pairs
        .iter()
        .filter(|p| p.a.completion_tokens.is_some() && p.a.completion_tokens == p.b.completion_tokens)
        .count();
    let side = |i: usize, id: &Identity| Side {
        profile: profiles[i].name.clone(),
        identity_digest: id.digest.clone(),
        stops: ledger.stops[i].clone(),
        starts: ledger.starts[i],
        server_metrics: ledger.server_metrics[i].clone(),
    };
    let (decode_key, decode_clock) = decode_key(&pairs);
    let period_effects = judged_metrics()
        .filter_map(|(metric, name)| {
            let key = if metric == Metric::DecodeRate { decode_key } else { name };
            stats::period_effect(name, &stats::blocks(&series(&pairs, key)), metric.better(), &rules)
        })
        .collect();
    let left_out = (pairs.len() % 2 == 1).then(|| {
        format!(
            "pair {} (the last) has no partner in an ABBA block: its ratios are recorded, not analysed (alone, a \
             ratio carries the first-versus-second effect uncancelled)",
            pairs.len()
        )
    });
    let false_call_bound = stats::false_regression_bound(&schedule, rules.alpha, decide.len());
    let record = PairedRecord {
        paired_version: PAIRED_VERSION,
        gauntlet_version: env!("CARGO_PKG_VERSION").into(),
        started_at,
        a: side(0, identities.0),
        b: side(1, identities.1),
        mode: match options.mode {
            PairedMode::Both => "both".into(),
            PairedMode::Alternate => "alternate".into(),
        },
        workload: workload.clone(),
        min_pairs: options.min_pairs,
        max_pairs: options.max_pairs,
        looks: schedule,
        rules,
        equal_work: EqualWork { ignore_eos: true, prompt_cache_off, equal_pairs, pairs: pairs.len() },
        pairs,
        false_call_bound: Some(false_call_bound),
        deciding: decide,
        deciding_why,
        metrics: verdicts,
        period_effects,
        left_out,
        decode_clock: Some(decode_clock),
        stopped,
        verdict,
        problems: ledger.problems,
        findings: ledger.findings,
    };
    write_paired(&record, out_dir)?;
    Ok(record)
}

/// One metric's pairs for the crossover analysis: each pair's order and `[A, B]` values.
fn series(pairs: &[Pair], metric: &str) -> Vec<stats::PairValues> {
    pairs.iter().map(|p| (p.order, p.values.get(metric).copied())).collect()
}

/// Every metric's verdict at one look, on its ABBA blocks: the look's level shared by the deciding metrics (Holm),
/// so two or three deciding metrics do not give an unchanged twin as many chances of a false call; a metric that
/// does not decide is judged at the look's whole level, for the report only.
fn judge_all(pairs: &[Pair], rules: &PairedRules, alpha_look: f64, decide: &[String]) -> Vec<MetricVerdict> {
    let (decode_key, _) = decode_key(pairs);
    let judged: Vec<(&str, Better, stats::Blocks, bool)> = judged_metrics()
        .map(|(metric, name)| {
            let key = if metric == Metric::DecodeRate { decode_key } else { name };
            (name, metric.better(), stats::blocks(&series(pairs, key)), decide.iter().any(|d| d == name))
        })
        .collect();
    let p_values: Vec<Option<f64>> =
        judged.iter().filter(|j| j.3).map(|(_, _, b, _)| stats::signed_rank_p(&b.means)).collect();
    let mut levels = stats::holm_levels(&p_values, alpha_look).into_iter();
    judged
        .iter()
        .filter_map(|(name, better, blocks, decides)| {
            let level = if *decides { levels.next().unwrap_or(alpha_look) } else { alpha_look };
            stats::judge_blocks(name, blocks, *better, rules, level, *decides)
        })
        .collect()
}

/// Writes `paired.json` and `paired.md` into `out_dir`, each atomically.
pub fn write_paired(record: &PairedRecord, out_dir: &Path) -> Result<(), GateError> {
    std::fs::create_dir_all(out_dir).map_err(|source| GateError::Out { path: out_dir.into(), source })?;
    let text = serde_json::to_vec_pretty(record).expect("serializable");
    for (name, bytes) in [("paired.json", text), ("paired.md", markdown(record).into_bytes())] {
        crate::util::write_atomic(&out_dir.join(name), &bytes)
            .map_err(|source| GateError::Out { path: out_dir.into(), source })?;
    }
    Ok(())
}

fn pct(x: f64) -> String {
    format!("{:+.1} %", x * 100.0)
}

/// "with 4 looks (8, 12, 16, 20 pairs) and 2 deciding metrics, an unchanged twin has a deciding metric called a
/// regression at most 0.59 % of the time (…)": the record's `false_call_bound` in words; `None` in records before it.
pub fn false_call_line(r: &PairedRecord) -> Option<String> {
    let bound = r.false_call_bound?;
    let looks: Vec<String> = r.looks.iter().map(usize::to_string).collect();
    Some(format!(
        "with {} look{} ({} pairs) and {} deciding metric{}, an unchanged twin has a deciding metric called a \
         regression at most {:.2} % of the time (exact under the signed-rank test's null, whatever the noise's size \
         or shape, if the ABBA blocks are independent)",
        r.looks.len(),
        if r.looks.len() == 1 { "" } else { "s" },
        looks.join(", "),
        r.deciding.len(),
        if r.deciding.len() == 1 { "" } else { "s" },
        bound * 100.0
    ))
}

/// One line per metric: "decode_tokens_per_second: −11.8 % (99.4 % interval −13.0 % … −10.5 %), p = 0.0020, MDE
/// 2.1 %, 10 blocks: regression (why)", "(reported, not deciding)" after a metric the verdict does not rest on.
pub fn metric_line(v: &MetricVerdict) -> String {
    format!(
        "{}{}: {} ({:.1} % interval {} … {}), {}, MDE {}, {} blocks: {} ({})",
        v.metric,
        if v.deciding { "" } else { " (reported, not deciding)" },
        pct(v.median_change),
        v.confidence * 100.0,
        pct(v.interval.0),
        pct(v.interval.1),
        v.p_value.map_or("p undefined".to_owned(), |p| format!("p = {p:.4}")),
        v.mde.map_or("unknown (one block)".to_owned(), |m| format!("{:.1} %", m * 100.0)),
        v.blocks,
        v.call.as_str(),
        v.why
    )
}

/// One line per period effect: "ttft: the first request of a pair +410.0 % against the second (95.0 % interval
/// … ), p = …", then its sentence when large.
pub fn period_line(e: &PeriodEffect) -> String {
    let mut s = format!(
        "{}: first request of a pair {} against the second ({:.1} % interval {} … {}), {}, {} blocks",
        e.metric,
        pct(e.change),
        e.confidence * 100.0,
        pct(e.interval.0),
        pct(e.interval.1),
        e.p_value.map_or("p undefined".to_owned(), |p| format!("p = {p:.4}")),
        e.blocks
    );
    if let Some(sentence) = &e.sentence {
        let _ = write!(s, ": {sentence}");
    }
    s
}

/// `paired.md`: the verdict, the per-metric table and how it was measured.
pub fn markdown(r: &PairedRecord) -> String {
    let esc = crate::report::markdown::text;
    let code = crate::report::markdown::code;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Paired bench: {} (B) against {} (A): {}\n",
        code(&r.b.profile),
        code(&r.a.profile),
        r.verdict.as_str()
    );
    let _ = writeln!(
        s,
        "{} pairs in ABBA order ({}), {}; judged per ABBA block (the mean of a block's two ratios cancels a \
         first-versus-second effect); looks at {:?} pairs, each at alpha {:.4} (Bonferroni over the looks), shared \
         by the deciding metrics (Holm: each metric's level is in its line of paired.json).\n",
        r.pairs.len(),
        if r.mode == "both" { "both servers up at once" } else { "one server at a time, restarted at each switch" },
        esc(&r.stopped),
        r.looks,
        r.rules.alpha / r.looks.len().max(1) as f64
    );
    let _ = writeln!(s, "Deciding metrics: {} ({}).\n", r.deciding.join(", "), esc(&r.deciding_why));
    // Records before version 4 timed decode on the client's clock only.
    let clock = r.decode_clock.as_deref().unwrap_or("client clock");
    let _ = writeln!(s, "Decode: {}.\n", esc(clock));
    let _ = writeln!(
        s,
        "| metric | decides | B vs A (median) | interval | p | level | MDE (80 % power) | blocks | sd pairs / blocks \
         | call |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|");
    let sd = |x: Option<f64>| x.map_or("—".to_owned(), |x| format!("{x:.3}"));
    for v in &r.metrics {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} … {} | {} | {:.4} | {} | {} | {} / {} | {} |",
            v.metric,
            if v.deciding { "yes" } else { "no" },
            pct(v.median_change),
            pct(v.interval.0),
            pct(v.interval.1),
            v.p_value.map_or("—".to_owned(), |p| format!("{p:.4}")),
            v.alpha,
            v.mde.map_or("—".to_owned(), |m| format!("{:.1} %", m * 100.0)),
            v.blocks,
            sd(v.pair_sd),
            sd(v.block_sd),
            v.call.as_str()
        );
    }
    if !r.period_effects.is_empty() {
        let _ = writeln!(s, "\nPeriod effect (the first request of a pair against the second, whichever member):\n");
        for e in &r.period_effects {
            let _ = writeln!(s, "- {}", esc(&period_line(e)));
        }
    }
    if let Some(l) = &r.left_out {
        let _ = writeln!(s, "\n- Left out: {}.", esc(l));
    }
    let w = &r.equal_work;
    let _ = writeln!(
        s,
        "\n- Equal work: `ignore_eos` sent with max_tokens {}: {} of {} pairs decoded the same number of tokens; \
         prompt cache {}.",
        r.workload.max_tokens,
        w.equal_pairs,
        w.pairs,
        if w.prompt_cache_off { "asked off (`cache_prompt: false`)" } else { "not asked off" }
    );
    let _ = writeln!(
        s,
        "- Calls: a change needs the whole interval beyond the ±{:.1} % noise band and p below the look's alpha; \
         no change needs the whole interval within ±{:.1} %.",
        r.rules.noise_band * 100.0,
        r.rules.equivalence * 100.0
    );
    if let Some(line) = false_call_line(r) {
        let _ = writeln!(s, "- False calls: {line}.");
    }
    for p in &r.problems {
        let _ = writeln!(s, "- Problem: {}", esc(&p.text));
    }
    for (name, side) in [("A", &r.a), ("B", &r.b)] {
        for (i, m) in side.server_metrics.iter().enumerate() {
            let span = format!("{name}'s session {}", i + 1);
            s.push('\n');
            s.push_str(&crate::report::markdown::server_metrics(m, &span));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_deciding_metrics_are_the_profiles_else_decode_and_e2el_and_ttft_for_long_prompts() {
        let mut w = Workload::new(vec![1], 64, 1, 5);
        let (d, why) = deciding(None, &w, 20);
        assert_eq!(d, ["decode_tokens_per_second", "e2el"]);
        assert!(why.contains("decode-heavy") && why.contains("under 2000"), "{why}");
        // Long prompts (the median of those sent, after the warm-ups): TTFT decides too.
        w.prompts = vec!["x".repeat(LONG_PROMPT_CHARS), "y".repeat(LONG_PROMPT_CHARS + 1), "short".into()];
        let (d, why) = deciding(None, &w, 20);
        assert_eq!(d, ["decode_tokens_per_second", "ttft", "e2el"], "{why}");
        w.prompts = vec!["x".repeat(LONG_PROMPT_CHARS - 1)];
        assert_eq!(deciding(None, &w, 20).0.len(), 2);
        // The profile's list, in the table's order, with its names turned into the record's.
        let named = vec!["ttft".to_owned(), "decode".to_owned()];
        let (d, why) = deciding(Some(&named), &w, 20);
        assert_eq!(d, ["decode_tokens_per_second", "ttft"]);
        assert_eq!(why, "the profile's `decide = [ttft, decode]`");
    }

    #[test]
    fn a_version_2_record_still_reads_its_metrics_all_deciding_and_judged_pair_by_pair() {
        let rules = PairedRules::default();
        let verdict = stats::judge("e2el", &[0.01, -0.01, 0.0], Better::Lower, &rules, 0.05).unwrap();
        let request = RequestRecord {
            start: 0.0,
            events: vec![(0.1, "a".into(), String::new())],
            completion_tokens: Some(1),
            error: None,
            connected: false,
            text_dropped: 0,
            timings: None,
            ..Default::default()
        };
        let side =
            Side { profile: "a".into(), identity_digest: "d".into(), stops: vec![], starts: 1, server_metrics: vec![] };
        let record = PairedRecord {
            paired_version: PAIRED_VERSION,
            gauntlet_version: "0".into(),
            started_at: "t".into(),
            a: side.clone(),
            b: side,
            mode: "both".into(),
            workload: Workload::new(vec![1], 8, 1, 1),
            min_pairs: 8,
            max_pairs: 8,
            looks: vec![8],
            rules,
            equal_work: EqualWork { ignore_eos: true, prompt_cache_off: true, equal_pairs: 1, pairs: 1 },
            pairs: vec![Pair {
                order: [Member::A, Member::B],
                prompt: 1,
                a: request.clone(),
                b: request,
                log_ratios: BTreeMap::from([("e2el".into(), 0.0)]),
                values: BTreeMap::from([("e2el".into(), [1.0, 1.0])]),
            }],
            deciding: vec!["e2el".into()],
            deciding_why: "w".into(),
            metrics: vec![verdict],
            period_effects: vec![],
            left_out: Some("pair 1".into()),
            decode_clock: None,
            false_call_bound: Some(6.0 / 1024.0),
            stopped: "s".into(),
            verdict: BenchVerdict::Pass,
            problems: vec![],
            findings: vec![],
        };
        let mut v = serde_json::to_value(&record).unwrap();
        let o = v.as_object_mut().unwrap();
        o.insert("paired_version".into(), json!(2));
        assert!(markdown(&record).contains("- False calls: with 1 look"), "{}", markdown(&record));
        for k in ["deciding", "deciding_why", "period_effects", "left_out", "false_call_bound"] {
            assert!(o.remove(k).is_some() || k == "period_effects", "{k}");
        }
        for m in o["metrics"].as_array_mut().unwrap() {
            for k in ["blocks", "deciding", "pair_sd", "block_sd"] {
                m.as_object_mut().unwrap().remove(k);
            }
        }
        o["pairs"][0].as_object_mut().unwrap().remove("values");
        let old: PairedRecord = serde_json::from_value(v).unwrap();
        assert_eq!(old.paired_version, 2);
        assert!(old.metrics[0].deciding && old.metrics[0].blocks == 0, "{:?}", old.metrics[0]);
        assert!(old.deciding.is_empty() && old.period_effects.is_empty() && old.pairs[0].values.is_empty());
        assert!(markdown(&old).contains("| e2el | yes |"), "{}", markdown(&old));
        assert!(old.false_call_bound.is_none() && !markdown(&old).contains("False calls"), "{}", markdown(&old));
    }
}
