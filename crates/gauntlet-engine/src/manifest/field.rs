//! `[profiles.P.bench] workload`: a workload from the field (#34), read and validated here, before any server
//! starts. `{ trace = "FILE", format = "mooncake", block_size = 512, speed = 1.0 }` replays a Mooncake-style trace;
//! `{ sharegpt = "FILE", conversations = N, turns = T }` sends a ShareGPT file's conversations turn by turn;
//! `{ conversations = N, turns = T, system_words = S, user_words = U, assistant_words = A }` generates them.
//! Both files are untrusted: bounded in bytes, rows and every number, each bad line reported with its number, and
//! never a panic (the `field_inputs` fuzz target feeds [`parse_mooncake`] and [`parse_sharegpt`]).

use std::path::Path;
use std::sync::Arc;

use gauntlet_schema::bench::FieldData;
use gauntlet_schema::field::{BLOCK_SIZE_DEFAULT, Conversation, FieldWorkload, Speaker, SyntheticShape, TraceRow};
use serde_json::Value as Json;

use super::contract::{self, keys};
use super::fields::{Problems, Reader, inside_root};

/// Bytes a trace or ShareGPT file may hold (Mooncake's published traces are a few MiB).
pub const FIELD_FILE_CAP: u64 = 64 << 20;
pub use super::contract::{BLOCK_SIZE_MAX, MESSAGES_MAX, ROWS_MAX};
/// A row's input and output length, in tokens (a prompt is built word by word: this bounds one prompt's size).
pub const INPUT_LENGTH_MAX: u64 = 131_072;
pub const OUTPUT_LENGTH_MAX: u64 = 1 << 20;
/// A trace spans at most a week (timestamps in milliseconds from its first row).
pub const SPAN_MS_MAX: u64 = 7 * 24 * 3600 * 1000;
/// Hash ids are integers a JSON reader keeps exactly.
pub const HASH_ID_MAX: u64 = (1 << 53) - 1;
/// The characters of one message (ShareGPT).
pub const MESSAGE_CHARS_MAX: usize = 256 << 10;
/// Errors listed before the rest are only counted.
const ERRORS_SHOWN: usize = 20;

/// Rows of a Mooncake trace (JSONL: `timestamp` in ms, `input_length`, `output_length`, `hash_ids`), in time order;
/// blank lines skipped. A row's hash ids must cover its input (`hash_ids.len()` = ⌈input_length / block_size⌉), so
/// the prompt built from them is exactly its input length.
pub fn parse_mooncake(text: &str, block_size: u32) -> Result<Vec<TraceRow>, Vec<String>> {
    let mut rows: Vec<TraceRow> = Vec::new();
    let mut errors = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let n = i + 1;
        if rows.len() >= ROWS_MAX {
            errors.push(format!("line {n}: more than {ROWS_MAX} rows"));
            break;
        }
        match mooncake_row(line, n, block_size, rows.last()) {
            Ok(row) => rows.push(row),
            Err(e) => errors.push(format!("line {n}: {e}")),
        }
    }
    if rows.is_empty() && errors.is_empty() {
        errors.push("no row in the trace".into());
    }
    if errors.is_empty() { Ok(rows) } else { Err(shown(errors)) }
}

fn shown(mut errors: Vec<String>) -> Vec<String> {
    if errors.len() > ERRORS_SHOWN {
        let more = errors.len() - ERRORS_SHOWN;
        errors.truncate(ERRORS_SHOWN);
        errors.push(format!("and {more} more"));
    }
    errors
}

fn mooncake_row(line: &str, n: usize, block: u32, previous: Option<&TraceRow>) -> Result<TraceRow, String> {
    let v: Json = serde_json::from_str(line).map_err(|e| format!("not JSON ({e})"))?;
    let Json::Object(m) = &v else { return Err("not a JSON object".into()) };
    let count = |key: &str, max: u64| -> Result<u64, String> {
        match m.get(key) {
            None => Err(format!("no `{key}`")),
            Some(x) => x
                .as_u64()
                .filter(|x| *x <= max)
                .ok_or_else(|| format!("`{key}` must be an integer in 0..={max}, found {}", short(x))),
        }
    };
    let timestamp_ms = count("timestamp", SPAN_MS_MAX)?;
    let input_length = count("input_length", INPUT_LENGTH_MAX)?;
    let output_length = count("output_length", OUTPUT_LENGTH_MAX)?;
    if input_length == 0 || output_length == 0 {
        return Err("`input_length` and `output_length` must be at least 1".into());
    }
    let ids = match m.get("hash_ids") {
        Some(Json::Array(a)) => a,
        Some(x) => return Err(format!("`hash_ids` must be an array of integers, found {}", short(x))),
        None => return Err("no `hash_ids`".into()),
    };
    let want = input_length.div_ceil(u64::from(block.max(1)));
    if ids.len() as u64 != want {
        return Err(format!(
            "{} hash ids for an input of {input_length} tokens: blocks of {block} tokens need {want}",
            ids.len()
        ));
    }
    let mut hash_ids = Vec::with_capacity(ids.len());
    for (k, id) in ids.iter().enumerate() {
        match id.as_u64().filter(|x| *x <= HASH_ID_MAX) {
            Some(x) => hash_ids.push(x),
            None => return Err(format!("hash_ids[{k}] must be an integer in 0..={HASH_ID_MAX}, found {}", short(id))),
        }
    }
    if let Some(p) = previous
        && timestamp_ms < p.timestamp_ms
    {
        return Err(format!(
            "timestamp {timestamp_ms} is before line {}'s {}: a trace's rows are in time order",
            p.line, p.timestamp_ms
        ));
    }
    Ok(TraceRow { line: n, timestamp_ms, input_length, output_length, hash_ids })
}

/// A value as an error message shows it: at most 40 characters, no control character.
fn short(v: &Json) -> String {
    let s = v.to_string();
    let mut out: String = s.chars().take(40).map(|c| if c.is_control() { '?' } else { c }).collect();
    if s.chars().count() > 40 {
        out.push('…');
    }
    out
}

/// Conversations of a ShareGPT file: a JSON array (or JSONL, one per line) of objects whose `conversations` is a
/// list of `{from, value}`, `from` one of `system`, `human`/`user`, `gpt`/`assistant`/`chatgpt`/`bing`/`bard`.
/// Every turn is kept (not only the first two); a conversation must start (after an optional system message) with
/// a user message, and user and assistant messages alternate. A trailing assistant message is dropped (no request
/// would carry it).
pub fn parse_sharegpt(text: &str) -> Result<Vec<Conversation>, Vec<String>> {
    let trimmed = text.trim_start();
    let items: Vec<(usize, Result<Json, String>)> = if trimmed.starts_with('[') {
        match serde_json::from_str::<Json>(text) {
            Ok(Json::Array(a)) => a.into_iter().enumerate().map(|(i, v)| (i, Ok(v))).collect(),
            Ok(_) => return Err(vec!["not a JSON array".into()]),
            Err(e) => return Err(vec![format!("not JSON ({e})")]),
        }
    } else {
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| (i, serde_json::from_str::<Json>(l).map_err(|e| format!("not JSON ({e})"))))
            .collect()
    };
    let what = if trimmed.starts_with('[') { "item" } else { "line" };
    let mut out = Vec::new();
    let mut errors = Vec::new();
    for (i, item) in items {
        let at = format!("{what} {}", i + 1);
        if out.len() >= ROWS_MAX {
            errors.push(format!("{at}: more than {ROWS_MAX} conversations"));
            break;
        }
        match item.and_then(|v| conversation(&v)) {
            Ok(c) => out.push(c),
            Err(e) => errors.push(format!("{at}: {e}")),
        }
    }
    if out.is_empty() && errors.is_empty() {
        errors.push("no conversation in the file".into());
    }
    if errors.is_empty() { Ok(out) } else { Err(shown(errors)) }
}

fn conversation(v: &Json) -> Result<Conversation, String> {
    let turns = match v.get("conversations") {
        Some(Json::Array(a)) => a,
        Some(x) => return Err(format!("`conversations` must be an array, found {}", short(x))),
        None => return Err("no `conversations`".into()),
    };
    if turns.len() > MESSAGES_MAX {
        return Err(format!("{} messages: at most {MESSAGES_MAX}", turns.len()));
    }
    let mut out: Conversation = Vec::new();
    for (k, t) in turns.iter().enumerate() {
        let from = t.get("from").and_then(Json::as_str).ok_or(format!("conversations[{k}]: no string `from`"))?;
        let value = t.get("value").and_then(Json::as_str).ok_or(format!("conversations[{k}]: no string `value`"))?;
        if value.chars().count() > MESSAGE_CHARS_MAX {
            return Err(format!("conversations[{k}]: longer than {MESSAGE_CHARS_MAX} characters"));
        }
        let speaker = match from {
            "system" => Speaker::System,
            "human" | "user" => Speaker::User,
            "gpt" | "assistant" | "chatgpt" | "bing" | "bard" => Speaker::Assistant,
            other => {
                let other: String = other.chars().take(20).map(|c| if c.is_control() { '?' } else { c }).collect();
                return Err(format!("conversations[{k}]: `from` {other:?} is not system, human or gpt"));
            }
        };
        let expected = match out.last().map(|(s, _)| *s) {
            None | Some(Speaker::System) | Some(Speaker::Assistant) => Speaker::User,
            Some(Speaker::User) => Speaker::Assistant,
        };
        if speaker == Speaker::System && out.is_empty() {
            out.push((speaker, value.to_owned()));
            continue;
        }
        if speaker != expected {
            return Err(format!(
                "conversations[{k}]: a {} message where a {} message belongs (turns alternate)",
                speaker.role(),
                expected.role()
            ));
        }
        out.push((speaker, value.to_owned()));
    }
    while out.last().is_some_and(|(s, _)| *s != Speaker::User) {
        out.pop();
    }
    if !out.iter().any(|(s, _)| *s == Speaker::User) {
        return Err("no user message".into());
    }
    Ok(out)
}

/// `[profiles.P.bench] workload`, when given: the field workload and its parsed input (`None` when absent or
/// wrong: an error then). A trace replay sends every row once a batch; its concurrency is its row count.
pub(crate) fn read_field(p: &mut Problems, b: &Reader, root: &Path) -> Option<(FieldWorkload, FieldData)> {
    let t = b.table_of(p, "workload")?;
    let path = b.at("workload");
    let r = Reader::new(t, path.clone());
    if r.has("trace") {
        p.unknown_keys(t, &path, keys::<contract::TraceWorkload>());
        let rel = r.string(p, "trace")?;
        match r.string(p, "format").as_deref() {
            Some("mooncake") => {}
            Some(other) => {
                p.error(&r.at("format"), format!("`{other}`: the trace formats read are \"mooncake\""));
                return None;
            }
            None => {
                p.error(&r.at("format"), "say the trace's format: \"mooncake\"");
                return None;
            }
        }
        let block_size = r.integer(p, "block_size", 1, BLOCK_SIZE_MAX).map_or(BLOCK_SIZE_DEFAULT, |n| n as u32);
        let speed = r.float(p, "speed", 1e-3, 1e3).unwrap_or(1.0);
        let (bytes, sha256) = read_file(p, &r, "trace", &rel, root)?;
        match parse_mooncake(&String::from_utf8_lossy(&bytes), block_size) {
            Ok(rows) => {
                let span_ms = rows.last().map_or(0, |r| r.timestamp_ms);
                let w = FieldWorkload::Trace {
                    path: rel,
                    sha256,
                    format: "mooncake".into(),
                    block_size,
                    speed,
                    rows: rows.len(),
                    span_ms,
                };
                Some((w, FieldData::Trace(Arc::new(rows))))
            }
            Err(errors) => {
                p.error(&r.at("trace"), format!("`{rel}`: {}", errors.join("; ")));
                None
            }
        }
    } else if r.has("sharegpt") {
        p.unknown_keys(t, &path, keys::<contract::ShareGptWorkload>());
        let rel = r.string(p, "sharegpt")?;
        let most = r.integer(p, "conversations", 1, ROWS_MAX as i64).map_or(usize::MAX, |n| n as usize);
        let turns = r.integer(p, "turns", 1, MESSAGES_MAX as i64).map_or(usize::MAX, |n| n as usize);
        let (bytes, sha256) = read_file(p, &r, "sharegpt", &rel, root)?;
        match parse_sharegpt(&String::from_utf8_lossy(&bytes)) {
            Ok(mut all) => {
                all.truncate(most);
                for c in &mut all {
                    keep_turns(c, turns);
                }
                let most_turns = all.iter().map(user_turns).max().unwrap_or(0);
                let w = FieldWorkload::Conversations {
                    source: "sharegpt".into(),
                    path: Some(rel),
                    sha256: Some(sha256),
                    conversations: all.len(),
                    turns: most_turns,
                    synthetic: None,
                };
                Some((w, FieldData::Conversations(Arc::new(all))))
            }
            Err(errors) => {
                p.error(&r.at("sharegpt"), format!("`{rel}`: {}", errors.join("; ")));
                None
            }
        }
    } else if r.has("conversations") {
        p.unknown_keys(t, &path, keys::<contract::SyntheticWorkload>());
        let conversations = r.integer(p, "conversations", 1, 1024)? as usize;
        let turns = r.integer(p, "turns", 1, 64)? as usize;
        let words = |p: &mut Problems, key: &str, min: i64, default: u32| {
            r.integer(p, key, min, 8192).map_or(default, |n| n as u32)
        };
        let shape = SyntheticShape {
            system_words: words(p, "system_words", 0, 64),
            user_words: words(p, "user_words", 1, 32),
            assistant_words: words(p, "assistant_words", 1, 32),
        };
        let w = FieldWorkload::Conversations {
            source: "synthetic".into(),
            path: None,
            sha256: None,
            conversations,
            turns,
            synthetic: Some(shape),
        };
        // The synthetic conversations are generated from the bench's seed when the bench runs.
        Some((w, FieldData::None))
    } else {
        p.error(&path, "give `trace` (a Mooncake trace), `sharegpt` (a ShareGPT file) or `conversations` (synthetic)");
        None
    }
}

/// The first `turns` user turns of a conversation (with the messages between them).
fn keep_turns(c: &mut Conversation, turns: usize) {
    let mut seen = 0;
    let cut = c.iter().position(|(s, _)| {
        if *s == Speaker::User {
            seen += 1;
        }
        seen > turns
    });
    if let Some(cut) = cut {
        c.truncate(cut);
    }
    while c.last().is_some_and(|(s, _)| *s != Speaker::User) {
        c.pop();
    }
}

fn user_turns(c: &Conversation) -> usize {
    c.iter().filter(|(s, _)| *s == Speaker::User).count()
}

fn read_file(p: &mut Problems, r: &Reader, key: &str, rel: &str, root: &Path) -> Option<(Vec<u8>, String)> {
    let file = inside_root(p, &r.at(key), root, rel)?;
    match crate::util::bounded::read_named_bytes(&file, FIELD_FILE_CAP) {
        Ok(bytes) => {
            let sha = crate::util::sha256_hex(&bytes);
            Some((bytes, sha))
        }
        Err(e) => {
            p.error(&r.at(key), format!("cannot read `{}`: {e}", file.display()));
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mooncake_trace_reads_in_time_order_with_its_hash_ids_covering_each_input() {
        let text = "{\"timestamp\": 0, \"input_length\": 20, \"output_length\": 4, \"hash_ids\": [1, 2, 3]}\n\n\
                    {\"timestamp\": 250, \"input_length\": 16, \"output_length\": 2, \"hash_ids\": [1, 2]}\n";
        let rows = parse_mooncake(text, 8).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[1].line, rows[1].timestamp_ms, &rows[1].hash_ids), (3, 250, &vec![1, 2]));
    }

    #[test]
    fn every_bad_trace_line_is_named_and_none_panics() {
        let cases = [
            ("not json", "line 1: not JSON"),
            ("[1]", "line 1: not a JSON object"),
            (
                "{\"timestamp\": -1, \"input_length\": 8, \"output_length\": 1, \"hash_ids\": [1]}",
                "`timestamp` must be",
            ),
            ("{\"timestamp\": 0, \"input_length\": 9, \"output_length\": 1, \"hash_ids\": [1]}", "need 2"),
            ("{\"timestamp\": 0, \"input_length\": 8, \"output_length\": 0, \"hash_ids\": [1]}", "at least 1"),
            ("{\"timestamp\": 0, \"input_length\": 8, \"output_length\": 1, \"hash_ids\": [1.5]}", "hash_ids[0]"),
            ("{\"timestamp\": 0, \"input_length\": 8, \"output_length\": 1, \"hash_ids\": \"x\"}", "must be an array"),
            ("{\"timestamp\": 0, \"input_length\": 999999999, \"output_length\": 1, \"hash_ids\": []}", "input_length"),
            ("{\"input_length\": 8, \"output_length\": 1, \"hash_ids\": [1]}", "no `timestamp`"),
            ("", "no row in the trace"),
        ];
        for (text, want) in cases {
            let errors = parse_mooncake(text, 8).unwrap_err();
            assert!(errors.iter().any(|e| e.contains(want)), "{text}: {errors:?}");
        }
        let late = "{\"timestamp\": 9, \"input_length\": 8, \"output_length\": 1, \"hash_ids\": [1]}\n\
                    {\"timestamp\": 3, \"input_length\": 8, \"output_length\": 1, \"hash_ids\": [1]}";
        assert_eq!(
            parse_mooncake(late, 8).unwrap_err(),
            vec!["line 2: timestamp 3 is before line 1's 9: a trace's rows are in time order"]
        );
        let many = "x\n".repeat(100);
        let errors = parse_mooncake(&many, 8).unwrap_err();
        assert_eq!((errors.len(), errors.last().unwrap().as_str()), (ERRORS_SHOWN + 1, "and 80 more"));
    }

    #[test]
    fn sharegpt_keeps_every_turn_and_refuses_turns_that_do_not_alternate() {
        let text = r#"[{"id": "a", "conversations": [{"from": "system", "value": "Be brief."},
            {"from": "human", "value": "Hi"}, {"from": "gpt", "value": "Hello"}, {"from": "human", "value": "How?"},
            {"from": "gpt", "value": "Well"}, {"from": "human", "value": "Bye"}, {"from": "gpt", "value": "Bye"}]}]"#;
        let c = parse_sharegpt(text).unwrap();
        assert_eq!(c[0].len(), 6, "the trailing answer is dropped: {:?}", c[0]);
        assert_eq!(user_turns(&c[0]), 3);
        let mut two = c[0].clone();
        keep_turns(&mut two, 2);
        assert_eq!(two.last().unwrap().1, "How?");
        let bad = r#"{"conversations": [{"from": "gpt", "value": "x"}]}"#;
        assert!(parse_sharegpt(bad).unwrap_err()[0].contains("line 1: conversations[0]: a assistant message"));
        let bad = r#"{"conversations": [{"from": "\u001b[31m", "value": "x"}]}"#;
        let e = parse_sharegpt(bad).unwrap_err();
        assert!(!e[0].contains('\u{1b}'), "{e:?}");
        assert!(parse_sharegpt("{}").unwrap_err()[0].contains("no `conversations`"));
        assert!(parse_sharegpt("[]").unwrap_err()[0].contains("no conversation"));
    }
}
