//! A pacing server for measuring a benchmark client (ours or a peer's): it streams chat-completion tokens on a known
//! schedule and records what it really did, so the client's timestamps can be checked against the truth.
//!
//! For every request it records CLOCK_MONOTONIC when the request's bytes arrived (the kernel's receive stamp) and
//! when it was read, the connection it came on and its ordinal there (0 = the first request of a new connection),
//! the number of streams in flight at that moment, and for every SSE event the monotonic time just before and just
//! after the write. Every chunk's `id` and every
//! token's text name the request (`p<id>`) and the token index (`p<id>:<k> `), so a client's records can be matched
//! to these. `GET /pacer/log` returns the records since the last call (and empties them) with the in-flight peak.
//! It is a measuring instrument for benchmarks, never a substitute for a real inference server.
//!
//! One thread per connection only reads requests; a single scheduler thread writes every stream's events in due
//! order, so hundreds of streams cost one busy thread, not hundreds (the client under test shares the CPU).
//!
//!   --port N              listen on 127.0.0.1:N (0: any; the port is printed as `listening on PORT`)
//!   --ttft-ms F           from reading the request to the first token event (default 50)
//!   --gap-ms F            between token events (default 10)
//!   --tokens-per-event K  tokens per SSE event (default 1)
//!   --jitter-ms F         uniform extra delay in [0, F) per event, from --seed (default 0)
//!   --seed N              jitter seed (default 1)
//!   --lifetime-s N        exit by itself after N seconds (default 900)

use std::collections::BinaryHeap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

#[derive(Clone)]
struct Config {
    port: u16,
    ttft: f64,
    gap: f64,
    per_event: u64,
    jitter: f64,
    seed: u64,
    lifetime_s: u64,
}

#[derive(Default)]
struct Shared {
    /// What a plain (not streamed) completion waits before it answers.
    ttft_ms: f64,
    records: Mutex<Vec<Value>>,
    next_request: AtomicU64,
    next_connection: AtomicU64,
    in_flight: AtomicUsize,
    peak: AtomicUsize,
}

fn die(msg: &str) -> ! {
    eprintln!("gauntlet-pacer: {msg}");
    std::process::exit(2)
}

/// CLOCK_MONOTONIC now (ns), the clock the client under test also records.
fn now_ns() -> u64 {
    gauntlet_stamp::monotonic_ns().unwrap_or(0)
}

/// splitmix64: a small seeded generator for the jitter.
fn next_random(state: &mut u64) -> f64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
}

fn parse_args() -> Config {
    let mut c = Config { port: 0, ttft: 50.0, gap: 10.0, per_event: 1, jitter: 0.0, seed: 1, lifetime_s: 900 };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let v = args.next().unwrap_or_else(|| die(&format!("{a} needs a value")));
        let num = |v: &str| v.parse::<f64>().ok().filter(|x| x.is_finite() && *x >= 0.0);
        let bad = || -> f64 { die(&format!("{a}: `{v}` is not a valid value")) };
        let int = |v: &str| v.parse::<u64>().unwrap_or_else(|_| die(&format!("{a}: `{v}` is not a valid value")));
        match a.as_str() {
            "--port" => c.port = u16::try_from(int(&v)).unwrap_or_else(|_| die("--port: not a port")),
            "--ttft-ms" => c.ttft = num(&v).unwrap_or_else(bad),
            "--gap-ms" => c.gap = num(&v).unwrap_or_else(bad),
            "--tokens-per-event" => c.per_event = int(&v).max(1),
            "--jitter-ms" => c.jitter = num(&v).unwrap_or_else(bad),
            "--seed" => c.seed = int(&v),
            "--lifetime-s" => c.lifetime_s = int(&v),
            _ => die(&format!("unknown argument {a}")),
        }
    }
    c
}

fn main() {
    let cfg = parse_args();
    let listener = listen(cfg.port).unwrap_or_else(|e| die(&format!("listen on 127.0.0.1:{}: {e}", cfg.port)));
    let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
    println!("listening on {port}");
    let _ = std::io::stdout().flush();
    let lifetime = cfg.lifetime_s;
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(lifetime));
        std::process::exit(0);
    });
    let shared = Arc::new(Shared { ttft_ms: cfg.ttft, ..Shared::default() });
    let (jobs, inbox) = channel::<Job>();
    {
        let (cfg, shared) = (cfg.clone(), shared.clone());
        std::thread::spawn(move || schedule(inbox, &cfg, &shared));
    }
    for stream in listener.incoming().flatten() {
        let (shared, jobs) = (shared.clone(), jobs.clone());
        let _ = stream.set_nodelay(true);
        std::thread::spawn(move || connection(stream, &shared, &jobs));
    }
}

/// A listener with a deep accept queue: std's 128 would drop the SYNs of a 512-stream burst, and the retried
/// connects (a second later) would then land inside measured requests.
fn listen(port: u16) -> std::io::Result<TcpListener> {
    use std::os::fd::FromRawFd;
    // SAFETY: plain socket calls on a descriptor we create and hand to TcpListener, which then owns it.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let listener = TcpListener::from_raw_fd(fd);
        let one: libc::c_int = 1;
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_REUSEADDR,
            (&one as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        );
        let addr = libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr { s_addr: u32::from(std::net::Ipv4Addr::LOCALHOST).to_be() },
            sin_zero: [0; 8],
        };
        let len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::bind(fd, (&addr as *const libc::sockaddr_in).cast(), len) != 0 || libc::listen(fd, 4096) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(listener)
    }
}

/// A streamed answer handed to the scheduler; `done` gets whether every write succeeded.
struct Job {
    out: TcpStream,
    id: u64,
    read_at: u64,
    max_tokens: u64,
    record: Value,
    done: Sender<bool>,
}

/// A job in progress: its next event's due time, tokens sent, and its writes so far.
struct Running {
    job: Job,
    due: u64,
    sent: u64,
    jitter: u64,
    writes: Vec<Value>,
    role_write: Option<(u64, u64)>,
}

/// The one writer: every stream's next event, earliest due first.
fn schedule(inbox: Receiver<Job>, cfg: &Config, shared: &Shared) {
    let mut running: Vec<Option<Running>> = Vec::new();
    let mut heap: BinaryHeap<std::cmp::Reverse<(u64, usize)>> = BinaryHeap::new();
    loop {
        let next = heap.peek().map(|r| r.0.0);
        let wait = next.map(|due| Duration::from_nanos(due.saturating_sub(now_ns())));
        let arrived = match wait {
            Some(w) if w.is_zero() => inbox.try_recv().ok(),
            Some(w) => inbox.recv_timeout(w).ok(),
            None => match inbox.recv() {
                Ok(job) => Some(job),
                Err(_) => return,
            },
        };
        if let Some(mut job) = arrived {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n";
            let _ = job.out.write_all(head.as_bytes());
            // A role-only first event, as llama.cpp and vLLM send: never a token.
            let role = json!({"id": format!("p{}", job.id), "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"role": "assistant"}}]});
            let role_write = send_event(&mut job.out, &role.to_string());
            let due = job.read_at + (cfg.ttft * 1e6) as u64;
            let jitter = cfg.seed ^ job.id.wrapping_mul(0x2545_F491_4F6C_DD1D);
            let slot = running.iter().position(Option::is_none).unwrap_or_else(|| {
                running.push(None);
                running.len() - 1
            });
            let mut r = Running { job, due, sent: 0, jitter, writes: Vec::new(), role_write };
            r.due += (next_random(&mut r.jitter) * cfg.jitter * 1e6) as u64;
            heap.push(std::cmp::Reverse((r.due, slot)));
            running[slot] = Some(r);
            continue;
        }
        let Some(std::cmp::Reverse((due, slot))) = heap.peek().copied() else { continue };
        if due > now_ns() {
            continue;
        }
        heap.pop();
        let Some(r) = running[slot].as_mut() else { continue };
        let id = r.job.id;
        let k = cfg.per_event.min(r.job.max_tokens - r.sent);
        let text: String = (r.sent..r.sent + k).map(|i| format!("p{id}:{i} ")).collect();
        let event = json!({"id": format!("p{id}"), "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": text}}]});
        let mut ok = match send_event(&mut r.job.out, &event.to_string()) {
            Some((before, after)) => {
                r.writes.push(json!([before, after, r.sent, k]));
                true
            }
            None => false,
        };
        r.sent += k;
        if ok && r.sent < r.job.max_tokens {
            r.due += (cfg.gap * 1e6) as u64 + (next_random(&mut r.jitter) * cfg.jitter * 1e6) as u64;
            heap.push(std::cmp::Reverse((r.due, slot)));
            continue;
        }
        let Some(mut r) = running[slot].take() else { continue };
        if ok {
            let end = json!({"id": format!("p{id}"), "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": r.sent, "total_tokens": r.sent + 1}});
            ok = send_event(&mut r.job.out, &end.to_string()).is_some()
                && send_event(&mut r.job.out, "[DONE]").is_some()
                && r.job.out.write_all(b"0\r\n\r\n").is_ok();
        }
        shared.in_flight.fetch_sub(1, Ordering::SeqCst);
        let mut record = std::mem::take(&mut r.job.record);
        record["role_write"] = json!(r.role_write.map(|(b, a)| [b, a]));
        record["writes"] = Value::Array(std::mem::take(&mut r.writes));
        record["completed"] = json!(ok);
        shared.records.lock().unwrap_or_else(|p| p.into_inner()).push(record);
        let _ = r.job.done.send(ok);
    }
}

/// A connection's reading side, each read stamped by the kernel with when its bytes arrived.
struct StampedReads {
    stream: TcpStream,
    /// CLOCK_MONOTONIC when the bytes of the latest read arrived, where the kernel said.
    arrived: Option<u64>,
}

impl Read for StampedReads {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        use std::os::fd::AsRawFd;
        let (n, at) = gauntlet_stamp::recv_stamped(self.stream.as_raw_fd(), buf, 0)?;
        self.arrived = at.ok();
        Ok(n)
    }
}

/// One keep-alive connection: requests in order until the client closes it.
fn connection(stream: TcpStream, shared: &Shared, jobs: &Sender<Job>) {
    use std::os::fd::AsRawFd;
    let conn = shared.next_connection.fetch_add(1, Ordering::SeqCst);
    let Ok(read_half) = stream.try_clone() else { return };
    gauntlet_stamp::enable_receive_stamps(read_half.as_raw_fd());
    let mut reader = BufReader::new(StampedReads { stream: read_half, arrived: None });
    let mut out = stream;
    for nth in 0.. {
        let Some((method, path, body)) = read_request(&mut reader) else { return };
        let read_at = now_ns();
        let arrived = reader.get_ref().arrived;
        let ok = match (method.as_str(), path.as_str()) {
            ("GET", "/health") => respond(&mut out, "application/json", br#"{"status":"ok"}"#),
            ("GET", "/v1/models") => respond(&mut out, "application/json", br#"{"data":[{"id":"pacer"}]}"#),
            ("GET", "/pacer/log") => {
                let records = std::mem::take(&mut *shared.records.lock().unwrap_or_else(|p| p.into_inner()));
                let peak = shared.peak.swap(shared.in_flight.load(Ordering::SeqCst), Ordering::SeqCst);
                let body = json!({"in_flight_peak": peak, "requests": records}).to_string();
                respond(&mut out, "application/json", body.as_bytes())
            }
            ("POST", "/v1/chat/completions") => chat(&mut out, shared, jobs, &body, (read_at, arrived), conn, nth),
            _ => respond(&mut out, "text/plain", b"not found"),
        };
        if !ok {
            return;
        }
    }
}

fn read_request(reader: &mut BufReader<StampedReads>) -> Option<(String, String, Vec<u8>)> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_owned(), parts.next()?.to_owned());
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).ok()? == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().ok()?;
        }
    }
    if length > 1 << 20 {
        return None;
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((method, path, body))
}

fn respond(out: &mut TcpStream, content_type: &str, body: &[u8]) -> bool {
    let head = format!("HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\r\n", body.len());
    out.write_all(head.as_bytes()).is_ok() && out.write_all(body).is_ok()
}

/// One SSE event as an HTTP/1.1 chunk, timed: (just before, just after) the write.
fn send_event(out: &mut TcpStream, payload: &str) -> Option<(u64, u64)> {
    let data = format!("data: {payload}\n\n");
    let chunk = format!("{:x}\r\n{data}\r\n", data.len());
    let before = now_ns();
    out.write_all(chunk.as_bytes()).ok()?;
    Some((before, now_ns()))
}

fn chat(
    out: &mut TcpStream,
    shared: &Shared,
    jobs: &Sender<Job>,
    body: &[u8],
    (read_at, arrived): (u64, Option<u64>),
    conn: u64,
    nth: u64,
) -> bool {
    let id = shared.next_request.fetch_add(1, Ordering::SeqCst);
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let max_tokens =
        request["max_tokens"].as_u64().or(request["max_completion_tokens"].as_u64()).unwrap_or(16).clamp(1, 100_000);
    if request["stream"] != true {
        // A plain completion (readiness probes, connection warming): answered after the TTFT, not recorded.
        std::thread::sleep(Duration::from_secs_f64(shared.ttft_ms / 1e3));
        let text: String = (0..max_tokens).map(|i| format!("p{id}:{i} ")).collect();
        let answer = json!({"id": format!("p{id}"), "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": max_tokens, "total_tokens": max_tokens + 1}});
        return respond(out, "application/json", answer.to_string().as_bytes());
    }
    let in_flight = shared.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    shared.peak.fetch_max(in_flight, Ordering::SeqCst);
    let Ok(writer) = out.try_clone() else { return false };
    // A client that stops reading must not stall the one writer, and with it every other stream.
    let _ = writer.set_write_timeout(Some(Duration::from_secs(10)));
    let record = json!({"id": id, "connection": conn, "nth_on_connection": nth, "read_ns": read_at,
        "arrived_ns": arrived, "in_flight_at_read": in_flight});
    let (done, finished) = channel();
    if jobs.send(Job { out: writer, id, read_at, max_tokens, record, done }).is_err() {
        return false;
    }
    // The next request on this connection is read only once this answer is complete (HTTP/1.1 without pipelining).
    finished.recv().unwrap_or(false)
}
