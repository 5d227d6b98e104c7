//! R3, determinism: the matrix. Every case of the suite (tool calls and repeats aside) is asked once as the
//! reference, then under five conditions, each a row: `repeat` (the same request again, its prompt now cached),
//! `concurrent` (N copies at once, N = `max_concurrency`), `stream` (streamed instead of not), `prefix-cache` (the
//! kind's cache switch off, against the reference asked with the cache on) and `restart` (after the session restarts the server). Each
//! answer is compared with the one it must equal down to the first divergent token; a row is identical, near-tie
//! flips only (numerical drift), diverged or failed. Each row also measures its noise floor: the |Δlogprob| of
//! every token its comparisons' two answers share, pooled ([`Jitter`]); each divergence is judged against it
//! (near-tie, numerical, behaviour change: [`gauntlet_schema::tokens::class_of`]). The class is the finding's words;
//! the row's verdict stays the seed's (a numerical flip still diverges the row). The matrix goes to `determinism.json`, and its rule
//! ([`gauntlet_schema::determinism::row_verdict`], [`matrix_failures`]) is what `verify` recomputes. One sample is
//! never evidence: an empty or missing answer fails its row. A profile with a draft and `lossless_against` adds the
//! losslessness step (`r3_lossless`): the suite asked once more on the draft's server, the profile without the draft
//! run twice while the restart row has the server stopped, and the greedy answers compared with a control.

use std::path::Path;
use std::time::Instant;

use gauntlet_schema::AnswerTokens;
use gauntlet_schema::determinism::{
    Comparison, ComparisonOutcome, DETERMINISM_FILE, DETERMINISM_VERSION, DeterminismMatrix, DeterminismRow, MatrixRow,
    matrix_failures, row_verdict,
};
use gauntlet_schema::tokens::{JITTER_MIN_TOKENS, Jitter, NEAR_TIE_NATS, first_divergent_token, shared_deltas};
use serde_json::{Value, json};

use super::Outcome;
use super::monitor::Monitor;
use super::r3_lossless::{ReferenceRuns, judge, run_reference, status as lossless_status};
use crate::client::{Client, TokenDialect};
use crate::manifest::Profile;
use crate::session::{BusyPatience, Session, Threads};
use crate::suite::{Case, evaluate, observed_text};

/// What the restart row needs: the session that restarts its server, and the monitor that must not count the
/// planned restart as a health failure (it is stopped before and started again on the new process).
pub(super) struct Restart<'a> {
    pub session: Option<&'a mut Session>,
    pub monitor: &'a mut Option<Monitor>,
    /// Samples the monitors stopped here took.
    pub samples_taken: &'a mut usize,
    pub dir: &'a Path,
    pub base_url: &'a str,
    pub clock: Instant,
    /// The profile named by `lossless_against` (the same server without this one's draft): run twice while the
    /// restart row has the server stopped, for the losslessness step (`r3_lossless`).
    pub lossless_against: Option<&'a Profile>,
}

/// One answer as R3 keeps it.
#[derive(Debug, Clone, Default)]
struct Asked {
    text: Option<String>,
    tokens: Option<AnswerTokens>,
    checks_pass: Option<bool>,
    error: Option<String>,
}

/// One request, waited on past its timeout while the server's `threads` work, never past `limit` (the stage's end).
async fn ask(
    client: &Client,
    profile: &Profile,
    case: &Case,
    body: &Value,
    threads: Threads<'_>,
    limit: Instant,
) -> Asked {
    let deadline = Instant::now() + profile.request_timeout;
    let mut patience = BusyPatience::new(threads, profile.request_timeout, limit);
    match client.chat_patiently(body, deadline, &mut patience).await {
        Ok(a) => Asked {
            text: Some(observed_text(&a)),
            checks_pass: Some(evaluate(&case.check, &a).iter().all(|c| c.passed)),
            tokens: a.tokens,
            error: None,
        },
        Err(e) => {
            let waited = patience.describe().map(|l| format!("; {l}")).unwrap_or_default();
            Asked { error: Some(format!("{e}{waited}")), ..Asked::default() }
        }
    }
}

fn compare(case: &str, copy: usize, expected: &Asked, got: &Asked) -> Comparison {
    let token = match (&expected.tokens, &got.tokens) {
        (Some(a), Some(b)) => first_divergent_token(a, b),
        _ => None,
    };
    let error = match (&expected.error, &got.error) {
        (Some(e), _) => Some(format!("the answer to compare with failed: {e}")),
        (None, Some(e)) => Some(e.clone()),
        _ => None,
    };
    let mut c = Comparison {
        case: case.to_owned(),
        copy,
        outcome: ComparisonOutcome::Failed,
        expected: expected.text.clone(),
        got: got.text.clone(),
        char_index: None,
        token,
        checks_same: expected.checks_pass == got.checks_pass,
        error,
    };
    (c.outcome, c.char_index) = c.recompute();
    c
}

/// The |Δlogprob| of the tokens `expected` and `got` share, appended to a row's pool.
fn deltas(expected: &Asked, got: &Asked, pool: &mut Vec<f64>) {
    if let (Some(a), Some(b)) = (&expected.tokens, &got.tokens) {
        shared_deltas(a, b, pool);
    }
}

/// A row from its comparisons, each divergence judged against the row's pooled jitter.
fn row(
    row: MatrixRow,
    what: &str,
    mut comparisons: Vec<Comparison>,
    pool: &[f64],
    not_run: Option<String>,
) -> DeterminismRow {
    let jitter = Jitter::measure(pool);
    for c in &mut comparisons {
        if let Some(t) = c.token.take() {
            let mut t = t.judged(jitter.clone());
            t.checks_changed = Some(!c.checks_same);
            c.token = Some(t);
        }
        (c.outcome, c.char_index) = c.recompute();
    }
    let verdict = row_verdict(&comparisons);
    let first_divergence = match not_run {
        Some(why) => Some(why),
        None => comparisons.iter().find(|c| c.outcome != ComparisonOutcome::Identical).map(Comparison::describe),
    };
    DeterminismRow { row, what: what.into(), verdict, first_divergence, jitter, comparisons }
}

/// The request R3 sends for a case: not streamed, asking for tokens.
fn body(case: &Case, profile: &Profile, dialect: &TokenDialect) -> Value {
    let mut b = crate::run::case_request(case, profile);
    if let Value::Object(m) = &mut b {
        m.insert("stream".into(), json!(false));
        m.remove("stream_options");
    }
    dialect.ask_for_tokens(&mut b);
    b
}

fn streamed(mut b: Value) -> Value {
    if let Value::Object(m) = &mut b {
        m.insert("stream".into(), json!(true));
        m.insert("stream_options".into(), json!({"include_usage": true}));
    }
    b
}

pub(super) async fn determinism(client: &Client, profile: &Profile, restart: Restart<'_>, limit: Instant) -> Outcome {
    let n = profile.qualify.max_concurrency;
    let dir = restart.dir.to_path_buf();
    let dialect = TokenDialect::of(profile);
    // Tool calls are left out (their arguments are not token-compared), and a repeat case is its source's request again.
    let cases: Vec<&Case> = profile.suite.cases.iter().filter(|c| c.tools.is_none() && c.repeat_of.is_none()).collect();
    let mut rows: Vec<(MatrixRow, Vec<Comparison>, Vec<f64>)> =
        MatrixRow::ALL.iter().map(|r| (*r, Vec::new(), Vec::new())).collect();
    let mut push = |r: MatrixRow, case: &str, copy: usize, expected: &Asked, got: &Asked| {
        if let Some((_, v, pool)) = rows.iter_mut().find(|(x, _, _)| *x == r) {
            v.push(compare(case, copy, expected, got));
            deltas(expected, got, pool);
        }
    };
    let mut cache_switch = true;
    let mut references = Vec::new();
    let threads = restart.session.as_deref().map_or(Threads::Unreadable, Session::threads);
    for case in &cases {
        let plain = body(case, profile, dialect);
        let reference = ask(client, profile, case, &plain, threads, limit).await;
        let warm = ask(client, profile, case, &plain, threads, limit).await;
        push(MatrixRow::Repeat, &case.id, 0, &reference, &warm);
        let mut cold_body = plain.clone();
        cache_switch = dialect.skip_prompt_cache(&mut cold_body);
        if cache_switch {
            let cold = ask(client, profile, case, &cold_body, threads, limit).await;
            push(MatrixRow::PrefixCache, &case.id, 0, &reference, &cold);
        }
        let stream = ask(client, profile, case, &streamed(plain.clone()), threads, limit).await;
        push(MatrixRow::Stream, &case.id, 0, &reference, &stream);
        let copies =
            futures_util::future::join_all((0..n).map(|_| ask(client, profile, case, &plain, threads, limit))).await;
        for (i, copy) in copies.iter().enumerate() {
            push(MatrixRow::Concurrent, &case.id, i, &reference, copy);
        }
        references.push((case, plain, reference));
    }
    // With a draft: the suite once more on the draft's server, as the gate asks it, for the losslessness step.
    let lossless_against = restart.lossless_against;
    let draft_answers = match lossless_against {
        Some(_) => super::r1_correctness::ask_suite(client, profile, threads, limit, None).await.0,
        None => Vec::new(),
    };
    let mut reference_runs: Option<ReferenceRuns> = None;
    let restarted = restart_server(profile, restart, |dir| {
        if let Some(reference) = lossless_against {
            reference_runs = Some(run_reference(reference, dir));
        }
    })
    .await;
    let restart_not_run = match restarted {
        Ok(session) => {
            let threads = session.threads();
            for (case, plain, reference) in &references {
                let again = ask(client, profile, case, plain, threads, limit).await;
                push(MatrixRow::Restart, &case.id, 0, reference, &again);
            }
            None
        }
        Err(why) => Some(why),
    };
    let matrix = DeterminismMatrix {
        determinism_version: DETERMINISM_VERSION,
        near_tie_nats: NEAR_TIE_NATS,
        jitter_min_tokens: Some(JITTER_MIN_TOKENS),
        concurrency: n,
        rows: rows
            .into_iter()
            .map(|(r, comparisons, pool)| {
                let (what, not_run) = match r {
                    MatrixRow::Repeat => ("the same request again, its prompt cached, against the reference", None),
                    MatrixRow::Concurrent => ("concurrent identical requests against the reference", None),
                    MatrixRow::Stream => ("streamed against not streamed (the reference)", None),
                    MatrixRow::PrefixCache => (
                        "prompt cache off (cold) against the reference (cache on)",
                        (!cache_switch).then(|| format!("{} has no per-request prompt-cache switch", dialect.engine)),
                    ),
                    MatrixRow::Restart => ("after a server restart against the reference", restart_not_run.clone()),
                };
                row(r, what, comparisons, &pool, not_run)
            })
            .collect(),
    };
    let mut failures = matrix_failures(&matrix);
    if cases.is_empty() {
        failures.push("the suite has no case R3 can ask (tool calls and repeats aside): no evidence".into());
    }
    let lossless = lossless_against.map(|reference| {
        let runs = reference_runs.unwrap_or_else(|| {
            Err(format!(
                "the server was not stopped for the restart row, so `{}` could not run on its port ({})",
                reference.name,
                restart_not_run.as_deref().unwrap_or("no restart")
            ))
        });
        judge(&dir, profile, &reference.name, draft_answers, runs)
    });
    let summary = matrix
        .rows
        .iter()
        .map(|r| match &r.jitter {
            Some(j) => format!(
                "{} {} (jitter ≤ {:.3} nats over {} tokens)",
                r.row.as_str(),
                r.verdict.as_str(),
                j.max_nats,
                j.tokens
            ),
            None => format!("{} {}", r.row.as_str(), r.verdict.as_str()),
        })
        .collect::<Vec<_>>()
        .join(" · ");
    let written = crate::util::write_atomic(
        &dir.join(DETERMINISM_FILE),
        &serde_json::to_vec_pretty(&matrix).expect("serializable"),
    );
    if let Err(e) = written {
        failures.push(format!("{DETERMINISM_FILE} could not be written: {e}"));
    }
    let rows: Vec<Value> = matrix
        .rows
        .iter()
        .map(
            |r| json!({"row": r.row, "verdict": r.verdict, "first_divergence": r.first_divergence, "jitter": r.jitter}),
        )
        .collect();
    let mut data =
        json!({"matrix_file": DETERMINISM_FILE, "concurrency": n, "near_tie_nats": NEAR_TIE_NATS, "rows": rows});
    let mut summary = format!("{summary} ({} cases, {n} concurrent copies)", cases.len());
    let mut cannot_tell = Vec::new();
    if let Some(l) = lossless {
        failures.extend(l.failures);
        cannot_tell = l.cannot_tell;
        summary = format!("{summary} · {}", l.summary);
        data["lossless"] = l.data;
    }
    Outcome { status: lossless_status(&failures, &cannot_tell), summary, failures, data }
}

/// Restarts a spawned server through the session, the monitor paused around it. An attached server is not
/// gauntlet's to restart: the row does not run, and says why.
/// `while_stopped` runs with the bundle's folder once the server has stopped cleanly, before it starts again; for an
/// attached server (whose port is not gauntlet's) it runs without a stop. Ok: the restarted server's session.
async fn restart_server<'a>(
    profile: &Profile,
    r: Restart<'a>,
    while_stopped: impl FnOnce(&Path),
) -> Result<&'a Session, String> {
    let Some(session) = r.session else { return Err("no session: the server was never started".into()) };
    if !session.spawned() {
        while_stopped(r.dir);
        return Err("attached: gauntlet did not start this server, so it does not restart it".into());
    }
    if let Some(m) = r.monitor.take() {
        *r.samples_taken += m.stop();
    }
    let restarted = session.restart_after(profile, &r.dir.join("server-restarted.log"), || while_stopped(r.dir)).await;
    if session.exited().is_none() {
        *r.monitor = Some(Monitor::start(profile, r.dir, r.base_url, session.api_key.clone(), session.pid(), r.clock));
    }
    // The stage records why as words.
    restarted.map(|_| &*session).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use gauntlet_schema::determinism::RowVerdict;

    fn asked(text: &str) -> Asked {
        Asked { text: Some(text.into()), checks_pass: Some(true), ..Asked::default() }
    }

    #[test]
    fn comparisons_without_tokens_diverge_and_failures_say_which_side() {
        let c = compare("c", 0, &asked("a b"), &asked("a b"));
        assert_eq!(c.outcome, ComparisonOutcome::Identical);
        let c = compare("c", 1, &asked("a b"), &asked("a c"));
        assert_eq!((c.outcome, c.char_index), (ComparisonOutcome::Diverged, Some(2)));
        assert_eq!(c.describe(), "case `c` (copy 1): differs at char 2 (no tokens to tell a near-tie)");
        let failed = Asked { error: Some("timed out".into()), ..Asked::default() };
        let c = compare("c", 0, &asked("a"), &failed);
        assert_eq!((c.outcome, c.describe()), (ComparisonOutcome::Failed, "case `c`: failed: timed out".into()));
        let c = compare("c", 0, &failed, &asked("a"));
        assert!(c.describe().contains("the answer to compare with failed"), "{}", c.describe());
        assert_eq!(row(MatrixRow::Stream, "", vec![c], &[], None).verdict, RowVerdict::Failed);
    }
}
