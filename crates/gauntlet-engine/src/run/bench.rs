//! `gauntlet bench`: closed-loop batches at each concurrency on the profile's server, every request's timeline kept
//! (sent and timed by the measuring room, `super::room`; this module folds what it hands back), metrics derived from
//! it (`crate::bench::metrics`), and one sample per batch compared with a baseline bench of
//! the same identity (`crate::bench::stats`). Each level's measured batches also fall into a few consecutive
//! sub-sessions whose means give the bench's own between-session spread (`sub_sessions`), which a later comparison
//! with this record as its baseline counts instead of a default.

use std::path::Path;

use gauntlet_schema::bench::Call as BenchCall;
pub use gauntlet_schema::bench::{
    BENCH_VERSION, Batch, BenchRecord, BenchVerdict, Confirmation, Corpus, Deciding, Level, MetricComparison,
    RequestRecord, Workload,
};
use gauntlet_schema::{Metric, Problem, ProblemCode, StopOutcome, TimingSource};
use serde_json::{Value, json};

use super::bench_spill::{self, Spill};
use super::room::{Limits, Room, Step, to_timeline};
use super::{GateError, Reporter};
use crate::bench::metrics::{self, Pool, RunMetrics, Slos, Timeline, server_clock_words};
use crate::bench::samples::{self, Samples};
use crate::bench::stats::{self, Better, Call, Comparison, Rules};
use crate::client::Client;
use crate::identity::Identity;
use crate::manifest::Profile;
use crate::server::ServerProcess;
use crate::session::{Session, SessionOptions};

// A corpus is read where the manifest names it; re-exported so that callers keep their path.
pub use crate::manifest::read_corpus;

/// Records the re-run `again` of a regression in `first`; returns one line saying what stands.
pub fn confirm(first: &mut BenchRecord, again: &BenchRecord, record: &str) -> String {
    let stands =
        if again.verdict == BenchVerdict::Regression { BenchVerdict::Regression } else { BenchVerdict::Inconclusive };
    first.confirmation = Some(Confirmation { record: record.into(), verdict: again.verdict, stands });
    if stands == BenchVerdict::Regression {
        "the re-run shows the regression too: it stands".into()
    } else {
        format!("the re-run says {}: the regression is not confirmed, the result is inconclusive", again.verdict)
    }
}

/// The decode metric of the sampled ones ([`Metric::sampled`]) that the server's own clock can time.
const DECODE_METRIC: Metric = Metric::TpotMean;
/// The decode metric on the server's own clock: each batch's mean over its answered requests of the server's time
/// per output token (1 / its `predicted_per_second`, or each engine's equivalent: `ServerTimings`). Sampled beside
/// the sampled metrics, and compared in place of [`DECODE_METRIC`] when every measured request on both sides had it
/// from one engine: the server's decode rate has no client scheduling in it (a busy client machine stretches the
/// gaps it sees between tokens, not the server's own account of them). A second clock of [`DECODE_METRIC`], not a
/// metric of its own.
pub const SERVER_TPOT: &str = "server_tpot_mean";

/// The key of every sample taken per batch, in order: the sampled metrics', then [`SERVER_TPOT`].
fn sampled() -> impl Iterator<Item = &'static str> {
    Metric::sampled_all().map(Metric::key).chain(std::iter::once(SERVER_TPOT))
}

/// What the server's clock says of a batch's decode: the mean of its answered requests' seconds per output token,
/// and the engine that said it; `Err(())` when an answered request carried no usable decode rate or the engines
/// differ (the batch then has no server-clock value, and its level no server clock). `Ok(None)` when no request was
/// answered.
fn server_decode(requests: &[RequestRecord]) -> Result<Option<(f64, TimingSource)>, ()> {
    let (mut sum, mut n, mut source) = (0.0, 0u32, None);
    for r in requests.iter().filter(|r| r.error.is_none()) {
        let t = r.timings.ok_or(())?;
        let rate = t.predicted_per_second.filter(|x| x.is_finite() && *x > 0.0).ok_or(())?;
        if source.is_some_and(|s| s != t.source) {
            return Err(());
        }
        source = Some(t.source);
        sum += 1.0 / rate;
        n += 1;
    }
    Ok(source.map(|s| (sum / f64::from(n), s)))
}

/// A sampled metric's value in one batch's metrics: [`Metric::sampled`]'s computation (the pooled value of every
/// bench metric is the level's metrics at [`Metric::pooled_path`]).
fn sample_of(m: &RunMetrics, metric: Metric) -> Option<f64> {
    match metric {
        Metric::OutputThroughput => Some(m.output_throughput_wall),
        Metric::TtftMean => m.ttft.as_ref().map(|d| d.mean),
        Metric::TpotMean => m.tpot.as_ref().map(|d| d.mean),
        Metric::E2elMean => m.e2el.as_ref().map(|d| d.mean),
        Metric::TtftP50
        | Metric::TtftP99
        | Metric::ItlP99
        | Metric::E2elP50
        | Metric::E2elP99
        | Metric::ErrorRate
        | Metric::Goodput
        | Metric::StructuredRate
        | Metric::DecodeRate => None,
    }
}

/// Why [`read_bench`] has no record.
#[derive(Debug, thiserror::Error)]
pub enum BenchReadError {
    /// The file (a bundle's `r5-performance.json` when a folder was given) was refused or could not be read.
    #[error("{}: {source}", path.display())]
    Read { path: std::path::PathBuf, source: crate::util::bounded::ReadError },
    /// Not a bench record of a version this gauntlet reads: the schema's words, which name the file.
    #[error("{0}")]
    Invalid(String),
}

/// A bench record: `bench.json`, a qualification's `r5-performance.json`, or a qualification bundle (its R5 file).
pub fn read_bench(path: &Path) -> Result<BenchRecord, BenchReadError> {
    let owned;
    let path = if path.is_dir() {
        owned = path.join("r5-performance.json");
        owned.as_path()
    } else {
        path
    };
    let text = crate::util::bounded::read_named_text(path, crate::util::bounded::RECORD_CAP)
        .map_err(|source| BenchReadError::Read { path: path.to_owned(), source })?;
    gauntlet_schema::parse_bench_record(&text, &path.display().to_string()).map_err(BenchReadError::Invalid)
}

/// Runs the workload on the profile's server (started and stopped here, or attached) and compares with `baseline`.
pub fn run_bench(
    profile: &Profile,
    identity: &Identity,
    workload: &Workload,
    baseline: Option<(&BenchRecord, String)>,
    history: &[BenchRecord],
    out_dir: &Path,
    reporter: &mut dyn Reporter,
) -> Result<BenchRecord, GateError> {
    let started_at = crate::util::now_rfc3339();
    // Every measured request goes to the spill file as its batch ends: the bench holds numbers, not records.
    let mut spill = Spill::create(out_dir).map_err(|source| GateError::Out { path: out_dir.into(), source })?;
    let rt = crate::util::measuring_runtime();
    let opts = SessionOptions { out_dir, ready_limit: None, built: None, announce_cases: None };
    let mut session = Session::open(profile, opts, &rt, reporter)?;
    // Requests name the model the session speaks to (the one readiness discovered, if any).
    let effective = session.effective_profile(profile);
    let profile = &effective;
    let (mut identity_value, runtime) = (identity.value.clone(), identity.runtime.clone());
    crate::session::stamp_build(session.build_identity.as_ref(), &mut identity_value);
    let loaded = session.loaded();
    let mut problems: Vec<Problem> = Vec::new();
    let mut levels = Vec::new();
    match &session.load {
        Err(why) => problems.push(Problem::new(ProblemCode::NotLoaded, format!("the server did not load: {why}"))),
        Ok(_) => {
            // The server's own counters around the whole workload, warm-ups included.
            session.scrape_metrics_before(&rt);
            // A Ctrl-C from here on stops the measuring, not the record: what was measured is written below.
            crate::server::finish_on_interrupt();
            let client = session.client.clone();
            let process = session.process_mut();
            let (measured, died) =
                rt.block_on(super::measure(&client, profile, workload, process, Some(&mut spill), reporter));
            levels = measured;
            problems.extend(died);
        }
    }
    let server_metrics = session.scrape_metrics_after(&rt);
    drop(rt);
    let build = session.build.as_ref().map(|b| b.record.clone());
    let (closed, sentry_findings) = session.close(profile, false, &runtime);
    let mut findings = closed.life.findings;
    findings.extend(sentry_findings);
    let rules = Rules::default();
    let base = baseline.as_ref().map(|(b, _)| *b);
    let history: Vec<&BenchRecord> = history.iter().collect();
    let spreads = between_session_spreads(base, &history, &levels, workload, &rules);
    let deciding = base.map(|_| stored_deciding(profile.bench_decide.as_deref(), workload));
    let (mut verdict, assessed) = assess(&mut levels, workload, base, loaded, &rules, &spreads, deciding.as_ref());
    problems.extend(assessed);
    if !matches!(closed.stop, StopOutcome::Terminated | StopOutcome::Attached) {
        problems.push(Problem::new(ProblemCode::ServerStop, format!("server stop: {}", closed.stop)));
    }
    // A device fault, a stuck server or a failed build fails the bench whatever its numbers say.
    for f in findings.iter().filter(|f| f.severity == gauntlet_schema::Severity::Fail) {
        problems.push(Problem::new(ProblemCode::FailFinding, format!("{}: {}", f.kind, f.message)));
        verdict = BenchVerdict::Fail;
    }
    // An interrupted bench measured less than it was asked to: no pass and no baseline candidate from it (a
    // regression or a failure it did see stands).
    if crate::server::interrupted().is_some()
        && matches!(verdict, BenchVerdict::Pass | BenchVerdict::Improvement | BenchVerdict::Candidate)
    {
        verdict = BenchVerdict::Inconclusive;
    }
    let record = BenchRecord {
        bench_version: BENCH_VERSION,
        gauntlet_version: env!("CARGO_PKG_VERSION").into(),
        profile: profile.name.clone(),
        started_at,
        identity: identity_value,
        identity_digest: identity.digest.clone(),
        runtime,
        workload: workload.clone(),
        definitions: definitions(),
        levels,
        verdict,
        rules: serde_json::to_value(&rules).unwrap_or(Value::Null),
        baseline: baseline.map(|(_, p)| p),
        problems,
        confirmation: None,
        findings,
        sentry: Some(closed.sentry),
        build,
        spill: Some(spill.finish()),
        server_metrics,
        deciding,
    };
    write_bench(&record, out_dir)?;
    Ok(record)
}

/// Writes `bench.json`, `bench.md`, `bench.bmf.json` and `bench.html` into `out_dir`, each atomically. A record
/// whose requests were spilled has them streamed back from its spill file into `bench.json` and the HTML's
/// charts, never all in memory at once.
pub fn write_bench(record: &BenchRecord, out_dir: &Path) -> Result<(), GateError> {
    let out = |source| GateError::Out { path: out_dir.into(), source };
    let bmf = serde_json::to_vec_pretty(&super::bench_report::bencher(record)).expect("serializable");
    let mut files = vec![("bench.md", super::bench_report::markdown(record).into_bytes()), ("bench.bmf.json", bmf)];
    if let Some(spilled) = &record.spill {
        bench_spill::write_record(record, spilled, out_dir).map_err(out)?;
        let requests = |l: &Level, f: &mut dyn FnMut(&RequestRecord)| {
            bench_spill::each_request(out_dir, spilled, l.concurrency, f);
        };
        files.push(("bench.html", super::bench_html::render_with(record, &requests).into_bytes()));
    } else {
        files.push(("bench.json", serde_json::to_vec_pretty(record).expect("serializable")));
        files.push(("bench.html", super::bench_html::render(record).into_bytes()));
    }
    for (name, bytes) in files {
        crate::util::write_atomic(&out_dir.join(name), &bytes)
            .map_err(|source| GateError::Out { path: out_dir.into(), source })?;
    }
    Ok(())
}

/// Every concurrency of the built-in `workload` on a ready server, measured by the room (`super::room`): each
/// measured batch folded into its [`Level`] as it ends. Stops early (and says so) when the spawned server dies or
/// an interrupt ends the measuring. A field workload is measured by [`super::field`]; [`super::measure`] chooses.
pub(crate) async fn measure_levels(
    client: &Client,
    profile: &Profile,
    workload: &Workload,
    process: Option<&mut ServerProcess>,
    mut spill: Option<&mut Spill>,
    reporter: &mut dyn Reporter,
) -> (Vec<Level>, Vec<Problem>) {
    let limits = Limits::of(profile.request_timeout, workload);
    let mut room = Room::open(client, &profile.request_model, limits).await;
    let mut levels = Vec::new();
    let mut fold: Option<LevelFold> = None;
    let mut step = |step: Step| match step {
        Step::Level(c) => fold = Some(LevelFold::new(c, workload)),
        Step::Measured(batch) => {
            if let Some(fold) = &mut fold {
                fold.add(batch, spill.as_deref_mut());
            }
        }
        Step::Kept => levels.extend(fold.take().map(LevelFold::finish)),
    };
    let stopped = room.levels(workload, process, reporter, &mut step).await;
    (levels, stopped)
}

/// Per concurrency and compared metric, the between-session spread a comparison with a stored baseline counts.
pub type Spreads = std::collections::BTreeMap<(usize, String), stats::Between>;

fn same_workload(a: &Workload, b: &Workload) -> bool {
    (&a.corpus, a.max_tokens, a.rate, a.seed, &a.field, &a.response_format)
        == (&b.corpus, b.max_tokens, b.rate, b.seed, &b.field, &b.response_format)
}

/// A level's own measured spread of one metric: from its sub-sessions' means (version 10 on), less its batches'
/// own noise where its samples are one a batch ([`stats::Side::of_batches`]).
fn side_of(level: Option<&Level>, name: &str) -> Option<stats::Side> {
    stats::Side::of_level(level?, name)
}

/// Per level and compared metric of `workload`, the between-session spread a comparison with `baseline` counts,
/// best first: `measured`, when the baseline's level carries its own sub-sessions' spread (the candidate's levels,
/// `candidate`, give the other side; a candidate that measured too few counts the baseline's for both); else
/// `history`, the spread of the level's metric means over the baseline and `history` (earlier benches of the same
/// identity) that ran `workload`, from [`stats::MIN_SESSIONS`] sessions on; else the rules' default, with a note
/// saying why (a baseline of an older version carries no measured spread). Every compared metric of every level of
/// `workload` gets an entry.
pub fn between_session_spreads(
    baseline: Option<&BenchRecord>,
    history: &[&BenchRecord],
    candidate: &[Level],
    workload: &Workload,
    rules: &Rules,
) -> Spreads {
    let mut out = Spreads::new();
    let sessions: Vec<&BenchRecord> =
        baseline.into_iter().chain(history.iter().copied()).filter(|s| same_workload(&s.workload, workload)).collect();
    let base = baseline.filter(|b| same_workload(&b.workload, workload));
    for &c in &workload.concurrency {
        let base_level = base.and_then(|b| b.levels.iter().find(|l| l.concurrency == c));
        let cand_level = candidate.iter().find(|l| l.concurrency == c);
        for name in sampled() {
            let between = match (side_of(base_level, name), side_of(cand_level, name)) {
                (Some(b), Some(own)) => stats::Between::measured(b, own),
                (Some(b), None) => stats::Between::measured(b, b)
                    .noted("this run measured too few sub-sessions: the baseline's spread counted for both sides"),
                (None, _) => {
                    let means: Vec<f64> = sessions
                        .iter()
                        .filter_map(|s| s.levels.iter().find(|l| l.concurrency == c))
                        .filter_map(|l| stats::mean(l.samples.get(name)?))
                        .collect();
                    let between = stats::Between::of_sessions(&means, rules);
                    match base {
                        Some(b) => {
                            let why = if b.bench_version < 10 {
                                format!("baseline from bench_version {} carries no measured spread", b.bench_version)
                            } else {
                                "the baseline measured too few sub-sessions for a spread".to_owned()
                            };
                            let what = if between.source == "history" {
                                format!("measured over {} sessions instead", between.sessions)
                            } else {
                                format!("assumed {:.0} %", between.spread * 100.0)
                            };
                            between.noted(format!("{why}: {what}"))
                        }
                        None => between,
                    }
                }
            };
            out.insert((c, name.to_owned()), between);
        }
    }
    out
}

/// The spreads a record's comparisons counted, as it states them; a comparison that states none (a record before
/// version 6) counted the rules' `between_session` (0 in such records: within sessions only).
pub fn recorded_spreads(levels: &[Level], rules: &Rules) -> Spreads {
    let mut out = Spreads::new();
    for l in levels {
        for c in &l.comparisons {
            let side = |s: &Option<gauntlet_schema::bench::SideSpread>| {
                s.as_ref().map(|s| stats::Side { spread: s.spread, sub_sessions: s.sub_sessions })
            };
            let b = match &c.between_session {
                Some(b) => stats::Between {
                    spread: b.spread,
                    source: match b.source.as_str() {
                        "measured" => "measured",
                        "history" => "history",
                        _ => "default",
                    },
                    sessions: b.sessions,
                    sides: side(&b.baseline_side).zip(side(&b.candidate_side)),
                    note: b.note.clone(),
                },
                None => stats::Between::default_of(rules, 1),
            };
            out.insert((l.concurrency, c.metric.clone()), b);
        }
    }
    out
}

/// The bench verdict and its problems: requests that failed, concurrency the client never reached, and per
/// metric the comparison with `baseline`'s level of the same concurrency, counting the between-session spread of
/// `spreads` (the rules' default where it has none). A metric whose samples give no finite statistic is not
/// compared and the verdict is at best inconclusive.
pub fn assess(
    levels: &mut [Level],
    workload: &Workload,
    baseline: Option<&BenchRecord>,
    loaded: bool,
    rules: &Rules,
    spreads: &Spreads,
    deciding: Option<&Deciding>,
) -> (BenchVerdict, Vec<Problem>) {
    let mut problems = Vec::new();
    let decides = |name: &str| deciding.is_none_or(|d| d.metrics.iter().any(|m| m == name));
    // A metric both sides measured that could not be compared: the verdict cannot be a pass without it.
    let mut uncomparable = false;
    for l in levels.iter_mut() {
        // A closed loop must have had the whole batch in flight; an open loop spreads it out by design.
        let tally = l.tally_or_fold();
        if workload.rate.is_none() && workload.field.is_none() && tally.short > 0 {
            problems.push(Problem::new(
                ProblemCode::ConcurrencyShort,
                format!(
                    "concurrency {}: the client never had {} requests in flight at once (at most {})",
                    l.concurrency, l.concurrency, tally.in_flight_max
                ),
            ));
        }
        if let Some(problem) = l.metrics["problems"].as_array().and_then(|p| p.first()).and_then(Value::as_str) {
            problems.push(Problem::new(ProblemCode::Measurement, format!("concurrency {}: {problem}", l.concurrency)));
        }
        let failed = l.failed();
        if failed > 0 {
            problems.push(Problem::new(
                ProblemCode::RequestFailed,
                format!("concurrency {}: {failed} request(s) failed", l.concurrency),
            ));
        }
        let Some(base) = baseline else { continue };
        if !same_workload(&base.workload, workload) {
            problems.push(Problem::new(
                ProblemCode::BaselineWorkload,
                format!(
                    "concurrency {}: the baseline ran another workload (prompts, max tokens or arrivals differ): not \
                     compared",
                    l.concurrency
                ),
            ));
            continue;
        }
        let Some(base_level) = base.levels.iter().find(|b| b.concurrency == l.concurrency) else {
            problems.push(Problem::new(
                ProblemCode::BaselineLevel,
                format!("the baseline has no concurrency {}", l.concurrency),
            ));
            continue;
        };
        l.comparisons.clear();
        // Both sides at the same grain: samples that stand for as many batches each.
        let (coarser_a, coarser_b) = samples::common_grain(base_level.batches_per_sample, l.batches_per_sample);
        for metric in Metric::sampled_all() {
            let (name, better) = (metric.key(), metric.better());
            // The decode metric on the servers' own clock when both levels' every request had it from one engine.
            let (key, clock) = if metric == DECODE_METRIC {
                match decode_clock(base_level, l) {
                    Ok(engine) => (SERVER_TPOT, Some(server_clock_words(engine))),
                    Err(why) => (name, Some(format!("client clock ({why})"))),
                }
            } else {
                (name, None)
            };
            let (Some(a), Some(b)) = (base_level.samples.get(key), l.samples.get(key)) else { continue };
            let (a, b) = (&samples::coarsen(a, coarser_a), &samples::coarsen(b, coarser_b));
            // A recorded comparison's spread is under the metric's name (`verify` reads them back so).
            let between = spreads
                .get(&(l.concurrency, key.to_owned()))
                .or_else(|| spreads.get(&(l.concurrency, name.to_owned())))
                .cloned()
                .unwrap_or(stats::Between::default_of(rules, 1));
            let Some(c) = stats::compare_sessions(a, b, better, rules, Some(between)) else {
                let why = if a.len() < 2 || b.len() < 2 {
                    "fewer than two samples on a side"
                } else {
                    // Denormal, zero or overflowing samples (a baseline is untrusted): no call can rest on them.
                    uncomparable = true;
                    "no finite statistic from the samples (a mean of zero, denormal or overflowing values): not compared"
                };
                problems.push(Problem::new(
                    ProblemCode::NotCompared,
                    format!("concurrency {}: {name}: {why}", l.concurrency),
                ));
                continue;
            };
            l.comparisons.push(MetricComparison {
                clock,
                deciding: decides(name),
                ..comparison(name, better, a, b, &c)
            });
        }
    }
    // Only the deciding metrics make the verdict; the others are reported with their intervals and MDEs.
    let calls: Vec<BenchCall> =
        levels.iter().flat_map(|l| l.comparisons.iter().filter(|c| c.deciding).map(|c| c.call)).collect();
    let verdict = if !loaded || levels.iter().any(|l| l.failed() > 0) {
        BenchVerdict::Fail
    } else if baseline.is_none() {
        BenchVerdict::Candidate
    } else if calls.contains(&BenchCall::Regression) {
        BenchVerdict::Regression
    } else if calls.contains(&BenchCall::Inconclusive) || calls.is_empty() || uncomparable {
        BenchVerdict::Inconclusive
    } else if calls.contains(&BenchCall::Improvement) {
        BenchVerdict::Improvement
    } else {
        BenchVerdict::Pass
    };
    (verdict, problems)
}

/// The metrics a comparison with a stored baseline rests its verdict on: the paired bench's choice
/// ([`super::paired::deciding_metrics`]: the profile's `decide`, else decode and E2EL, TTFT too for long prompts)
/// under the keys this bench compares them by: decode (and the paired bench's `itl`, the same mean gap per token)
/// is mean TPOT ([`DECODE_METRIC`], on the servers' clock where both have one).
pub fn stored_deciding(decide: Option<&[String]>, workload: &Workload) -> Deciding {
    let (chosen, why) = super::paired::deciding_metrics(decide, workload, workload.repetitions);
    let mut metrics: Vec<String> = Vec::new();
    for m in chosen {
        let key = match m {
            Metric::DecodeRate | Metric::TpotMean => DECODE_METRIC.key(),
            other => other.key(),
        };
        if Metric::sampled_all().any(|s| s.key() == key) && !metrics.iter().any(|k| k == key) {
            metrics.push(key.to_owned());
        }
    }
    Deciding { metrics, why }
}

/// Whether the decode metric of `baseline` against `candidate` is on the servers' own clock: the engine whose
/// timings both levels' every answered request carried (`Ok`), else why not, in words (`Err`).
fn decode_clock<'l>(baseline: &'l Level, candidate: &Level) -> Result<&'l str, String> {
    let has = |l: &Level| l.samples.get(SERVER_TPOT).is_some_and(|s| !s.is_empty());
    match (&baseline.server_clock, &candidate.server_clock) {
        (Some(a), Some(b)) if a == b && has(baseline) && has(candidate) => Ok(a.as_str()),
        (Some(a), Some(b)) if a != b => Err(format!("the baseline's server timed with {a}, this one with {b}")),
        (None, _) => Err("the baseline's requests do not all carry the server's timings".into()),
        _ => Err("this run's requests do not all carry the server's timings".into()),
    }
}

fn comparison(name: &str, better: Better, a: &[f64], b: &[f64], c: &Comparison) -> MetricComparison {
    MetricComparison {
        metric: name.into(),
        better,
        baseline_mean: stats::mean(a).unwrap_or(0.0),
        mean: stats::mean(b).unwrap_or(0.0),
        change: c.change,
        interval: c.interval,
        p_value: c.p_value,
        call: match c.call {
            Call::Regression => BenchCall::Regression,
            Call::Improvement => BenchCall::Improvement,
            Call::NoChange => BenchCall::NoChange,
            Call::Inconclusive => BenchCall::Inconclusive,
        },
        why: c.why.clone(),
        mde: c.mde,
        deciding: true,
        within_interval: Some(c.within_interval),
        between_session: c.between.as_ref().map(|b| {
            let side =
                |s: &stats::Side| gauntlet_schema::bench::SideSpread { spread: s.spread, sub_sessions: s.sub_sessions };
            gauntlet_schema::bench::BetweenSession {
                spread: b.spread,
                source: b.source.into(),
                sessions: b.sessions,
                baseline_side: b.sides.as_ref().map(|(s, _)| side(s)),
                candidate_side: b.sides.as_ref().map(|(_, s)| side(s)),
                note: b.note.clone(),
            }
        }),
        clock: None,
    }
}

/// The goodput limits of a workload, for the metrics.
fn slos(w: &Workload) -> Slos {
    let s = w.slo.clone().unwrap_or_default();
    Slos { ttft: s.ttft, tpot: s.tpot, e2el: s.e2el }
}

pub(crate) fn level(concurrency: usize, batches: Vec<Batch>, workload: &Workload) -> Level {
    let mut fold = LevelFold::new(concurrency, workload);
    for b in batches {
        fold.add(b, None);
    }
    fold.finish()
}

/// One concurrency's measured batches, folded as each ends: its samples, and the metrics pooled over all of them on
/// one clock (each batch placed after the previous one). Holds the pooled numbers ([`Pool`]), not the requests
/// once a spill took them.
pub(crate) struct LevelFold {
    concurrency: usize,
    max_tokens: u64,
    slos: Slos,
    /// The batches, when no spill takes them (a spilled batch is only counted in `tally`).
    batches: Vec<Batch>,
    tally: gauntlet_schema::bench::BatchTally,
    samples: Samples,
    pooled: Pool,
    offset: f64,
    /// The measured batches the workload asks for, and the sub-sessions they split into.
    planned: usize,
    /// Per sub-session: its batches and, per sampled metric (in [`sampled`]'s order), the sum of its batches'
    /// values and how many gave one. Empty when the level is too short to split.
    sub: Vec<(u64, Vec<(f64, u32)>)>,
    /// The engine whose timings every answered request carried so far; `Err(())` once one lacked them or engines
    /// were mixed.
    clock: Result<Option<TimingSource>, ()>,
    /// A structured-output workload's judgments so far (none for any other workload).
    structured: Option<gauntlet_schema::bench::StructuredTally>,
}

impl LevelFold {
    pub(crate) fn new(concurrency: usize, workload: &Workload) -> LevelFold {
        LevelFold {
            concurrency,
            max_tokens: workload.max_tokens,
            slos: slos(workload),
            batches: Vec::new(),
            tally: Default::default(),
            samples: Samples::new(sampled()),
            pooled: Pool::reserved(slos(workload)),
            offset: 0.0,
            planned: workload.repetitions,
            sub: vec![
                (0, vec![(0.0, 0); sampled().count()]);
                gauntlet_schema::bench::sub_session_count(workload.repetitions)
            ],
            clock: Ok(None),
            structured: workload.response_format.is_some().then(Default::default),
        }
    }

    /// Heap bytes the fold's numbers hold (its pooled distributions and samples; kept batches aside).
    #[cfg(test)]
    fn numbers_heap_bytes(&self) -> usize {
        self.pooled.heap_bytes() + self.samples.heap_bytes()
    }

    /// Folds a measured batch; `spill`, when given, takes it (the level then only counts it: a long bench holds
    /// no record per batch).
    pub(crate) fn add(&mut self, b: Batch, spill: Option<&mut Spill>) {
        let timelines: Vec<Timeline> = b.requests.iter().map(|r| to_timeline(r, self.max_tokens)).collect();
        if let Some(tally) = &mut self.structured {
            b.requests.iter().for_each(|r| tally.add(r));
        }
        let m = metrics::run(&timelines, 0.0, b.seconds, &self.slos);
        let server = server_decode(&b.requests);
        self.clock = match (self.clock, server) {
            (Err(()), _) | (_, Err(())) => Err(()),
            (Ok(Some(a)), Ok(Some((_, b)))) if a != b => Err(()),
            (Ok(seen), Ok(now)) => Ok(now.map(|(_, s)| s).or(seen)),
        };
        let value = |name: &str| {
            if name == SERVER_TPOT {
                server.ok().flatten().map(|(v, _)| v)
            } else {
                Metric::from_key(name).and_then(|metric| sample_of(&m, metric))
            }
        };
        self.samples.add(value);
        let index = usize::try_from(self.tally.batches).unwrap_or(usize::MAX);
        let at = gauntlet_schema::bench::sub_session_of(index, self.planned, self.sub.len());
        if let Some((batches, sums)) = self.sub.get_mut(at) {
            *batches += 1;
            for (name, sum) in sampled().zip(sums.iter_mut()) {
                if let Some(v) = value(name) {
                    *sum = (sum.0 + v, sum.1 + 1);
                }
            }
        }
        for t in &timelines {
            self.pooled.add(t.start + self.offset, metrics::request(t));
        }
        drop(timelines);
        self.offset += b.seconds;
        let index = usize::try_from(self.tally.batches).unwrap_or(usize::MAX);
        self.tally.add(&b, self.concurrency);
        match spill {
            Some(spill) => spill.batch(self.concurrency, index, b),
            None => self.batches.push(b),
        }
    }

    pub(crate) fn finish(self) -> Level {
        let pooled = self.pooled.finish(0.0, self.offset);
        // Sub-sessions an interrupt left without a batch are not sessions.
        let ran: Vec<_> = self.sub.iter().filter(|(batches, _)| *batches > 0).collect();
        let sub_sessions = (!ran.is_empty()).then(|| gauntlet_schema::bench::SubSessions {
            batches: ran.iter().map(|(batches, _)| *batches).collect(),
            means: sampled()
                .enumerate()
                .map(|(i, name)| {
                    let means = ran.iter().filter(|(_, s)| s[i].1 > 0).map(|(_, s)| s[i].0 / f64::from(s[i].1));
                    ((*name).to_owned(), means.collect::<Vec<f64>>())
                })
                .filter(|(_, means)| !means.is_empty())
                .collect(),
        });
        Level {
            concurrency: self.concurrency,
            batches: self.batches,
            tally: Some(self.tally),
            metrics: serde_json::to_value(&pooled).unwrap_or(Value::Null),
            samples: self.samples.finish(),
            batches_per_sample: self.samples.batches_per_sample(),
            comparisons: Vec::new(),
            sub_sessions,
            server_clock: self.clock.ok().flatten().map(|s| s.as_str().to_owned()),
            structured: self.structured,
        }
    }
}

fn definitions() -> Value {
    json!({
        "ttft": "first SSE event with non-empty content or reasoning − request sent (vLLM TTFT, non-empty as AIPerf)",
        "tpot": "(e2el − ttft) / (output tokens − 1) (vLLM TPOT = AIPerf ITL)",
        "itl_chunk": "gaps between token events, pooled (vLLM ITL = AIPerf ICL)",
        "e2el": "last token event − request sent (AIPerf request latency)",
        "output_throughput_wall": "output tokens / (batch release → last response) (vLLM duration)",
        "output_throughput_span": "output tokens / (last response end − first request start) (AIPerf duration)",
        "percentiles": "linear interpolation (numpy type 7); std: population within a run",
        "comparison": "per batch samples; seeded percentile bootstrap of the relative change of means + Mann-Whitney U",
        "event_time": "when the event's bytes arrived: the kernel's receive stamp of the read that brought them \
            (batch receive_clock `kernel`), else when that read returned (`client`); request sent: just before its write",
    })
}

#[cfg(test)]
mod arrival_tests {
    use super::Workload;

    #[test]
    fn closed_loop_releases_everything_at_once_and_open_loop_is_a_seeded_poisson_process() {
        let mut w = Workload::new(vec![4], 8, 0, 2);
        assert_eq!(w.arrivals(0, 4), vec![0.0; 4]);
        w.rate = Some(50.0);
        w.seed = Some(7);
        let a = w.arrivals(3, 20_000);
        assert_eq!(a[0], 0.0);
        assert!(a.windows(2).all(|p| p[1] > p[0]), "arrivals only move forward");
        assert_eq!(a, w.arrivals(3, 20_000), "the same seed and batch give the same schedule");
        assert_ne!(a, w.arrivals(4, 20_000), "each batch has its own schedule");
        // Exponential gaps: mean 1/rate = 20 ms and standard deviation equal to the mean.
        let gaps: Vec<f64> = a.windows(2).map(|p| p[1] - p[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        assert!((mean - 0.02).abs() < 0.02 * 0.03, "mean gap {mean}");
        assert!((sd / mean - 1.0).abs() < 0.05, "coefficient of variation {}", sd / mean);
    }
}

// The report's views tested on a level the driver computed: here, so that the report never needs the driver.
#[cfg(test)]
mod report_tests {
    use gauntlet_schema::ReceiveClock;

    use super::*;
    use crate::run::bench_report::{bencher, csv, markdown};

    fn record(start: f64, gap: f64) -> RequestRecord {
        // TTFT 0.1 s (after a role-only event), then three more one-word events `gap` apart.
        let mut events = vec![(0.05, String::new(), String::new())];
        events.extend((0..4).map(|i| (0.1 + i as f64 * gap, "word ".to_owned(), String::new())));
        RequestRecord {
            start,
            events,
            completion_tokens: Some(4),
            error: None,
            connected: false,
            text_dropped: 0,
            timings: None,
            ..Default::default()
        }
    }

    fn bench(levels: Vec<Level>) -> BenchRecord {
        serde_json::from_value(json!({
            "bench_version": 2, "gauntlet_version": "0", "profile": "p", "started_at": "t", "identity": {},
            "identity_digest": "d", "runtime": {}, "definitions": {}, "verdict": "candidate", "rules": {},
            "workload": {"concurrency": [2], "max_tokens": 4, "warmups": 0, "repetitions": 2}, "levels": levels,
        }))
        .unwrap()
    }

    /// A level folded batch by batch, its requests spilled, has the metrics and samples of the same batches held in
    /// memory, and holds no request itself.
    #[test]
    fn a_level_whose_requests_were_spilled_has_the_metrics_of_the_same_batches_in_memory() {
        let batch = |gap: f64, failing: bool| Batch {
            seconds: 0.1 + 3.0 * gap,
            released_monotonic_ns: None,
            in_flight_max: 2,
            receive_clock: None,
            requests: vec![record(0.0, gap), {
                let mut r = record(0.01, gap);
                if failing {
                    r.error = Some("broken".into());
                }
                r
            }],
        };
        let batches = || vec![batch(0.01, false), batch(0.02, true), batch(0.015, false)];
        let dir = tempfile::tempdir().unwrap();
        let mut spill = Spill::create(dir.path()).unwrap();
        let mut fold = LevelFold::new(2, &Workload::new(vec![2], 4, 0, 2));
        for b in batches() {
            fold.add(b, Some(&mut spill));
        }
        let folded = fold.finish();
        let held = level(2, batches(), &Workload::new(vec![2], 4, 0, 2));
        assert_eq!((&folded.metrics, &folded.samples), (&held.metrics, &held.samples));
        assert_eq!((&folded.tally, folded.batches_per_sample), (&held.tally, 1));
        assert_eq!(folded.tally.as_ref().unwrap().batches, 3);
        assert_eq!(folded.metrics["failed"], 1);
        assert!(folded.batches.is_empty(), "the spill took the batches");
        assert_eq!(held.batches.len(), 3);
        assert_eq!(spill.finish().records, 6);
    }

    /// A long bench holds no record per batch: after thousands of batches the fold keeps no batch and at most
    /// [`samples::SAMPLES_KEPT`] samples of a metric, and a level folded from the same batches without a spill (as
    /// `verify` recomputes one) gives the same samples.
    #[test]
    fn a_spilled_level_holds_no_batch_and_bounded_samples_however_long() {
        let batch = |i: usize| Batch {
            seconds: 0.1,
            released_monotonic_ns: Some(i as u64),
            in_flight_max: 1 + i % 2,
            receive_clock: Some(ReceiveClock::Kernel),
            requests: vec![record(0.0, 0.01 + (i % 7) as f64 * 0.001)],
        };
        let n = 3 * samples::SAMPLES_KEPT + 5;
        let dir = tempfile::tempdir().unwrap();
        let mut spill = Spill::create(dir.path()).unwrap();
        let workload = Workload::new(vec![2], 4, 0, n);
        let mut fold = LevelFold::new(2, &workload);
        // Everything the level's numbers will hold is there before the first batch: nothing grows as they fill
        // (a long bench's heap is flat from its start, not after its distributions reached their bounds).
        let held = fold.numbers_heap_bytes();
        for i in 0..n {
            fold.add(batch(i), Some(&mut spill));
            assert_eq!(fold.batches.capacity(), 0, "batch {i}");
            assert_eq!(fold.numbers_heap_bytes(), held, "batch {i}");
        }
        let folded = fold.finish();
        let tally = folded.tally.clone().unwrap();
        assert_eq!((tally.batches, tally.in_flight_max, tally.short), (n as u64, 2, n.div_ceil(2) as u64));
        assert_eq!(folded.batches_per_sample, 4);
        assert!(folded.samples.values().all(|s| s.len() == n.div_ceil(4)), "{:?}", folded.samples.keys());
        let held = level(2, (0..n).map(batch).collect(), &workload);
        assert_eq!((&held.samples, held.batches_per_sample, &held.tally), (&folded.samples, 4, &folded.tally));
    }

    /// A level's batches fall into consecutive sub-sessions whose means are the means of their batches' samples,
    /// and a comparison with a baseline that carries them counts both measured spreads; a baseline of version 9
    /// carries none, and its comparison says it assumed the default.
    #[test]
    fn sub_sessions_give_a_measured_spread_and_an_old_baseline_falls_back_to_the_default_saying_so() {
        let batch = |gap: f64| Batch {
            seconds: 0.1 + 3.0 * gap,
            released_monotonic_ns: None,
            in_flight_max: 1,
            receive_clock: None,
            requests: vec![record(0.0, gap)],
        };
        let gaps: Vec<f64> = (0..12).map(|i| 0.010 + 0.0001 * (i % 5) as f64).collect();
        let workload = Workload::new(vec![1], 4, 0, 12);
        let l = level(1, gaps.iter().map(|g| batch(*g)).collect(), &workload);
        let sub = l.sub_sessions.clone().unwrap();
        assert_eq!(sub.batches, vec![4, 4, 4]);
        let tpot = &l.samples["tpot_mean"];
        let expected: Vec<f64> = tpot.chunks(4).map(|c| c.iter().sum::<f64>() / 4.0).collect();
        assert_eq!(sub.means["tpot_mean"], expected);
        // Two batches are too few to split.
        assert!(level(1, vec![batch(0.01), batch(0.01)], &Workload::new(vec![1], 4, 0, 2)).sub_sessions.is_none());
        let md = markdown(&bench(vec![l.clone()]));
        assert!(md.contains("- c1: own between-session spread over 3 sub-sessions (4, 4, 4 batches): "), "{md}");
        assert!(md.contains("tpot_mean ±"), "{md}");

        let rules = Rules::default();
        let mut base = bench(vec![l.clone()]);
        base.workload = workload.clone();
        base.bench_version = BENCH_VERSION;
        let spreads = between_session_spreads(Some(&base), &[], std::slice::from_ref(&l), &workload, &rules);
        let b = &spreads[&(1, "tpot_mean".to_owned())];
        assert_eq!((b.source, b.sessions, b.note.as_deref()), ("measured", 6, None));
        assert!(b.spread < 0.01, "{}", b.spread);
        // The same record as a version-9 baseline: no sub-sessions, so the default, said in the comparison.
        let mut old = base.clone();
        old.bench_version = 9;
        old.levels[0].sub_sessions = None;
        let spreads = between_session_spreads(Some(&old), &[], std::slice::from_ref(&l), &workload, &rules);
        let b = &spreads[&(1, "tpot_mean".to_owned())];
        assert_eq!(b.source, "default");
        assert_eq!(b.note.as_deref(), Some("baseline from bench_version 9 carries no measured spread: assumed 20 %"));
        let mut levels = vec![l.clone()];
        let (verdict, _) = assess(&mut levels, &workload, Some(&old), true, &rules, &spreads, None);
        let c = levels[0].comparisons.iter().find(|c| c.metric == "tpot_mean").unwrap();
        assert!(c.why.contains("carries no measured spread: assumed 20 %"), "{}", c.why);
        assert_eq!(verdict, BenchVerdict::Inconclusive);
        // Against the measured baseline, the same level is no change, and the record states both sides.
        let spreads = between_session_spreads(Some(&base), &[], std::slice::from_ref(&l), &workload, &rules);
        let (verdict, _) = assess(&mut levels, &workload, Some(&base), true, &rules, &spreads, None);
        assert_eq!(verdict, BenchVerdict::Pass, "{:#?}", levels[0].comparisons);
        let between = levels[0].comparisons[0].between_session.clone().unwrap();
        assert_eq!((between.source.as_str(), between.baseline_side.unwrap().sub_sessions), ("measured", 3));
        assert_eq!(recorded_spreads(&levels, &rules)[&(1, "tpot_mean".to_owned())].source, "measured");
    }

    /// #30 item 2 for stored baselines: the verdict rests on the deciding metrics (decode and E2EL by default, the
    /// profile's `decide` otherwise); a call on another metric is reported and changes no verdict.
    #[test]
    fn a_stored_comparison_rests_its_verdict_on_the_deciding_metrics() {
        let workload = Workload::new(vec![1], 4, 0, 8);
        let d = stored_deciding(None, &workload);
        assert_eq!(d.metrics, ["tpot_mean", "e2el_mean"]);
        assert!(d.why.contains("decode-heavy"), "{}", d.why);
        // decode and itl are both mean TPOT here, named once.
        let named = stored_deciding(Some(&["ttft".to_owned(), "itl".to_owned(), "decode".to_owned()]), &workload);
        assert_eq!(named.metrics, ["tpot_mean", "ttft_mean"]);
        assert!(named.why.contains("decide = [ttft, itl, decode]"), "{}", named.why);

        let steady = |v: f64| -> Vec<f64> { (0..8).map(|i| v * (1.0 + 0.001 * (i % 3) as f64)).collect() };
        let with = |ttft: f64| {
            let one = Batch {
                seconds: 0.1,
                released_monotonic_ns: None,
                in_flight_max: 1,
                receive_clock: None,
                requests: vec![record(0.0, 0.01)],
            };
            let mut l = level(1, vec![one], &workload);
            l.sub_sessions = None;
            l.server_clock = None;
            l.samples = [("output_throughput", 50.0), ("ttft_mean", ttft), ("tpot_mean", 0.01), ("e2el_mean", 0.5)]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), steady(v)))
                .collect();
            l
        };
        let mut base = bench(vec![with(0.1)]);
        base.workload = workload.clone();
        let side = stats::Side { spread: 0.001, sub_sessions: 8 };
        let spreads: Spreads = ["output_throughput", "ttft_mean", "tpot_mean", "e2el_mean"]
            .into_iter()
            .map(|k| ((1, k.to_owned()), stats::Between::measured(side, side)))
            .collect();
        let rules = Rules::default();
        // TTFT twice as long: a regression on a metric that does not decide a decode-heavy workload.
        let mut levels = vec![with(0.2)];
        let (verdict, _) = assess(&mut levels, &workload, Some(&base), true, &rules, &spreads, Some(&d));
        assert_eq!(verdict, BenchVerdict::Pass, "{:#?}", levels[0].comparisons);
        let ttft = levels[0].comparisons.iter().find(|c| c.metric == "ttft_mean").unwrap();
        assert_eq!((ttft.call, ttft.deciding), (BenchCall::Regression, false));
        assert!(levels[0].comparisons.iter().filter(|c| c.deciding).all(|c| c.call == BenchCall::NoChange));
        assert!(crate::run::bench_report::comparison_line(1, ttft).ends_with("[reported, not deciding]"));
        // A record before version 15 (no deciding list): every metric decides, as it was judged.
        let (verdict, _) = assess(&mut levels, &workload, Some(&base), true, &rules, &spreads, None);
        assert_eq!(verdict, BenchVerdict::Regression);
        // TTFT named by the profile: it decides.
        let (verdict, _) = assess(&mut levels, &workload, Some(&base), true, &rules, &spreads, Some(&named));
        assert_eq!(verdict, BenchVerdict::Regression);
    }

    /// What stops a comparison is a problem with its own code, whatever its words: a failed request, a level the
    /// baseline lacks, a baseline of another workload, a closed loop that never had its batch in flight.
    #[test]
    fn assess_gives_each_problem_its_code() {
        let batch = |requests: Vec<RequestRecord>, in_flight_max: usize| Batch {
            seconds: 0.2,
            released_monotonic_ns: None,
            in_flight_max,
            receive_clock: None,
            requests,
        };
        let failed = RequestRecord { error: Some("connection reset".into()), ..record(0.0, 0.01) };
        let workload = Workload::new(vec![2], 4, 0, 2);
        let codes = |levels: &mut Vec<Level>, base: Option<&BenchRecord>| {
            let (verdict, problems) = assess(levels, &workload, base, true, &Rules::default(), &Spreads::new(), None);
            (verdict, problems.iter().map(|p| p.code).collect::<Vec<_>>())
        };
        let short = level(2, vec![batch(vec![record(0.0, 0.01), failed], 1); 2], &workload);
        let (verdict, got) = codes(&mut vec![short], None);
        assert_eq!(verdict, BenchVerdict::Fail);
        assert_eq!(got, [ProblemCode::ConcurrencyShort, ProblemCode::RequestFailed]);

        let good = level(2, vec![batch(vec![record(0.0, 0.01), record(0.0, 0.01)], 2); 2], &workload);
        let mut other_level = bench(vec![level(4, good.batches.clone(), &workload)]);
        other_level.workload = workload.clone();
        assert_eq!(codes(&mut vec![good.clone()], Some(&other_level)).1, [ProblemCode::BaselineLevel]);
        let mut other_work = bench(vec![good.clone()]);
        other_work.workload = Workload::new(vec![2], 8, 0, 2);
        assert_eq!(codes(&mut vec![good], Some(&other_work)).1, [ProblemCode::BaselineWorkload]);
    }

    #[test]
    fn bencher_export_names_each_concurrency_and_bounds_sampled_measures_by_their_batches() {
        let batch = |gap: f64| Batch {
            seconds: 0.1 + 3.0 * gap,
            released_monotonic_ns: None,
            in_flight_max: 2,
            receive_clock: Some(ReceiveClock::Kernel),
            requests: vec![record(0.0, gap), record(0.0, gap)],
        };
        let l = level(2, vec![batch(0.01), batch(0.02)], &Workload::new(vec![2], 4, 0, 2));
        let v = bencher(&bench(vec![serde_json::from_value(serde_json::to_value(&l).unwrap()).unwrap()]));
        let m = &v["p/concurrency-2"];
        assert!((m["ttft-mean-ms"]["value"].as_f64().unwrap() - 100.0).abs() < 1e-9, "{m}");
        let tpot = &m["tpot-mean-ms"];
        assert!((tpot["lower_value"].as_f64().unwrap() - 10.0).abs() < 1e-9, "{tpot}");
        assert!((tpot["upper_value"].as_f64().unwrap() - 20.0).abs() < 1e-9, "{tpot}");
        assert!((tpot["value"].as_f64().unwrap() - 15.0).abs() < 1e-9, "{tpot}");
        let tput = &m["output-throughput-tok-per-s"];
        let (lo, val, hi) = (tput["lower_value"].as_f64(), tput["value"].as_f64(), tput["upper_value"].as_f64());
        assert!(lo <= val && val <= hi, "{tput}");
        assert!(m["ttft-p99-ms"].get("lower_value").is_none(), "an unsampled measure has no bounds");
        assert_eq!(m["error-rate"]["value"], 0.0);
        let md = markdown(&bench(vec![l.clone()]));
        // TTFT mean, p50 and p99, then TPOT mean.
        assert!(md.contains("| 2 | 4 | 0 | 100.0 | 100.0 | 100.0 | 15.0 |"), "{md}");
        assert!(md.contains("- Arrival times: the kernel's receive stamp of every read"), "{md}");
        let mut mixed = l;
        mixed.batches[1].receive_clock = Some(ReceiveClock::Client);
        // As a record before version 8, without a tally: its batches give one.
        mixed.tally = None;
        let md = markdown(&bench(vec![mixed]));
        assert!(md.contains("- Arrival times: the kernel's receive stamps for some reads"), "{md}");
    }

    /// Every bench metric reaches every writer (a table column of `bench.md` and `bench.html`, a row of
    /// `bench.csv`, a measure of `bench.bmf.json`), with a value at a level that measured it: a new [`Metric`]
    /// variant a writer forgot fails here.
    #[test]
    fn every_bench_metric_appears_in_every_writer() {
        let batch = |gap: f64| Batch {
            seconds: 0.1 + 3.0 * gap,
            released_monotonic_ns: None,
            in_flight_max: 2,
            receive_clock: None,
            requests: vec![record(0.0, gap), record(0.0, gap)],
        };
        let mut workload = Workload::new(vec![2], 4, 0, 2);
        workload.slo = Some(gauntlet_schema::bench::Slo { ttft: Some(1.0), ..Default::default() });
        let mut measured = level(2, vec![batch(0.01), batch(0.02)], &workload);
        measured.structured =
            Some(gauntlet_schema::bench::StructuredTally { requests: 4, judged: 4, valid: 3, rate: Some(0.75) });
        let r = bench(vec![measured]);
        let (md, csv, bmf) = (markdown(&r), csv(&r), bencher(&r));
        let html = crate::run::bench_html::render(&r).to_lowercase();
        let header = md.lines().find(|l| l.starts_with("| concurrency |")).expect(&md);
        let row = md.lines().find(|l| l.starts_with("| 2 |")).expect(&md);
        assert_eq!(header.matches('|').count(), row.matches('|').count(), "{header}\n{row}");
        assert!(!row.contains('—'), "every metric has a value: {row}");
        for m in Metric::BENCH {
            assert!(header.contains(&format!(" {} |", m.column())), "bench.md's table lacks {m:?}: {header}");
            let csv_row = csv.lines().find(|l| l.starts_with(&format!("p,2,{},", m.slug())));
            assert!(csv_row.is_some_and(|l| !l.starts_with(&format!("p,2,{},,", m.slug()))), "bench.csv: {m:?}");
            assert!(bmf["p/concurrency-2"][m.slug()]["value"].is_number(), "bench.bmf.json lacks {m:?}: {bmf}");
            let th = format!("<th>{}</th>", m.column().to_lowercase());
            assert!(html.contains(&th), "bench.html's table lacks {m:?} ({th})");
        }
    }

    #[test]
    fn csv_rows_are_rfc_4180_and_a_profile_name_a_spreadsheet_would_run_is_defused() {
        let batch = Batch {
            seconds: 0.2,
            released_monotonic_ns: None,
            in_flight_max: 2,
            receive_clock: None,
            requests: vec![record(0.0, 0.01), record(0.0, 0.02)],
        };
        let mut r = bench(vec![level(2, vec![batch.clone(), batch], &Workload::new(vec![2], 4, 0, 2))]);
        r.profile = "=HYPERLINK(\"http://x\",\"a,b\")\u{1b}".into();
        let text = csv(&r);
        assert!(text.ends_with("\r\n") && !text.contains("\u{1b}"), "{text:?}");
        let rows: Vec<&str> = text.split("\r\n").filter(|r| !r.is_empty()).collect();
        let measures = Metric::BENCH.len() - 2;
        assert_eq!(
            rows.len(),
            1 + measures,
            "a header and every bench metric but goodput (no SLO) and the schema-kept rate (no structured workload): \
             {text}"
        );
        assert!(
            rows[1].starts_with("\"'=HYPERLINK(\"\"http://x\"\",\"\"a,b\"\")\u{fffd}\",2,output-throughput-tok-per-s,"),
            "{}",
            rows[1]
        );
        // A negative number is a number, not a formula.
        r.profile = "-1".into();
        assert!(csv(&r).contains("\r\n-1,2,"), "{}", csv(&r));
        r.profile = "-cmd".into();
        assert!(csv(&r).contains("\r\n'-cmd,2,"), "{}", csv(&r));
    }
}

#[cfg(test)]
mod read_tests {
    use super::*;
    use crate::util::bounded::ReadError;

    #[test]
    fn a_bundle_without_its_r5_file_or_a_file_that_is_no_record_is_the_matching_variant() {
        let dir = tempfile::tempdir().unwrap();
        let e = read_bench(dir.path()).unwrap_err();
        let r5 = dir.path().join("r5-performance.json");
        assert!(matches!(&e, BenchReadError::Read { path, source: ReadError::NotFound } if *path == r5), "{e:?}");
        assert!(e.to_string().starts_with(&format!("{}: ", r5.display())), "{e}");
        std::fs::write(&r5, b"[1, 2]").unwrap();
        let e = read_bench(dir.path()).unwrap_err();
        assert!(matches!(&e, BenchReadError::Invalid(why) if why.contains("r5-performance.json")), "{e:?}");
    }
}
