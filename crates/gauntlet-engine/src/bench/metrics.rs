//! Latency metrics derived from the raw timeline of each request, named and defined as vLLM and AIPerf do
//! (reference/metrics.md §4.2–4.3):
//!
//! - `ttft`: first event with a non-empty content **or reasoning** delta − request start (a role-only or empty
//!   first chunk is not a token).
//! - `ttfo`: first event with non-empty content (AIPerf's time to first output token, after reasoning).
//! - `e2el`: last event with a token − request start (AIPerf's request latency).
//! - `tpot`: (e2el − ttft) / (n − 1), n the request's output tokens; vLLM's TPOT, AIPerf's ITL. Needs n ≥ 2.
//! - `itl_chunk`: gaps between successive token events, pooled over requests; vLLM's ITL, AIPerf's ICL. A server
//!   sending several tokens per event makes these gaps larger than per-token gaps, which is why TPOT exists.
//! - Output tokens come from `usage.completion_tokens` when the server sends it, else from the number of token
//!   events (a lower bound); the source is recorded per request and a run never mixes them silently.

use serde::Serialize;

pub use super::summary::{Distribution, Values, distribution};

/// One SSE event of a request, `at` seconds after the request was sent.
#[derive(Debug, Clone, Default)]
pub struct Event {
    pub at: f64,
    pub content: String,
    pub reasoning: String,
}

impl Event {
    fn is_token(&self) -> bool {
        !self.content.is_empty() || !self.reasoning.is_empty()
    }
}

/// Everything the client saw of one request.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// When the request was sent, seconds on the run's clock (for the run's duration).
    pub start: f64,
    pub events: Vec<Event>,
    pub completion_tokens: Option<u64>,
    pub max_tokens: Option<u64>,
    /// Transport or HTTP error; such a request is counted as failed, never dropped.
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestMetrics {
    pub ttft: f64,
    pub ttfo: Option<f64>,
    pub e2el: f64,
    pub tpot: Option<f64>,
    pub chunk_gaps: Vec<f64>,
    pub output_tokens: u64,
    /// `usage` or `events`.
    pub token_source: &'static str,
    /// (n − 1) / (e2el − ttft).
    pub decode_tokens_per_second: Option<f64>,
    /// Disagreements between the server's count and what it streamed.
    pub problems: Vec<String>,
}

/// Why a request gives no metrics; either way it counts as failed, never dropped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The transport's or the server's error, as the timeline keeps it (a record's `error` text).
    #[error("{0}")]
    Failed(String),
    /// It ended without error, but no event carried a token.
    #[error("no token in the stream")]
    NoToken,
}

/// "server clock (llama.cpp timings)": the words a record and a report use for the server's own clock (the
/// bench's and the paired bench's decode metric when every request carried the server's timings).
pub fn server_clock_words(engine: &str) -> String {
    format!("server clock ({engine} timings)")
}

/// The metrics of one request, or why it failed (an error, or no token at all).
pub fn request(t: &Timeline) -> Result<RequestMetrics, RequestError> {
    if let Some(e) = &t.error {
        return Err(RequestError::Failed(e.clone()));
    }
    let tokens: Vec<&Event> = t.events.iter().filter(|e| e.is_token()).collect();
    let (Some(first), Some(last)) = (tokens.first(), tokens.last()) else {
        return Err(RequestError::NoToken);
    };
    let ttft = first.at;
    let e2el = last.at;
    let ttfo = t.events.iter().find(|e| !e.content.is_empty()).map(|e| e.at);
    let chunk_gaps: Vec<f64> = tokens.windows(2).map(|w| w[1].at - w[0].at).collect();
    let mut problems = Vec::new();
    let (output_tokens, token_source) = match t.completion_tokens {
        Some(n) => {
            if (n as usize) < tokens.len() {
                problems.push(format!("usage says {n} completion tokens but {} events carried tokens", tokens.len()));
            }
            if let Some(max) = t.max_tokens
                && n > max
            {
                problems.push(format!("usage says {n} completion tokens, more than max_tokens {max}"));
            }
            (n, "usage")
        }
        None => (tokens.len() as u64, "events"),
    };
    let tpot = (output_tokens >= 2).then(|| (e2el - ttft) / (output_tokens - 1) as f64);
    let decode_tokens_per_second =
        (output_tokens >= 2 && e2el > ttft).then(|| (output_tokens - 1) as f64 / (e2el - ttft));
    Ok(RequestMetrics {
        ttft,
        ttfo,
        e2el,
        tpot,
        chunk_gaps,
        output_tokens,
        token_source,
        decode_tokens_per_second,
        problems,
    })
}

/// Service-level objectives for goodput (seconds); a request meets them when every given one holds.
#[derive(Debug, Clone, Default)]
pub struct Slos {
    pub ttft: Option<f64>,
    pub tpot: Option<f64>,
    pub e2el: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct RunMetrics {
    pub requests: usize,
    pub failed: usize,
    pub error_rate: f64,
    /// vLLM: from the release of the batch to the last response (`duration_wall`); AIPerf: last response end −
    /// first request start (`duration_span`).
    pub duration_wall: f64,
    pub duration_span: f64,
    pub output_tokens: u64,
    pub output_throughput_wall: f64,
    pub output_throughput_span: f64,
    pub request_throughput_wall: f64,
    /// Requests meeting every SLO per second of wall duration (failed requests never meet them).
    pub goodput_wall: Option<f64>,
    /// `usage`, `events`, or `mixed` (a finding: counts of different kinds were added).
    pub token_source: String,
    pub ttft: Option<Distribution>,
    pub ttfo: Option<Distribution>,
    pub tpot: Option<Distribution>,
    pub itl_chunk: Option<Distribution>,
    pub e2el: Option<Distribution>,
    pub problems: Vec<String>,
}

/// Folds a batch's requests; `released` and `finished` are the wall-clock bounds of the batch on the run's clock.
pub fn run(timelines: &[Timeline], released: f64, finished: f64, slos: &Slos) -> RunMetrics {
    let mut pool = Pool::new(slos.clone());
    for t in timelines {
        pool.add(t.start, request(t));
    }
    pool.finish(released, finished)
}

/// Problem lines a run keeps: a server that disagrees with itself on every request must not grow the record (and
/// the bench's memory) by a line per request; past these, the rest are counted.
pub const PROBLEMS_KEPT: usize = 100;

/// What a run's metrics need of its requests, folded one request at a time (a long bench keeps this, not the
/// requests): the counts, and each distribution's [`Values`] (TTFT, TTFO, TPOT and E2EL per successful request,
/// every gap between token events): exact up to `summary::EXACT_MAX` values each, the same bit for bit as folding
/// every request at once in the same order; past that a fixed set of buckets, so a bench that runs for hours holds
/// no more for them than one of a few hundred requests.
#[derive(Debug, Clone, Default)]
pub struct Pool {
    slos: Slos,
    requests: usize,
    ok: usize,
    good: usize,
    first_start: Option<f64>,
    last_end: Option<f64>,
    output_tokens: u64,
    usage: bool,
    events: bool,
    problems: Vec<String>,
    problems_more: usize,
    ttft: Values,
    ttfo: Values,
    tpot: Values,
    gaps: Values,
    e2el: Values,
}

impl Pool {
    pub fn new(slos: Slos) -> Pool {
        Pool { slos, ..Pool::default() }
    }

    /// A pool for a long fold (a bench's level): its distributions hold their whole bound from the start
    /// ([`Values::reserved`]) and its problem lines room for [`PROBLEMS_KEPT`], so folding allocates nothing more.
    pub fn reserved(slos: Slos) -> Pool {
        let v = Values::reserved;
        Pool {
            slos,
            problems: Vec::with_capacity(PROBLEMS_KEPT),
            ttft: v(),
            ttfo: v(),
            tpot: v(),
            gaps: v(),
            e2el: v(),
            ..Pool::default()
        }
    }

    /// Requests folded so far.
    pub fn requests(&self) -> usize {
        self.requests
    }

    /// Heap bytes of the distributions' values and the problem lines' room: bounded however many requests are folded.
    pub fn heap_bytes(&self) -> usize {
        let problems = self.problems.capacity() * std::mem::size_of::<String>();
        problems
            + [&self.ttft, &self.ttfo, &self.tpot, &self.gaps, &self.e2el].iter().map(|v| v.heap_bytes()).sum::<usize>()
    }

    /// One request sent `start` seconds into the run, with its metrics or why it failed.
    pub fn add(&mut self, start: f64, result: Result<RequestMetrics, RequestError>) {
        self.requests += 1;
        let Ok(m) = result else { return };
        self.ok += 1;
        self.first_start = Some(self.first_start.map_or(start, |f| f.min(start)));
        let end = start + m.e2el;
        self.last_end = Some(self.last_end.map_or(end, |l| l.max(end)));
        self.output_tokens = self.output_tokens.saturating_add(m.output_tokens);
        match m.token_source {
            "usage" => self.usage = true,
            _ => self.events = true,
        }
        for p in m.problems {
            if self.problems.len() < PROBLEMS_KEPT {
                self.problems.push(p);
            } else {
                self.problems_more += 1;
            }
        }
        let s = &self.slos;
        if s.ttft.is_none_or(|s| m.ttft <= s)
            && s.tpot.is_none_or(|s| m.tpot.unwrap_or(0.0) <= s)
            && s.e2el.is_none_or(|s| m.e2el <= s)
        {
            self.good += 1;
        }
        self.ttft.push(m.ttft);
        self.ttfo.extend(m.ttfo);
        self.tpot.extend(m.tpot);
        self.gaps.extend(m.chunk_gaps.iter().copied());
        self.e2el.push(m.e2el);
    }

    pub fn finish(self, released: f64, finished: f64) -> RunMetrics {
        let failed = self.requests - self.ok;
        let duration_wall = (finished - released).max(0.0);
        let duration_span = match (self.first_start, self.last_end) {
            (Some(first), Some(last)) => (last - first).max(0.0),
            _ => 0.0,
        };
        let per_second = |x: f64, d: f64| if d > 0.0 { x / d } else { 0.0 };
        let token_source = match (self.usage, self.events) {
            (false, false) => "none",
            (true, false) => "usage",
            (false, true) => "events",
            (true, true) => "mixed",
        };
        let mut problems = self.problems;
        if self.problems_more > 0 {
            problems.push(format!("… and {} more problem(s) like these", self.problems_more));
        }
        if token_source == "mixed" {
            problems.push("some responses carried usage and some did not: token counts are of mixed kinds".into());
        }
        let s = &self.slos;
        let good = (s.ttft.is_some() || s.tpot.is_some() || s.e2el.is_some()).then_some(self.good);
        RunMetrics {
            requests: self.requests,
            failed,
            error_rate: per_second(failed as f64, self.requests as f64),
            duration_wall,
            duration_span,
            output_tokens: self.output_tokens,
            output_throughput_wall: per_second(self.output_tokens as f64, duration_wall),
            output_throughput_span: per_second(self.output_tokens as f64, duration_span),
            request_throughput_wall: per_second(self.ok as f64, duration_wall),
            goodput_wall: good.map(|g| per_second(g as f64, duration_wall)),
            token_source: token_source.to_owned(),
            ttft: self.ttft.distribution(),
            ttfo: self.ttfo.distribution(),
            tpot: self.tpot.distribution(),
            itl_chunk: self.gaps.distribution(),
            e2el: self.e2el.distribution(),
            problems,
        }
    }
}

#[cfg(test)]
mod goodput_tests {
    use super::*;

    /// A request of `n` one-word events `gap` apart after a TTFT of `ttft` seconds.
    fn timeline(ttft: f64, gap: f64, n: usize) -> Timeline {
        let events = (0..n)
            .map(|i| Event { at: ttft + i as f64 * gap, content: "w ".into(), reasoning: String::new() })
            .collect();
        Timeline { start: 0.0, events, completion_tokens: Some(n as u64), max_tokens: Some(64), error: None }
    }

    /// A bench folds its requests into a pool for as long as it runs (a soak: hours): past the exact limit of each
    /// distribution the pool stops growing. (Before it kept every value: 8 bytes per gap and per request metric.)
    #[test]
    fn a_pool_holds_the_same_memory_after_five_thousand_requests_as_after_fifty_thousand() {
        let mut pool = Pool::new(Slos::default());
        let mut held = 0;
        for i in 0..50_000 {
            let t = timeline(0.05 + (i % 13) as f64 * 0.001, 0.01 + (i % 7) as f64 * 0.0005, 40);
            pool.add(i as f64, request(&t));
            if i == 5_000 {
                held = pool.heap_bytes();
            }
        }
        assert_eq!(pool.heap_bytes(), held);
        assert!(held < 5 * 40 * 1024, "{held} bytes");
        let m = pool.finish(0.0, 50_000.0);
        let tpot = m.tpot.unwrap();
        assert_eq!(tpot.count, 50_000);
        assert_eq!(tpot.percentiles_within, Some(super::super::summary::RELATIVE_ERROR));
        assert_eq!(m.itl_chunk.unwrap().count, 50_000 * 39);
    }

    #[test]
    fn goodput_counts_the_requests_per_second_that_met_every_limit() {
        let failed = Timeline { error: Some("HTTP 500".into()), ..Timeline::default() };
        // Good; TTFT too slow; TPOT too slow; failed (never good). Two seconds of wall duration.
        let batch = [timeline(0.1, 0.01, 5), timeline(0.9, 0.01, 5), timeline(0.1, 0.05, 5), failed];
        let slos = Slos { ttft: Some(0.5), tpot: Some(0.02), e2el: Some(1.0) };
        let m = run(&batch, 0.0, 2.0, &slos);
        assert_eq!(m.goodput_wall, Some(0.5), "one good request in two seconds");
        assert_eq!(m.request_throughput_wall, 1.5);
        // Only the limits given count: without the TPOT limit the slow-decoding request is good too.
        let m = run(&batch, 0.0, 2.0, &Slos { tpot: None, ..slos });
        assert_eq!(m.goodput_wall, Some(1.0));
        // An E2EL limit alone: the 0.9 s + 4 × 10 ms request ends at 0.94 s, inside 1 s.
        let m = run(&batch, 0.0, 2.0, &Slos { e2el: Some(0.95), ..Slos::default() });
        assert_eq!(m.goodput_wall, Some(1.5));
        assert_eq!(run(&batch, 0.0, 2.0, &Slos::default()).goodput_wall, None, "no limits, no goodput");
    }
}
