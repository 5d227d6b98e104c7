//! Field workloads (#34) against the fake server: a trace replay sends every row at its time and records its
//! lateness; a server that reports no cached tokens is said to, not counted as a miss; and every malformed trace or
//! ShareGPT file is bad input (exit 2) named by its line, before any server starts.

use super::*;

const PROFILE: &str = "load_timeout = \"10s\"\nrequest_timeout = \"3s\"\nsuite_budget = \"60s\"\nstop_grace = \"2s\"\n\
     [profiles.test.bench]\nmax_tokens = 8\nwarmups = 0\nsamples = 2\n";

fn bench(f: &Fixture, out: &str) -> (Option<i32>, String, Option<serde_json::Value>) {
    let manifest = f.write();
    let out = f.path().join(out);
    let args = ["bench", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let o = gauntlet(&args, &[], Duration::from_secs(120));
    assert_no_survivors(&f.tag);
    let record = std::fs::read_to_string(out.join("bench.json")).ok().map(|t| serde_json::from_str(&t).unwrap());
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr), record)
}

#[test]
fn a_trace_replay_sends_every_row_on_schedule_and_records_its_lateness() {
    let workload = "workload = { trace = \"trace.jsonl\", format = \"mooncake\", block_size = 4, speed = 2.0 }";
    let f = Fixture::new("field-trace").answers(good_answers()).profile(&format!("{PROFILE}{workload}"));
    std::fs::create_dir_all(f.path()).unwrap();
    let trace = "{\"timestamp\": 0, \"input_length\": 8, \"output_length\": 3, \"hash_ids\": [1, 2]}\n\
                 {\"timestamp\": 400, \"input_length\": 6, \"output_length\": 3, \"hash_ids\": [1, 5]}\n";
    std::fs::write(f.path().join("trace.jsonl"), trace).unwrap();
    let (code, text, record) = bench(&f, "out");
    assert_eq!(code, Some(0), "{text}");
    let record = record.unwrap();
    assert_eq!(record["workload"]["field"]["rows"], 2, "{:#}", record["workload"]);
    let batches = record["levels"][0]["batches"].as_array().unwrap();
    assert_eq!(batches.len(), 2);
    for b in batches {
        let rs = b["requests"].as_array().unwrap();
        assert_eq!(rs.len(), 2);
        // Row 2 is due 400 ms / speed 2 = 200 ms after the release, and shares its first block with row 1.
        assert!(rs[1]["start"].as_f64().unwrap() >= 0.2, "{b:#}");
        assert_eq!((rs[0]["expected_cached"].as_u64(), rs[1]["expected_cached"].as_u64()), (Some(0), Some(4)));
        assert!(rs.iter().all(|r| r["lateness"].as_f64().is_some_and(|l| l >= 0.0)), "{b:#}");
    }
    let summary = &record["levels"][0]["metrics"]["field"];
    assert_eq!(summary["lateness"]["requests"], 4, "{summary:#}");
    // The fake server reports no cached tokens: said, and no measured rate pretends to be 0 %.
    assert_eq!(summary["cache"]["reported"], 0, "{summary:#}");
    assert!(summary["cache"].get("measured_rate").is_none(), "{summary:#}");
    assert!(summary["notes"].to_string().contains("did not say how many prompt tokens came from"), "{summary:#}");
    assert!(text.contains("field workload (trace replay)"), "{text}");
    // The HTML page shows the same: its field section, the lateness of all four requests, the cache as unreported.
    let html = std::fs::read_to_string(f.path().join("out/bench.html")).unwrap();
    assert!(html.contains("id=\"field\""), "no field section in bench.html");
    // Both rows go out at once, so the level is concurrency 2.
    let lateness = html.split("id=\"lateness-c2\"").nth(1).expect("no lateness line for the level");
    assert!(lateness.contains("sent behind the trace's schedule") && lateness.contains("of 4 over"), "{lateness:.300}");
    // The lateness chart draws the four recorded values (spilled apart from bench.json while the bench ran), one
    // dot each, not "no lateness to draw".
    assert!(!html.contains("no lateness to draw"), "the lateness chart is missing");
    let chart = html.split("aria-label=\"lateness: how far behind").nth(1).expect("no lateness chart");
    let chart = &chart[..chart.find("</svg>").unwrap()];
    assert!(chart.contains(">c2: 4 requests</text>"), "{chart}");
    assert_eq!(chart.matches("<circle ").count(), 4, "{chart}");
}

#[test]
fn a_malformed_trace_or_sharegpt_file_is_bad_input_named_by_its_line() {
    let cases = [
        (
            "workload = { trace = \"t.jsonl\", format = \"mooncake\", block_size = 4 }",
            "{\"timestamp\": 0, \"input_length\": 8, \"output_length\": 1, \"hash_ids\": [1, 2]}\n{\"timestamp\": 0}\n",
            "line 2: no `input_length`",
        ),
        (
            "workload = { trace = \"t.jsonl\", format = \"mooncake\", block_size = 4 }",
            "{\"timestamp\": 0, \"input_length\": 9, \"output_length\": 1, \"hash_ids\": [1, 2]}\n",
            "line 1: 2 hash ids for an input of 9 tokens: blocks of 4 tokens need 3",
        ),
        ("workload = { trace = \"t.jsonl\", format = \"burstgpt\" }", "", "the trace formats read are \"mooncake\""),
        ("workload = { trace = \"../t.jsonl\", format = \"mooncake\" }", "", "leaves the manifest root"),
        (
            "workload = { sharegpt = \"t.jsonl\" }",
            "{\"conversations\": [{\"from\": \"gpt\", \"value\": \"x\"}]}\n",
            "line 1: conversations[0]",
        ),
        ("workload = { conversations = 0, turns = 3 }", "", "workload.conversations"),
    ];
    for (i, (workload, file, want)) in cases.iter().enumerate() {
        let f =
            Fixture::new(&format!("field-bad-{i}")).answers(good_answers()).profile(&format!("{PROFILE}{workload}"));
        std::fs::create_dir_all(f.path()).unwrap();
        std::fs::write(f.path().join("t.jsonl"), file).unwrap();
        let (code, text, record) = bench(&f, "out");
        assert_eq!(code, Some(2), "{workload}: {text}");
        assert!(text.contains(want), "{workload}: want {want:?} in {text}");
        assert!(record.is_none(), "nothing ran");
    }
}

/// bench.html's expected hit rate per turn comes from the requests, which a bench stores apart from bench.json while
/// it runs: read back from there, every later turn has an expected rate (it shares the turn before it), not "—".
#[test]
fn conversations_show_the_expected_hit_rate_of_every_later_turn_in_bench_html() {
    let workload = "workload = { conversations = 2, turns = 3, system_words = 8, user_words = 4, assistant_words = 4 }";
    let f = Fixture::new("field-conv").answers(good_answers()).profile(&format!("{PROFILE}{workload}"));
    let (code, text, record) = bench(&f, "out");
    assert_eq!(code, Some(0), "{text}");
    let record = record.unwrap();
    let html = std::fs::read_to_string(f.path().join("out/bench.html")).unwrap();
    let c = record["levels"][0]["concurrency"].as_u64().unwrap();
    for turn in 2..=3 {
        let row = html.split(&format!("id=\"turn-c{c}-{turn}\"")).nth(1).expect("no row for the turn");
        let row = &row[..row.find("</tr>").unwrap()];
        let expected = row.rsplit("<td>").next().unwrap();
        assert!(expected.ends_with(" %</td>"), "turn {turn}'s expected hit rate is not drawn: {row}");
    }
}
