//! Typed assertions on one answer. Every check that is present must hold; each failure says why.
//! The answer is server data: nothing here may panic on it.
//!
//! `json_schema` (structured output) validates with the `jsonschema` crate, a maintained validator of every JSON
//! Schema draft: the schemas a suite sends in `response_format` are the users', so a hand-written subset would
//! pass answers a real validator refuses. It is built without its remote-`$ref` resolvers: a schema never makes
//! gauntlet fetch anything.

use std::collections::HashMap;
use std::sync::LazyLock;

use gauntlet_schema::{Answer, CheckResult};
use regex::Regex;
use serde_json::Value;

use super::cases::{Check, Field};

static NUMBER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"-?\d[\d,]*(?:\.\d+)?").unwrap());
static INTEGER: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"\d+").unwrap());

/// reasoning (prefixed) + content + one line per tool call, joined by newlines.
pub fn observed_text(answer: &Answer) -> String {
    let mut lines = Vec::new();
    if !answer.reasoning.is_empty() {
        lines.push(format!("[reasoning] {}", answer.reasoning));
    }
    lines.push(answer.content.clone());
    for call in &answer.tool_calls {
        lines.push(format!("[tool] {} {}", call.name, value_text(&call.arguments)));
    }
    lines.join("\n")
}

/// A JSON string as its text, anything else as compact JSON.
fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn result(check: &str, failure: Option<String>) -> CheckResult {
    CheckResult { check: check.into(), passed: failure.is_none(), detail: failure.unwrap_or_default() }
}

pub fn evaluate(check: &Check, answer: &Answer) -> Vec<CheckResult> {
    let raw = match check.field {
        Field::Content => answer.content.clone(),
        Field::Reasoning => answer.reasoning.clone(),
        Field::Any if answer.reasoning.is_empty() => answer.content.clone(),
        Field::Any => format!("{}\n{}", answer.reasoning, answer.content),
    };
    let text = raw.to_lowercase();
    let mut out = Vec::new();
    if !check.contains.is_empty() {
        let missing: Vec<&String> = check.contains.iter().filter(|s| !text.contains(&s.to_lowercase())).collect();
        out.push(result("contains", (!missing.is_empty()).then(|| format!("missing {missing:?}"))));
    }
    if !check.any.is_empty() {
        let found = check.any.iter().any(|s| text.contains(&s.to_lowercase()));
        out.push(result("any", (!found).then(|| format!("none of {:?}", check.any))));
    }
    if let Some(pattern) = &check.regex {
        // Validated at suite load; a failure to build here would be a bug, reported rather than panicking.
        let failure = match regex::RegexBuilder::new(pattern).case_insensitive(true).dot_matches_new_line(true).build()
        {
            Ok(re) => (!re.is_match(&raw)).then(|| format!("no match for /{pattern}/")),
            Err(e) => Some(format!("invalid regex: {e}")),
        };
        out.push(result("regex", failure));
    }
    if let Some(expected) = check.number {
        let found = numbers_in(&raw).iter().any(|n| (n - expected).abs() <= 1e-9 * expected.abs().max(1.0));
        out.push(result("number", (!found).then(|| format!("no {}", fmt_number(expected)))));
    }
    if let Some(n) = check.sequence {
        // Compared as digit strings, so a run-together "123456…" is reported as found, not as missing.
        let got: Vec<&str> = INTEGER.find_iter(&raw).take(n as usize).map(|m| m.as_str()).collect();
        let want: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
        let at = (0..n as usize).find(|i| got.get(*i).map(|g| g.trim_start_matches('0')) != Some(want[*i].as_str()));
        let failure = at.map(|at| {
            let found = match got.get(at) {
                Some(v) if v.len() > 12 => format!("{}…", &v[..12]),
                Some(v) => (*v).to_owned(),
                None => "end of text".into(),
            };
            format!("sequence 1..{n} broken at position {}: found {found}", at + 1)
        });
        out.push(result("sequence", failure));
    }
    if let Some(expected) = &check.json {
        out.push(result("json", json_failure(&raw, expected)));
    }
    if let Some(schema) = &check.schema {
        out.push(result("json_schema", schema_failure(&raw, schema)));
    }
    if let Some(tc) = &check.tool_call {
        out.push(result("tool_call", tool_call_failure(answer, tc)));
    }
    if let Some(min) = check.min_words {
        let words = raw.split_whitespace().count();
        out.push(result("min_words", (words < min as usize).then(|| format!("{words} words, fewer than {min}"))));
    }
    if check.no_loop {
        out.push(result("no_loop", loop_failure(&text)));
    }
    if check.reasoning {
        let failure = answer.reasoning.trim().is_empty().then(|| "no reasoning text".to_owned());
        out.push(result("reasoning", failure));
    }
    out
}

fn fmt_number(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 { format!("{}", n as i64) } else { n.to_string() }
}

/// Every number in the text, thousands separators stripped ("1,234" → 1234; "-5" → -5).
fn numbers_in(text: &str) -> Vec<f64> {
    NUMBER
        .find_iter(text)
        .filter_map(|m| m.as_str().trim_end_matches(',').replace(',', "").parse::<f64>().ok())
        .collect()
}

/// The JSON object in an answer: the span from the first `{` to the last `}`, so code fences and chatter around
/// the object are tolerated; or why there is none.
fn json_object(raw: &str) -> Result<serde_json::Map<String, Value>, String> {
    let (Some(start), Some(end)) = (raw.find('{'), raw.rfind('}')) else {
        return Err("invalid JSON (no object in the answer)".into());
    };
    if end < start {
        return Err("invalid JSON (no object in the answer)".into());
    }
    match serde_json::from_str(&raw[start..=end]) {
        Ok(Value::Object(object)) => Ok(object),
        Ok(_) => Err("invalid JSON (not an object)".into()),
        Err(e) => Err(format!("invalid JSON ({e})")),
    }
}

/// The answer's JSON object against a JSON Schema: the validator's first error, at its JSON pointer.
fn schema_failure(raw: &str, schema: &Value) -> Option<String> {
    // Compiled at suite load already; a failure here would be a bug, reported rather than panicking.
    match super::cases::compile_schema(schema) {
        Ok(v) => schema_failure_with(raw, &v),
        Err(e) => Some(e.to_string()),
    }
}

/// [`schema_failure`] with the schema compiled by the caller (a bench compiles its format's schema once, not per
/// answer): the answer's JSON object (the span from its first `{` to its last `}`, as the suite's `json` check
/// reads it), else why there is none, against `validator`. The message is bounded and free of control characters:
/// it quotes the server's text.
pub(crate) fn schema_failure_with(raw: &str, validator: &jsonschema::Validator) -> Option<String> {
    let object = match json_object(raw) {
        Ok(o) => Value::Object(o),
        Err(e) => return Some(bounded(&e)),
    };
    let error = validator.validate(&object).err()?;
    let at = error.instance_path.to_string();
    let at = if at.is_empty() { "/".to_owned() } else { at };
    // The message quotes the answer's values (as JSON, so escaped): cut, so one huge value cannot flood the record.
    Some(format!("does not match the schema at {}: {}", bounded(&at), bounded(&error.to_string())))
}

/// At most [`MESSAGE_CHARS`] characters (then `…`), control characters dropped: a failure's text quotes the server.
fn bounded(text: &str) -> String {
    let mut kept: String = text.chars().filter(|c| !c.is_control()).take(MESSAGE_CHARS + 1).collect();
    if kept.chars().count() > MESSAGE_CHARS {
        kept = format!("{}…", kept.chars().take(MESSAGE_CHARS).collect::<String>());
    }
    kept
}

/// Characters a schema failure keeps of the validator's message (and of the pointer where it failed).
const MESSAGE_CHARS: usize = 300;

fn json_failure(raw: &str, expected: &toml::Table) -> Option<String> {
    let object = match json_object(raw) {
        Ok(o) => o,
        Err(e) => return Some(e),
    };
    let mut problems = Vec::new();
    for (key, want) in expected {
        let want = match serde_json::to_value(want) {
            Ok(v) => v,
            Err(e) => return Some(format!("expected value for `{key}` is not JSON: {e}")),
        };
        match object.get(key) {
            None => problems.push(format!("{key} missing")),
            Some(got) if !json_equal(got, &want) => problems.push(format!("{key} {got} ≠ {want}")),
            Some(_) => {}
        }
    }
    (!problems.is_empty()).then(|| format!("JSON does not match: {}", problems.join(", ")))
}

/// Equality where 3 and 3.0 are the same number.
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

fn tool_call_failure(answer: &Answer, want: &super::cases::ToolCallCheck) -> Option<String> {
    if answer.tool_calls.is_empty() {
        return Some("no tool call".into());
    }
    let named: Vec<_> = answer.tool_calls.iter().filter(|c| c.name == want.name).collect();
    if named.is_empty() {
        let names: Vec<&str> = answer.tool_calls.iter().map(|c| c.name.as_str()).collect();
        return Some(format!("no call to `{}` (called {names:?})", want.name));
    }
    let mut last_problem = String::new();
    for call in named {
        // Arguments arrive as a JSON-encoded string or as an object; a string that is not JSON has no keys.
        let args = match &call.arguments {
            Value::String(s) => serde_json::from_str::<Value>(s).unwrap_or(Value::Null),
            other => other.clone(),
        };
        let mut problems = Vec::new();
        for (key, expected) in &want.arguments_contain {
            let expected = match expected {
                toml::Value::String(s) => s.to_lowercase(),
                other => other.to_string().to_lowercase(),
            };
            match args.get(key) {
                Some(v) if value_text(v).to_lowercase().contains(&expected) => {}
                Some(v) => problems.push(format!("{key}={} lacks {expected:?}", value_text(v))),
                None => problems.push(format!("argument `{key}` missing")),
            }
        }
        if problems.is_empty() {
            return None;
        }
        last_problem = problems.join(", ");
    }
    Some(format!("`{}` called, but {last_problem}", want.name))
}

/// A word 4-gram repeated more than four times means the model is looping.
fn loop_failure(text: &str) -> Option<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut counts: HashMap<&[&str], usize> = HashMap::new();
    for gram in words.windows(4) {
        *counts.entry(gram).or_default() += 1;
    }
    let worst = counts.into_iter().filter(|(_, n)| *n > 4).max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(a.0)))?;
    Some(format!("repeats itself: \"{}\" ×{}", worst.0.join(" "), worst.1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::ToolCallCheck;
    use gauntlet_schema::ToolCall;
    use serde_json::json;

    fn answer(content: &str) -> Answer {
        Answer { content: content.into(), ..Answer::default() }
    }

    fn run(check: Check, a: &Answer) -> Vec<(String, bool, String)> {
        evaluate(&check, a).into_iter().map(|r| (r.check, r.passed, r.detail)).collect()
    }

    #[test]
    fn contains_is_case_insensitive_and_names_what_is_missing() {
        let c = Check { contains: vec!["Paris".into(), "France".into()], ..Check::default() };
        assert!(run(c.clone(), &answer("PARIS, france"))[0].1);
        let r = run(c, &answer("It is Lyon"));
        assert_eq!(r[0].2, r#"missing ["Paris", "France"]"#);
    }

    #[test]
    fn any_needs_one() {
        let c = Check { any: vec!["hola".into(), "buenos".into()], ..Check::default() };
        assert!(run(c.clone(), &answer("¡Hola!"))[0].1);
        assert_eq!(run(c, &answer("hello"))[0].2, r#"none of ["hola", "buenos"]"#);
    }

    #[test]
    fn number_handles_commas_negatives_decimals_and_extras() {
        let c = |n: f64| Check { number: Some(n), ..Check::default() };
        assert!(run(c(391.0), &answer("17 × 23 = 391."))[0].1);
        assert!(run(c(1234567.0), &answer("about 1,234,567 people"))[0].1);
        assert!(run(c(-12.0), &answer("it fell to -12 degrees"))[0].1);
        assert!(run(c(2.5), &answer("2.5 hours"))[0].1);
        assert!(run(c(60.0), &answer("60, then 61"))[0].1, "trailing comma after a number");
        let r = run(c(391.0), &answer("the answer is 381"));
        assert_eq!((r[0].1, r[0].2.as_str()), (false, "no 391"));
        assert!(!run(c(12.0), &answer("-12"))[0].1, "-12 is not 12");
    }

    #[test]
    fn sequence_reports_where_it_breaks() {
        let c = Check { sequence: Some(5), ..Check::default() };
        assert!(run(c.clone(), &answer("1, 2, 3, 4, 5, 6"))[0].1);
        let r = run(c.clone(), &answer("1 2 4 5 6"));
        assert_eq!(r[0].2, "sequence 1..5 broken at position 3: found 4");
        let r = run(c, &answer("1 2"));
        assert_eq!(r[0].2, "sequence 1..5 broken at position 3: found end of text");
    }

    #[test]
    fn json_tolerates_fences_and_compares_a_subset() {
        let mut want = toml::Table::new();
        want.insert("name".into(), toml::Value::String("gauntlet".into()));
        want.insert("version".into(), toml::Value::Integer(3));
        let c = Check { json: Some(want), ..Check::default() };
        let fenced = "Sure:\n```json\n{\"name\": \"gauntlet\", \"version\": 3.0, \"extra\": true}\n```";
        assert!(run(c.clone(), &answer(fenced))[0].1);
        let r = run(c.clone(), &answer("{\"name\": \"gauntlet\", \"version\": 2}"));
        assert_eq!(r[0].2, "JSON does not match: version 2 ≠ 3");
        assert!(run(c.clone(), &answer("{not json}"))[0].2.starts_with("invalid JSON ("));
        assert_eq!(run(c.clone(), &answer("} nothing {"))[0].2, "invalid JSON (no object in the answer)");
        assert_eq!(run(c, &answer("no braces"))[0].2, "invalid JSON (no object in the answer)");
    }

    #[test]
    fn json_schema_validates_the_fenced_object_and_names_the_first_error_at_its_pointer() {
        let schema = json!({
            "type": "object",
            "properties": {"city": {"type": "string"}, "population": {"type": "integer", "minimum": 0}},
            "required": ["city", "population"],
            "additionalProperties": false
        });
        let c = Check { schema: Some(schema), ..Check::default() };
        let ok = run(c.clone(), &answer("```json\n{\"city\": \"Paris\", \"population\": 2100000}\n```"));
        assert_eq!(ok, vec![("json_schema".into(), true, String::new())]);
        let r = run(c.clone(), &answer("{\"city\": \"Paris\", \"population\": \"many\"}"));
        assert!(!r[0].1);
        assert!(r[0].2.starts_with("does not match the schema at /population: "), "{}", r[0].2);
        assert!(r[0].2.contains("integer"), "{}", r[0].2);
        let r = run(c.clone(), &answer("{\"city\": \"Paris\"}"));
        assert!(r[0].2.starts_with("does not match the schema at /: ") && r[0].2.contains("population"), "{}", r[0].2);
        assert_eq!(run(c.clone(), &answer("no object"))[0].2, "invalid JSON (no object in the answer)");
        let huge = format!("{{\"city\": 1, \"population\": 1, \"x\": \"{}\"}}", "a".repeat(10_000));
        assert!(run(c, &answer(&huge))[0].2.chars().count() < 400, "a huge value is cut");
    }

    #[test]
    fn tool_call_arguments_as_string_or_object() {
        let want = ToolCallCheck { name: "get_weather".into(), arguments_contain: toml::toml! { city = "paris" } };
        let c = Check { tool_call: Some(want), ..Check::default() };
        let mut a = answer("");
        a.tool_calls = vec![ToolCall { name: "get_weather".into(), arguments: json!("{\"city\": \"Paris, FR\"}") }];
        assert!(run(c.clone(), &a)[0].1, "arguments as a JSON string");
        a.tool_calls = vec![ToolCall { name: "get_weather".into(), arguments: json!({"city": "PARIS"}) }];
        assert!(run(c.clone(), &a)[0].1, "arguments as an object");
        a.tool_calls = vec![ToolCall { name: "get_weather".into(), arguments: json!("not json at all") }];
        assert_eq!(run(c.clone(), &a)[0].2, "`get_weather` called, but argument `city` missing");
        a.tool_calls = vec![ToolCall { name: "get_time".into(), arguments: json!({}) }];
        assert_eq!(run(c.clone(), &a)[0].2, "no call to `get_weather` (called [\"get_time\"])");
        assert_eq!(run(c, &answer("I think it's sunny"))[0].2, "no tool call");
    }

    #[test]
    fn unicode_survives_lowercasing_and_contains() {
        let c = Check { contains: vec!["Grüße".into(), "東京".into(), "🦀".into()], ..Check::default() };
        assert!(run(c, &answer("GRÜSSE? no: grüße aus 東京 🦀"))[0].1);
    }

    #[test]
    fn regex_is_case_insensitive_and_dotall() {
        let c = Check { regex: Some(r"2\D+3\D+5\D+7\D+11".into()), ..Check::default() };
        assert!(run(c.clone(), &answer("Primes: 2,\n3, 5, 7, 11"))[0].1);
        assert!(!run(c, &answer("2, 3, 5, 9"))[0].1);
        let c = Check { regex: Some("def add".into()), ..Check::default() };
        assert!(run(c, &answer("DEF ADD(a, b)"))[0].1);
    }

    #[test]
    fn min_words_and_no_loop() {
        let c = Check { min_words: Some(5), no_loop: true, ..Check::default() };
        let r = run(c.clone(), &answer("one two three"));
        assert_eq!(r[0].2, "3 words, fewer than 5");
        let looping = "the cat sat down ".repeat(6);
        let r = run(c.clone(), &answer(&looping));
        assert!(r[0].1);
        assert!(r[1].2.starts_with("repeats itself: "), "{}", r[1].2);
        assert!(r[1].2.ends_with("×6"), "{}", r[1].2);
        let ok = "the cat sat down ".repeat(4);
        assert!(run(c, &answer(&ok))[1].1, "four times is allowed");
    }

    #[test]
    fn field_selects_reasoning_or_both() {
        let a = Answer { content: "42".into(), reasoning: "six times seven".into(), ..Answer::default() };
        let c = Check { field: Field::Reasoning, contains: vec!["seven".into()], ..Check::default() };
        assert!(run(c, &a)[0].1);
        let c = Check { field: Field::Content, contains: vec!["seven".into()], ..Check::default() };
        assert!(!run(c, &a)[0].1);
        let c = Check { field: Field::Any, contains: vec!["seven".into(), "42".into()], ..Check::default() };
        assert!(run(c, &a)[0].1);
        let c = Check { reasoning: true, ..Check::default() };
        assert!(run(c.clone(), &a)[0].1);
        assert_eq!(run(c, &answer("42"))[0].2, "no reasoning text");
    }

    #[test]
    fn observed_text_joins_reasoning_content_and_tools() {
        let a = Answer {
            content: "ok".into(),
            reasoning: "think".into(),
            tool_calls: vec![ToolCall { name: "f".into(), arguments: json!({"x": 1}) }],
            ..Answer::default()
        };
        assert_eq!(observed_text(&a), "[reasoning] think\nok\n[tool] f {\"x\":1}");
        assert_eq!(observed_text(&answer("plain")), "plain");
    }

    #[test]
    fn no_checks_means_no_results() {
        assert!(evaluate(&Check::default(), &answer("anything")).is_empty());
    }
}
