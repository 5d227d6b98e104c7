//! `run.json` (the record of one gate), `skipped.json`, and the parts they share. Only types: reading older
//! versions is [`crate::upgrade`]'s job, writing reports the engine's.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::finding::Finding;
use crate::identity::{IdentityRecord, ServerMode};
use crate::tokens::AnswerTokens;
use crate::words::{KernelLogState, SkipKind, StopOutcome};

/// Version of `run.json` this gauntlet writes.
/// Version 11 added `decode.speed_check` (what the server's threads did during each case: CPU time, wait for a CPU,
/// its CPU group's throttled time; the contention and the decode correction derived from them, and whether decode
/// was judged) and `server.load_cpu.throttled_seconds`; older records read without them, and their decode is
/// compared uncorrected, as before.
/// Version 10 added `lossless` (speculative decoding's losslessness against the profile named by
/// `lossless_against`, with a control) and the identity's `recipe.draft` (the draft model and its settings, `null`
/// before); older records read without them.
/// Version 12 added the machine's other work beside the server: `neighbours` in each case's CPU account, pooled in
/// `decode.speed_check.neighbours` and judged in its `judgement`; older records read without it (unknown).
/// Version 13 added the same share for the load, `server.load_cpu.neighbours`; older records read without it.
/// Version 14 added the machine's own speed beside the cases, `decode.speed_check.machine`, and its comparison in
/// the `judgement` (`machine_shift`); older records read without them (not measured).
/// Version 8 added `server_metrics` (the server's Prometheus counters before and after the suite); older records
/// read without it.
/// Version 9 added `server.load_cpu` (the server's CPU time and its threads' wait for a CPU during the load);
/// older records read without it. In the same version a server metric that is not a finite number (NaN, ±Inf, a
/// change that overflows) became a marker in `server_metrics.non_finite` with a `non-finite-value` finding, never a
/// number, and raw server JSON (`answer.server_timings`, tool-call arguments) is capped in depth and size; a repeat
/// case gained its `divergence` from its source (both sides' tokens, the pair's measured jitter, the class
/// `numerical` besides near-tie and behaviour change), the record `baseline_jitter` (how far the tokens the run
/// shares with its baseline moved), and `decode.draft` (speculative decoding's acceptance); older records read
/// without them.
/// Version 7 added `decode.server_median_tokens_per_second` (the server's own decode timings), each answer's
/// normalised server `timings` ([`ServerTimings`]) and `usage.cached_tokens`, `server.readiness` (which probe
/// answered, the model discovered) and `runtime.server` (what the server says about itself); older records read
/// without them.
/// Version 6 added each answer's `tokens` (ids, logprobs, top alternatives; [`crate::tokens`]); older records read
/// without them.
/// Version 5 typed the identity: it gained `build` (the server binary's digest, moved from
/// `runtime.server_binary_sha256`).
/// Version 2 split the identity (what must match to compare) from `runtime` (what may change and only warns).
pub const RUN_RECORD_VERSION: u32 = 14;
/// Versions of `run.json` this gauntlet can read. A version-1 record reads with an empty `runtime`; its identity
/// has the older shape, so it never matches a version-2 identity and is refused as a baseline with the fields named.
/// Version 3 added `sentry` (kernel log, GPU wait); older records read without it.
pub const RUN_RECORD_READABLE: &[u32] = &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14];

/// The outcome of a run, ordered from best to worst so that `max` folds verdicts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Warn,
    Inconclusive,
    Skip,
    Fail,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Warn => "warn",
            Verdict::Inconclusive => "inconclusive",
            Verdict::Skip => "skip",
            Verdict::Fail => "fail",
        }
    }
}

/// Everything one `gauntlet run` observed. Every report is a pure function of this record.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunRecord {
    pub schema_version: u32,
    pub gauntlet_version: String,
    pub profile: String,
    /// RFC 3339, UTC, real clock.
    pub started_at: String,
    pub finished_at: String,
    pub wall_seconds: f64,
    pub identity: IdentityRecord,
    pub identity_digest: String,
    /// Warn-only facts about the server build and runtime (binary digest, reported build, driver).
    #[serde(default)]
    pub runtime: Value,
    pub environment: Environment,
    pub server: ServerRecord,
    pub suite: SuiteRecord,
    pub cases: Vec<CaseRecord>,
    pub decode: DecodeSummary,
    pub findings: Vec<Finding>,
    pub verdict: Verdict,
    pub thresholds: Thresholds,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineRef>,
    /// What the sentry saw around the run: the kernel-log bracket and the wait for a busy GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentry: Option<SentryRecord>,
    /// The server's build step (`[servers.NAME.build]`), when it has one: ran or skipped, its time and exit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<BuildRecord>,
    /// The server's Prometheus counters around the suite, where its kind serves them (version 8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<crate::server_metrics::ServerMetrics>,
    /// How far the logprobs of the tokens this run's answers share with the baseline's moved, pooled over every
    /// case: the noise floor the text-drift findings were judged against (version 9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_jitter: Option<crate::tokens::Jitter>,
    /// Losslessness of the profile's draft against the same server without it, with a control (version 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lossless: Option<crate::lossless::LosslessRecord>,
}

/// One build step of a spawned server, as `run.json` and `bench.json` record it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildRecord {
    pub server: String,
    /// The argvs, in order.
    pub commands: Vec<Vec<String>>,
    /// `true` when the commands ran; `false` when an unchanged source and command made it a no-op.
    pub ran: bool,
    pub seconds: f64,
    /// How the last command that ran ended (`exit code 0`, `signal 9`, `timed out`); absent when skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<String>,
    pub timeout_seconds: f64,
    /// Content digest of the build's `source` tree, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_digest: Option<String>,
    /// The build's output, relative to the run's folder.
    pub log: String,
}

/// `skipped.json`: written instead of `run.json` when a run did not start because the infrastructure was not
/// there (the GPU stayed busy). A merged report shows it as skipped, never as missing and never as a pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SkipRecord {
    pub gauntlet_version: String,
    pub profile: String,
    pub kind: SkipKind,
    pub reason: String,
    pub at: String,
}

/// The kernel-log bracket of one run and the GPU-busy wait before it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SentryRecord {
    /// `clean`, `fault`, `incomplete` (records lost or the reader failed) or `blind` (could not read; `reason`).
    pub kernel_log: KernelLogState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seq: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_seq: Option<u64>,
    #[serde(default)]
    pub kernel_records: u64,
    #[serde(default)]
    pub lost_records: u64,
    #[serde(default)]
    pub ignored_userspace_records: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// Fault lines already in the kernel log before the run: the machine's state, not this run's faults.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pre_run: Vec<KernelHit>,
    /// Fault lines logged during the run, and the runtime's own fault lines from the server's stderr.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hits: Vec<KernelHit>,
    /// Seconds spent waiting for other users of the GPU to leave, and who they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_wait_seconds: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpu_holders_seen: Vec<String>,
    /// Kernel records already in the buffer when the bracket opened: the machine's history (boot lines, earlier
    /// faults), never this run's. Those that match a fault pattern are listed in `pre_run`. (Since version 4.)
    #[serde(default)]
    pub pre_run_records: u64,
    /// On a GPU, after the suite: the server's processes that held the device and the memory they held. Empty
    /// when none did (it computed elsewhere) or it could not be told (see the findings). (Since version 4.)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_gpu_pids: Vec<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_gpu_memory_bytes: Option<u64>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelHit {
    /// `kmsg` or `stderr`.
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    pub pattern: String,
    /// `device`, `app` or `warn`.
    pub class: String,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<String>,
    /// Attributed to our server (its pid or process name), or to its device.
    pub ours: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Environment {
    pub hostname: String,
    pub os: String,
    pub arch: String,
    pub cpu_model: String,
    pub cpu_count: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ServerRecord {
    /// `spawned` (gauntlet started and stopped it) or `attached` (it was already running).
    pub mode: ServerMode,
    pub base_url: String,
    #[serde(default)]
    pub command: Vec<String>,
    #[serde(default)]
    pub pid: Option<u32>,
    /// Spawn → first real generation answered. None when attached or never loaded.
    pub load_seconds: Option<f64>,
    /// What the server's processes spent of that load (since version 9): None when attached, never loaded, or
    /// where /proc does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_cpu: Option<LoadCpu>,
    pub loaded: bool,
    /// How the server ended: `terminated`, `killed`, `stuck`, `crashed`, `not-started`, `attached`.
    pub stop: StopOutcome,
    #[serde(default)]
    pub events: Vec<ServerEvent>,
    /// The last lines of the server's log, kept when the run failed.
    #[serde(default)]
    pub log_tail: Vec<String>,
    /// How readiness was established (since version 7); None when the server never became ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<Readiness>,
}

/// The server's processes from spawn to ready, from /proc: what a busy machine does not change (`cpu_seconds`,
/// the work done) and what it does (`wait_seconds`, time runnable but waiting for a CPU).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LoadCpu {
    /// User + system CPU seconds of every thread of the server's processes (reaped children included).
    pub cpu_seconds: f64,
    /// Seconds the server's threads waited, runnable, for a CPU (the kernel's schedstat run delay), summed over
    /// the threads alive at ready: threads that wait side by side each count.
    pub wait_seconds: f64,
    /// Seconds the server's CPU group (cgroup v1 `cpu` controller) was throttled by its quota during the load, from
    /// its `cpu.stat` (since version 11). Part of `wait_seconds` (a throttled thread is runnable), but the server's
    /// own slowdown, not a busy machine's. None without a readable group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_seconds: Option<f64>,
    /// The share of the CPU time the server and gauntlet left during the load that other processes used, 0–1
    /// (since version 13; as a case's `neighbours`). None where the machine's counters were not readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neighbours: Option<f64>,
}

/// Which readiness probe answered first (`health`, `models` when the health path is absent, or `generation` when
/// neither is served; the tiny generation always has to succeed too), and the model name learned from
/// `/v1/models` when the profile names none.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Readiness {
    pub probe: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discovered_model: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerEvent {
    /// Seconds since the run started (monotonic clock).
    pub at: f64,
    pub kind: String,
    pub detail: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SuiteRecord {
    pub id: String,
    pub version: u32,
    pub digest: String,
    pub budget_seconds: f64,
    pub request_timeout_seconds: f64,
    pub over_budget: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CaseStatus {
    /// The server answered and every check passed.
    Pass,
    /// The server answered; a check failed (or a repeat differs).
    Fail,
    /// The request failed: transport error, timeout, malformed answer.
    Error,
    /// Not sent: server down, budget spent, repeat source missing.
    Skipped,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseRecord {
    pub id: String,
    pub status: CaseStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat_of: Option<String>,
    pub stream: bool,
    /// The request body exactly as sent.
    pub request: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer: Option<Answer>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Seconds from sending the request to the end of the answer (client wall clock).
    #[serde(default)]
    pub seconds: Option<f64>,
    /// reasoning (prefixed) + content + one line per tool call: what is compared with the baseline.
    #[serde(default)]
    pub observed: Option<String>,
    #[serde(default)]
    pub checks: Vec<CheckResult>,
    /// A repeat that differs from its source: the first divergent token (both sides' tokens and alternatives), judged
    /// against the jitter of the tokens the two answers share (version 9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub divergence: Option<crate::tokens::TokenDivergence>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Answer {
    pub content: String,
    #[serde(default)]
    pub reasoning: String,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default)]
    pub finish_reason: Option<String>,
    #[serde(default)]
    pub usage: Option<Usage>,
    /// Server-reported timings (llama.cpp `timings`, or `usage.timings`), verbatim.
    #[serde(default)]
    pub server_timings: Option<Value>,
    /// The same timings, and those other engines report elsewhere, in one shape (since version 7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<ServerTimings>,
    /// Streamed answers: one entry per SSE event, timestamped on the client's monotonic clock.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeline: Vec<StreamEvent>,
    /// Seconds from sending the request to the first byte of the response body.
    #[serde(default)]
    pub first_byte_seconds: Option<f64>,
    /// The answer's tokens when they were asked for (since version 6): ids and logprobs, or `text-only`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<AnswerTokens>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub name: String,
    /// The arguments as the server sent them: a JSON string or an object.
    pub arguments: Value,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    /// Prompt tokens the server took from its cache (`usage.prompt_tokens_details.cached_tokens`; since version 7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
}

/// What a server says about its own time on one answer, whichever engine said it: llama.cpp's `timings`
/// (`prompt_n`, `prompt_ms`, `predicted_n`, `predicted_ms`, `predicted_per_second`, `cache_n`), vLLM's per-request
/// `metrics` (`time_to_first_token_ms`, `generation_time_ms`, `tokens_per_second`), mistral.rs's `usage`
/// (`total_prompt_time_sec`, `total_completion_time_sec`, `avg_compl_tok_per_sec`). Every field is optional: each
/// engine reports a part.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerTimings {
    /// Where the numbers came from: `llama.cpp`, `vllm`, `mistral.rs`.
    pub source: TimingSource,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_per_second: Option<f64>,
    /// Prompt tokens reused from the cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_tokens: Option<u64>,
    /// Speculative decoding: tokens the draft proposed and those the target accepted (llama.cpp `timings.draft_n`,
    /// `draft_n_accepted`; since version 9). Absent without a draft.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_accepted_tokens: Option<u64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimingSource {
    #[default]
    #[serde(rename = "llama.cpp")]
    LlamaCpp,
    #[serde(rename = "vllm")]
    Vllm,
    #[serde(rename = "mistral.rs")]
    MistralRs,
}

impl TimingSource {
    pub fn as_str(self) -> &'static str {
        match self {
            TimingSource::LlamaCpp => "llama.cpp",
            TimingSource::Vllm => "vllm",
            TimingSource::MistralRs => "mistral.rs",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StreamEvent {
    /// Seconds since the request was sent.
    pub t: f64,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub content: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reasoning: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    pub check: String,
    pub passed: bool,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub detail: String,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DecodeSummary {
    /// Median over cases with ≥ 32 completion tokens of completion_tokens / request seconds.
    pub median_tokens_per_second: Option<f64>,
    /// `usage` or `estimate`; never mixed inside one run.
    pub token_source: Option<String>,
    pub cases_counted: usize,
    /// Median over the same cases of the server's own decode speed (llama.cpp `timings.predicted_per_second`),
    /// when every counted case carried it: it leaves out the client's scheduling and the prompt's processing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_median_tokens_per_second: Option<f64>,
    /// Speculative decoding over every answer whose server timings report a draft (since version 9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<DraftSummary>,
    /// What the server's threads did during each case, and whether decode could be judged from it (since version
    /// 11). None for an attached server, or where /proc says nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub speed_check: Option<SpeedCheck>,
}

/// The CPU account of a spawned server's cases, from the kernel's per-thread schedstat and its CPU group's
/// `cpu.stat`. A busy machine makes a server's threads wait, runnable, for a CPU another process holds; that wait
/// lengthens every clock the gate has (the client's and the server's own, both wall clocks). Taking it out puts a
/// case's decode rate on the server's own CPU clock: rate × (cpu + wait) / (cpu + throttled). A quota's throttling
/// stays in (the quota is the environment under test); waiting for other processes does not.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeedCheck {
    /// Each case that answered, in suite order.
    pub cases: Vec<CaseCpu>,
    /// Over the cases: (wait − throttled) / (cpu + wait), 0–1 (see [`CaseCpu::wall_seconds`]). None when no case has
    /// an account.
    pub contention: Option<f64>,
    /// The most threads that shared the decode in any case (a thread counts when it ran at least a quarter of the
    /// busiest thread's CPU time, and several count as sharing only when they were on a CPU or waiting for one for
    /// at least half of the request each; threads that slept through most of it count as one).
    pub busy_threads: u32,
    /// Summed over the cases.
    pub throttled_seconds: f64,
    /// The CPU group whose `cpu.stat` was read (`/sys/fs/cgroup/cpu/…`); None when none was readable, and then
    /// nothing counts as throttled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_group: Option<String>,
    /// Over the cases (weighted by their seconds): the share of the CPU time the server and gauntlet left that
    /// other processes used (see [`CaseCpu::neighbours`]). None when no case has one (version 11 and older).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neighbours: Option<f64>,
    /// How fast the machine itself was while the cases ran (version 14): a fixed piece of gauntlet's own work,
    /// timed before each case and after the last while the server was idle. None when not measured (version 13
    /// and older).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineSpeed>,
    /// The decision against the baseline; None without a baseline to compare with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judgement: Option<SpeedJudgement>,
}

/// The machine's speed over a run: the medians of its readings, each measure on its own.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MachineSpeed {
    /// Bytes per second read in a pass over a buffer larger than the caches: the memory traffic a decode on the CPU
    /// is made of.
    pub memory_bytes_per_second: f64,
    /// Dependent floating-point steps per second: the core's own speed.
    pub steps_per_second: f64,
    /// How many readings the medians are of.
    pub readings: u32,
}

/// One case's account: summed over the server's threads between the request's start and its end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseCpu {
    pub case: String,
    /// Seconds on a CPU (schedstat field 1).
    pub cpu_seconds: f64,
    /// Seconds runnable but waiting for a CPU (schedstat field 2), throttled time included.
    pub wait_seconds: f64,
    /// Seconds the server's CPU group was throttled by its quota.
    pub throttled_seconds: f64,
    /// The request's seconds on the client's clock. When longer than cpu + wait (threads that slept: a server
    /// waiting on a GPU or a timer), contention and factor are shares of it instead.
    pub wall_seconds: f64,
    /// Threads that shared the work (see [`SpeedCheck::busy_threads`]).
    pub busy_threads: u32,
    /// (wait − throttled) / (cpu + wait), 0–1: the share of the case's time spent waiting for CPUs other
    /// processes held.
    pub contention: f64,
    /// (cpu + wait) / (cpu + throttled): what the case's decode rate is multiplied by to leave out the wait for
    /// other processes' CPU. 1 when nothing waited.
    pub factor: f64,
    /// The share of the CPU time the server's threads and gauntlet left that other processes used during the case,
    /// 0–1, from `/proc/stat` (version 12): their work slows each CPU second of a server on a shared memory system
    /// by an amount no counter shows. None when the machine's counters were not readable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neighbours: Option<f64>,
    /// The machine's speed just before the case (version 14): the medians of the readings taken then (see
    /// [`SpeedCheck::machine`]). Recorded, not judged: only the run's medians are compared with the baseline's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<MachineSpeed>,
}

/// Whether decode was judged against the baseline, and why.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeedJudgement {
    pub judged: bool,
    /// In words: the clock and correction used, or why decode was not judged.
    pub reason: String,
    /// `the server's timings` or `the client's clock`, corrected onto the server's CPU clock when `corrected`.
    pub clock: String,
    pub corrected: bool,
    /// The highest contention (of the run and the baseline) that was judged against `contention_limit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contention: Option<f64>,
    pub contention_limit: f64,
    /// The higher neighbours' share of the run and the baseline, when both measured one and the decode was
    /// compute-bound on the CPU (version 12).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub neighbours: Option<f64>,
    /// The median of the case-against-case ratios (corrected when `corrected`), when decode was judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upper_ratio: Option<f64>,
    /// The same median without the correction, for comparison: what the wall clocks alone said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uncorrected_median_ratio: Option<f64>,
    /// How far the machine's own speed moved between the baseline and this run (version 14): the larger of its two
    /// measures' shifts, each 1 − slower / faster (0.3: one measure 30 % slower on one side than on the other),
    /// when both runs measured it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_shift: Option<f64>,
}

/// What a draft model did over a run's answers: summed counts, and the two rates derived from them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DraftSummary {
    /// Answers that reported draft counts.
    pub answers: usize,
    pub drafted_tokens: u64,
    pub accepted_tokens: u64,
    /// Accepted / drafted; None when nothing was drafted.
    pub acceptance_rate: Option<f64>,
    /// Tokens generated per target step: predicted / (predicted − accepted), each step yielding its accepted draft
    /// tokens plus the target's own; 1.0 means the draft never helped. None without predicted-token counts.
    pub mean_accepted_length: Option<f64>,
}

/// The verdict rules in force for a run; recorded so a reader knows what the verdict meant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    pub min_pass_rate: f64,
    /// Regressions at or above this count fail the run; below it (but > 0) warn.
    pub fail_regressions: u32,
    pub decode_ratio_warn: f64,
    pub load_ratio_warn: f64,
    pub load_timeout_seconds: f64,
    pub request_timeout_seconds: f64,
    pub suite_budget_seconds: f64,
    /// Cases the profile declares it is known to fail (a tiny demo model, say): failing as on the baseline is
    /// then a note, not a warning. A regression (passed on the baseline, fails now) still counts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expected_failures: Vec<String>,
    /// A draft's acceptance rate below this fraction of the baseline's warns, like decode speed (since version 9;
    /// older records read with the default).
    #[serde(default = "default_draft_acceptance_ratio_warn")]
    pub draft_acceptance_ratio_warn: f64,
}

pub fn default_draft_acceptance_ratio_warn() -> f64 {
    0.9
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BaselineRef {
    pub path: String,
    pub profile: String,
    pub started_at: String,
    pub identity_digest: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Version 7's answer fields round-trip, and an answer written before them reads without them.
    #[test]
    fn timings_and_cached_tokens_round_trip_and_older_answers_read_without_them() {
        let a = Answer {
            content: "x".into(),
            usage: Some(Usage { prompt_tokens: Some(5), completion_tokens: Some(1), cached_tokens: Some(4) }),
            timings: Some(ServerTimings {
                source: TimingSource::Vllm,
                predicted_ms: Some(7.5),
                ..ServerTimings::default()
            }),
            ..Answer::default()
        };
        let text = serde_json::to_string(&a).unwrap();
        assert!(text.contains(r#""timings":{"source":"vllm","predicted_ms":7.5}"#), "{text}");
        assert!(text.contains(r#""cached_tokens":4"#), "{text}");
        assert_eq!(serde_json::from_str::<Answer>(&text).unwrap(), a);
        let v6: Answer =
            serde_json::from_str(r#"{"content": "x", "usage": {"prompt_tokens": 5, "completion_tokens": 1}}"#).unwrap();
        assert_eq!((v6.timings, v6.usage.unwrap().cached_tokens), (None, None));
    }
}
