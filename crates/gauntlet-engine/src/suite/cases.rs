//! Suite files: parsed strictly, then turned into requests. A suite is data; the default one is embedded.

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::needle;

const DEFAULT_SUITE: &str = include_str!("default.toml");

#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("failed to parse suite `{origin}`: {message}")]
    Parse { origin: String, message: String },
    #[error("suite `{origin}`: {message}")]
    Invalid { origin: String, message: String },
}

#[derive(Debug, Clone)]
pub struct Suite {
    pub id: String,
    pub version: u32,
    /// sha256 of the suite's source text: two suites with one id but other contents never compare silently.
    pub digest: String,
    pub cases: Vec<Case>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct SuiteFile {
    id: String,
    version: u32,
    #[serde(rename = "cases")]
    cases: Vec<CaseFile>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct CaseFile {
    id: String,
    #[serde(default)]
    messages: Vec<Message>,
    #[serde(default)]
    max_tokens: Option<u32>,
    #[serde(default)]
    stream: bool,
    #[serde(default)]
    thinking: bool,
    #[serde(default)]
    tools: Option<Vec<toml::Value>>,
    #[serde(default)]
    generate: Option<Generate>,
    #[serde(default)]
    repeat_of: Option<String>,
    #[serde(default)]
    extra_body: Option<toml::Table>,
    /// Structured output: `{ type = "json_schema", json_schema = { name, schema, strict } }` or
    /// `{ type = "json_object" }`, sent as the request's `response_format`.
    #[serde(default)]
    response_format: Option<toml::Table>,
    #[serde(default)]
    check: Check,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    pub role: String,
    pub content: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct Generate {
    /// The secret number hidden in the filler.
    needle: u32,
    /// How many filler lines surround it.
    lines: u32,
}

/// The assertions on one answer; every key present must hold.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Check {
    #[serde(default)]
    pub field: Field,
    #[serde(default)]
    pub contains: Vec<String>,
    #[serde(default)]
    pub any: Vec<String>,
    #[serde(default)]
    pub regex: Option<String>,
    #[serde(default)]
    pub number: Option<f64>,
    #[serde(default)]
    pub sequence: Option<u32>,
    #[serde(default)]
    pub json: Option<toml::Table>,
    #[serde(default)]
    pub tool_call: Option<ToolCallCheck>,
    #[serde(default)]
    pub min_words: Option<u32>,
    #[serde(default)]
    pub no_loop: bool,
    /// Reasoning text must be non-empty (thinking cases).
    #[serde(default)]
    pub reasoning: bool,
    /// The answer's JSON object must validate against a JSON Schema: `true` for the case's own
    /// `response_format` schema, or a table that is the schema.
    #[serde(default)]
    pub json_schema: Option<toml::Value>,
    /// The schema `json_schema` names, resolved and compiled once at suite load.
    #[serde(skip)]
    pub schema: Option<Value>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Field {
    #[default]
    Content,
    Reasoning,
    Any,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallCheck {
    pub name: String,
    #[serde(default)]
    pub arguments_contain: toml::Table,
}

#[derive(Debug, Clone)]
pub struct Case {
    pub id: String,
    pub messages: Vec<Message>,
    pub max_tokens: u32,
    pub stream: bool,
    pub thinking: bool,
    pub tools: Option<Value>,
    pub repeat_of: Option<String>,
    /// Fields merged into this case's request, over the profile's `extra_body` (a case's key wins).
    pub extra_body: Map<String, Value>,
    /// The request's `response_format` (structured output), validated at load.
    pub response_format: Option<Value>,
    pub check: Check,
}

/// Request fields gauntlet sets itself: an `extra_body` (profile or case) may not hold them, since a run's record,
/// checks and comparisons rely on their values.
pub const OWNED_REQUEST_KEYS: &[&str] = &[
    "model",
    "messages",
    "stream",
    "stream_options",
    "max_tokens",
    "temperature",
    "tools",
    "logprobs",
    "top_logprobs",
];

/// An `extra_body` table as JSON, or what is wrong with it (each problem names its key under `at`).
pub fn extra_body(table: &toml::Table, at: &str) -> Result<Map<String, Value>, Vec<String>> {
    let owned: Vec<String> = table
        .keys()
        .filter(|k| OWNED_REQUEST_KEYS.contains(&k.as_str()))
        .map(|k| format!("{at}.{k}: gauntlet sets this request field itself; it cannot come from extra_body"))
        .collect();
    if !owned.is_empty() {
        return Err(owned);
    }
    match serde_json::to_value(table) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(vec![format!("{at}: expected a table")]),
        Err(e) => Err(vec![format!("{at}: {e}")]),
    }
}

/// What is wrong with a `response_format` table. Its text is a key suffix and a reason, to follow
/// `….response_format` (": …" when the table itself is at fault).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ResponseFormatError {
    #[error(": {0}")]
    NotJson(#[source] serde_json::Error),
    #[error(".json_schema.schema: required for type \"json_schema\"")]
    NoSchema,
    #[error(".json_schema.schema: expected a table (a JSON Schema)")]
    SchemaNotTable,
    #[error(".json_schema.schema: {0}")]
    BadSchema(#[from] SchemaError),
    #[error(".type: `{0}` is not `json_schema` or `json_object`")]
    UnknownType(String),
    #[error(".type: required (`json_schema` or `json_object`)")]
    NoType,
}

/// A schema that does not compile, with the compiler's reason (boxed: it carries the offending part of the schema).
#[derive(Debug, thiserror::Error)]
#[error("not a valid JSON Schema: {0}")]
pub(crate) struct SchemaError(#[source] Box<jsonschema::ValidationError<'static>>);

/// A case's `response_format` as JSON, or what is wrong with it: its `type` is `json_schema` (with a
/// `json_schema.schema` table that compiles as a JSON Schema) or `json_object`.
pub(crate) fn response_format(table: &toml::Table) -> Result<Value, ResponseFormatError> {
    let value = serde_json::to_value(table).map_err(ResponseFormatError::NotJson)?;
    match value.get("type").and_then(Value::as_str) {
        Some("json_object") => Ok(value),
        Some("json_schema") => {
            let Some(schema) = value.pointer("/json_schema/schema") else {
                return Err(ResponseFormatError::NoSchema);
            };
            if !schema.is_object() {
                return Err(ResponseFormatError::SchemaNotTable);
            }
            compile_schema(schema)?;
            Ok(value)
        }
        Some(other) => Err(ResponseFormatError::UnknownType(other.to_owned())),
        None => Err(ResponseFormatError::NoType),
    }
}

/// A JSON Schema compiled (draft from its `$schema`, 2020-12 by default); remote `$ref`s are never fetched.
pub(crate) fn compile_schema(schema: &Value) -> Result<jsonschema::Validator, SchemaError> {
    jsonschema::validator_for(schema).map_err(|e| SchemaError(Box::new(e)))
}

/// Merges `extra` into `body`: a table meets a table key by key (so `chat_template_kwargs` keeps the thinking
/// switch beside the extra keys), anything else is replaced.
fn merge(body: &mut Map<String, Value>, extra: &Map<String, Value>) {
    for (k, v) in extra {
        match (body.get_mut(k), v) {
            (Some(Value::Object(have)), Value::Object(add)) => merge(have, add),
            _ => {
                body.insert(k.clone(), v.clone());
            }
        }
    }
}

impl Case {
    /// The OpenAI-compatible request body, greedy: `model` is the name the server is asked for; the profile's
    /// `extra_body`, then the case's, are merged in last (the case wins). The thinking switch is the engine's: the
    /// caller adds it (the run's `case_request`), after the extras, so that they cannot undo the case's `thinking`.
    pub fn request_body(&self, model: &str, profile_extra: &Map<String, Value>) -> Value {
        let mut body = Map::new();
        body.insert("model".into(), json!(model));
        body.insert(
            "messages".into(),
            Value::Array(self.messages.iter().map(|m| json!({"role": m.role, "content": m.content})).collect()),
        );
        body.insert("max_tokens".into(), json!(self.max_tokens));
        body.insert("temperature".into(), json!(0));
        body.insert("stream".into(), json!(self.stream));
        if self.stream {
            body.insert("stream_options".into(), json!({"include_usage": true}));
        }
        if let Some(tools) = &self.tools {
            body.insert("tools".into(), tools.clone());
        }
        merge(&mut body, profile_extra);
        merge(&mut body, &self.extra_body);
        // After the extras, replacing (not merging): the schema sent is the one the case's check holds.
        if let Some(format) = &self.response_format {
            body.insert("response_format".into(), format.clone());
        }
        Value::Object(body)
    }
}

impl Suite {
    pub fn embedded_default() -> Suite {
        Suite::parse(DEFAULT_SUITE, "default (embedded)").expect("the embedded default suite is valid")
    }

    pub fn parse(text: &str, origin: &str) -> Result<Suite, SuiteError> {
        if let Ok(doc) = text.parse::<toml::Table>() {
            let mut problems = Vec::new();
            strict_keys(&doc, "", SUITE_KEYS, &mut problems);
            if !problems.is_empty() {
                return Err(SuiteError::Invalid { origin: origin.to_owned(), message: problems.join("; ") });
            }
        }
        let file: SuiteFile = toml::from_str(text).map_err(|e| SuiteError::Parse {
            origin: origin.to_owned(),
            message: e.to_string().trim_end().to_owned(),
        })?;
        let invalid = |message: String| SuiteError::Invalid { origin: origin.to_owned(), message };
        if file.cases.is_empty() {
            return Err(invalid("has no cases".into()));
        }
        let mut cases: Vec<Case> = Vec::with_capacity(file.cases.len());
        for (i, c) in file.cases.into_iter().enumerate() {
            let at = format!("cases[{i}] (`{}`)", c.id);
            if c.id.is_empty() {
                return Err(invalid(format!("cases[{i}].id: must not be empty")));
            }
            if cases.iter().any(|o| o.id == c.id) {
                return Err(invalid(format!("{at}: duplicate id")));
            }
            if let Some(re) = &c.check.regex {
                regex::RegexBuilder::new(re).build().map_err(|e| invalid(format!("{at}.check.regex: {e}")))?;
            }
            if let Some(src) = &c.repeat_of {
                let Some(source) = cases.iter().find(|o| &o.id == src) else {
                    return Err(invalid(format!("{at}.repeat_of: `{src}` is not an earlier case")));
                };
                if source.repeat_of.is_some() {
                    return Err(invalid(format!("{at}.repeat_of: `{src}` is itself a repeat")));
                }
                if !c.messages.is_empty()
                    || c.generate.is_some()
                    || c.check != Check::default()
                    || c.extra_body.is_some()
                    || c.response_format.is_some()
                {
                    return Err(invalid(format!(
                        "{at}: a repeat re-sends its source; it takes no messages, generate, extra_body, \
                         response_format or check"
                    )));
                }
                let mut repeat = source.clone();
                repeat.id = c.id.clone();
                repeat.repeat_of = Some(src.clone());
                repeat.check = Check::default();
                cases.push(repeat);
                continue;
            }
            let mut messages = c.messages;
            if let Some(g) = &c.generate {
                if g.lines < 10 || g.lines > 2000 {
                    return Err(invalid(format!("{at}.generate.lines: must be within 10..=2000")));
                }
                messages.push(Message { role: "user".into(), content: needle::haystack(g.needle, g.lines) });
            }
            if messages.is_empty() {
                return Err(invalid(format!("{at}: needs messages (or generate)")));
            }
            if let Some(m) = messages.iter().find(|m| !["system", "user", "assistant"].contains(&m.role.as_str())) {
                return Err(invalid(format!("{at}: unknown message role `{}`", m.role)));
            }
            let max_tokens = c.max_tokens.ok_or_else(|| invalid(format!("{at}.max_tokens: required")))?;
            if max_tokens == 0 {
                return Err(invalid(format!("{at}.max_tokens: must be at least 1")));
            }
            let extra_body = match &c.extra_body {
                None => Map::new(),
                Some(t) => extra_body(t, &format!("{at}.extra_body")).map_err(|e| invalid(e.join("; ")))?,
            };
            let response_format = match &c.response_format {
                None => None,
                Some(t) => Some(response_format(t).map_err(|e| invalid(format!("{at}.response_format{e}")))?),
            };
            let mut check = c.check;
            check.schema = match &check.json_schema {
                None => None,
                Some(toml::Value::Boolean(true)) => {
                    match response_format.as_ref().and_then(|f| f.pointer("/json_schema/schema")) {
                        Some(schema) => Some(schema.clone()),
                        None => {
                            return Err(invalid(format!(
                                "{at}.check.json_schema: `true` takes the case's response_format schema, and the case has none \
                             (set response_format = {{ type = \"json_schema\", json_schema = {{ schema = … }} }}, or give the schema here)"
                            )));
                        }
                    }
                }
                Some(toml::Value::Table(t)) => {
                    let schema =
                        serde_json::to_value(t).map_err(|e| invalid(format!("{at}.check.json_schema: {e}")))?;
                    compile_schema(&schema).map_err(|e| invalid(format!("{at}.check.json_schema: {e}")))?;
                    Some(schema)
                }
                Some(_) => {
                    return Err(invalid(format!("{at}.check.json_schema: expected `true` or a table (a JSON Schema)")));
                }
            };
            let tools = match c.tools {
                Some(list) => Some(serde_json::to_value(&list).map_err(|e| invalid(format!("{at}.tools: {e}")))?),
                None => None,
            };
            cases.push(Case {
                id: c.id,
                messages,
                max_tokens,
                stream: c.stream,
                thinking: c.thinking,
                tools,
                repeat_of: None,
                extra_body,
                response_format,
                check,
            });
        }
        let digest = crate::util::sha256_hex(text.as_bytes());
        Ok(Suite { id: file.id, version: file.version, digest, cases })
    }
}

/// The keys each level of a suite file takes (the serde structs above refuse any other too; a test keeps the two
/// lists equal). Free-form tables (`tools`, `check.json`, `arguments_contain`) are not walked.
const SUITE_KEYS: &[&str] = &["id", "version", "cases"];
const CASE_KEYS: &[&str] = &[
    "id",
    "messages",
    "max_tokens",
    "stream",
    "thinking",
    "tools",
    "generate",
    "repeat_of",
    "extra_body",
    "response_format",
    "check",
];
const MESSAGE_KEYS: &[&str] = &["role", "content"];
const GENERATE_KEYS: &[&str] = &["needle", "lines"];
const CHECK_KEYS: &[&str] = &[
    "field",
    "contains",
    "any",
    "regex",
    "number",
    "sequence",
    "json",
    "tool_call",
    "min_words",
    "no_loop",
    "reasoning",
    "json_schema",
];
const TOOL_CALL_KEYS: &[&str] = &["name", "arguments_contain"];

/// Every unknown key with its path and the key it most likely misspells; a NUL in any string.
fn strict_keys(t: &toml::Table, path: &str, known: &[&str], problems: &mut Vec<String>) {
    let at = |k: &str| if path.is_empty() { k.to_owned() } else { format!("{path}.{k}") };
    for (key, v) in t {
        if !known.contains(&key.as_str()) {
            problems.push(format!("{}: {}", at(key), crate::util::suggest::unknown_key_message(key, known)));
            continue;
        }
        let nested: Option<&[&str]> = match (known, key.as_str()) {
            (k, "cases") if k == SUITE_KEYS => Some(CASE_KEYS),
            (k, "messages") if k == CASE_KEYS => Some(MESSAGE_KEYS),
            (k, "generate") if k == CASE_KEYS => Some(GENERATE_KEYS),
            (k, "check") if k == CASE_KEYS => Some(CHECK_KEYS),
            (k, "tool_call") if k == CHECK_KEYS => Some(TOOL_CALL_KEYS),
            _ => None,
        };
        match (v, nested) {
            (toml::Value::Table(inner), Some(keys)) => strict_keys(inner, &at(key), keys, problems),
            (toml::Value::Array(items), Some(keys)) => {
                for (i, item) in items.iter().enumerate() {
                    if let toml::Value::Table(inner) = item {
                        strict_keys(inner, &format!("{}[{i}]", at(key)), keys, problems);
                    }
                }
            }
            _ => no_nul(v, &at(key), problems),
        }
    }
}

fn no_nul(v: &toml::Value, at: &str, problems: &mut Vec<String>) {
    match v {
        toml::Value::String(s) if s.contains('\0') => problems.push(format!("{at}: NUL character in a string")),
        toml::Value::Array(items) => {
            items.iter().enumerate().for_each(|(i, x)| no_nul(x, &format!("{at}[{i}]"), problems))
        }
        toml::Value::Table(t) => t.iter().for_each(|(k, x)| no_nul(x, &format!("{at}.{k}"), problems)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_suite_has_sixteen_cases_of_every_kind() {
        let s = Suite::embedded_default();
        assert_eq!(s.cases.len(), 16);
        assert!(s.cases.iter().any(|c| c.stream));
        assert!(s.cases.iter().any(|c| c.thinking));
        assert!(s.cases.iter().any(|c| c.tools.is_some()));
        assert!(s.cases.iter().any(|c| c.check.tool_call.is_some()));
        assert!(s.cases.iter().any(|c| c.check.json.is_some()));
        assert!(s.cases.iter().any(|c| c.check.sequence.is_some()));
        assert!(s.cases.iter().any(|c| c.check.no_loop));
        assert!(s.cases.iter().any(|c| c.messages.len() >= 3), "multi-turn case");
        let last = s.cases.last().unwrap();
        assert_eq!(last.repeat_of.as_deref(), Some(s.cases[0].id.as_str()));
        let needle = s.cases.iter().find(|c| c.messages.iter().any(|m| m.content.len() > 6000));
        assert!(needle.is_some(), "a generated needle case");
    }

    #[test]
    fn stream_with_tools_is_a_case_and_extra_body_is_checked_at_load() {
        let text = r#"
            id = "t"
            version = 1
            [[cases]]
            id = "x"
            max_tokens = 8
            stream = true
            messages = [{ role = "user", content = "hi" }]
            tools = [{ type = "function", function = { name = "f" } }]
            extra_body = { seed = 7, chat_template_kwargs = { custom = true } }
        "#;
        let s = Suite::parse(text, "t.toml").unwrap();
        let profile = serde_json::from_value(json!({"seed": 1, "top_k": 1, "chat_template_kwargs": {"p": 1}})).unwrap();
        let body = s.cases[0].request_body("m", &profile);
        assert_eq!((body["stream"].clone(), body["tools"][0]["function"]["name"].clone()), (json!(true), json!("f")));
        assert_eq!((body["seed"].clone(), body["top_k"].clone()), (json!(7), json!(1)), "the case wins");
        assert_eq!(body["chat_template_kwargs"], json!({"custom": true, "p": 1}), "tables merge key by key");
        let owned = text.replace("seed = 7", "stream = false, model = \"x\"");
        let err = Suite::parse(&owned, "t.toml").unwrap_err().to_string();
        assert!(err.contains("extra_body.model: gauntlet sets this request field itself"), "{err}");
        assert!(err.contains("extra_body.stream: gauntlet sets"), "{err}");
    }

    #[test]
    fn a_response_format_is_refused_with_the_variant_of_its_first_problem() {
        let table = |text: &str| text.parse::<toml::Table>().unwrap();
        assert!(response_format(&table("type = \"json_object\"")).is_ok());
        assert!(matches!(response_format(&table("strict = true")), Err(ResponseFormatError::NoType)));
        let e = response_format(&table("type = \"xml\"")).unwrap_err();
        assert!(matches!(&e, ResponseFormatError::UnknownType(t) if t == "xml"), "{e:?}");
        assert_eq!(e.to_string(), ".type: `xml` is not `json_schema` or `json_object`");
        assert!(matches!(response_format(&table("type = \"json_schema\"")), Err(ResponseFormatError::NoSchema)));
        let not_table = table("type = \"json_schema\"\njson_schema = { schema = 3 }");
        assert!(matches!(response_format(&not_table), Err(ResponseFormatError::SchemaNotTable)));
        let bad = table("type = \"json_schema\"\njson_schema = { schema = { type = \"strung\" } }");
        let e = response_format(&bad).unwrap_err();
        assert!(matches!(e, ResponseFormatError::BadSchema(_)), "{e:?}");
        assert!(e.to_string().starts_with(".json_schema.schema: not a valid JSON Schema: "), "{e}");
    }

    #[test]
    fn response_format_is_sent_as_given_and_its_schema_checks_the_answer() {
        let text = r#"
            id = "t"
            version = 1
            [[cases]]
            id = "city"
            max_tokens = 64
            messages = [{ role = "user", content = "A city as JSON" }]
            extra_body = { response_format = { type = "text" } }
            [cases.response_format]
            type = "json_schema"
            json_schema = { name = "city", strict = true, schema = { type = "object", required = ["name"], properties = { name = { type = "string" } } } }
            [cases.check]
            json_schema = true
        "#;
        let s = Suite::parse(text, "t.toml").unwrap();
        let body = s.cases[0].request_body("m", &Map::new());
        assert_eq!(body["response_format"]["type"], "json_schema", "the case's format wins over extra_body");
        assert_eq!(body["response_format"]["json_schema"]["schema"]["required"], json!(["name"]));
        assert_eq!(s.cases[0].check.schema.as_ref().unwrap()["required"], json!(["name"]));
        let err = |t: &str| Suite::parse(t, "t.toml").unwrap_err().to_string();
        let bad_type = text.replace("type = \"json_schema\"", "type = \"xml\"");
        assert!(err(&bad_type).contains("cases[0] (`city`).response_format.type: `xml` is not"), "{}", err(&bad_type));
        let bad_schema = text.replace("type = \"string\"", "type = \"strung\"");
        assert!(
            err(&bad_schema).contains("response_format.json_schema.schema: not a valid JSON Schema"),
            "{}",
            err(&bad_schema)
        );
        let own = text.replace("json_schema = true", "json_schema = { type = \"object\", required = [\"x\"] }");
        assert_eq!(Suite::parse(&own, "t").unwrap().cases[0].check.schema.as_ref().unwrap()["required"], json!(["x"]));
        let bare = "id = \"t\"\nversion = 1\n[[cases]]\nid = \"a\"\nmax_tokens = 8\nmessages = [{ role = \"user\", content = \"hi\" }]\ncheck = { json_schema = true }\n";
        assert!(
            err(bare).contains("check.json_schema: `true` takes the case's response_format schema"),
            "{}",
            err(bare)
        );
    }

    #[test]
    fn unknown_keys_and_bad_repeats_are_rejected() {
        let base = "id = \"t\"\nversion = 1\n[[cases]]\nid = \"a\"\nmax_tokens = 8\nmessages = [{ role = \"user\", content = \"hi\" }]\n";
        let err = Suite::parse(&format!("{base}colour = 1\n"), "t").unwrap_err().to_string();
        assert!(err.contains("colour"), "{err}");
        let err =
            Suite::parse(&format!("{base}[[cases]]\nid = \"b\"\nrepeat_of = \"zz\"\n"), "t").unwrap_err().to_string();
        assert!(err.contains("`zz` is not an earlier case"), "{err}");
        let err =
            Suite::parse(&format!("{base}[[cases]]\nid = \"a\"\nrepeat_of = \"a\"\n"), "t").unwrap_err().to_string();
        assert!(err.contains("duplicate id"), "{err}");
    }

    /// The key lists the strict walk uses are exactly the fields serde accepts at each level.
    #[test]
    fn strict_key_lists_match_the_serde_structs() {
        fn expected(err: String) -> Vec<String> {
            let tail = err.split("expected").nth(1).unwrap_or_else(|| panic!("{err}")).to_owned();
            tail.split('`').skip(1).step_by(2).map(str::to_owned).collect()
        }
        fn sorted(keys: &[&str]) -> Vec<String> {
            let mut v: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
            v.sort();
            v
        }
        let mut cases: Vec<(Vec<String>, &[&str])> = vec![
            (expected(toml::from_str::<SuiteFile>("zz = 1").unwrap_err().to_string()), SUITE_KEYS),
            (expected(toml::from_str::<CaseFile>("zz = 1").unwrap_err().to_string()), CASE_KEYS),
            (expected(toml::from_str::<Message>("zz = 1").unwrap_err().to_string()), MESSAGE_KEYS),
            (expected(toml::from_str::<Generate>("zz = 1").unwrap_err().to_string()), GENERATE_KEYS),
            (expected(toml::from_str::<Check>("zz = 1").unwrap_err().to_string()), CHECK_KEYS),
            (expected(toml::from_str::<ToolCallCheck>("zz = 1").unwrap_err().to_string()), TOOL_CALL_KEYS),
        ];
        for (serde, ours) in cases.iter_mut() {
            serde.sort();
            assert_eq!(*serde, sorted(ours));
        }
    }

    #[test]
    fn unknown_suite_keys_name_their_path_and_the_likely_key() {
        let text = "id = \"t\"\nversion = 1\n[[cases]]\nid = \"a\"\nmax_tokens = 8\nmessages = [{ role = \"user\", content = \"hi\" }]\n[cases.check]\ncontians = [\"x\"]\n";
        let err = Suite::parse(text, "t").unwrap_err().to_string();
        assert!(err.contains("cases[0].check.contians: unknown key; did you mean `contains`?"), "{err}");
        let nul = "id = \"t\"\nversion = 1\n[[cases]]\nid = \"a\"\nmax_tokens = 8\nmessages = [{ role = \"user\", content = \"h\\u0000i\" }]\n";
        let err = Suite::parse(nul, "t").unwrap_err().to_string();
        assert!(err.contains("cases[0].messages[0].content: NUL character"), "{err}");
    }

    #[test]
    fn request_is_greedy_and_carries_thinking_and_usage_options() {
        let s = Suite::embedded_default();
        let streamed = s.cases.iter().find(|c| c.stream).unwrap();
        let body = streamed.request_body("m", &Map::new());
        assert_eq!(body["temperature"], 0);
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
    }

    #[test]
    fn digest_follows_the_text() {
        let a = Suite::embedded_default();
        let b = Suite::parse(&DEFAULT_SUITE.replace("version = 1", "version = 2"), "x").unwrap();
        assert_ne!(a.digest, b.digest);
        assert_eq!(a.digest, Suite::embedded_default().digest);
    }
}
