//! Structured output against the real server (#34): the embedded default's xllamacpp launcher and SmolLM2-135M,
//! one case that sends `response_format` with a JSON Schema. llama.cpp turns the schema into a grammar, so even
//! this small model's answer must be an object the schema accepts; the `json_schema` check validates it. A bench
//! then sends the same schema with every request at concurrency 2 and records the rate of answers that kept to it.

use std::path::Path;
use std::time::Duration;

use super::home;
use crate::common::{assert_no_survivors, finish, free_port, gauntlet};

const MODEL: &str = "models/SmolLM2-135M-Instruct.Q4_1.gguf";

const SUITE: &str = r#"
id = "structured-real"
version = 1

[[cases]]
id = "city"
max_tokens = 96
messages = [{ role = "user", content = "Give the name and the population of the capital of France as JSON." }]
check = { json_schema = true }
[cases.response_format]
type = "json_schema"
[cases.response_format.json_schema]
name = "city"
strict = true
schema = { type = "object", additionalProperties = false, required = ["name", "population"], properties = { name = { type = "string", maxLength = 40 }, population = { type = "integer", minimum = 0 } } }
"#;

fn manifest(dir: &Path, port: u16) -> std::path::PathBuf {
    let home = home();
    for (link, target) in [("model.gguf", home.join(MODEL)), ("xllamacpp-server", home.join("bin/xllamacpp-server"))] {
        assert!(target.exists(), "{} is missing: run scripts/setup.sh", target.display());
        std::os::unix::fs::symlink(&target, dir.join(link)).unwrap();
    }
    std::fs::write(dir.join("suite.toml"), SUITE).unwrap();
    let text = format!(
        "version = 1\n[models.smol]\npath = \"model.gguf\"\n[servers.xllamacpp]\nbinary = \"xllamacpp-server\"\n\
         [profiles.structured]\nmodel = \"smol\"\nserver = \"xllamacpp\"\nport = {port}\nsuite = \"suite.toml\"\n\
         server_arguments = [\"-c\", \"2048\", \"-np\", \"1\"]\nload_timeout = \"120s\"\nrequest_timeout = \"60s\"\n\
         suite_budget = \"120s\"\n"
    );
    let path = dir.join("gauntlet.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_structured_output_case_passes_against_llama_server_with_its_grammar() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let m = manifest(dir.path(), port);
    let out = dir.path().join("out");
    let home = home();
    let env = [("GAUNTLET_HOME", home.to_str().unwrap()), ("GAUNTLET_STORE", dir.path().to_str().unwrap())];
    let args = ["run", "--manifest", m.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let run = finish(gauntlet(&args, &env, Duration::from_secs(300)), &out);
    assert_no_survivors(&format!("--port {port}"));
    let record = run.record.as_ref().unwrap_or_else(|| panic!("no run.json\n{}", run.explain()));
    let case = &record["cases"][0];
    assert_eq!(case["id"], "city");
    let checks = case["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 1, "{case:#}");
    assert_eq!(checks[0]["check"], "json_schema");
    assert_eq!(case["request"]["response_format"]["json_schema"]["name"], "city", "the schema was sent: {case:#}");
    let content = case["answer"]["content"].as_str().unwrap_or_default();
    eprintln!("structured answer: {content}");
    // The grammar leaves no room for prose or fences: the whole answer is the object.
    let whole: serde_json::Value = serde_json::from_str(content.trim()).unwrap_or_else(|e| panic!("{e}: {content}"));
    assert!(whole.is_object(), "{content}");
    assert_eq!(case["status"], "pass", "the grammar-constrained answer must match its schema: {case:#}");
}

/// The [`SUITE`]'s schema as the bench's `response_format`.
const BENCH_FORMAT: &str = "response_format = { type = \"json_schema\", json_schema = { name = \"city\", strict = true, \
     schema = { type = \"object\", additionalProperties = false, required = [\"name\", \"population\"], properties = \
     { name = { type = \"string\", maxLength = 40 }, population = { type = \"integer\", minimum = 0 } } } } }";

#[test]
fn a_structured_bench_against_llama_server_records_the_rate_of_answers_that_keep_to_the_schema() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let m = manifest(dir.path(), port);
    // Two slots, so concurrency 2 runs at once; prompts that ask for the object the schema describes.
    let text = std::fs::read_to_string(&m).unwrap().replace("\"-np\", \"1\"", "\"-np\", \"2\"");
    let bench = format!(
        "[profiles.structured.bench]\nconcurrency = [2]\nmax_tokens = 96\nwarmups = 0\nsamples = 2\n\
         prompts = \"cities.jsonl\"\n{BENCH_FORMAT}\n"
    );
    std::fs::write(&m, text + &bench).unwrap();
    let prompts = ["France", "Japan", "Italy", "Peru"]
        .map(|c| format!("{{\"prompt\": \"Give the name and the population of the capital of {c} as JSON.\"}}\n"));
    std::fs::write(dir.path().join("cities.jsonl"), prompts.concat()).unwrap();
    let out = dir.path().join("out");
    let home = home();
    let env = [("GAUNTLET_HOME", home.to_str().unwrap()), ("GAUNTLET_STORE", dir.path().to_str().unwrap())];
    let args = ["bench", "--manifest", m.to_str().unwrap(), "--profile", "structured", "--out", out.to_str().unwrap()];
    let o = gauntlet(&args, &env, Duration::from_secs(300));
    assert_no_survivors(&format!("--port {port}"));
    let text = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{text}");
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("bench.json")).unwrap()).unwrap();
    assert_eq!(record["workload"]["response_format"]["json_schema"]["name"], "city");
    let level = &record["levels"][0];
    let requests: Vec<&serde_json::Value> =
        level["batches"].as_array().unwrap().iter().flat_map(|b| b["requests"].as_array().unwrap()).collect();
    assert_eq!(requests.len(), 4, "two batches of two");
    for r in &requests {
        assert!(r.get("error").is_none(), "{r:#}");
        let text: String = r["events"].as_array().unwrap().iter().filter_map(|e| e[1].as_str()).collect();
        eprintln!("structured_ok {} {}: {text}", r["structured_ok"], r["structured_error"]);
    }
    let s = &level["structured"];
    eprintln!("structured: {s}");
    // Every request was answered, so every one was judged; the grammar keeps every answer to the schema.
    assert_eq!((s["requests"].as_u64(), s["judged"].as_u64()), (Some(4), Some(4)), "{s:#}");
    assert_eq!((s["valid"].as_u64(), s["rate"].as_f64()), (Some(4), Some(1.0)), "{s:#}");
    let md = std::fs::read_to_string(out.join("bench.md")).unwrap();
    assert!(md.contains("c2: structured output: 4 of 4 answers kept to the schema (rate 100.0 %)"), "{md}");
}
