//! A third real engine: `transformers serve` (transformers 5.19.0, torch 2.13.0, CPU), the `transformers` CLI of the
//! vLLM venv (`scripts/setup.sh --vllm`: no install of its own), serving the safetensors directory made for vLLM.
//! Started through its kind alone (the embedded default's `transformers` profile). The default suite runs end to
//! end: its streams end without `data: [DONE]` (the kind's end, not a request error), the model is asked for by its
//! launch argument and answers as `<path>@main`, and the declared failures fail as declared.

use std::time::Duration;

use super::{assert_every_case_answered, assert_server_gone, home};
use crate::common::{finish, free_port, gauntlet};

#[test]
fn transformers_serve_runs_the_default_suite_through_its_kind() {
    let binary = home().join("vllm/bin/transformers");
    assert!(binary.is_file(), "run scripts/setup.sh --vllm first ({} is missing)", binary.display());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let out = dir.path().join("run");
    let (store, home) = (dir.path().join("store"), home());
    let env = [("GAUNTLET_STORE", store.to_str().unwrap()), ("GAUNTLET_HOME", home.to_str().unwrap())];
    let args = ["run", "--profile", "transformers", "--port", &port.to_string(), "--out", out.to_str().unwrap()];
    let run = finish(gauntlet(&args, &env, Duration::from_secs(1200)), &out);
    assert_server_gone(port);
    assert_eq!(run.code, 0, "{}", run.explain());
    assert_eq!(run.verdict(), "warn", "no baseline yet\n{}", run.explain());
    let (record, cases) = assert_every_case_answered(&run);
    let serious: Vec<&serde_json::Value> = record["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["severity"] == "fail" || (f["severity"] == "warn" && f["kind"] != "no-baseline"))
        .collect();
    assert!(serious.is_empty(), "only the missing baseline may warn: {serious:?}\n{}", run.explain());
    // Without a baseline nothing is compared, so the declared failures are checked here: no other case fails.
    // `tool` and `json` cannot pass (the engine ignores `tools` and `response_format`); the other five are the
    // model's answers (measured, default.toml).
    let declared = ["multiply", "count", "json", "translate", "unicode", "tool", "think"];
    let failed: Vec<&str> = cases.iter().filter(|c| c["status"] == "fail").filter_map(|c| c["id"].as_str()).collect();
    assert!(failed.iter().all(|id| declared.contains(id)), "an undeclared failure: {failed:?}\n{}", run.explain());
    // The streamed case ends at the body's end after its finish chunk, with the usage that chunk carries.
    let stream = run.case("stream");
    assert_eq!(stream["status"], "pass", "{}", run.explain());
    assert!(stream["answer"]["finish_reason"].is_string(), "{stream}");
    assert!(stream["answer"]["usage"]["completion_tokens"].as_u64().is_some_and(|n| n > 0), "{stream}");
    // The tool is ignored: the answer is text, not a call.
    let tool = &run.case("tool")["answer"];
    assert!(tool["tool_calls"].as_array().is_none_or(|c| c.is_empty()), "{tool}");
    // Asked for by its launch argument, the model directory; ready on `/health`.
    let model = home.join("models/SmolLM2-135M-Instruct.Q4_1.hf");
    assert_eq!(run.case("capital")["request"]["model"], model.to_str().unwrap());
    assert_eq!(record["server"]["readiness"]["probe"], "health", "{}", record["server"]["readiness"]);
    let command: Vec<&str> =
        record["server"]["command"].as_array().unwrap().iter().filter_map(|a| a.as_str()).collect();
    assert_eq!(command[1..7], ["serve", "--host", "127.0.0.1", "--port", &port.to_string(), model.to_str().unwrap()]);
    let log = std::fs::read_to_string(out.join("server.log")).unwrap_or_default();
    assert!(log.contains("Uvicorn running"), "its own log is kept: {log}");
    // Greedy answers repeat byte for byte.
    assert_eq!(run.case("multiply-again")["status"], "pass", "{}", run.explain());
    assert_eq!(run.case("multiply-again")["observed"], run.case("multiply")["observed"]);
}
