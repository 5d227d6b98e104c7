//! What an attached server says about itself, and how it answers before the first case: the fake poses as one
//! engine (its `Server` header, version/props endpoints and `/v1/models` owner), lists the models it serves and
//! refuses any other name with 404, answers no `/health` at all, or stops answering everything once a case hung.
//!
//!   --pose ENGINE           llama.cpp | vllm | sglang | tgi | ollama | mistralrs: that engine's `Server` header,
//!                           its self-description endpoints and `owned_by` (shapes from
//!                           ../shared/reference/engines.md: llama.cpp `/props` `build_info`, vLLM `/version`,
//!                           TGI `/info`, Ollama `/api/version` and `GET /` "Ollama is running", SGLang
//!                           `/get_server_info`)
//! `/v1/models` always lists `fake-model` unless `--models` says otherwise.
//!   --models ID[,ID…]       `/v1/models` lists these ids (`--models none`: an empty list), and a chat request for
//!                           any other model gets vLLM's 404 "The model `X` does not exist."
//!   --no-health             `/health` answers 404 (Ollama has none)
//!   --fault hang-after      with --fault-on TEXT: the request with TEXT never gets an answer, nor does any request
//!                           after it, health included (a server wedged by one request)

use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

#[derive(Default, Debug, Clone)]
pub struct Modes {
    pub pose: Option<String>,
    /// None: `/v1/models` lists `fake-model` and any name is served.
    pub models: Option<Vec<String>>,
    pub no_health: bool,
}

/// Set once a `hang-after` request arrived: from then on nothing is answered.
static HUNG: AtomicBool = AtomicBool::new(false);

/// The `Server` header of every answer, set once at start.
static SERVER_HEADER: std::sync::OnceLock<Option<&'static str>> = std::sync::OnceLock::new();

const POSES: &[&str] = &["llama.cpp", "vllm", "sglang", "tgi", "ollama", "mistralrs"];

impl Modes {
    /// Takes one of this module's flags; false when `flag` is not one of them.
    pub fn take(&mut self, flag: &str, value: &mut dyn FnMut() -> String) -> bool {
        match flag {
            "--pose" => {
                let v = value();
                if !POSES.contains(&v.as_str()) {
                    crate::die(&format!("--pose: unknown engine `{v}`"));
                }
                self.pose = Some(v);
            }
            "--models" => {
                let v = value();
                self.models = Some(if v == "none" { Vec::new() } else { v.split(',').map(str::to_owned).collect() });
            }
            "--no-health" => self.no_health = true,
            _ => return false,
        }
        true
    }

    /// Called once before listening.
    pub fn start(&self) {
        let header = match self.pose.as_deref() {
            Some("llama.cpp") => Some("llama.cpp"),
            Some("vllm") | Some("sglang") => Some("uvicorn"),
            Some("tgi") => Some("axum"),
            Some("ollama") => None,
            Some("mistralrs") => Some("mistral.rs"),
            _ => None,
        };
        let _ = SERVER_HEADER.set(header);
    }

    /// An answer for `path` that this module owns (status, body), or None to let the ordinary routes answer.
    pub fn route(&self, method: &str, path: &str, body: &[u8]) -> Option<(u16, Vec<u8>)> {
        let ok = |v: Value| Some((200, v.to_string().into_bytes()));
        if path == "/health" && (self.no_health || self.pose.as_deref() == Some("ollama")) {
            return Some((404, b"404 page not found".to_vec()));
        }
        // Like llama.cpp, the fake always lists the one model it serves (`fake-model` unless `--models` says).
        if method == "GET" && path == "/v1/models" {
            let owner = match self.pose.as_deref() {
                Some("llama.cpp") => "llamacpp",
                Some("vllm") => "vllm",
                Some("sglang") => "sglang",
                Some("ollama") => "library",
                Some("mistralrs") => "local",
                _ => "fake",
            };
            let ids = self.models.clone().unwrap_or_else(|| vec!["fake-model".into()]);
            let data: Vec<Value> =
                ids.iter().map(|id| json!({"id": id, "object": "model", "owned_by": owner})).collect();
            return ok(json!({"object": "list", "data": data}));
        }
        if method == "GET" {
            match (self.pose.as_deref(), path) {
                (Some("llama.cpp"), "/props") => {
                    return ok(
                        json!({"build_info": "b6000-fake0001", "model_path": "/models/fake.gguf", "total_slots": 1}),
                    );
                }
                (Some("vllm"), "/version") => return ok(json!({"version": "0.17.1"})),
                (Some("sglang"), "/get_server_info") => return ok(json!({"version": "0.5.4", "model_path": "fake"})),
                (Some("tgi"), "/info") => {
                    return ok(json!({"model_id": "fake/model", "version": "3.3.7", "sha": "0000000"}));
                }
                (Some("ollama"), "/api/version") => return ok(json!({"version": "0.33.0"})),
                (Some("ollama"), "/") => return Some((200, b"Ollama is running".to_vec())),
                _ => {}
            }
        }
        if path == "/v1/chat/completions"
            && let Some(models) = &self.models
        {
            let req: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let asked = req["model"].as_str().unwrap_or("");
            if !models.iter().any(|m| m == asked) {
                let message = format!("The model `{asked}` does not exist.");
                let err = json!({"error": {"message": message, "type": "NotFoundError", "code": 404}});
                return Some((404, err.to_string().into_bytes()));
            }
        }
        None
    }
}

/// The `Server` header line for every answer ("" when the pose sends none).
pub fn server_header() -> String {
    match SERVER_HEADER.get().copied().flatten() {
        Some(h) => format!("Server: {h}\r\n"),
        None => String::new(),
    }
}

/// From now on nothing is answered (`--fault hang-after`).
pub fn hang() {
    HUNG.store(true, Ordering::SeqCst);
}

pub fn hung() -> bool {
    HUNG.load(Ordering::SeqCst)
}
