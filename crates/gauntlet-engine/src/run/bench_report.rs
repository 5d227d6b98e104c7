//! What `gauntlet bench` writes beside `bench.json`: `bench.md` for a person, and `bench.bmf.json` in bencher's
//! metric format (BMF) for tracking the numbers over time in bencher or any tool that reads it.

use std::fmt::Write as _;

use serde_json::{Map, Value, json};

use gauntlet_schema::ReceiveClock;
use gauntlet_schema::bench::{BenchRecord, Level, MetricComparison};

/// The measures exported per concurrency: BMF slug, the compared metric whose per-batch samples bound it, how the
/// pooled value is read from the level's metrics, and the factor to the slug's unit.
const MEASURES: &[(&str, Option<&str>, &[&str], f64)] = &[
    ("output-throughput-tok-per-s", Some("output_throughput_wall"), &["output_throughput_wall"], 1.0),
    ("ttft-mean-ms", Some("ttft_mean"), &["ttft", "mean"], 1e3),
    ("ttft-p99-ms", None, &["ttft", "p99"], 1e3),
    ("tpot-mean-ms", Some("tpot_mean"), &["tpot", "mean"], 1e3),
    ("e2el-mean-ms", Some("e2el_mean"), &["e2el", "mean"], 1e3),
    ("error-rate", None, &["error_rate"], 1.0),
];

fn pooled(level: &Level, path: &[&str]) -> Option<f64> {
    path.iter().try_fold(&level.metrics, |v, k| v.get(k)).and_then(Value::as_f64).filter(|x| x.is_finite())
}

/// `{"<profile>/concurrency-<c>": {"<measure>": {"value", "lower_value", "upper_value"}}}`: the value pooled over
/// every measured batch, bounded by the smallest and largest per-batch sample where the metric is sampled.
pub fn bencher(r: &BenchRecord) -> Value {
    let mut out = Map::new();
    for level in &r.levels {
        let mut measures = Map::new();
        for (slug, sampled, path, factor) in MEASURES {
            let Some(value) = pooled(level, path) else { continue };
            let mut m = json!({"value": value * factor});
            if let Some(samples) = sampled.and_then(|s| level.samples.get(s)).filter(|s| !s.is_empty()) {
                let lo = samples.iter().copied().fold(f64::INFINITY, f64::min);
                let hi = samples.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                m["lower_value"] = json!(lo * factor);
                m["upper_value"] = json!(hi * factor);
            }
            measures.insert((*slug).into(), m);
        }
        out.insert(format!("{}/concurrency-{}", r.profile, level.concurrency), Value::Object(measures));
    }
    Value::Object(out)
}

/// One compared metric at one concurrency: "baseline → now (change, interval, p, call): why".
pub fn comparison_line(concurrency: usize, c: &MetricComparison) -> String {
    format!(
        "c{concurrency} {} ({} is better): {:.4} → {:.4} ({:+.1} %, interval {:+.1} … {:+.1} %, p {}, {}): {}",
        c.metric,
        c.better,
        c.baseline_mean,
        c.mean,
        c.change * 100.0,
        c.interval.0 * 100.0,
        c.interval.1 * 100.0,
        c.p_value.map_or("n/a".into(), |p| format!("{p:.3}")),
        c.call,
        c.why
    )
}

/// `bench.md`: the verdict, the workload, one row per concurrency, and a line per compared metric
/// "baseline → now (change, interval, call)".
pub fn markdown(r: &BenchRecord) -> String {
    let ms = |v: Option<f64>| v.map_or("—".to_owned(), |x| format!("{:.1}", x * 1e3));
    let mut md = String::new();
    let _ = writeln!(md, "# gauntlet bench: {} — {}\n", r.profile, r.verdict.as_str().to_uppercase());
    let w = &r.workload;
    let _ = writeln!(
        md,
        "- Workload: concurrency {:?}, {} max tokens, {} warm-up and {} measured batch(es) per concurrency, \
         temperature 0, {}",
        w.concurrency,
        w.max_tokens,
        w.warmups,
        w.repetitions,
        match w.rate {
            Some(rate) => format!(
                "open loop (each batch's requests arrive as a Poisson process at {rate} req/s, seed {})",
                w.seed.unwrap_or(1)
            ),
            None => "closed loop (each batch released at once)".into(),
        }
    );
    let _ = writeln!(md, "- Identity: `{}` · gauntlet {}", r.identity_digest, r.gauntlet_version);
    let clocks: std::collections::BTreeSet<ReceiveClock> =
        r.levels.iter().flat_map(|l| &l.batches).filter_map(|b| b.receive_clock).collect();
    let arrival = match clocks.iter().copied().collect::<Vec<_>>()[..] {
        [] => None,
        [ReceiveClock::Kernel] => {
            Some("the kernel's receive stamp of every read: the client's own load is not in them")
        }
        [ReceiveClock::Client] => {
            Some("when the client's reads returned (HTTPS, or no kernel stamps): its own load can be in them")
        }
        _ => Some("the kernel's receive stamps for some reads, when the client's reads returned for others"),
    };
    if let Some(arrival) = arrival {
        let _ = writeln!(md, "- Arrival times: {arrival}");
    }
    let _ =
        writeln!(md, "- Baseline: {}\n", r.baseline.as_deref().map_or("none (candidate)".into(), |b| format!("`{b}`")));
    let _ = writeln!(
        md,
        "| concurrency | requests | failed | TTFT p50 ms | TTFT p99 ms | TPOT mean ms | ITL p99 ms | E2EL p50 ms | output tok/s | in flight |"
    );
    let _ = writeln!(md, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for l in &r.levels {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {:.1} | {} |",
            l.concurrency,
            l.metrics["requests"].as_u64().unwrap_or(0),
            l.metrics["failed"].as_u64().unwrap_or(0),
            ms(pooled(l, &["ttft", "p50"])),
            ms(pooled(l, &["ttft", "p99"])),
            ms(pooled(l, &["tpot", "mean"])),
            ms(pooled(l, &["itl_chunk", "p99"])),
            ms(pooled(l, &["e2el", "p50"])),
            pooled(l, &["output_throughput_wall"]).unwrap_or(0.0),
            l.batches.iter().map(|b| b.in_flight_max).max().unwrap_or(0)
        );
    }
    let comparisons: Vec<_> =
        r.levels.iter().flat_map(|l| l.comparisons.iter().map(move |c| (l.concurrency, c))).collect();
    if !comparisons.is_empty() {
        let _ = writeln!(md, "\n## Against the baseline\n");
        for (conc, c) in comparisons {
            let _ = writeln!(md, "- {}", comparison_line(conc, c));
        }
    }
    if !r.problems.is_empty() {
        let _ = writeln!(md, "\n## Problems\n");
        for p in &r.problems {
            let _ = writeln!(md, "- {p}");
        }
    }
    let _ = writeln!(
        md,
        "\nMetric names and conventions follow vLLM and AIPerf (`definitions` in `bench.json`); `bench.bmf.json` \
         has the same numbers in bencher's metric format."
    );
    md
}
