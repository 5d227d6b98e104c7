//! The `/metrics` reader (`session::metrics`): a server's Prometheus text parsed, two scrapes compared into the
//! record's `server_metrics`, which must hold only finite numbers (a value that is not one is a marker in
//! `non_finite`, with its finding) and read back inside a run record (records are total, #32).
//!
//! Input: the first scrape's text, then after a line `@@ after` the second's (without it, the same text twice).
#![no_main]

use gauntlet_engine::session::metrics;
use gauntlet_schema::parse_run_record;
use libfuzzer_sys::fuzz_target;

const RECORD: &str = r#"{"schema_version": 9, "gauntlet_version": "0", "profile": "p", "started_at": "t",
  "finished_at": "", "wall_seconds": 1.0, "identity": {}, "identity_digest": "d", "runtime": {},
  "environment": {"hostname": "", "os": "", "arch": "", "cpu_model": "", "cpu_count": 0},
  "server": {"mode": "attached", "base_url": "", "command": [], "pid": null, "load_seconds": null, "loaded": true,
    "stop": "attached", "events": [], "log_tail": []},
  "suite": {"id": "s", "version": 1, "digest": "d", "budget_seconds": 1.0, "request_timeout_seconds": 1.0,
    "over_budget": false},
  "cases": [], "decode": {"median_tokens_per_second": null, "token_source": null, "cases_counted": 0},
  "findings": [], "verdict": "pass",
  "thresholds": {"min_pass_rate": 0.5, "fail_regressions": 2, "decode_ratio_warn": 0.85, "load_ratio_warn": 1.5,
    "load_timeout_seconds": 1.0, "request_timeout_seconds": 1.0, "suite_budget_seconds": 1.0}}"#;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let (before, after) = text.split_once("\n@@ after\n").unwrap_or((text, text));
    let m = metrics::compare("/metrics", (metrics::parse(before), 0.0), (metrics::parse(after), 0.0));
    let finite = m.counters.iter().all(|c| c.before.unwrap_or(0.0).is_finite() && c.after.is_finite() && c.delta.is_finite())
        && m.gauges.iter().all(|g| g.after.is_finite())
        && m.key.iter().all(|k| k.delta.is_finite());
    assert!(finite, "a number that is not finite outside `non_finite`: {m:?}");
    assert_eq!(metrics::non_finite_finding(&m).is_some(), !m.non_finite.is_empty());
    let mut run = parse_run_record(RECORD).expect("the template reads");
    run.findings.extend(metrics::non_finite_finding(&m));
    run.server_metrics = Some(m);
    let json = serde_json::to_string(&run).expect("a run record serializes");
    if let Err(e) = parse_run_record(&json) {
        panic!("server metrics that do not read back: {e}\n{json}");
    }
});
