//! Conformance dialects: a default-style suite (plain, streamed, tool call streamed and not, thinking streamed and
//! not, a refused prompt, a repeat) against the fake server speaking each engine's wire shapes (`--dialect`, shapes
//! in docs/dialects.md). Each run passes; reasoning is read from the engine's field, usage and cached tokens are
//! found, a streamed tool call equals the non-streamed one, and the refusal surfaces in the engine's own error
//! shape with its message.

use serde_json::json;

use super::*;

const DIALECT_SUITE: &str = r#"
id = "dialects"
version = 1

[[cases]]
id = "plain"
max_tokens = 64
messages = [{ role = "user", content = "Say alpha." }]
check = { contains = ["alpha"] }

[[cases]]
id = "stream"
max_tokens = 64
stream = true
messages = [{ role = "user", content = "Say gamma." }]
check = { contains = ["gamma"] }

[[cases]]
id = "tool"
max_tokens = 96
messages = [{ role = "user", content = "What is the weather like in Lisbon right now? Use the tool." }]
tools = [{ type = "function", function = { name = "get_weather", parameters = { type = "object", properties = { city = { type = "string" } } } } }]
check = { tool_call = { name = "get_weather", arguments_contain = { city = "lisbon" } } }

[[cases]]
id = "tool-stream"
max_tokens = 96
stream = true
messages = [{ role = "user", content = "What is the weather like in Lisbon right now? Use the tool." }]
tools = [{ type = "function", function = { name = "get_weather", parameters = { type = "object", properties = { city = { type = "string" } } } } }]
check = { tool_call = { name = "get_weather", arguments_contain = { city = "lisbon" } } }

[[cases]]
id = "think"
max_tokens = 256
thinking = true
messages = [{ role = "user", content = "Think step by step: what is 12 plus 30?" }]
check = { field = "any", number = 42 }

[[cases]]
id = "think-stream"
max_tokens = 256
thinking = true
stream = true
messages = [{ role = "user", content = "Think step by step: what is 12 plus 30?" }]
check = { field = "any", number = 42 }

[[cases]]
id = "refused"
max_tokens = 16
messages = [{ role = "user", content = "REFUSE this one." }]
check = { contains = ["never"] }

[[cases]]
id = "plain-again"
repeat_of = "plain"
"#;

/// The fake server's messages (crates/gauntlet-fake-server/src/dialect.rs).
const REFUSAL: &str = "the prompt was refused by the fake server";
const REASONING: &str = "Let me think this through.";

/// Runs the dialect suite against the fake server speaking `dialect`, started by gauntlet from a spawn profile. The
/// fixture holds the run's folder.
fn run_dialect(dialect: &str) -> (Fixture, Run) {
    run_replay(dialect, dialect, &["refused"])
}

/// Runs the dialect suite against the fake server speaking `wire`, the profile naming `dialect` (the kind whose
/// wire gauntlet expects) and the `expected` failures.
fn run_replay(wire: &str, dialect: &str, expected: &[&str]) -> (Fixture, Run) {
    let mut answers = good_answers();
    answers.push(("weather", r#"{"city": "Lisbon"}"#.into()));
    answers.push(("12 plus 30", "The sum is 42".into()));
    let expected: Vec<String> = expected.iter().map(|e| format!("{e:?}")).collect();
    let mut f = Fixture::new(&format!("dialect-{}-{}", wire.replace('.', ""), dialect.replace('.', "")))
        .answers(answers)
        .fault(&["--dialect", wire])
        .profile(&format!("dialect = \"{dialect}\""))
        // vLLM, Ollama and transformers refuse any model name but the one they serve (404, 400).
        .profile("request_model = \"fake-model\"")
        .profile(&format!("expected_failures = [{}]", expected.join(", ")))
        // Passed through to every request (TRT-LLM's replay refuses any field its request type lacks).
        .profile("extra_body = { seed = 1 }");
    if wire == "ollama" {
        // Ollama has no `/health`; its root answers (docs/dialects.md §4.2).
        f = f.profile("health_path = \"/\"");
    }
    let manifest = f.write();
    std::fs::write(f.path().join("dialects.toml"), DIALECT_SUITE).unwrap();
    let text =
        std::fs::read_to_string(&manifest).unwrap().replace("suite = \"suite.toml\"", "suite = \"dialects.toml\"");
    std::fs::write(&manifest, text).unwrap();
    let out = f.path().join("out");
    let args = ["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let run = finish(gauntlet(&args, &[], Duration::from_secs(90)), &out);
    assert_no_survivors(&f.tag);
    (f, run)
}

/// What every dialect must give: a passing run, reasoning from the engine's field, a streamed tool call equal to the
/// non-streamed one, usage in streams, and the refusal's message in the refused case.
fn assert_conforms(dialect: &str, run: &Run, has_reasoning: bool, cached: Option<u64>) {
    assert_eq!(run.code, 0, "{dialect}: {}", run.explain());
    // A first run has no baseline to compare with: that warning is the only one.
    let findings = run.record.as_ref().map(|r| r["findings"].clone()).unwrap_or_default();
    let serious: Vec<&serde_json::Value> = findings
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["severity"] != "info" && f["kind"] != "no-baseline")
        .collect();
    assert!(serious.is_empty(), "{dialect}: {serious:?}");
    assert_eq!(run.verdict(), "warn", "{dialect}: {findings}");
    for id in ["plain", "stream", "tool", "tool-stream", "think", "think-stream", "plain-again"] {
        assert_eq!(run.case(id)["status"], "pass", "{dialect} {id}: {}", run.case(id));
    }
    let (tool, streamed) = (run.case("tool"), run.case("tool-stream"));
    assert_eq!(streamed["answer"]["tool_calls"], tool["answer"]["tool_calls"], "{dialect}");
    assert_eq!(streamed["answer"]["tool_calls"][0]["name"], "get_weather", "{dialect}");
    let want = if has_reasoning { REASONING } else { "" };
    for id in ["think", "think-stream"] {
        assert_eq!(run.case(id)["answer"]["reasoning"], want, "{dialect} {id}: {}", run.case(id));
    }
    let usage = &run.case("stream")["answer"]["usage"];
    assert!(usage["completion_tokens"].as_u64().is_some(), "{dialect}: no usage in the stream: {usage}");
    for id in ["plain", "stream"] {
        let got = run.case(id)["answer"]["usage"]["cached_tokens"].as_u64();
        assert_eq!(got, cached, "{dialect} {id}");
    }
    let refused = run.case("refused");
    assert_eq!(refused["status"], "fail", "{dialect}: {refused}");
    let detail = refused["checks"][0]["detail"].as_str().unwrap_or_default();
    assert!(detail.contains(REFUSAL), "{dialect}: the engine's message is surfaced: {detail}");
}

#[test]
fn vllm_dialect_passes_the_suite() {
    let (_f, run) = run_dialect("vllm");
    assert_conforms("vllm", &run, true, Some(8));
    let detail = run.case("refused")["checks"][0]["detail"].as_str().unwrap_or_default().to_owned();
    assert!(detail.contains("HTTP 400") && detail.contains("BadRequestError"), "{detail}");
}

#[test]
fn sglang_dialect_passes_the_suite() {
    let (_f, run) = run_dialect("sglang");
    assert_conforms("sglang", &run, true, Some(8));
}

#[test]
fn tgi_dialect_passes_the_suite() {
    let (_f, run) = run_dialect("tgi");
    // TGI has no reasoning field and no thinking switch: nothing is sent, and the thinking stays in the content.
    assert_conforms("tgi", &run, false, None);
    let request = &run.case("think")["request"];
    assert!(request.get("chat_template_kwargs").is_none(), "{request}");
    let detail = run.case("refused")["checks"][0]["detail"].as_str().unwrap_or_default().to_owned();
    assert!(detail.contains("HTTP 422"), "TGI refuses a prompt with 422: {detail}");
}

#[test]
fn trtllm_dialect_passes_the_suite() {
    let (_f, run) = run_dialect("trtllm");
    assert_conforms("trtllm", &run, true, Some(8));
    assert_eq!(run.case("plain")["request"]["seed"], 1, "the profile's extra_body is sent");
}

#[test]
fn ollama_dialect_passes_the_suite() {
    let (_f, run) = run_dialect("ollama");
    assert_conforms("ollama", &run, true, None);
    assert_eq!(run.case("plain")["request"]["reasoning_effort"], "none", "Ollama's thinking switch, off");
    assert!(run.case("think")["request"].get("reasoning_effort").is_none(), "on: the model's default");
}

#[test]
fn llamacpp_dialect_passes_the_suite_and_its_timings_reach_the_report() {
    let (_f, run) = run_dialect("llama.cpp");
    assert_conforms("llama.cpp", &run, true, None);
    for id in ["plain", "stream"] {
        let t = &run.case(id)["answer"]["timings"];
        assert_eq!((t["source"].clone(), t["predicted_per_second"].clone()), (json!("llama.cpp"), json!(250.0)), "{t}");
        assert_eq!(t["cache_tokens"], 8, "{t}");
    }
    let report = std::fs::read_to_string(run.out.join("report.md")).unwrap();
    assert!(report.contains("## Server timings"), "{report}");
    assert!(report.contains("| stream | llama.cpp | 10 | 12.5 | 8 | 40 | 40.0 | 250.0 |"), "{report}");
}

/// `transformers serve`'s replay (its real server: `real_server::transformers`): its streams end at the body's end
/// after the finish chunk, which carries the usage, with no `data: [DONE]`; under its kind's dialect that is the
/// answer's end. The same stream under another kind's dialect is what it is for every other engine: cut short, a
/// request error. Tools are ignored (the two tool cases answer in text: declared), no token is asked, the refusal
/// is its plain-text HTTP 500, and the answers name the model `fake-model@main`.
#[test]
fn transformers_replay_ends_streams_without_done_only_under_its_kind() {
    let (_f, run) = run_replay("transformers", "transformers", &["refused", "tool", "tool-stream"]);
    // Its answer to a request it refuses is a plain-text HTTP 500, a server error: the one request error, and the
    // verdict's failure.
    let errors = run.findings("request-error");
    assert_eq!(errors.len(), 1, "{}", run.explain());
    assert_eq!(errors[0]["case"], "refused", "{}", run.explain());
    let said = errors[0]["message"].as_str().unwrap_or_default();
    assert!(said.contains("HTTP 500") && said.contains("Internal Server Error"), "{said}");
    assert_eq!((run.code, run.verdict()), (1, "fail"), "{}", run.explain());
    for id in ["plain", "stream", "think", "think-stream", "plain-again"] {
        assert_eq!(run.case(id)["status"], "pass", "{id}: {}", run.case(id));
    }
    let streamed = &run.case("stream")["answer"];
    assert!(streamed["content"].as_str().unwrap_or_default().starts_with("gamma"), "{streamed}");
    assert_eq!(streamed["finish_reason"], "stop", "{streamed}");
    assert!(streamed["usage"]["completion_tokens"].as_u64().is_some(), "usage on the finish chunk: {streamed}");
    for id in ["tool", "tool-stream"] {
        let case = run.case(id);
        assert_eq!(case["status"], "fail", "{id}: {case}");
        assert!(case["answer"]["tool_calls"].as_array().is_none_or(|c| c.is_empty()), "{id}: {case}");
    }
    // Nothing asked of tokens: the engine ignores `logprobs`.
    assert!(run.case("plain")["request"].get("logprobs").is_none(), "{}", run.case("plain")["request"]);

    // The same wire under vLLM's dialect: a stream without `[DONE]` is cut short, as for every kind but this one.
    let (_g, other) = run_replay("transformers", "vllm", &["refused", "tool", "tool-stream"]);
    let errors = other.findings("request-error");
    let cut: Vec<_> = errors.iter().filter(|e| e["case"] == "stream" || e["case"] == "think-stream").collect();
    assert_eq!(cut.len(), 2, "{}", other.explain());
    assert!(cut.iter().all(|e| e["message"].as_str().unwrap_or_default().contains("without `data: [DONE]`")));
    assert_eq!(other.case("plain")["status"], "pass", "{}", other.explain());
}

/// llama-cpp-python's replay (a replay: its server's 12-minute source build does not fit a cold CI run): no
/// `/health` (readiness moves on to `/v1/models`), no usage in a stream though `include_usage` asks, the model name
/// echoed, tools answered in text (declared), and `max_tokens = -1` (or none) unbounded — which a raw request
/// shows, while every request gauntlet sends carries a positive `max_tokens`, so the run is bounded.
#[test]
fn llama_cpp_python_replay_runs_bounded_without_health_or_streamed_usage() {
    let (f, run) = run_replay("llama-cpp-python", "llama-cpp-python", &["refused", "tool", "tool-stream"]);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.verdict(), "warn", "only the missing baseline: {}", run.explain());
    let record = run.record.as_ref().unwrap();
    assert_eq!(record["server"]["readiness"]["probe"], "models", "no /health: {}", record["server"]["readiness"]);
    for id in ["plain", "stream", "think", "think-stream", "plain-again"] {
        assert_eq!(run.case(id)["status"], "pass", "{id}: {}", run.case(id));
        let sent = run.case(id)["request"]["max_tokens"].as_u64().unwrap_or(0);
        assert!(sent >= 1, "{id}: every request is bounded: {}", run.case(id)["request"]);
    }
    let stream = run.case("stream");
    assert_eq!(stream["request"]["stream_options"]["include_usage"], true, "{stream}");
    assert!(stream["answer"]["usage"].is_null(), "no usage in its streams: {}", stream["answer"]);
    let detail = run.case("refused")["checks"][0]["detail"].as_str().unwrap_or_default().to_owned();
    assert!(detail.contains(REFUSAL), "{detail}");
    assert_no_survivors(&f.tag);

    // What a request without a bound gets from it: more than gauntlet's response limit (8 MiB), not an answer.
    let g = Fixture::new("llama-cpp-python-unbounded");
    g.write();
    let port = free_port();
    let mut server = std::process::Command::new(workspace_bin("gauntlet-fake-server"))
        .args(["--port", &port.to_string(), "--tag", &g.tag, "--lifetime-s", "60", "--dialect", "llama-cpp-python"])
        .args(["--answers", g.path().join("answers.json").to_str().unwrap()])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let body = r#"{"model":"any-name","messages":[{"role":"user","content":"Say alpha."}],"max_tokens":-1}"#;
    let read = unbounded_answer_bytes(port, body);
    let _ = server.kill();
    let _ = server.wait();
    assert!(read > 8 << 20, "an unbounded answer: {read} bytes");
}

/// POSTs `body` to the chat endpoint on `port` and counts the answer's bytes, reading at most 9 MiB, each read
/// within 10 s (the server may take a moment to start).
fn unbounded_answer_bytes(port: u16, body: &str) -> usize {
    use std::io::{Read as _, Write as _};
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut stream = loop {
        match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(_) if std::time::Instant::now() < deadline => {
                // A bounded wait for the fake server to listen, not a blind sleep: each try is a connect.
                std::thread::park_timeout(Duration::from_millis(50));
            }
            Err(e) => panic!("the fake server never listened: {e}"),
        }
    };
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut total = 0;
    let mut buf = vec![0u8; 1 << 16];
    while total <= 9 << 20 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
    total
}
