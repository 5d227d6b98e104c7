//! Records are total (#32): whatever a server sends (NaN and ±Inf in `/metrics`, changes that overflow, JSON nested
//! to the parser's limit) and whatever samples a baseline holds (denormal, huge, millions), the record gauntlet
//! writes reads back with its own reader, no statistic that is not a number becomes a call, and a store never takes
//! a record it could not read again. The property tests are seeded loops (the seed of a failure is in its message).

use std::collections::BTreeMap;
use std::time::Instant;

use gauntlet_engine::bench::stats::Rules;
use gauntlet_engine::client::parse_completion;
use gauntlet_engine::run::{BenchRecord, BenchVerdict, Level, Spreads, assess};
use gauntlet_engine::session::metrics;
use gauntlet_engine::store::Store;
use gauntlet_schema::bench::{Rng, SAMPLES_KEPT};
use gauntlet_schema::*;
use serde_json::{Value, json};

use super::store::{manual, record};

/// Values Prometheus text may hold that no JSON number can, and finite ones whose sums and ratios overflow or vanish.
const PROM_VALUES: &[&str] =
    &["NaN", "+Inf", "-Inf", "1e308", "-1e308", "1.7e308", "-1.7e308", "5e-324", "0", "-0", "3.5", "1e-300", "42"];
/// Series names: the key metrics' (so their sums see the odd values too) and others.
const SERIES: &[&str] =
    &["vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:num_requests_running", "a_total", "b"];

fn pick<'a>(rng: &mut Rng, from: &[&'a str]) -> &'a str {
    from[rng.index(from.len())]
}

fn prometheus(rng: &mut Rng) -> String {
    let mut text = String::new();
    for name in SERIES {
        if rng.index(4) == 0 {
            continue;
        }
        let kind = pick(rng, &["counter", "gauge", "untyped"]);
        text.push_str(&format!("# TYPE {name} {kind}\n{name}{{l=\"{}\"}} {}\n", rng.index(2), pick(rng, PROM_VALUES)));
    }
    text
}

/// A value `depth` levels deep, objects and arrays mixed, with a scalar at the bottom.
fn nested(rng: &mut Rng, depth: usize) -> Value {
    let mut v = json!(rng.uniform());
    for _ in 0..depth {
        v = if rng.index(3) == 0 { json!([v, 1]) } else { json!({"a": v, "n": "x"}) };
    }
    v
}

/// A non-streamed completion whose `timings` and tool-call arguments are nested up to 200 deep (past what any
/// reader takes: the value is handed over already parsed, so its depth is not bounded by the parser).
fn completion(rng: &mut Rng) -> Value {
    let (deep, deeper) = (rng.index(200), rng.index(200));
    let timings = nested(rng, deep);
    let arguments = json!({"x": nested(rng, deeper)});
    json!({
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Paris",
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": arguments}}]}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
        "timings": timings,
    })
}

fn every_number_is_finite(m: &ServerMetrics) -> bool {
    m.counters.iter().all(|c| c.before.unwrap_or(0.0).is_finite() && c.after.is_finite() && c.delta.is_finite())
        && m.gauges.iter().all(|g| g.after.is_finite())
        && m.key.iter().all(|k| k.delta.is_finite())
}

#[test]
fn run_records_of_hostile_metrics_and_deep_server_json_read_back_and_promote() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let mut rng = Rng::new(32);
    for i in 0..300 {
        let (before, after) = (prometheus(&mut rng), prometheus(&mut rng));
        let m = metrics::compare("/metrics", (metrics::parse(&before), 0.1), (metrics::parse(&after), 0.1));
        assert!(every_number_is_finite(&m), "iteration {i}: {m:?}\n{before}\n{after}");
        let answer = parse_completion(&completion(&mut rng)).unwrap();
        let mut r = record(&["-c", "1"], &i.to_string());
        r.findings.extend(metrics::non_finite_finding(&m));
        assert_eq!(r.findings.is_empty(), m.non_finite.is_empty(), "iteration {i}: a marker without its finding");
        r.server_metrics = Some(m);
        r.cases.push(CaseRecord {
            id: "c".into(),
            status: CaseStatus::Pass,
            skip_reason: None,
            repeat_of: None,
            stream: false,
            request: json!({}),
            answer: Some(answer),
            error: None,
            seconds: Some(0.1),
            observed: None,
            checks: Vec::new(),
            divergence: None,
        });
        let text = serde_json::to_string_pretty(&r).unwrap();
        let back =
            parse_run_record(&text).unwrap_or_else(|e| panic!("iteration {i}: run.json does not read back: {e}"));
        // Nothing is lost on the way: the record read writes the same text again.
        assert_eq!(serde_json::to_string_pretty(&back).unwrap(), text, "iteration {i}");
        if i % 50 == 0 {
            store.promote(&r, manual(), "property").unwrap();
            assert!(store.latest(&r.identity_digest).unwrap().is_some(), "iteration {i}");
        }
    }
    assert_eq!(store.verify().unwrap().1, Vec::<String>::new());
}

/// The record of a `/metrics` with a NaN gauge, an infinite counter and a counter whose change overflows: each is a
/// marker in `non_finite`, left out of the lists and the key metrics, and the run carries the finding naming it.
#[test]
fn non_finite_metric_values_are_markers_with_a_finding() {
    let before = "# TYPE g gauge\ng NaN\n# TYPE c_total counter\nc_total +Inf\n# TYPE w_total counter\nw_total -1e308\n\
                  # TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total 1\n";
    let after =
        before.replace("-1e308", "1.7e308").replace("vllm:prompt_tokens_total 1", "vllm:prompt_tokens_total NaN");
    let m = metrics::compare("/metrics", (metrics::parse(before), 0.0), (metrics::parse(&after), 0.0));
    let marks: Vec<(&str, &str, &str)> =
        m.non_finite.iter().map(|n| (n.name.as_str(), n.field.as_str(), n.value.as_str())).collect();
    assert_eq!(
        marks,
        [
            ("c_total", "before", "+Inf"),
            ("c_total", "after", "+Inf"),
            ("c_total", "delta", "NaN"),
            ("g", "after", "NaN"),
            ("vllm:prompt_tokens_total", "after", "NaN"),
            ("vllm:prompt_tokens_total", "delta", "NaN"),
            ("w_total", "delta", "+Inf"),
            ("prompt_tokens", "sum", "NaN"),
        ]
    );
    assert!(m.counters.is_empty() && m.gauges.is_empty() && m.key.is_empty(), "{m:?}");
    let f = metrics::non_finite_finding(&m).unwrap();
    assert_eq!((f.kind.as_str(), f.severity), ("non-finite-value", Severity::Info));
    assert!(f.message.starts_with("8 server metric value(s) not a finite number"), "{}", f.message);
    let mut r = record(&["-c", "1"], "nan");
    r.server_metrics = Some(m);
    let metrics_text = serde_json::to_string(&r.server_metrics).unwrap();
    assert!(!metrics_text.contains("null"), "{metrics_text}");
    parse_run_record(&serde_json::to_string(&r).unwrap()).unwrap();
}

/// A record that would not read back (a number that is not finite is written as `null`) is refused at promotion
/// with a message, and the store still answers with the baseline it had.
#[test]
fn a_record_that_would_not_read_back_is_refused_at_promotion_and_the_store_stays_readable() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let good = record(&["-c", "1"], "good");
    store.promote(&good, manual(), "good").unwrap();
    let mut bad = record(&["-c", "1"], "bad");
    bad.wall_seconds = f64::NAN;
    let err = store.promote(&bad, manual(), "bad").unwrap_err().to_string();
    assert!(err.contains("refused to promote: the record would not read back"), "{err}");
    let (entry, latest) = store.latest(&good.identity_digest).unwrap().unwrap();
    assert_eq!((entry.seq, latest.started_at), (1, good.started_at));
    assert_eq!(store.verify().unwrap(), (1, Vec::new()));
}

fn bench_record(samples: BTreeMap<String, Vec<f64>>) -> BenchRecord {
    let mut b: BenchRecord = serde_json::from_value(json!({
        "bench_version": gauntlet_engine::run::BENCH_VERSION, "gauntlet_version": "0", "profile": "p",
        "started_at": "t", "identity": {}, "identity_digest": "d", "runtime": {}, "definitions": {},
        "verdict": "candidate", "rules": {},
        "workload": {"concurrency": [1], "max_tokens": 8, "warmups": 0, "repetitions": 2}, "levels": [],
    }))
    .unwrap();
    b.levels.push(Level {
        concurrency: 1,
        batches: Vec::new(),
        tally: None,
        metrics: json!({}),
        samples,
        batches_per_sample: 1,
        comparisons: Vec::new(),
        sub_sessions: None,
        server_clock: None,
        structured: None,
    });
    b
}

const METRICS: [&str; 4] = ["output_throughput_wall", "ttft_mean", "tpot_mean", "e2el_mean"];

fn same(mut values: impl FnMut(&str) -> Vec<f64>) -> BTreeMap<String, Vec<f64>> {
    METRICS.iter().map(|m| ((*m).to_owned(), values(m))).collect()
}

/// Compares `candidate` with `baseline` as `bench --baseline` does, after a write and read of the baseline.
fn assess_against(baseline: &BenchRecord, candidate: &BenchRecord) -> (BenchRecord, Vec<Problem>) {
    let base = parse_bench_record(&serde_json::to_string(baseline).unwrap(), "baseline").unwrap();
    let mut out = candidate.clone();
    let (verdict, problems) =
        assess(&mut out.levels, &out.workload.clone(), Some(&base), true, &Rules::default(), &Spreads::new(), None);
    out.verdict = verdict;
    (out, problems)
}

/// Denormal baseline samples give infinite ratios and a NaN interval: no metric is called, the verdict is
/// inconclusive (never a pass), and the bench.json written reads back.
#[test]
fn denormal_baseline_samples_are_not_compared_and_never_pass() {
    let baseline = bench_record(same(|_| vec![5e-324, 5e-324]));
    let candidate = bench_record(same(|_| vec![1.0, 1.01, 0.99, 1.0]));
    let (out, problems) = assess_against(&baseline, &candidate);
    assert_eq!(out.verdict, BenchVerdict::Inconclusive, "{problems:?}");
    assert!(out.levels[0].comparisons.is_empty(), "{:?}", out.levels[0].comparisons);
    let not_compared = |p: &Problem| p.code == ProblemCode::NotCompared && p.text.contains("no finite statistic");
    assert!(problems.iter().all(not_compared) && problems.len() == 4, "{problems:?}");
    let text = serde_json::to_string(&out).unwrap();
    parse_bench_record(&text, "bench.json").unwrap();
}

/// Baseline samples of every odd kind: whatever `assess` makes of them holds only finite numbers, is never a pass
/// when a metric could not be compared, and reads back.
#[test]
fn bench_comparisons_of_odd_baselines_are_finite_and_read_back() {
    const ODD: &[f64] = &[5e-324, 1e-300, 0.0, -0.0, 1e308, -1e308, 1.7e308, 1.0, 2.5, -3.0];
    let mut rng = Rng::new(11);
    for i in 0..200 {
        let n = 2 + rng.index(6);
        let baseline = bench_record(same(|_| (0..n).map(|_| ODD[rng.index(ODD.len())]).collect()));
        let candidate = bench_record(same(|_| (0..4).map(|_| 1.0 + rng.uniform() / 10.0).collect()));
        let (out, problems) = assess_against(&baseline, &candidate);
        for c in &out.levels[0].comparisons {
            let numbers = [c.baseline_mean, c.mean, c.change, c.interval.0, c.interval.1];
            assert!(numbers.iter().all(|x| x.is_finite()), "iteration {i}: {c:?}");
        }
        if problems.iter().any(|p| p.code == ProblemCode::NotCompared) {
            assert_ne!(out.verdict, BenchVerdict::Pass, "iteration {i}: {problems:?}");
        }
        let text = serde_json::to_string(&out).unwrap();
        parse_bench_record(&text, "bench.json").unwrap_or_else(|e| panic!("iteration {i}: {e}"));
    }
}

/// A baseline with 200 000 samples a metric (gauntlet writes at most 512) is merged down to 512 when read, each
/// sample the mean of as many neighbours as `batches_per_sample` says, so a comparison with it stays quick.
#[test]
fn a_baseline_with_too_many_samples_is_merged_down_when_read() {
    let many = 200_000;
    let baseline = bench_record(same(|_| (0..many).map(|i| 1.0 + (i % 7) as f64 * 0.01).collect()));
    let read = parse_bench_record(&serde_json::to_string(&baseline).unwrap(), "baseline").unwrap();
    let level = &read.levels[0];
    assert!(level.samples.values().all(|v| v.len() <= SAMPLES_KEPT), "{}", level.samples["ttft_mean"].len());
    assert_eq!(level.batches_per_sample, 512);
    let mut candidate = bench_record(same(|_| (0..8).map(|i| 1.0 + (i % 7) as f64 * 0.01).collect()));
    candidate.levels[0].batches_per_sample = 512;
    let at = Instant::now();
    let (out, problems) = assess_against(&baseline, &candidate);
    assert!(at.elapsed().as_secs() < 20, "{:?} {problems:?}", at.elapsed());
    assert_eq!(out.levels[0].comparisons.len(), 4, "{problems:?}");
}
