//! `gauntlet bench` of a workload from the field (#34): a Mooncake trace replayed open-loop at its recorded times
//! (each request's lateness kept, so that a late client is never taken for a slow server), or conversations sent
//! turn by turn, each turn carrying the conversation so far. Every request records the prompt tokens the server
//! reported, those it said came from its cache, and those the workload shares with what was sent before it; the
//! level's `metrics.field` sums them up (`bench::field::summarize`). The prompts are built by `bench::field`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use gauntlet_schema::TimingSource;
use gauntlet_schema::bench::{Batch, FieldData, Level, RequestRecord, Workload};
use gauntlet_schema::field::{Conversation, FieldWorkload, Speaker, TraceRow};
use serde_json::{Value, json};

use super::bench::LevelFold;
use super::bench_spill::Spill;
use super::room::{TEXT_KEPT, keep_events, response_limit};
use super::{Reporter, RunEvent};
use crate::bench::field as build;
use crate::client::Client;
use crate::client::wire::{self, Endpoint};
use crate::manifest::{Profile, Target};

/// The words of [`build::WORDS`] the server's tokenizer makes one token each, and how exact the prefixes built
/// from them are: `token-exact`, or `approximate` with the reason (no tokenizer endpoint answered).
async fn vocabulary(client: &Client) -> (Vec<&'static str>, String) {
    let timeout = Duration::from_secs(10);
    let count = |v: &Value| {
        v.get("tokens")
            .and_then(Value::as_array)
            .map(Vec::len)
            .or(v.get("count").and_then(Value::as_u64).map(|n| n as usize))
    };
    let ask = |text: String| {
        let body = json!({"content": text, "prompt": text, "add_special": false, "add_special_tokens": false});
        async move { client.post_json("tokenize", &body, timeout).await.ok().as_ref().and_then(count) }
    };
    let all: String = build::WORDS.iter().map(|w| format!(" {w}")).collect();
    match ask(all).await {
        None => (
            build::WORDS.to_vec(),
            "approximate: the server has no tokenizer endpoint (`/tokenize`); one word is about one token".into(),
        ),
        Some(n) if n == build::WORDS.len() => (build::WORDS.to_vec(), "token-exact".into()),
        Some(_) => {
            let mut kept = Vec::new();
            for w in build::WORDS {
                if ask(format!(" {w}")).await == Some(1) {
                    kept.push(*w);
                }
            }
            if kept.len() >= 8 {
                (kept, "token-exact".into())
            } else {
                (build::WORDS.to_vec(), "approximate: too few words are one token in this server's tokenizer".into())
            }
        }
    }
}

/// Every batch of a field workload on a ready server, warm-ups discarded: one level.
pub(crate) async fn measure(
    client: &Client,
    profile: &Profile,
    workload: &Workload,
    field: &FieldWorkload,
    mut spill: Option<&mut Spill>,
    reporter: &mut dyn Reporter,
) -> (Vec<Level>, Vec<gauntlet_schema::Problem>) {
    let endpoint = Endpoint::resolve(client.base_url(), client.api_key(), client.extra_headers()).await;
    let (vocab, prefix) = vocabulary(client).await;
    let vocab = Arc::new(vocab);
    let c = field.concurrency();
    reporter.event(&RunEvent::Note(format!(
        "field workload ({}): {} warm-up and {} measured batch(es) of {c}; prefixes {prefix}",
        match field {
            FieldWorkload::Trace { .. } => "trace replay",
            FieldWorkload::Conversations { .. } => "conversations",
        },
        workload.warmups,
        workload.repetitions
    )));
    let mut fold = LevelFold::new(c, workload);
    let mut kept: Vec<RequestRecord> = Vec::new();
    let mut capped = false;
    let seed = workload.seed.unwrap_or(1);
    for i in 0..workload.warmups + workload.repetitions {
        let ctx = Ctx { endpoint: endpoint.clone(), client: client.clone(), profile: profile.clone(), workload };
        let batch = match (field, &workload.field_data) {
            (FieldWorkload::Trace { block_size, speed, .. }, FieldData::Trace(rows)) => {
                replay(&ctx, rows, *block_size, *speed, &vocab, seed, i as u64).await
            }
            (FieldWorkload::Conversations { synthetic, turns, conversations, .. }, data) => {
                let convs: Vec<Conversation> = match (synthetic, data) {
                    (Some(shape), _) => build::synthetic(*conversations, *turns, *shape, &vocab, seed, i as u64),
                    (None, FieldData::Conversations(all)) => salted(all, i),
                    _ => Vec::new(),
                };
                converse(&ctx, convs).await
            }
            _ => {
                let why = "the field workload's input was not read";
                return (
                    Vec::new(),
                    vec![gauntlet_schema::Problem::new(gauntlet_schema::ProblemCode::FieldInput, why)],
                );
            }
        };
        if i >= workload.warmups {
            // The summary needs the requests' numbers only: kept without their text, and at most SUMMARY_KEPT of
            // them (a long bench of a large trace summarizes its first ones, and says so).
            let room = SUMMARY_KEPT.saturating_sub(kept.len());
            if room < batch.requests.len() && !capped {
                capped = true;
                reporter.event(&RunEvent::Note(format!(
                    "the field summary counts the first {SUMMARY_KEPT} measured requests; the record keeps them all"
                )));
            }
            kept.extend(
                batch.requests.iter().take(room).map(|r| RequestRecord { events: first_event(r), ..r.clone() }),
            );
            fold.add(batch, spill.as_deref_mut());
        }
        if crate::server::interrupted().is_some() {
            break;
        }
    }
    let kind = match &profile.target {
        Target::Spawn(s) => s.kind.map(|k| k.name),
        _ => None,
    };
    let args = match &profile.target {
        Target::Spawn(s) => s.arguments.clone(),
        _ => Vec::new(),
    };
    // No kind named: answers carrying llama.cpp's `cache_n` say which engine it is.
    let block = build::cache_block(kind, &args).or_else(|| {
        LLAMA_TIMINGS
            .load(std::sync::atomic::Ordering::Relaxed)
            .then(|| (1, "llama.cpp's timings (cache_n): a common prefix is reused token by token".to_owned()))
    });
    let mut summary = build::summarize(&kept, block, &prefix);
    if capped {
        summary.notes.push(format!("counted over the first {SUMMARY_KEPT} measured requests"));
    }
    for n in &summary.notes {
        reporter.event(&RunEvent::Note(n.clone()));
    }
    let mut level = fold.finish();
    if let Value::Object(m) = &mut level.metrics {
        m.insert("field".into(), serde_json::to_value(&summary).unwrap_or(Value::Null));
    }
    (vec![level], Vec::new())
}

/// Measured requests the level's field summary counts (each held without its answer text while the bench runs).
const SUMMARY_KEPT: usize = 200_000;

/// Set when an answer carried llama.cpp's `timings.cache_n`: the engine, when the profile names no kind.
static LLAMA_TIMINGS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn first_event(r: &RequestRecord) -> Vec<(f64, String, String)> {
    r.events.iter().find(|(_, c, re)| !c.is_empty() || !re.is_empty()).cloned().into_iter().collect()
}

/// A ShareGPT file's conversations for batch `i`: each first user message starts with the batch's number, so that
/// no batch finds an earlier one's prompts in the server's cache.
fn salted(all: &[Conversation], i: usize) -> Vec<Conversation> {
    all.iter()
        .map(|c| {
            let mut c = c.clone();
            if let Some((_, text)) = c.iter_mut().find(|(s, _)| *s == Speaker::User) {
                *text = format!("(session {i}) {text}");
            }
            c
        })
        .collect()
}

struct Ctx<'a> {
    endpoint: Option<Endpoint>,
    client: Client,
    profile: Profile,
    workload: &'a Workload,
}

/// Sends one streamed chat request; its record, with `start` in seconds after `released_ns` (CLOCK_MONOTONIC).
async fn send(
    endpoint: Option<Endpoint>,
    client: Client,
    body: Value,
    timeout: Duration,
    max_tokens: u64,
    released: Instant,
    released_ns: Option<u64>,
) -> RequestRecord {
    let deadline = Instant::now() + timeout;
    let limit = response_limit(max_tokens);
    let (start, result, connected) = match &endpoint {
        Some(ep) => {
            let s = wire::stream_chat(ep, None, &body, deadline, limit).await;
            let start = match released_ns {
                Some(r) => s.sent_ns.saturating_sub(r) as f64 / 1e9,
                None => released.elapsed().as_secs_f64(),
            };
            (start, s.answer, s.connected)
        }
        None => {
            let start = released.elapsed().as_secs_f64();
            (start, client.with_max_response_bytes(limit).chat(&body, deadline).await, false)
        }
    };
    match result {
        Ok(a) => {
            let usage = a.usage;
            let timings = a.timings;
            let cached = usage.and_then(|u| u.cached_tokens).or(timings.and_then(|t| t.cache_tokens));
            if timings.is_some_and(|t| t.source == TimingSource::LlamaCpp && t.cache_tokens.is_some()) {
                LLAMA_TIMINGS.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            let prompt = usage.and_then(|u| u.prompt_tokens).or_else(|| {
                let t = timings?;
                Some(t.prompt_tokens? + t.cache_tokens.unwrap_or(0))
            });
            let (events, text_dropped) = keep_events(a.timeline, TEXT_KEPT);
            RequestRecord {
                start,
                events,
                completion_tokens: usage.and_then(|u| u.completion_tokens),
                connected,
                text_dropped,
                prompt_tokens: prompt,
                cached_tokens: cached,
                ..Default::default()
            }
        }
        Err(e) => RequestRecord { start, error: Some(e.to_string()), connected, ..Default::default() },
    }
}

fn body(profile: &Profile, messages: Value, max_tokens: u64) -> Value {
    json!({
        "model": profile.request_model,
        "messages": messages,
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": true,
        "stream_options": {"include_usage": true},
    })
}

/// One replay of the trace: every row sent at its timestamp / `speed` after the release, its lateness recorded.
async fn replay(
    ctx: &Ctx<'_>,
    rows: &Arc<Vec<TraceRow>>,
    block: u32,
    speed: f64,
    vocab: &Arc<Vec<&'static str>>,
    seed: u64,
    salt: u64,
) -> Batch {
    let shared = build::trace_shared(rows, block);
    let released = Instant::now();
    let released_ns = gauntlet_stamp::monotonic_ns();
    let in_flight = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let peak = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let tasks: Vec<_> = rows
        .iter()
        .zip(shared)
        .map(|(row, shared)| {
            let due = row.timestamp_ms as f64 / 1e3 / speed;
            let prompt = build::trace_prompt(row, block, vocab, seed, salt);
            let body = body(&ctx.profile, json!([{"role": "user", "content": prompt}]), row.output_length);
            let (ep, client, timeout) = (ctx.endpoint.clone(), ctx.client.clone(), ctx.profile.request_timeout);
            let (in_flight, peak) = (in_flight.clone(), peak.clone());
            let max_tokens = row.output_length;
            tokio::spawn(async move {
                if let Some(at) = Duration::try_from_secs_f64(due).ok().and_then(|d| released.checked_add(d)) {
                    tokio::time::sleep_until(at.into()).await;
                }
                use std::sync::atomic::Ordering::SeqCst;
                peak.fetch_max(in_flight.fetch_add(1, SeqCst) + 1, SeqCst);
                let mut r = send(ep, client, body, timeout, max_tokens, released, released_ns).await;
                in_flight.fetch_sub(1, SeqCst);
                r.lateness = Some((r.start - due).max(0.0));
                r.expected_cached = Some(shared);
                r
            })
        })
        .collect();
    let requests = join(tasks).await;
    let _ = ctx.workload;
    Batch {
        seconds: released.elapsed().as_secs_f64(),
        released_monotonic_ns: released_ns,
        in_flight_max: peak.load(std::sync::atomic::Ordering::SeqCst),
        receive_clock: None,
        requests,
    }
}

/// Every conversation at once, each turn after the previous one's answer, carrying every message before it. A
/// turn's expected cached tokens are the previous turn's prompt tokens as the server counted them (its whole
/// prompt is the start of this one); the first turn's are 0.
async fn converse(ctx: &Ctx<'_>, convs: Vec<Conversation>) -> Batch {
    let released = Instant::now();
    let released_ns = gauntlet_stamp::monotonic_ns();
    let max_tokens = ctx.workload.max_tokens;
    let tasks: Vec<_> = convs
        .into_iter()
        .enumerate()
        .map(|(ci, conv)| {
            let (ep, client, profile) = (ctx.endpoint.clone(), ctx.client.clone(), ctx.profile.clone());
            tokio::spawn(async move {
                let mut out = Vec::new();
                let mut previous: Option<u64> = Some(0);
                for turn in 0.. {
                    let Some(messages) = build::turn_messages(&conv, turn) else { break };
                    let messages: Vec<Value> =
                        messages.iter().map(|(s, text)| json!({"role": s.role(), "content": text})).collect();
                    let body = body(&profile, Value::Array(messages), max_tokens);
                    let timeout = profile.request_timeout;
                    let mut r =
                        send(ep.clone(), client.clone(), body, timeout, max_tokens, released, released_ns).await;
                    r.conversation = Some(ci as u32);
                    r.turn = Some(turn as u32);
                    r.expected_cached = previous;
                    previous = r.prompt_tokens;
                    let failed = r.error.is_some();
                    out.push(r);
                    if failed || crate::server::interrupted().is_some() {
                        break;
                    }
                }
                out
            })
        })
        .collect();
    let mut requests = Vec::new();
    let mut in_flight_max = 0;
    for joined in futures_util::future::join_all(tasks).await {
        match joined {
            Ok(rs) => {
                in_flight_max += 1;
                requests.extend(rs);
            }
            Err(e) => requests.push(failed_task(e)),
        }
    }
    Batch {
        seconds: released.elapsed().as_secs_f64(),
        released_monotonic_ns: released_ns,
        in_flight_max,
        receive_clock: None,
        requests,
    }
}

fn failed_task(e: tokio::task::JoinError) -> RequestRecord {
    RequestRecord { error: Some(format!("request task failed: {e}")), ..Default::default() }
}

async fn join(tasks: Vec<tokio::task::JoinHandle<RequestRecord>>) -> Vec<RequestRecord> {
    futures_util::future::join_all(tasks).await.into_iter().map(|j| j.unwrap_or_else(failed_task)).collect()
}
