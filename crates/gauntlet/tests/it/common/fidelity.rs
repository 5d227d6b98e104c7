//! The pacing server's side of a client-fidelity measurement, shared by the client-fidelity benchmark and its
//! test: start `gauntlet-pacer`, fetch its write records, and match them to a `bench.json`.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// Where the workspace's binaries are: next to the test or bench executable's `deps/` folder.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent().and_then(Path::parent).expect("target dir").to_owned()
}

pub struct Pacer {
    child: Child,
    pub port: u16,
}

impl Pacer {
    /// Starts the pacer with `args` (see its --help in the source) on a free port.
    pub fn start(args: &[&str]) -> Pacer {
        let bin = target_dir().join("gauntlet-pacer");
        assert!(
            bin.is_file(),
            "{} is not built: build the workspace first (scripts/bench-client.sh does)",
            bin.display()
        );
        let mut child = Command::new(bin)
            .args(["--port", "0", "--lifetime-s", "600"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn pacer");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut line).expect("pacer port");
        let port = line.trim().strip_prefix("listening on ").and_then(|p| p.parse().ok()).expect("pacer port line");
        Pacer { child, port }
    }

    /// The pacer's records since the last call.
    pub fn log(&self) -> Value {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).expect("connect pacer");
        s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        s.write_all(b"GET /pacer/log HTTP/1.1\r\nHost: pacer\r\n\r\n").expect("request log");
        let mut r = BufReader::new(s);
        let mut length = 0;
        loop {
            let mut h = String::new();
            r.read_line(&mut h).expect("header");
            if h.trim().is_empty() {
                break;
            }
            if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                length = v.trim().parse().expect("length");
            }
        }
        let mut body = vec![0; length];
        r.read_exact(&mut body).expect("log body");
        serde_json::from_slice(&body).expect("log JSON")
    }
}

impl Drop for Pacer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `p<id>:<k>` of the first token in an event's text.
fn token_ref(text: &str) -> Option<(u64, u64)> {
    let (id, k) = text.split_whitespace().next()?.strip_prefix('p')?.split_once(':')?;
    Some((id.parse().ok()?, k.parse().ok()?))
}

/// What a client's records say against the server's: per request TTFT errors (ms) on a new connection (cold) and
/// on an open one (warm), inter-token gap errors (ms), the smallest per-batch peak of streams the server saw in
/// flight, events or requests that could not be matched, and tokens counted.
#[derive(Debug, Default)]
pub struct Fidelity {
    pub cold: Vec<f64>,
    pub warm: Vec<f64>,
    /// Warm TTFT errors against the server's TTFT counted from its read of the request instead of its arrival.
    pub warm_from_read: Vec<f64>,
    pub gaps: Vec<f64>,
    pub min_peak: usize,
    pub unmatched: usize,
    pub tokens: u64,
}

/// Matches every streamed event of the first level of `bench` to the pacer's record of that write. Client times
/// are put on CLOCK_MONOTONIC as batch release + request start + event offset; the server's TTFT is its first
/// token write (just after) − the request's arrival (the kernel's receive stamp; its read where there is none),
/// so that the time a busy server takes to get round to reading a request is the server's, not the client's.
pub fn analyse(bench: &Value, log: &Value) -> Fidelity {
    let server: std::collections::HashMap<u64, &Value> =
        log["requests"].as_array().expect("requests").iter().map(|r| (r["id"].as_u64().expect("id"), r)).collect();
    let (mut cold, mut warm, mut gaps, mut warm_from_read) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut tokens, mut unmatched, mut min_peak) = (0u64, 0usize, usize::MAX);
    for batch in bench["levels"][0]["batches"].as_array().expect("batches") {
        let released = batch["released_monotonic_ns"].as_u64().expect("released_monotonic_ns") as f64;
        let mut batch_peak = 0;
        for req in batch["requests"].as_array().expect("requests") {
            let start = req["start"].as_f64().unwrap_or(0.0);
            let events: Vec<(f64, (u64, u64))> = req["events"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|e| Some((e[0].as_f64()?, token_ref(e[1].as_str()?)?)))
                .collect();
            let Some(&(_, (id, _))) = events.first() else {
                unmatched += 1;
                continue;
            };
            let Some(s) = server.get(&id) else {
                unmatched += 1;
                continue;
            };
            batch_peak = batch_peak.max(s["in_flight_at_read"].as_u64().unwrap_or(0) as usize);
            let writes: std::collections::HashMap<u64, f64> = s["writes"]
                .as_array()
                .expect("writes")
                .iter()
                .map(|w| (w[2].as_u64().unwrap_or(0), w[1].as_f64().unwrap_or(0.0)))
                .collect();
            let read_ns = s["read_ns"].as_f64().unwrap_or(0.0);
            let arrived = s["arrived_ns"].as_f64().unwrap_or(read_ns);
            // Client times on CLOCK_MONOTONIC: release + request start + event offset.
            let sent = released + start * 1e9;
            let mut previous: Option<(f64, f64)> = None;
            for (i, (t, (_, k))) in events.iter().enumerate() {
                let Some(&written) = writes.get(k) else {
                    unmatched += 1;
                    continue;
                };
                let seen = sent + t * 1e9;
                if i == 0 {
                    let error = |from: f64| ((seen - sent) - (written - from)).abs() / 1e6;
                    if s["nth_on_connection"].as_u64() == Some(0) {
                        cold.push(error(arrived))
                    } else {
                        warm.push(error(arrived));
                        warm_from_read.push(error(read_ns));
                    }
                }
                if let Some((prev_seen, prev_written)) = previous {
                    gaps.push(((seen - prev_seen) - (written - prev_written)).abs() / 1e6);
                }
                previous = Some((seen, written));
            }
            tokens += req["completion_tokens"].as_u64().unwrap_or(0);
        }
        min_peak = min_peak.min(batch_peak);
    }
    Fidelity {
        cold,
        warm,
        warm_from_read,
        gaps,
        min_peak: if min_peak == usize::MAX { 0 } else { min_peak },
        unmatched,
        tokens,
    }
}
