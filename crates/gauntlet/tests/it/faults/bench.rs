//! `gauntlet bench` against the fake server: a regression confirmed by a second measurement, the manifest's
//! workload and prompts, open-loop arrivals, and the findings of a hung, broken or refusing server.

use super::*;

/// `bench --confirm`: a regression is measured again before it is called, and stands only when the re-run shows it.
#[test]
fn bench_confirms_a_regression_with_a_second_measurement() {
    let paced = |ms: &str| vec![("__token_delay_ms", ms.to_owned()), ("", answer("word"))];
    let f = Fixture::new("bench-confirm").answers(paced("4"));
    let (code, stdout, _, first) = bench_fixture(&f, "first", &[]);
    assert_eq!(code, Some(0), "{stdout}");
    // Three times slower per token, without changing the command line (the identity).
    let f = f.answers(paced("12"));
    let baseline = first.join("bench.json");
    let (code, stdout, record, out) =
        bench_fixture(&f, "slow", &["--baseline", baseline.to_str().unwrap(), "--confirm"]);
    assert_eq!(code, Some(1), "{stdout}");
    assert_eq!(record["verdict"], "regression", "{stdout}");
    assert_eq!(record["confirmation"]["verdict"], "regression", "{stdout}");
    assert_eq!(record["confirmation"]["stands"], "regression");
    assert!(out.join("confirm/bench.json").is_file());
    assert!(stdout.contains("confirm: the re-run shows the regression too"), "{stdout}");
    // Without a regression there is nothing to confirm and no re-run: the server three times faster than the slow
    // baseline (an unchanged re-run is no such case: on a busy runner it can land a few percent either side of it).
    // Its per-token time is called an improvement; the whole verdict may still be inconclusive where a stall of the
    // loaded runner between requests spreads the four wall-clock throughput samples (CI saw +131 %, interval
    // −17 … +267 %): either way no regression, so no re-run.
    let slow = out.join("bench.json");
    let f = f.answers(paced("4"));
    let (code, stdout, record, out) = bench_fixture(&f, "faster", &["--baseline", slow.to_str().unwrap(), "--confirm"]);
    let tpot = record["levels"][0]["comparisons"].as_array().unwrap().iter().find(|c| c["metric"] == "tpot_mean");
    assert_eq!(tpot.unwrap()["call"], "improvement", "{stdout}");
    let verdict = record["verdict"].as_str().unwrap();
    assert!(matches!((verdict, code), ("improvement", Some(0)) | ("inconclusive", Some(4))), "{stdout}");
    assert!(record.get("confirmation").is_none() && !out.join("confirm").exists(), "{stdout}");
    assert!(!stdout.contains("confirm:"), "{stdout}");
}

/// A stored baseline is another session. Issue #30 item 3: each bench measures its own between-session spread
/// (its batches in sub-sessions), so a 20 % slower decode is called against one stored baseline by the two sides'
/// measured spreads. A baseline written before bench version 10 carries none: the same change is then not called
/// (the default 20 % spread covers it), the comparison says why and how many sessions it would need; with a
/// history of old sessions that agree closely, their spread is measured instead and the change is called.
#[test]
fn bench_calls_a_change_against_a_stored_baseline_only_beyond_the_spread_between_sessions() {
    let paced = |ms: &str| vec![("__token_delay_ms", ms.to_owned()), ("", answer("word"))];
    let f = Fixture::new("bench-sessions").answers(paced("40"));
    let sessions: Vec<PathBuf> = ["b1", "b2", "b3"]
        .iter()
        .map(|name| {
            let (code, stdout, record, out) = bench_fixture(&f, name, &[]);
            assert_eq!((code, record["verdict"].as_str()), (Some(0), Some("candidate")), "{stdout}");
            // Four measured batches: sub-sessions of 2, 1 and 1 batches, each with its means.
            let sub = &record["levels"][0]["sub_sessions"];
            assert_eq!(sub["batches"], serde_json::json!([2, 1, 1]), "{record}");
            assert_eq!(sub["means"]["tpot_mean"].as_array().map(Vec::len), Some(3), "{record}");
            assert!(stdout.contains("own between-session spread over 3 sub-sessions (2, 1, 1 batches)"), "{stdout}");
            out.join("bench.json")
        })
        .collect();
    // The same records as a bench before version 10 wrote them: no sub-sessions.
    let old: Vec<PathBuf> = sessions
        .iter()
        .enumerate()
        .map(|(i, path)| {
            let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
            v["bench_version"] = 9.into();
            for l in v["levels"].as_array_mut().unwrap() {
                l.as_object_mut().unwrap().remove("sub_sessions");
            }
            let to = f.path().join(format!("old{i}.json"));
            std::fs::write(&to, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
            to
        })
        .collect();
    // 40 ms → 48 ms per token (a 20 % slower decode: inside the default spread, and clear in the samples even on a
    // busy 2-core runner), the same command line (the identity).
    let f = f.answers(paced("48"));
    let tpot = |record: &serde_json::Value| -> serde_json::Value {
        let comparisons = record["levels"][0]["comparisons"].as_array().unwrap();
        comparisons.iter().find(|c| c["metric"] == "tpot_mean").unwrap().clone()
    };
    let (code, stdout, record, _) = bench_fixture(&f, "slower", &["--baseline", sessions[0].to_str().unwrap()]);
    let c = tpot(&record);
    assert_eq!(c["between_session"]["source"], "measured", "{c}");
    assert_eq!(c["between_session"]["sessions"], 6, "{c}");
    assert_eq!(c["between_session"]["baseline_side"]["sub_sessions"], 3, "{c}");
    assert_eq!(c["between_session"]["candidate_side"]["sub_sessions"], 3, "{c}");
    assert_eq!(c["call"], "regression", "{stdout}");
    let measured_mde = c["mde"].as_f64().unwrap();
    assert_eq!(record["bench_version"], gauntlet_schema::bench::BENCH_VERSION);
    assert_eq!((code, record["verdict"].as_str()), (Some(1), Some("regression")), "{stdout}");
    assert!(stdout.contains("measured over 3 + 3 sub-sessions"), "{stdout}");
    // Against the old baseline: the default, said so.
    let (code, stdout, record, out) = bench_fixture(&f, "slower-than-old", &["--baseline", old[0].to_str().unwrap()]);
    let c = tpot(&record);
    assert!(c["within_interval"][0].as_f64().unwrap() > 0.015, "the samples alone show it: {c}");
    assert_eq!(c["call"], "inconclusive", "{stdout}");
    assert_eq!(c["between_session"]["source"], "default", "{c}");
    assert_eq!(
        c["between_session"]["note"], "baseline from bench_version 9 carries no measured spread: assumed 20 %",
        "{c}"
    );
    let mde = c["mde"].as_f64().unwrap();
    assert!(mde > 0.10 && mde > measured_mde, "{c}");
    assert_eq!((code, record["verdict"].as_str()), (Some(4), Some("inconclusive")), "{stdout}");
    assert!(stdout.contains("between-session spread ±20.0 %, default"), "{stdout}");
    assert!(stdout.contains("baseline from bench_version 9 carries no measured spread: assumed 20 %"), "{stdout}");
    assert!(stdout.contains("to detect 5 % it would need about "), "{stdout}");
    let md = std::fs::read_to_string(out.join("bench.md")).unwrap();
    assert!(md.contains(&format!("MDE {:.1} %", mde * 100.0)), "{md}");
    let html = std::fs::read_to_string(out.join("bench.html")).unwrap();
    assert!(html.contains("<th>MDE</th>") && !html.contains("states no minimum detectable effect"), "{html}");
    // The old baseline and two more old sessions of the unchanged server: their spread replaces the default.
    let history = ["--history", old[1].to_str().unwrap(), "--history", old[2].to_str().unwrap()];
    let mut args = vec!["--baseline", old[0].to_str().unwrap()];
    args.extend_from_slice(&history);
    let (code, stdout, record, _) = bench_fixture(&f, "slower-with-history", &args);
    let c = tpot(&record);
    assert_eq!(c["between_session"]["source"], "history", "{c}");
    assert_eq!(c["between_session"]["sessions"], 3, "{c}");
    assert_eq!(c["call"], "regression", "{stdout}");
    assert!(c["mde"].as_f64().unwrap() < mde, "a measured small spread sees smaller changes than the default: {c}");
    assert_eq!((code, record["verdict"].as_str()), (Some(1), Some("regression")), "{stdout}");
}

/// #30 item 4 against a stored baseline: when both records' every request carries the server's own timings, the
/// decode metric (`tpot_mean`) is compared on them (each batch's mean of 1 / `predicted_per_second`), and the
/// comparison, the terminal and bench.md say so; the fake's streams stall 0 to 150 ms after their first word
/// outside the server, which the client's clock sees and the server's does not. A run whose server sends no timings,
/// against the same baseline, is compared on the client's clock, with the reason.
#[test]
fn bench_compares_decode_on_the_servers_clock_when_both_records_carry_it() {
    let paced = |timings: &str| {
        vec![
            ("__token_delay_ms", "5".to_owned()),
            ("__steady_pace", "1".to_owned()),
            ("__server_timings", timings.to_owned()),
            ("__client_noise_ms", "150".to_owned()),
            ("", answer("word")),
        ]
    };
    let tpot = |record: &serde_json::Value| -> serde_json::Value {
        let comparisons = record["levels"][0]["comparisons"].as_array().unwrap();
        comparisons.iter().find(|c| c["metric"] == "tpot_mean").unwrap().clone()
    };
    let f = Fixture::new("bench-clock").answers(paced("1"));
    let (code, stdout, base, first) = bench_fixture(&f, "base", &[]);
    let version = u64::from(gauntlet_schema::bench::BENCH_VERSION);
    assert_eq!((code, base["bench_version"].as_u64()), (Some(0), Some(version)), "{stdout}");
    let level = &base["levels"][0];
    assert_eq!(level["server_clock"], "llama.cpp", "{level}");
    // The server's own time per token: the fake's 5 ms pace within its ±1 %, in every batch.
    let server: Vec<f64> =
        level["samples"]["server_tpot_mean"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert!(server.len() == 4 && server.iter().all(|s| (0.00494..0.00506).contains(s)), "{server:?}");
    assert_eq!(level["sub_sessions"]["means"]["server_tpot_mean"].as_array().map(Vec::len), Some(3), "{level}");
    let timed = first.join("bench.json");
    let (_, stdout, record, out) = bench_fixture(&f, "again", &["--baseline", timed.to_str().unwrap()]);
    let c = tpot(&record);
    assert_eq!(c["clock"], "server clock (llama.cpp timings)", "{c}");
    for side in ["baseline_mean", "mean"] {
        assert!((0.00494..0.00506).contains(&c[side].as_f64().unwrap()), "{c}");
    }
    assert_ne!(c["call"], "regression", "{stdout}");
    assert!(stdout.contains("tpot_mean (lower is better; decode: server clock (llama.cpp timings))"), "{stdout}");
    let md = std::fs::read_to_string(out.join("bench.md")).unwrap();
    assert!(md.contains("decode: server clock (llama.cpp timings)"), "{md}");
    // No timings from the server now: the client's clock for both sides, and why.
    let f = f.answers(paced("0"));
    let (_, stdout, record, _) = bench_fixture(&f, "untimed", &["--baseline", timed.to_str().unwrap()]);
    assert!(record["levels"][0].get("server_clock").is_none(), "{stdout}");
    let c = tpot(&record);
    assert_eq!(c["clock"], "client clock (this run's requests do not all carry the server's timings)", "{c}");
    assert!(c["baseline_mean"].as_f64().unwrap() > 0.00506, "the client's clock sees the stalls: {c}");
}

/// `bench --format csv`: bench.csv beside bench.json and the same CSV on stdout, one row per concurrency and
/// measure, a profile name a spreadsheet would run as a formula defused; goodput under `[profiles.P.bench.slo]`; the
/// deprecated `repetitions` (flag and manifest key) still read, with a warning.
#[test]
fn bench_writes_csv_counts_goodput_and_reads_the_deprecated_samples_name() {
    let f = Fixture::new("bench-csv").answers(vec![("__token_delay_ms", "2".into()), ("", answer("word"))]).profile(
        "[profiles.test.bench]\nconcurrency = [1]\nwarmups = 0\nrepetitions = 2\n\
         [profiles.test.bench.slo]\nttft = \"2s\"\ntpot = \"1ms\"",
    );
    let manifest = f.write();
    let out = f.path().join("csv");
    let args = ["bench", "--manifest", manifest.to_str().unwrap(), "--format", "csv", "--out", out.to_str().unwrap()];
    let o = gauntlet(&args, &[], Duration::from_secs(120));
    assert_no_survivors(&f.tag);
    let (stdout, stderr) = (String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert_eq!(o.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stderr.contains("`repetitions` is deprecated: call it `samples`"), "{stderr}");
    let csv = std::fs::read_to_string(out.join("bench.csv")).unwrap();
    assert_eq!(stdout, csv, "stdout carries the CSV only");
    let rows: Vec<&str> = csv.split("\r\n").filter(|r| !r.is_empty()).collect();
    assert!(rows[0].starts_with("profile,concurrency,metric,value,"), "{csv}");
    assert!(rows.iter().any(|r| r.starts_with("test,1,output-throughput-tok-per-s,")), "{csv}");
    // Every request took more than 1 ms per token: none met the TPOT limit, so goodput is 0 of them.
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("bench.json")).unwrap()).unwrap();
    assert_eq!(record["workload"]["repetitions"], 2);
    assert_eq!(record["workload"]["slo"]["tpot"], 0.001);
    assert_eq!(record["levels"][0]["metrics"]["goodput_wall"], 0.0);
    assert!(rows.iter().any(|r| r.starts_with("test,1,goodput-req-per-s,0,")), "{csv}");
    assert!(stderr.contains("goodput 0.00 req/s of"), "{stderr}");
    // The flag's old name: read, with a warning; both names at once are refused.
    let out = f.path().join("old-flag");
    let args =
        ["bench", "--manifest", manifest.to_str().unwrap(), "--repetitions", "3", "--out", out.to_str().unwrap()];
    let o = gauntlet(&args, &[], Duration::from_secs(120));
    assert_no_survivors(&f.tag);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("--repetitions is deprecated: call it --samples"), "{stderr}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("bench.json")).unwrap()).unwrap();
    assert_eq!(record["workload"]["repetitions"], 3);
    let args = ["bench", "--manifest", manifest.to_str().unwrap(), "--repetitions", "3", "--samples", "2"];
    assert_eq!(gauntlet(&args, &[], Duration::from_secs(30)).status.code(), Some(2));
}

/// `[profiles.P.bench]`: the workload and a JSONL corpus of prompts from the manifest, flags overriding them; a
/// record of another workload is never compared with; a bad corpus is bad input, with its line.
#[test]
fn bench_workload_and_prompt_corpus_come_from_the_manifest() {
    let f = Fixture::new("bench-corpus").answers(good_answers()).profile(
        "load_timeout = \"10s\"\nrequest_timeout = \"3s\"\nsuite_budget = \"60s\"\nstop_grace = \"2s\"\n\
         [profiles.test.bench]\nconcurrency = [2]\nmax_tokens = 8\nwarmups = 0\nsamples = 2\nprompts = \"corpus.jsonl\"",
    );
    std::fs::create_dir_all(f.path()).unwrap();
    let corpus = "{\"prompt\": \"Say alpha.\"}\n\n{\"prompt\": \"Say beta.\"}\n";
    std::fs::write(f.path().join("corpus.jsonl"), corpus).unwrap();
    let run = |out: &str, extra: &[&str]| {
        let manifest = f.write();
        let out = f.path().join(out);
        let mut args = vec!["bench", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        let o = gauntlet(&args, &[], Duration::from_secs(120));
        assert_no_survivors(&f.tag);
        let record = std::fs::read_to_string(out.join("bench.json")).ok().map(|t| serde_json::from_str(&t).unwrap());
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
            record,
            out,
        )
    };
    let (code, text, record, out) = run("first", &[]);
    assert_eq!(code, Some(0), "{text}");
    let record: serde_json::Value = record.unwrap();
    let w = &record["workload"];
    assert_eq!(
        (w["concurrency"].clone(), w["max_tokens"].as_u64(), w["repetitions"].as_u64()),
        (serde_json::json!([2]), Some(8), Some(2))
    );
    assert_eq!(w["corpus"]["prompts"], 2);
    assert_eq!(w["corpus"]["sha256"], gauntlet_engine::util::sha256_hex(corpus.as_bytes()));
    let said: String = record["levels"][0]["batches"][0]["requests"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["events"].as_array().unwrap().iter().map(|e| e[1].as_str().unwrap().to_owned()))
        .collect();
    assert!(said.contains("alpha") && said.contains("beta"), "the corpus's prompts were sent: {said}");
    // A flag overrides its part; a baseline of another workload is not compared with.
    let baseline = out.join("bench.json");
    let (code, text, record, _) = run("other", &["--max-tokens", "9", "--baseline", baseline.to_str().unwrap()]);
    assert_eq!(code, Some(4), "{text}");
    assert_eq!(record.unwrap()["workload"]["max_tokens"], 9);
    assert!(text.contains("the baseline ran another workload"), "{text}");
    // A corpus line without a prompt is bad input, named by its line.
    std::fs::write(f.path().join("corpus.jsonl"), "{\"prompt\": \"Say alpha.\"}\n{\"text\": \"x\"}\n").unwrap();
    let (code, text, _, _) = run("bad", &[]);
    assert_eq!(code, Some(2), "{text}");
    assert!(text.contains("line 2: no non-empty string `prompt`"), "{text}");
}

/// `bench --rate`: an open loop, each batch's requests sent on a seeded Poisson schedule instead of all at once.
#[test]
fn bench_open_loop_sends_each_request_on_its_seeded_poisson_arrival() {
    let f = Fixture::new("bench-open-loop").answers(vec![("", answer("word"))]);
    let extra = ["--concurrency", "6", "--rate", "40", "--seed", "9"];
    let manifest = f.write();
    let out = f.path().join("open");
    let mut args = vec!["bench", "--manifest", manifest.to_str().unwrap(), "--warmups", "0", "--samples", "2"];
    args.extend_from_slice(&extra);
    args.extend_from_slice(&["--out", out.to_str().unwrap()]);
    let o = gauntlet(&args, &[], Duration::from_secs(120));
    assert_no_survivors(&f.tag);
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{stdout}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("bench.json")).unwrap()).unwrap();
    assert_eq!((record["workload"]["rate"].as_f64(), record["workload"]["seed"].as_u64()), (Some(40.0), Some(9)));
    assert!(record["problems"].as_array().is_none_or(|p| p.is_empty()), "{}", record["problems"]);
    let workload: gauntlet_engine::run::Workload = serde_json::from_value(record["workload"].clone()).unwrap();
    for (index, batch) in record["levels"][0]["batches"].as_array().unwrap().iter().enumerate() {
        let schedule = workload.arrivals(index, 6);
        assert!(schedule[5] > 0.0);
        for (request, at) in batch["requests"].as_array().unwrap().iter().zip(schedule) {
            // A timer never fires early: each request starts at or after its arrival.
            assert!(request["start"].as_f64().unwrap() >= at - 1e-6, "{request} before {at}");
        }
    }
    let md = std::fs::read_to_string(out.join("bench.md")).unwrap();
    assert!(md.contains("open loop (each batch's requests arrive as a Poisson process at 40 req/s, seed 9)"), "{md}");
}

/// `gauntlet bench` at concurrency 1 on the fixture: exit code, stdout, bench.json and the output folder.
/// `gauntlet bench` (whose streams go through its own kernel-stamped HTTP/1.1 client) turns each broken answer
/// into a failed request with the reason, never a panic or a hang: the batch whose prompt is faulted fails, the
/// others are measured, and the bench fails.
fn bench_fault(name: &str, fault: &str, expect: &str) {
    // Prompt 0 of the built-in workload is the only one about a lighthouse: batch 0 of 4 is faulted.
    // Several words each, so that a fault in the middle of a stream has a middle.
    let f =
        Fixture::new(name).answers(vec![("", answer("word"))]).fault(&["--fault", fault, "--fault-on", "lighthouse"]);
    let (code, stdout, record, _) = bench_fixture(&f, "bench", &[]);
    assert_eq!(code, Some(1), "{fault}: {stdout}");
    let batches = record["levels"][0]["batches"].as_array().unwrap();
    assert_eq!(batches.len(), 4, "{stdout}");
    let error = batches[0]["requests"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains(expect), "{fault}: {error}");
    for b in &batches[1..] {
        assert!(b["requests"][0].get("error").is_none(), "{fault}: {}", b["requests"][0]);
    }
    assert_eq!(record["levels"][0]["metrics"]["failed"], 1);
    let problem = serde_json::json!({"code": "request-failed", "text": "concurrency 1: 1 request(s) failed"});
    assert!(record["problems"].as_array().unwrap().contains(&problem), "{}", record["problems"]);
}

#[test]
fn bench_times_out_a_server_that_hangs() {
    bench_fault("bench-hang-first", "hang-first-byte", "waiting for the first byte");
    bench_fault("bench-hang-mid", "hang-mid-stream", "while reading the answer");
}

#[test]
fn bench_reports_broken_streams() {
    bench_fault("bench-no-done", "no-done", "stream ended without `data: [DONE]`");
    bench_fault("bench-malformed", "malformed", "is not JSON");
    bench_fault("bench-bad-chunking", "bad-chunking", "bad chunk size line `zz`");
    // The bench reads at most 64 KiB + 4 KiB per max token (64 here) of a response.
    bench_fault("bench-oversized", "oversized", "response larger than 327680 bytes");
}

#[test]
fn bench_reports_refusals() {
    bench_fault("bench-http500", "http500", "HTTP 500");
    bench_fault("bench-wrong-ct", "wrong-content-type", "wrong content type `text/plain`");
}

pub(super) fn bench_fixture(
    f: &Fixture,
    out: &str,
    extra: &[&str],
) -> (Option<i32>, String, serde_json::Value, PathBuf) {
    let manifest = f.write();
    let out = f.path().join(out);
    let mut args = vec!["bench", "--manifest", manifest.to_str().unwrap(), "--concurrency", "1"];
    args.extend_from_slice(&["--warmups", "0", "--samples", "4", "--out", out.to_str().unwrap()]);
    args.extend_from_slice(extra);
    let o = gauntlet(&args, &[], Duration::from_secs(120));
    assert_no_survivors(&f.tag);
    let record: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("bench.json")).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), record, out)
}
