//! Token ids and logprobs: what each engine must be asked (the one table, [`TOKEN_DIALECTS`]) and how its answer's
//! `logprobs` become [`AnswerTokens`]. Server bytes are untrusted: a logprobs entry of the wrong shape is a malformed
//! answer, never a panic; what is kept is capped ([`MAX_TOKENS_KEPT`] tokens, [`TOP_ALTERNATIVES`] alternatives).

use gauntlet_schema::tokens::{Alternative, AnswerTokens, MAX_TOKENS_KEPT, TOP_ALTERNATIVES, Token, TokenSource};
use serde_json::{Map, Value, json};

use super::error::ClientError;

/// How one engine is asked for token ids and alternatives, and how its prompt cache is bypassed for one request.
/// Facts from docs/dialects.md; the engines work adds a row per engine it drives and picks it by server kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenDialect {
    pub engine: &'static str,
    /// `(field, JSON value)` pairs merged into a chat request.
    pub request: &'static [(&'static str, &'static str)],
    /// Where the answer carries ids.
    pub ids: IdsAt,
    /// The request field that makes one request skip the prompt cache, where the engine has one.
    pub cache_off: Option<(&'static str, &'static str)>,
    /// How a request turns the model's thinking on or off.
    pub thinking: Thinking,
}

/// The thinking switch of one engine (docs/dialects.md §1.5, §2.5, §3.5, §4.5, §5.5, §6.5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Thinking {
    /// `chat_template_kwargs.enable_thinking: bool` (llama.cpp, vLLM, SGLang, TensorRT-LLM).
    TemplateKwarg,
    /// Top-level `enable_thinking: bool` (mistral.rs; 0.8.1 has no `chat_template_kwargs`).
    TopLevel,
    /// `reasoning_effort: "none"` turns it off; on is the model's default, so nothing is sent (Ollama's `/v1`: any
    /// other effort is a 400 on a model without thinking).
    EffortNone,
    /// No switch: nothing is sent (TGI).
    Absent,
}

impl Thinking {
    /// Adds the switch for `on` to a chat request body (an object; anything else is left alone).
    pub fn apply(self, body: &mut Value, on: bool) {
        let Value::Object(m) = body else { return };
        match self {
            Thinking::TemplateKwarg => {
                let kwargs = m.entry("chat_template_kwargs").or_insert_with(|| json!({}));
                if let Value::Object(k) = kwargs {
                    k.insert("enable_thinking".into(), json!(on));
                }
            }
            Thinking::TopLevel => {
                m.insert("enable_thinking".into(), json!(on));
            }
            Thinking::EffortNone if !on => {
                m.insert("reasoning_effort".into(), json!("none"));
            }
            Thinking::EffortNone | Thinking::Absent => {}
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdsAt {
    /// `choices[].logprobs.content[].id` and `.top_logprobs[].id` (llama.cpp's server).
    LogprobEntries,
    /// `choices[].token_ids` beside the logprobs (vLLM with `return_token_ids`; alternatives have none).
    ChoiceTokenIds,
    /// None: token texts and logprobs only (SGLang's OpenAI endpoint, Ollama).
    Nowhere,
}

/// Every engine whose token fields are known. The first is the one used where the server kind is not told (every
/// server of the default manifest is llama.cpp's).
pub const TOKEN_DIALECTS: &[TokenDialect] = &[
    TokenDialect {
        engine: "llama.cpp",
        request: &[("logprobs", "true"), ("top_logprobs", "5")],
        ids: IdsAt::LogprobEntries,
        cache_off: Some(("cache_prompt", "false")),
        thinking: Thinking::TemplateKwarg,
    },
    TokenDialect {
        engine: "vllm",
        request: &[("logprobs", "true"), ("top_logprobs", "5"), ("return_token_ids", "true")],
        ids: IdsAt::ChoiceTokenIds,
        // A salt no earlier request used (the trailing `-` gets a unique suffix): the prefix cache cannot hit. One
        // fixed salt would share its cache between the requests that send it.
        cache_off: Some(("cache_salt", "\"gauntlet-cold-\"")),
        thinking: Thinking::TemplateKwarg,
    },
    TokenDialect {
        engine: "sglang",
        request: &[("logprobs", "true"), ("top_logprobs", "5")],
        ids: IdsAt::Nowhere,
        cache_off: None,
        thinking: Thinking::TemplateKwarg,
    },
    TokenDialect {
        engine: "ollama",
        request: &[("logprobs", "true"), ("top_logprobs", "5")],
        ids: IdsAt::Nowhere,
        cache_off: None,
        thinking: Thinking::EffortNone,
    },
    // Chat logprobs carry token texts only; ids need the native `/generate` (docs/dialects.md §3.7).
    TokenDialect {
        engine: "tgi",
        request: &[("logprobs", "true"), ("top_logprobs", "5")],
        ids: IdsAt::Nowhere,
        cache_off: None,
        thinking: Thinking::Absent,
    },
    // `top_logprobs` needs `gather_generation_logits` on the TensorRT backend, and an unknown field is a 400
    // (docs/dialects.md §6.3, §6.7): only `logprobs` is asked.
    TokenDialect {
        engine: "trtllm",
        request: &[("logprobs", "true")],
        ids: IdsAt::Nowhere,
        cache_off: None,
        thinking: Thinking::TemplateKwarg,
    },
    // Streamed logprobs are one bare entry per chunk, not `content` (docs/dialects.md §5.7): read as none.
    TokenDialect {
        engine: "mistralrs",
        request: &[("logprobs", "true"), ("top_logprobs", "5")],
        ids: IdsAt::Nowhere,
        cache_off: None,
        thinking: Thinking::TopLevel,
    },
    // `transformers serve` 5.19 (CPU) takes `logprobs`/`top_logprobs` and ignores them (docs/dialects.md, "seen on
    // transformers 5.19"): nothing is asked. Its per-request `chat_template_kwargs` carry the thinking switch.
    TokenDialect {
        engine: "transformers",
        request: &[],
        ids: IdsAt::Nowhere,
        cache_off: None,
        thinking: Thinking::TemplateKwarg,
    },
    // llama-cpp-python (a replay): chat logprobs carry token texts, no ids; no thinking switch is known.
    TokenDialect {
        engine: "llama-cpp-python",
        request: &[("logprobs", "true"), ("top_logprobs", "5")],
        ids: IdsAt::Nowhere,
        cache_off: None,
        thinking: Thinking::Absent,
    },
];

impl TokenDialect {
    pub fn default_engine() -> &'static TokenDialect {
        &TOKEN_DIALECTS[0]
    }

    pub fn for_engine(name: &str) -> Option<&'static TokenDialect> {
        TOKEN_DIALECTS.iter().find(|d| d.engine == name)
    }

    /// The dialect a profile names (the manifest accepts only [`crate::manifest::DIALECTS`], this table's engines).
    pub fn of(profile: &crate::manifest::Profile) -> &'static TokenDialect {
        TokenDialect::for_engine(&profile.dialect).unwrap_or_else(TokenDialect::default_engine)
    }

    /// Adds this engine's token fields to a chat request body (an object; anything else is left alone).
    pub fn ask_for_tokens(&self, body: &mut Value) {
        if let Value::Object(m) = body {
            insert_all(m, self.request);
        }
    }

    /// Adds the field that makes this request skip the prompt cache. False when the engine has no such switch. A
    /// string value ending in `-` (a cache salt) gets a suffix no other request of this process used.
    pub fn skip_prompt_cache(&self, body: &mut Value) -> bool {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        match (self.cache_off, body) {
            (Some(field), Value::Object(m)) => {
                insert_all(m, &[field]);
                if let Some(Value::String(salt)) = m.get_mut(field.0)
                    && salt.ends_with('-')
                {
                    salt.push_str(&format!("{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
                }
                true
            }
            _ => false,
        }
    }
}

fn insert_all(m: &mut Map<String, Value>, fields: &[(&str, &str)]) {
    for (k, v) in fields {
        // The table's values are literals written above; a typo is caught by the tests, never by a user.
        m.insert((*k).to_owned(), serde_json::from_str(v).unwrap_or(Value::Null));
    }
}

/// Whether a request body asked for logprobs: then an answer without them is recorded as `text-only`.
pub fn asked_for_tokens(body: &Value) -> bool {
    body.get("logprobs") == Some(&json!(true))
}

/// Collects the tokens of one answer, from one completion or chunk after chunk of a stream.
#[derive(Debug, Default)]
pub struct TokenCollector {
    items: Vec<Token>,
    count: u64,
    /// Every token so far had an id.
    all_ids: bool,
    seen: bool,
}

impl TokenCollector {
    /// Adds the tokens of `choice` (a completion's `choices[0]` or a chunk's): its `logprobs.content`, with ids from
    /// the entries or from `choice.token_ids`.
    pub fn add_choice(&mut self, choice: &Value) -> Result<(), ClientError> {
        let content = match choice.get("logprobs") {
            None | Some(Value::Null) => return Ok(()),
            Some(lp) => match lp.get("content") {
                None | Some(Value::Null) => return Ok(()),
                Some(Value::Array(c)) => c,
                Some(other) => return Err(malformed("logprobs.content is not an array", other)),
            },
        };
        let side_ids = match choice.get("token_ids") {
            Some(Value::Array(ids)) if ids.len() == content.len() => Some(ids),
            _ => None,
        };
        if !self.seen {
            self.seen = true;
            self.all_ids = true;
        }
        for (i, entry) in content.iter().enumerate() {
            self.count += 1;
            let side = side_ids.and_then(|ids| ids.get(i));
            let EntryText { text, bytes, id: in_token } = text_and_bytes(entry)?;
            let id = match entry.get("id").or(side) {
                None | Some(Value::Null) => in_token,
                Some(v) => Some(v.as_u64().ok_or_else(|| malformed("a token id is not a non-negative integer", v))?),
            };
            self.all_ids &= id.is_some();
            if self.items.len() >= MAX_TOKENS_KEPT {
                continue;
            }
            let logprob = match entry.get("logprob") {
                None | Some(Value::Null) => None,
                Some(v) => Some(number(v)?),
            };
            let mut top = Vec::new();
            if let Some(alts) = entry.get("top_logprobs").filter(|v| !v.is_null()) {
                let alts = alts.as_array().ok_or_else(|| malformed("top_logprobs is not an array", alts))?;
                for alt in alts.iter().take(TOP_ALTERNATIVES) {
                    let EntryText { text, bytes, id: in_token } = text_and_bytes(alt)?;
                    let id = match alt.get("id") {
                        None | Some(Value::Null) => in_token,
                        Some(v) => {
                            Some(v.as_u64().ok_or_else(|| malformed("an alternative's id is not an integer", v))?)
                        }
                    };
                    // A probability of zero has the logprob −∞, which JSON cannot write: mistral.rs 0.8.1 sends
                    // null (seen on the real server). Such an alternative is no alternative.
                    let logprob = match alt.get("logprob") {
                        Some(Value::Null) => continue,
                        v => number(v.unwrap_or(&Value::Null))?,
                    };
                    top.push(Alternative { id, text, bytes, logprob });
                }
            }
            self.items.push(Token { id, text, bytes, logprob, top });
        }
        Ok(())
    }

    /// The answer's tokens: what was collected, or `text-only` when the request asked and the server gave none.
    pub fn finish(self, asked: bool) -> Option<AnswerTokens> {
        if !self.seen {
            return asked.then(AnswerTokens::text_only);
        }
        let source = if self.all_ids && self.count > 0 { TokenSource::Ids } else { TokenSource::NoIds };
        Some(AnswerTokens { source, count: self.count, items: self.items })
    }
}

/// The token's text, its bytes only where they are not that text's UTF-8 (a piece of a multi-byte character), and
/// the id an entry carries in `token` itself: mistral.rs 0.8.1 writes its alternatives as `{"token": 60, "bytes":
/// "L"}`, the id where the text belongs and the text where the bytes belong (seen on the real server).
fn text_and_bytes(entry: &Value) -> Result<EntryText, ClientError> {
    if let (Some(Value::Number(n)), Some(Value::String(text))) = (entry.get("token"), entry.get("bytes")) {
        let id = n.as_u64().ok_or_else(|| malformed("a token id is not a non-negative integer", &entry["token"]))?;
        return Ok(EntryText { text: text.clone(), bytes: None, id: Some(id) });
    }
    let text = match entry.get("token") {
        Some(Value::String(s)) => s.clone(),
        // A numeric `token` without its text: the number is all there is.
        Some(Value::Number(n)) => n.to_string(),
        other => return Err(malformed("a logprobs entry has no string `token`", other.unwrap_or(&Value::Null))),
    };
    let bytes = match entry.get("bytes") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => {
            let mut out = Vec::with_capacity(items.len().min(64));
            for b in items.iter().take(1024) {
                let byte = b.as_u64().and_then(|v| u8::try_from(v).ok());
                out.push(byte.ok_or_else(|| malformed("a token byte is not 0..=255", b))?);
            }
            (out != text.as_bytes()).then_some(out)
        }
        Some(other) => return Err(malformed("a token's `bytes` is not an array", other)),
    };
    Ok(EntryText { text, bytes, id: None })
}

/// One logprobs entry's token: see [`text_and_bytes`].
struct EntryText {
    text: String,
    bytes: Option<Vec<u8>>,
    id: Option<u64>,
}

fn number(v: &Value) -> Result<f64, ClientError> {
    v.as_f64().filter(|f| f.is_finite()).ok_or_else(|| malformed("a logprob is not a finite number", v))
}

fn malformed(what: &str, v: &Value) -> ClientError {
    let mut s = v.to_string();
    if s.len() > 80 {
        let cut = (0..=80).rev().find(|i| s.is_char_boundary(*i)).unwrap_or(0);
        s.truncate(cut);
        s.push('…');
    }
    ClientError::Malformed(format!("{what}: {s}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_accepts_exactly_this_table_s_engines() {
        let engines: Vec<&str> = TOKEN_DIALECTS.iter().map(|d| d.engine).collect();
        assert_eq!(engines, crate::manifest::DIALECTS);
    }

    #[test]
    fn each_engine_s_thinking_switch() {
        let on_off = |engine: &str| {
            let t = TokenDialect::for_engine(engine).unwrap().thinking;
            let (mut on, mut off) = (json!({"chat_template_kwargs": {"keep": 1}}), json!({}));
            t.apply(&mut on, true);
            t.apply(&mut off, false);
            (on, off)
        };
        for engine in ["llama.cpp", "vllm", "sglang", "trtllm"] {
            let (on, off) = on_off(engine);
            assert_eq!(on, json!({"chat_template_kwargs": {"keep": 1, "enable_thinking": true}}), "{engine}");
            assert_eq!(off, json!({"chat_template_kwargs": {"enable_thinking": false}}), "{engine}");
        }
        // Ollama: `none` is off, on is the model's default; TGI has no switch; mistral.rs 0.8.1 reads it top-level.
        assert_eq!(
            on_off("ollama"),
            (json!({"chat_template_kwargs": {"keep": 1}}), json!({"reasoning_effort": "none"}))
        );
        assert_eq!(on_off("tgi"), (json!({"chat_template_kwargs": {"keep": 1}}), json!({})));
        let (on, off) = on_off("mistralrs");
        assert_eq!((on["enable_thinking"].clone(), off), (json!(true), json!({"enable_thinking": false})));
    }

    #[test]
    fn every_dialect_field_is_json_and_llama_cpp_is_the_default() {
        for d in TOKEN_DIALECTS {
            for (k, v) in d.request.iter().chain(d.cache_off.iter()) {
                assert!(serde_json::from_str::<Value>(v).is_ok(), "{}: {k} = {v}", d.engine);
            }
        }
        let mut body = json!({"model": "m"});
        TokenDialect::default_engine().ask_for_tokens(&mut body);
        assert_eq!(body, json!({"model": "m", "logprobs": true, "top_logprobs": 5}));
        assert!(TokenDialect::default_engine().skip_prompt_cache(&mut body));
        assert_eq!(body["cache_prompt"], false);
        assert!(asked_for_tokens(&body));
    }

    /// vLLM's cache salt isolates per value: each cold request gets its own, or the second would hit the first's
    /// cache.
    #[test]
    fn each_cold_vllm_request_has_a_salt_of_its_own() {
        let vllm = TokenDialect::for_engine("vllm").unwrap();
        let salts: Vec<Value> = (0..2)
            .map(|_| {
                let mut body = json!({"model": "m"});
                assert!(vllm.skip_prompt_cache(&mut body));
                body["cache_salt"].clone()
            })
            .collect();
        assert!(salts.iter().all(|s| s.as_str().is_some_and(|s| s.starts_with("gauntlet-cold-"))), "{salts:?}");
        assert_ne!(salts[0], salts[1]);
    }

    // The shape llama.cpp's server answers with (captured from xllamacpp's llama-server, see docs/src/tokens.md).
    fn llama_choice() -> Value {
        json!({"logprobs": {"content": [
            {"id": 2068, "token": "To", "bytes": [84, 111], "logprob": -0.916,
             "top_logprobs": [{"id": 2068, "token": "To", "bytes": [84, 111], "logprob": -0.916},
                              {"id": 39, "token": "7", "bytes": [55], "logprob": -1.99}]},
            {"id": 9, "token": "\u{fffd}", "bytes": [240, 159], "logprob": -0.1, "top_logprobs": []}
        ]}})
    }

    #[test]
    fn llama_cpp_entries_give_ids_alternatives_and_raw_bytes_only_when_needed() {
        let mut c = TokenCollector::default();
        c.add_choice(&llama_choice()).unwrap();
        let t = c.finish(true).unwrap();
        assert_eq!((t.source, t.count), (TokenSource::Ids, 2));
        assert_eq!(t.items[0].id, Some(2068));
        assert_eq!(t.items[0].bytes, None, "bytes equal to the text's are not repeated");
        assert_eq!(t.items[0].top[1], Alternative { id: Some(39), text: "7".into(), bytes: None, logprob: -1.99 });
        assert_eq!(t.items[1].bytes, Some(vec![240, 159]), "half a character keeps its bytes");
    }

    #[test]
    fn no_logprobs_is_text_only_when_asked_and_nothing_when_not() {
        let c = TokenCollector::default();
        assert_eq!(c.finish(true), Some(AnswerTokens::text_only()));
        assert_eq!(TokenCollector::default().finish(false), None);
        let mut c = TokenCollector::default();
        c.add_choice(&json!({"logprobs": {"content": [{"token": "x", "logprob": -1.0}]}})).unwrap();
        assert_eq!(c.finish(true).unwrap().source, TokenSource::NoIds);
    }

    #[test]
    fn vllm_ids_beside_the_logprobs_are_used() {
        let mut c = TokenCollector::default();
        c.add_choice(&json!({"token_ids": [5, 6], "logprobs": {"content": [
            {"token": "a", "logprob": -1.0}, {"token": "b", "logprob": -2.0}]}}))
            .unwrap();
        let t = c.finish(true).unwrap();
        assert_eq!((t.source, t.items[1].id), (TokenSource::Ids, Some(6)));
    }

    /// The shape mistral.rs 0.8.1 answered on the real server: the chosen token as text with byte values, each
    /// alternative with its id under `token` and its text under `bytes`.
    #[test]
    fn mistral_rs_alternatives_carry_the_id_in_token_and_the_text_in_bytes() {
        let mut c = TokenCollector::default();
        c.add_choice(&json!({"logprobs": {"content": [
            {"token": "L", "logprob": 1.397, "bytes": [76], "top_logprobs": [
                {"token": 60, "logprob": 1.397, "bytes": "L"}, {"token": 15319, "logprob": 1.392, "bytes": "La"}]}]}}))
            .unwrap();
        let t = c.finish(true).unwrap();
        assert_eq!(t.source, TokenSource::NoIds, "the chosen token has no id");
        assert_eq!((t.items[0].text.as_str(), t.items[0].bytes.as_ref()), ("L", None));
        assert_eq!(t.items[0].top[1], Alternative { id: Some(15319), text: "La".into(), bytes: None, logprob: 1.392 });
        let negative =
            json!({"logprobs": {"content": [{"token": "L", "top_logprobs": [{"token": -1, "bytes": "L"}]}]}});
        assert!(TokenCollector::default().add_choice(&negative).is_err(), "a negative id is malformed");
    }

    #[test]
    fn kept_tokens_and_alternatives_are_capped_but_all_are_counted() {
        let entry = json!({"id": 1, "token": "a", "logprob": -1.0,
            "top_logprobs": (0..50).map(|i| json!({"id": i, "token": "a", "logprob": -1.0})).collect::<Vec<_>>()});
        let choice = json!({"logprobs": {"content": vec![entry; MAX_TOKENS_KEPT + 10]}});
        let mut c = TokenCollector::default();
        c.add_choice(&choice).unwrap();
        let t = c.finish(true).unwrap();
        assert_eq!((t.count, t.items.len()), (MAX_TOKENS_KEPT as u64 + 10, MAX_TOKENS_KEPT));
        assert_eq!(t.items[0].top.len(), TOP_ALTERNATIVES);
        assert!(!t.complete());
    }

    #[test]
    fn malformed_entries_are_errors_not_panics() {
        for (bad, want) in [
            (json!({"logprobs": {"content": "x"}}), "not an array"),
            (json!({"logprobs": {"content": [{"id": -1, "token": "a"}]}}), "token id"),
            (json!({"logprobs": {"content": [{"id": true, "token": "a"}]}}), "token id"),
            (json!({"logprobs": {"content": [{"logprob": -1.0}]}}), "no string `token`"),
            (json!({"logprobs": {"content": [{"token": "a", "logprob": "x"}]}}), "finite number"),
            (json!({"logprobs": {"content": [{"token": "a", "bytes": [300]}]}}), "0..=255"),
            (json!({"logprobs": {"content": [{"token": "a", "top_logprobs": [{"token": "b"}]}]}}), "finite"),
        ] {
            let e = TokenCollector::default().add_choice(&bad).unwrap_err().to_string();
            assert!(e.contains(want), "{bad} → {e}");
        }
    }
}
