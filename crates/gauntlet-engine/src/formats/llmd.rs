//! llm-d's Benchmark Report v0.2 (`llm-d-benchmark`, `br_v0_2_json_schema.json`): one report per load point, so a
//! bench writes one per concurrency. Only what the record measured is written: the request counts, TTFT, TPOT, ITL
//! (gauntlet's per-chunk ITL), end-to-end latency (ms) and the pooled throughputs; the optional `scenario` (the
//! stack as llm-d's harness describes Kubernetes components) is left out rather than filled with guesses.

use serde_json::{Map, Value, json};

use gauntlet_schema::bench::{BenchRecord, Level};

/// The schema version written.
pub const VERSION: &str = "0.2";

/// A distribution of the level's metrics (seconds) as a report `Statistics` in milliseconds; `None` when absent
/// or not finite (the schema needs a number for `mean`).
fn latency(level: &Level, key: &str) -> Option<Value> {
    let d = level.metrics.get(key)?;
    let num = |k: &str| d.get(k).and_then(Value::as_f64).filter(|x| x.is_finite());
    let mean = num("mean")?;
    let mut s = Map::new();
    s.insert("units".into(), json!("ms"));
    s.insert("mean".into(), json!(mean * 1e3));
    for (ours, theirs) in [("p50", "p50"), ("p90", "p90"), ("p99", "p99"), ("max", "max")] {
        if let Some(v) = num(ours) {
            s.insert(theirs.into(), json!(v * 1e3));
        }
    }
    if let Some(v) = num("std").filter(|v| *v >= 0.0) {
        s.insert("stddev".into(), json!(v * 1e3));
    }
    Some(Value::Object(s))
}

/// A pooled rate of the level as a `Statistics` of one value.
fn rate(level: &Level, key: &str, units: &str) -> Option<Value> {
    let v = level.metrics.get(key).and_then(Value::as_f64).filter(|x| x.is_finite())?;
    Some(json!({"units": units, "mean": v}))
}

fn count(level: &Level, key: &str) -> Option<u64> {
    level.metrics.get(key).and_then(Value::as_u64)
}

/// The report of one concurrency level of `r`.
pub fn report(r: &BenchRecord, level: &Level) -> Value {
    let insert = |m: &mut Map<String, Value>, k: &str, v: Option<Value>| {
        if let Some(v) = v {
            m.insert(k.into(), v);
        }
    };
    let mut requests = Map::new();
    requests.insert("total".into(), json!(count(level, "requests").unwrap_or(0)));
    insert(&mut requests, "failures", count(level, "failed").map(|n| json!(n)));
    let mut latency_m = Map::new();
    insert(&mut latency_m, "time_to_first_token", latency(level, "ttft"));
    insert(&mut latency_m, "time_per_output_token", latency(level, "tpot"));
    insert(&mut latency_m, "inter_token_latency", latency(level, "itl_chunk"));
    insert(&mut latency_m, "request_latency", latency(level, "e2el"));
    let mut throughput = Map::new();
    insert(&mut throughput, "output_token_rate", rate(level, "output_throughput_wall", "tokens/s"));
    insert(&mut throughput, "request_rate", rate(level, "request_throughput_wall", "queries/s"));
    let identity = serde_json::to_value(&r.identity).unwrap_or(Value::Null);
    let text = |p: &str| identity.pointer(p).and_then(Value::as_str).map(str::to_owned);
    let model = text("/recipe/model/name");
    let server = text("/recipe/server/engine");
    let mut description = format!("gauntlet bench of profile {} at concurrency {}", r.profile, level.concurrency);
    if let Some(m) = &model {
        description.push_str(&format!(", model {m}"));
    }
    if let Some(s) = &server {
        description.push_str(&format!(", server {s}"));
    }
    let mut keywords = vec!["gauntlet".to_owned(), format!("concurrency-{}", level.concurrency)];
    keywords.push(if r.workload.rate.is_some() { "open-loop" } else { "closed-loop" }.into());
    json!({
        "version": VERSION,
        "run": {
            "uid": format!("{}-c{}", r.identity_digest, level.concurrency),
            "eid": format!("{}@{}", r.identity_digest, r.started_at),
            "time": time(&r.started_at),
            "description": description,
            "keywords": keywords,
        },
        "results": {
            "request_performance": {
                "aggregate": {
                    "requests": requests,
                    "latency": latency_m,
                    "throughput": throughput,
                }
            }
        }
    })
}

/// `run.time`: the bench's start when it is an RFC 3339 timestamp (the schema's `date-time`), else nothing.
fn time(started_at: &str) -> Value {
    let looks_rfc3339 = started_at.len() >= 20
        && started_at.as_bytes().get(4) == Some(&b'-')
        && started_at.as_bytes().get(10) == Some(&b'T')
        && started_at.chars().all(|c| c.is_ascii_alphanumeric() || "-:.+".contains(c));
    if looks_rfc3339 { json!({"start": started_at}) } else { Value::Null }
}

/// Every level's report, with the file name each is written under (`llmd-c<concurrency>.json`).
pub fn reports(r: &BenchRecord) -> Vec<(String, Value)> {
    r.levels.iter().map(|l| (format!("llmd-c{}.json", l.concurrency), report(r, l))).collect()
}
