//! The measuring room: where a workload's requests become per-request timelines. It owns
//!
//! - the transport: the lean client whose reads the kernel stamps (`client::wire`) for a plain `http://` server,
//!   reqwest (`client::Client`) for anything else, chosen once per room ([`Room::open`]), and the
//!   connections it keeps open between batches (opened and warmed before every release, so that no measured time
//!   to first token includes a connect);
//! - the limits every request runs under ([`Limits`]: the request timeout, the response bytes a request may read,
//!   the answer text a record keeps);
//! - one batch ([`Room::batch`]): `c` requests of the workload's prompts released together (closed loop) or on
//!   their seeded arrivals (open loop), each its own task, their records in prompt order, with the batch's peak in
//!   flight and receive clock, and a structured-output workload's answers judged once the batch has ended;
//! - the level loop ([`Room::levels`]): every concurrency of a workload, warm-ups discarded, stopping early (and
//!   saying so) on an interrupt or when the spawned server dies.
//!
//! It does not read a manifest or a baseline, fold batches into metrics, compare, or write a record: the bench
//! (`run::bench`) folds each measured batch it is handed ([`Step`]) into its level, the paired bench (`run::paired`)
//! sends one request at a time through [`Room::batch`] and judges pairs, and qualify's R4/R5 reach the level loop
//! through `run::measure`. A field workload (`run::field`) sends on its own schedule and only borrows the limits.
//!
//! Why one place: the bench, the paired bench and R5 must measure a request the same way, or their numbers stop
//! being comparable (a transport or a limit changed for one of them and not the others would show up as a
//! regression of the server). Before this room, the paired bench reached into the bench's driver for the response
//! limit, the batch, the timeline and the clock's words; now each of them calls this module and none the other.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gauntlet_schema::bench::{Batch, RequestRecord, Workload};
use gauntlet_schema::{Problem, ProblemCode, ReceiveClock};
use serde_json::{Map, Value, json};

use super::{Reporter, RunEvent};
use crate::bench::metrics::{Event, Timeline};
use crate::client::Client;
use crate::client::wire::{self, Conn, Endpoint};
use crate::server::ServerProcess;

/// Answer text a request keeps in the record (content and reasoning together, in bytes). A bench measures
/// times: the text is kept to be read, not to be scored, and a server streaming megabytes per answer must not
/// make the bench hold them for every request of every batch.
pub const TEXT_KEPT: usize = 4096;

/// Response bytes a bench request may read: room for `max_tokens` tokens at 4 KiB of SSE each (a chunk of
/// llama.cpp or vLLM is a few hundred bytes), plus 64 KiB, at most the client's usual cap. Every request of a
/// batch is in flight at once, so this (times the concurrency) bounds what a batch holds while it streams.
pub fn response_limit(max_tokens: u64) -> usize {
    let per_token = 4096usize;
    usize::try_from(max_tokens)
        .ok()
        .and_then(|n| n.checked_mul(per_token))
        .and_then(|n| n.checked_add(64 << 10))
        .map_or(crate::client::DEFAULT_MAX_RESPONSE_BYTES, |n| n.min(crate::client::DEFAULT_MAX_RESPONSE_BYTES))
}

/// What every request of a room runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// From a batch's release (or a connection pool's filling) to its last byte: the profile's `request_timeout`.
    pub request_timeout: Duration,
    /// Response bytes one request may read ([`response_limit`] of the workload's `max_tokens`).
    pub response_bytes: usize,
    /// Answer text one record keeps ([`TEXT_KEPT`]).
    pub text_kept: usize,
}

impl Limits {
    /// The limits of `workload`'s requests under a profile's `request_timeout`.
    pub(crate) fn of(request_timeout: Duration, workload: &Workload) -> Limits {
        Limits { request_timeout, response_bytes: response_limit(workload.max_tokens), text_kept: TEXT_KEPT }
    }
}

/// What one batch sends.
pub(crate) struct Ask<'a> {
    /// The prompts (request `i` of batch `index` sends prompt `index · concurrency + i`), `max_tokens`, the
    /// arrivals (closed or open loop) and a structured-output format.
    pub workload: &'a Workload,
    pub concurrency: usize,
    /// The batch's number: picks its prompts and its open-loop arrivals.
    pub index: usize,
    /// Fields added to every request body (a paired bench's `ignore_eos`), before the response format.
    pub extra: &'a Map<String, Value>,
}

/// What the level loop hands its caller, in order: a level starts, each of its measured batches (warm-ups are
/// not handed), and the level is kept. A level the server died in, or that an interrupt stopped before any
/// measured batch ended, is never kept.
pub(crate) enum Step {
    Level(usize),
    Measured(Batch),
    Kept,
}

/// One server's measuring room: its transport, its limits and its open connections.
pub(crate) struct Room {
    /// The reqwest client, timing first and capped at the limits' response bytes (the reqwest transport's, and
    /// the one that warms its connections).
    client: Client,
    /// The lean client's endpoint, when the transport is the lean client: every read stamped by the kernel, on
    /// connections the room keeps (`pool`). `None`: reqwest, every read timed when it returned.
    endpoint: Option<Endpoint>,
    pool: Vec<Conn>,
    model: String,
    limits: Limits,
    /// A pause after reqwest's connections were warmed, before the release: the bench lets the last ones return
    /// to reqwest's pool; the paired bench, one request at a time, never had it.
    settle: Duration,
}

impl Room {
    /// A room on `client`'s server for `model`'s requests under `limits`: the lean client when the base URL is
    /// plain `http://` and its host resolves, else reqwest.
    pub(crate) async fn open(client: &Client, model: &str, limits: Limits) -> Room {
        let client = client.clone().timing_first().with_max_response_bytes(limits.response_bytes);
        let endpoint = Endpoint::resolve(client.base_url(), client.api_key(), client.extra_headers())
            .await
            .map(|e| e.ending_streams_at_close(client.close_ends_stream()));
        Room { client, endpoint, pool: Vec::new(), model: model.to_owned(), limits, settle: Duration::from_millis(20) }
    }

    /// The same room without the pause after reqwest's warm-up.
    pub(crate) fn without_settle(mut self) -> Room {
        self.settle = Duration::ZERO;
        self
    }

    /// Opens the connections of a batch of `c` before its release, so that no measured TTFT includes a connect (a
    /// server may close a connection after each streamed answer). A connection returns to the pool just after its
    /// response was read: let the last ones settle.
    async fn prepare(&mut self, c: usize) {
        match &self.endpoint {
            Some(ep) => {
                let deadline = Instant::now() + self.limits.request_timeout;
                wire::fill_pool(ep, &mut self.pool, c, &self.model, deadline).await;
            }
            None => {
                self.client.warm_connections(&self.model, c, self.limits.request_timeout).await;
                if !self.settle.is_zero() {
                    tokio::time::sleep(self.settle).await;
                }
            }
        }
    }

    /// Sends the batch on the connections [`Room::prepare`] opened, keeping those that can carry another.
    async fn issue(&mut self, ask: &Ask<'_>) -> Batch {
        let ways = match &self.endpoint {
            Some(ep) => Ways::Wire(ep, std::mem::take(&mut self.pool)),
            None => Ways::Reqwest(&self.client),
        };
        let (batch, kept) = run_batch(ways, &self.model, &self.limits, ask).await;
        self.pool = kept;
        batch
    }

    /// One batch: its connections opened, then its requests sent; the batch ends when the last ends.
    pub(crate) async fn batch(&mut self, ask: &Ask<'_>) -> Batch {
        self.prepare(ask.concurrency).await;
        self.issue(ask).await
    }

    /// Every concurrency of `workload`: a note per level, its warm-ups, then each measured batch handed to `step`
    /// as it ends. Returns what stopped the loop early, as a problem (an interrupt, when the command asked to finish
    /// on one, drops the batch in flight and starts no later level; a spawned server that died ends the loop
    /// after the level it died in); empty when every level ran.
    pub(crate) async fn levels(
        &mut self,
        workload: &Workload,
        mut process: Option<&mut ServerProcess>,
        reporter: &mut dyn Reporter,
        step: &mut dyn FnMut(Step),
    ) -> Vec<Problem> {
        let no_extra = Map::new();
        for &c in &workload.concurrency {
            reporter.event(&RunEvent::Note(format!(
                "concurrency {c}: {} warm-up and {} measured batch(es)",
                workload.warmups, workload.repetitions
            )));
            step(Step::Level(c));
            let mut measured = 0u64;
            for i in 0..workload.warmups + workload.repetitions {
                self.prepare(c).await;
                // An interrupt (when the command asked to finish on one) drops the batch in flight: the level keeps
                // the batches that ended, and no later level starts.
                let ask = Ask { workload, concurrency: c, index: i, extra: &no_extra };
                let Some(batch) = crate::server::unless_interrupted(self.issue(&ask)).await else {
                    if measured > 0 {
                        step(Step::Kept);
                    }
                    let sig = crate::server::interrupted().unwrap_or_default();
                    return vec![Problem::new(
                        ProblemCode::Interrupted,
                        format!(
                            "interrupted (signal {sig}) at concurrency {c} after {measured} measured batch(es); the \
                             batch in flight and any later concurrency were not measured"
                        ),
                    )];
                };
                if i >= workload.warmups {
                    measured += 1;
                    step(Step::Measured(batch));
                }
            }
            if let Some(p) = process.as_deref_mut()
                && p.exited().is_some()
            {
                return vec![Problem::new(ProblemCode::ServerDied, format!("the server died at concurrency {c}"))];
            }
            step(Step::Kept);
        }
        Vec::new()
    }
}

/// A request's record as the metrics read it: its timeline, capped at `max_tokens`.
pub(crate) fn to_timeline(r: &RequestRecord, max_tokens: u64) -> Timeline {
    Timeline {
        start: r.start,
        events: r
            .events
            .iter()
            .map(|(at, c, re)| Event { at: *at, content: c.clone(), reasoning: re.clone() })
            .collect(),
        completion_tokens: r.completion_tokens,
        max_tokens: Some(max_tokens),
        error: r.error.clone(),
    }
}

/// How a batch's requests go out: on the pool of the lean, kernel-stamped client, or through reqwest.
enum Ways<'a> {
    Wire(&'a Endpoint, Vec<Conn>),
    Reqwest(&'a Client),
}

/// How one request goes out.
enum Route {
    Wire(Endpoint, Option<Conn>),
    Reqwest(Client),
}

/// One batch: `c` requests released together (closed loop) or on their seeded arrivals (open loop), each its own
/// task; the batch ends when the last ends. Gives back the connections that can carry another request. `extra`
/// fields go into every request body (a paired bench's `ignore_eos`).
async fn run_batch(mut ways: Ways<'_>, model: &str, limits: &Limits, ask: &Ask<'_>) -> (Batch, Vec<Conn>) {
    let (w, c, index, extra) = (ask.workload, ask.concurrency, ask.index, ask.extra);
    let bodies: Vec<Value> = (0..c)
        .map(|i| {
            let mut body = json!({
                "model": model,
                "messages": [{"role": "user", "content": w.prompt(index * c + i)}],
                "max_tokens": w.max_tokens,
                "temperature": 0,
                "stream": true,
                "stream_options": {"include_usage": true},
            });
            if let Value::Object(m) = &mut body {
                m.extend(extra.clone());
                // After the extras: the format sent is the one the answers are judged against.
                if let Some(format) = &w.response_format {
                    m.insert("response_format".into(), format.clone());
                }
            }
            body
        })
        .collect();
    let structured = w.response_format.is_some();
    let in_flight = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let released = Instant::now();
    let released_ns = gauntlet_stamp::monotonic_ns();
    let deadline = released + limits.request_timeout;
    let arrivals = w.arrivals(index, c);
    let (response_bytes, text_kept) = (limits.response_bytes, limits.text_kept);
    let tasks: Vec<_> = bodies
        .into_iter()
        .zip(arrivals)
        .map(|(body, at)| {
            let (in_flight, peak) = (in_flight.clone(), peak.clone());
            let route = match &mut ways {
                Ways::Wire(ep, pool) => Route::Wire((*ep).clone(), pool.pop()),
                Ways::Reqwest(client) => Route::Reqwest((*client).clone()),
            };
            tokio::spawn(async move {
                if at > 0.0 {
                    // The open loop's wait has the batch's deadline too: at a tiny rate an arrival lies hours away,
                    // and such a request is failed with the reason instead of being waited for.
                    match Duration::try_from_secs_f64(at).ok().and_then(|d| released.checked_add(d)) {
                        Some(arrival) if arrival < deadline => tokio::time::sleep_until(arrival.into()).await,
                        _ => return (late_arrival(at, deadline - released), None, None, false, None),
                    }
                }
                peak.fetch_max(in_flight.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                let (start, result, connected, unstamped, conn) = match route {
                    Route::Wire(ep, conn) => {
                        let s = wire::stream_chat(&ep, conn, &body, deadline, response_bytes).await;
                        let start = s.sent_ns.saturating_sub(released_ns.unwrap_or(0)) as f64 / 1e9;
                        (start, s.answer, s.connected, Some(s.unstamped_reads), s.conn)
                    }
                    Route::Reqwest(client) => {
                        let start = released.elapsed().as_secs_f64();
                        (start, client.chat(&body, deadline).await, false, None, None)
                    }
                };
                in_flight.fetch_sub(1, Ordering::SeqCst);
                let mut answer = None;
                let record = match result {
                    Ok(a) => {
                        // A structured answer is judged whole once the batch has ended (not while other requests
                        // still stream: the client's work must not sit in their times); the record keeps a few KiB.
                        answer = structured.then_some(a.content);
                        let (events, text_dropped) = keep_events(a.timeline, text_kept);
                        RequestRecord {
                            start,
                            events,
                            completion_tokens: a.usage.and_then(|u| u.completion_tokens),
                            error: None,
                            connected,
                            text_dropped,
                            timings: a.timings,
                            ..Default::default()
                        }
                    }
                    Err(e) => RequestRecord {
                        start,
                        events: Vec::new(),
                        completion_tokens: None,
                        error: Some(e.to_string()),
                        connected,
                        text_dropped: 0,
                        timings: None,
                        ..Default::default()
                    },
                };
                (record, unstamped, conn, true, answer)
            })
        })
        .collect();
    let mut pool = match ways {
        Ways::Wire(_, pool) => pool,
        Ways::Reqwest(_) => Vec::new(),
    };
    let mut requests = Vec::new();
    let mut answers = Vec::new();
    let (mut stamped, mut unstamped) = (0usize, 0usize);
    let joined = futures_util::future::join_all(tasks).await;
    let seconds = released.elapsed().as_secs_f64();
    for joined in joined {
        match joined {
            Ok((record, reads, conn, sent, answer)) => {
                // A request never sent (its arrival lay past the deadline) has no reads to count.
                match (sent, reads) {
                    (false, _) => {}
                    (true, Some(0)) => stamped += 1,
                    (true, _) => unstamped += 1,
                }
                requests.push(record);
                answers.push(answer);
                pool.extend(conn);
            }
            Err(e) => {
                requests.push(RequestRecord {
                    start: 0.0,
                    events: Vec::new(),
                    completion_tokens: None,
                    error: Some(format!("request task failed: {e}")),
                    connected: false,
                    text_dropped: 0,
                    timings: None,
                    ..Default::default()
                });
                answers.push(None);
            }
        }
    }
    // Reqwest's reads count as unstamped; a request whose task failed has no reads to count.
    let receive_clock = match (stamped, unstamped) {
        (0, 0) => None,
        (_, 0) => Some(ReceiveClock::Kernel),
        (0, _) => Some(ReceiveClock::Client),
        _ => Some(ReceiveClock::Mixed),
    };
    if let Some(format) = &w.response_format {
        judge(format, &mut requests, answers);
    }
    let batch = Batch {
        seconds,
        released_monotonic_ns: released_ns,
        in_flight_max: peak.load(Ordering::SeqCst),
        receive_clock,
        requests,
    };
    (batch, pool)
}

/// Judges each answered request's whole answer (`answers`, in the order of `requests`; `None` for one not answered)
/// against the structured-output format's schema, compiled once a batch. The manifest compiled it already: should
/// it not compile here, every answer is judged invalid with the reason rather than the bench panicking.
fn judge(format: &Value, requests: &mut [RequestRecord], answers: Vec<Option<String>>) {
    let schema = crate::suite::compile_schema(&format["json_schema"]["schema"]);
    for (r, answer) in requests.iter_mut().zip(answers) {
        let Some(answer) = answer else { continue };
        let failure = match &schema {
            Ok(v) => crate::suite::schema_failure_with(&answer, v),
            Err(e) => Some(e.to_string()),
        };
        r.structured_ok = Some(failure.is_none());
        r.structured_error = failure;
    }
}

/// The record of an open-loop request whose arrival lies past the batch's deadline: never sent, failed.
fn late_arrival(at: f64, limit: Duration) -> RequestRecord {
    RequestRecord {
        start: at,
        events: Vec::new(),
        completion_tokens: None,
        error: Some(format!(
            "not sent: its arrival {at:.3e}s after the batch's release lies past the request timeout ({}); \
             the open loop's rate is too low for this concurrency",
            humantime::format_duration(limit)
        )),
        connected: false,
        text_dropped: 0,
        timings: None,
        ..Default::default()
    }
}

/// Every event's time, with at most `cap` bytes of text kept: past the cap an event keeps only its first
/// character, so it still reads as a token (the metrics count token events) and its time stays exact. Returns
/// the events and the bytes of text dropped (the record's `text_dropped`).
pub fn keep_events(timeline: Vec<gauntlet_schema::StreamEvent>, cap: usize) -> (Vec<(f64, String, String)>, u64) {
    let mut budget = cap;
    let mut dropped = 0u64;
    let mut keep = |mut text: String| -> String {
        if text.len() <= budget {
            budget -= text.len();
            return text;
        }
        // Past the budget: the part that fits (on a character boundary), else the first character.
        let mut end = budget;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        if end == 0 {
            end = text.chars().next().map_or(0, char::len_utf8);
        }
        budget = budget.saturating_sub(end);
        dropped += (text.len() - end) as u64;
        text.truncate(end);
        text.shrink_to_fit();
        text
    };
    let events = timeline.into_iter().map(|e| (e.t, keep(e.content), keep(e.reasoning))).collect();
    (events, dropped)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A keep-alive server on 127.0.0.1: a non-streamed request (a connection's warm-up) gets a one-token answer;
    /// a streamed one, after `delay`, one chunk echoing its prompt (and `pad` more bytes), a finish, the usage
    /// and `[DONE]`. Counts the streamed requests it answered. Its base URL.
    async fn serve(delay: Duration, pad: usize, streamed: Arc<AtomicUsize>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            while let Ok((sock, _)) = listener.accept().await {
                tokio::spawn(answer(sock, delay, pad, streamed.clone()));
            }
        });
        base
    }

    async fn answer(mut sock: tokio::net::TcpStream, delay: Duration, pad: usize, streamed: Arc<AtomicUsize>) {
        let mut buf = Vec::new();
        loop {
            let end = loop {
                if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break at + 4;
                }
                if sock.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                    return;
                }
            };
            let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while buf.len() < end + len {
                if sock.read_buf(&mut buf).await.unwrap_or(0) == 0 {
                    return;
                }
            }
            let body: Value = serde_json::from_slice(&buf[end..end + len]).unwrap_or_default();
            buf.drain(..end + len);
            let (kind, text) = if body["stream"] == true {
                streamed.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(delay).await;
                let prompt = body["messages"][0]["content"].as_str().unwrap_or_default();
                let delta = format!("{prompt}{}", "x".repeat(pad));
                let chunk = json!({"choices": [{"index": 0, "delta": {"content": delta}, "finish_reason": null}]});
                let finish = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]});
                let usage = json!({"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}});
                ("text/event-stream", format!("data: {chunk}\n\ndata: {finish}\n\ndata: {usage}\n\ndata: [DONE]\n\n"))
            } else {
                let whole = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"},
                    "finish_reason": "length"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}});
                ("application/json", whole.to_string())
            };
            let head = format!("HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\r\n", text.len());
            if sock.write_all(head.as_bytes()).await.is_err() || sock.write_all(text.as_bytes()).await.is_err() {
                return;
            }
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    }

    fn workload(concurrency: Vec<usize>, warmups: usize, repetitions: usize) -> Workload {
        let mut w = Workload::new(concurrency, 8, warmups, repetitions);
        w.prompts = (0..16).map(|i| format!("prompt {i}")).collect();
        w
    }

    fn limits(w: &Workload) -> Limits {
        Limits::of(Duration::from_secs(10), w)
    }

    /// The one rule of the transport: a plain `http://` server whose host resolves gets the lean, kernel-stamped
    /// client; HTTPS gets reqwest. And the limits are the workload's: the response bytes follow `max_tokens` up
    /// to the client's usual cap, the text kept is [`TEXT_KEPT`].
    #[test]
    fn plain_http_gets_the_stamped_client_anything_else_reqwest_and_limits_follow_the_workload() {
        let rt = runtime();
        let w = workload(vec![1], 0, 1);
        let open = |url: &str| rt.block_on(Room::open(&Client::new(url, None), "m", limits(&w)));
        assert!(open("http://127.0.0.1:9").endpoint.is_some(), "plain HTTP: the stamped client");
        assert!(open("http://127.0.0.1:9/prefix/").endpoint.is_some(), "a path prefix is kept, not refused");
        assert!(open("https://127.0.0.1:9").endpoint.is_none(), "HTTPS: reqwest");
        let l = limits(&w);
        assert_eq!(
            (l.request_timeout, l.response_bytes, l.text_kept),
            (Duration::from_secs(10), 8 * 4096 + 65536, 4096)
        );
        let huge = Workload::new(vec![1], u64::MAX, 0, 1);
        assert_eq!(Limits::of(Duration::ZERO, &huge).response_bytes, crate::client::DEFAULT_MAX_RESPONSE_BYTES);
        assert_eq!(response_limit(0), 65536);
    }

    /// A batch of `c` sends prompts `index · c ..` and keeps its records in that order, on connections opened
    /// before the release (no measured request connects), the whole batch in flight at once, every read stamped
    /// by the kernel.
    #[test]
    fn a_batch_keeps_its_timelines_in_prompt_order_on_connections_opened_before_the_release() {
        let rt = runtime();
        let streamed = Arc::new(AtomicUsize::new(0));
        let base = rt.block_on(serve(Duration::from_millis(50), 0, streamed.clone()));
        let w = workload(vec![4], 0, 2);
        let mut room = rt.block_on(Room::open(&Client::new(&base, None), "m", limits(&w)));
        let extra = Map::new();
        for index in 0..2 {
            let batch = rt.block_on(room.batch(&Ask { workload: &w, concurrency: 4, index, extra: &extra }));
            assert_eq!(batch.requests.len(), 4);
            for (i, r) in batch.requests.iter().enumerate() {
                assert_eq!(r.error, None, "request {i}");
                let text: String = r.events.iter().map(|(_, c, _)| c.as_str()).collect();
                assert_eq!(text, format!("prompt {}", index * 4 + i), "request {i} of batch {index}");
                assert!(!r.connected, "request {i} of batch {index} opened its own connection");
                let t = to_timeline(r, w.max_tokens);
                assert!(t.events.iter().all(|e| e.at > 0.0) && t.max_tokens == Some(8), "{t:?}");
            }
            assert_eq!(batch.in_flight_max, 4);
            assert_eq!(batch.receive_clock, Some(ReceiveClock::Kernel));
            assert!(batch.seconds >= 0.05, "{}", batch.seconds);
        }
        assert_eq!(streamed.load(Ordering::SeqCst), 8);
    }

    /// The limits are honoured: an answer past the response bytes fails with the limit, and a request past the
    /// request timeout fails as timed out, each in its own record while the batch's others stand.
    #[test]
    fn a_request_past_the_response_bytes_or_the_timeout_fails_with_the_limit_it_passed() {
        let rt = runtime();
        let w = workload(vec![2], 0, 1);
        let extra = Map::new();
        let ask = Ask { workload: &w, concurrency: 2, index: 0, extra: &extra };
        let big = rt.block_on(serve(Duration::ZERO, 10_000, Arc::default()));
        let small = Limits { response_bytes: 2000, ..limits(&w) };
        let mut room = rt.block_on(Room::open(&Client::new(&big, None), "m", small));
        let batch = rt.block_on(room.batch(&ask));
        for r in &batch.requests {
            assert_eq!(r.error.as_deref(), Some("response larger than 2000 bytes"), "{r:?}");
        }
        let slow = rt.block_on(serve(Duration::from_secs(5), 0, Arc::default()));
        let short = Limits { request_timeout: Duration::from_millis(300), ..limits(&w) };
        let mut room = rt.block_on(Room::open(&Client::new(&slow, None), "m", short));
        let started = Instant::now();
        let batch = rt.block_on(room.batch(&ask));
        assert!(started.elapsed() < Duration::from_secs(4), "the timeout was not honoured");
        for r in &batch.requests {
            assert!(r.error.as_deref().is_some_and(|e| e.starts_with("timed out after 0.")), "{r:?}");
        }
    }

    /// The level loop hands every level's measured batches in order, never a warm-up, and keeps each level; the
    /// warm-ups are sent all the same.
    #[test]
    fn the_level_loop_hands_only_measured_batches_and_keeps_every_level() {
        let rt = runtime();
        let streamed = Arc::new(AtomicUsize::new(0));
        let base = rt.block_on(serve(Duration::ZERO, 0, streamed.clone()));
        let w = workload(vec![1, 2], 1, 2);
        let mut room = rt.block_on(Room::open(&Client::new(&base, None), "m", limits(&w)));
        let mut seen = Vec::new();
        let mut step = |s: Step| {
            seen.push(match s {
                Step::Level(c) => format!("level {c}"),
                Step::Measured(b) => {
                    let texts: Vec<String> =
                        b.requests.iter().map(|r| r.events.iter().map(|(_, c, _)| c.as_str()).collect()).collect();
                    texts.join("|")
                }
                Step::Kept => "kept".into(),
            })
        };
        let stopped = rt.block_on(room.levels(&w, None, &mut crate::run::Silent, &mut step));
        assert!(stopped.is_empty(), "{stopped:?}");
        // Batch 0 of each level is its warm-up: batches 1 and 2 are measured, with their own prompts.
        let expected =
            ["level 1", "prompt 1", "prompt 2", "kept", "level 2", "prompt 2|prompt 3", "prompt 4|prompt 5", "kept"];
        assert_eq!(seen, expected);
        assert_eq!(streamed.load(Ordering::SeqCst), 3 + 6);
    }
}
