//! Workloads from the field (#34), as a bench record states them: a Mooncake-style trace replayed at its recorded
//! times, or multi-turn conversations (a ShareGPT file, or a seeded synthetic generator) in which every turn sends
//! the conversation so far. The parsed rows and conversations are not written into records (the file's digest
//! stands for them); what a level measured of them (lateness, per-turn TTFT, prefix-cache hits) is [`FieldSummary`].

use serde::{Deserialize, Serialize};

/// Tokens per hash id when a trace does not say (Mooncake's published traces use 512).
pub const BLOCK_SIZE_DEFAULT: u32 = 512;

/// A workload from the field, beside the bench's own (`[profiles.P.bench] workload`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FieldWorkload {
    /// A trace replayed open-loop: each row sent at its `timestamp` (milliseconds from the trace's first row)
    /// divided by `speed`, its prompt built from its hash ids, `block_size` tokens each.
    Trace {
        path: String,
        sha256: String,
        /// `mooncake` (the only format read so far).
        format: String,
        block_size: u32,
        speed: f64,
        rows: usize,
        /// The last row's timestamp, in milliseconds (the replay lasts about this divided by `speed`).
        span_ms: u64,
    },
    /// `conversations` conversations at once, each of at most `turns` user turns sent one after another.
    Conversations {
        /// `sharegpt` (a file) or `synthetic` (generated from the bench's seed).
        source: String,
        /// The file (ShareGPT) and its digest; absent for the synthetic generator.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        path: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sha256: Option<String>,
        conversations: usize,
        turns: usize,
        /// Synthetic only: words of the system prompt every conversation shares, of each user turn, and of each
        /// assistant turn the history carries (fixed text, so that every run sends the same prompts).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        synthetic: Option<SyntheticShape>,
    },
}

impl FieldWorkload {
    /// The level's concurrency: a trace's rows (all of them replayed a batch), or the conversations (all at once).
    pub fn concurrency(&self) -> usize {
        match self {
            FieldWorkload::Trace { rows, .. } => *rows,
            FieldWorkload::Conversations { conversations, .. } => *conversations,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyntheticShape {
    pub system_words: u32,
    pub user_words: u32,
    pub assistant_words: u32,
}

/// One row of a Mooncake trace, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceRow {
    /// The row's line in the file (1-based), for messages.
    pub line: usize,
    pub timestamp_ms: u64,
    pub input_length: u64,
    pub output_length: u64,
    pub hash_ids: Vec<u64>,
}

/// Who speaks a turn of a conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Speaker {
    System,
    User,
    Assistant,
}

impl Speaker {
    pub fn role(self) -> &'static str {
        match self {
            Speaker::System => "system",
            Speaker::User => "user",
            Speaker::Assistant => "assistant",
        }
    }
}

/// A conversation: its messages in order. A request is sent for every user message, carrying every message
/// before it (the assistant messages as recorded or generated, not the server's answers: every run then sends the
/// same prompts, and the prefix a turn shares with the previous one is known).
pub type Conversation = Vec<(Speaker, String)>;

/// What a level of a field workload measured beyond the bench's metrics (a level's `metrics.field`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FieldSummary {
    /// Trace replay: how far behind its scheduled time the client sent each request, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lateness: Option<Lateness>,
    /// Conversations: per turn (index 0 first), its requests' TTFT.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub turns: Vec<TurnSummary>,
    /// The prefix cache: what the server said it reused, against what the workload should let it reuse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<CacheSummary>,
    /// How the prompts' shared prefixes were built: `token-exact` (every word checked as one token with the
    /// server's tokenizer) or `approximate` with the reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub prefix: String,
    /// Lines a reader should see (a late client, a shared prefix shorter than the server's cache block, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Lateness {
    pub requests: u64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
    /// Requests sent later than [`Lateness::limit`] seconds behind schedule.
    pub late: u64,
    pub limit: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnSummary {
    pub turn: u32,
    pub requests: u64,
    /// TTFT mean and median over the turn's answered requests, seconds (absent when none was answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_mean: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_p50: Option<f64>,
    /// Prompt tokens and cached prompt tokens the server reported for the turn's requests.
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheSummary {
    /// Requests whose answer said how many prompt tokens came from the cache, of those answered.
    pub reported: u64,
    pub answered: u64,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    /// cached / prompt tokens, as the server reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured_rate: Option<f64>,
    /// The prompt tokens the workload shares with what was sent before, over all prompt tokens: what a prefix
    /// cache that kept everything would reuse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_rate: Option<f64>,
    /// The server's cache block, in tokens, and where that figure comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block: Option<u32>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub block_source: String,
}
