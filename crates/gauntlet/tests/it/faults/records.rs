//! Records are total (#32): a server whose `/metrics` holds NaN and ±Inf (legal Prometheus) or a counter change
//! that overflows, or whose answer nests `timings` to the parser's limit, gets a record gauntlet reads back, promotes
//! and compares the next run with. The bench client keeps a token whose text is `[DONE]`, and the first event after
//! a head ended by a bare LF.

use super::bench::bench_fixture;
use super::*;

/// `gauntlet run` into `out` against `store`, promoting (trusted) when asked.
fn run_with_store(f: &Fixture, out: &str, store: &Path, promote: bool) -> Run {
    let mut extra = vec!["--store", store.to_str().unwrap()];
    if promote {
        extra.extend(["--promote", "--trusted"]);
    }
    f.run_into(out, &extra)
}

/// `gauntlet report RUN.json`: it reads the record back.
fn report_reads(run: &Run) {
    let record = run.out.join("run.json");
    let o = gauntlet(&["report", record.to_str().unwrap(), "--format", "md"], &[], Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(0), "report: {}", String::from_utf8_lossy(&o.stderr));
}

/// Promoted, then the next run of the same identity compares with it (before #32 it exited 3: skipped), and the
/// store's chain verifies.
fn next_run_uses_the_promoted_baseline(f: &Fixture, store: &Path) {
    let second = run_with_store(f, "second", store, false);
    assert_eq!(second.code, 0, "{}", second.explain());
    assert!(second.stderr.contains("baseline: #1 of profile `test`"), "{}", second.explain());
    let verify = gauntlet(&["baseline", "verify", "--store", store.to_str().unwrap()], &[], Duration::from_secs(30));
    assert_eq!(verify.status.code(), Some(0), "{}", String::from_utf8_lossy(&verify.stdout));
}

#[test]
fn non_finite_server_metrics_are_markers_and_the_promoted_record_stays_a_baseline() {
    let f = Fixture::new("records-nan").fault(&["--metrics-fault", "non-finite"]).profile("metrics = \"/metrics\"");
    let store = f.path().join("store");
    let first = run_with_store(&f, "first", &store, true);
    assert_eq!(first.code, 0, "{}", first.explain());
    let text = std::fs::read_to_string(first.out.join("run.json")).unwrap();
    assert!(!text.contains("\"after\": null") && !text.contains("\"delta\": null"), "{text}");
    let m = &first.record.as_ref().unwrap()["server_metrics"];
    let marks: Vec<String> = m["non_finite"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|n| {
            format!("{} {} {}", n["name"].as_str().unwrap(), n["field"].as_str().unwrap(), n["value"].as_str().unwrap())
        })
        .collect();
    for expected in ["g after NaN", "c_total after +Inf", "w_total delta +Inf", "vllm:prompt_tokens_total after NaN"] {
        assert!(marks.iter().any(|m| m == expected), "{expected} not in {marks:?}");
    }
    let finding = first.findings("non-finite-value");
    assert_eq!(finding.len(), 1, "{}", first.explain());
    assert_eq!(finding[0]["severity"], "info");
    report_reads(&first);
    next_run_uses_the_promoted_baseline(&f, &store);
}

#[test]
fn a_timings_object_nested_126_deep_is_capped_and_the_promoted_record_stays_a_baseline() {
    let f = Fixture::new("records-deep").fault(&["--fault", "deep-timings", "--fault-on", "alpha"]);
    let store = f.path().join("store");
    let first = run_with_store(&f, "first", &store, true);
    assert_eq!(first.code, 0, "{}", first.explain());
    let mut at = first.case("alpha")["answer"]["server_timings"].clone();
    for _ in 0..32 {
        at = at["a"].clone();
    }
    assert_eq!(at, "[gauntlet: nested deeper than 32 levels, dropped]", "{}", first.explain());
    report_reads(&first);
    next_run_uses_the_promoted_baseline(&f, &store);
}

/// Every measured request of a bench against `fault`: its content events, and no error.
fn bench_events(name: &str, fault: &str) -> Vec<Vec<String>> {
    let f = Fixture::new(name).fault(&["--fault", fault]);
    let (code, stdout, record, _) = bench_fixture(&f, "bench", &[]);
    assert_eq!(code, Some(0), "{fault}: {stdout}");
    let batches = record["levels"][0]["batches"].as_array().unwrap();
    assert_eq!(batches.len(), 4, "{stdout}");
    let mut out = Vec::new();
    for b in batches {
        let r = &b["requests"][0];
        assert!(r.get("error").is_none(), "{fault}: {r}");
        let events = r["events"].as_array().unwrap();
        out.push(events.iter().map(|e| e[1].as_str().unwrap().to_owned()).filter(|c| !c.is_empty()).collect());
    }
    out
}

/// A token whose text is `[DONE]`, the rest of the answer 300 ms later (longer than the client waits after a real
/// end): only a line `data: [DONE]` ends a stream.
#[test]
fn the_bench_client_keeps_a_token_whose_text_is_done() {
    for events in bench_events("records-done-text", "done-in-text") {
        assert_eq!(events, ["The ", "[DONE]", " is ", "text"]);
    }
}

/// A head ended by a bare LF, its events framed with CRLF, all in one write: no event is read as a header.
#[test]
fn the_bench_client_keeps_the_first_event_after_a_bare_lf_head() {
    for events in bench_events("records-lf-head", "lf-head") {
        assert_eq!(events, ["Pa", "ri", "s!"]);
    }
}
