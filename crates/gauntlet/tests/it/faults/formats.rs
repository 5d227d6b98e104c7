//! The formats peers read (#34): `bench --format llmd` writes llm-d's Benchmark Report v0.2, validated here against
//! llm-d's published schema (a fixture), and `compare-bench` puts a vLLM `--save-result` file or an AIPerf
//! `profile_export.jsonl` beside a bench.

use super::bench::bench_fixture;
use super::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/formats").join(name)
}

#[test]
fn bench_writes_llmd_reports_that_validate_against_the_published_schema_and_compares_with_vllm() {
    let f = Fixture::new("formats").answers(vec![("__token_delay_ms", "4".into()), ("", answer("word"))]);
    let (code, stdout, record, out) = bench_fixture(&f, "b", &["--format", "llmd"]);
    assert_eq!(code, Some(0), "{stdout}");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("llmd_br_v0_2_json_schema.json")).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("llmd-c1.json")).unwrap()).unwrap();
    let errors: Vec<String> = validator.iter_errors(&report).map(|e| format!("{} at {}", e, e.instance_path)).collect();
    assert!(errors.is_empty(), "{errors:#?}\n{report:#}");
    // The numbers are the bench's, in the report's units.
    let aggregate = &report["results"]["request_performance"]["aggregate"];
    let level = &record["levels"][0]["metrics"];
    let ttft = aggregate["latency"]["time_to_first_token"]["mean"].as_f64().unwrap();
    assert!((ttft - level["ttft"]["mean"].as_f64().unwrap() * 1e3).abs() < 1e-9, "{report:#}");
    assert_eq!(aggregate["latency"]["time_to_first_token"]["units"], "ms");
    assert_eq!(aggregate["requests"]["total"], level["requests"]);
    assert_eq!(aggregate["throughput"]["output_token_rate"]["mean"], level["output_throughput_wall"]);
    assert_eq!(report["version"], "0.2");
    // A report that breaks the schema is caught by the same validator (the check is not vacuous).
    let mut broken = report.clone();
    broken["results"]["request_performance"]["aggregate"]["latency"]["time_to_first_token"]["units"] =
        "furlongs".into();
    assert!(!validator.is_valid(&broken));

    // vLLM's save-result beside the bench: the vLLM run's max_concurrency (1) picks the level.
    let bench = out.join("bench.json");
    let vllm = fixture("vllm_save_result.json");
    let args = ["compare-bench", bench.to_str().unwrap(), "--vllm", vllm.to_str().unwrap(), "--json"];
    let o = gauntlet(&args, &[], Duration::from_secs(30));
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["concurrency"], 1);
    let row = |name: &str| doc["rows"].as_array().unwrap().iter().find(|r| r["metric"] == name).cloned().unwrap();
    assert_eq!(doc["tool"], "vllm");
    assert_eq!(row("time to first token median")["theirs"], 20.5);
    let ours = row("time to first token median")["gauntlet"].as_f64().unwrap();
    assert!((ours - level["ttft"]["p50"].as_f64().unwrap() * 1e3).abs() < 1e-9);
    assert_eq!(row("output throughput")["theirs"], 64.0);
    assert_eq!(row("output throughput")["gauntlet"], level["output_throughput_wall"]);
    assert_eq!(row("inter-token latency (per chunk) p99")["theirs"], 16.0);
    let table = gauntlet(&args[..4], &[], Duration::from_secs(30));
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("vLLM: vllm, Qwen/Qwen3-0.6B") && table.contains("end-to-end latency p99"), "{table}");

    // AIPerf's per-request records beside the same bench: the totals computed as AIPerf defines them (4 completed
    // over 0.531 s from the first start to the last end; 32 output tokens), the latencies from the records.
    let aiperf = fixture("aiperf_profile_export.jsonl");
    let args = ["compare-bench", bench.to_str().unwrap(), "--aiperf", aiperf.to_str().unwrap(), "--json"];
    let o = gauntlet(&args, &[], Duration::from_secs(30));
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{text}{}", String::from_utf8_lossy(&o.stderr));
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!((doc["tool"].as_str(), doc["concurrency"].as_u64()), (Some("aiperf"), Some(1)));
    assert_eq!((doc["aiperf_completed"].as_u64(), doc["aiperf_failed"].as_u64()), (Some(4), Some(1)));
    assert_eq!(doc["aiperf_peak_in_flight"], 1);
    let row = |name: &str| doc["rows"].as_array().unwrap().iter().find(|r| r["metric"] == name).cloned().unwrap();
    let near = |v: &serde_json::Value, want: f64| (v.as_f64().unwrap() - want).abs() < 1e-9;
    assert!(near(&row("request throughput")["theirs"], 4.0 / 0.531), "{doc:#}");
    assert!(near(&row("output throughput")["theirs"], 32.0 / 0.531), "{doc:#}");
    assert!(near(&row("time to first token mean")["theirs"], 21.0), "{doc:#}");
    assert!(near(&row("time to first token median")["theirs"], 21.0), "{doc:#}");
    assert!(near(&row("time per output token (excl. first) mean")["theirs"], 15.75), "{doc:#}");
    assert!(near(&row("inter-token latency (per chunk) p99")["theirs"], 17.0), "{doc:#}");
    // gauntlet's side is the bench level's, over AIPerf's definitions (the span duration).
    let ours = row("output throughput")["gauntlet"].as_f64().unwrap();
    assert!((ours - level["output_throughput_span"].as_f64().unwrap()).abs() < 1e-9, "{doc:#}");
    let ours = row("end-to-end latency p90")["gauntlet"].as_f64().unwrap();
    assert!((ours - level["e2el"]["p90"].as_f64().unwrap() * 1e3).abs() < 1e-9, "{doc:#}");
    let table = gauntlet(&args[..4], &[], Duration::from_secs(30));
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(table.contains("AIPerf: profile export (4 completed, 1 failed, peak in flight 1)"), "{table}");
    // A broken line is named by its number; neither or both files is a usage error.
    let bad = f.path().join("bad.jsonl");
    let fixture_text = std::fs::read_to_string(&aiperf).unwrap();
    std::fs::write(&bad, format!("{}\n{{\"metadata\": 4}}\n", fixture_text.lines().next().unwrap())).unwrap();
    let o = gauntlet(
        &["compare-bench", bench.to_str().unwrap(), "--aiperf", bad.to_str().unwrap()],
        &[],
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{}: line 2: `metadata` must be an object, found 4", bad.display())), "{err}");
    let both = ["compare-bench", bench.to_str().unwrap(), "--aiperf", bad.to_str().unwrap(), "--vllm", "x"];
    assert_ne!(gauntlet(&both, &[], Duration::from_secs(30)).status.code(), Some(0));
    assert_ne!(
        gauntlet(&["compare-bench", bench.to_str().unwrap()], &[], Duration::from_secs(30)).status.code(),
        Some(0)
    );

    // Untrusted input: a broken file is a clear error naming it; a level the bench lacks is named too.
    let bad = f.path().join("bad.json");
    std::fs::write(&bad, r#"{"completed": 4, "duration": 1, "request_throughput": 1, "output_throughput": -3}"#)
        .unwrap();
    let o = gauntlet(
        &["compare-bench", bench.to_str().unwrap(), "--vllm", bad.to_str().unwrap()],
        &[],
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        err.contains(&format!("{}: `output_throughput` must be a finite non-negative number", bad.display())),
        "{err}"
    );
    let args = ["compare-bench", bench.to_str().unwrap(), "--vllm", vllm.to_str().unwrap(), "--concurrency", "8"];
    let o = gauntlet(&args, &[], Duration::from_secs(30));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("the bench has no level at concurrency 8 (it has [1])"), "{err}");
    let o = gauntlet(&["compare-bench", bench.to_str().unwrap(), "--vllm", "/dev/zero"], &[], Duration::from_secs(30));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("/dev/zero: is a device"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
