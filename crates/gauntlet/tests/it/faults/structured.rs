//! Structured output (#34): a case sends `response_format` with a JSON Schema and its `json_schema` check validates
//! the answer against it. The fake server scripts one answer that matches the schema and one that breaks it.

use std::time::Duration;

use super::Fixture;
use crate::common::{assert_no_survivors, finish, gauntlet};

const SUITE: &str = r#"
id = "structured"
version = 1

[[cases]]
id = "city"
max_tokens = 64
messages = [{ role = "user", content = "Describe Paris as JSON." }]
check = { json_schema = true }
[cases.response_format]
type = "json_schema"
[cases.response_format.json_schema]
name = "city"
strict = true
schema = { type = "object", additionalProperties = false, required = ["name", "population"], properties = { name = { type = "string" }, population = { type = "integer", minimum = 0 } } }
"#;

/// Runs the structured suite against the fake answering `answer`; the `city` case's checks.
fn city_checks(answer: &str) -> (String, Vec<serde_json::Value>) {
    let f = Fixture::new("structured").answers(vec![("Describe Paris", answer.to_owned())]);
    let manifest = f.write();
    std::fs::write(f.path().join("suite.toml"), SUITE).unwrap();
    let out = f.path().join("out");
    let args = ["run", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
    let run = finish(gauntlet(&args, &[], Duration::from_secs(90)), &out);
    assert_no_survivors(&f.tag);
    let record = run.record.clone().unwrap_or_else(|| panic!("no run.json: {}", run.explain()));
    let case = record["cases"].as_array().unwrap().iter().find(|c| c["id"] == "city").unwrap().clone();
    let sent = &case["request"]["response_format"];
    assert_eq!((sent["type"].as_str(), sent["json_schema"]["name"].as_str()), (Some("json_schema"), Some("city")));
    assert_eq!(sent["json_schema"]["schema"]["required"], serde_json::json!(["name", "population"]));
    (case["status"].as_str().unwrap_or_default().to_owned(), case["checks"].as_array().unwrap().clone())
}

#[test]
fn a_structured_output_case_passes_on_a_valid_answer_and_fails_on_one_that_breaks_the_schema() {
    let (status, checks) = city_checks("```json\n{\"name\": \"Paris\", \"population\": 2102650}\n```");
    assert_eq!(status, "pass", "{checks:?}");
    assert_eq!(checks.len(), 1, "{checks:?}");
    assert_eq!((checks[0]["check"].as_str(), checks[0]["passed"].as_bool()), (Some("json_schema"), Some(true)));

    let (status, checks) = city_checks("{\"name\": \"Paris\", \"population\": \"about two million\"}");
    assert_eq!(status, "fail", "{checks:?}");
    let detail = checks[0]["detail"].as_str().unwrap();
    assert!(!checks[0]["passed"].as_bool().unwrap());
    assert!(detail.starts_with("does not match the schema at /population: "), "{detail}");

    let (status, checks) = city_checks("{\"name\": \"Paris\", \"population\": 1, \"mayor\": \"x\"}");
    assert_eq!(status, "fail", "additionalProperties = false holds: {checks:?}");
    assert!(checks[0]["detail"].as_str().unwrap().contains("mayor"), "{checks:?}");
}
