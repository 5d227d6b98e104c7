//! A scripted OpenAI-compatible server on 127.0.0.1 for fault-injection tests: it crashes, hangs, sends malformed
//! streams, ignores SIGTERM, leaks a child… on request. It is never a substitute for a real inference server; the
//! real-server tests use llama.cpp.
//!
//! Accepts llama-server's `-m MODEL --host H --port P` so a gauntlet profile can start it like any server, plus:
//!   --answers FILE          JSON object: substring of the last user message → answer text (default answer "ok");
//!                           keys `__token_delay_ms` and `__load_delay_ms` set the delays below, so a test can slow
//!                           the server down without changing its command line (which is part of the identity);
//!                           `__steady_pace: "1"` paces streamed words from the stream's start, not word by word;
//!                           `__server_timings: "1"` ends a streamed answer with llama.cpp's `timings` as a server
//!                           that decodes at exactly the token delay would report them (`predicted_per_second` =
//!                           1000 / the delay); `__client_noise_ms: "N"` holds each streamed answer after its first
//!                           word for a pseudo-random 0 to N ms (fixed by the request's number), a stall the server's
//!                           own timings do not contain (a busy client or network between the two)
//!   --fault KIND            crash-load | crash-after | hang-first-byte | hang-mid-stream | no-done | malformed |
//!                           http500 | http400 (llama.cpp's context-size refusal) | wrong-content-type | oversized (streamed or not) | bad-chunking (a streamed
//!                           answer whose chunked framing breaks after its first event) | flood (12 MiB of
//!                           one-character token events)
//!                           | done-in-text (a streamed answer with a token whose text is `[DONE]`, the rest 300 ms
//!                           later) | lf-head (a stream head ended by a bare LF, its events framed with CRLF, head and
//!                           first event in one write) | deep-timings (a non-streamed answer whose `timings` object
//!                           nests 126 deep)
//!                           | echo-auth (every answer quotes the request's Authorization header, streamed in
//!                           5-byte pieces; a message with `beta` gets HTTP 500 whose body quotes it too, with
//!                           workflow commands on lines of their own: a server that leaks a key and injects)
//!   --fault-on TEXT         apply the request fault only when the last user message contains TEXT
//!   --crash-after N         with --fault crash-after: exit after N answered chat requests (warm-up included)
//!   --load-delay-ms N       wait before listening (a slow load)
//!   --token-delay-ms N      wait per generated word (a slow decode)
//!   --ignore-sigterm        keep running on SIGTERM
//!   --leak-child            start a child in our process group that outlives us
//!   --escape-child          start a child that leaves our process group and session (setsid) and double-forks,
//!                           so that a sleeper outside the group, re-parented away from us, outlives us
//!   --escape-clean          start a child that clears its environment and leaves our session (`env -i setsid`),
//!                           and leave it running: no marker, no group of ours, still our child until we exit
//!   --prefix PATH           serve under this path prefix only (everything else is 404)
//!   --tag TEXT              ignored; lets a test find every process of its run in /proc
//!   --lifetime-s N          exit by itself after N seconds (default 300): a fake never outlives a test run
//!   --diverge ROW[:near-tie] change the answer's last token under one condition of the determinism matrix (R3):
//!                           repeat (a prompt's second request) | concurrent (another request arrived within
//!                           500 ms of this one; each request then takes 550 ms, so one sent after another's
//!                           answer is never that close) | stream | prefix-cache
//!                           (`cache_prompt: false`) | restart (not the first start; needs --state-file) | draft
//!                           (every answer: a speculative draft that is not lossless, given in a profile's
//!                           `draft_arguments` so that only the profile with the draft changes its answers). The new
//!                           token is the reference's second candidate 0.01 nats below it with `:near-tie`, a
//!                           candidate 0.15 nats below with `:numerical` (the new answer ranks the old token 0.15
//!                           below its own: a swing of 0.30 nats), else a candidate 4.95 nats below
//!   --jitter NATS           shift every logprob entry (the chosen token and its alternatives alike, so the gaps
//!                           between candidates stay) by a pseudo-random amount in [-NATS, NATS], fixed by the
//!                           request's number, the token's position and the server's start count: two answers then
//!                           share tokens whose logprobs differ by at most 2 × NATS
//!   --state-file PATH       counts this server's starts (for `--diverge restart`)
//!   --dialect NAME          speak one engine's wire shapes: llama.cpp | vllm | sglang | tgi | trtllm | ollama
//!                           | transformers | llama-cpp-python
//!                           (health, models, stream chunks, usage, reasoning, tool calls, errors; see dialect.rs);
//!                           the faults above do not apply then
//!   --request-log FILE      append the `--tag` value and the last user message, one line per chat request, so that
//!                           a test sees the order in which several servers were asked
//!   --proxy-to URL          be a delaying proxy to a real server at http://HOST:PORT instead (see `proxy.rs`)
//!   --event-delay-us N      with --proxy-to: each streamed event N µs later than the last one's delay (cumulative)
//!   --hold-first-ms N       with --proxy-to: hold every event of every other streamed answer (the 1st, 3rd, …)
//!                           until N ms after its first arrived, then release them together (a small-write hop's
//!                           Nagle against delayed ACK, or any hop that buffers the start of a stream)
//!   --metrics-fault KIND    break `GET /metrics`: malformed | oversized (5 MiB) | hang | http404 | non-finite
//!                           (NaN, +Inf and a counter change that overflows). Without it,
//!                           `/metrics` is Prometheus text in vLLM's names whose counters advance per chat request
//!                           (one token per word; a prompt asked before counts as prefix-cache hits)
//!
//! Attached-server modes (`--pose`, `--models`, `--no-health`, `--fault hang-after`): see `attach_modes.rs`.
//!
//! A request with `logprobs: true` gets llama.cpp's `logprobs.content` (one token per word: a stable id, the text,
//! its bytes, a logprob and `top_logprobs` up to `top_logprobs`), streamed or not.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod attach_modes;
mod dialect;
mod proxy;

#[derive(Default)]
struct Config {
    modes: attach_modes::Modes,
    host: String,
    port: u16,
    answers: BTreeMap<String, String>,
    fault: Option<String>,
    fault_on: Option<String>,
    crash_after: u32,
    load_delay_ms: u64,
    token_delay_ms: u64,
    /// `__steady_pace: "1"`: the k-th streamed word is due k token delays after the stream began, so a busy
    /// machine delays a word by one late wake-up instead of stretching every sleep (a decode that does not drift).
    steady_pace: bool,
    /// `__server_timings: "1"`: streamed answers carry llama.cpp `timings` of the paced decode.
    server_timings: bool,
    /// `__client_noise_ms: "N"`: a pseudo-random stall of 0..=N ms after each streamed answer's first word.
    client_noise_ms: u64,
    ignore_sigterm: bool,
    leak_child: bool,
    escape_child: bool,
    /// Start a child that clears its environment and leaves the session (`env -i setsid …`), and leave it running.
    escape_clean: bool,
    lifetime_s: u64,
    sleeper: bool,
    escaper: bool,
    prefix: String,
    diverge: Option<String>,
    near_tie: bool,
    numerical: bool,
    jitter: f64,
    state_file: Option<String>,
    /// Earlier starts counted in the state file.
    earlier_starts: u32,
    dialect: Option<dialect::Dialect>,
    tag: String,
    request_log: Option<String>,
    proxy_to: Option<String>,
    event_delay_us: u64,
    hold_first_ms: u64,
    metrics_fault: Option<String>,
}

fn parse_args() -> Config {
    let mut c = Config { host: "127.0.0.1".into(), lifetime_s: 300, ..Config::default() };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| die(&format!("{a} needs a value")));
        match a.as_str() {
            "--version" => {
                println!("gauntlet-fake-server {}", env!("CARGO_PKG_VERSION"));
                std::process::exit(0);
            }
            "-m" | "--model" => {
                val();
            }
            "--tag" => c.tag = val(),
            "--request-log" => c.request_log = Some(val()),
            "--proxy-to" => c.proxy_to = Some(val()),
            "--metrics-fault" => c.metrics_fault = Some(val()),
            "--hold-first-ms" => c.hold_first_ms = val().parse().unwrap_or_else(|_| die("bad --hold-first-ms")),
            "--event-delay-us" => c.event_delay_us = val().parse().unwrap_or_else(|_| die("bad --event-delay-us")),
            "--host" => c.host = val(),
            "--port" => c.port = val().parse().unwrap_or_else(|_| die("bad --port")),
            "--answers" => {
                let text = std::fs::read_to_string(val()).unwrap_or_else(|e| die(&format!("--answers: {e}")));
                c.answers = serde_json::from_str(&text).unwrap_or_else(|e| die(&format!("--answers: {e}")));
                let number = |k: &str| c.answers.get(k).and_then(|v| v.parse::<u64>().ok());
                c.token_delay_ms = number("__token_delay_ms").unwrap_or(c.token_delay_ms);
                c.load_delay_ms = number("__load_delay_ms").unwrap_or(c.load_delay_ms);
                c.steady_pace = number("__steady_pace").is_some_and(|n| n != 0);
                c.server_timings = number("__server_timings").is_some_and(|n| n != 0);
                c.client_noise_ms = number("__client_noise_ms").unwrap_or(0);
            }
            "--fault" => c.fault = Some(val()),
            "--prefix" => c.prefix = val(),
            "--fault-on" => c.fault_on = Some(val()),
            "--diverge" => {
                let v = val();
                let (row, flavour) = v.split_once(':').unwrap_or((v.as_str(), ""));
                if !["repeat", "concurrent", "stream", "prefix-cache", "restart", "draft"].contains(&row) {
                    die(&format!("--diverge: unknown row `{row}`"));
                }
                c.near_tie = flavour == "near-tie";
                c.numerical = flavour == "numerical";
                c.diverge = Some(row.to_owned());
            }
            "--state-file" => c.state_file = Some(val()),
            "--jitter" => {
                c.jitter = val()
                    .parse()
                    .ok()
                    .filter(|j: &f64| j.is_finite() && *j >= 0.0)
                    .unwrap_or_else(|| die("bad --jitter"))
            }
            "--dialect" => {
                let v = val();
                c.dialect =
                    Some(dialect::Dialect::parse(&v).unwrap_or_else(|| die(&format!("--dialect: unknown `{v}`"))));
            }
            "--crash-after" => c.crash_after = val().parse().unwrap_or_else(|_| die("bad --crash-after")),
            "--load-delay-ms" => c.load_delay_ms = val().parse().unwrap_or_else(|_| die("bad --load-delay-ms")),
            "--token-delay-ms" => c.token_delay_ms = val().parse().unwrap_or_else(|_| die("bad --token-delay-ms")),
            "--lifetime-s" => c.lifetime_s = val().parse().unwrap_or_else(|_| die("bad --lifetime-s")),
            "--pose" | "--models" | "--no-health" => {
                c.modes.take(&a, &mut val);
            }
            "--ignore-sigterm" => c.ignore_sigterm = true,
            "--leak-child" => c.leak_child = true,
            "--escape-child" => c.escape_child = true,
            "--escape-clean" => c.escape_clean = true,
            "--sleeper" => c.sleeper = true,
            "--escaper" => c.escaper = true,
            // Server arguments a profile may pass through (-c 4096 …) are accepted and ignored.
            other if other.starts_with('-') => {}
            _ => {}
        }
    }
    c
}

pub(crate) fn die(msg: &str) -> ! {
    eprintln!("fake-server: {msg}");
    std::process::exit(2);
}

fn main() {
    let mut c = parse_args();
    if let Some(path) = &c.state_file {
        c.earlier_starts = std::fs::read_to_string(path).ok().and_then(|t| t.trim().parse().ok()).unwrap_or(0);
        std::fs::write(path, (c.earlier_starts + 1).to_string()).unwrap_or_else(|e| die(&format!("--state-file: {e}")));
    }
    let c = Arc::new(c);
    let lifetime = c.lifetime_s;
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(lifetime));
        eprintln!("fake-server: lifetime over, exiting");
        std::process::exit(0);
    });
    if let Some(upstream) = &c.proxy_to {
        let hold = Duration::from_millis(c.hold_first_ms);
        proxy::serve(&c.host, c.port, upstream, Duration::from_micros(c.event_delay_us), hold);
    }
    if c.escaper {
        escape(lifetime);
    }
    if c.sleeper || c.ignore_sigterm {
        // SAFETY: setting a signal disposition to SIG_IGN has no memory-safety preconditions.
        unsafe {
            libc::signal(libc::SIGTERM, libc::SIG_IGN);
        }
    }
    if c.sleeper {
        // The leaked child ignores SIGTERM like a careless worker process, and waits to be killed.
        loop {
            std::thread::sleep(Duration::from_secs(3600));
        }
    }
    if c.leak_child {
        let me = std::env::current_exe().unwrap_or_else(|e| die(&format!("current_exe: {e}")));
        let tag: Vec<String> = std::env::args().skip_while(|a| a != "--tag").take(2).collect();
        // Leaked on purpose: this child is the fault under test, and gauntlet must find and reap it.
        #[expect(clippy::zombie_processes, reason = "the leaked child is the injected fault")]
        let _child = std::process::Command::new(me)
            .arg("--sleeper")
            .args(&tag)
            .arg("--lifetime-s")
            .arg(lifetime.to_string())
            .spawn()
            .unwrap_or_else(|e| die(&format!("spawn child: {e}")));
    }
    if c.escape_clean {
        use std::os::unix::process::CommandExt as _;
        let me = std::env::current_exe().unwrap_or_else(|e| die(&format!("current_exe: {e}")));
        let tag: Vec<String> = std::env::args().skip_while(|a| a != "--tag").take(2).collect();
        let mut cmd = std::process::Command::new(me);
        cmd.arg("--sleeper").args(&tag).arg("--lifetime-s").arg(lifetime.to_string()).env_clear();
        // SAFETY: setsid is async-signal-safe and has no memory-safety preconditions (a fresh child is no group
        // leader, so it succeeds).
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        // Left running on purpose: no marker, no group, no session of the server's; gauntlet must still find it.
        #[expect(clippy::zombie_processes, reason = "the escaped child is the injected fault")]
        let _child = cmd.spawn().unwrap_or_else(|e| die(&format!("spawn clean escapee: {e}")));
    }
    if c.escape_child {
        let me = std::env::current_exe().unwrap_or_else(|e| die(&format!("current_exe: {e}")));
        let tag: Vec<String> = std::env::args().skip_while(|a| a != "--tag").take(2).collect();
        // The escaper exits as soon as its sleeper started: waiting for it is bounded.
        let status = std::process::Command::new(me)
            .arg("--escaper")
            .args(&tag)
            .arg("--lifetime-s")
            .arg(lifetime.to_string())
            .status()
            .unwrap_or_else(|e| die(&format!("spawn escaper: {e}")));
        if !status.success() {
            die(&format!("the escaper failed: {status}"));
        }
    }
    eprintln!("fake-server: loading");
    // The device binding reaches a server only through these: say what this one was given, for the GPU tests.
    for var in ["CUDA_DEVICE_ORDER", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"] {
        if let Ok(v) = std::env::var(var) {
            eprintln!("fake-server: {var}={v}");
        }
    }
    if c.fault.as_deref() == Some("crash-load") {
        std::thread::sleep(Duration::from_millis(200));
        eprintln!("fake-server: simulated crash during load");
        std::process::exit(3);
    }
    std::thread::sleep(Duration::from_millis(c.load_delay_ms));
    c.modes.start();
    let listener = TcpListener::bind((c.host.as_str(), c.port)).unwrap_or_else(|e| die(&format!("bind: {e}")));
    eprintln!("fake-server: listening on {}:{}", c.host, c.port);
    let counters = Arc::new(Counters::default());
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let c = Arc::clone(&c);
        let counters = Arc::clone(&counters);
        std::thread::spawn(move || {
            let _ = handle(stream, &c, &counters);
        });
    }
}

/// The middle of a double fork: leave the group and session, start a sleeper (which inherits both and is
/// re-parented when we exit), exit.
fn escape(lifetime: u64) -> ! {
    // SAFETY: setsid has no memory-safety preconditions; we are not a group leader (a fresh child), so it succeeds.
    if unsafe { libc::setsid() } < 0 {
        die("setsid failed");
    }
    let me = std::env::current_exe().unwrap_or_else(|e| die(&format!("current_exe: {e}")));
    let tag: Vec<String> = std::env::args().skip_while(|a| a != "--tag").take(2).collect();
    // Left running on purpose: the sleeper is the fault under test, and gauntlet must find and kill it.
    let _sleeper = std::process::Command::new(me)
        .arg("--sleeper")
        .args(&tag)
        .arg("--lifetime-s")
        .arg(lifetime.to_string())
        .spawn()
        .unwrap_or_else(|e| die(&format!("spawn sleeper: {e}")));
    std::process::exit(0);
}

#[derive(Default)]
struct Counters {
    answered: AtomicU32,
    in_flight: AtomicU32,
    /// When the recent chat requests arrived, each with its number (`--diverge concurrent` tells copies sent at once
    /// from one after another by these alone).
    arrivals: Mutex<Vec<(u32, Instant)>>,
    per_prompt: Mutex<BTreeMap<String, u32>>,
    /// `/metrics` requests answered (`--metrics-fault non-finite` changes after the first).
    scrapes: AtomicU32,
    /// What `/metrics` reports: chat requests, prompt and answer words, prompt words asked before.
    served: Mutex<Served>,
}

#[derive(Default)]
struct Served {
    requests: u64,
    prompt_tokens: u64,
    generated_tokens: u64,
    cache_hits: u64,
    prompts: std::collections::BTreeSet<String>,
}

impl Counters {
    fn serve(&self, prompt: &str, answer: &str) {
        let mut s = self.served.lock().unwrap_or_else(|e| e.into_inner());
        let words = prompt.split_whitespace().count() as u64;
        s.requests += 1;
        s.prompt_tokens += words;
        s.generated_tokens += answer.split_whitespace().count() as u64;
        if !s.prompts.insert(prompt.to_owned()) {
            s.cache_hits += words;
        }
    }

    /// vLLM's names (`docs/design/metrics.md`), with a `model_name` label on every series as vLLM has.
    fn prometheus(&self) -> String {
        let s = self.served.lock().unwrap_or_else(|e| e.into_inner());
        let running = self.in_flight.load(Ordering::SeqCst);
        let l = "model_name=\"fake\"";
        format!(
            "# HELP vllm:request_success_total Count of successfully processed requests.\n\
             # TYPE vllm:request_success_total counter\n\
             vllm:request_success_total{{finished_reason=\"stop\",{l}}} {}\n\
             # TYPE vllm:prompt_tokens_total counter\n\
             vllm:prompt_tokens_total{{{l}}} {}\n\
             # TYPE vllm:generation_tokens_total counter\n\
             vllm:generation_tokens_total{{{l}}} {}\n\
             # TYPE vllm:num_preemptions_total counter\n\
             vllm:num_preemptions_total{{{l}}} 0\n\
             # TYPE vllm:prefix_cache_queries_total counter\n\
             vllm:prefix_cache_queries_total{{{l}}} {}\n\
             # TYPE vllm:prefix_cache_hits_total counter\n\
             vllm:prefix_cache_hits_total{{{l}}} {}\n\
             # TYPE vllm:num_requests_running gauge\n\
             vllm:num_requests_running{{{l}}} {running}\n\
             # TYPE vllm:request_queue_time_seconds histogram\n\
             vllm:request_queue_time_seconds_bucket{{le=\"+Inf\",{l}}} {}\n\
             vllm:request_queue_time_seconds_sum{{{l}}} {}\n\
             vllm:request_queue_time_seconds_count{{{l}}} {}\n",
            s.requests,
            s.prompt_tokens,
            s.generated_tokens,
            s.prompt_tokens,
            s.cache_hits,
            s.requests,
            s.requests as f64 * 0.001,
            s.requests,
        )
    }
}

/// `GET /metrics`: the counters, or the fault asked for.
fn metrics(stream: &mut TcpStream, c: &Config, counters: &Counters) -> std::io::Result<()> {
    match c.metrics_fault.as_deref() {
        Some("malformed") => respond(stream, 200, "text/plain", b"<html>{{ not metrics\n"),
        Some("oversized") => {
            let line = "# TYPE pad counter\n".to_owned() + &"pad 1\n".repeat((5 << 20) / 6);
            respond(stream, 200, "text/plain", line.as_bytes())
        }
        Some("hang") => {
            std::thread::sleep(Duration::from_secs(c.lifetime_s));
            Ok(())
        }
        Some("http404") => respond(stream, 404, "text/plain", b"not found"),
        // Legal Prometheus that no JSON number holds: a NaN gauge, an infinite counter, a counter whose change
        // overflows (-1e308 then 1.7e308), and the prompt-token key metric NaN from the second scrape on.
        Some("non-finite") => {
            let second = counters.scrapes.fetch_add(1, Ordering::SeqCst) > 0;
            let (wide, prompt) = if second { ("1.7e308", "NaN") } else { ("-1e308", "1") };
            let body = format!(
                "# TYPE g gauge\ng NaN\n# TYPE c_total counter\nc_total +Inf\n# TYPE w_total counter\nw_total {wide}\n\
                 # TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total {prompt}\n"
            );
            respond(stream, 200, "text/plain; version=0.0.4", body.as_bytes())
        }
        _ => respond(stream, 200, "text/plain; version=0.0.4", counters.prometheus().as_bytes()),
    }
}

/// One chat request in flight for as long as it lives.
struct InFlight<'a>(&'a AtomicU32);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A stable token id for a word (FNV-1a), inside SmolLM2's vocabulary size.
fn token_id(word: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in word.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x100000001b3);
    }
    h % 49152
}

/// Where a diverged answer's last token comes from: the reference's second candidate (near-tie) or a far one.
const NEAR_WORD: &str = "ALT";
/// `--diverge concurrent`: requests that arrive closer than this were sent at once.
const CONCURRENT_WINDOW: Duration = Duration::from_millis(500);
const FAR_WORD: &str = "far";

/// `--diverge ROW:numerical`: the new last token, 0.15 nats below the chosen one in every entry.
const MID_WORD: &str = "MID";
const MID_GAP: f64 = 0.15;

/// llama.cpp's logprobs entry for one word-token: the word at -0.05, then the other candidates (a near one, a
/// middle one, a far one), all shifted by `shift` (`--jitter`). `flipped_from`: this word replaced the reference's
/// token in a diverged answer, which then ranks that token `MID_GAP` below its own (`:numerical`).
fn logprob_entry(word: &str, top: usize, shift: f64, flipped_from: Option<&str>) -> Value {
    let cand = |w: &str, lp: f64| json!({"id": token_id(w), "token": w, "bytes": w.as_bytes(), "logprob": lp + shift});
    let mut alts = match flipped_from {
        Some(old) => vec![cand(word, -0.05), cand(old, -0.05 - MID_GAP), cand(FAR_WORD, -5.0)],
        None => vec![cand(word, -0.05), cand(NEAR_WORD, -0.06), cand(MID_WORD, -0.05 - MID_GAP), cand(FAR_WORD, -5.0)],
    };
    alts.truncate(top);
    json!({"id": token_id(word), "token": word, "bytes": word.as_bytes(), "logprob": -0.05 + shift, "top_logprobs": alts})
}

/// `--jitter`'s shift of request `n`'s token `i`: in [-amplitude, amplitude], from a hash of both and the start count.
fn jitter_shift(amplitude: f64, n: u32, i: usize, starts: u32) -> f64 {
    if amplitude == 0.0 {
        return 0.0;
    }
    let h = token_id(&format!("{n}:{i}:{starts}")) as f64 / 49151.0;
    amplitude * (2.0 * h - 1.0)
}

fn handle(mut stream: TcpStream, c: &Config, counters: &Counters) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut length = 0usize;
    let mut authorization = String::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line)? == 0 || line == "\r\n" || line == "\n" {
            break;
        }
        if let Some((k, v)) = line.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            } else if k.eq_ignore_ascii_case("authorization") {
                authorization = v.trim().to_owned();
            }
        }
    }
    let mut body = vec![0u8; length.min(16 << 20)];
    reader.read_exact(&mut body)?;
    let full = request_line.split_whitespace().nth(1).unwrap_or("/");
    let Some(path) = full.strip_prefix(c.prefix.as_str()) else {
        return respond(&mut stream, 404, "application/json", b"{\"error\":\"no such prefix\"}");
    };
    if attach_modes::hung() {
        std::thread::sleep(Duration::from_secs(c.lifetime_s));
        return Ok(());
    }
    if path == "/metrics" {
        return metrics(&mut stream, c, counters);
    }
    if let Some(d) = c.dialect {
        let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let last_user = last_user_message(&req);
        let answer = c.answers.iter().find(|(k, _)| last_user.contains(k.as_str())).map_or("ok", |(_, v)| v.as_str());
        if path == "/v1/chat/completions" {
            counters.serve(&last_user, answer);
        }
        let ask = dialect::Ask { path, req: &req, last_user: &last_user, answer, token_delay_ms: c.token_delay_ms };
        return dialect::serve(d, &mut stream, &ask);
    }
    let method = request_line.split_whitespace().next().unwrap_or("GET");
    if let Some((status, answer)) = c.modes.route(method, path, &body) {
        return respond(&mut stream, status, "application/json", &answer);
    }
    if path == "/health" {
        return respond(&mut stream, 200, "application/json", b"{\"status\":\"ok\"}");
    }
    if path != "/v1/chat/completions" {
        return respond(&mut stream, 404, "application/json", b"{\"error\":\"not found\"}");
    }
    let req: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let last_user = last_user_message(&req);
    let warmup = last_user == "Say hello.";
    if let Some(log) = &c.request_log {
        let line = format!("{} {}\n", c.tag, last_user.replace('\n', " "));
        // One write per line on an O_APPEND file: lines of several servers never interleave.
        let _ = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .and_then(|mut f| f.write_all(line.as_bytes()));
    }
    let stream_mode = req["stream"].as_bool().unwrap_or(false);
    let mut answer = c
        .answers
        .iter()
        .find(|(k, _)| last_user.contains(k.as_str()))
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| "ok".into());
    let echo = c.fault.as_deref() == Some("echo-auth");
    if echo {
        if last_user.contains("beta") {
            let body = format!(
                "{{\"error\": \"key rejected: {authorization}\"}}\n::add-mask::x\n::stop-commands::gauntlet\n##[error]injected\n\x1b[2J"
            );
            return respond(&mut stream, 500, "application/json", body.as_bytes());
        }
        answer = format!("{answer} (you sent {authorization})");
    }
    let targeted = !warmup && c.fault_on.as_ref().is_none_or(|t| last_user.contains(t.as_str()));
    let fault = if targeted { c.fault.as_deref() } else { None };
    let n = counters.answered.fetch_add(1, Ordering::SeqCst) + 1;
    counters.serve(&last_user, &answer);
    counters.in_flight.fetch_add(1, Ordering::SeqCst);
    let _in_flight = InFlight(&counters.in_flight);
    let arrived = Instant::now();
    if !warmup && c.diverge.as_deref() == Some("concurrent") {
        let mut arrivals = counters.arrivals.lock().unwrap_or_else(|e| e.into_inner());
        arrivals.retain(|(_, t)| arrived.duration_since(*t) < 4 * CONCURRENT_WINDOW);
        arrivals.push((n, arrived));
    }
    let asked_before = if warmup {
        0
    } else {
        let mut m = counters.per_prompt.lock().unwrap_or_else(|e| e.into_inner());
        let seen = m.entry(last_user.clone()).or_insert(0);
        *seen += 1;
        *seen - 1
    };
    let diverge = !warmup
        && match c.diverge.as_deref() {
            Some("repeat") => asked_before == 1,
            Some("concurrent") => {
                // Copies sent at once arrive within the window of each other; a request sent after another's answer
                // arrives after that answer, which takes longer than the window. Arrival times alone decide: not
                // the count in flight, which a previous request's handler may still hold after its answer is out
                // (a loaded test run saw the stream row diverge so), nor a copy's handler having ended before the
                // last copy arrived (a busy client spreads its copies).
                std::thread::sleep(CONCURRENT_WINDOW + Duration::from_millis(50));
                let arrivals = counters.arrivals.lock().unwrap_or_else(|e| e.into_inner());
                let near = |t: Instant| t.max(arrived).duration_since(t.min(arrived)) < CONCURRENT_WINDOW;
                arrivals.iter().any(|(m, t)| *m != n && near(*t))
            }
            Some("stream") => stream_mode,
            Some("prefix-cache") => req["cache_prompt"] == json!(false),
            Some("restart") => c.earlier_starts > 0,
            Some("draft") => true,
            _ => false,
        };
    let keep = answer.rfind(' ').map_or(0, |i| i + 1);
    let replaced = answer[keep..].to_owned();
    let answer = if diverge {
        let word = if c.near_tie {
            NEAR_WORD
        } else if c.numerical {
            MID_WORD
        } else {
            FAR_WORD
        };
        format!("{}{word}", &answer[..keep])
    } else {
        answer
    };
    let top = if req["logprobs"] == json!(true) { req["top_logprobs"].as_u64().unwrap_or(0) as usize } else { 0 };
    let last = answer.split_inclusive(' ').count().saturating_sub(1);
    let entry = |i: usize, w: &str| {
        let flipped = (diverge && c.numerical && i == last).then_some(replaced.as_str());
        logprob_entry(w, top, jitter_shift(c.jitter, n, i, c.earlier_starts), flipped)
    };
    let logprobs = |i: usize, w: &str| (req["logprobs"] == json!(true)).then(|| json!({"content": [entry(i, w)]}));
    if c.fault.as_deref() == Some("crash-after") && n > c.crash_after {
        eprintln!("fake-server: simulated crash at request {n}");
        std::process::exit(4);
    }
    match fault {
        Some("hang-after") => {
            attach_modes::hang();
            std::thread::sleep(Duration::from_secs(c.lifetime_s));
            return Ok(());
        }
        Some("hang-first-byte") => {
            std::thread::sleep(Duration::from_secs(c.lifetime_s));
            return Ok(());
        }
        Some("http500") => {
            return respond(&mut stream, 500, "application/json", b"{\"error\":\"simulated\"}");
        }
        // llama.cpp's refusal of a prompt longer than its slot's context.
        Some("http400") => {
            let body = br#"{"error":{"code":400,"message":"request (3996 tokens) exceeds the available context size (2048 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":3996,"n_ctx":2048}}"#;
            return respond(&mut stream, 400, "application/json", body);
        }
        Some("wrong-content-type") if !stream_mode => {
            return respond(&mut stream, 200, "text/html", b"<html>hi</html>");
        }
        Some("oversized") if stream_mode => {
            write!(stream, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")?;
            let content = "x".repeat(12 << 20);
            let event = json!({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]});
            stream.write_all(format!("data: {event}\n\ndata: [DONE]\n\n").as_bytes())?;
            return stream.flush();
        }
        Some("flood") if stream_mode => {
            // 12 MiB of one-character token events, past any response cap: the most events (and so the most a
            // client spends per byte) a stream can carry. Written in 64 KiB pieces; a client that stops reading
            // ends the write.
            write!(stream, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")?;
            let event = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\"}}]}\n\n";
            let piece = event.repeat((64 << 10) / event.len());
            for _ in 0..(12 << 20) / piece.len() {
                stream.write_all(piece.as_bytes())?;
            }
            stream.write_all(b"data: [DONE]\n\n")?;
            return stream.flush();
        }
        Some("bad-chunking") if stream_mode => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
            let event = r#"data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}"#.to_owned() + "\n\n";
            write!(stream, "{head}{:x}\r\n{event}\r\nzz\r\nnot a chunk\r\n", event.len())?;
            return stream.flush();
        }
        Some("done-in-text") if stream_mode => {
            write!(stream, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")?;
            for (i, w) in ["The ", "[DONE]", " is ", "text"].iter().enumerate() {
                let chunk = json!({"choices": [{"index": 0, "delta": {"content": w}, "finish_reason": null}]});
                stream.write_all(format!("data: {chunk}\n\n").as_bytes())?;
                stream.flush()?;
                if i == 1 {
                    // Longer than a client waits for the body's end after a real `data: [DONE]`.
                    std::thread::sleep(Duration::from_millis(300));
                }
            }
            let usage = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 10, "completion_tokens": 4}});
            stream.write_all(format!("data: {usage}\n\ndata: [DONE]\n\n").as_bytes())?;
            return stream.flush();
        }
        Some("lf-head") if stream_mode => {
            let mut all = String::from("HTTP/1.1 200 OK\nContent-Type: text/event-stream\nConnection: close\n\n");
            for w in ["Pa", "ri", "s!"] {
                let chunk = json!({"choices": [{"index": 0, "delta": {"content": w}, "finish_reason": null}]});
                all.push_str(&format!("data: {chunk}\r\n\r\n"));
            }
            let usage = json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3}});
            all.push_str(&format!("data: {usage}\r\n\r\ndata: [DONE]\r\n\r\n"));
            stream.write_all(all.as_bytes())?;
            return stream.flush();
        }
        Some("deep-timings") if !stream_mode => {
            let deep = (0..126).fold("1".to_owned(), |inner, _| format!("{{\"a\":{inner}}}"));
            let body = format!(
                "{{\"choices\":[{{\"index\":0,\"finish_reason\":\"stop\",\"message\":{{\"role\":\"assistant\",\"content\":{}}}}}],\
                 \"usage\":{{\"prompt_tokens\":10,\"completion_tokens\":1}},\"timings\":{deep}}}",
                json!(answer)
            );
            return respond(&mut stream, 200, "application/json", body.as_bytes());
        }
        Some("oversized") => {
            let mut huge = String::from("{\"choices\":[{\"message\":{\"content\":\"");
            huge.push_str(&"x".repeat(12 << 20));
            huge.push_str("\"}}]}");
            return respond(&mut stream, 200, "application/json", huge.as_bytes());
        }
        _ => {}
    }
    let pieces: Vec<String>;
    let words: Vec<&str> = if echo && stream_mode {
        // Small pieces, so the echoed key is split across events.
        pieces = answer.as_bytes().chunks(5).map(|c| String::from_utf8_lossy(c).into_owned()).collect();
        pieces.iter().map(String::as_str).collect()
    } else {
        answer.split_inclusive(' ').collect()
    };
    let tokens = words.len().max(1);
    if !stream_mode {
        std::thread::sleep(Duration::from_millis(c.token_delay_ms * tokens as u64));
        let mut choice =
            json!({"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": answer}});
        if req["logprobs"] == json!(true) {
            let entries: Vec<Value> = words.iter().enumerate().map(|(i, w)| entry(i, w)).collect();
            choice["logprobs"] = json!({"content": entries});
        }
        let body = json!({"choices": [choice], "usage": {"prompt_tokens": 10, "completion_tokens": tokens}});
        return respond(&mut stream, 200, "application/json", body.to_string().as_bytes());
    }
    let ct = if fault == Some("wrong-content-type") { "text/plain" } else { "text/event-stream" };
    write!(stream, "HTTP/1.1 200 OK\r\nContent-Type: {ct}\r\nConnection: close\r\n\r\n")?;
    let event = |delta: Value, finish: Value| {
        format!("data: {}\n\n", json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}))
    };
    stream.write_all(event(json!({"role": "assistant"}), Value::Null).as_bytes())?;
    let mut began = std::time::Instant::now();
    for (i, w) in words.iter().enumerate() {
        if c.steady_pace {
            let due = began + Duration::from_millis(c.token_delay_ms) * (i as u32 + 1);
            std::thread::sleep(due.saturating_duration_since(std::time::Instant::now()));
        } else {
            std::thread::sleep(Duration::from_millis(c.token_delay_ms));
        }
        if i == 1 && c.client_noise_ms > 0 {
            // A stall outside the server's decode, fixed by the request's number so that a rerun sees the same; a
            // steady pace resumes after it (the words after a stall are not sent at once to catch up).
            let stall = Duration::from_millis(mix(n) % (c.client_noise_ms + 1));
            std::thread::sleep(stall);
            began += stall;
        }
        if i == 1 && fault == Some("hang-mid-stream") {
            stream.flush()?;
            std::thread::sleep(Duration::from_secs(c.lifetime_s));
        }
        if i == 1 && fault == Some("malformed") {
            stream.write_all(b"data: {\"choices\": [{\"delta\": {\"content\": \"oops\"\n\n")?;
        }
        let mut chunk = json!({"choices": [{"index": 0, "delta": {"content": w}, "finish_reason": null}]});
        if let Some(lp) = logprobs(i, w) {
            chunk["choices"][0]["logprobs"] = lp;
        }
        stream.write_all(format!("data: {chunk}\n\n").as_bytes())?;
        stream.flush()?;
    }
    stream.write_all(event(json!({}), json!("stop")).as_bytes())?;
    let mut usage = json!({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": tokens}});
    if c.server_timings && c.token_delay_ms > 0 {
        // The pace, within ±1 % (a steady server's own account still varies a little from answer to answer).
        let ms = c.token_delay_ms as f64 * (1.0 + ((mix(n) >> 16) % 201) as f64 / 10_000.0 - 0.01);
        usage["timings"] = json!({
            "prompt_n": 10, "prompt_ms": 1.0, "predicted_n": tokens, "predicted_ms": ms * tokens as f64,
            "predicted_per_token_ms": ms, "predicted_per_second": 1000.0 / ms,
        });
    }
    stream.write_all(format!("data: {usage}\n\n").as_bytes())?;
    if fault != Some("no-done") {
        stream.write_all(b"data: [DONE]\n\n")?;
    }
    stream.flush()
}

fn last_user_message(req: &Value) -> String {
    req["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_owned()
}

/// splitmix64 of `n`: a pseudo-random number fixed by a request's number.
fn mix(n: u32) -> u64 {
    let mut z = u64::from(n).wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn respond(stream: &mut TcpStream, status: u16, content_type: &str, body: &[u8]) -> std::io::Result<()> {
    let reason = if status == 200 { "OK" } else { "Error" };
    write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\n{}Content-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        attach_modes::server_header(),
        body.len()
    )?;
    stream.write_all(body)?;
    stream.flush()
}
