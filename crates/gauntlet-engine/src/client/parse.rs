//! Turning server bytes into an [`Answer`]: one JSON completion, or an SSE stream of chunks. Pure functions of the
//! bytes (and the arrival times handed in), so every malformed shape is unit-testable.

use gauntlet_schema::{Answer, ServerTimings, StreamEvent, TimingSource, ToolCall, Usage};
use serde_json::Value;

use super::error::ClientError;
use super::tokens::TokenCollector;

/// A non-streamed chat completion.
pub fn parse_completion(v: &Value) -> Result<Answer, ClientError> {
    if let Some(err) = v.get("error") {
        return Err(ClientError::Malformed(format!("server returned an error object: {}", short(err))));
    }
    let choice = first_choice(v)?;
    let message = choice
        .get("message")
        .filter(|m| m.is_object())
        .ok_or_else(|| ClientError::Malformed("choices[0].message missing".into()))?;
    let content = opt_str(message, "content", "choices[0].message.content")?;
    let reasoning = reasoning(message, "choices[0].message")?;
    let mut tool_calls = Vec::new();
    if let Some(calls) = message.get("tool_calls").filter(|c| !c.is_null()) {
        let calls = calls
            .as_array()
            .ok_or_else(|| ClientError::Malformed("choices[0].message.tool_calls is not an array".into()))?;
        for (i, call) in calls.iter().enumerate() {
            let f = call.get("function").unwrap_or(&Value::Null);
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| ClientError::Malformed(format!("tool_calls[{i}].function.name missing")))?;
            let arguments = crate::util::raw::cap(f.get("arguments").cloned().unwrap_or(Value::Null));
            if !(arguments.is_string() || arguments.is_object() || arguments.is_null()) {
                return Err(ClientError::Malformed(format!(
                    "tool_calls[{i}].function.arguments is neither a string nor an object"
                )));
            }
            tool_calls.push(ToolCall { name: name.to_owned(), arguments });
        }
    }
    let mut tokens = TokenCollector::default();
    tokens.add_choice(choice)?;
    Ok(Answer {
        content,
        reasoning,
        tool_calls,
        finish_reason: choice.get("finish_reason").and_then(Value::as_str).map(str::to_owned),
        usage: usage(v)?,
        server_timings: timings(v),
        timings: normalised_timings(v),
        timeline: Vec::new(),
        first_byte_seconds: None,
        tokens: tokens.finish(false),
    })
}

fn first_choice(v: &Value) -> Result<&Value, ClientError> {
    v.get("choices")
        .and_then(Value::as_array)
        .and_then(|c| c.first())
        .ok_or_else(|| ClientError::Malformed("no choices[0] in the answer".into()))
}

/// The reasoning text under either name engines give it: `reasoning_content` (llama.cpp, SGLang, TRT-LLM,
/// mistral.rs, older vLLM) or `reasoning` (vLLM since its PR #33402, Ollama's `/v1`). Transition builds of vLLM send
/// both, one a copy of the other: the first non-empty one is the text (docs/dialects.md §1.5, §4.5).
fn reasoning(obj: &Value, path: &str) -> Result<String, ClientError> {
    let old = opt_str(obj, "reasoning_content", &format!("{path}.reasoning_content"))?;
    if !old.is_empty() {
        return Ok(old);
    }
    opt_str(obj, "reasoning", &format!("{path}.reasoning"))
}

/// A string field that may be absent or null, but never another type.
fn opt_str(obj: &Value, key: &str, path: &str) -> Result<String, ClientError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(other) => Err(ClientError::Malformed(format!("{path} is not a string: {}", short(other)))),
    }
}

/// The most tokens a usage count may claim (10^8, far beyond any context window); more is a malformed answer.
const MAX_PLAUSIBLE_TOKENS: u64 = 100_000_000;

fn usage(v: &Value) -> Result<Option<Usage>, ClientError> {
    let Some(u) = v.get("usage").filter(|u| !u.is_null()) else {
        return Ok(None);
    };
    let count = |k: &str| -> Result<Option<u64>, ClientError> {
        match u.get(k) {
            None | Some(Value::Null) => Ok(None),
            Some(n) => match n.as_u64() {
                None => Err(ClientError::Malformed(format!("usage.{k} is not a non-negative integer: {n}"))),
                // No context window holds this many tokens: a count above it would make a fake speed.
                Some(c) if c > MAX_PLAUSIBLE_TOKENS => {
                    Err(ClientError::Malformed(format!("usage.{k} is implausible: {c} tokens")))
                }
                Some(c) => Ok(Some(c)),
            },
        }
    };
    let cached_tokens = match u.get("prompt_tokens_details").filter(|d| !d.is_null()) {
        None => None,
        Some(d) if d.is_object() => match d.get("cached_tokens") {
            None | Some(Value::Null) => None,
            Some(n) => match n.as_u64() {
                Some(c) if c <= MAX_PLAUSIBLE_TOKENS => Some(c),
                _ => {
                    return Err(ClientError::Malformed(format!(
                        "usage.prompt_tokens_details.cached_tokens is not a plausible token count: {}",
                        short(n)
                    )));
                }
            },
        },
        Some(d) => {
            return Err(ClientError::Malformed(format!("usage.prompt_tokens_details is not an object: {}", short(d))));
        }
    };
    Ok(Some(Usage {
        prompt_tokens: count("prompt_tokens")?,
        completion_tokens: count("completion_tokens")?,
        cached_tokens,
    }))
}

/// llama.cpp reports `timings` at the top level; some engines nest them under `usage`.
fn timings(v: &Value) -> Option<Value> {
    let raw = v.get("timings").or_else(|| v.get("usage").and_then(|u| u.get("timings"))).filter(|t| t.is_object());
    // Kept in the record as the server sent it, within the depth and size a record reads back (#32 D2).
    raw.cloned().map(crate::util::raw::cap)
}

/// The server's timings in one shape, from wherever its engine puts them (docs/dialects.md): llama.cpp's `timings`
/// (top level, or under `usage`), vLLM's per-request `metrics` (§1.8), mistral.rs's seconds in `usage` (§5.8).
/// Lenient: a number that is missing, negative or not finite is left out, never an error (field sets differ by
/// build; these are reported, not checked).
fn normalised_timings(v: &Value) -> Option<ServerTimings> {
    let num = |o: &Value, k: &str| o.get(k).and_then(Value::as_f64).filter(|x| x.is_finite() && *x >= 0.0);
    let count = |o: &Value, k: &str| o.get(k).and_then(Value::as_u64).filter(|n| *n <= MAX_PLAUSIBLE_TOKENS);
    if let Some(t) = timings(v) {
        let t = &t;
        return Some(ServerTimings {
            source: TimingSource::LlamaCpp,
            prompt_tokens: count(t, "prompt_n"),
            prompt_ms: num(t, "prompt_ms"),
            predicted_tokens: count(t, "predicted_n"),
            predicted_ms: num(t, "predicted_ms"),
            predicted_per_second: num(t, "predicted_per_second"),
            cache_tokens: count(t, "cache_n"),
            draft_tokens: count(t, "draft_n"),
            draft_accepted_tokens: count(t, "draft_n_accepted"),
        });
    }
    if let Some(m) = v.get("metrics").filter(|m| m.is_object()) {
        return Some(ServerTimings {
            source: TimingSource::Vllm,
            prompt_ms: num(m, "time_to_first_token_ms"),
            predicted_ms: num(m, "generation_time_ms"),
            predicted_per_second: num(m, "tokens_per_second"),
            ..ServerTimings::default()
        });
    }
    let u = v.get("usage").filter(|u| u.get("total_completion_time_sec").is_some())?;
    let ms = |k: &str| num(u, k).map(|s| s * 1000.0);
    Some(ServerTimings {
        source: TimingSource::MistralRs,
        prompt_tokens: count(u, "prompt_tokens"),
        prompt_ms: ms("total_prompt_time_sec"),
        predicted_tokens: count(u, "completion_tokens"),
        predicted_ms: ms("total_completion_time_sec"),
        predicted_per_second: num(u, "avg_compl_tok_per_sec"),
        ..ServerTimings::default()
    })
}

/// The message of an error object in any of the engines' shapes (docs/dialects.md §0, "Error envelope"): nested
/// `{"error":{"message"}}`, flat `{"object":"error","message"}`, TGI's `{"error":"…"}`, mistral.rs's `{"message"}`.
pub fn error_message(v: &Value) -> Option<String> {
    let e = v.get("error").unwrap_or(v);
    let m = match e {
        Value::String(s) => Some(s.as_str()),
        Value::Object(_) => e.get("message").and_then(Value::as_str),
        _ => None,
    }
    .or_else(|| v.get("message").and_then(Value::as_str))?;
    Some(preview(m))
}

fn short(v: &Value) -> String {
    let mut s = v.to_string();
    if s.len() > 200 {
        let cut = (0..=200).rev().find(|i| s.is_char_boundary(*i)).unwrap_or(0);
        s.truncate(cut);
        s.push('…');
    }
    s
}

/// Reassembles a `text/event-stream` of chat-completion chunks, timestamping each event on arrival.
#[derive(Debug, Default)]
pub struct StreamAssembler {
    pending: Vec<u8>,
    answer: Answer,
    done: bool,
    events: usize,
    tokens: TokenCollector,
    calls: ToolCallAssembler,
    /// The body's end after a chunk with a `finish_reason` ends the stream as `[DONE]` does: the engine never
    /// sends `[DONE]` (its kind says so: `transformers serve`). Off, a stream without `[DONE]` was cut short.
    close_ends: bool,
}

/// The most tool calls one streamed answer may make.
const MAX_STREAMED_CALLS: usize = 64;
/// The most bytes of arguments one streamed tool call may carry.
const MAX_CALL_ARGUMENTS: usize = 1 << 20;

/// Streamed tool calls put back together: fragments are keyed by `index`; the first of a call carries its `id` and
/// `function.name`, later ones pieces of `function.arguments` (vLLM, SGLang, TRT-LLM, llama.cpp), or every fragment
/// repeats the id (TGI), or a call arrives whole in one fragment (Ollama, mistral.rs). Shapes in docs/dialects.md
/// §1.6, §2.6, §3.6, §4.6, §5.6, §6.6.
#[derive(Debug, Default)]
struct ToolCallAssembler {
    calls: Vec<PartialCall>,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: Option<String>,
    name: Option<String>,
    arguments: String,
    seen: bool,
}

impl ToolCallAssembler {
    fn add(&mut self, fragments: &Value) -> Result<(), ClientError> {
        let bad = |m: String| Err(ClientError::Malformed(format!("streamed tool call: {m}")));
        let Some(list) = fragments.as_array() else {
            return bad(format!("delta.tool_calls is not an array: {}", short(fragments)));
        };
        for (pos, f) in list.iter().enumerate() {
            if !f.is_object() {
                return bad(format!("fragment {pos} is not an object: {}", short(f)));
            }
            let index = match f.get("index") {
                None | Some(Value::Null) => pos,
                Some(i) => match i.as_u64() {
                    Some(i) if (i as usize) < MAX_STREAMED_CALLS => i as usize,
                    _ => return bad(format!("index {} is not within 0..{MAX_STREAMED_CALLS}", short(i))),
                },
            };
            if index >= self.calls.len() {
                self.calls.resize_with(index + 1, PartialCall::default);
            }
            let call = &mut self.calls[index];
            call.seen = true;
            match f.get("id") {
                None | Some(Value::Null) => {}
                Some(Value::String(id)) => match &call.id {
                    Some(had) if had != id => {
                        return bad(format!(
                            "call {index} changed its id from `{}` to `{}`",
                            preview(had),
                            preview(id)
                        ));
                    }
                    Some(_) => {}
                    None => call.id = Some(id.clone()),
                },
                Some(other) => return bad(format!("call {index}: id is not a string: {}", short(other))),
            }
            let function = match f.get("function") {
                None | Some(Value::Null) => continue,
                Some(function) if function.is_object() => function,
                Some(other) => return bad(format!("call {index}: function is not an object: {}", short(other))),
            };
            match function.get("name") {
                None | Some(Value::Null) => {}
                // Some servers send the name again (or empty) on later fragments: only a different name is wrong.
                Some(Value::String(n)) if n.is_empty() => {}
                Some(Value::String(n)) => match &call.name {
                    Some(had) if had != n => {
                        return bad(format!(
                            "call {index} changed its name from `{}` to `{}`",
                            preview(had),
                            preview(n)
                        ));
                    }
                    Some(_) => {}
                    None => call.name = Some(n.clone()),
                },
                Some(other) => return bad(format!("call {index}: function.name is not a string: {}", short(other))),
            }
            match function.get("arguments") {
                None | Some(Value::Null) => {}
                Some(Value::String(piece)) => {
                    if call.arguments.len() + piece.len() > MAX_CALL_ARGUMENTS {
                        return bad(format!("call {index}: arguments longer than {MAX_CALL_ARGUMENTS} bytes"));
                    }
                    call.arguments.push_str(piece);
                }
                Some(other) => {
                    return bad(format!("call {index}: function.arguments is not a string: {}", short(other)));
                }
            }
        }
        Ok(())
    }

    /// The calls in index order, as a non-streamed answer gives them; a call without a name, or an index no
    /// fragment had, is an error.
    fn finish(self) -> Result<Vec<ToolCall>, ClientError> {
        self.calls
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let missing = |what: &str| ClientError::Malformed(format!("streamed tool call {i}: {what}"));
                if !c.seen {
                    return Err(missing("no fragment had this index (the indexes have a gap)"));
                }
                let name = c.name.ok_or_else(|| missing("no fragment named its function"))?;
                Ok(ToolCall { name, arguments: Value::String(c.arguments) })
            })
            .collect()
    }
}

/// Longest single SSE line we buffer while waiting for its newline.
const MAX_LINE: usize = 1 << 20;

impl StreamAssembler {
    /// An assembler for a server whose streams end at the body's end after the finish chunk, never with `[DONE]`
    /// (`close_ends`; off: the common end, `[DONE]`, as [`StreamAssembler::default`]).
    pub fn ending(close_ends: bool) -> StreamAssembler {
        StreamAssembler { close_ends, ..StreamAssembler::default() }
    }

    pub fn done(&self) -> bool {
        self.done
    }

    /// Feed bytes that arrived at `t` seconds after the request was sent. Linear in the bytes fed, however the
    /// stream is cut: what is pending holds no newline (it was searched when it arrived), and the lines of a chunk
    /// leave the buffer in one move.
    pub fn feed(&mut self, bytes: &[u8], t: f64) -> Result<(), ClientError> {
        let searched = self.pending.len();
        self.pending.extend_from_slice(bytes);
        let pending = std::mem::take(&mut self.pending);
        let mut start = 0;
        let mut from = searched;
        while let Some(nl) = pending[from..].iter().position(|b| *b == b'\n').map(|i| from + i) {
            self.line(&pending[start..=nl], t)?;
            start = nl + 1;
            from = start;
            if self.done {
                return Ok(());
            }
        }
        self.pending = pending;
        self.pending.drain(..start);
        if self.pending.len() > MAX_LINE {
            return Err(ClientError::Malformed(format!("an SSE line longer than {MAX_LINE} bytes")));
        }
        Ok(())
    }

    fn line(&mut self, raw: &[u8], t: f64) -> Result<(), ClientError> {
        let line = std::str::from_utf8(raw)
            .map_err(|_| ClientError::Malformed("SSE line is not UTF-8".into()))?
            .trim_end_matches(['\n', '\r']);
        if line.is_empty() || line.starts_with(':') {
            return Ok(());
        }
        let Some(data) = line.strip_prefix("data:") else {
            if line.starts_with("event:") || line.starts_with("id:") || line.starts_with("retry:") {
                return Ok(());
            }
            return Err(ClientError::Malformed(format!("unexpected SSE line `{}`", preview(line))));
        };
        let data = data.trim_start();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| {
            ClientError::Malformed(format!("SSE event {} is not JSON ({e}): `{}`", self.events, preview(data)))
        })?;
        self.events += 1;
        if let Some(err) = chunk.get("error") {
            let said = error_message(&chunk).unwrap_or_else(|| short(err));
            return Err(ClientError::Malformed(format!("server sent an error event: {said}")));
        }
        if let Some(u) = usage(&chunk)? {
            self.answer.usage = Some(u);
        }
        if let Some(t) = timings(&chunk) {
            self.answer.server_timings = Some(t);
        }
        if let Some(t) = normalised_timings(&chunk) {
            self.answer.timings = Some(t);
        }
        let Some(choice) = chunk.get("choices").and_then(Value::as_array).and_then(|c| c.first()) else {
            // The usage-only chunk at the end has an empty choices list.
            return Ok(());
        };
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        let content = opt_str(delta, "content", "delta.content")?;
        let reasoning = reasoning(delta, "delta")?;
        if let Some(fragments) = delta.get("tool_calls").filter(|c| !c.is_null()) {
            self.calls.add(fragments)?;
        }
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.answer.finish_reason = Some(reason.to_owned());
        }
        self.tokens.add_choice(choice)?;
        self.answer.content.push_str(&content);
        self.answer.reasoning.push_str(&reasoning);
        self.answer.timeline.push(StreamEvent { t, content, reasoning });
        Ok(())
    }

    /// The answer, once the stream closed; a stream that never said `[DONE]` is an error, unless the server ends
    /// its streams at the body's end (see [`StreamAssembler::ending`]) and a chunk carried a `finish_reason`.
    pub fn finish(mut self) -> Result<Answer, ClientError> {
        if !self.done {
            if !self.pending.is_empty() {
                let rest = std::mem::take(&mut self.pending);
                let t = self.answer.timeline.last().map_or(0.0, |e| e.t);
                self.line(&rest, t)?;
            }
            if !self.done {
                match (self.close_ends, self.answer.finish_reason.is_some()) {
                    (false, _) => return Err(ClientError::MissingDone),
                    (true, false) => return Err(ClientError::MissingFinish),
                    (true, true) => {}
                }
            }
        }
        self.answer.tokens = self.tokens.finish(false);
        self.answer.tool_calls = self.calls.finish()?;
        Ok(self.answer)
    }
}

/// Finds the stream's end in the pieces of a body as they arrive: a line that is `data: [DONE]` and nothing else
/// (a token whose text is `[DONE]` is not one). Cheap enough to run on every piece while timestamps matter: it keeps
/// at most the first [`DONE_LINE_MAX`] bytes of the current line. The parser decides for real afterwards.
#[derive(Debug, Default)]
pub(super) struct DoneScanner {
    line: Vec<u8>,
    /// The current line is longer than any `data: [DONE]` line.
    long: bool,
}

/// `data:`, spaces, `[DONE]`, a CR: longer lines are not the end.
const DONE_LINE_MAX: usize = 32;

impl DoneScanner {
    /// Whether the stream's end is in what was fed so far: a complete `data: [DONE]` line, or a last line that is
    /// one so far (the body may end without its line end).
    pub(super) fn feed(&mut self, piece: &[u8]) -> bool {
        let mut rest = piece;
        while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
            self.take(&rest[..nl]);
            if self.is_done() {
                return true;
            }
            self.line.clear();
            self.long = false;
            rest = &rest[nl + 1..];
        }
        self.take(rest);
        self.is_done()
    }

    fn take(&mut self, bytes: &[u8]) {
        if self.long {
            return;
        }
        if self.line.len() + bytes.len() > DONE_LINE_MAX {
            self.long = true;
            self.line.clear();
        } else {
            self.line.extend_from_slice(bytes);
        }
    }

    fn is_done(&self) -> bool {
        let line = self.line.strip_suffix(b"\r").unwrap_or(&self.line);
        !self.long && line.strip_prefix(b"data:").is_some_and(|d| d.trim_ascii_start() == b"[DONE]")
    }
}

fn preview(s: &str) -> String {
    let cut = (0..=s.len().min(120)).rev().find(|i| s.is_char_boundary(*i)).unwrap_or(0);
    if cut < s.len() { format!("{}…", &s[..cut]) } else { s.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn completion_with_tool_call_usage_and_timings() {
        let v = json!({
            "choices": [{"finish_reason": "tool_calls", "message": {"content": null, "reasoning_content": "hm",
                "tool_calls": [{"function": {"name": "f", "arguments": "{\"a\":1}"}}]}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 7},
            "timings": {"predicted_per_second": 50.0}
        });
        let a = parse_completion(&v).unwrap();
        assert_eq!(a.content, "");
        assert_eq!(a.reasoning, "hm");
        assert_eq!(a.tool_calls[0].arguments, json!("{\"a\":1}"));
        assert_eq!(a.usage.unwrap().completion_tokens, Some(7));
        assert_eq!(a.server_timings.unwrap()["predicted_per_second"], 50.0);
        assert_eq!(a.finish_reason.as_deref(), Some("tool_calls"));
    }

    #[test]
    fn usage_timings_nested_as_some_engines_send() {
        let v =
            json!({"choices": [{"message": {"content": "x"}}], "usage": {"completion_tokens": 1, "timings": {"x": 1}}});
        assert_eq!(parse_completion(&v).unwrap().server_timings, Some(json!({"x": 1})));
    }

    #[test]
    fn malformed_completions_are_errors() {
        for (v, want) in [
            (json!({}), "no choices[0]"),
            (json!({"choices": []}), "no choices[0]"),
            (json!({"choices": [{}]}), "message missing"),
            (json!({"choices": [{"message": {"content": 5}}]}), "content is not a string"),
            (
                json!({"choices": [{"message": {"content": "x"}}], "usage": {"completion_tokens": -1}}),
                "usage.completion_tokens",
            ),
            (
                json!({"choices": [{"message": {"content": "x"}}], "usage": {"completion_tokens": u64::MAX}}),
                "usage.completion_tokens is implausible",
            ),
            (json!({"choices": [{"message": {"tool_calls": [{"function": {"arguments": 1}}]}}]}), "name missing"),
            (json!({"error": {"message": "boom"}}), "error object"),
        ] {
            let e = parse_completion(&v).unwrap_err().to_string();
            assert!(e.contains(want), "{v} → {e}");
        }
    }

    fn feed_all(parts: &[&str]) -> Result<Answer, ClientError> {
        let mut s = StreamAssembler::default();
        for (i, p) in parts.iter().enumerate() {
            s.feed(p.as_bytes(), i as f64)?;
        }
        s.finish()
    }

    #[test]
    fn stream_reassembles_across_split_chunks_and_timestamps_events() {
        let a = feed_all(&[
            "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\ndata: {\"choices\":[{\"delta\":{\"reasoning_content\":\"th\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"Hel",
            "lo\"}}]}\r\n\r\n: keep-alive\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"completion_tokens\":2}}\n\ndata: [DONE]\n\n",
        ])
        .unwrap();
        assert_eq!(a.content, "Hello");
        assert_eq!(a.reasoning, "th");
        assert_eq!(a.finish_reason.as_deref(), Some("stop"));
        assert_eq!(a.usage.unwrap().completion_tokens, Some(2));
        let content_events: Vec<_> = a.timeline.iter().filter(|e| !e.content.is_empty()).collect();
        assert_eq!(content_events.len(), 1);
        assert_eq!(content_events[0].t, 2.0, "stamped when its last byte arrived");
        assert_eq!(a.timeline[0].content, "", "role-only chunk kept as an empty event");
    }

    /// `transformers serve`'s end (seen on 5.19.0): usage on the finish chunk, then the body ends, no `[DONE]`.
    /// Its kind's assembler takes that as the end; every other kind's calls it cut short; a body that ends before
    /// the finish chunk is cut short for both.
    #[test]
    fn a_stream_ends_at_close_only_for_an_engine_that_ends_it_so() {
        let finished = [
            "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"},\"index\":0}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"Hello\"},\"index\":0}]}\n\n",
            "data: {\"choices\":[{\"delta\":{},\"index\":0,\"finish_reason\":\"length\"}],\"usage\":{\"completion_tokens\":1,\"prompt_tokens\":33,\"total_tokens\":34}}\n\n",
        ];
        let run = |close_ends: bool, parts: &[&str]| {
            let mut s = StreamAssembler::ending(close_ends);
            for (i, p) in parts.iter().enumerate() {
                s.feed(p.as_bytes(), i as f64)?;
            }
            s.finish()
        };
        let a = run(true, &finished).unwrap();
        assert_eq!((a.content.as_str(), a.finish_reason.as_deref()), ("Hello", Some("length")));
        assert_eq!(a.usage.unwrap().completion_tokens, Some(1));
        assert_eq!(run(false, &finished).unwrap_err(), ClientError::MissingDone);
        assert_eq!(run(true, &finished[..2]).unwrap_err(), ClientError::MissingFinish);
        assert_eq!(run(false, &finished[..2]).unwrap_err(), ClientError::MissingDone);
        // The last line without its line end still counts; a `[DONE]` is still an end for it.
        let unterminated = finished[2].trim_end();
        assert!(run(true, &[finished[0], unterminated]).is_ok());
        assert!(run(true, &[finished[0], finished[1], "data: [DONE]\n\n"]).is_ok());
    }

    #[test]
    fn stream_faults_are_typed() {
        let e = feed_all(&["data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\n"]).unwrap_err();
        assert_eq!(e, ClientError::MissingDone);
        let e = feed_all(&["data: {\"choices\":[{\"delta\":{\"content\":\n\n"]).unwrap_err();
        assert!(e.to_string().contains("is not JSON"), "{e}");
        let e = feed_all(&["garbage line\n"]).unwrap_err();
        assert!(e.to_string().contains("unexpected SSE line"), "{e}");
        let e = feed_all(&["data: {\"error\":{\"message\":\"oom\"}}\n\n"]).unwrap_err();
        assert!(e.to_string().contains("error event"), "{e}");
        let mut s = StreamAssembler::default();
        let big = vec![b'x'; MAX_LINE + 1];
        assert!(s.feed(&big, 0.0).is_err());
        let mut s = StreamAssembler::default();
        assert!(s.feed(&[0xff, 0xfe, b'\n'], 0.0).unwrap_err().to_string().contains("UTF-8"));
    }

    /// Seen while fuzzing (`fuzz/`, target `sse_stream`, which cuts a stream into chunks as small as a byte): a line
    /// trickled in byte by byte was searched again from its start on every byte, quadratic in its length: about
    /// 5·10^11 byte comparisons for this line; now each byte is looked at once.
    #[test]
    fn a_long_line_trickled_byte_by_byte_is_read_in_linear_time() {
        let mut s = StreamAssembler::default();
        let event =
            format!("data: {{\"choices\":[{{\"delta\":{{\"content\":\"{}\"}}}}]}}\n\n", "x".repeat(MAX_LINE - 100));
        for b in event.as_bytes() {
            s.feed(std::slice::from_ref(b), 0.0).unwrap();
        }
        s.feed(b"data: [DONE]\n\n", 1.0).unwrap();
        assert_eq!(s.finish().unwrap().content.len(), MAX_LINE - 100);
    }

    #[test]
    fn many_lines_in_one_chunk_and_a_line_split_across_chunks() {
        let mut s = StreamAssembler::default();
        let mut chunk = ": keep-alive\n".repeat(10_000);
        chunk.push_str("data: {\"choices\":[{\"delta\":{\"content\":\"a");
        s.feed(chunk.as_bytes(), 0.0).unwrap();
        s.feed(b"b\"}}]}\n\ndata: [DONE]\n\n", 1.0).unwrap();
        assert_eq!(s.finish().unwrap().content, "ab");
    }

    #[test]
    fn streamed_logprobs_become_the_answer_s_tokens_and_a_completion_s_too() {
        // Chunks as llama.cpp's server streams them with `logprobs: true` (one token per chunk).
        let chunk = |id: u64, t: &str| {
            format!(
                "data: {{\"choices\":[{{\"delta\":{{\"content\":\"{t}\"}},\"logprobs\":{{\"content\":[{{\"id\":{id},\
                 \"token\":\"{t}\",\"bytes\":[],\"logprob\":-0.5,\"top_logprobs\":[{{\"id\":{id},\"token\":\"{t}\",\
                 \"logprob\":-0.5}}]}}]}}}}]}}\n\n"
            )
        };
        let a = feed_all(&[&chunk(7, "Hi"), &chunk(8, "!"), "data: [DONE]\n\n"]).unwrap();
        let t = a.tokens.unwrap();
        assert_eq!((t.source, t.count), (gauntlet_schema::TokenSource::Ids, 2));
        assert_eq!(t.items.iter().map(|t| t.id).collect::<Vec<_>>(), [Some(7), Some(8)]);
        assert_eq!(t.items[1].text, "!");
        let none = feed_all(&["data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]\n\n"]).unwrap();
        assert_eq!(none.tokens, None, "not asked for here: the client marks text-only when the request asked");
        let v = json!({"choices": [{"message": {"content": "x"},
            "logprobs": {"content": [{"id": 3, "token": "x", "logprob": -0.1}]}}]});
        assert_eq!(parse_completion(&v).unwrap().tokens.unwrap().items[0].id, Some(3));
    }

    #[test]
    fn reasoning_is_read_under_both_names_cached_tokens_and_timings_normalised() {
        let v = json!({"choices": [{"message": {"content": "x", "reasoning": "thought"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": 4}},
            "timings": {"prompt_n": 1, "prompt_ms": 2.5, "predicted_n": 1, "predicted_ms": 10.0,
                "predicted_per_second": 100.0, "cache_n": 4}});
        let a = parse_completion(&v).unwrap();
        assert_eq!(a.reasoning, "thought");
        assert_eq!(a.usage.unwrap().cached_tokens, Some(4));
        let t = a.timings.unwrap();
        assert_eq!((t.source, t.prompt_tokens, t.cache_tokens), (TimingSource::LlamaCpp, Some(1), Some(4)));
        assert_eq!((t.prompt_ms, t.predicted_ms, t.predicted_per_second), (Some(2.5), Some(10.0), Some(100.0)));
        // vLLM's transition builds send both names, one a copy of the other.
        let both = json!({"choices": [{"message": {"content": "", "reasoning_content": "a", "reasoning": "a"}}]});
        assert_eq!(parse_completion(&both).unwrap().reasoning, "a");
        // mistral.rs puts its seconds in `usage`, vLLM its per-request metrics beside it.
        let m = json!({"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": 3,
            "completion_tokens": 2, "total_prompt_time_sec": 0.5, "total_completion_time_sec": 0.25,
            "avg_compl_tok_per_sec": 8.0}});
        let t = parse_completion(&m).unwrap().timings.unwrap();
        assert_eq!((t.source, t.prompt_ms, t.predicted_ms), (TimingSource::MistralRs, Some(500.0), Some(250.0)));
        let m = json!({"choices": [{"message": {"content": "x"}}], "metrics": {"generation_time_ms": 7.0,
            "tokens_per_second": "fast"}});
        let t = parse_completion(&m).unwrap().timings.unwrap();
        assert_eq!((t.source, t.predicted_ms, t.predicted_per_second), (TimingSource::Vllm, Some(7.0), None));
        let bad = json!({"choices": [{"message": {"content": "x"}}],
            "usage": {"prompt_tokens_details": {"cached_tokens": -1}}});
        assert!(parse_completion(&bad).unwrap_err().to_string().contains("cached_tokens"));
        let bad = json!({"choices": [{"message": {"content": "x", "reasoning": 3}}]});
        assert!(parse_completion(&bad).unwrap_err().to_string().contains("message.reasoning is not a string"));
    }

    fn delta_event(delta: Value) -> String {
        format!("data: {}\n\n", json!({"choices": [{"index": 0, "delta": delta}]}))
    }

    #[test]
    fn streamed_tool_calls_are_reassembled_like_a_non_streamed_answer() {
        // vLLM/SGLang style: id and name first, then argument pieces; two calls interleaved by index.
        let a = feed_all(&[
            &delta_event(json!({"role": "assistant", "reasoning": "need weather"})),
            &delta_event(json!({"tool_calls": [{"index": 0, "id": "c0", "type": "function",
                "function": {"name": "get_weather", "arguments": ""}}]})),
            &delta_event(json!({"tool_calls": [{"index": 1, "id": "c1", "function": {"name": "get_time"}}]})),
            &delta_event(json!({"tool_calls": [{"index": 0, "id": null, "function": {"name": null,
                "arguments": "{\"city\": \"Lis"}}]})),
            &delta_event(json!({"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]})),
            &delta_event(json!({"tool_calls": [{"index": 0, "function": {"arguments": "bon\"}"}}]})),
            "data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n",
        ])
        .unwrap();
        let v = json!({"choices": [{"finish_reason": "tool_calls", "message": {"reasoning": "need weather",
            "tool_calls": [{"id": "c0", "function": {"name": "get_weather", "arguments": "{\"city\": \"Lisbon\"}"}},
                           {"id": "c1", "function": {"name": "get_time", "arguments": "{}"}}]}}]});
        let whole = parse_completion(&v).unwrap();
        assert_eq!(a.tool_calls, whole.tool_calls);
        assert_eq!((a.reasoning.as_str(), a.finish_reason.as_deref()), ("need weather", Some("tool_calls")));
        // TGI repeats id and type on every fragment; Ollama sends a call whole.
        let tgi = feed_all(&[
            &delta_event(json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "0", "type": "function",
                "function": {"name": "get_weather", "arguments": "{"}}]})),
            &delta_event(json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "0", "type": "function",
                "function": {"name": null, "arguments": "\"city\":\"Lisbon\"}"}}]})),
            "data: [DONE]\n\n",
        ])
        .unwrap();
        assert_eq!(tgi.tool_calls[0].arguments, json!("{\"city\":\"Lisbon\"}"));
        let ollama = feed_all(&[
            &delta_event(json!({"content": "", "tool_calls": [{"id": "call_x", "index": 0, "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\":\"Lisbon\"}"}}]})),
            "data: [DONE]\n\n",
        ])
        .unwrap();
        assert_eq!(ollama.tool_calls, tgi.tool_calls);
    }

    #[test]
    fn malformed_tool_call_fragments_are_errors_never_panics() {
        let one = |fragments: Value| {
            feed_all(&[&delta_event(json!({"tool_calls": fragments})), "data: [DONE]\n\n"]).unwrap_err().to_string()
        };
        for (fragments, want) in [
            (json!({"index": 0}), "not an array"),
            (json!([5]), "not an object"),
            (json!([{"index": -1, "function": {"name": "f"}}]), "is not within"),
            (json!([{"index": 1_000_000_000u64, "function": {"name": "f"}}]), "is not within"),
            (json!([{"index": 0, "id": 7, "function": {"name": "f"}}]), "id is not a string"),
            (json!([{"index": 0, "function": "f"}]), "function is not an object"),
            (json!([{"index": 0, "function": {"name": 1}}]), "name is not a string"),
            (json!([{"index": 0, "function": {"name": "f", "arguments": {"a": 1}}}]), "arguments is not a string"),
            (json!([{"index": 0, "function": {"arguments": "{}"}}]), "no fragment named its function"),
            (json!([{"index": 1, "function": {"name": "f"}}]), "gap"),
            (
                json!([{"index": 0, "function": {"name": "f"}}, {"index": 0, "function": {"name": "g"}}]),
                "changed its name",
            ),
            (json!([{"index": 0, "id": "a", "function": {"name": "f"}}, {"index": 0, "id": "b"}]), "changed its id"),
        ] {
            let e = one(fragments.clone());
            assert!(e.contains(want), "{fragments} → {e}");
        }
        // Arguments are bounded, however they are cut.
        let piece = "x".repeat(MAX_CALL_ARGUMENTS / 2 + 1);
        let e = feed_all(&[
            &delta_event(json!({"tool_calls": [{"index": 0, "function": {"name": "f", "arguments": piece}}]})),
            &delta_event(json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})),
            "data: [DONE]\n\n",
        ])
        .unwrap_err();
        assert!(e.to_string().contains("arguments longer than"), "{e}");
    }

    #[test]
    fn error_messages_are_read_from_every_engine_s_envelope() {
        for v in [
            json!({"error": {"message": "boom", "type": "BadRequestError", "code": 400}}),
            json!({"object": "error", "message": "boom", "type": "BadRequestError", "code": 400}),
            json!({"error": "boom", "error_type": "validation"}),
            json!({"message": "boom"}),
            json!({"error": {"message": "boom", "http_status_code": 422}}),
        ] {
            assert_eq!(error_message(&v).as_deref(), Some("boom"), "{v}");
        }
        let e =
            feed_all(&["data: {\"error\":{\"message\":\"out of memory\",\"http_status_code\":422}}\n\n"]).unwrap_err();
        assert!(e.to_string().contains("error event: out of memory"), "{e}");
    }

    #[test]
    fn done_without_trailing_newline_is_accepted() {
        let a = feed_all(&["data: {\"choices\":[{\"delta\":{\"content\":\"x\"}}]}\n\ndata: [DONE]"]).unwrap();
        assert_eq!(a.content, "x");
    }

    #[test]
    fn done_is_seen_whole_or_split_across_pieces_and_only_as_a_whole_line() {
        let seen = |pieces: &[&[u8]]| {
            let mut s = DoneScanner::default();
            pieces.iter().map(|p| s.feed(p)).collect::<Vec<bool>>()
        };
        assert_eq!(seen(&[b"data: {}\n\ndata: [DONE]\n\n"]), [true]);
        assert_eq!(seen(&[b"data: {\"choices\":[]}\n\n"]), [false]);
        assert_eq!(seen(&[b"data: {}\n\ndata: [DO", b"NE]\r\n\r\n"]), [false, true]);
        assert_eq!(seen(&[b"data: [", b"DONE]"]), [false, true]);
        assert_eq!(seen(&[b"data:[DONE]\n"]), [true]);
        assert_eq!(seen(&[b"data: [DO", b"G]\n\n"]), [false, false]);
        // A token whose text is `[DONE]` does not end the stream (#32 D3), whole or cut anywhere.
        let token = b"data: {\"choices\":[{\"delta\":{\"content\":\"[DONE]\"}}]}\n\n";
        for cut in 0..token.len() {
            assert_eq!(seen(&[&token[..cut], &token[cut..]]), [false, false], "cut at {cut}");
        }
        assert_eq!(seen(&[b"data: x [DONE]\n", b"[DONE]\n"]), [false, false]);
    }
}
