//! Report rendering is a pure function of the run record: snapshots of Markdown and JUnit for a record that has
//! every kind of case and finding (with characters that must be escaped).

use gauntlet_engine::report;
use gauntlet_schema::*;
use serde_json::json;

fn case(id: &str, status: CaseStatus, content: Option<&str>) -> CaseRecord {
    CaseRecord {
        id: id.into(),
        status,
        skip_reason: None,
        repeat_of: None,
        stream: false,
        request: json!({"model": "m"}),
        answer: content.map(|c| Answer {
            content: c.into(),
            usage: Some(Usage { prompt_tokens: Some(9), completion_tokens: Some(40), cached_tokens: None }),
            ..Answer::default()
        }),
        error: None,
        seconds: content.map(|_| 0.5),
        observed: content.map(str::to_owned),
        checks: Vec::new(),
        divergence: None,
    }
}

fn record() -> (RunRecord, RunRecord) {
    let mut failed = case("json", CaseStatus::Fail, Some("{\"tool\": 2}"));
    failed.checks = vec![CheckResult {
        check: "json".into(),
        passed: false,
        detail: "JSON does not match: tool 2 ≠ \"a|b\" <x> & 'y'".into(),
    }];
    let mut errored = case("stream", CaseStatus::Error, None);
    errored.error = Some("stream ended without `data: [DONE]`".into());
    errored.seconds = Some(3.0);
    let mut skipped = case("story", CaseStatus::Skipped, None);
    skipped.skip_reason = Some("server is not running".into());
    let mut repeat = case("capital-again", CaseStatus::Pass, Some("Paris"));
    repeat.repeat_of = Some("capital".into());
    let run = RunRecord {
        schema_version: RUN_RECORD_VERSION,
        gauntlet_version: "0.1.0".into(),
        profile: "demo".into(),
        started_at: "2026-12-01T08:00:00.000Z".into(),
        finished_at: "2026-12-01T08:00:30.000Z".into(),
        wall_seconds: 30.0,
        identity: gauntlet_schema::IdentityRecord::from_value(json!({
            "identity_version": 1,
            "recipe": {
                "model": {"name": "smollm2", "file": "m.gguf", "size": 1, "sha256": "b179c9523d0e6a0f98a3"},
                "draft": null,
                "server": {"kind": "spawned", "name": "llama-server"},
                "server_arguments": [], "environment": {}, "features": [], "request_model": "smollm2",
                "endpoint": "chat", "template": {"thinking_cases": []},
            },
            "binding": {"runtime": "cpu"}, "suite": {"id": "demo", "version": 1, "digest": "d"}, "workload": {},
        })),
        identity_digest: "abc".into(),
        runtime: json!({"server_binary_sha256": "ff"}),
        environment: Environment::default(),
        server: ServerRecord {
            mode: gauntlet_schema::ServerMode::Spawned,
            base_url: "http://127.0.0.1:18480".into(),
            command: vec!["llama-server".into()],
            pid: Some(42),
            load_seconds: Some(0.84),
            load_cpu: None,
            loaded: true,
            stop: gauntlet_schema::StopOutcome::Crashed,
            events: Vec::new(),
            log_tail: vec!["ggml: out of memory".into(), "```".into()],
            readiness: None,
        },
        suite: SuiteRecord {
            id: "default".into(),
            version: 1,
            digest: "d".into(),
            budget_seconds: 300.0,
            request_timeout_seconds: 120.0,
            over_budget: false,
        },
        cases: vec![case("capital", CaseStatus::Pass, Some("Paris")), failed, errored, skipped, repeat],
        decode: DecodeSummary {
            median_tokens_per_second: Some(80.0),
            token_source: Some("usage".into()),
            cases_counted: 2,
            server_median_tokens_per_second: None,
            draft: None,
            speed_check: None,
        },
        findings: vec![
            Finding {
                kind: "crash".into(),
                severity: Severity::Fail,
                message: "server exited (signal 9)".into(),
                case: None,
            },
            Finding {
                kind: "text-drift".into(),
                severity: Severity::Warn,
                message: "text differs from the baseline at char 2".into(),
                case: Some("json".into()),
            },
            Finding {
                kind: "expected-failure".into(),
                severity: Severity::Info,
                message: "fails as expected\nsecond line".into(),
                case: Some("json".into()),
            },
        ],
        verdict: Verdict::Fail,
        thresholds: Thresholds {
            min_pass_rate: 0.5,
            fail_regressions: 2,
            decode_ratio_warn: 0.85,
            load_ratio_warn: 1.5,
            load_timeout_seconds: 480.0,
            request_timeout_seconds: 120.0,
            suite_budget_seconds: 300.0,
            expected_failures: vec!["json".into()],
            draft_acceptance_ratio_warn: 0.9,
        },
        baseline: Some(BaselineRef {
            path: "base.json".into(),
            profile: "demo".into(),
            started_at: "2026-11-30T08:00:00.000Z".into(),
            identity_digest: "abc".into(),
        }),
        sentry: None,
        build: None,
        server_metrics: None,
        baseline_jitter: None,
        lossless: None,
    };
    let mut base = run.clone();
    base.cases[1].observed = Some("{\"tool\": 3}".into());
    (run, base)
}

#[test]
fn markdown_report() {
    let (run, base) = record();
    insta::assert_snapshot!(report::markdown(&run, Some(&base)));
}

#[test]
fn junit_report() {
    let (run, _) = record();
    insta::assert_snapshot!(report::junit(&run));
}

/// A case's detail from a server with ESC, NUL, DEL, a C1 control, a bidi override and a tab: junit.xml carries
/// none of them (each becomes U+FFFD, the tab a space; quick-junit alone would drop ESC and NUL but keep the rest),
/// and the file still reads back as the same cases with the same detail.
#[test]
fn junit_report_carries_no_control_character_of_a_case_detail() {
    use quick_junit::{NonSuccessKind, TestCaseStatus};
    let (mut run, _) = record();
    run.cases[1].checks[0].detail = "\u{1b}[31mred\u{0}nul\u{7f}del\u{85}c1\u{202e}bidi\ttab & <x>".into();
    let xml = report::junit(&run);
    let bad = |c: char| (c.is_control() && c != '\n') || ('\u{202a}'..='\u{202e}').contains(&c);
    if let Some(c) = xml.chars().find(|c| bad(*c)) {
        panic!("junit.xml holds U+{:04X}:\n{xml}", c as u32);
    }
    let back = quick_junit::Report::deserialize_from_str(&xml).expect("junit.xml is well-formed");
    let cases = &back.test_suites[0].test_cases;
    assert_eq!(
        cases.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
        ["capital", "json", "stream", "story", "capital-again"]
    );
    let shown = "json: \u{fffd}[31mred\u{fffd}nul\u{fffd}del\u{fffd}c1\u{fffd}bidi tab & <x>";
    match &cases[1].status {
        TestCaseStatus::NonSuccess { kind: NonSuccessKind::Failure, message, description, .. } => {
            assert_eq!(message.as_deref(), Some(shown));
            assert_eq!(description.as_deref(), Some(shown));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn run_record_round_trips_through_json() {
    let (run, _) = record();
    let text = serde_json::to_string(&run).unwrap();
    let back = parse_run_record(&text).unwrap();
    assert_eq!(serde_json::to_value(&back).unwrap(), serde_json::to_value(&run).unwrap());
}

/// Every answered case of `run` decodes its 40 tokens at `tps` on the client's clock, and so does its median.
fn client_speed(run: &mut RunRecord, tps: f64) {
    run.decode.median_tokens_per_second = Some(tps);
    for c in run.cases.iter_mut().filter(|c| c.answer.is_some()) {
        c.seconds = Some(40.0 / tps);
    }
}

/// Every answered case of `run` says (in its server timings) that it decoded at `tps`, and so does the median.
fn server_speed(run: &mut RunRecord, tps: f64) {
    run.decode.server_median_tokens_per_second = Some(tps);
    for a in run.cases.iter_mut().filter_map(|c| c.answer.as_mut()) {
        a.timings = Some(ServerTimings { predicted_per_second: Some(tps), ..ServerTimings::default() });
    }
}

/// Decode speed against the baseline: a warning however slow (one run is one session, never a failure), compared on
/// the server's own timings when both records carry them, its band widened by the spread of the promoted history.
#[test]
fn slow_decode_warns_never_fails_prefers_server_timings_and_widens_by_the_history() {
    let (mut run, mut base) = record();
    run.findings.clear();
    let slow = |run: &RunRecord, base: &RunRecord, spread: Option<f64>| -> Vec<gauntlet_schema::Finding> {
        let t = &run.thresholds;
        let all = gauntlet_engine::verdict::assess_with(run, Some(base), t, spread);
        all.into_iter().filter(|f| f.kind == "slow-decode").collect()
    };
    client_speed(&mut base, 100.0);
    // A tenth of the baseline's speed: a warning, and the run's verdict from it is warn, not fail.
    client_speed(&mut run, 10.0);
    let found = slow(&run, &base, None);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].severity, gauntlet_schema::Severity::Warn);
    assert_eq!(gauntlet_engine::verdict::fold(&found), Verdict::Warn);
    // 80 % of the baseline warns below 85 %; with a ±5 % spread over the promoted history the band is 75 %.
    client_speed(&mut run, 80.0);
    assert!(slow(&run, &base, None)[0].message.contains("(the client's clock; warn below 85 %)"));
    assert!(slow(&run, &base, Some(0.05)).is_empty(), "inside the widened band");
    client_speed(&mut run, 70.0);
    let widened = slow(&run, &base, Some(0.05));
    assert!(widened[0].message.contains("warn below 75 %: 85 % widened by twice the ±5.0 % spread"), "{widened:?}");
    // The server's own timings say nothing changed: they are what counts when both records have them.
    server_speed(&mut run, 150.0);
    assert_eq!(slow(&run, &base, None).len(), 1, "the baseline has no server timings: the client's clock");
    server_speed(&mut base, 152.0);
    assert!(slow(&run, &base, None).is_empty());
    server_speed(&mut run, 100.0);
    assert!(slow(&run, &base, None)[0].message.contains("the server's timings"));
    // The spread of a promoted history: three runs at least.
    assert_eq!(gauntlet_engine::compare::decode_spread(&[100.0, 90.0]), None);
    let s = gauntlet_engine::compare::decode_spread(&[100.0, 90.0, 110.0]).unwrap();
    assert!((s - 0.1).abs() < 1e-9, "{s}");
}

/// Decode is judged case against case: a uniform 30 % slowdown warns; the same median slowdown from cases that
/// disagree (a neighbour's build slowing some cases, not others) is a note; one case slowed alone is nothing.
#[test]
fn decode_is_judged_case_against_case_with_the_runs_own_spread() {
    let (mut run, mut base) = record();
    run.findings.clear();
    let ids = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
    base.cases = ids.iter().map(|id| case(id, CaseStatus::Pass, Some("x"))).collect();
    run.cases = base.cases.clone();
    let speeds = |run: &mut RunRecord, tps: &[f64]| {
        for (c, tps) in run.cases.iter_mut().zip(tps) {
            c.seconds = Some(40.0 / tps);
            c.answer.as_mut().unwrap().timings =
                Some(ServerTimings { predicted_per_second: Some(*tps), ..ServerTimings::default() });
        }
    };
    let base_tps = [100.0, 120.0, 90.0, 110.0, 105.0, 95.0, 100.0, 130.0, 80.0, 100.0];
    speeds(&mut base, &base_tps);
    let speed_findings = |run: &RunRecord, base: &RunRecord| -> Vec<(String, Severity)> {
        gauntlet_engine::compare::compare(run, base, &run.thresholds)
            .into_iter()
            .filter(|f| f.kind == "slow-decode" || f.kind == "speed-unsettled")
            .map(|f| (f.kind.to_string(), f.severity))
            .collect()
    };
    // Every case 30 % slower (within ±3 %): the whole interval is below 85 %.
    let slow: Vec<f64> = base_tps.iter().enumerate().map(|(i, v)| v * (0.7 + 0.006 * i as f64 - 0.03)).collect();
    speeds(&mut run, &slow);
    assert_eq!(speed_findings(&run, &base), [("slow-decode".to_string(), Severity::Warn)]);
    let msg = gauntlet_engine::compare::compare(&run, &base, &run.thresholds)
        .into_iter()
        .find(|f| f.kind == "slow-decode")
        .unwrap()
        .message;
    assert!(msg.contains("the median of 10 cases each against itself (the server's timings"), "{msg}");
    // Six cases at half speed and four unchanged: the median is 50 % but the cases disagree.
    let mixed: Vec<f64> = base_tps.iter().enumerate().map(|(i, v)| if i % 5 < 3 { v * 0.5 } else { *v }).collect();
    speeds(&mut run, &mixed);
    assert_eq!(speed_findings(&run, &base), [("speed-unsettled".to_string(), Severity::Info)]);
    assert_eq!(
        gauntlet_engine::verdict::fold(
            &gauntlet_engine::compare::compare(&run, &base, &run.thresholds)
                .into_iter()
                .filter(|f| f.kind == "speed-unsettled")
                .collect::<Vec<_>>()
        ),
        Verdict::Pass
    );
    // One case at a fifth of its speed, the rest unchanged: nothing to say.
    let mut one = base_tps.to_vec();
    one[0] *= 0.2;
    speeds(&mut run, &one);
    assert!(speed_findings(&run, &base).is_empty());
    // Unchanged: nothing.
    speeds(&mut run, &base_tps);
    assert!(speed_findings(&run, &base).is_empty());
}

/// Each case of `run` decoded at `tps` (server timings and client clock alike) while its server's threads spent
/// `cpu` seconds on a CPU, `wait` runnable and waiting (`throttled` of it throttled by a quota), `threads` of them
/// busy.
fn accounted(run: &mut RunRecord, tps: &[f64], cpu: f64, wait: f64, throttled: f64, threads: u32) {
    let mut cases = Vec::new();
    for (c, tps) in run.cases.iter_mut().zip(tps) {
        c.seconds = Some(40.0 / tps);
        c.answer.as_mut().unwrap().timings =
            Some(ServerTimings { predicted_per_second: Some(*tps), ..ServerTimings::default() });
        cases.push(gauntlet_engine::compare::speed::case_cpu(&c.id, (cpu, wait, throttled, cpu + wait), threads, None));
    }
    run.decode.speed_check = Some(gauntlet_engine::compare::speed::speed_check(cases, None, None));
}

/// Decode put on the server's CPU clock: a run that is 50 % slower on both wall clocks because its threads waited
/// for other processes' CPU as long as they ran is not slower (the correction takes the wait out); the same
/// slowdown under a CPU quota is (throttled time is the server's own); a run whose threads mostly waited is not
/// judged at all, named with its contention; so is one whose several decode threads waited more than 10 %; and a
/// baseline without the account (version 10) is compared uncorrected, as before, saying so.
#[test]
fn decode_is_corrected_onto_the_servers_cpu_clock_and_not_judged_under_heavy_contention() {
    let (mut run, mut base) = record();
    run.findings.clear();
    let ids = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
    base.cases = ids.iter().map(|id| case(id, CaseStatus::Pass, Some("x"))).collect();
    run.cases = base.cases.clone();
    let base_tps = [100.0, 120.0, 90.0, 110.0, 105.0, 95.0, 100.0, 130.0, 80.0, 100.0];
    let scaled = |k: f64| base_tps.iter().map(|v| v * k).collect::<Vec<f64>>();
    let speed = |run: &RunRecord, base: &RunRecord| -> Vec<(String, Severity, String)> {
        gauntlet_engine::compare::compare(run, base, &run.thresholds)
            .into_iter()
            .filter(|f| ["slow-decode", "speed-unsettled", "speed-not-judged"].contains(&f.kind.to_string().as_str()))
            .map(|f| (f.kind.to_string(), f.severity, f.message))
            .collect()
    };
    let kinds = |v: Vec<(String, Severity, String)>| v.into_iter().map(|(k, s, _)| (k, s)).collect::<Vec<_>>();
    // The baseline: one busy thread, a 9 % wait.
    accounted(&mut base, &base_tps, 0.3, 0.03, 0.0, 1);
    // Half the speed on both clocks, the threads waiting as long as they ran (contention 50 %): corrected, 95 %.
    accounted(&mut run, &scaled(0.5), 0.3, 0.33, 0.0, 1);
    assert!(speed(&run, &base).is_empty(), "{:?}", speed(&run, &base));
    let j = gauntlet_engine::compare::speed::judgement(&run, &base).unwrap();
    assert!(j.judged && j.corrected, "{j:?}");
    assert!((j.median_ratio.unwrap() - 0.5 * (0.63 / 0.3) / (0.33 / 0.3)).abs() < 1e-9, "{j:?}");
    // Without the correction the same run warns: what the correction is for.
    let mut bare = run.clone();
    bare.decode.speed_check = None;
    let mut bare_base = base.clone();
    bare_base.decode.speed_check = None;
    assert_eq!(kinds(speed(&bare, &bare_base)), [("slow-decode".to_string(), Severity::Warn)]);
    // 70 % of the speed under a quota: the threads' wait is all throttled time, nothing to take out; it warns.
    accounted(&mut run, &scaled(0.7), 0.3, 0.129, 0.129, 1);
    let found = speed(&run, &base);
    assert_eq!(kinds(found.clone()), [("slow-decode".to_string(), Severity::Warn)]);
    assert!(found[0].2.contains("corrected onto the server's CPU clock"), "{found:?}");
    // 90 % of the threads' time waiting for others: not judged, however slow, and the contention is named.
    accounted(&mut run, &scaled(0.1), 0.03, 0.27, 0.0, 1);
    let found = speed(&run, &base);
    assert_eq!(kinds(found.clone()), [("speed-not-judged".to_string(), Severity::Info)]);
    assert!(found[0].2.contains("90 %") && found[0].2.contains("limit 85 %"), "{found:?}");
    assert!(found[0].2.contains("other processes held; too little"), "{found:?}");
    let j = gauntlet_engine::compare::speed::judgement(&run, &base).unwrap();
    assert!(!j.judged && j.contention == Some(0.9), "{j:?}");
    // Two threads share the decode: 20 % contention is past their 10 %; 5 % is not.
    accounted(&mut run, &scaled(0.5), 0.4, 0.1, 0.0, 2);
    let found = speed(&run, &base);
    assert_eq!(kinds(found.clone()), [("speed-not-judged".to_string(), Severity::Info)]);
    assert!(found[0].2.contains("2 threads share the decode and meet every token, so one"), "{found:?}");
    assert!(!found[0].2.contains("  "), "one space between words: {found:?}");
    accounted(&mut run, &scaled(0.5), 0.4, 0.021, 0.0, 2);
    assert_eq!(kinds(speed(&run, &base)), [("slow-decode".to_string(), Severity::Warn)]);
    // A version-10 baseline has no account: uncorrected, as before, and said.
    base.schema_version = 10;
    base.decode.speed_check = None;
    accounted(&mut run, &scaled(0.5), 0.3, 0.33, 0.0, 1);
    let found = speed(&run, &base);
    assert_eq!(kinds(found.clone()), [("slow-decode".to_string(), Severity::Warn)]);
    assert!(found[0].2.contains("uncorrected: the baseline (run.json version 10) has no CPU account"), "{found:?}");
}

/// Decode speeds of the eight cases of [`eight_cases`] on a baseline.
const EIGHT_RATES: [f64; 8] = [100.0, 120.0, 90.0, 110.0, 105.0, 95.0, 100.0, 130.0];

/// A run and its baseline with eight passing cases and no findings.
fn eight_cases() -> (RunRecord, RunRecord) {
    let (mut run, mut base) = record();
    run.findings.clear();
    let ids = ["a", "b", "c", "d", "e", "f", "g", "h"];
    base.cases = ids.iter().map(|id| case(id, CaseStatus::Pass, Some("x"))).collect();
    run.cases = base.cases.clone();
    (run, base)
}

/// The speed findings of a comparison: kind and message.
fn speed_notes(run: &RunRecord, base: &RunRecord) -> Vec<(String, String)> {
    gauntlet_engine::compare::compare(run, base, &run.thresholds)
        .into_iter()
        .filter(|f| ["slow-decode", "speed-unsettled", "speed-not-judged"].contains(&f.kind.to_string().as_str()))
        .map(|f| (f.kind.to_string(), f.message))
        .collect()
}

/// A decode on the CPU is not judged when other processes used more than a quarter of the CPU time the server
/// left, on either side: their memory traffic changes each CPU second of the server (measured 0–35 % on a 2-core
/// VM), so a 30 % slower run beside a build is named, not warned about, and the same run on a quiet machine warns.
/// A server that slept through its requests (a GPU's decode) is judged whatever its neighbours did, and a version-11
/// baseline without the measure is judged on the run's side alone.
#[test]
fn a_cpu_decode_beside_busy_neighbours_is_not_judged() {
    let (mut run, mut base) = eight_cases();
    let base_tps = EIGHT_RATES;
    let slower = base_tps.map(|v| v * 0.7);
    let speed = speed_notes;
    let neighbours = |run: &mut RunRecord, share: Option<f64>| {
        let check = run.decode.speed_check.as_mut().unwrap();
        for c in &mut check.cases {
            c.neighbours = share;
        }
        *check = gauntlet_engine::compare::speed::speed_check(std::mem::take(&mut check.cases), None, None);
    };
    // One thread computing the whole request (cpu + wait = wall): a decode on the CPU.
    accounted(&mut base, &base_tps, 0.38, 0.02, 0.0, 1);
    neighbours(&mut base, Some(0.01));
    accounted(&mut run, &slower, 0.38, 0.02, 0.0, 1);
    neighbours(&mut run, Some(0.95));
    let found = speed(&run, &base);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].0, "speed-not-judged", "{found:?}");
    assert!(found[0].1.contains("other processes used 95 % of the CPU time the server left during this run's"));
    assert!(found[0].1.contains("(judged up to 25 %)"), "{found:?}");
    let j = gauntlet_engine::compare::speed::judgement(&run, &base).unwrap();
    assert!(!j.judged && j.neighbours == Some(0.95), "{j:?}");
    // The same slowdown on a quiet machine warns.
    neighbours(&mut run, Some(0.02));
    assert_eq!(speed(&run, &base).iter().map(|f| f.0.as_str()).collect::<Vec<_>>(), ["slow-decode"]);
    // A busy baseline is named as such.
    neighbours(&mut base, Some(0.6));
    let found = speed(&run, &base);
    assert!(found[0].1.contains("during the baseline's cases"), "{found:?}");
    // A server that slept through 0.4 s requests (a few ms of CPU each): its speed is not its CPU's; judged.
    let slept = |run: &mut RunRecord, tps: &[f64], wait: f64| {
        accounted(run, tps, 0.004, wait, 0.0, 1);
        let check = run.decode.speed_check.as_mut().unwrap();
        let cases = check
            .cases
            .iter()
            .map(|c| gauntlet_engine::compare::speed::case_cpu(&c.case, (0.004, wait, 0.0, 0.4), 1, Some(0.9)))
            .collect();
        *check = gauntlet_engine::compare::speed::speed_check(cases, None, None);
    };
    slept(&mut base, &base_tps, 0.001);
    slept(&mut run, &slower, 0.001);
    assert_eq!(speed(&run, &base).iter().map(|f| f.0.as_str()).collect::<Vec<_>>(), ["slow-decode"]);
    // The same server on a machine so busy that its wake-ups waited 0.25 s of each 0.4 s request: still a sleeper,
    // judged (the wait is corrected as before), not stopped by its neighbours.
    slept(&mut run, &slower, 0.25);
    assert!(gauntlet_engine::compare::speed::judgement(&run, &base).unwrap().judged);
    assert!(speed(&run, &base).iter().all(|f| !f.1.contains("other processes used")), "{:?}", speed(&run, &base));
    // A version-11 baseline (no measure) against a quiet run: judged; against a crowded run: not.
    accounted(&mut base, &base_tps, 0.38, 0.02, 0.0, 1);
    accounted(&mut run, &slower, 0.38, 0.02, 0.0, 1);
    neighbours(&mut run, Some(0.0));
    assert_eq!(speed(&run, &base).iter().map(|f| f.0.as_str()).collect::<Vec<_>>(), ["slow-decode"]);
    neighbours(&mut run, Some(0.5));
    assert_eq!(speed(&run, &base).iter().map(|f| f.0.as_str()).collect::<Vec<_>>(), ["speed-not-judged"]);
}

/// A decode on the CPU is not judged when the machine itself moved further than unchanged runs on a quiet VM ever
/// did: its cache pass 30 % slower on one side, or its dependent chain 10 %, with nothing in the VM to show it (the
/// host's other guests). The slower side is named; a machine that moved less is judged on the plain ratios (the pass
/// does not correct them); records without the measure (version 13) and a server that slept through its requests
/// (a GPU's decode) are judged as before.
#[test]
fn a_cpu_decode_on_a_machine_that_moved_past_the_measured_range_is_not_judged() {
    let (mut run, mut base) = eight_cases();
    let base_tps = EIGHT_RATES;
    let speed = speed_notes;
    let kinds = |f: Vec<(String, String)>| f.into_iter().map(|f| f.0).collect::<Vec<_>>();
    let machine = |run: &mut RunRecord, memory: f64, steps: f64| {
        run.decode.speed_check.as_mut().unwrap().machine = Some(gauntlet_schema::MachineSpeed {
            memory_bytes_per_second: memory,
            steps_per_second: steps,
            readings: 27,
        });
    };
    let judged = |run: &RunRecord, base: &RunRecord| gauntlet_engine::compare::speed::judgement(run, base).unwrap();
    // One quiet thread computing each request, a quarter slower, on a machine that moved within the range: warns on
    // the plain ratios, and the shift is recorded.
    accounted(&mut base, &base_tps, 0.38, 0.02, 0.0, 1);
    accounted(&mut run, &base_tps.map(|v| v * 0.75), 0.38, 0.02, 0.0, 1);
    machine(&mut base, 10e9, 500e6);
    machine(&mut run, 8e9, 510e6);
    assert_eq!(kinds(speed(&run, &base)), ["slow-decode"]);
    let j = judged(&run, &base);
    assert!(j.judged && (j.machine_shift.unwrap() - 0.2).abs() < 1e-9, "{j:?}");
    assert!((j.median_ratio.unwrap() - 0.75).abs() < 1e-9, "not corrected by the machine: {j:?}");
    // The run's cache pass at half the baseline's: not judged, the slower side named.
    machine(&mut run, 5e9, 500e6);
    let found = speed(&run, &base);
    assert_eq!(kinds(found.clone()), ["speed-not-judged"]);
    assert!(
        found[0].1.contains(
            "slower during this run's cases: a pass over a buffer the size of its last-level cache took 100 % longer"
        ),
        "{found:?}"
    );
    assert!(found[0].1.contains("(judged up to 43 %, the widest unchanged runs spread on a quiet VM)"), "{found:?}");
    let j = judged(&run, &base);
    assert!(!j.judged && j.machine_shift == Some(0.5) && j.median_ratio.is_none(), "{j:?}");
    // The baseline's chain 27 % slower: the core's own speed; not judged either.
    machine(&mut run, 10e9, 500e6);
    machine(&mut base, 10e9, 365e6);
    let found = speed(&run, &base);
    assert!(
        found.len() == 1
            && found[0].1.contains(
                "slower during the baseline's cases: a chain of dependent floating-point steps took 37 % longer"
            ),
        "{found:?}"
    );
    // A baseline without the measure (version 13): judged as before.
    base.decode.speed_check.as_mut().unwrap().machine = None;
    assert_eq!(kinds(speed(&run, &base)), ["slow-decode"]);
    assert!(judged(&run, &base).machine_shift.is_none());
    // A server that slept through its requests (a GPU's decode): the CPU's speed is not its own; judged.
    machine(&mut base, 10e9, 500e6);
    machine(&mut run, 5e9, 500e6);
    for r in [&mut run, &mut base] {
        let check = r.decode.speed_check.as_mut().unwrap();
        for c in &mut check.cases {
            *c = gauntlet_engine::compare::speed::case_cpu(&c.case, (0.004, 0.001, 0.0, 0.4), 1, Some(0.0));
        }
    }
    assert_eq!(kinds(speed(&run, &base)), ["slow-decode"]);
}

/// The report states the speed check: the run's contention and, against a baseline, whether decode was judged.
#[test]
fn the_report_states_the_speed_check() {
    let (mut run, mut base) = record();
    let ids = ["a", "b", "c", "d", "e"];
    base.cases = ids.iter().map(|id| case(id, CaseStatus::Pass, Some("x"))).collect();
    run.cases = base.cases.clone();
    let tps = [100.0, 110.0, 90.0, 105.0, 95.0];
    accounted(&mut base, &tps, 0.3, 0.03, 0.0, 1);
    accounted(&mut run, &tps.map(|v| v * 0.5), 0.3, 0.33, 0.0, 1);
    let md = |run: &RunRecord| report::markdown(run, None);
    assert!(md(&run).contains("| speed check | contention 52 % (1 decode thread, 0.00 s throttled) |"), "{}", md(&run));
    // With the neighbours measured (version 12), their share is stated.
    let mut measured = run.clone();
    measured.decode.speed_check.as_mut().unwrap().neighbours = Some(0.03);
    assert!(md(&measured).contains("throttled); other processes used 3 % of the CPU time the server left |"));
    // With the machine measured (version 14), its speed is stated, and how far it was from the baseline's.
    let speed = |memory: f64| gauntlet_schema::MachineSpeed {
        memory_bytes_per_second: memory,
        steps_per_second: 5e8,
        readings: 27,
    };
    measured.decode.speed_check.as_mut().unwrap().machine = Some(speed(6.0e9));
    let mut measured_base = base.clone();
    measured_base.decode.speed_check.as_mut().unwrap().machine = Some(speed(1.2e10));
    assert!(md(&measured).contains(
        "the CPU time the server left; the machine: 6.0 GB/s through a cache-sized buffer, 500 M dependent steps/s \
         (27 readings) |"
    ));
    measured.decode.speed_check.as_mut().unwrap().judgement =
        gauntlet_engine::compare::speed::judgement(&measured, &measured_base);
    let text = md(&measured);
    assert!(text.contains("(27 readings), 50 % apart from the baseline's; not judged: the machine itself"), "{text}");
    run.decode.speed_check.as_mut().unwrap().judgement = gauntlet_engine::compare::speed::judgement(&run, &base);
    let text = md(&run);
    assert!(text.contains("; judged: 5 cases compared on the server's timings, each corrected"), "{text}");
    assert!(text.contains("; median 95 % of the baseline's (uncorrected 50 %)"), "{text}");
    let html = report::html(&run, None, &[]);
    assert!(html.contains("Speed check") && html.contains("contention 52 %"), "no speed check in the HTML");
    // Not judged: said, with the contention.
    accounted(&mut run, &tps.map(|v| v * 0.1), 0.03, 0.27, 0.0, 1);
    run.decode.speed_check.as_mut().unwrap().judgement = gauntlet_engine::compare::speed::judgement(&run, &base);
    assert!(md(&run).contains("; not judged: the server's threads spent 90 % of their time in this run's cases"));
    // No account (attached, older records): no line.
    run.decode.speed_check = None;
    assert!(!md(&run).contains("speed check"));
}

/// A slower load warns only when it is both over the ratio and longer by more than the noise floor: 20 ms → 110 ms
/// (7×, measured on a busy runner) is scheduling noise; 0.84 s → 1.5 s is not.
#[test]
fn slow_load_needs_ratio_and_absolute_increase() {
    let (mut run, mut base) = record();
    let slow_load = |run: &RunRecord, base: &RunRecord| {
        gauntlet_engine::compare::compare(run, base, &run.thresholds).iter().any(|f| f.kind == "slow-load")
    };
    base.server.load_seconds = Some(0.02);
    run.server.load_seconds = Some(0.11);
    assert!(!slow_load(&run, &base), "7× of 20 ms is noise");
    run.server.load_seconds = Some(0.02 + gauntlet_engine::compare::LOAD_NOISE_FLOOR_SECONDS + 0.01);
    assert!(slow_load(&run, &base));
    base.server.load_seconds = Some(0.84);
    run.server.load_seconds = Some(1.5);
    assert!(slow_load(&run, &base));
    run.server.load_seconds = Some(1.2);
    assert!(!slow_load(&run, &base), "1.43× is under the 1.5× ratio");
}

/// Writes `record` (as profile `profile`, with `verdict` and only the findings that verdict allows) into
/// `root/<profile>/run.json`, the way CI artifacts land side by side.
fn shard(root: &std::path::Path, profile: &str, verdict: Verdict) {
    let (mut run, _) = record();
    run.profile = profile.into();
    run.verdict = verdict;
    let allowed = match verdict {
        Verdict::Fail => Severity::Fail,
        Verdict::Warn => Severity::Warn,
        _ => Severity::Info,
    };
    run.findings.retain(|f| f.severity <= allowed);
    let dir = root.join(format!("gauntlet-{profile}")).join("out");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("run.json"), serde_json::to_string(&run).unwrap()).unwrap();
}

fn merged(root: &std::path::Path, expected: &[&str]) -> report::merge::Merged {
    let expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
    report::merge::merge(report::merge::collect(&[root.to_path_buf()]).unwrap(), &expected)
}

#[test]
fn merge_folds_shards_into_the_worst_verdict() {
    let dir = tempfile::tempdir().unwrap();
    shard(dir.path(), "qwen", Verdict::Pass);
    shard(dir.path(), "ds4", Verdict::Warn);
    let m = merged(dir.path(), &["ds4", "qwen"]);
    assert_eq!(m.verdict, Verdict::Warn);
    assert!(m.problems.is_empty(), "{:?}", m.problems);
    let md = m.markdown(Some("gauntlet-{profile}"));
    assert!(md.starts_with("## gauntlet: WARN — 2 profile(s): 1 warn, 1 pass"), "{md}");
    // Worst first: the warn row comes before the pass row, and the worst finding is named above the table.
    assert!(md.find("| ds4 | warn |").unwrap() < md.find("| qwen | pass |").unwrap(), "{md}");
    assert!(md.contains("- **worst finding** (warn, `ds4`): text-drift"), "{md}");
    assert!(md.contains("artifact `gauntlet-qwen`"), "{md}");
    let junit = m.junit();
    assert_eq!(junit.matches("<testsuite name=\"gauntlet.").count(), 2, "{junit}");
    assert!(!junit.contains("gauntlet.merge"), "{junit}");
}

#[test]
fn merge_fails_on_a_missing_unreadable_or_duplicate_shard() {
    let dir = tempfile::tempdir().unwrap();
    shard(dir.path(), "qwen", Verdict::Pass);
    let m = merged(dir.path(), &["ds4", "qwen"]);
    assert_eq!(m.verdict, Verdict::Fail, "a missing shard is never a pass");
    assert!(m.problems[0].contains("no shard for profile `ds4`"), "{:?}", m.problems);
    assert!(m.markdown(None).contains("| ds4 | fail | missing: no run.json or skipped.json |"));
    assert!(m.junit().contains("<testcase name=\"ds4\" classname=\"gauntlet.merge\">\n            <failure"));

    let bad = dir.path().join("gauntlet-broken");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::write(bad.join("run.json"), "{\"schema_version\": 4, \"profile\": ").unwrap();
    let m = merged(dir.path(), &[]);
    assert_eq!(m.verdict, Verdict::Fail);
    assert!(
        m.problems.iter().any(|p| p.contains("gauntlet-broken/run.json") && p.contains("unreadable")),
        "{:?}",
        m.problems
    );
    std::fs::remove_dir_all(&bad).unwrap();

    let twin = dir.path().join("again");
    shard(&twin, "qwen", Verdict::Pass);
    let m = merged(dir.path(), &["qwen"]);
    assert_eq!(m.verdict, Verdict::Fail);
    assert!(m.problems.iter().any(|p| p.contains("two shards for profile `qwen`")), "{:?}", m.problems);

    let empty = tempfile::tempdir().unwrap();
    let m = merged(empty.path(), &[]);
    assert_eq!(m.verdict, Verdict::Fail);
    assert!(m.problems[0].contains("nothing to merge"));
}

#[test]
fn merge_shows_a_skipped_shard_as_skipped() {
    let dir = tempfile::tempdir().unwrap();
    shard(dir.path(), "qwen", Verdict::Pass);
    let skipped = dir.path().join("gauntlet-ds4");
    std::fs::create_dir_all(&skipped).unwrap();
    let skip = SkipRecord {
        gauntlet_version: "0.1.0".into(),
        profile: "ds4".into(),
        kind: gauntlet_schema::SkipKind::GpuBusy,
        reason: "nvidia:0 is still in use after 240s: pid 7 (python3)".into(),
        at: "2026-12-01T08:00:00.000Z".into(),
    };
    std::fs::write(skipped.join("skipped.json"), serde_json::to_string(&skip).unwrap()).unwrap();
    let m = merged(dir.path(), &["ds4", "qwen"]);
    assert_eq!(m.verdict, Verdict::Skip, "neither a pass nor a failure");
    assert!(m.problems.is_empty());
    let md = m.markdown(None);
    assert!(
        md.contains("| ds4 | skip | skipped (gpu-busy): nvidia:0 is still in use after 240s: pid 7 (python3) |"),
        "{md}"
    );
    assert!(m.junit().contains("<skipped message=\"skipped (gpu-busy)"));
}

/// `report.html` escapes every text a server or a store can put into it: answers, check details, findings, log
/// lines, identity values, promotion notes. The page is a pure function: the same record gives the same bytes.
#[test]
fn html_report_escapes_every_server_text_and_marks_the_divergence() {
    let (mut run, base) = record();
    let evil = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&";
    run.cases[0].observed = Some(format!("Paris {evil}"));
    run.cases[0].answer.as_mut().unwrap().timeline = vec![
        StreamEvent { t: 0.1, content: String::new(), reasoning: String::new() },
        StreamEvent { t: 0.2, content: "Par".into(), reasoning: String::new() },
        StreamEvent { t: 0.3, content: format!("is {evil}"), reasoning: String::new() },
    ];
    run.cases[1].checks[0].detail = evil.into();
    run.findings[0].message = evil.into();
    run.server.log_tail.push(evil.into());
    run.runtime = json!({"server_version": evil});
    let entry = gauntlet_schema::store::HistoryEntry {
        seq: 1,
        prev: None,
        kind: None,
        identity_digest: "abc".into(),
        recipe_digest: "r".into(),
        record: "d".into(),
        profile: "demo".into(),
        verdict: "pass".into(),
        provenance: Default::default(),
        note: evil.into(),
        promoted_at: "2026-11-30T08:00:00.000Z".into(),
        digest: "x".into(),
    };
    let history = vec![report::HistoryPoint::new(&entry, Ok(Some(&base)), None)];
    let html = report::html(&run, Some(&base), &history);
    assert_eq!(html, report::html(&run, Some(&base), &history), "a pure function");
    assert!(!html.contains("<script") && !html.contains("<img") && !html.contains("onerror=alert(2)>"), "{html}");
    assert!(html.matches("&lt;script&gt;alert(1)&lt;/script&gt;").count() >= 6, "every place shows it as text");
    assert!(html.contains(r#"id="verdict">FAIL</span>"#));
    // `Paris` → `Paris <script…`: the first differing character is the space after `Paris`.
    assert!(html.contains("differs at character 5") && html.contains("<ins><mark> </mark>&lt;script"), "{html}");
    // The json case's `{"tool": 3}` → `{"tool": 2}`: marked on both sides.
    assert!(html.contains("<del><mark>3</mark></del>") && html.contains("<ins><mark>2</mark></ins>"), "{html}");
    assert!(html.contains("<title>capital: 3 events</title>"), "the stream is drawn");
    assert!(html.contains("<title>decode speed across promotions</title>"), "the history is drawn");
    assert!(html.contains("runtime.server_version") && html.contains("class=\"differs\""), "identity by field");
    // Without a baseline or history, the page says so instead of drawing empty charts.
    let alone = report::html(&run, None, &[]);
    assert!(alone.contains("no baseline: the identity as this run recorded it"));
    assert!(alone.contains("no promoted baseline of this identity"));
    assert!(!alone.contains("<title>decode speed"));
}

/// Issue 32 D13/D14: server text with ESC/BEL, a line-leading `::add-mask::` and bidi overrides (U+202E, U+2066)
/// reaches report.md, the annotations, the HTML and JUnit reports and qualification.md only cleaned: no control
/// character but line breaks and tabs, no bidi control, and no line a CI runner would read as a workflow command
/// except gauntlet's own annotations.
#[test]
fn server_text_reaches_every_writer_cleaned_of_controls_bidi_and_commands() {
    let hostile = "\u{1b}[31mRED\u{1b}[0m \u{1b}]0;title\u{7} \u{202e}evil\u{2066} \u{85}x";
    let (mut run, _) = record();
    run.server.log_tail = vec![
        hostile.to_owned(),
        "::add-mask::abc".to_owned(),
        "  ::stop-commands::tok".to_owned(),
        "x ##[error]y".to_owned(),
    ];
    run.findings.push(Finding {
        kind: "server-changed".into(),
        severity: Severity::Warn,
        message: format!("header {hostile}"),
        case: Some(format!("c{hostile}")),
    });
    let bad = |c: char| {
        (c.is_control() && !matches!(c, '\n' | '\t'))
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    };
    let md = report::markdown(&run, None);
    let annotations = report::github_annotations(&run);
    let html = report::html(&run, None, &[]);
    let junit = report::junit(&run);
    for (what, text) in [("report.md", &md), ("annotations", &annotations), ("html", &html), ("junit", &junit)] {
        if let Some(c) = text.chars().find(|c| bad(*c)) {
            panic!("{what} holds U+{:04X}:\n{text}", c as u32);
        }
    }
    for line in md.lines() {
        assert!(!line.trim_start().starts_with("::") && !line.contains("##["), "report.md: {line:?}\n{md}");
    }
    assert!(md.contains("\\u001b[31mRED") && md.contains("\\u202eevil"), "shown, escaped:\n{md}");
    for line in annotations.lines() {
        assert!(line.starts_with("::warning title=") || line.starts_with("::error title="), "{line:?}");
    }
}
