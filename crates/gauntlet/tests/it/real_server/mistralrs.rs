//! The second real engine: mistral.rs 0.8.1 (`scripts/setup.sh --mistralrs`) serving the same GGUF file as the
//! llama.cpp profiles, started through its kind alone (the embedded default's `mistralrs` profile: the kind's launch
//! template with `--format gguf`, the model's name learned from `/v1/models` past its `default` alias). The default
//! suite runs end to end: every case is answered, the declared failures fail as declared, and the server's own
//! words about itself (its `Server` header, its models) are in the record.

use std::time::Duration;

use super::{assert_every_case_answered, assert_server_gone, home};
use crate::common::{finish, free_port, gauntlet};

#[test]
fn mistral_rs_runs_the_default_suite_through_its_kind() {
    let binary = home().join("mistralrs/bin/mistralrs");
    assert!(binary.is_file(), "run scripts/setup.sh --mistralrs first ({} is missing)", binary.display());
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let out = dir.path().join("run");
    let (store, home) = (dir.path().join("store"), home());
    let env = [("GAUNTLET_STORE", store.to_str().unwrap()), ("GAUNTLET_HOME", home.to_str().unwrap())];
    let args = ["run", "--profile", "mistralrs", "--port", &port.to_string(), "--out", out.to_str().unwrap()];
    let run = finish(gauntlet(&args, &env, Duration::from_secs(900)), &out);
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
    let declared = ["multiply", "count", "json", "translate", "unicode", "tool", "stream", "think"];
    let failed: Vec<&str> = cases.iter().filter(|c| c["status"] == "fail").filter_map(|c| c["id"].as_str()).collect();
    assert!(failed.iter().all(|id| declared.contains(id)), "an undeclared failure: {failed:?}\n{}", run.explain());
    assert_eq!(run.case("needle")["status"], "pass", "the long prompt is answered in time\n{}", run.explain());
    // Started through the kind: the argv has its template, and the served model's name was learned.
    let readiness = &record["server"]["readiness"];
    assert_eq!(readiness["discovered_model"], home.join("models").to_str().unwrap(), "{readiness}");
    assert_eq!(run.case("capital")["request"]["model"], readiness["discovered_model"]);
    let log = std::fs::read_to_string(out.join("server.log")).unwrap_or_default();
    assert!(log.contains("Model loaded"), "mistral.rs's own log is kept: {log}");
    // Greedy answers repeat byte for byte, on this engine too.
    assert_eq!(run.case("multiply-again")["status"], "pass", "{}", run.explain());
    assert_eq!(run.case("multiply-again")["observed"], run.case("multiply")["observed"]);
    // Tokens: the chosen token's text, alternatives with their ids (mistral.rs's own shape).
    let tokens = &run.case("capital")["answer"]["tokens"];
    let first = &tokens["items"][0];
    assert!(first["top"].as_array().is_some_and(|t| !t.is_empty() && t.iter().all(|a| a["id"].is_u64())), "{tokens}");
    // 0.8.1 serves no /metrics: the scrape says so instead of failing the run.
    let metrics = &record["server_metrics"];
    assert_eq!(metrics["before"]["ok"], false, "{metrics}");
    assert!(metrics["before"]["error"].as_str().unwrap_or_default().contains("404"), "{metrics}");
}
