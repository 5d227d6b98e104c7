//! The gate, end to end: identity → server up → cases under a budget → server down → checks → verdict.
//! It reports progress as [`RunEvent`]s and never writes to the terminal itself.

use std::path::Path;
use std::time::{Duration, Instant};

use gauntlet_schema::{
    Answer, AnswerTokens, BaselineRef, CaseRecord, CaseStatus, CheckResult, DecodeSummary, DraftSummary, Finding,
    RUN_RECORD_VERSION, RunRecord, ServerMode, ServerRecord, Severity, SuiteRecord, Verdict,
};
use serde_json::Value;

use crate::build::BuildOutcome;
use crate::client::{Client, ClientError, Patience, TokenDialect};
use crate::identity::Identity;
use crate::manifest::Profile;
use crate::server::describe_exit;
use crate::session::{Budget, BusyPatience, Session, SessionOptions, Threads};
use crate::suite::{Case, evaluate, observed_text};
use crate::util::{environment, now_rfc3339};
use crate::verdict;
use gauntlet_schema::tokens::{Jitter, TokenDivergence, first_divergent_token, shared_deltas};

/// The session's errors, under the name the commands have always matched on.
pub use crate::session::SessionError as GateError;
pub use crate::session::{Reporter, RunEvent, Silent};

pub struct GateOptions<'a> {
    pub out_dir: &'a Path,
    /// Computed before the run (see [`crate::session::compute_identity`]), so the caller can pick a baseline with it.
    pub identity: &'a Identity,
    pub baseline: Option<(&'a RunRecord, String)>,
    /// The build step already done by the caller (before its skip-cache lookup); None: the session builds.
    pub built: Option<BuildOutcome>,
    /// The spread of decode speed across the identity's promoted history ([`crate::compare::decode_spread`]):
    /// widens the decode warn band. None: not known (fewer than three promoted runs).
    pub decode_spread: Option<f64>,
}

/// Runs the gate for one profile. Returns the finished record (also written into `out_dir`).
pub fn run_gate(profile: &Profile, opts: &GateOptions, reporter: &mut dyn Reporter) -> Result<RunRecord, GateError> {
    let started = Instant::now();
    let started_at = now_rfc3339();
    let mut identity = opts.identity.value.clone();
    let identity_digest = opts.identity.digest.clone();
    let mut runtime = opts.identity.runtime.clone();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    let session_opts = SessionOptions {
        out_dir: opts.out_dir,
        ready_limit: None,
        built: opts.built.clone(),
        announce_cases: Some(profile.suite.cases.len()),
    };
    let mut session = Session::open(profile, session_opts, &rt, reporter)?;
    // From here on every request names the model the session speaks to (the one discovered, if any).
    let effective = session.effective_profile(profile);
    let profile = &effective;
    crate::session::stamp_build(session.build_identity.as_ref(), &mut identity);
    let loaded = session.loaded();
    let load_seconds = session.load.clone().ok().flatten();
    let load_cpu = session.load_cpu;
    if loaded
        && let Some(build) = rt.block_on(crate::session::server_build_info(&session.client))
        && let Value::Object(m) = &mut runtime
    {
        m.insert("server_build".into(), Value::String(build));
    }
    // An attached server describes itself (`runtime.server`): a different engine or build behind the same URL is
    // then a named finding against the baseline, before any drift.
    if loaded
        && !session.spawned()
        && let Value::Object(m) = &mut runtime
    {
        let mut described = rt.block_on(crate::session::describe::describe(&session.client, None, DESCRIBE_TIMEOUT));
        // The engine it says it is (the kind `init --attach` would guess): a baseline from another engine is then
        // compared as across engines (`compare::compare_with`).
        if let (Some(kind), Value::Object(d)) = (crate::session::describe::guess_kind(&described), &mut described) {
            d.insert("engine".into(), Value::String(kind.name.into()));
        }
        if let (Some(model), Value::Object(d)) =
            (session.readiness.as_ref().and_then(|r| r.discovered_model.clone()), &mut described)
        {
            d.insert("discovered_model".into(), Value::String(model));
        }
        m.insert("server".into(), described);
    }
    let client = session.client.clone();

    // The suite budget is the server's time, not the machine's ([`Budget`]): each case's seconds that the server's
    // threads spent waiting for CPUs other processes held are given back to it.
    let mut budget = Budget::new(profile.suite_budget);
    let mut over_budget = false;
    let mut crashed = session.exited().is_some();
    // A request timed out and the server then answered neither its health path nor a tiny generation.
    let mut hung = false;
    let mut cases: Vec<CaseRecord> = Vec::with_capacity(profile.suite.cases.len());
    let total = profile.suite.cases.len();
    // The suite's start and end, and the GPU check below, are events: with `ready` and `stopped` they show where
    // a gate's own time goes (scripts/bench-gate-overhead.sh).
    // The server's own counters before the first case and after the last (its readiness probes come before).
    session.scrape_metrics_before(&rt);
    session.life.event("suite-started", format!("{total} case(s)"));
    // What the spawned server's threads did during each case (the speed check's CPU account), and the CPU group
    // whose throttled time was read.
    let mut accounts: Vec<gauntlet_schema::CaseCpu> = Vec::new();
    let mut cpu_group: Option<String> = None;
    // The machine's own speed, timed before each case and after the last while a spawned server is idle
    // (`server::probe`): the speed check compares it with the baseline's.
    let probe = session.process.is_some().then(crate::server::probe::Probe::new);
    let mut machine: Vec<crate::server::probe::Reading> = Vec::new();
    for (index, case) in profile.suite.cases.iter().enumerate() {
        let mut record = new_case_record(case, profile);
        let source_observed =
            case.repeat_of.as_ref().map(|src| cases.iter().find(|c| &c.id == src).and_then(|c| c.observed.clone()));
        let now = Instant::now();
        let skip = if !loaded {
            Some("server did not load")
        } else if crashed {
            Some("server is not running")
        } else if hung {
            Some("server stopped answering")
        } else if now >= budget.deadline() {
            over_budget = true;
            Some("suite budget spent")
        } else if matches!(source_observed, Some(None)) {
            Some("repeat source got no answer")
        } else {
            None
        };
        if let Some(reason) = skip {
            record.skip_reason = Some(reason.into());
        } else {
            let deadline = (now + profile.request_timeout).min(budget.deadline());
            let source = repeat_source(case, &cases, profile);
            let stop = probe.as_ref().map(crate::server::probe::Probe::readings).unwrap_or_default();
            let stop_speed = crate::server::probe::speed(&stop);
            machine.extend(stop);
            // Read outside the request's timing: the cases are sequential, so what the threads did between the two
            // samples is this case's.
            let before = session.process.as_ref().map(crate::server::ServerProcess::sched_sample);
            let asked = Instant::now();
            // Past its timeout, a request is waited on while the server's threads work (busy, not hung), within the
            // budget.
            let mut patience = BusyPatience::new(session.threads(), profile.request_timeout, budget.deadline());
            let answered = rt.block_on(answer_case(&client, case, &mut record, source, deadline, &mut patience));
            let wall = asked.elapsed();
            let waited = patience.describe();
            let after = session.process.as_ref().map(crate::server::ServerProcess::sched_sample);
            if let (Some(b), Some(a)) = (&before, &after)
                && let Some(acc) = a.since(b)
            {
                let secs = |ns: u64| ns as f64 / 1e9;
                let (cpu, wait, throttled) = (secs(acc.cpu_ns), secs(acc.wait_ns), secs(acc.throttled_ns));
                let share = crate::compare::speed::contention(cpu, wait, throttled, wall.as_secs_f64());
                budget.give_back(wall, share);
                if answered.is_ok() {
                    cpu_group = a.group().map(|g| g.display().to_string());
                    let seconds = record.seconds.unwrap_or(0.0);
                    let mut account = crate::compare::speed::case_cpu(
                        &case.id,
                        (cpu, wait, throttled, seconds),
                        acc.busy_threads,
                        acc.neighbours,
                    );
                    account.machine = stop_speed;
                    accounts.push(account);
                }
            }
            if let (Ok(()), Some(line)) = (&answered, &waited) {
                session.life.event(
                    "busy-past-timeout",
                    format!("case `{}`: {line}; answered after {:.1}s", case.id, wall.as_secs_f64()),
                );
            }
            if let Err(e) = answered {
                if matches!(e, ClientError::Timeout { .. }) && Instant::now() >= budget.deadline() {
                    over_budget = true;
                }
                let what = match &waited {
                    Some(line) => format!("{e}; {line}"),
                    None => e.to_string(),
                };
                record.error = Some(what.clone());
                session.life.finding("request-error", Severity::Fail, what, Some(&case.id));
                // A timeout closed its connection (the request's future is gone), so the server may stop that work.
                // Does it still answer? If not, the hang is named here and the remaining cases are skipped, as after
                // a crash, rather than each waiting out its own timeout.
                if matches!(e, ClientError::Timeout { .. })
                    && session.exited().is_none()
                    && Instant::now() < budget.deadline()
                    && let Err(why) = rt.block_on(still_answers(&client, profile, session.threads(), budget.deadline()))
                {
                    hung = true;
                    let what = format!(
                        "the server stopped answering: case `{}` timed out ({e}), then {why}; the remaining cases \
                         are skipped",
                        case.id
                    );
                    session.life.event("hung", what.clone());
                    session.life.finding("hang", Severity::Fail, what, Some(&case.id));
                }
                // A failed request is often the first sign of a dying server: give it a moment to show.
                if session.spawned() {
                    let until = Instant::now() + Duration::from_secs(1);
                    while session.exited().is_none() && Instant::now() < until {
                        std::thread::sleep(Duration::from_millis(25));
                    }
                }
            }
        }
        if !crashed && let Some(status) = session.exited() {
            crashed = true;
            let what = format!("server exited during the suite ({}) after case `{}`", describe_exit(status), case.id);
            session.life.event("crashed", what.clone());
            session.life.finding("crash", Severity::Fail, what, None);
        }
        reporter.event(&RunEvent::CaseFinished { index, total, case: Box::new(record.clone()) });
        cases.push(record);
    }
    if !accounts.is_empty() {
        machine.extend(probe.as_ref().map(crate::server::probe::Probe::readings).unwrap_or_default());
    }
    drop(probe);
    if !budget.credit().is_zero() {
        session.life.event(
            "budget-credit",
            format!(
                "the suite budget was extended by {:.1}s, what the server's threads waited for CPUs other processes \
                 held (at most {}× the budget in all)",
                budget.credit().as_secs_f64(),
                Budget::STRETCH_MAX
            ),
        );
    }
    if over_budget {
        session.life.finding(
            "over-budget",
            Severity::Fail,
            format!(
                "suite budget of {}{} spent before every case ran",
                humantime::format_duration(profile.suite_budget),
                if budget.credit().is_zero() {
                    String::new()
                } else {
                    format!(
                        " (and {:.1}s given back for the server's waits for other processes' CPUs)",
                        budget.credit().as_secs_f64()
                    )
                }
            ),
            None,
        );
    }
    let skipped_crash = cases.iter().filter(|c| c.skip_reason.as_deref() == Some("server is not running")).count();
    if skipped_crash > 0 {
        session.life.event("skipped", format!("{skipped_crash} case(s) skipped: server is not running"));
    }
    let skipped_hang = cases.iter().filter(|c| c.skip_reason.as_deref() == Some("server stopped answering")).count();
    if skipped_hang > 0 {
        session.life.event("skipped", format!("{skipped_hang} case(s) skipped: server stopped answering"));
    }

    session
        .life
        .event("suite-finished", format!("{} case(s) asked", cases.iter().filter(|c| c.seconds.is_some()).count()));
    // Does the server compute on the GPU it is bound to? Asked while it still runs, after the suite.
    let on_gpu = if crashed { None } else { session.on_gpu(profile) };
    if on_gpu.is_some() {
        session.life.event("gpu-use-checked", "the server's processes on the device, asked before the stop");
    }

    let server_metrics = session.scrape_metrics_after(&rt);
    reporter.event(&RunEvent::Stopping);
    drop(rt);
    let base_url = session.base_url.clone();
    let command = session.command.clone();
    let spawned = session.spawned();
    let build = session.build.as_ref().map(|b| b.record.clone());
    let readiness = session.readiness.clone();
    let (closed, sentry_findings) = session.close(profile, crashed, &runtime);
    let mut sentry = closed.sentry;
    let mut life = closed.life;
    life.findings.extend(sentry_findings);
    if let Some((pids, memory, finding)) = on_gpu {
        sentry.server_gpu_pids = pids;
        sentry.server_gpu_memory_bytes = memory;
        life.findings.extend(finding);
    }

    let mut decode = decode_summary(&cases);
    if !accounts.is_empty() {
        decode.speed_check =
            Some(crate::compare::speed::speed_check(accounts, cpu_group, crate::server::probe::speed(&machine)));
    }
    let mut record = RunRecord {
        schema_version: RUN_RECORD_VERSION,
        gauntlet_version: env!("CARGO_PKG_VERSION").into(),
        profile: profile.name.clone(),
        started_at,
        finished_at: String::new(),
        wall_seconds: 0.0,
        identity,
        identity_digest,
        runtime,
        environment: environment(),
        server: ServerRecord {
            mode: if spawned || build.is_some() { ServerMode::Spawned } else { ServerMode::Attached },
            base_url,
            command,
            pid: closed.pid,
            load_seconds,
            load_cpu,
            loaded,
            stop: closed.stop,
            events: life.events,
            log_tail: closed.log_tail,
            readiness,
        },
        suite: SuiteRecord {
            id: profile.suite.id.clone(),
            version: profile.suite.version,
            digest: profile.suite.digest.clone(),
            budget_seconds: profile.suite_budget.as_secs_f64(),
            request_timeout_seconds: profile.request_timeout.as_secs_f64(),
            over_budget,
        },
        cases,
        decode,
        findings: life.findings,
        verdict: Verdict::Pass,
        thresholds: profile.thresholds.clone(),
        baseline: opts.baseline.as_ref().map(|(b, path)| BaselineRef {
            path: path.clone(),
            profile: b.profile.clone(),
            started_at: b.started_at.clone(),
            identity_digest: b.identity_digest.clone(),
        }),
        sentry: Some(sentry),
        build,
        server_metrics,
        baseline_jitter: None,
        lossless: None,
    };
    if !spawned && record.build.is_none() {
        record.findings.push(Finding {
            kind: "attached".into(),
            severity: Severity::Info,
            message: "attached to a running server: load time and crash detection were not available".into(),
            case: None,
        });
    }
    let baseline = opts.baseline.as_ref().map(|(b, _)| *b);
    record.baseline_jitter = baseline.and_then(|b| crate::compare::baseline_jitter(&record, b));
    let assessed = verdict::assess_with(&record, baseline, &profile.thresholds, opts.decode_spread);
    record.findings.extend(assessed);
    if let Some(b) = baseline {
        let judgement = crate::compare::speed::judgement(&record, b);
        if let Some(check) = record.decode.speed_check.as_mut() {
            check.judgement = judgement;
        }
    }
    // A changed server is listed first: it explains whatever drift follows (see `crate::report::ordered`).
    record.findings.sort_by_key(|f| f.kind != gauntlet_schema::FindingKind::ServerChanged);
    record.verdict = verdict::fold(&record.findings);
    record.finished_at = now_rfc3339();
    record.wall_seconds = started.elapsed().as_secs_f64();
    reporter.event(&RunEvent::Finished { verdict: record.verdict });
    Ok(record)
}

/// The request a case sends in the profile's dialect: the case's body with the extras merged, then the engine's
/// thinking switch (last, so that an `extra_body` cannot undo the case's `thinking`), then its token fields.
pub(crate) fn case_request(case: &Case, profile: &Profile) -> serde_json::Value {
    let dialect = TokenDialect::of(profile);
    let mut request = case.request_body(&profile.request_model, &profile.extra_body);
    dialect.thinking.apply(&mut request, case.thinking);
    dialect.ask_for_tokens(&mut request);
    request
}

/// How long each self-description request may take.
const DESCRIBE_TIMEOUT: Duration = Duration::from_secs(2);

/// What the health path said to the probe after a timeout (any HTTP answer counts as an answer).
#[derive(Debug, thiserror::Error)]
pub(crate) enum HealthSaid {
    #[error("{path} answered HTTP {code}")]
    Answered { path: String, code: u16 },
    #[error("{path} did not answer ({source})")]
    Silent {
        path: String,
        #[source]
        source: ClientError,
    },
}

/// The server answered no one-token generation after a request timed out: it is hung (or gone).
#[derive(Debug, thiserror::Error)]
#[error(
    "{health} and a one-token generation got no answer within {} ({source}{})",
    humantime::format_duration(*.within),
    .patience.as_deref().map(|l| format!("; {l}")).unwrap_or_default()
)]
pub(crate) struct NoAnswer {
    pub health: HealthSaid,
    pub within: Duration,
    #[source]
    pub source: ClientError,
    /// What the patience saw of the server's threads while it waited, when it says anything.
    pub patience: Option<String>,
}

/// After a request timed out: does the server still answer? Its health path (any HTTP answer) and then a tiny
/// generation, each under a short deadline (a quarter of the request timeout, 1 to 30 s). Err says what did not
/// answer.
/// A server whose threads keep working past that deadline (still computing the abandoned request in its only
/// slot) is busy, not hung: the probe waits on within `cap`.
pub(crate) async fn still_answers(
    client: &Client,
    profile: &Profile,
    threads: Threads<'_>,
    cap: Instant,
) -> Result<(), NoAnswer> {
    let short = (profile.request_timeout / 4).clamp(Duration::from_secs(1), Duration::from_secs(30));
    let path = profile.health_path.clone();
    let health = match client.health(&profile.health_path, short).await {
        Ok(code) => HealthSaid::Answered { path, code },
        Err(source) => HealthSaid::Silent { path, source },
    };
    let probe = serde_json::json!({
        "model": profile.request_model,
        "messages": [{"role": "user", "content": "Say hello."}],
        "max_tokens": 1,
        "temperature": 0,
    });
    let mut patience = BusyPatience::new(threads, short, cap);
    match client.chat_patiently(&probe, Instant::now() + short, &mut patience).await {
        Ok(_) => Ok(()),
        Err(source) => Err(NoAnswer { health, within: short, source, patience: patience.describe() }),
    }
}

/// A case's record before it is asked: skipped until [`answer_case`] says otherwise. The request asks for token ids
/// and alternatives, so that a changed answer can be traced to the token where it turned.
pub(crate) fn new_case_record(case: &Case, profile: &Profile) -> CaseRecord {
    let request = case_request(case, profile);
    CaseRecord {
        id: case.id.clone(),
        status: CaseStatus::Skipped,
        skip_reason: None,
        repeat_of: case.repeat_of.clone(),
        stream: case.stream,
        request,
        answer: None,
        error: None,
        seconds: None,
        observed: None,
        checks: Vec::new(),
        divergence: None,
    }
}

/// What a repeat is judged against: its source's answer, and the source case's checks with whether they passed
/// there (to say whether a flip changed a check's outcome).
pub(crate) struct RepeatSource<'a> {
    observed: &'a str,
    tokens: Option<&'a AnswerTokens>,
    checks: Option<(&'a crate::suite::Check, bool)>,
}

/// The source of `case` among the cases answered so far, when it is a repeat whose source answered.
pub(crate) fn repeat_source<'a>(
    case: &Case,
    answered: &'a [CaseRecord],
    profile: &'a Profile,
) -> Option<RepeatSource<'a>> {
    let src = case.repeat_of.as_ref()?;
    let record = answered.iter().find(|c| &c.id == src)?;
    Some(RepeatSource {
        observed: record.observed.as_deref()?,
        tokens: record.answer.as_ref().and_then(|a| a.tokens.as_ref()),
        checks: profile
            .suite
            .cases
            .iter()
            .find(|c| &c.id == src)
            .map(|c| (&c.check, record.status == CaseStatus::Pass)),
    })
}

/// Asks one case and judges the answer: by its checks, or for a repeat by equality with its source's text.
pub(crate) async fn answer_case(
    client: &Client,
    case: &Case,
    record: &mut CaseRecord,
    source: Option<RepeatSource<'_>>,
    deadline: Instant,
    patience: &mut (dyn Patience + Send),
) -> Result<(), ClientError> {
    let sent = Instant::now();
    let result = client.chat_patiently(&record.request, deadline, patience).await;
    record.seconds = Some(sent.elapsed().as_secs_f64());
    match result {
        Ok(answer) => {
            let observed = observed_text(&answer);
            record.checks = match &source {
                Some(src) => {
                    let (check, divergence) = repeat_check(src, &observed, &answer);
                    record.divergence = divergence;
                    vec![check]
                }
                None => evaluate(&case.check, &answer),
            };
            record.status = if record.checks.iter().all(|c| c.passed) { CaseStatus::Pass } else { CaseStatus::Fail };
            record.observed = Some(observed);
            record.answer = Some(answer);
            Ok(())
        }
        // The server read the request and refused it (a context too long, an unknown field, a tool it was not started
        // for): that is its answer to this case, in its own words, so the case fails; a declared expected failure
        // stays expected. 5xx, resets and timeouts stay errors: the exchange itself broke.
        Err(e @ ClientError::Status { status: 400..=499, .. }) => {
            record.status = CaseStatus::Fail;
            record.checks = vec![CheckResult { check: "http-status".into(), passed: false, detail: e.to_string() }];
            Ok(())
        }
        Err(e) => {
            record.status = CaseStatus::Error;
            record.error = Some(e.to_string());
            Err(e)
        }
    }
}

/// A repeat must say exactly what its source said; where it does not, the first divergent token, judged against
/// the jitter of the tokens the two answers share, says whether the flip is a near-tie, numerical or a behaviour
/// change, and whether it changed the source's checks (it still fails: a repeat tests determinism).
fn repeat_check(source: &RepeatSource<'_>, observed: &str, answer: &Answer) -> (CheckResult, Option<TokenDivergence>) {
    match gauntlet_schema::diff::first_difference(source.observed, observed) {
        None => (CheckResult { check: "identical".into(), passed: true, detail: String::new() }, None),
        Some(at) => {
            let divergence = source.tokens.zip(answer.tokens.as_ref()).and_then(|(a, b)| {
                let mut pool = Vec::new();
                shared_deltas(a, b, &mut pool);
                let mut d = first_divergent_token(a, b)?.judged(Jitter::measure(&pool));
                d.checks_changed =
                    source.checks.map(|(check, passed)| evaluate(check, answer).iter().all(|c| c.passed) != passed);
                Some(d)
            });
            let token = divergence.as_ref().map(|d| format!(", {}", d.describe())).unwrap_or_default();
            let check = CheckResult {
                check: "identical".into(),
                passed: false,
                detail: format!("differs from its source at char {at}{token}"),
            };
            (check, divergence)
        }
    }
}

/// Median over cases with ≥ 32 completion tokens of tokens / request seconds. Token counts come from `usage`
/// when every counted case has it, else from an estimate for all of them; never a mix.
pub fn decode_summary(cases: &[CaseRecord]) -> DecodeSummary {
    let answered: Vec<(&Answer, f64)> =
        cases.iter().filter_map(|c| Some((c.answer.as_ref()?, c.seconds?))).filter(|(_, s)| *s > 0.0).collect();
    let all_usage = answered.iter().all(|(a, _)| a.usage.and_then(|u| u.completion_tokens).is_some());
    let source = if all_usage { "usage" } else { "estimate" };
    let counted: Vec<(&Answer, f64)> = answered
        .iter()
        .filter_map(|(a, secs)| {
            let tokens = if all_usage { a.usage?.completion_tokens? } else { estimate_tokens(a) };
            (tokens >= 32).then_some((*a, tokens as f64 / secs))
        })
        .collect();
    let rates: Vec<f64> = counted.iter().map(|(_, r)| *r).collect();
    // The server's own speed only when every counted case says it (a median of some would be another sample).
    let server: Option<Vec<f64>> = counted
        .iter()
        .map(|(a, _)| {
            let v = a.server_timings.as_ref()?.get("predicted_per_second")?.as_f64()?;
            (v.is_finite() && v > 0.0).then_some(v)
        })
        .collect();
    DecodeSummary {
        draft: draft_summary(cases),
        median_tokens_per_second: median(rates.clone()),
        token_source: (!answered.is_empty()).then(|| source.to_owned()),
        cases_counted: rates.len(),
        server_median_tokens_per_second: server.and_then(median),
        speed_check: None,
    }
}

/// The draft's counts summed over every answer whose server timings report them; None when none does (no draft).
pub fn draft_summary(cases: &[CaseRecord]) -> Option<DraftSummary> {
    let mut out = DraftSummary {
        answers: 0,
        drafted_tokens: 0,
        accepted_tokens: 0,
        acceptance_rate: None,
        mean_accepted_length: None,
    };
    let mut predicted = Some(0u64);
    for t in cases.iter().filter_map(|c| c.answer.as_ref()?.timings.as_ref()) {
        let (Some(drafted), Some(accepted)) = (t.draft_tokens, t.draft_accepted_tokens) else { continue };
        out.answers += 1;
        out.drafted_tokens = out.drafted_tokens.saturating_add(drafted);
        out.accepted_tokens = out.accepted_tokens.saturating_add(accepted.min(drafted));
        predicted = predicted.zip(t.predicted_tokens).map(|(a, b)| a.saturating_add(b));
    }
    if out.answers == 0 {
        return None;
    }
    out.acceptance_rate = (out.drafted_tokens > 0).then(|| out.accepted_tokens as f64 / out.drafted_tokens as f64);
    out.mean_accepted_length =
        predicted.filter(|p| *p > out.accepted_tokens).map(|p| p as f64 / (p - out.accepted_tokens) as f64);
    Some(out)
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => None,
        n if n % 2 == 1 => Some(v[n / 2]),
        n => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
    }
}

/// Without `usage`, about four characters per token (and at least one per streamed event).
fn estimate_tokens(a: &Answer) -> u64 {
    let chars = (a.content.chars().count() + a.reasoning.chars().count()) as u64;
    let events = a.timeline.iter().filter(|e| !e.content.is_empty() || !e.reasoning.is_empty()).count() as u64;
    chars.div_ceil(4).max(events)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No answer after a timeout is `NoAnswer`: what the health path said (an HTTP answer, or none, with its error)
    /// and the generation's error as its source, in the words of the `hang` finding.
    #[test]
    fn a_server_that_answers_no_more_says_what_did_not() {
        let timeout = ClientError::Timeout { seconds: 2.0, during_body: false };
        let e = NoAnswer {
            health: HealthSaid::Answered { path: "/health".into(), code: 200 },
            within: Duration::from_secs(2),
            source: timeout.clone(),
            patience: None,
        };
        assert_eq!(
            e.to_string(),
            format!("/health answered HTTP 200 and a one-token generation got no answer within 2s ({timeout})")
        );
        assert!(std::error::Error::source(&e).is_some());
        let refused = ClientError::Connect { url: "http://h".into(), reason: "refused".into() };
        let e = NoAnswer {
            health: HealthSaid::Silent { path: "/health".into(), source: refused.clone() },
            within: Duration::from_millis(1500),
            source: timeout.clone(),
            patience: Some("its threads kept working".into()),
        };
        assert!(matches!(&e.health, HealthSaid::Silent { path, .. } if path == "/health"), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!(
                "/health did not answer ({refused}) and a one-token generation got no answer within 1s 500ms \
                 ({timeout}; its threads kept working)"
            )
        );
    }
}
