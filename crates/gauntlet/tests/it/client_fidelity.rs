//! `gauntlet bench` against the pacing server: every streamed event the client recorded is matched to the write
//! the server made, no measured request paid for a connect, and the server saw the whole batch in flight. Only the
//! matching is asserted here; the size of the timing errors is the client-fidelity benchmark's business
//! (`scripts/bench-client.sh`), never a timed test's.

use std::time::Duration;

use crate::common::fidelity::{Pacer, analyse};
use crate::common::gauntlet;
use serde_json::Value;

#[test]
fn bench_events_match_the_pacers_writes_on_connections_opened_before_the_release() {
    // 9 tokens, two per event: five events per request, the last holding one token.
    let pacer = Pacer::start(&["--ttft-ms", "30", "--gap-ms", "5", "--tokens-per-event", "2", "--jitter-ms", "1"]);
    let dir = tempfile::tempdir().unwrap();
    let manifest = dir.path().join("pace.toml");
    let profile = format!(
        "version = 1\n[profiles.pace]\nbase_url = \"http://127.0.0.1:{}\"\nload_timeout = \"20s\"\nrequest_timeout = \"30s\"\n",
        pacer.port
    );
    std::fs::write(&manifest, profile).unwrap();
    let out = dir.path().join("bench");
    let args = [
        "bench",
        "--manifest",
        manifest.to_str().unwrap(),
        "--concurrency",
        "8",
        "--max-tokens",
        "9",
        "--warmups",
        "0",
        "--samples",
        "2",
        "--out",
        out.to_str().unwrap(),
    ];
    let o = gauntlet(&args, &[], Duration::from_secs(120));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&o.stderr));
    let bench: Value = serde_json::from_str(&std::fs::read_to_string(out.join("bench.json")).unwrap()).unwrap();
    assert_eq!(bench["bench_version"], gauntlet_schema::bench::BENCH_VERSION);
    for batch in bench["levels"][0]["batches"].as_array().unwrap() {
        assert_eq!(batch["receive_clock"], "kernel", "every read stamped by the kernel on arrival");
        assert!(batch["requests"].as_array().unwrap().iter().all(|r| r.get("connected").is_none()));
    }
    let log = pacer.log();
    for r in log["requests"].as_array().unwrap() {
        // The server's side of a TTFT starts at the kernel's arrival stamp of the request, never after its read.
        let (arrived, read) = (r["arrived_ns"].as_u64(), r["read_ns"].as_u64().unwrap());
        assert!(arrived.is_some_and(|a| a <= read), "{r}");
    }
    let found = analyse(&bench, &log);
    assert_eq!(found.unmatched, 0, "every event is one the server wrote");
    assert!(found.cold.is_empty(), "{} measured request(s) opened their connection", found.cold.len());
    assert_eq!(found.warm.len(), 16);
    assert_eq!(found.gaps.len(), 16 * 4, "multi-token events are one event each");
    assert_eq!(found.min_peak, 8, "the server saw every batch whole in flight");
    assert_eq!(found.tokens, 16 * 9);
    assert_eq!(bench["levels"][0]["metrics"]["output_tokens"], 16 * 9);
}
