//! Fault injection: the gauntlet binary against the scripted fake server. Each test asserts the verdict, the
//! finding, the exit code, and that no process of the run survives it.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use common::{Run, assert_no_survivors, finish, free_port, gauntlet, render_in_chromium, workspace_bin};

const SUITE: &str = r#"
id = "faults"
version = 1

[[cases]]
id = "alpha"
max_tokens = 64
messages = [{ role = "user", content = "Say alpha." }]
check = { contains = ["alpha"] }

[[cases]]
id = "beta"
max_tokens = 64
messages = [{ role = "user", content = "Say beta." }]
check = { contains = ["beta"] }

[[cases]]
id = "gamma"
max_tokens = 64
stream = true
messages = [{ role = "user", content = "Say gamma." }]
check = { contains = ["gamma"] }

[[cases]]
id = "delta"
max_tokens = 64
messages = [{ role = "user", content = "Say delta." }]
check = { contains = ["delta"] }

[[cases]]
id = "alpha-again"
repeat_of = "alpha"
"#;

/// Forty words, so every case counts towards the decode median (≥ 32 completion tokens).
fn answer(word: &str) -> String {
    format!("{word} {}", "and so on".split(' ').cycle().take(39).collect::<Vec<_>>().join(" "))
}

/// Includes an 8 ms pace per word: an instant fake would make decode speed pure timer noise, and runs that are
/// compared with a baseline would then warn about speed at random.
fn good_answers() -> Vec<(&'static str, String)> {
    vec![
        ("__token_delay_ms", "8".into()),
        ("Say alpha.", answer("alpha")),
        ("Say beta.", answer("beta")),
        ("Say gamma.", answer("gamma")),
        ("Say delta.", answer("delta")),
    ]
}

struct Fixture {
    dir: tempfile::TempDir,
    tag: String,
    port: u16,
    args: Vec<String>,
    answers: Vec<(&'static str, String)>,
    profile_extra: String,
    executable: bool,
    model: bool,
}

impl Fixture {
    fn new(name: &str) -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        Fixture {
            tag: format!("gauntlet-test-{name}-{}-{}", std::process::id(), dir.path().display().to_string().len()),
            dir,
            port: free_port(),
            args: Vec::new(),
            answers: good_answers(),
            profile_extra: String::new(),
            executable: true,
            model: true,
        }
    }

    fn fault(mut self, args: &[&str]) -> Fixture {
        self.args.extend(args.iter().map(|s| s.to_string()));
        self
    }

    fn answers(mut self, answers: Vec<(&'static str, String)>) -> Fixture {
        self.answers = answers;
        self
    }

    fn profile(mut self, extra: &str) -> Fixture {
        self.profile_extra.push_str(extra);
        self.profile_extra.push('\n');
        self
    }

    /// Short limits so faults show quickly; a test's own `profile(...)` line replaces the default of its key. The
    /// defaults go before any sub-table the test opens (`[profiles.test.qualify]`), so they stay profile keys.
    fn profile_settings(&self) -> String {
        let lines: Vec<String> = self.profile_extra.lines().filter(|l| !l.is_empty()).map(str::to_owned).collect();
        let split = lines.iter().position(|l| l.starts_with('[')).unwrap_or(lines.len());
        let (mut head, tail) = (lines[..split].to_vec(), &lines[split..]);
        for default in
            ["load_timeout = \"10s\"", "request_timeout = \"3s\"", "suite_budget = \"60s\"", "stop_grace = \"2s\""]
        {
            let key = default.split(' ').next().unwrap_or_default();
            if !head.iter().any(|l| l.starts_with(key)) {
                head.push(default.to_owned());
            }
        }
        head.extend_from_slice(tail);
        head.join("\n")
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn write(&self) -> PathBuf {
        let root = self.path();
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::create_dir_all(root.join("models")).unwrap();
        let bin = root.join("bin/fake-server");
        let _ = std::fs::remove_file(&bin);
        if self.executable {
            std::os::unix::fs::symlink(workspace_bin("gauntlet-fake-server"), &bin).unwrap();
        } else {
            std::fs::write(&bin, "#!/bin/sh\n").unwrap();
        }
        if self.model {
            std::fs::write(root.join("models/tiny.gguf"), b"GGUF fake weights").unwrap();
        } else {
            let _ = std::fs::remove_file(root.join("models/tiny.gguf"));
        }
        std::fs::write(root.join("suite.toml"), SUITE).unwrap();
        let answers: serde_json::Map<String, serde_json::Value> =
            self.answers.iter().map(|(k, v)| (k.to_string(), serde_json::Value::String(v.clone()))).collect();
        std::fs::write(root.join("answers.json"), serde_json::to_string(&answers).unwrap()).unwrap();
        let mut args: Vec<String> = vec!["--answers".into(), root.join("answers.json").display().to_string()];
        args.extend(["--tag".into(), self.tag.clone(), "--lifetime-s".into(), "120".into()]);
        args.extend(self.args.iter().cloned());
        let args_toml: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
        let manifest = format!(
            r#"version = 1
[models.tiny]
path = "models/tiny.gguf"
[servers.fake]
binary = "bin/fake-server"
[profiles.test]
model = "tiny"
server = "fake"
port = {port}
suite = "suite.toml"
server_arguments = [{args}]
{extra}"#,
            port = self.port,
            args = args_toml.join(", "),
            extra = self.profile_settings(),
        );
        let path = root.join("gauntlet.toml");
        std::fs::write(&path, manifest).unwrap();
        path
    }

    /// Runs `gauntlet run` on this fixture into `out`, then checks that no process of the run survived.
    fn run_into(&self, out: &str, extra: &[&str]) -> Run {
        let manifest = self.write();
        let out = self.path().join(out);
        let mut args = vec!["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        let output = gauntlet(&args, &[], Duration::from_secs(90));
        let run = finish(output, &out);
        assert_no_survivors(&self.tag);
        run
    }

    fn run(&self, extra: &[&str]) -> Run {
        self.run_into("out", extra)
    }

    /// A healthy run written as a baseline; returns its path.
    fn baseline(&self) -> String {
        let path = self.path().join("baseline.json");
        let run = self.run_into("baseline-out", &["--write-baseline", path.to_str().unwrap()]);
        assert_eq!(run.code, 0, "{}", run.explain());
        assert!(path.is_file(), "{}", run.explain());
        path.display().to_string()
    }
}

#[test]
fn healthy_run_against_its_baseline_passes() {
    let f = Fixture::new("healthy");
    let first = f.run(&[]);
    assert_eq!(first.code, 0, "{}", first.explain());
    assert_eq!(first.verdict(), "warn", "no baseline yet warns\n{}", first.explain());
    assert!(first.has_finding("no-baseline"));
    let baseline = f.baseline();
    let run = f.run(&["--baseline", &baseline]);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.verdict(), "pass", "{}", run.explain());
    assert_eq!(run.case("alpha-again")["status"], "pass", "repeat is identical");
    let record = run.record.as_ref().unwrap();
    assert_eq!(record["server"]["stop"], "terminated");
    assert_eq!(record["decode"]["token_source"], "usage");
    for file in ["run.json", "report.md", "junit.xml", "server.log"] {
        assert!(run.out.join(file).is_file(), "{file} missing");
    }
    let report = std::fs::read_to_string(run.out.join("report.md")).unwrap();
    assert!(report.starts_with("# gauntlet test: PASS"), "{report}");
    assert!(report.contains("| alpha | pass |"), "{report}");
    assert!(report.contains("same text"), "{report}");
}

#[test]
fn crash_during_load_fails() {
    let f = Fixture::new("crash-load").fault(&["--fault", "crash-load"]);
    let run = f.run(&[]);
    assert_eq!(run.code, 1, "{}", run.explain());
    assert_eq!(run.verdict(), "fail");
    let crash = run.findings("crash");
    assert_eq!(crash.len(), 1, "{}", run.explain());
    assert!(crash[0]["message"].as_str().unwrap().contains("during load (exit code 3)"), "{crash:?}");
    assert_eq!(run.case("alpha")["skip_reason"], "server did not load");
    let report = std::fs::read_to_string(run.out.join("report.md")).unwrap();
    assert!(report.contains("simulated crash during load"), "log tail in the report:\n{report}");
}

#[test]
fn crash_mid_suite_skips_the_rest_and_is_reported_once() {
    // Request 1 is the warm-up, 2 is `alpha`; the server dies on request 3 (`beta`).
    let f = Fixture::new("crash-mid").fault(&["--fault", "crash-after", "--crash-after", "2"]);
    let run = f.run(&[]);
    assert_eq!(run.code, 1, "{}", run.explain());
    assert_eq!(run.verdict(), "fail");
    assert_eq!(run.findings("crash").len(), 1, "{}", run.explain());
    assert_eq!(run.case("alpha")["status"], "pass");
    assert_eq!(run.case("beta")["status"], "error");
    for id in ["gamma", "delta", "alpha-again"] {
        assert_eq!(run.case(id)["skip_reason"], "server is not running", "{id}");
    }
    assert_eq!(run.record.as_ref().unwrap()["server"]["stop"], "crashed");
}

#[test]
fn hang_before_first_byte_times_out_and_fails() {
    let f = Fixture::new("hang-first").fault(&["--fault", "hang-first-byte", "--fault-on", "beta"]);
    let run = f.run(&[]);
    assert_eq!(run.code, 1, "{}", run.explain());
    assert_eq!(run.verdict(), "fail");
    let err = run.case("beta")["error"].as_str().unwrap_or_default().to_owned();
    assert!(err.contains("waiting for the first byte"), "{err}");
    assert!(run.has_finding("request-error"));
    assert_eq!(run.case("delta")["status"], "pass", "later cases still run");
}

#[test]
fn hang_mid_stream_times_out_and_fails() {
    let f = Fixture::new("hang-mid").fault(&["--fault", "hang-mid-stream", "--fault-on", "gamma"]);
    let run = f.run(&[]);
    assert_eq!(run.code, 1, "{}", run.explain());
    let err = run.case("gamma")["error"].as_str().unwrap_or_default().to_owned();
    assert!(err.contains("while reading the answer"), "{err}");
}

fn single_fault(name: &str, fault: &str, case: &str, expect: &str) {
    let f = Fixture::new(name).fault(&["--fault", fault, "--fault-on", case]);
    let run = f.run(&[]);
    assert_eq!(run.code, 1, "{}", run.explain());
    assert_eq!(run.verdict(), "fail");
    assert_eq!(run.case(case)["status"], "error", "{}", run.explain());
    let err = run.case(case)["error"].as_str().unwrap_or_default().to_owned();
    assert!(err.contains(expect), "{err}");
    let finding = run.findings("request-error");
    assert_eq!(finding.len(), 1, "{finding:?}");
    assert_eq!(finding[0]["case"], case);
}

#[test]
fn stream_without_done_is_an_error() {
    single_fault("no-done", "no-done", "gamma", "stream ended without `data: [DONE]`");
}

#[test]
fn malformed_json_chunk_is_an_error() {
    single_fault("malformed", "malformed", "gamma", "is not JSON");
}

#[test]
fn http_500_is_an_error() {
    single_fault("http500", "http500", "beta", "HTTP 500");
}

#[test]
fn wrong_content_type_is_an_error() {
    single_fault("wrong-ct", "wrong-content-type", "beta", "wrong content type `text/html`");
    single_fault("wrong-ct-stream", "wrong-content-type", "gamma", "wrong content type `text/plain`");
}

#[test]
fn oversized_response_is_an_error() {
    single_fault("oversized", "oversized", "delta", "response larger than");
}

#[test]
fn one_regression_warns_two_fail() {
    let f = Fixture::new("regress");
    let baseline = f.baseline();
    let mut answers = good_answers();
    answers[2].1 = answer("nothing");
    let one = f.answers(answers.clone());
    let run = one.run(&["--baseline", &baseline]);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.verdict(), "warn", "{}", run.explain());
    let regressions = run.findings("regression");
    assert_eq!(regressions.len(), 1);
    assert_eq!(regressions[0]["case"], "beta");
    assert_eq!(regressions[0]["severity"], "warn");

    answers[4].1 = answer("nothing");
    let two = one.answers(answers);
    let run = two.run(&["--baseline", &baseline]);
    assert_eq!(run.code, 1, "{}", run.explain());
    assert_eq!(run.verdict(), "fail");
    let regressions = run.findings("regression");
    assert_eq!(regressions.len(), 2);
    assert!(regressions.iter().all(|r| r["severity"] == "fail"));
}

#[test]
fn under_half_passing_fails() {
    let wrong =
        good_answers().into_iter().map(|(k, v)| (k, if k.starts_with("__") { v } else { answer("nothing") })).collect();
    let f = Fixture::new("pass-rate").answers(wrong);
    let run = f.run(&[]);
    assert_eq!(run.code, 1, "{}", run.explain());
    let rate = run.findings("pass-rate");
    assert_eq!(rate.len(), 1, "{}", run.explain());
    assert!(rate[0]["message"].as_str().unwrap().starts_with("0 of 4 cases pass"), "{rate:?}");
}

#[test]
fn text_drift_warns_with_the_first_differing_character() {
    let f = Fixture::new("drift");
    let baseline = f.baseline();
    let mut answers = good_answers();
    answers[1].1 = answers[1].1.replacen("and so on", "and so forth", 1);
    let f = f.answers(answers);
    let run = f.run(&["--baseline", &baseline]);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.verdict(), "warn");
    let drift = run.findings("text-drift");
    assert_eq!(drift.len(), 1, "{drift:?}");
    assert_eq!(drift[0]["case"], "alpha");
    // "alpha and so " is 13 characters; the 14th differs ("o" of "on" vs "f" of "forth").
    assert_eq!(drift[0]["message"], "text differs from the baseline at char 13");
    let report = std::fs::read_to_string(run.out.join("report.md")).unwrap();
    assert!(report.contains("differs at char 13"), "{report}");
}

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
    // Without a regression there is nothing to confirm and no re-run.
    let slow = out.join("bench.json");
    let (code, stdout, record, out) = bench_fixture(&f, "same", &["--baseline", slow.to_str().unwrap(), "--confirm"]);
    assert_ne!(code, Some(1), "{stdout}");
    assert!(record.get("confirmation").is_none() && !out.join("confirm").exists(), "{stdout}");
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
    let mut args = vec!["bench", "--manifest", manifest.to_str().unwrap(), "--warmups", "0", "--repetitions", "2"];
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
    assert!(record["problems"].as_array().unwrap().iter().any(|p| p == "concurrency 1: 1 request(s) failed"));
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
    bench_fault("bench-oversized", "oversized", "response larger than 8388608 bytes");
}

#[test]
fn bench_reports_refusals() {
    bench_fault("bench-http500", "http500", "HTTP 500");
    bench_fault("bench-wrong-ct", "wrong-content-type", "wrong content type `text/plain`");
}

fn bench_fixture(f: &Fixture, out: &str, extra: &[&str]) -> (Option<i32>, String, serde_json::Value, PathBuf) {
    let manifest = f.write();
    let out = f.path().join(out);
    let mut args = vec!["bench", "--manifest", manifest.to_str().unwrap(), "--concurrency", "1"];
    args.extend_from_slice(&["--warmups", "0", "--repetitions", "4", "--out", out.to_str().unwrap()]);
    args.extend_from_slice(extra);
    let o = gauntlet(&args, &[], Duration::from_secs(120));
    assert_no_survivors(&f.tag);
    let record: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(out.join("bench.json")).unwrap())
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned(), record, out)
}

#[test]
fn decode_twenty_percent_slower_warns() {
    let with_delay = |ms: &str| {
        let mut a = good_answers();
        a.push(("__token_delay_ms", ms.into()));
        a
    };
    let f = Fixture::new("slow-decode").answers(with_delay("10"));
    let baseline = f.baseline();
    let f = f.answers(with_delay("13"));
    let run = f.run(&["--baseline", &baseline]);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.verdict(), "warn", "{}", run.explain());
    assert!(run.has_finding("slow-decode"), "{}", run.explain());
    assert!(!run.has_finding("text-drift"));
}

#[test]
fn load_twice_as_slow_warns() {
    let with_delay = |ms: &str| {
        let mut a = good_answers();
        a.push(("__load_delay_ms", ms.into()));
        a
    };
    let f = Fixture::new("slow-load").answers(with_delay("400"));
    let baseline = f.baseline();
    let f = f.answers(with_delay("1200"));
    let run = f.run(&["--baseline", &baseline]);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.verdict(), "warn", "{}", run.explain());
    let slow = run.findings("slow-load");
    assert_eq!(slow.len(), 1, "{}", run.explain());
}

#[test]
fn suite_over_budget_fails() {
    let f = Fixture::new("budget").fault(&["--token-delay-ms", "25"]).profile("suite_budget = \"2s\"");
    let run = f.run(&[]);
    assert_eq!(run.code, 1, "{}", run.explain());
    assert!(run.has_finding("over-budget"), "{}", run.explain());
    let skipped = run.record.as_ref().unwrap()["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["skip_reason"] == "suite budget spent")
        .count();
    assert!(skipped >= 1, "{}", run.explain());
    assert_eq!(run.record.as_ref().unwrap()["suite"]["over_budget"], true);
}

#[test]
fn server_ignoring_sigterm_is_killed() {
    let f = Fixture::new("sigterm").fault(&["--ignore-sigterm"]);
    let run = f.run(&[]);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert!(run.has_finding("killed"), "{}", run.explain());
    assert_eq!(run.record.as_ref().unwrap()["server"]["stop"], "killed");
}

#[test]
fn leaked_child_is_found_and_reaped() {
    let f = Fixture::new("leak").fault(&["--leak-child"]);
    let run = f.run(&[]);
    assert!(run.has_finding("leftover-process"), "{}", run.explain());
}

#[test]
fn port_in_use_is_refused_before_anything_starts() {
    let f = Fixture::new("port");
    let _holder = std::net::TcpListener::bind(("127.0.0.1", f.port)).unwrap();
    let run = f.run(&[]);
    assert_eq!(run.code, 2, "{}", run.explain());
    assert!(run.stderr.contains(&format!("port {} on 127.0.0.1 is already in use", f.port)), "{}", run.explain());
    assert!(run.record.is_none(), "no run happened");
}

#[test]
fn binary_not_executable_is_bad_input() {
    let mut f = Fixture::new("noexec");
    f.executable = false;
    let run = f.run(&[]);
    assert_eq!(run.code, 2, "{}", run.explain());
    assert!(run.stderr.contains("profiles.test") || run.stderr.contains("servers.fake.binary"), "{}", run.explain());
    assert!(run.stderr.contains("is not executable"), "{}", run.explain());
}

#[test]
fn missing_model_file_is_bad_input() {
    let mut f = Fixture::new("nomodel");
    f.model = false;
    let run = f.run(&[]);
    assert_eq!(run.code, 2, "{}", run.explain());
    assert!(run.stderr.contains("models.tiny.path: model file"), "{}", run.explain());
    assert!(run.stderr.contains("does not exist"), "{}", run.explain());
}

#[test]
fn wrong_model_sha256_is_bad_input() {
    let f = Fixture::new("sha").profile("");
    let manifest = f.write();
    let text = std::fs::read_to_string(&manifest).unwrap().replace(
        "path = \"models/tiny.gguf\"",
        &format!("path = \"models/tiny.gguf\"\nsha256 = \"{}\"", "0".repeat(64)),
    );
    std::fs::write(&manifest, text).unwrap();
    let out = f.path().join("out");
    let output = gauntlet(
        &["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()],
        &[],
        Duration::from_secs(30),
    );
    let run = finish(output, &out);
    assert_eq!(run.code, 2, "{}", run.explain());
    assert!(run.stderr.contains("the manifest says 0000"), "{}", run.explain());
    assert_no_survivors(&f.tag);
}

/// A server someone else started, reached through a path prefix: gauntlet attaches, never stops it, and says
/// that load time and crash detection were not available.
#[test]
fn attaches_to_a_running_server_under_a_path_prefix() {
    let f = Fixture::new("attach");
    f.write();
    let port = free_port();
    let mut server = std::process::Command::new(workspace_bin("gauntlet-fake-server"))
        .args(["--port", &port.to_string(), "--prefix", "/serving", "--tag", &f.tag, "--lifetime-s", "60"])
        .args(["--answers", f.path().join("answers.json").to_str().unwrap()])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let manifest = f.path().join("attach.toml");
    std::fs::write(
        &manifest,
        format!(
            "version = 1\n[profiles.remote]\nbase_url = \"http://127.0.0.1:{port}/serving/\"\nsuite = \"suite.toml\"\nload_timeout = \"10s\"\nrequest_timeout = \"3s\"\napi_key_env = \"FAKE_KEY\"\n"
        ),
    )
    .unwrap();
    let out = f.path().join("out");
    let args = ["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let missing_key = finish(gauntlet(&args, &[], Duration::from_secs(30)), &out);
    assert_eq!(missing_key.code, 2, "{}", missing_key.explain());
    assert!(missing_key.stderr.contains("api key variable `FAKE_KEY` is not set"), "{}", missing_key.explain());
    let run = finish(gauntlet(&args, &[("FAKE_KEY", "s3cret")], Duration::from_secs(30)), &out);
    let still_running = server.try_wait().unwrap().is_none();
    let _ = server.kill();
    let _ = server.wait();
    assert!(still_running, "gauntlet must not stop a server it attached to");
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.case("alpha")["status"], "pass", "{}", run.explain());
    let record = run.record.as_ref().unwrap();
    assert_eq!(record["server"]["mode"], "attached");
    assert_eq!(record["server"]["stop"], "attached");
    assert!(record["server"]["load_seconds"].is_null());
    assert!(run.findings("attached")[0]["message"].as_str().unwrap().contains("crash detection were not available"));
    let everything = std::fs::read_to_string(run.out.join("run.json")).unwrap()
        + &std::fs::read_to_string(run.out.join("report.md")).unwrap();
    assert!(!everything.contains("s3cret"), "the API key is never written");
    assert_no_survivors(&f.tag);
}

/// Starts `gauntlet run` on the fixture, waits (bounded) until `servers` processes of its server are up, optionally
/// closes gauntlet's stdout and stderr, then sends `signal`; returns how gauntlet exited and what it wrote to stderr.
fn interrupt(f: &Fixture, servers: usize, signal: i32, close_pipes: bool) -> (std::process::ExitStatus, String) {
    let manifest = f.write();
    let out = f.path().join("out");
    let scratch = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(workspace_bin("gauntlet"));
    common::isolate(&mut cmd, &[], &scratch);
    let mut child = cmd
        .args(["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while common::processes_tagged(&f.tag).len() < servers {
        assert!(std::time::Instant::now() < deadline, "server never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    if close_pipes {
        drop(child.stdout.take());
        drop(child.stderr.take());
    }
    std::thread::sleep(Duration::from_millis(300));
    common::send_signal(child.id() as i32, signal);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            panic!("gauntlet did not exit after signal {signal}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    if let Some(mut pipe) = child.stderr.take() {
        std::io::Read::read_to_string(&mut pipe, &mut stderr).unwrap();
    }
    assert_no_survivors(&f.tag);
    (status, stderr)
}

/// Ctrl-C on gauntlet stops the server group it started, even one that ignores SIGTERM.
#[test]
fn interrupt_stops_the_server_group() {
    let f = Fixture::new("sigint").fault(&["--ignore-sigterm", "--leak-child", "--token-delay-ms", "200"]);
    let (status, stderr) = interrupt(&f, 2, 2, false);
    assert_eq!(status.code(), Some(130));
    assert!(stderr.contains("interrupted"), "{stderr}");
}

/// A cancelled CI job closes gauntlet's log pipe and then sends SIGTERM: with nowhere to write, gauntlet must still
/// stop its server group and exit.
#[test]
fn sigterm_with_a_closed_stderr_still_stops_the_server_group() {
    let f = Fixture::new("sigterm-closed").fault(&["--ignore-sigterm", "--token-delay-ms", "200"]);
    let (status, _) = interrupt(&f, 1, 15, true);
    assert_eq!(status.code(), Some(143), "{status:?}");
}

#[test]
fn github_annotations_and_step_summary() {
    let f = Fixture::new("github").fault(&["--fault", "http500", "--fault-on", "beta"]);
    let manifest = f.write();
    let out = f.path().join("out");
    let summary = f.path().join("summary.md");
    std::fs::write(&summary, "earlier step\n").unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(workspace_bin("gauntlet"));
    common::isolate(&mut cmd, &[], &scratch);
    cmd.args(["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()])
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_STEP_SUMMARY", &summary);
    let output = cmd.output().unwrap();
    let run = finish(output, &out);
    assert_eq!(run.code, 1, "{}", run.explain());
    let first = run.stdout.lines().next().unwrap_or_default().to_owned();
    assert!(first.starts_with("::error title=gauntlet test request-error%3A beta::HTTP 500"), "{}", run.stdout);
    assert!(run.stdout.contains("::warning title=gauntlet test no-baseline::"), "{}", run.stdout);
    let text = std::fs::read_to_string(&summary).unwrap();
    assert!(text.starts_with("earlier step\n# gauntlet test: FAIL"), "{text}");
    let junit = std::fs::read_to_string(out.join("junit.xml")).unwrap();
    assert!(junit.contains("<testcase classname=\"gauntlet.test\" name=\"beta\""), "{junit}");
    assert!(junit.contains("<error message=\"HTTP 500"), "{junit}");
    assert_eq!(junit.matches("<testcase ").count(), 5, "one test case per suite case");
    assert_no_survivors(&f.tag);
}

/// A baseline of another identity is refused, naming the changed argument; promotion needs trust; a promoted
/// baseline is then picked from the store by identity and named.
#[test]
fn store_promotion_trust_and_identity_refusal() {
    let f = Fixture::new("store");
    let baseline = f.baseline();
    let changed = f.fault(&["-c", "2048"]);
    let run = changed.run(&["--baseline", &baseline]);
    assert_eq!(run.code, 2, "{}", run.explain());
    assert!(run.stderr.contains("refusing to compare with baseline"), "{}", run.explain());
    assert!(run.stderr.contains("recipe.server_arguments: 6 → 8 items; from [6]: (end) → -c"), "{}", run.explain());

    let store = changed.path().join("team-store");
    let store_s = store.to_str().unwrap().to_owned();
    let first = changed.run_into("first", &[]);
    let promote = |extra: &[(&str, &str)], trusted: bool| {
        let mut args = vec!["baseline", "promote", first.out.to_str().unwrap(), "--store", &store_s, "--note", "first"];
        if trusted {
            args.push("--trusted");
        }
        gauntlet(&args, extra, Duration::from_secs(30))
    };
    let refused = promote(&[], false);
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("needs a trusted context"));
    let pr = promote(&[("GITHUB_ACTIONS", "true"), ("GITHUB_EVENT_NAME", "pull_request")], true);
    assert_eq!(pr.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&pr.stderr).contains("pull-request run"));
    let ok = promote(&[], true);
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stderr));

    let out = changed.path().join("second");
    let output = gauntlet(
        &["run", "--manifest", changed.path().join("gauntlet.toml").to_str().unwrap(), "--out", out.to_str().unwrap()],
        &[("GAUNTLET_STORE", &store_s)],
        Duration::from_secs(60),
    );
    let second = finish(output, &out);
    assert_eq!(second.code, 0, "{}", second.explain());
    assert!(second.stderr.contains("baseline: #1 of profile `test`"), "{}", second.explain());
    assert!(second.stderr.contains("\"first\""), "{}", second.explain());
    assert_eq!(second.verdict(), "pass", "{}", second.explain());
    let verify = gauntlet(&["baseline", "verify", "--store", &store_s], &[], Duration::from_secs(30));
    assert_eq!(verify.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&verify.stdout).contains("1 entries, every chain and record intact"));

    // The same profile with an edited argument has no baseline, and says which baseline it no longer matches.
    let edited = changed.path().join("edited.toml");
    let text = std::fs::read_to_string(changed.path().join("gauntlet.toml")).unwrap();
    std::fs::write(&edited, text.replace("\"2048\"", "\"1024\"")).unwrap();
    let out = changed.path().join("edited-out");
    let output = gauntlet(
        &["run", "--manifest", edited.to_str().unwrap(), "--out", out.to_str().unwrap()],
        &[("GAUNTLET_STORE", &store_s)],
        Duration::from_secs(60),
    );
    let third = finish(output, &out);
    assert_eq!((third.code, third.verdict()), (0, "warn"), "{}", third.explain());
    assert!(third.has_finding("no-baseline"));
    assert!(third.stderr.contains("no baseline of this identity yet; the newest baseline of profile `test` (#1"));
    assert!(third.stderr.contains("recipe.server_arguments"), "{}", third.explain());
    assert!(third.stderr.contains("2048 → 1024"), "{}", third.explain());
    assert_no_survivors(&changed.tag);
}

#[test]
fn plan_maps_changed_paths_of_a_real_git_repository() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path();
    let git = |args: &[&str]| git_in(repo, args);
    git(&["init", "-q"]);
    std::fs::create_dir_all(repo.join("models/qwen")).unwrap();
    std::fs::write(repo.join("models/qwen/a.cu"), "1").unwrap();
    std::fs::write(repo.join("README.md"), "1").unwrap();
    git(&["add", "."]);
    git(&["commit", "-qm", "one"]);
    std::fs::write(repo.join("models/qwen/a.cu"), "2").unwrap();
    git(&["commit", "-qam", "two"]);
    let manifest = repo.join("m.toml");
    std::fs::write(
        &manifest,
        "version = 1\n[plan]\nshared = [\"core/\"]\n[plan.profiles]\nqwen = [\"models/qwen/\"]\nds4 = [\"models/ds4/\"]\n\
         [profiles.qwen]\nbase_url = \"http://127.0.0.1:1\"\ndevice = \"nvidia:0\"\nrunner = [\"self-hosted\", \"h200\"]\n\
         [profiles.ds4]\nbase_url = \"http://127.0.0.1:2\"\ndevice = \"amd:0\"\n",
    )
    .unwrap();
    let m = manifest.to_str().unwrap();
    let r = repo.to_str().unwrap();
    let out = gauntlet(&["plan", "--manifest", m, "--since", "HEAD~1", "--repo", r], &[], Duration::from_secs(30));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "qwen\n");
    let out = gauntlet(
        &["plan", "--manifest", m, "--since", "HEAD~1", "--repo", r, "--format", "github-matrix"],
        &[],
        Duration::from_secs(30),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "{\"include\":[{\"profile\":\"qwen\",\"runner\":[\"self-hosted\",\"h200\"]}]}\n",
        "the runner labels come from the manifest"
    );
    // A manual dispatch names profiles (or all); GPU profiles without `runner` get the vendor's self-hosted label.
    let out = gauntlet(
        &["plan", "--manifest", m, "--profiles", "ds4", "--format", "github-output"],
        &[],
        Duration::from_secs(30),
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "matrix={\"include\":[{\"profile\":\"ds4\",\"runner\":[\"self-hosted\",\"amd\"]}]}\ncount=1\n"
    );
    let out = gauntlet(&["plan", "--manifest", m, "--all"], &[], Duration::from_secs(30));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ds4\nqwen\n");
    let out = gauntlet(&["plan", "--manifest", m, "--profiles", "ds4,mistral"], &[], Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no profile `mistral`"));
    std::fs::write(repo.join("changed.txt"), "README.md\n").unwrap();
    let cf = repo.join("changed.txt");
    let out =
        gauntlet(&["plan", "--manifest", m, "--changed-files", cf.to_str().unwrap()], &[], Duration::from_secs(30));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    let out = gauntlet(
        &["plan", "--manifest", m, "--changed-files", cf.to_str().unwrap(), "--fallback-all"],
        &[],
        Duration::from_secs(30),
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ds4\nqwen\n");
}

fn git_in(repo: &Path, args: &[&str]) {
    let ok = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .unwrap();
    assert!(ok.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&ok.stderr));
}

/// Skip-cache: a clean pass on an unchanged source tree is reused without starting the server and says so; an
/// edited tree or `--no-cache` runs again; a warn is never remembered.
#[test]
fn skip_cache_hit_miss_and_warn_not_cached() {
    // Speed is not what this test is about, and a busy 2-core runner can slow the fake server's pacing past the
    // 15 % speed warning, which would (rightly) not be cached; the speed checks have tests of their own.
    let f = Fixture::new("cache").profile("verdict = { decode_ratio_warn = 0.0, load_ratio_warn = 1000.0 }");
    let baseline = f.baseline();
    let manifest = f.write();
    let src = f.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("kernel.cu"), "v1").unwrap();
    git_in(&src, &["init", "-q"]);
    git_in(&src, &["add", "."]);
    git_in(&src, &["commit", "-qm", "one"]);
    let home = f.path().join("home");
    let cache = home.join("skip-cache");
    let entries = || std::fs::read_dir(&cache).map(|d| d.count()).unwrap_or(0);
    let gate = |out: &str, extra: &[&str]| -> Run {
        let out = f.path().join(out);
        let mut args = vec!["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
        args.extend_from_slice(&["--source", src.to_str().unwrap()]);
        args.extend_from_slice(extra);
        let output = gauntlet(&args, &[("GAUNTLET_HOME", home.to_str().unwrap())], Duration::from_secs(90));
        let run = finish(output, &out);
        assert_no_survivors(&f.tag);
        run
    };
    let with_baseline = ["--baseline", baseline.as_str()];

    let first = gate("first", &with_baseline);
    assert_eq!((first.code, first.verdict()), (0, "pass"), "{}", first.explain());
    assert_eq!(entries(), 1, "a clean pass is remembered");

    let hit = gate("hit", &with_baseline);
    assert_eq!(hit.code, 0, "{}", hit.explain());
    // A hit starts nothing; with --out it puts the remembered evidence there, marked as reused, so that a CI
    // merge finds the shard.
    let remembered = hit.record.as_ref().expect("the remembered run.json");
    assert_eq!(remembered["started_at"], first.record.as_ref().unwrap()["started_at"], "{}", hit.explain());
    assert!(hit.out.join("reused.json").is_file() && !hit.out.join("server.log").exists(), "{}", hit.explain());
    let merged = gauntlet(&["report", "--merge", hit.out.to_str().unwrap()], &[], Duration::from_secs(30));
    let summary = String::from_utf8_lossy(&merged.stdout);
    assert_eq!(merged.status.code(), Some(0), "{summary}");
    assert!(summary.contains("; reused the pass of 20"), "{summary}");
    assert!(hit.stdout.starts_with("# gauntlet test: PASS"), "the remembered report is printed: {}", hit.stdout);
    assert!(hit.stdout.contains("reused the pass of"), "{}", hit.stdout);
    assert!(hit.stdout.contains("same source tree, identity, model file, runtime, baseline"), "{}", hit.stdout);

    let forced = gate("forced", &["--baseline", baseline.as_str(), "--no-cache"]);
    assert_eq!((forced.code, forced.verdict()), (0, "pass"), "--no-cache runs: {}", forced.explain());

    // An edited (dirty) working tree is another source tree: a miss, then remembered under its own key.
    std::fs::write(src.join("kernel.cu"), "v2").unwrap();
    let edited = gate("edited", &with_baseline);
    assert_eq!((edited.code, edited.verdict()), (0, "pass"), "{}", edited.explain());
    assert!(!edited.stdout.contains("reused"), "{}", edited.stdout);
    assert_eq!(entries(), 2);
    git_in(&src, &["commit", "-qam", "two"]);
    let committed = gate("committed", &with_baseline);
    assert!(committed.record.is_some(), "a clean tree hashes as git's tree, not as the dirty files did");
    assert_eq!(entries(), 3);

    // A warn (here: no baseline) must show every time.
    for out in ["warn-1", "warn-2"] {
        let warn = gate(out, &[]);
        assert_eq!((warn.code, warn.verdict()), (0, "warn"), "{}", warn.explain());
        assert!(!warn.stdout.contains("reused"), "{}", warn.stdout);
    }
    assert_eq!(entries(), 3, "a warn is never remembered");
}

fn run_with_env(f: &Fixture, out: &str, env: &[(&str, &str)]) -> Run {
    let manifest = f.write();
    let out = f.path().join(out);
    let args = ["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let run = finish(gauntlet(&args, env, Duration::from_secs(90)), &out);
    assert_no_survivors(&f.tag);
    run
}

/// A fake GPU (`$GAUNTLET_FAKE_GPU`) with an identity and the given holders.
fn fake_gpu(root: &Path, holders: &[(u32, &str)]) -> PathBuf {
    let dir = root.join("fake-gpu");
    std::fs::create_dir_all(dir.join("holders")).unwrap();
    std::fs::write(
        dir.join("identity.json"),
        r#"{"vendor": "nvidia", "name": "NVIDIA H200", "driver": "580.159.04", "pci_bus_id": "00000000:00:06.0", "memory_total_bytes": 150754820096}"#,
    )
    .unwrap();
    for (pid, name) in holders {
        std::fs::write(dir.join("holders").join(pid.to_string()), name).unwrap();
    }
    dir
}

/// Another process on the GPU: the run waits (bounded), then skips with exit 3 naming it; freed during the
/// wait, the run goes ahead and records the wait; when nobody can tell, it fails closed.
#[test]
fn busy_gpu_skips_waits_or_fails_closed() {
    let mut f = Fixture::new("busy").profile("device = \"nvidia:0\"\nbusy_wait = \"1s\"");
    let gpu = fake_gpu(f.path(), &[(4242, "python3")]);
    let env = [("GAUNTLET_FAKE_GPU", gpu.to_str().unwrap())];
    let skipped = run_with_env(&f, "busy", &env);
    assert_eq!(skipped.code, 3, "{}", skipped.explain());
    assert!(skipped.stderr.contains("nvidia:0 is still in use after 1s: pid 4242 (python3)"), "{}", skipped.explain());
    assert!(skipped.record.is_none(), "nothing was started");
    let skip: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(f.path().join("busy/skipped.json")).unwrap()).unwrap();
    assert_eq!((skip["profile"].as_str(), skip["kind"].as_str()), (Some("test"), Some("gpu-busy")), "{skip}");
    let merged =
        gauntlet(&["report", "--merge", f.path().join("busy").to_str().unwrap()], &[], Duration::from_secs(30));
    let summary = String::from_utf8_lossy(&merged.stdout);
    assert_eq!(merged.status.code(), Some(3), "a merge of a skipped shard is skipped: {summary}");
    assert!(summary.contains("| test | skip | skipped (gpu-busy): nvidia:0 is still in use"), "{summary}");

    f.profile_extra = "device = \"nvidia:0\"\nbusy_wait = \"30s\"\n".into();
    let holder = gpu.join("holders/4242");
    let freer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(700));
        std::fs::remove_file(holder).unwrap();
    });
    let waited = run_with_env(&f, "waited", &env);
    freer.join().unwrap();
    assert_eq!(waited.code, 0, "{}", waited.explain());
    let sentry = &waited.record.as_ref().unwrap()["sentry"];
    assert!(sentry["gpu_wait_seconds"].as_f64().unwrap() >= 0.5, "{sentry}");
    assert_eq!(sentry["gpu_holders_seen"][0], "pid 4242 (python3)");
    let record = waited.record.as_ref().unwrap();
    assert_eq!(record["identity"]["binding"]["device"], "NVIDIA H200", "the GPU is part of the identity");
    assert_eq!(record["runtime"]["gpu"]["driver"], "580.159.04", "the driver is a runtime fact");

    std::fs::write(gpu.join("unknown"), "NVML: insufficient permissions").unwrap();
    let unknown = run_with_env(&f, "unknown", &env);
    assert_eq!(unknown.code, 1, "{}", unknown.explain());
    assert!(
        unknown.stderr.contains("failed closed: cannot tell whether nvidia:0 is free: NVML: insufficient permissions")
    );
}

/// A GPU fault logged by the kernel during the run, naming our server's pid, fails the run; the same fault of
/// another process only warns. The kernel log is a file standing in for /dev/kmsg.
#[test]
fn kernel_fault_of_our_server_fails_the_run() {
    let f = Fixture::new("xid").profile("device = \"nvidia:0\"").fault(&["--token-delay-ms", "25"]);
    let gpu = fake_gpu(f.path(), &[]);
    for (ours, expect_code) in [(true, 1), (false, 0)] {
        let kmsg = f.path().join(format!("kmsg-{ours}"));
        std::fs::write(&kmsg, "6,100,1,-;NVRM: loading NVIDIA UNIX Open Kernel Module\n").unwrap();
        let tag = f.tag.clone();
        let kmsg_w = kmsg.clone();
        let writer = std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            let pid = loop {
                if let Some(pid) = common::processes_tagged(&tag).first() {
                    break *pid;
                }
                assert!(std::time::Instant::now() < deadline, "server never started");
                std::thread::sleep(Duration::from_millis(20));
            };
            let pid = if ours { pid } else { 1 };
            let line =
                format!("3,101,2,-;NVRM: Xid (PCI:0000:00:06): 13, pid={pid}, name=whoever, Graphics Exception\n");
            let mut file = std::fs::OpenOptions::new().append(true).open(&kmsg_w).unwrap();
            std::io::Write::write_all(&mut file, line.as_bytes()).unwrap();
        });
        let env = [("GAUNTLET_FAKE_GPU", gpu.to_str().unwrap()), ("GAUNTLET_KMSG_FILE", kmsg.to_str().unwrap())];
        let run = run_with_env(&f, &format!("out-{ours}"), &env);
        writer.join().unwrap();
        assert_eq!(run.code, expect_code, "{}", run.explain());
        let sentry = &run.record.as_ref().unwrap()["sentry"];
        assert_eq!(sentry["kernel_log"], "fault", "{sentry}");
        assert_eq!(sentry["hits"][0]["ours"], ours, "{sentry}");
        assert_eq!(sentry["hits"][0]["device"], "0000:00:06.0");
        let fault = &run.findings("kernel-fault")[0];
        assert_eq!(fault["severity"], if ours { "fail" } else { "warn" }, "{fault}");
    }
}

/// Against this machine's real /dev/kmsg, a run is bracketed and clean.
#[test]
fn real_kernel_log_brackets_a_run() {
    let f = Fixture::new("kmsg");
    let run = f.run(&[]);
    assert_eq!(run.code, 0, "{}", run.explain());
    let sentry = &run.record.as_ref().unwrap()["sentry"];
    assert_eq!(sentry["kernel_log"], "clean", "needs a readable /dev/kmsg (root or CAP_SYSLOG): {sentry}");
    assert!(sentry["boot_id"].as_str().is_some_and(|b| b.len() > 10), "{sentry}");
    assert!(run.record.as_ref().unwrap()["runtime"]["cpu"]["model"].as_str().is_some_and(|m| !m.is_empty()));
}

/// `gauntlet doctor --json` for the fixture's profile, as (exit code, subject → (status, detail, fix), stdout).
fn doctor(f: &Fixture, env: &[(&str, &str)], json: bool) -> (i32, BTreeMap<String, (String, String, String)>, String) {
    let manifest = f.write();
    let mut args = vec!["doctor", "--manifest", manifest.to_str().unwrap()];
    if json {
        args.push("--json");
    }
    let out = gauntlet(&args, env, Duration::from_secs(60));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let code = out.status.code().unwrap_or(-1);
    let mut checks = BTreeMap::new();
    if json {
        let v: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
        for c in v["checks"].as_array().unwrap() {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_owned();
            checks.insert(s("subject"), (s("status"), s("detail"), s("fix")));
        }
    }
    (code, checks, stdout)
}

/// Doctor on a GPU profile: every line says what a run would meet, and each one that is not ok has its fix.
#[test]
fn doctor_says_what_works_and_how_to_fix_what_does_not() {
    let mut f = Fixture::new("doctor").profile("device = \"nvidia:0\"\ngpu_lock = true");
    let gpu = fake_gpu(f.path(), &[(4242, "python3")]);
    let kmsg = f.path().join("kmsg");
    std::fs::write(
        &kmsg,
        "6,1,1,-;NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.159.04\n\
         3,2,2,-;NVRM: Xid (PCI:0000:00:06): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n",
    )
    .unwrap();
    let locks = f.path().join("locks");
    let store = f.path().join("store");
    let env = [
        ("GAUNTLET_FAKE_GPU", gpu.to_str().unwrap()),
        ("GAUNTLET_KMSG_FILE", kmsg.to_str().unwrap()),
        ("GAUNTLET_LOCK_DIR", locks.to_str().unwrap()),
        ("GAUNTLET_STORE", store.to_str().unwrap()),
    ];
    let (code, checks, stdout) = doctor(&f, &env, true);
    assert_eq!(code, 0, "warnings only: {stdout}");
    let status = |subject: &str| checks.get(subject).map(|c| c.0.as_str()).unwrap_or("(missing)");
    let detail = |subject: &str| checks.get(subject).map(|c| c.1.clone()).unwrap_or_default();
    assert_eq!(status("kernel log"), "warn", "a device fault already in the log: {stdout}");
    assert!(detail("kernel log").contains("2 kernel record(s)") && detail("kernel log").contains("pre-run"));
    assert!(detail("kernel log").contains("fallen off the bus"), "{stdout}");
    assert_eq!(status("device"), "ok");
    assert!(detail("device").contains("NVIDIA H200") && detail("device").contains("driver 580.159.04"), "{stdout}");
    assert_eq!(status("gpu holders"), "warn");
    assert!(detail("gpu holders").contains("pid 4242 (python3)"), "{stdout}");
    assert!(checks["gpu holders"].2.contains("skips (exit 3)"), "the fix says what a run would do: {stdout}");
    for ok in ["host lock", "server binary", "model", "port", "store"] {
        assert_eq!(status(ok), "ok", "{ok}: {stdout}");
    }
    assert!(detail("model").contains("models/tiny.gguf"), "{stdout}");
    assert_eq!(std::fs::read_dir(&store).unwrap().count(), 0, "the store's probe file is gone");
    assert_eq!(
        checks.values().filter(|c| c.0 != "ok").filter(|c| c.2.is_empty()).count(),
        0,
        "every line that is not ok has a fix: {stdout}"
    );

    // Now break what a run needs: no model, a server that cannot execute, the port taken, holders unknowable,
    // no kernel log.
    f.model = false;
    f.executable = false;
    std::fs::write(gpu.join("unknown"), "NVML: insufficient permissions").unwrap();
    let _port = std::net::TcpListener::bind(("127.0.0.1", f.port)).unwrap();
    let missing = f.path().join("no-such-kmsg");
    let env = [
        ("GAUNTLET_FAKE_GPU", gpu.to_str().unwrap()),
        ("GAUNTLET_KMSG_FILE", missing.to_str().unwrap()),
        ("GAUNTLET_LOCK_DIR", locks.to_str().unwrap()),
    ];
    let (code, checks, stdout) = doctor(&f, &env, true);
    assert_eq!(code, 1, "a run would fail: {stdout}");
    let status = |subject: &str| checks.get(subject).map(|c| c.0.as_str()).unwrap_or("(missing)");
    assert_eq!(status("kernel log"), "warn", "blind is a warning: {stdout}");
    assert!(checks["kernel log"].2.contains("CAP_SYSLOG"), "{stdout}");
    assert_eq!(status("gpu holders"), "fail", "{stdout}");
    assert!(checks["gpu holders"].1.contains("NVML: insufficient permissions"), "{stdout}");
    assert_eq!(status("server binary"), "fail", "{stdout}");
    assert!(checks["server binary"].1.contains("is not executable"), "{stdout}");
    assert_eq!(status("model"), "fail", "{stdout}");
    assert_eq!(status("port"), "warn", "{stdout}");
    assert!(checks["port"].2.contains("--port"), "{stdout}");

    // The human form: one line per check, the fix under it, and the tally.
    let (code, _, text) = doctor(&f, &env, false);
    assert_eq!(code, 1);
    assert!(text.lines().any(|l| l.trim_start().starts_with("FAIL  model")), "{text}");
    assert!(text.lines().any(|l| l.trim_start().starts_with("fix: ")), "{text}");
    assert!(text.trim_end().ends_with("3 fail: a run would fail"), "{text}");
}

/// A GPU profile whose server never holds the GPU computed on the CPU: the run says so. When the server's
/// process does hold it, the run records its pid and memory and says nothing.
#[test]
fn server_that_never_touches_its_gpu_is_flagged() {
    let f = Fixture::new("on-gpu").profile("device = \"nvidia:0\"").fault(&["--token-delay-ms", "20"]);
    let gpu = fake_gpu(f.path(), &[]);
    let env = [("GAUNTLET_FAKE_GPU", gpu.to_str().unwrap())];
    let cpu_only = run_with_env(&f, "cpu-only", &env);
    assert_eq!(cpu_only.code, 0, "{}", cpu_only.explain());
    let finding = &cpu_only.findings("server-not-on-gpu");
    assert_eq!(finding.len(), 1, "{}", cpu_only.explain());
    assert_eq!(finding[0]["severity"], "warn");
    assert!(finding[0]["message"].as_str().unwrap().contains("no process held nvidia:0 while the server ran"));

    // The server takes the GPU as it starts (the test stands in for the driver's process table).
    let tag = f.tag.clone();
    let holders = gpu.join("holders");
    let registrar = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(pid) = common::processes_tagged(&tag).first() {
                std::fs::write(holders.join(pid.to_string()), "fake-server 536870912").unwrap();
                return *pid as u64;
            }
            assert!(std::time::Instant::now() < deadline, "server never started");
            std::thread::sleep(Duration::from_millis(5));
        }
    });
    let on_gpu = run_with_env(&f, "on-gpu", &env);
    let pid = registrar.join().unwrap();
    assert_eq!(on_gpu.code, 0, "{}", on_gpu.explain());
    assert!(!on_gpu.has_finding("server-not-on-gpu"), "{}", on_gpu.explain());
    let sentry = &on_gpu.record.as_ref().unwrap()["sentry"];
    assert_eq!(sentry["server_gpu_pids"], serde_json::json!([pid]), "{sentry}");
    assert_eq!(sentry["server_gpu_memory_bytes"], 536870912, "{sentry}");
}

/// `report --merge` over a matrix: every profile the plan emitted must report; the summary goes to stdout, the
/// step summary and files, and the exit code is the merged verdict's.
#[test]
fn report_merge_checks_the_matrix_and_writes_its_outputs() {
    let f = Fixture::new("merge");
    let run = f.run(&[]);
    assert_eq!(run.code, 0, "{}", run.explain());
    let matrix = f.path().join("matrix.json");
    let out = f.path().join("merged");
    let step_summary = f.path().join("step-summary.md");
    let shards = f.path().join("out");
    let merge = |matrix_json: &str| {
        std::fs::write(&matrix, matrix_json).unwrap();
        let args = [
            "report",
            "--merge",
            shards.to_str().unwrap(),
            "--matrix",
            matrix.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--artifact",
            "gauntlet-{profile}",
        ];
        let env = [("GITHUB_STEP_SUMMARY", step_summary.to_str().unwrap()), ("GITHUB_ACTIONS", "true")];
        let o = gauntlet(&args, &env, Duration::from_secs(30));
        (o.status.code(), String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let (code, stdout) = merge(r#"{"include":[{"profile":"test"},{"profile":"gpu-big"}]}"#);
    assert_eq!(code, Some(1), "a shard missing from the matrix fails: {stdout}");
    assert!(stdout.contains("::error title=gauntlet merge::no shard for profile `gpu-big`"), "{stdout}");
    assert!(stdout.contains("| gpu-big | fail | missing"), "{stdout}");
    let merged: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("merged.json")).unwrap()).unwrap();
    assert_eq!(merged["verdict"], "fail");
    assert!(std::fs::read_to_string(out.join("junit.xml")).unwrap().contains("name=\"gpu-big\""));

    let (code, stdout) = merge(r#"{"include":[{"profile":"test"}]}"#);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("| test | warn |") && stdout.contains("artifact `gauntlet-test`"), "{stdout}");
    assert!(stdout.contains("- **worst finding** (warn, `test`): no-baseline"), "{stdout}");
    assert_eq!(std::fs::read_to_string(out.join("summary.md")).unwrap(), stdout);
    let appended = std::fs::read_to_string(&step_summary).unwrap();
    assert_eq!(appended.matches("## gauntlet: ").count(), 2, "each merge appends its summary: {appended}");

    let (code, _) = merge(r#"{"profiles": ["test"]}"#);
    assert_eq!(code, Some(2), "a matrix of another shape is bad input");
}

/// `gauntlet qualify` on the fixture: the model gets the sha256 qualification demands. Returns the exit code, the
/// report, the bundle folder and stdout.
fn qualify(f: &Fixture, stages: &str) -> (Option<i32>, serde_json::Value, PathBuf, String) {
    qualify_into(f, stages, "bundle", &[], &[])
}

/// Every stage in seconds on the fake server: few problems, short answers, a fast monitor.
const QUICK_QUALIFY: &str = "[profiles.test.qualify]\nquality = { count = 3, floor = 0.0 }\n\
    saturation = { max_tokens = 8 }\nperformance = { max_tokens = 8, warmups = 0, samples = 3 }\n\
    monitor = { interval = \"100ms\" }";
const ALL_STAGES: &str = "R1,R2,R3,R4,R5,R6";

fn qualify_into(
    f: &Fixture,
    stages: &str,
    folder: &str,
    env: &[(&str, &str)],
    extra: &[&str],
) -> (Option<i32>, serde_json::Value, PathBuf, String) {
    let manifest = f.write();
    let text = std::fs::read_to_string(&manifest).unwrap().replace(
        "path = \"models/tiny.gguf\"",
        &format!(
            "path = \"models/tiny.gguf\"\nsha256 = \"{}\"",
            gauntlet_engine::util::sha256_hex(b"GGUF fake weights")
        ),
    );
    std::fs::write(&manifest, text).unwrap();
    let out = f.path().join(folder);
    let mut args =
        vec!["qualify", "--manifest", manifest.to_str().unwrap(), "--stages", stages, "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = gauntlet(&args, env, Duration::from_secs(120));
    assert_no_survivors(&f.tag);
    let report = std::fs::read_to_string(out.join("qualification.json"))
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&o.stderr)));
    (o.status.code(), serde_json::from_str(&report).unwrap(), out, String::from_utf8_lossy(&o.stdout).into_owned())
}

fn stage<'a>(report: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    report["stages"].as_array().unwrap().iter().find(|s| s["id"] == id).unwrap()
}

#[test]
fn qualify_stage_over_its_timeout_fails_and_the_bundle_still_verifies() {
    let f = Fixture::new("qualify-timeout")
        .fault(&["--token-delay-ms", "300"])
        .profile("request_timeout = \"20s\"\n[profiles.test.qualify]\ntimeouts = { R1 = \"1s\" }");
    let (code, report, bundle, stdout) = qualify(&f, "R1");
    assert_eq!(code, Some(1), "{stdout}");
    let r1 = stage(&report, "R1");
    assert_eq!((r1["status"].as_str(), r1["timed_out"].as_bool()), (Some("fail"), Some(true)), "{stdout}");
    assert!(r1["failures"][0].as_str().unwrap().starts_with("stage timeout of 1s reached"), "{r1}");
    assert_eq!(stage(&report, "R2")["status"], "not-run");
    assert_eq!(stage(&report, "R7")["status"], "pass", "{stdout}");
    assert_eq!((report["verdict"].as_str(), report["partial"].as_bool()), (Some("fail"), Some(true)));
    let md = std::fs::read_to_string(bundle.join("qualification.md")).unwrap();
    assert!(md.contains("| R1 |") && md.contains("FAIL (timed out)"), "{md}");
    let v = gauntlet(&["verify", bundle.to_str().unwrap()], &[], Duration::from_secs(30));
    assert_eq!(v.status.code(), Some(0), "{}", String::from_utf8_lossy(&v.stdout));
}

#[test]
fn qualify_server_death_between_stages_fails_the_next_stage() {
    // Warm-up + the 5 cases of R1 answered, then the server exits: R2 must find it down.
    let f = Fixture::new("qualify-death").fault(&["--fault", "crash-after", "--crash-after", "6"]);
    let (code, report, _, stdout) = qualify(&f, "R1,R2,R3,R6");
    assert_eq!(code, Some(1), "{stdout}");
    assert_eq!(stage(&report, "R1")["status"], "pass", "{stdout}");
    // The exit races the health probe after R1: R2 finds the server down, or loses its requests to the dying
    // server and R3 finds it down. Either way the stage that follows the death fails and the rest do not run.
    assert_eq!(stage(&report, "R2")["status"], "fail", "{stdout}");
    let down = ["R2", "R3"]
        .into_iter()
        .find(|id| {
            stage(&report, id)["failures"][0]
                .as_str()
                .unwrap_or("")
                .starts_with("the server is down before this stage: exited")
        })
        .unwrap_or_else(|| panic!("no stage found the server down: {stdout}"));
    if down == "R2" {
        assert_eq!(stage(&report, "R3")["status"], "not-run", "{stdout}");
        assert_eq!(stage(&report, "R3")["summary"], "the server died in an earlier stage");
    }
    assert_eq!(stage(&report, "R6")["status"], "fail", "{stdout}");
    assert_eq!(stage(&report, "R7")["status"], "pass", "{stdout}");
}

#[test]
fn qualify_refuses_a_model_without_a_pinned_sha256_and_starts_nothing() {
    let f = Fixture::new("qualify-nosha");
    let manifest = f.write();
    let out = f.path().join("bundle");
    let args = ["qualify", "--manifest", manifest.to_str().unwrap(), "--stages", "R1", "--out", out.to_str().unwrap()];
    let o = gauntlet(&args, &[], Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(1));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("qualification.json")).unwrap()).unwrap();
    let r0 = stage(&report, "R0");
    assert_eq!(r0["status"], "fail");
    assert!(r0["failures"][0].as_str().unwrap().contains("has no sha256 in the manifest"), "{r0}");
    assert_eq!(stage(&report, "R1")["summary"], "R0 failed: the run stops");
    assert!(!out.join("server.log").exists(), "no server was started");
    assert_no_survivors(&f.tag);
    // The same folder is never overwritten.
    let again = gauntlet(&args, &[], Duration::from_secs(60));
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds a qualification"));
}

#[test]
fn baseline_promote_records_a_reviewed_qualification_that_the_next_qualify_compares_with() {
    let f = Fixture::new("qualify-promote").profile(QUICK_QUALIFY);
    let store = f.path().join("store");
    let env = [("GAUNTLET_STORE", store.to_str().unwrap())];
    let (code, report, bundle, stdout) = qualify_into(&f, ALL_STAGES, "first", &env, &[]);
    assert_eq!(code, Some(0), "{stdout}");
    assert_eq!(
        stage(&report, "R5")["summary"],
        "no baseline: recorded as candidate evidence, no performance gate applied"
    );
    let b = bundle.to_str().unwrap();
    let promote = |dir: &str, note: &str| {
        let o = gauntlet(&["baseline", "promote", dir, "--trusted", "--note", note], &env, Duration::from_secs(30));
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };

    // Refused: no reviewer's note; a bundle that no longer verifies; a partial one.
    let (code, _, err) = promote(b, "");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("say why with --note"), "{err}");
    let tampered = f.path().join("tampered");
    copy_dir(&bundle, &tampered);
    let r1 = tampered.join("r1-correctness.json");
    let text = std::fs::read_to_string(&r1).unwrap().replacen("\"pass\"", "\"fail\"", 1);
    std::fs::write(&r1, text).unwrap();
    let (code, _, err) = promote(tampered.to_str().unwrap(), "looks fine");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("is not promoted") && err.contains("r1-correctness.json"), "{err}");
    let (_, _, partial, _) = qualify_into(&f, "R1", "partial", &env, &[]);
    let (code, _, err) = promote(partial.to_str().unwrap(), "looks fine");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("a partial qualification (R2, R3, R4, R5, R6 not run) is not promoted"), "{err}");

    // Accepted: the decision enters the identity's hash-chained history and the store still verifies.
    let (code, out, err) = promote(b, "reviewed the bundle; R2 floor is the demo's");
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("qualified: #1 of profile `test`, qualification promoted"), "{out}");
    assert!(out.contains(&format!("bundle {}", report["run_id"].as_str().unwrap())), "{out}");
    let v = gauntlet(&["baseline", "verify"], &env, Duration::from_secs(30));
    assert_eq!(v.status.code(), Some(0), "{}", String::from_utf8_lossy(&v.stdout));
    let format = std::fs::read_to_string(store.join("format.json")).unwrap();
    assert!(format.contains("\"format\": 2"), "{format}");
    let history = std::fs::read_dir(store.join("history")).unwrap().next().unwrap().unwrap().path();
    let entry: serde_json::Value =
        serde_json::from_str(std::fs::read_to_string(&history).unwrap().lines().next().unwrap()).unwrap();
    assert_eq!(
        (entry["kind"].as_str(), entry["note"].as_str()),
        (Some("qualification"), Some("reviewed the bundle; R2 floor is the demo's"))
    );
    let decision: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(store.join("records").join(format!("{}.json", entry["record"].as_str().unwrap())))
            .unwrap(),
    )
    .unwrap();
    let manifest_sha = gauntlet_engine::util::sha256_file(&bundle.join("evidence-manifest.json")).unwrap();
    assert_eq!(decision["evidence_manifest_sha256"], manifest_sha.as_str());

    // The next qualification of the same identity compares R5 with the promoted one, unasked.
    let (code, again, _, stdout) = qualify_into(&f, "R5", "second", &env, &[]);
    assert!(matches!(code, Some(0) | Some(1) | Some(4)), "{stdout}");
    assert!(
        again["baseline"].as_str().unwrap().starts_with(&format!("store:{}", entry["record"].as_str().unwrap())),
        "{again}"
    );
    assert_ne!(stage(&again, "R5")["summary"], stage(&report, "R5")["summary"], "R5 had something to compare with");
    // A gate run of that identity still has no run baseline: a decision is not a gate baseline.
    let show = gauntlet(
        &["baseline", "show", "--manifest", f.path().join("gauntlet.toml").to_str().unwrap()],
        &env,
        Duration::from_secs(30),
    );
    assert!(
        String::from_utf8_lossy(&show.stdout).contains("qualification promoted"),
        "{}",
        String::from_utf8_lossy(&show.stdout)
    );
}

#[test]
fn qualification_html_is_self_contained_and_renders_in_chromium_without_console_errors() {
    let f = Fixture::new("qualify-html").profile(QUICK_QUALIFY);
    let (code, _, first, stdout) = qualify_into(&f, ALL_STAGES, "first", &[], &[]);
    assert_eq!(code, Some(0), "{stdout}");
    let (_, report, bundle, stdout) =
        qualify_into(&f, ALL_STAGES, "second", &[], &["--baseline", first.to_str().unwrap()]);
    assert!(report["baseline"].is_string(), "{stdout}");
    let page = bundle.join("qualification.html");
    let html = std::fs::read_to_string(&page).unwrap();
    // Every plot the report promises: R4 and R5 latency CDFs, RSS and health latency over time, and one
    // baseline-against-candidate chart per compared metric.
    for title in [
        "R4 time to first token: cumulative distribution",
        "R5 end-to-end latency: cumulative distribution",
        "server RSS (process group) over time",
        "health latency over time",
        "ttft_mean: one dot per measured batch",
        "output_throughput_wall: one dot per measured batch",
    ] {
        assert!(html.contains(&format!("<title>{title}")), "no plot `{title}`");
    }
    assert!(html.contains("c2 baseline") && html.contains("c2 now"), "baseline and candidate side by side");
    // Readable offline: nothing is fetched, nothing runs.
    for outside in ["<script", "src=", "href=", "url(", "https://", "@import"] {
        assert!(!html.contains(outside), "the report refers outside itself: `{outside}`");
    }
    let png = f.path().join("report.png");
    let console = render_in_chromium(&page, &png);
    assert!(console.is_empty(), "console messages while rendering the report:\n{}", console.join("\n"));
    assert!(std::fs::metadata(&png).unwrap().len() > 20_000, "the screenshot is nearly empty");
    // The check itself works: a page that tries to load an outside image under the same policy is caught.
    let bad = f.path().join("bad.html");
    std::fs::write(&bad, html.replacen("<h1>", "<img src=\"https://example.invalid/x.png\"><h1>", 1)).unwrap();
    assert!(!render_in_chromium(&bad, &f.path().join("bad.png")).is_empty(), "a refused load went unnoticed");
    // The bundle still verifies with its HTML in it (the page is a view, not evidence).
    let v = gauntlet(&["verify", bundle.to_str().unwrap()], &[], Duration::from_secs(30));
    assert_eq!(v.status.code(), Some(0), "{}", String::from_utf8_lossy(&v.stdout));
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn compare_exits_by_its_losslessness_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, hello: &str| {
        let run = serde_json::json!({"suite": {"digest": "s"}, "cases": [{"id": "hello", "observed": hello}]});
        let path = dir.path().join(name);
        std::fs::create_dir_all(&path).unwrap();
        std::fs::write(path.join("run.json"), run.to_string()).unwrap();
        path.to_str().unwrap().to_owned()
    };
    let (a, a2, b, noisy) =
        (write("a", "Hi there"), write("a2", "Hi there"), write("b", "Hi where"), write("n", "Hey"));
    let code = |args: &[&str]| gauntlet(args, &[], Duration::from_secs(30)).status.code();
    assert_eq!(code(&["compare", &a, &a2, "--control", &a2]), Some(0));
    assert_eq!(code(&["compare", &a, &b, "--control", &a2]), Some(1));
    assert_eq!(code(&["compare", &a, &b, "--control", &noisy]), Some(4));
    assert_eq!(code(&["compare", &a, "/nonexistent/run.json"]), Some(2));
    let o = gauntlet(&["compare", &a, &b, "--control", &a2], &[], Duration::from_secs(30));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("differs        hello at char 3") && text.contains("lossless: FAIL (with a control run)"),
        "{text}"
    );
}
