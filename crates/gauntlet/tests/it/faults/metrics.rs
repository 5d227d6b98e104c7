//! The server's Prometheus counters around a run and a bench (`server_metrics`): the fake server's `/metrics`
//! counts chat requests, prompt and answer words in vLLM's names; a scrape that fails is a note in the record and
//! the report, never a failed or slowed run.

use super::bench::bench_fixture;
use super::*;

fn rec(run: &crate::common::Run) -> &serde_json::Value {
    run.record.as_ref().unwrap_or_else(|| panic!("no run.json: {}", run.explain()))
}

fn key(record: &serde_json::Value, name: &str) -> Option<f64> {
    record["server_metrics"]["key"].as_array()?.iter().find(|k| k["name"] == name)?["delta"].as_f64()
}

/// The gate's five cases (one repeat) between the two scrapes, nothing of readiness: five requests, 5 × 40 answer
/// words, 5 × 2 prompt words, the repeat's 2 as prefix-cache hits.
#[test]
fn a_run_records_the_servers_counter_deltas() {
    let f = Fixture::new("metrics-run").profile("metrics = \"/metrics\"");
    let run = f.run(&[]);
    assert_eq!(run.code, 0, "{}", run.explain());
    let m = &rec(&run)["server_metrics"];
    assert_eq!(
        (m["path"].as_str(), m["before"]["ok"].as_bool(), m["after"]["ok"].as_bool()),
        (Some("/metrics"), Some(true), Some(true)),
        "{m}"
    );
    assert_eq!(rec(&run)["schema_version"], gauntlet_schema::RUN_RECORD_VERSION);
    let got: Vec<Option<f64>> =
        ["requests_finished", "prompt_tokens", "generated_tokens", "prefix_cache_hits", "preemptions", "queue_seconds"]
            .iter()
            .map(|k| key(rec(&run), k))
            .collect();
    assert_eq!(got, vec![Some(5.0), Some(10.0), Some(200.0), Some(2.0), Some(0.0), Some(0.005)], "{m}");
    // Per series, with labels: the histogram's `_count`, the gauge's last value; buckets are left out.
    let series = m["counters"].as_array().unwrap();
    let count = series.iter().find(|c| c["name"] == "vllm:request_queue_time_seconds_count").unwrap();
    assert_eq!((count["delta"].as_f64(), count["labels"]["model_name"].as_str()), (Some(5.0), Some("fake")), "{m}");
    assert!(series.iter().all(|c| !c["name"].as_str().unwrap().ends_with("_bucket")), "{m}");
    assert_eq!(m["gauges"][0]["name"], "vllm:num_requests_running");
    let report = std::fs::read_to_string(run.out.join("report.md")).unwrap();
    assert!(
        report.contains("## Server metrics")
            && report.contains("| generated tokens | `vllm:generation_tokens_total` | 200 |"),
        "{report}"
    );
    // `metrics = false`: not asked, not recorded.
    let off = Fixture::new("metrics-off").profile("metrics = false").run(&[]);
    assert_eq!(off.code, 0, "{}", off.explain());
    assert!(rec(&off).get("server_metrics").is_none(), "{}", rec(&off)["server_metrics"]);
}

/// A bench's scrapes bracket its whole workload: at least its measured requests, each answer's 40 words.
#[test]
fn a_bench_records_the_servers_counter_deltas() {
    let f = Fixture::new("metrics-bench").answers(vec![("", answer("word"))]).profile("metrics = \"/metrics\"");
    let (code, stdout, record, out) = bench_fixture(&f, "bench", &[]);
    assert_eq!(code, Some(0), "{stdout}");
    assert_eq!(record["bench_version"], gauntlet_schema::bench::BENCH_VERSION);
    let requests = key(&record, "requests_finished").unwrap_or(0.0);
    let measured: usize = record["levels"][0]["batches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["requests"].as_array().unwrap().len())
        .sum();
    assert!(measured == 4 && requests >= 4.0, "{requests} {}", record["server_metrics"]);
    assert!(key(&record, "generated_tokens").unwrap_or(0.0) >= 4.0 * 40.0, "{}", record["server_metrics"]);
    let md = std::fs::read_to_string(out.join("bench.md")).unwrap();
    assert!(md.contains("## Server metrics") && md.contains("requests finished"), "{md}");
}

/// Malformed, oversized, hanging or missing `/metrics`: each a recorded note with its reason; the run passes, and
/// a hanging one costs at most its two bounded scrapes.
#[test]
fn a_broken_metrics_endpoint_is_a_note_and_the_run_still_passes() {
    for (fault, says) in [
        ("malformed", "not Prometheus text"),
        ("oversized", "larger than 4194304 bytes"),
        ("hang", "timed out"),
        ("http404", "HTTP 404"),
    ] {
        let f = Fixture::new(&format!("metrics-{fault}"))
            .fault(&["--metrics-fault", fault])
            .profile("metrics = \"/metrics\"");
        let started = std::time::Instant::now();
        let run = f.run(&[]);
        assert_eq!(run.code, 0, "{fault}: {}", run.explain());
        assert!(started.elapsed() < Duration::from_secs(45), "{fault}: {:?}", started.elapsed());
        let m = &rec(&run)["server_metrics"];
        assert_eq!(
            (m["before"]["ok"].as_bool(), m["after"]["ok"].as_bool()),
            (Some(false), Some(false)),
            "{fault}: {m}"
        );
        let error = m["before"]["error"].as_str().unwrap_or_default();
        assert!(error.contains(says), "{fault}: {error}");
        assert!(m.get("counters").is_none() && m.get("key").is_none(), "{fault}: {m}");
        if fault == "hang" {
            assert!(m["before"]["seconds"].as_f64().unwrap() < 5.0, "{m}");
        }
        let report = std::fs::read_to_string(run.out.join("report.md")).unwrap();
        assert!(report.contains("- the scrape before failed: "), "{fault}: {report}");
    }
}
