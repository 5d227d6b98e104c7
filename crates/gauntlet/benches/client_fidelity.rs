//! Client fidelity: how far `gauntlet bench`'s own timestamps are from what the server really did.
//!
//! For each concurrency (default 1, 16, 64, 256, 512; `GAUNTLET_FIDELITY_LEVELS=1,16` to choose) it starts the
//! pacing server (`gauntlet-pacer`: tokens on a seeded schedule, every write timed on CLOCK_MONOTONIC), runs the
//! real `gauntlet bench` binary against it, and matches every streamed event of `bench.json` to the server's record
//! of that write (request id and token index are in the token text). Reported per concurrency:
//! - TTFT error: |client TTFT − server TTFT| where the server's TTFT is first-token write (after) − the request's
//!   arrival (the kernel's receive stamp on the pacer's socket), split into requests on a connection's first
//!   request (cold) and on an open connection (warm); the JSON also has the warm error against the server's TTFT
//!   counted from its read of the request (`ttft_error_warm_from_read`: that adds the pacer's own delay in reading);
//! - inter-token error: |client gap − server gap| between consecutive events of a request;
//! - the streams the server saw in flight at once (the smallest per-batch peak: every batch must reach c);
//! - gauntlet's CPU time (user + system, whole process) per 1,000 streamed tokens.
//!
//! Run: `scripts/bench-client.sh` (builds the pacer, then `cargo bench -p gauntlet --bench client_fidelity`).
//! Results go to stdout and to `target/client-fidelity.json`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

const TOKENS: u64 = 32;
const REPETITIONS: usize = 5;
const TTFT_MS: &str = "50";
const GAP_MS: &str = "10";
const JITTER_MS: &str = "2";

#[path = "../tests/it/common/fidelity.rs"]
mod fidelity;

use fidelity::{Pacer, target_dir};

fn cpu_of_children() -> f64 {
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut u) };
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

fn summary(v: Vec<f64>) -> Value {
    use gauntlet_engine::bench::stats::percentile;
    let max = v.iter().copied().reduce(f64::max);
    json!({"n": v.len(), "p50_ms": percentile(&v, 0.5), "p99_ms": percentile(&v, 0.99), "max_ms": max})
}

fn measure(c: usize, scratch: &Path) -> Value {
    let pacer = Pacer::start(&["--ttft-ms", TTFT_MS, "--gap-ms", GAP_MS, "--jitter-ms", JITTER_MS, "--seed", "7"]);
    let manifest = scratch.join(format!("pace-{c}.toml"));
    std::fs::write(
        &manifest,
        format!(
            "version = 1\n[profiles.pace]\nbase_url = \"http://127.0.0.1:{}\"\nload_timeout = \"30s\"\n\
             request_timeout = \"120s\"\n",
            pacer.port
        ),
    )
    .expect("manifest");
    let out = scratch.join(format!("bench-{c}"));
    let cpu_before = cpu_of_children();
    let began = Instant::now();
    let status = Command::new(env!("CARGO_BIN_EXE_gauntlet"))
        .args(["bench", "--manifest", manifest.to_str().unwrap(), "--profile", "pace"])
        .args(["--concurrency", &c.to_string(), "--max-tokens", &TOKENS.to_string(), "--warmups", "0"])
        .args(["--repetitions", &REPETITIONS.to_string(), "--out", out.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run gauntlet bench");
    let cpu = cpu_of_children() - cpu_before;
    let wall = began.elapsed().as_secs_f64();
    let log = pacer.log();
    drop(pacer);
    let bench: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("bench.json")).expect("bench.json")).expect("JSON");
    let found = fidelity::analyse(&bench, &log);
    json!({
        "concurrency": c,
        "exit": status.code(),
        "requests": REPETITIONS * c,
        "ttft_error_warm": summary(found.warm),
        "ttft_error_cold": summary(found.cold),
        "ttft_error_warm_from_read": summary(found.warm_from_read),
        "inter_token_error": summary(found.gaps),
        "server_in_flight_min_of_batch_peaks": found.min_peak,
        "unmatched": found.unmatched,
        "tokens": found.tokens,
        "cpu_seconds": cpu,
        "cpu_ms_per_1000_tokens": if found.tokens > 0 { cpu * 1e6 / found.tokens as f64 } else { f64::NAN },
        "wall_seconds": wall,
    })
}

fn main() {
    let levels: Vec<usize> = std::env::var("GAUNTLET_FIDELITY_LEVELS")
        .unwrap_or_else(|_| "1,16,64,256,512".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    // Hundreds of streams need as many sockets, for gauntlet and for the pacer (both inherit this limit).
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain get/set of this process's own file-descriptor limit.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max.min(65536);
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
    }
    let scratch = tempfile::tempdir().expect("scratch");
    let mut results = Vec::new();
    println!(
        "pacer: TTFT {TTFT_MS} ms, gap {GAP_MS} ms + jitter [0, {JITTER_MS}) ms, {TOKENS} tokens, {REPETITIONS} batches"
    );
    println!(
        "| streams | in flight (server) | TTFT err warm p50 / p99 / max ms | cold n, p99 ms | inter-token err p50 / p99 / max ms | CPU ms / 1k tokens |"
    );
    println!("|---:|---:|---|---|---|---:|");
    let f = |v: &Value| v.as_f64().map_or("-".to_owned(), |x| format!("{x:.3}"));
    for c in levels {
        let r = measure(c, scratch.path());
        println!(
            "| {c} | {} | {} / {} / {} | {}, {} | {} / {} / {} | {:.1} |",
            r["server_in_flight_min_of_batch_peaks"],
            f(&r["ttft_error_warm"]["p50_ms"]),
            f(&r["ttft_error_warm"]["p99_ms"]),
            f(&r["ttft_error_warm"]["max_ms"]),
            r["ttft_error_cold"]["n"],
            f(&r["ttft_error_cold"]["p99_ms"]),
            f(&r["inter_token_error"]["p50_ms"]),
            f(&r["inter_token_error"]["p99_ms"]),
            f(&r["inter_token_error"]["max_ms"]),
            r["cpu_ms_per_1000_tokens"].as_f64().unwrap_or(f64::NAN),
        );
        if r["unmatched"].as_u64() != Some(0) || r["exit"].as_i64() != Some(0) {
            println!("  (exit {}, {} events or requests could not be matched)", r["exit"], r["unmatched"]);
        }
        results.push(r);
    }
    let path = target_dir().parent().map(|p| p.join("client-fidelity.json")).unwrap_or_default();
    let _ = std::fs::write(&path, serde_json::to_vec_pretty(&json!({"results": results})).unwrap_or_default());
    println!("written: {}", path.display());
}
