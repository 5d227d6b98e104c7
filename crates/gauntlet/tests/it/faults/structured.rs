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

/// The bench's `response_format`: the `city` schema of [`SUITE`], sent with every request.
const BENCH_FORMAT: &str = "response_format = { type = \"json_schema\", json_schema = { name = \"city\", strict = true, \
     schema = { type = \"object\", additionalProperties = false, required = [\"name\", \"population\"], properties = \
     { name = { type = \"string\" }, population = { type = \"integer\", minimum = 0 } } } } }";

const VALID: &str = "{\"name\": \"Paris\", \"population\": 2102650}";

/// A structured bench of the built-in prompts (8: three begin "Write", three "Explain", two "Describe") at
/// concurrency 4, two batches: every prompt once. `describe` answers the two "Describe" prompts.
/// Returns the exit code, bench.json, bench.md, bench.html, the terminal's text, and bench.bmf.json with bench.csv.
fn structured_bench(
    describe: &str,
) -> (Option<i32>, serde_json::Value, String, String, String, (serde_json::Value, String)) {
    let answers = vec![
        ("__token_delay_ms", "2".to_owned()),
        ("Write", VALID.to_owned()),
        ("Explain", VALID.to_owned()),
        ("Describe", describe.to_owned()),
    ];
    let bench =
        format!("[profiles.test.bench]\nconcurrency = [4]\nmax_tokens = 16\nwarmups = 0\nsamples = 2\n{BENCH_FORMAT}");
    let f = Fixture::new("structured-bench").answers(answers).profile(&bench);
    let manifest = f.write();
    let out = f.path().join("out");
    let args = ["bench", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap(), "--format", "csv"];
    let o = gauntlet(&args, &[], Duration::from_secs(120));
    assert_no_survivors(&f.tag);
    let text = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    let record = std::fs::read_to_string(out.join("bench.json")).unwrap_or_else(|e| panic!("{e}: {text}"));
    let md = std::fs::read_to_string(out.join("bench.md")).unwrap();
    let html = std::fs::read_to_string(out.join("bench.html")).unwrap();
    let bmf = serde_json::from_str(&std::fs::read_to_string(out.join("bench.bmf.json")).unwrap()).unwrap();
    let csv = std::fs::read_to_string(out.join("bench.csv")).unwrap();
    (o.status.code(), serde_json::from_str(&record).unwrap(), md, html, text, (bmf, csv))
}

fn requests(record: &serde_json::Value) -> Vec<&serde_json::Value> {
    let batches = record["levels"][0]["batches"].as_array().unwrap();
    batches.iter().flat_map(|b| b["requests"].as_array().unwrap()).collect()
}

#[test]
fn a_structured_bench_sends_the_schema_and_counts_every_valid_answer() {
    let (code, record, md, html, _, _) = structured_bench(VALID);
    assert_eq!(code, Some(0), "{md}");
    assert_eq!(record["bench_version"], gauntlet_schema::bench::BENCH_VERSION);
    assert_eq!(record["workload"]["response_format"]["json_schema"]["name"], "city", "{:#}", record["workload"]);
    let rs = requests(&record);
    assert_eq!(rs.len(), 8);
    for r in &rs {
        assert_eq!((r["structured_ok"].as_bool(), r.get("structured_error")), (Some(true), None), "{r:#}");
    }
    let s = &record["levels"][0]["structured"];
    assert_eq!(*s, serde_json::json!({"requests": 8, "judged": 8, "valid": 8, "rate": 1.0}), "{s:#}");
    assert!(md.contains("c4: structured output: 8 of 8 answers kept to the schema (rate 100.0 %)"), "{md}");
    assert!(md.contains("every request sends the JSON schema `city`"), "{md}");
    let line = html.split("id=\"structured-c4\"").nth(1).expect("no structured line in bench.html");
    assert!(line.contains("8 of 8 answers kept to the schema (rate 100.0 %)"), "{line:.200}");
}

#[test]
fn a_structured_bench_counts_answers_that_break_the_schema_and_says_why() {
    let (code, record, md, html, terminal, (bmf, csv)) =
        structured_bench("{\"name\": \"Paris\", \"population\": \"many\"}");
    // A broken answer is a correctness finding of the rate, not a failed request: the bench itself ran.
    assert_eq!(code, Some(0), "{md}");
    let rs = requests(&record);
    let broken: Vec<&&serde_json::Value> = rs.iter().filter(|r| r["structured_ok"] == false).collect();
    assert_eq!(broken.len(), 2, "the two Describe prompts: {rs:#?}");
    for r in &broken {
        let why = r["structured_error"].as_str().unwrap();
        assert!(why.starts_with("does not match the schema at /population: "), "{why}");
        assert!(r.get("error").is_none(), "{r:#}");
    }
    let s = &record["levels"][0]["structured"];
    assert_eq!(*s, serde_json::json!({"requests": 8, "judged": 8, "valid": 6, "rate": 0.75}), "{s:#}");
    assert!(md.contains("6 of 8 answers kept to the schema (rate 75.0 %)"), "{md}");
    assert!(html.contains("6 of 8 answers kept to the schema (rate 75.0 %)"), "bench.html lacks the rate");
    assert!(terminal.contains("6 of 8 answers kept to the schema (rate 75.0 %)"), "{terminal}");
    // The rate is a bench metric like any other: a measure of bench.bmf.json, a row of bench.csv, a table column.
    assert_eq!(bmf["test/concurrency-4"]["structured-valid-rate"]["value"], 0.75, "{bmf:#}");
    assert!(csv.contains("\r\ntest,4,structured-valid-rate,0.75,"), "{csv}");
    assert!(md.contains("| schema kept % |") && md.contains("| 75.0 |"), "{md}");
}

/// A format with nothing to judge by, or one a paired A/B would send without counting, is refused before any
/// server starts.
#[test]
fn a_bench_response_format_without_a_schema_to_judge_by_is_bad_input() {
    for (format, paired, said) in [
        (
            "response_format = { type = \"json_object\" }",
            false,
            "profiles.test.bench.response_format.type: a bench judges",
        ),
        (
            "response_format = { type = \"json_schema\", json_schema = { name = \"x\" } }",
            false,
            "profiles.test.bench.response_format.json_schema.schema: required",
        ),
        (BENCH_FORMAT, true, "whose rate only a plain bench records"),
    ] {
        let f = Fixture::new("structured-bad").profile(&format!("[profiles.test.bench]\n{format}"));
        let manifest = f.write();
        let out = f.path().join("out");
        let mut args = vec!["bench", "--manifest", manifest.to_str().unwrap(), "--out", out.to_str().unwrap()];
        if paired {
            args.extend(["--paired-with", "test"]);
        }
        let o = gauntlet(&args, &[], Duration::from_secs(60));
        assert_no_survivors(&f.tag);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(said), "{stderr}");
    }
}
