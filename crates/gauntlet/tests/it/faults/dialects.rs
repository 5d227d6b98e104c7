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
    let mut answers = good_answers();
    answers.push(("weather", r#"{"city": "Lisbon"}"#.into()));
    answers.push(("12 plus 30", "The sum is 42".into()));
    let mut f = Fixture::new(&format!("dialect-{}", dialect.replace('.', "")))
        .answers(answers)
        .fault(&["--dialect", dialect])
        .profile(&format!("dialect = \"{dialect}\""))
        // vLLM and Ollama refuse any model name but the one they serve (404).
        .profile("request_model = \"fake-model\"")
        .profile("expected_failures = [\"refused\"]")
        // Passed through to every request (TRT-LLM's replay refuses any field its request type lacks).
        .profile("extra_body = { seed = 1 }");
    if dialect == "ollama" {
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
