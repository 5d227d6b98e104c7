//! `--dialect NAME`: the fake server speaks one engine's OpenAI-compatible wire shapes, as its own source writes
//! them, so that gauntlet's client is tested against each (docs/dialects.md holds the facts, each with its source;
//! the section of each shape is named beside it here). The answer text still comes from `--answers`; a request with
//! `tools` is answered with a call of its first tool whose arguments are that text, a request that asks for
//! thinking (in the engine's own switch) gets a reasoning text first, and a last user message containing `REFUSE`
//! is refused in the engine's error shape with [`REFUSAL`] as its message.

use std::io::Write;
use std::net::TcpStream;
use std::time::Duration;

use serde_json::{Value, json};

/// The model id every dialect serves; vLLM and Ollama refuse any other name (404), as they do.
pub const SERVED_MODEL: &str = "fake-model";
/// The message of the refusal a `REFUSE` prompt gets.
pub const REFUSAL: &str = "the prompt was refused by the fake server";
/// The reasoning text of a thinking answer.
pub const REASONING: &str = "Let me think this through.";
/// Prompt tokens reported as taken from the cache, where the engine reports them.
const CACHED: u64 = 8;
const CREATED: u64 = 1_764_680_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    LlamaCpp,
    Vllm,
    Sglang,
    Tgi,
    Trtllm,
    Ollama,
}

/// The wire a `--dialect` names: one of the engines whose shapes share this file's common plan, or one whose
/// answers are whole functions of their own (they depart from the common shapes in too many places).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Common(Engine),
    /// `transformers serve`, as seen on transformers 5.19.0 (CPU): see [`transformers`].
    Transformers,
    /// llama-cpp-python's server, as its 0.3.36 was seen to answer (issue #29): see [`llama_cpp_python`].
    LlamaCppPython,
}

impl Dialect {
    pub fn parse(name: &str) -> Option<Dialect> {
        Some(match name {
            "transformers" => Dialect::Transformers,
            "llama-cpp-python" => Dialect::LlamaCppPython,
            _ => Dialect::Common(Engine::parse(name)?),
        })
    }
}

impl Engine {
    pub fn parse(name: &str) -> Option<Engine> {
        Some(match name {
            "llama.cpp" => Engine::LlamaCpp,
            "vllm" => Engine::Vllm,
            "sglang" => Engine::Sglang,
            "tgi" => Engine::Tgi,
            "trtllm" => Engine::Trtllm,
            "ollama" => Engine::Ollama,
            _ => return None,
        })
    }
}

/// What one request asks of the dialect, after the common parsing in `main.rs`.
pub struct Ask<'a> {
    pub path: &'a str,
    pub req: &'a Value,
    pub last_user: &'a str,
    pub answer: &'a str,
    pub token_delay_ms: u64,
}

pub fn serve(d: Dialect, stream: &mut TcpStream, ask: &Ask) -> std::io::Result<()> {
    match d {
        Dialect::Transformers => transformers(stream, ask),
        Dialect::LlamaCppPython => llama_cpp_python(stream, ask),
        Dialect::Common(e) => serve_common(e, stream, ask),
    }
}

fn serve_common(d: Engine, stream: &mut TcpStream, ask: &Ask) -> std::io::Result<()> {
    match ask.path {
        "/health" => health(d, stream),
        // Ollama answers its root (§4.2); the others answer it too, unused by gauntlet.
        "/" if d == Engine::Ollama => respond(stream, 200, "text/plain; charset=utf-8", b"Ollama is running"),
        "/v1/models" => {
            let body = models(d).to_string();
            respond(stream, 200, "application/json", body.as_bytes())
        }
        "/v1/chat/completions" => chat(d, stream, ask),
        _ => respond(stream, 404, "text/plain", b"404 page not found"),
    }
}

fn health(d: Engine, stream: &mut TcpStream) -> std::io::Result<()> {
    match d {
        // §7 / engines.md: `{"status":"ok"}`.
        Engine::LlamaCpp => respond(stream, 200, "application/json", b"{\"status\":\"ok\"}"),
        // §4.2: no `/health` route; Go's mux answers 404 in plain text.
        Engine::Ollama => respond(stream, 404, "text/plain; charset=utf-8", b"404 page not found"),
        // §1.2 vLLM `health`, §2.2 SGLang `health_generate`, §3.2 TGI `health`, §6.2 TRT-LLM `health`: 200, empty.
        _ => respond(stream, 200, "application/json", b""),
    }
}

/// `GET /v1/models` as each engine lists its one model.
fn models(d: Engine) -> Value {
    let card = match d {
        // llama.cpp's server: `owned_by` "llamacpp" (engines.md §7).
        Engine::LlamaCpp => json!({"id": SERVED_MODEL, "object": "model", "created": CREATED, "owned_by": "llamacpp"}),
        // §1.2 `ModelCard`, `ModelPermission`.
        Engine::Vllm => json!({"id": SERVED_MODEL, "object": "model", "created": CREATED, "owned_by": "vllm",
            "root": SERVED_MODEL, "parent": null, "max_model_len": 4096,
            "permission": [{"id": "modelperm-fake", "object": "model_permission", "created": CREATED,
                "allow_create_engine": false, "allow_sampling": true, "allow_logprobs": true,
                "allow_search_indices": false, "allow_view": true, "allow_fine_tuning": false,
                "organization": "*", "group": null, "is_blocking": false}]}),
        // §2.2 `available_models`.
        Engine::Sglang => json!({"id": SERVED_MODEL, "object": "model", "created": CREATED, "owned_by": "sglang",
            "root": SERVED_MODEL, "parent": null, "max_model_len": 4096}),
        // §3.2 `openai_get_model_info`: `created` 0, `owned_by` the model id.
        Engine::Tgi => json!({"id": SERVED_MODEL, "object": "model", "created": 0, "owned_by": SERVED_MODEL}),
        // §6.2 `get_model`.
        Engine::Trtllm => {
            json!({"id": SERVED_MODEL, "object": "model", "created": CREATED, "owned_by": "tensorrt_llm"})
        }
        // §4.2 `ToListCompletion`.
        Engine::Ollama => json!({"id": SERVED_MODEL, "object": "model", "created": CREATED, "owned_by": "library"}),
    };
    json!({"object": "list", "data": [card]})
}

/// The engine's error body for `status` with `message`.
fn error_body(d: Engine, status: u16, message: &str) -> (u16, Value) {
    match d {
        // engines.md §7: llama.cpp's `format_error_response`.
        Engine::LlamaCpp => (
            status,
            json!({"error": {"code": status, "message": message,
            "type": "invalid_request_error"}}),
        ),
        // §1.3: nested since v0.10.1.
        Engine::Vllm => (
            status,
            json!({"error": {"message": message,
            "type": if status == 404 { "NotFoundError" } else { "BadRequestError" }, "param": null, "code": status}}),
        ),
        // §2.3 SGLang, §6.3 TRT-LLM: the flat shape.
        Engine::Sglang | Engine::Trtllm => (
            status,
            json!({"object": "error", "message": message,
            "type": "BadRequestError", "param": null, "code": status}),
        ),
        // §3.3: TGI's own shape; validation errors are 422.
        Engine::Tgi => (422, json!({"error": message, "error_type": "validation"})),
        // §4.3 `NewError`: the type follows the status.
        Engine::Ollama => (
            status,
            json!({"error": {"message": message,
            "type": if status == 404 { "not_found_error" } else { "invalid_request_error" }, "param": null,
            "code": null}}),
        ),
    }
}

/// Request fields TRT-LLM's `ChatCompletionRequest` accepts (§6.3: `extra="forbid"`, anything else is a 400;
/// §6.7 lists the extra sampling fields; the rest are OpenAI's).
const TRTLLM_FIELDS: &[&str] = &[
    "model",
    "messages",
    "max_tokens",
    "max_completion_tokens",
    "temperature",
    "top_p",
    "n",
    "stream",
    "stream_options",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "logprobs",
    "top_logprobs",
    "tools",
    "tool_choice",
    "response_format",
    "user",
    "chat_template_kwargs",
    "chat_template",
    "add_generation_prompt",
    "add_special_tokens",
    "reasoning_effort",
    "top_k",
    "top_p_min",
    "min_p",
    "repetition_penalty",
    "length_penalty",
    "stop_token_ids",
    "include_stop_str_in_output",
    "ignore_eos",
    "min_tokens",
    "skip_special_tokens",
    "cache_salt",
    "lora_request",
    "echo",
    "documents",
];

/// Whether the request asked for thinking in this engine's own switch.
fn thinking(d: Engine, req: &Value) -> bool {
    match d {
        // §1.5, §2.5, §6.5, engines.md §7: `chat_template_kwargs.enable_thinking`.
        Engine::LlamaCpp | Engine::Vllm | Engine::Sglang | Engine::Trtllm => {
            req["chat_template_kwargs"]["enable_thinking"] == json!(true)
        }
        // §4.5 `thinkFromReasoningEffort`: `none` is off; absent is the model's default (on for a thinking model).
        Engine::Ollama => req["reasoning_effort"] != json!("none"),
        // §3.5: no switch and no reasoning field.
        Engine::Tgi => false,
    }
}

struct Plan {
    model: String,
    reasoning: Option<String>,
    content: String,
    tool: Option<(String, String)>,
    include_usage: bool,
    prompt_tokens: u64,
    completion_tokens: u64,
}

fn chat(d: Engine, stream: &mut TcpStream, ask: &Ask) -> std::io::Result<()> {
    let req = ask.req;
    let model = req["model"].as_str().unwrap_or("").to_owned();
    let refuse = |stream: &mut TcpStream, status: u16, message: &str| {
        let (status, body) = error_body(d, status, message);
        respond(stream, status, "application/json", body.to_string().as_bytes())
    };
    if d == Engine::Trtllm
        && let Some(extra) = req.as_object().and_then(|m| m.keys().find(|k| !TRTLLM_FIELDS.contains(&k.as_str())))
    {
        // §6.3: pydantic's message for a forbidden extra field.
        return refuse(
            stream,
            400,
            &format!("1 validation error for ChatCompletionRequest\n{extra}\n  Extra inputs are not permitted"),
        );
    }
    // §1.3 `check_model`, §4.3 `ChatHandler`: an unknown name is a 404; the others accept any name.
    match d {
        Engine::Vllm if model != SERVED_MODEL => {
            return refuse(stream, 404, &format!("The model `{model}` does not exist."));
        }
        Engine::Ollama if model != SERVED_MODEL => return refuse(stream, 404, &format!("model '{model}' not found")),
        _ => {}
    }
    if ask.last_user.contains("REFUSE") {
        return refuse(stream, 400, REFUSAL);
    }
    let tool = req["tools"].as_array().and_then(|t| t.first()).and_then(|t| t["function"]["name"].as_str());
    let plan = Plan {
        model: if model.is_empty() { SERVED_MODEL.into() } else { model },
        reasoning: thinking(d, req).then(|| REASONING.to_owned()),
        content: if tool.is_some() { String::new() } else { ask.answer.to_owned() },
        tool: tool.map(|name| (name.to_owned(), ask.answer.to_owned())),
        // §1.4, §2.4, §3.4, §4.4: a usage chunk only when asked; §6.4: TRT-LLM's `include_usage` defaults to true
        // once `stream_options` is sent.
        include_usage: match d {
            Engine::Trtllm => req.get("stream_options").is_some_and(|o| o["include_usage"] != json!(false)),
            _ => req["stream_options"]["include_usage"] == json!(true),
        },
        prompt_tokens: 10,
        completion_tokens: ask.answer.split_inclusive(' ').count().max(1) as u64,
    };
    if req["stream"] == json!(true) {
        streamed(d, stream, &plan, ask.token_delay_ms)
    } else {
        let body = completion(d, &plan).to_string();
        respond(stream, 200, "application/json", body.as_bytes())
    }
}

fn finish_reason(d: Engine, plan: &Plan) -> &'static str {
    // §3.6: TGI's `finish_reason` stays `stop` after a tool call.
    if plan.tool.is_some() && d != Engine::Tgi { "tool_calls" } else { "stop" }
}

fn usage(d: Engine, plan: &Plan) -> Value {
    let (p, c) = (plan.prompt_tokens, plan.completion_tokens);
    let mut u = json!({"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c});
    match d {
        // §1.4 (with `--enable-prompt-tokens-details`), §6.4 (always).
        Engine::Vllm | Engine::Trtllm => u["prompt_tokens_details"] = json!({"cached_tokens": CACHED}),
        // §2.4 (with `--enable-cache-report`, when > 0), plus `reasoning_tokens`.
        Engine::Sglang => {
            u["prompt_tokens_details"] = json!({"cached_tokens": CACHED});
            u["reasoning_tokens"] = json!(0);
        }
        // §3.4, §4.4: no details; engines.md §7: llama.cpp's usage has none at the stored commit.
        Engine::Tgi | Engine::Ollama | Engine::LlamaCpp => {}
    }
    u
}

/// llama.cpp's `timings` (§7 `result_timings::to_json`, with `cache_n` from engines.md).
fn timings(plan: &Plan) -> Value {
    json!({"cache_n": CACHED, "prompt_n": plan.prompt_tokens, "prompt_ms": 12.5, "prompt_per_token_ms": 1.25,
        "prompt_per_second": 800.0, "predicted_n": plan.completion_tokens, "predicted_ms": 40.0,
        "predicted_per_token_ms": 4.0, "predicted_per_second": 250.0})
}

/// A whole answer (`stream: false`).
fn completion(d: Engine, plan: &Plan) -> Value {
    let reason = finish_reason(d, plan);
    let call = |id: &str| {
        plan.tool
            .as_ref()
            .map(|(name, args)| json!([{"id": id, "type": "function", "function": {"name": name, "arguments": args}}]))
    };
    let (message, extra) = match d {
        // engines.md §7: `reasoning_content`.
        Engine::LlamaCpp => {
            let mut m = json!({"role": "assistant", "content": plan.content});
            if let Some(r) = &plan.reasoning {
                m["reasoning_content"] = json!(r);
            }
            if let Some(c) = call("fake-call-0") {
                m["tool_calls"] = c;
            }
            (m, json!({"timings": timings(plan), "system_fingerprint": "b6000-fake"}))
        }
        // §1.5: `reasoning` (PR #33402); §1.6 non-streamed tool calls; content null beside them.
        Engine::Vllm => {
            let content = if plan.tool.is_some() { Value::Null } else { json!(plan.content) };
            let m = json!({"role": "assistant", "content": content, "reasoning": plan.reasoning,
                "tool_calls": call("chatcmpl-tool-0a1b2c").unwrap_or(json!([]))});
            (m, json!({"stop_reason": null}))
        }
        // §2.4/§2.5: every field present, nulls kept.
        Engine::Sglang => {
            let m = json!({"role": "assistant", "content": if plan.tool.is_some() { Value::Null } else { json!(plan.content) },
                "reasoning_content": plan.reasoning, "tool_calls": call("call_0f3c9a1b2c3d4e5f6a7b8c9d")});
            (m, json!({"matched_stop": null}))
        }
        // §3.6: a tool answer has no `content` key, and `description: null` in the function.
        Engine::Tgi => {
            let m = match &plan.tool {
                Some((name, args)) => json!({"role": "assistant", "tool_calls": [{"id": "0", "type": "function",
                    "function": {"description": null, "name": name, "arguments": args}}]}),
                None => json!({"role": "assistant", "content": plan.content}),
            };
            (m, json!({}))
        }
        // §6.5: `reasoning_content`; nulls left out (`exclude_none`).
        Engine::Trtllm => {
            let mut m = json!({"role": "assistant", "content": plan.content});
            if let Some(r) = &plan.reasoning {
                m["reasoning_content"] = json!(r);
            }
            if let Some(c) = call("chatcmpl-tool-5e6f") {
                m["tool_calls"] = c;
            }
            (m, json!({"stop_reason": null}))
        }
        // §4.4 `ToChatCompletion`: `reasoning` only when there is some.
        Engine::Ollama => {
            let mut m = json!({"role": "assistant", "content": plan.content});
            if let Some(r) = &plan.reasoning {
                m["reasoning"] = json!(r);
            }
            if let Some((name, args)) = &plan.tool {
                m["tool_calls"] = json!([{"id": "call_k3j9x0qa", "index": 0, "type": "function",
                    "function": {"name": name, "arguments": args}}]);
            }
            (m, json!({}))
        }
    };
    let mut choice = json!({"index": 0, "message": message, "logprobs": null, "finish_reason": reason});
    let mut top = envelope(d, &plan.model, 0, "chat.completion");
    if let (Value::Object(extra), Value::Object(c), Value::Object(t)) = (extra, &mut choice, &mut top) {
        for (k, v) in extra {
            if k == "timings" || k == "system_fingerprint" {
                t.insert(k, v);
            } else {
                c.insert(k, v);
            }
        }
    }
    top["choices"] = json!([choice]);
    top["usage"] = usage(d, plan);
    top
}

/// The fields around `choices` of every chunk (or of a whole answer), as each engine writes them.
fn envelope(d: Engine, model: &str, n: usize, object: &str) -> Value {
    match d {
        Engine::LlamaCpp => json!({"id": "chatcmpl-fake", "object": object, "created": CREATED, "model": model,
            "system_fingerprint": "b6000-fake"}),
        // §1.4 (exclude_unset: no `usage` key on content chunks).
        Engine::Vllm => json!({"id": "chatcmpl-fake", "object": object, "created": CREATED, "model": model}),
        // §2.4: `usage: null` on every chunk (model_dump_json keeps nulls).
        Engine::Sglang => json!({"id": "fake-rid", "object": object, "created": CREATED, "model": model,
            "usage": null}),
        // §3.4: `id` is always empty; fingerprint is version + docker label.
        Engine::Tgi => json!({"object": object, "id": "", "created": CREATED, "model": model,
            "system_fingerprint": "3.3.7-native", "usage": null}),
        // §6.4: older builds give every chunk a fresh id.
        Engine::Trtllm => json!({"id": format!("chatcmpl-{n:032x}"), "object": object, "created": CREATED,
            "model": model}),
        // §4.4 `toChunk`: one id for the stream, `fp_ollama`.
        Engine::Ollama => json!({"id": "chatcmpl-417", "object": object, "created": CREATED, "model": model,
            "system_fingerprint": "fp_ollama"}),
    }
}

/// The choices of a stream, in order: each is one chunk's `choices[0]` (None: a usage chunk, `choices: []`).
fn stream_choices(d: Engine, plan: &Plan) -> Vec<Value> {
    let words: Vec<&str> = plan.content.split_inclusive(' ').collect();
    let reason = finish_reason(d, plan);
    let choice = |delta: Value| json!({"index": 0, "delta": delta, "logprobs": null, "finish_reason": null});
    let mut out = Vec::new();
    let args_pieces = |args: &str| -> Vec<String> {
        let cut = (0..=args.len() / 2).rev().find(|i| args.is_char_boundary(*i)).unwrap_or(0);
        vec![args[..cut].to_owned(), args[cut..].to_owned()]
    };
    match d {
        // engines.md §7 / §7 here: role chunk, `reasoning_content` and content deltas, tool fragments from the chat
        // parser (id + name first, then arguments), then a separate empty finish chunk.
        Engine::LlamaCpp | Engine::Vllm => {
            let reasoning_key = if d == Engine::Vllm { "reasoning" } else { "reasoning_content" };
            out.push(choice(json!({"role": "assistant", "content": ""})));
            if let Some(r) = &plan.reasoning {
                for w in r.split_inclusive(' ') {
                    out.push(choice(json!({reasoning_key: w})));
                }
            }
            for w in &words {
                out.push(choice(json!({"content": w})));
            }
            if let Some((name, args)) = &plan.tool {
                // §1.6: `DeltaToolCall`, id + type + name first.
                out.push(choice(json!({"tool_calls": [{"index": 0, "id": "chatcmpl-tool-0a1b2c", "type": "function",
                    "function": {"name": name}}]})));
                for piece in args_pieces(args) {
                    out.push(choice(json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})));
                }
            }
            if d == Engine::Vllm {
                // §1.4 item 3: the last delta chunk carries `finish_reason` and `stop_reason`.
                if let Some(last) = out.last_mut() {
                    last["finish_reason"] = json!(reason);
                    last["stop_reason"] = Value::Null;
                }
            } else {
                out.push(json!({"index": 0, "delta": {}, "finish_reason": reason}));
            }
        }
        // §2.4: nulls everywhere; separate finish chunk; §2.6 tool fragments with nulls.
        Engine::Sglang => {
            let delta = |content: Value, reasoning: Value, tools: Value| {
                json!({"index": 0, "delta": {"role": null, "content": content, "reasoning_content": reasoning,
                    "tool_calls": tools}, "logprobs": null, "finish_reason": null, "matched_stop": null})
            };
            let mut first = delta(json!(""), Value::Null, Value::Null);
            first["delta"]["role"] = json!("assistant");
            out.push(first);
            if let Some(r) = &plan.reasoning {
                for w in r.split_inclusive(' ') {
                    out.push(delta(Value::Null, json!(w), Value::Null));
                }
            }
            for w in &words {
                out.push(delta(json!(w), Value::Null, Value::Null));
            }
            if let Some((name, args)) = &plan.tool {
                out.push(delta(
                    Value::Null,
                    Value::Null,
                    json!([{"id": "call_0f3c9a1b2c3d4e5f6a7b8c9d", "index": 0,
                    "type": "function", "function": {"name": name, "arguments": ""}}]),
                ));
                for piece in args_pieces(args) {
                    out.push(delta(
                        Value::Null,
                        Value::Null,
                        json!([{"id": null, "index": 0, "type": "function",
                        "function": {"name": null, "arguments": piece}}]),
                    ));
                }
            }
            let mut end = delta(Value::Null, Value::Null, Value::Null);
            end["finish_reason"] = json!(reason);
            out.push(end);
        }
        // §3.4: no role chunk, `role` on every chunk, finish on the last token chunk; §3.6: every tool fragment
        // repeats id "0" and type, the first carries the name and `{`.
        Engine::Tgi => {
            for w in &words {
                out.push(choice(json!({"role": "assistant", "content": w})));
            }
            if let Some((name, args)) = &plan.tool {
                let (head, rest) = args.split_at(args.find('{').map_or(0, |i| i + 1));
                out.push(choice(
                    json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "0", "type": "function",
                    "function": {"name": name, "arguments": head}}]}),
                ));
                for piece in args_pieces(rest) {
                    out.push(choice(json!({"role": "assistant", "tool_calls": [{"index": 0, "id": "0",
                        "type": "function", "function": {"name": null, "arguments": piece}}]})));
                }
            }
            if let Some(last) = out.last_mut() {
                last["finish_reason"] = json!(reason);
            }
        }
        // §6.4: role chunk without content; `reasoning_content: ""` on every content delta; finish on the last one;
        // §6.6 tool fragments without `type`, nulls left out, then an empty-content finish chunk.
        Engine::Trtllm => {
            out.push(json!({"index": 0, "delta": {"role": "assistant"}}));
            if let Some(r) = &plan.reasoning {
                for w in r.split_inclusive(' ') {
                    out.push(json!({"index": 0, "delta": {"content": "", "reasoning_content": w}}));
                }
            }
            for w in &words {
                out.push(json!({"index": 0, "delta": {"content": w, "reasoning_content": ""}}));
            }
            if let Some((name, args)) = &plan.tool {
                out.push(json!({"index": 0, "delta": {"content": "", "tool_calls": [{"id": "chatcmpl-tool-5e6f",
                    "index": 0, "function": {"name": name, "arguments": ""}}]}}));
                for piece in args_pieces(args) {
                    out.push(json!({"index": 0, "delta": {"tool_calls": [{"index": 0,
                        "function": {"arguments": piece}}]}}));
                }
                out.push(json!({"index": 0, "delta": {"content": ""}}));
            }
            if let Some(last) = out.last_mut() {
                last["finish_reason"] = json!(reason);
                last["stop_reason"] = Value::Null;
            }
        }
        // §4.4: `role` on the first chunk only; reasoning then content; §4.6: a call whole in one chunk; then an
        // empty finish chunk.
        Engine::Ollama => {
            let mut deltas: Vec<Value> = Vec::new();
            if let Some(r) = &plan.reasoning {
                deltas.extend(r.split_inclusive(' ').map(|w| json!({"reasoning": w})));
            }
            deltas.extend(words.iter().map(|w| json!({"content": w})));
            if let Some((name, args)) = &plan.tool {
                deltas.push(json!({"content": "", "tool_calls": [{"id": "call_k3j9x0qa", "index": 0,
                    "type": "function", "function": {"name": name, "arguments": args}}]}));
            }
            if let Some(first) = deltas.first_mut() {
                first["role"] = json!("assistant");
            }
            out.extend(deltas.into_iter().map(|d| json!({"index": 0, "delta": d, "finish_reason": null})));
            out.push(json!({"index": 0, "delta": {}, "finish_reason": reason}));
        }
    }
    out
}

fn streamed(d: Engine, stream: &mut TcpStream, plan: &Plan, token_delay_ms: u64) -> std::io::Result<()> {
    write!(stream, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")?;
    let choices = stream_choices(d, plan);
    let n = choices.len();
    for (i, choice) in choices.into_iter().enumerate() {
        std::thread::sleep(Duration::from_millis(token_delay_ms));
        let mut chunk = envelope(d, &plan.model, i, "chat.completion.chunk");
        chunk["choices"] = json!([choice]);
        // §7: llama.cpp puts `timings` on the very last chunk (the finish chunk when usage is not asked).
        if d == Engine::LlamaCpp && i + 1 == n && !plan.include_usage {
            chunk["timings"] = timings(plan);
        }
        // §6.4: a space before the blank line after TRT-LLM's role chunk.
        let space = if d == Engine::Trtllm && i == 0 { " " } else { "" };
        stream.write_all(format!("data: {chunk}{space}\n\n").as_bytes())?;
        stream.flush()?;
    }
    if plan.include_usage {
        let mut chunk = envelope(d, &plan.model, n, "chat.completion.chunk");
        chunk["choices"] = json!([]);
        chunk["usage"] = usage(d, plan);
        if d == Engine::LlamaCpp {
            chunk["timings"] = timings(plan);
        }
        stream.write_all(format!("data: {chunk}\n\n").as_bytes())?;
    }
    stream.write_all(b"data: [DONE]\n\n")?;
    stream.flush()
}

fn respond(stream: &mut TcpStream, status: u16, content_type: &str, body: &[u8]) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        422 => "Unprocessable Entity",
        500 => "Internal Server Error",
        _ => "Bad Request",
    };
    write!(
        stream,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    stream.write_all(body)?;
    stream.flush()
}

/// The model id `transformers serve` names in its answers: the one it was started with, `@main` appended.
pub const TRANSFORMERS_ANSWER_MODEL: &str = "fake-model@main";

/// `transformers serve` as seen on transformers 5.19.0 (CPU, `serve --host --port MODEL`, docs/dialects.md "seen on
/// transformers 5.19"): `/health` `{"status":"ok"}`; `/v1/models` lists nothing (it lists the hub cache); a request
/// naming another model than the pinned one is a 400 `{"detail": …}` (no name at all is served); answers name the
/// model `MODEL@main`; `logprobs`, `tools` and `response_format` are ignored (the answer is text, with no
/// `logprobs` key); a stop string is kept in the content; a streamed answer's last chunk carries the
/// `finish_reason` and the usage (asked or not) and the body ends there, with no `data: [DONE]`; a request it cannot
/// take (messages not a list, `max_tokens` below 1) is a plain-text HTTP 500. A `REFUSE` prompt gets that 500.
fn transformers(stream: &mut TcpStream, ask: &Ask) -> std::io::Result<()> {
    match ask.path {
        "/health" => return respond(stream, 200, "application/json", b"{\"status\":\"ok\"}"),
        "/v1/models" => return respond(stream, 200, "application/json", b"{\"object\":\"list\",\"data\":[]}"),
        "/v1/chat/completions" => {}
        _ => return respond(stream, 404, "application/json", b"{\"detail\":\"Not Found\"}"),
    }
    let req = ask.req;
    if let Some(model) = req["model"].as_str()
        && model != SERVED_MODEL
    {
        let body = json!({"detail": format!("Server is pinned to '{SERVED_MODEL}'; requested '{model}'.")});
        return respond(stream, 400, "application/json", body.to_string().as_bytes());
    }
    let broken = !req["messages"].is_array() || req["max_tokens"].as_i64().is_some_and(|n| n < 1);
    if broken || ask.last_user.contains("REFUSE") {
        return respond(stream, 500, "text/plain; charset=utf-8", b"Internal Server Error");
    }
    // The stop string stays in the content (cut after it), and the finish is `stop`.
    let stops: Vec<&str> = match &req["stop"] {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let mut content = ask.answer.to_owned();
    let mut reason = "stop";
    if let Some(end) = stops.iter().filter(|s| !s.is_empty()).filter_map(|s| content.find(s).map(|i| i + s.len())).min()
    {
        content.truncate(end);
    } else if let Some(max) = req["max_tokens"].as_u64()
        && content.split_inclusive(' ').count() as u64 > max
    {
        content = content.split_inclusive(' ').take(max as usize).collect();
        reason = "length";
    }
    let words: Vec<&str> = content.split_inclusive(' ').collect();
    let (p, c) = (10u64, words.len().max(1) as u64);
    let usage = json!({"completion_tokens": c, "prompt_tokens": p, "total_tokens": p + c});
    let id = "1f0e4c9a-5b7d-4e2a-9c3b-7d6e5f4a3b2c";
    if req["stream"] != json!(true) {
        let body = json!({"id": id, "choices": [{"finish_reason": reason, "index": 0,
            "message": {"content": content, "role": "assistant"}}], "created": CREATED,
            "model": TRANSFORMERS_ANSWER_MODEL, "object": "chat.completion", "usage": usage});
        return respond(stream, 200, "application/json", body.to_string().as_bytes());
    }
    let chunk = |choice: Value| {
        json!({"id": id, "choices": [choice], "created": CREATED, "model": TRANSFORMERS_ANSWER_MODEL,
            "object": "chat.completion.chunk", "system_fingerprint": ""})
    };
    write!(stream, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nConnection: close\r\n\r\n")?;
    let mut events = vec![chunk(json!({"delta": {"role": "assistant"}, "index": 0}))];
    events.extend(words.iter().map(|w| chunk(json!({"delta": {"content": w}, "index": 0}))));
    let mut last = chunk(json!({"delta": {}, "index": 0, "finish_reason": reason}));
    last["usage"] = usage;
    events.push(last);
    for event in events {
        std::thread::sleep(Duration::from_millis(ask.token_delay_ms));
        stream.write_all(format!("data: {event}\n\n").as_bytes())?;
        stream.flush()?;
    }
    // The body ends here: no `data: [DONE]`.
    Ok(())
}

/// How much an unbounded llama-cpp-python answer sends before the fake stops it: more than any client should take.
const UNBOUNDED_BYTES: usize = 16 << 20;

/// llama-cpp-python's server as its 0.3.36 was seen to answer (issue #29; a replay: its 12-minute source build does
/// not fit a cold CI run): no `/health` (FastAPI's 404), `/v1/models` lists the model under the name it was given,
/// any model name is served and echoed back, a stream never carries usage (even with `include_usage`) and ends
/// with `data: [DONE]` (events end in CRLF, as its SSE library writes them), and `max_tokens` of -1 (or none)
/// generates without bound: here until [`UNBOUNDED_BYTES`], more than gauntlet's response limit. A `REFUSE`
/// prompt gets an OpenAI-shaped 400.
fn llama_cpp_python(stream: &mut TcpStream, ask: &Ask) -> std::io::Result<()> {
    match ask.path {
        "/v1/models" => {
            let body = json!({"object": "list", "data": [{"id": SERVED_MODEL, "object": "model",
                "owned_by": "me", "permissions": []}]});
            return respond(stream, 200, "application/json", body.to_string().as_bytes());
        }
        "/v1/chat/completions" => {}
        _ => return respond(stream, 404, "application/json", b"{\"detail\":\"Not Found\"}"),
    }
    let req = ask.req;
    let model = req["model"].as_str().unwrap_or(SERVED_MODEL);
    if ask.last_user.contains("REFUSE") {
        let body = json!({"error": {"message": REFUSAL, "type": "invalid_request_error", "param": null,
            "code": null}});
        return respond(stream, 400, "application/json", body.to_string().as_bytes());
    }
    let bounded = req["max_tokens"].as_i64().filter(|n| *n > 0);
    let mut words: Vec<String> = ask.answer.split_inclusive(' ').map(str::to_owned).collect();
    if bounded.is_none() {
        // Without bound: the answer again and again, until far more than any client takes.
        let mut sent = 0;
        let once = format!("{} ", ask.answer);
        words.clear();
        while sent < UNBOUNDED_BYTES {
            words.push(once.clone());
            sent += once.len();
        }
    }
    let id = "chatcmpl-6a1b7c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d";
    let (p, c) = (10u64, words.len().max(1) as u64);
    if req["stream"] != json!(true) {
        let body = json!({"id": id, "object": "chat.completion", "created": CREATED, "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": words.concat()}, "logprobs": null,
                "finish_reason": "stop"}],
            "usage": {"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}});
        return respond(stream, 200, "application/json", body.to_string().as_bytes());
    }
    write!(stream, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nConnection: close\r\n\r\n")?;
    let chunk = |delta: Value, finish: Value| {
        json!({"id": id, "model": model, "created": CREATED, "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
    };
    let mut events = vec![chunk(json!({"role": "assistant"}), Value::Null)];
    events.extend(words.iter().map(|w| chunk(json!({"content": w}), Value::Null)));
    events.push(chunk(json!({}), json!("stop")));
    for event in events {
        if bounded.is_some() {
            std::thread::sleep(Duration::from_millis(ask.token_delay_ms));
        }
        stream.write_all(format!("data: {event}\r\n\r\n").as_bytes())?;
    }
    // No usage chunk, even when `stream_options.include_usage` asked for one.
    stream.write_all(b"data: [DONE]\r\n\r\n")?;
    stream.flush()
}
