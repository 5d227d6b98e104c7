//! Token-level truth against the fake server's llama.cpp-shaped logprobs: token ids in every record, the first
//! divergent token in `compare`, the gate and report.md, a near-tie flip told from a changed answer, and the
//! determinism matrix (R3) naming each row the server is made to diverge in.

use super::*;
use serde_json::{Value, json};

/// `gauntlet qualify --stages STAGES` on the fixture (the model gets the sha256 qualification demands). Returns
/// the exit code, the bundle folder and stdout.
fn qualify(f: &Fixture, stages: &str) -> (Option<i32>, PathBuf, String) {
    let manifest = f.write_qualifiable();
    let out = f.path().join("bundle");
    let args =
        ["qualify", "--manifest", manifest.to_str().unwrap(), "--stages", stages, "--out", out.to_str().unwrap()];
    let o = gauntlet(&args, &[], Duration::from_secs(120));
    assert_no_survivors(&f.tag);
    let stdout = format!("{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    (o.status.code(), out, stdout)
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))).unwrap()
}

/// The matrix's rows as `row → verdict`.
fn rows(bundle: &Path) -> BTreeMap<String, String> {
    let m = read(&bundle.join("determinism.json"));
    m["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["row"].as_str().unwrap().to_owned(), r["verdict"].as_str().unwrap().to_owned()))
        .collect()
}

#[test]
fn gate_records_token_ids_and_compare_reports_the_first_divergent_token() {
    let f = Fixture::new("tokens-compare");
    let run = f.run(&[]);
    assert!(run.record.is_some(), "{}", run.explain());
    let record = run.record.clone().unwrap();
    assert_eq!(record["schema_version"], gauntlet_schema::RUN_RECORD_VERSION);
    for case in record["cases"].as_array().unwrap() {
        let tokens = &case["answer"]["tokens"];
        assert_eq!(tokens["source"], "ids", "{case}");
        assert!(tokens["items"].as_array().unwrap().iter().all(|t| t["id"].is_u64() && t["logprob"].is_f64()));
        assert_eq!(case["request"]["top_logprobs"], 5);
    }
    // One token id changed in a copy: compare names that token, from 0, with both ids.
    let mut copy = record.clone();
    copy["cases"][1]["answer"]["tokens"]["items"][3]["id"] = json!(48_000);
    let b = f.path().join("b.json");
    std::fs::write(&b, copy.to_string()).unwrap();
    let a = run.out.join("run.json");
    let o = gauntlet(&["compare", "--json", a.to_str().unwrap(), b.to_str().unwrap()], &[], Duration::from_secs(30));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(1), "{v}");
    let case = &v["cases"][1];
    assert_eq!((case["status"].as_str(), case["first_divergent_token"].as_u64()), (Some("differs"), Some(3)), "{v}");
    assert_eq!(case["char_index"], Value::Null, "the text is the same: only the token differs");
    assert_eq!(case["token_divergence"]["run"]["id"], 48_000);
    assert!(v["cases"].as_array().unwrap().iter().enumerate().all(|(i, c)| i == 1 || c["status"] == "identical"));
}

#[test]
fn a_near_tie_flip_against_the_baseline_is_numerical_drift_and_a_far_one_text_drift() {
    // The fake has no jitter here: the tokens both runs share moved by nothing, and the far flip is far outside.
    for (flavour, kind, severity, words, end) in [
        (
            "restart:near-tie",
            "numerical-drift",
            "info",
            "('on' vs 'ALT', gap 0.01 nats",
            ": near-tie; checks unchanged)",
        ),
        (
            "restart",
            "text-drift",
            "warn",
            "('on' vs 'far', gap 4.95 nats, swing > 9.90 nats; shared tokens moved ≤ 0.00 nats over ",
            ": behaviour change; checks unchanged)",
        ),
    ] {
        let f = Fixture::new("tokens-drift");
        let state = f.path().join("starts");
        let f = f.fault(&["--diverge", flavour, "--state-file", state.to_str().unwrap()]);
        let baseline = f.baseline();
        // The fake's second start changes the last token of every answer.
        let run = f.run(&["--baseline", &baseline]);
        let found = run.findings(kind);
        assert_eq!(found.len(), 4, "{kind}: {}", run.explain());
        assert!(found.iter().all(|x| x["severity"] == severity), "{found:?}");
        let message = found[0]["message"].as_str().unwrap();
        assert!(message.contains(&format!("token 39 {words}")) && message.ends_with(end), "{message}");
        let md = std::fs::read_to_string(run.out.join("report.md")).unwrap();
        let md_words = words.replace('>', "&gt;"); // report.md escapes what a Markdown reader would take as markup
        assert!(md.contains(&format!("differs at token 39 {md_words}")) && md.contains(end), "{md}");
    }
}

#[test]
fn each_row_of_the_determinism_matrix_is_named_when_the_server_diverges_there() {
    for row in ["repeat", "concurrent", "stream", "prefix-cache", "restart"] {
        let f = Fixture::new(&format!("r3-{row}"));
        let state = f.path().join("starts").display().to_string();
        // Only the restart row's mode counts starts: the other rows' servers restart as they were.
        let restart_state: &[&str] = if row == "restart" { &["--state-file", &state] } else { &[] };
        let f = f.fault(&["--diverge", row]).fault(restart_state);
        let (code, bundle, stdout) = qualify(&f, "R3");
        assert_eq!(code, Some(1), "{row}: {stdout}");
        let got = rows(&bundle);
        for (name, verdict) in &got {
            let want = if name == row { "diverged" } else { "identical" };
            assert_eq!(verdict, want, "{row}: {got:?}\n{stdout}");
        }
        assert_eq!(got.len(), 5);
        let r3 = read(&bundle.join("r3-determinism.json"));
        let failure = r3["failures"][0].as_str().unwrap();
        assert!(failure.starts_with(&format!("row {row}: diverged: case `")), "{failure}");
        assert!(failure.contains("gap 4.95 nats, swing > 9.90 nats; shared tokens moved ≤ 0.00 nats"), "{failure}");
        assert!(failure.ends_with(": behaviour change; checks unchanged)"), "{failure}");
        // The bundle verifies: the stored verdicts are those the raw comparisons give.
        let v = gauntlet(&["verify", bundle.to_str().unwrap()], &[], Duration::from_secs(30));
        assert_eq!(v.status.code(), Some(0), "{row}: {}", String::from_utf8_lossy(&v.stdout));
    }
}

#[test]
fn near_tie_flips_only_pass_r3_and_a_tampered_row_fails_verify() {
    let f = Fixture::new("r3-near-tie").fault(&["--diverge", "stream:near-tie"]);
    let (code, bundle, stdout) = qualify(&f, "R3");
    assert_eq!(code, Some(0), "{stdout}");
    let got = rows(&bundle);
    assert_eq!(got["stream"], "near-tie-only", "{got:?}");
    assert_eq!(got["restart"], "identical", "{got:?}");
    let html = std::fs::read_to_string(bundle.join("qualification.html")).unwrap();
    assert!(html.contains("Determinism matrix (R3)") && html.contains("near-tie flips only"), "{html}");
    // A row claiming identical where its comparisons hold a flip is caught.
    let path = bundle.join("determinism.json");
    let mut m = read(&path);
    let stream = m["rows"].as_array_mut().unwrap().iter_mut().find(|r| r["row"] == "stream").unwrap();
    stream["verdict"] = json!("identical");
    std::fs::write(&path, m.to_string()).unwrap();
    let v = gauntlet(&["verify", bundle.to_str().unwrap()], &[], Duration::from_secs(30));
    let out = String::from_utf8_lossy(&v.stdout);
    assert_ne!(v.status.code(), Some(0), "{out}");
    assert!(out.contains("row stream says identical but its comparisons give near-tie flips only"), "{out}");
}

/// The fake's `--diverge concurrent` tells copies sent at once from requests sent one after another by their
/// arrival alone: two copies a busy client spread 350 ms apart both diverge, and a request sent just after another
/// one's answer does not (whatever that one's handler still holds).
#[test]
fn the_fakes_concurrent_divergence_follows_arrivals_not_handlers() {
    let port = free_port();
    let tag = format!("gauntlet-diverge-concurrent-{}", std::process::id());
    let _server = Reaped(
        std::process::Command::new(workspace_bin("gauntlet-fake-server"))
            .args(["--port", &port.to_string(), "--tag", &tag, "--lifetime-s", "60", "--diverge", "concurrent"])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let ask = move || -> String {
        use std::io::{Read, Write};
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut stream = loop {
            match std::net::TcpStream::connect(("127.0.0.1", port)) {
                Ok(s) => break s,
                Err(_) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
                Err(e) => panic!("the fake never listened: {e}"),
            }
        };
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let body = r#"{"model":"fake","messages":[{"role":"user","content":"hello"}]}"#;
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let json = &response[response.find("\r\n\r\n").expect("a response head") + 4..];
        let v: Value = serde_json::from_str(json).unwrap_or_else(|e| panic!("{e}: {response}"));
        v["choices"][0]["message"]["content"].as_str().unwrap().to_owned()
    };
    // One after another: the second is sent the moment the first's answer is in.
    assert_eq!((ask(), ask()), ("ok".to_owned(), "ok".to_owned()));
    // Two copies 350 ms apart: both in flight together, both diverge.
    let first = std::thread::spawn(ask);
    std::thread::sleep(Duration::from_millis(350));
    let second = ask();
    assert_eq!((first.join().unwrap(), second), ("far".to_owned(), "far".to_owned()));
}

/// The fake shifts every token's logprobs by up to 0.2 nats per request (`--jitter 0.2`), so the 39 tokens a repeat
/// shares with its source moved by up to 0.4. A flip whose swing is 0.30 (gap 0.15 each way) lies within twice that
/// jitter: numerical. The far flip (gap 4.95, the old token not even in the new answer's alternatives) is a behaviour
/// change. Either way the repeat still warns (the verdict rule is the seed's), and run.json holds both sides.
#[test]
fn a_repeat_flip_within_the_measured_jitter_is_numerical_and_a_far_one_a_behaviour_change() {
    for (flavour, class, words) in [
        ("repeat:numerical", "numerical", "('on' vs 'MID', gap 0.15 nats, swing 0.30 nats; shared tokens moved ≤ "),
        ("repeat", "behaviour-change", "('on' vs 'far', gap 4.95 nats, swing > 9.90 nats; shared tokens moved ≤ "),
    ] {
        let f = Fixture::new("tokens-jitter").fault(&["--jitter", "0.2", "--diverge", flavour]);
        let run = f.run(&[]);
        let record = run.record.clone().unwrap_or_else(|| panic!("{}", run.explain()));
        let case = record["cases"].as_array().unwrap().iter().find(|c| c["id"] == "alpha-again").unwrap();
        let d = &case["divergence"];
        assert_eq!((d["index"].as_u64(), d["class"].as_str()), (Some(39), Some(class)), "{d}");
        let j = &d["jitter"];
        let max = j["max_nats"].as_f64().unwrap();
        assert_eq!(j["tokens"], 39, "{j}");
        assert!(max > 0.15 && max <= 0.4, "the fake's jitter is at most 2 × 0.2: {j}");
        // Both sides at the divergence, with their alternatives.
        let side = |s: &str, i: usize| (d[s]["text"].as_str().unwrap(), d[s]["top"][i]["text"].as_str().unwrap());
        assert_eq!(side("baseline_token", 0), ("on", "on"), "{d}");
        if class == "numerical" {
            assert_eq!(side("run_token", 1), ("MID", "on"), "the new answer ranks the old token second: {d}");
            assert_eq!(d["checks_changed"], false, "{d}");
        }
        let found = run.findings("repeat-differs");
        assert_eq!(found.len(), 1, "{}", run.explain());
        assert_eq!(found[0]["severity"], "warn", "a repeat that differs still warns: {found:?}");
        let message = found[0]["message"].as_str().unwrap();
        let label = if class == "numerical" {
            ": numerical; checks unchanged)"
        } else {
            ": behaviour change; checks unchanged)"
        };
        assert!(message.contains(&format!("token 39 {words}")) && message.ends_with(label), "{message}");
    }
}

/// R3 with the fake's jitter: every row measures it over the tokens its comparisons share; the stream row's flip
/// (swing 0.30) is numerical, and the row still diverges (R3 fails on divergence, as before). `verify` recomputes the
/// class from the recorded gap, swing and jitter, so a flip relabelled a near-tie is caught.
#[test]
fn r3_rows_report_their_jitter_and_a_flip_within_it_is_numerical_but_still_diverges() {
    let f = Fixture::new("r3-jitter").fault(&["--jitter", "0.2", "--diverge", "stream:numerical"]);
    let (code, bundle, stdout) = qualify(&f, "R3");
    assert_eq!(code, Some(1), "{stdout}");
    let m = read(&bundle.join("determinism.json"));
    assert_eq!(m["determinism_version"], 2);
    for r in m["rows"].as_array().unwrap() {
        if r["row"] == "restart" {
            continue; // the fake's restart row asks after a new start: measured too, but not needed here
        }
        let j = &r["jitter"];
        assert!(j["tokens"].as_u64().unwrap() >= 32 && j["max_nats"].as_f64().unwrap() <= 0.4, "{r}");
    }
    let stream = m["rows"].as_array().unwrap().iter().find(|r| r["row"] == "stream").unwrap();
    assert_eq!(stream["verdict"], "diverged", "{stream}");
    let classes: Vec<&str> =
        stream["comparisons"].as_array().unwrap().iter().map(|c| c["token"]["class"].as_str().unwrap()).collect();
    assert!(!classes.is_empty() && classes.iter().all(|c| *c == "numerical"), "{classes:?}");
    let first = stream["first_divergence"].as_str().unwrap();
    assert!(
        first.contains("swing 0.30 nats; shared tokens moved ≤ ") && first.ends_with(": numerical; checks unchanged)"),
        "{first}"
    );
    let v = gauntlet(&["verify", bundle.to_str().unwrap()], &[], Duration::from_secs(30));
    assert_eq!(v.status.code(), Some(0), "{}", String::from_utf8_lossy(&v.stdout));
    // Relabelled a near-tie (which would pass the row): caught.
    let path = bundle.join("determinism.json");
    let mut m = m;
    let stream = m["rows"].as_array_mut().unwrap().iter_mut().find(|r| r["row"] == "stream").unwrap();
    stream["comparisons"][0]["token"]["class"] = json!("near-tie");
    std::fs::write(&path, m.to_string()).unwrap();
    let v = gauntlet(&["verify", bundle.to_str().unwrap()], &[], Duration::from_secs(30));
    let out = String::from_utf8_lossy(&v.stdout);
    assert_ne!(v.status.code(), Some(0), "{out}");
    assert!(out.contains("calls its divergence near-tie but its numbers give numerical"), "{out}");
}
