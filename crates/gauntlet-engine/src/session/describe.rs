//! What a running server says about itself: its `Server` header, the ids and owners `/v1/models` lists, and the
//! scalar members of its version and property endpoints (which endpoints: the kinds table's `describe` column;
//! for an attached server of unknown kind, every kind's). Everything is untrusted text: each request is bounded in
//! time and size, each value in length, each list in count. The result lives in `runtime.server`, so a server that
//! changed behind the same URL is a named finding against the baseline, never a refused comparison. It is also what
//! `gauntlet init --attach` guesses a kind from.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::client::Client;
use crate::kinds::{KINDS, Kind};

/// At most this many members per endpoint, models, and characters per value.
const MAX_MEMBERS: usize = 16;
const MAX_MODELS: usize = 16;
const MAX_CHARS: usize = 200;

/// The self-description of the server behind `client`, asked on `kind`'s endpoints (every kind's when None).
/// Endpoints that do not answer 200 are left out; a server that answers nothing gives `{}`.
pub async fn describe(client: &Client, kind: Option<&Kind>, timeout: Duration) -> Value {
    let mut out = Map::new();
    let mut endpoints: Vec<&str> = match kind {
        Some(k) => k.describe.to_vec(),
        None => KINDS.iter().flat_map(|k| k.describe.iter().copied()).collect(),
    };
    endpoints.dedup();
    if let Ok(d) = client.get_described("v1/models", timeout).await {
        if let Some(h) = &d.server {
            out.insert("header".into(), Value::String(clean(h)));
        }
        if d.status == 200 {
            let models: Vec<Value> = d.body["data"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .take(MAX_MODELS)
                        .map(|m| {
                            json!({
                                "id": m["id"].as_str().map(clean),
                                "owned_by": m["owned_by"].as_str().map(clean),
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            out.insert("models".into(), Value::Array(models));
        }
    }
    for path in endpoints {
        let Ok(d) = client.get_described(path, timeout).await else { continue };
        if d.status != 200 {
            continue;
        }
        if let Some(h) = &d.server {
            out.entry("header").or_insert_with(|| Value::String(clean(h)));
        }
        out.insert(endpoint_key(path), scalars(&d.body));
    }
    Value::Object(out)
}

/// [`describe`] on a runtime of its own, for a command that has none (`gauntlet init --attach`).
pub fn describe_blocking(client: &Client, timeout: Duration) -> std::io::Result<Value> {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    Ok(rt.block_on(describe(client, None, timeout)))
}

/// `/api/version` → `api_version`.
pub fn endpoint_key(path: &str) -> String {
    path.trim_matches('/').replace('/', "_")
}

/// The scalar members of an object (nested objects and arrays left out: a chat template, generation settings),
/// at most [`MAX_MEMBERS`], strings cleaned; a plain-text answer is kept as one string.
fn scalars(body: &Value) -> Value {
    match body {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter_map(|(k, v)| {
                    let v = match v {
                        Value::String(s) => Value::String(clean(s)),
                        Value::Number(_) | Value::Bool(_) => v.clone(),
                        _ => return None,
                    };
                    Some((clean(k), v))
                })
                .take(MAX_MEMBERS)
                .collect(),
        ),
        Value::String(s) => Value::String(clean(s)),
        _ => Value::Null,
    }
}

/// At most [`MAX_CHARS`] characters, control characters dropped: a server's text reaches reports and terminals.
fn clean(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(MAX_CHARS).collect()
}

/// The kind a self-description points to: the first kind whose `describe` endpoint answered, or whose name the
/// `Server` header or a model's owner gives away.
pub fn guess_kind(described: &Value) -> Option<&'static Kind> {
    let owner = described["models"][0]["owned_by"].as_str().unwrap_or("").to_ascii_lowercase();
    let header = described["header"].as_str().unwrap_or("").to_ascii_lowercase();
    let by_owner = |o: &str, k: &str| owner == o || header.contains(k);
    if described.get("props").is_some() || by_owner("llamacpp", "llama.cpp") {
        return crate::kinds::find("llama.cpp");
    }
    if described.get("api_version").is_some() || owner == "library" {
        return crate::kinds::find("ollama");
    }
    if described.get("info").is_some() {
        return crate::kinds::find("tgi");
    }
    if described.get("get_server_info").is_some() || owner == "sglang" {
        return crate::kinds::find("sglang");
    }
    if by_owner("vllm", "vllm") {
        return crate::kinds::find("vllm");
    }
    if header.contains("mistral") {
        return crate::kinds::find("mistralrs");
    }
    if described.get("version").is_some() {
        return crate::kinds::find("vllm");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_are_bounded_and_cleaned() {
        let long = "x".repeat(1000);
        let body = json!({"build_info": format!("b1\u{1b}[2J{long}"), "n": 3, "nested": {"a": 1}, "list": [1]});
        let v = scalars(&body);
        assert_eq!(v["n"], 3);
        assert!(v.get("nested").is_none() && v.get("list").is_none());
        let s = v["build_info"].as_str().unwrap();
        assert!(s.starts_with("b1[2J") && s.chars().count() == MAX_CHARS, "{s}");
    }

    #[test]
    fn kinds_are_guessed_from_what_servers_say() {
        let g = |v: Value| guess_kind(&v).map(|k| k.name);
        assert_eq!(g(json!({"props": {"build_info": "b1"}})), Some("llama.cpp"));
        assert_eq!(
            g(json!({"models": [{"id": "m", "owned_by": "vllm"}], "version": {"version": "0.17"}})),
            Some("vllm")
        );
        assert_eq!(g(json!({"api_version": {"version": "0.33"}})), Some("ollama"));
        assert_eq!(g(json!({"info": {"model_id": "x"}})), Some("tgi"));
        assert_eq!(g(json!({"header": "mistral.rs"})), Some("mistralrs"));
        assert_eq!(g(json!({})), None);
    }
}
