//! Structured output against the real server (#34): the embedded default's xllamacpp launcher and SmolLM2-135M,
//! one case that sends `response_format` with a JSON Schema. llama.cpp turns the schema into a grammar, so even
//! this small model's answer must be an object the schema accepts; the `json_schema` check validates it.

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
