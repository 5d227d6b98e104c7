//! Workloads from the field against the real server (#34): the embedded default's xllamacpp launcher and
//! SmolLM2-135M, one slot. A small Mooncake-style trace written here is replayed at its times: the rows that share
//! hash ids with the row before them show those prompt tokens in the server's cache, the others reuse less than a
//! block (the chat template's header only), and every request's lateness is recorded. A three-turn synthetic
//! conversation then shows per-turn TTFT and a measured hit rate at the one the workload should produce.

use std::path::Path;
use std::time::Duration;

use super::home;
use crate::common::{assert_no_survivors, free_port, gauntlet};
use serde_json::Value;

const MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
const BLOCK: u64 = 64;

fn manifest(dir: &Path, port: u16, workload: &str) -> std::path::PathBuf {
    let home = home();
    for (link, target) in [("model.gguf", home.join(MODEL)), ("xllamacpp-server", home.join("bin/xllamacpp-server"))] {
        assert!(target.exists(), "{} is missing: run scripts/setup.sh", target.display());
        std::os::unix::fs::symlink(&target, dir.join(link)).unwrap();
    }
    let text = format!(
        "version = 1\n[models.smol]\npath = \"model.gguf\"\n[servers.xllamacpp]\nbinary = \"xllamacpp-server\"\n\
         [profiles.field]\nmodel = \"smol\"\nserver = \"xllamacpp\"\nport = {port}\n\
         server_arguments = [\"-c\", \"2048\", \"-np\", \"1\"]\nload_timeout = \"120s\"\nrequest_timeout = \"60s\"\n\
         [profiles.field.bench]\nwarmups = 0\nsamples = 2\nmax_tokens = 8\nworkload = {workload}\n"
    );
    let path = dir.join("gauntlet.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn bench(dir: &Path, workload: &str) -> Value {
    let port = free_port();
    let m = manifest(dir, port, workload);
    let out = dir.join("out");
    let home = home();
    let env = [("GAUNTLET_HOME", home.to_str().unwrap()), ("GAUNTLET_STORE", dir.to_str().unwrap())];
    let args = ["bench", "--manifest", m.to_str().unwrap(), "--profile", "field", "--out", out.to_str().unwrap()];
    let o = gauntlet(&args, &env, Duration::from_secs(300));
    assert_no_survivors(&format!("--port {port}"));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let text = std::fs::read_to_string(out.join("bench.json")).unwrap_or_default();
    let record: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}\n{stdout}\n{stderr}"));
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(record["bench_version"], gauntlet_schema::bench::BENCH_VERSION);
    let md = std::fs::read_to_string(out.join("bench.md")).unwrap();
    eprintln!("{md}");
    record
}

fn requests(record: &Value) -> Vec<&Value> {
    record["levels"][0]["batches"].as_array().unwrap().iter().flat_map(|b| b["requests"].as_array().unwrap()).collect()
}

#[test]
fn a_mooncake_trace_replay_shows_cached_tokens_exactly_where_rows_share_hash_ids() {
    let dir = tempfile::tempdir().unwrap();
    // Rows 2 and 4 extend the row before them by a block; rows 1 and 3 share nothing with what came before.
    let rows = [(0, 128, "[1, 2]"), (1500, 192, "[1, 2, 3]"), (3000, 128, "[7, 8]"), (4500, 192, "[7, 8, 9]")];
    let trace: String = rows
        .iter()
        .map(|(t, n, ids)| {
            format!("{{\"timestamp\": {t}, \"input_length\": {n}, \"output_length\": 4, \"hash_ids\": {ids}}}\n")
        })
        .collect();
    std::fs::write(dir.path().join("trace.jsonl"), trace).unwrap();
    let record = bench(
        dir.path(),
        &format!("{{ trace = \"trace.jsonl\", format = \"mooncake\", block_size = {BLOCK}, speed = 1.0 }}"),
    );
    assert_eq!(record["workload"]["field"]["kind"], "trace", "{:#}", record["workload"]);
    let rs = requests(&record);
    assert_eq!(rs.len(), 8, "two replays of four rows");
    let summary = &record["levels"][0]["metrics"]["field"];
    assert_eq!(summary["prefix"], "token-exact", "{summary:#}");
    for (i, r) in rs.iter().enumerate() {
        assert!(r.get("error").is_none(), "{r:#}");
        let late = r["lateness"].as_f64().unwrap_or_else(|| panic!("no lateness: {r:#}"));
        assert!(late >= 0.0 && late.is_finite(), "{r:#}");
        let (prompt, cached, expected) = (
            r["prompt_tokens"].as_u64().unwrap(),
            r["cached_tokens"].as_u64().unwrap(),
            r["expected_cached"].as_u64().unwrap(),
        );
        eprintln!("row {}: prompt {prompt} cached {cached} expected {expected} lateness {late:.4}s", i % 4 + 1);
        if i % 2 == 1 {
            assert_eq!(expected, 128, "{r:#}");
            assert!(cached >= expected, "a row sharing two blocks reused only {cached} tokens: {r:#}");
            assert!(cached < expected + BLOCK, "more than the shared blocks and the template's header: {r:#}");
        } else {
            assert_eq!(expected, 0, "{r:#}");
            assert!(cached < BLOCK, "a row sharing no hash id reused a whole block ({cached} tokens): {r:#}");
        }
    }
    let lateness = &summary["lateness"];
    assert_eq!(lateness["requests"], 8, "{summary:#}");
}

#[test]
fn a_three_turn_conversation_reports_per_turn_ttft_and_the_hit_rate_of_its_shared_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let record = bench(dir.path(), "{ conversations = 1, turns = 3, user_words = 40, assistant_words = 24 }");
    let rs = requests(&record);
    assert_eq!(rs.len(), 6, "two batches of three turns");
    let summary = &record["levels"][0]["metrics"]["field"];
    let turns = summary["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 3, "{summary:#}");
    for t in turns {
        assert!(t["ttft_mean"].as_f64().is_some_and(|x| x > 0.0), "{t:#}");
        assert_eq!(t["requests"], 2, "{t:#}");
    }
    for r in rs.iter().filter(|r| r["turn"].as_u64().unwrap() > 0) {
        let (cached, expected) = (r["cached_tokens"].as_u64().unwrap(), r["expected_cached"].as_u64().unwrap());
        // The previous turn's whole prompt is the start of this one: the slot reuses all of it.
        assert!(cached >= expected && expected > 0, "{r:#}");
    }
    let cache = &summary["cache"];
    let (measured, expected) = (cache["measured_rate"].as_f64().unwrap(), cache["expected_rate"].as_f64().unwrap());
    eprintln!("hit rate measured {measured:.3}, expected {expected:.3}: {cache}");
    assert!(expected > 0.3, "three turns share most of their prompts: {cache}");
    // Above the expected rate by at most the chat template's header (24 of SmolLM2's tokens), which the second
    // batch's first turn finds in the slot: measured on this server, 0.542 against 0.537.
    assert!(measured >= expected && measured - expected < 0.05, "{cache}");
    assert_eq!(cache["block"], 1, "{cache}");
}
