//! `bench.json` (also a qualification's `r5-performance.json` and a decision's `performance`): the workload, every
//! batch's raw request timings, the metrics per concurrency, the comparisons with a baseline and the verdict.
//! Also the workload's own definition (its built-in prompts, its seeded arrival generator), since a record's
//! `seed` and absent `corpus` mean exactly these. Reading older versions is [`crate::upgrade::parse_bench_record`].

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::identity::IdentityRecord;
use crate::metric::{Metric, Pooled};
use crate::string_enum;
use crate::words::ReceiveClock;

/// 2: batches record `released_monotonic_ns`. 3: batches record their `receive_clock`, requests whether they had
/// to open their own connection. 4: the identity is typed and carries `build` (the server binary's digest, moved
/// from `runtime.server_binary_sha256`). 5: a request records `text_dropped` (its answer text is capped). 6: a
/// comparison states its minimum detectable effect (`mde`), its within-session interval and the between-session
/// spread it counted (`between_session`); the workload may carry goodput limits (`slo`); `spill` (`gauntlet bench`
/// writes every request to a spill file as it finishes, and the batches' `requests` are the ones that file kept,
/// within its cap). 7: `server_metrics` (the server's Prometheus counters before and after the bench). Versions 1
/// to 6 are still read. 8: a level's `tally` (its batches' count, peak in-flight count, short batches and arrival
/// clocks, kept as they went by: a long bench spills its batches as it does their requests) and
/// `batches_per_sample` (past [`SAMPLES_KEPT`] samples, each is the mean of that many consecutive batches); version 7
/// and older read with every sample one batch and the tally folded from the batches. 9: a server metric that is not
/// a finite number is kept as a marker in `server_metrics.non_finite` (never a number), and a comparison is made
/// only from finite statistics; version 8 reads as it is. A level read with more than [`SAMPLES_KEPT`] samples a
/// metric is merged down to that many ([`Level::bound_samples`]). 10: a level's `sub_sessions` (its measured
/// batches split into consecutive sub-sessions, each one's mean of every compared metric: the bench's own
/// between-session spread), and a comparison's `between_session` may be `measured` (both sides' sub-session
/// spreads) and carry a `note`; version 9 and older read without sub-sessions (no measured spread). 11: a request's
/// `timings` (the server's own account of it, normalised: llama.cpp's `timings`, vLLM's `metrics`, mistral.rs's
/// `usage` seconds), a level's `server_clock` (the engine whose timings every measured request carried) with the
/// samples and sub-session means of `server_tpot_mean` (each batch's mean of the server's time per output token),
/// and a comparison's `clock` (which clock timed the metric it compares); version 10 and older read without them
/// (the client's clock decides, as it did).
/// 12: a workload from the field (`workload.field`: a trace replay or conversations) and per request its
/// `lateness`, `conversation`, `turn`, `prompt_tokens`, `cached_tokens` and `expected_cached` (all absent in a
/// bench of the built-in workload); a field level's `metrics.field` sums them up ([`crate::field::FieldSummary`]).
/// Version 11 and older read as they are.
/// 13: a structured-output workload (`workload.response_format`, sent with every request), per request
/// `structured_ok` and `structured_error` (the answer judged against the format's JSON Schema), and a level's
/// `structured` ([`StructuredTally`]); version 12 and older read without them (nothing was judged).
/// 14: each of `problems` carries a stable code beside its words ([`crate::Problem`]); version 13 and older read
/// with their words alone, as code `other`.
/// 15: a comparison with a baseline rests its verdict on the deciding metrics (`deciding`: their keys and why those,
/// [`Deciding`]; each comparison's `deciding`); the others are reported. Version 14 and older read as every compared
/// metric deciding, as they were judged.
pub const BENCH_VERSION: u32 = 15;

/// Samples a level keeps of each compared metric: when a long bench reaches this many, neighbouring samples merge
/// into their means (and `batches_per_sample` doubles), so the level holds at most this many whatever its length.
pub const SAMPLES_KEPT: usize = 512;

/// The most sub-sessions a level splits into (a bench's batches go into 3 to this many; see [`sub_session_count`]).
pub const SUB_SESSIONS_MAX: usize = 8;

/// Into how many consecutive sub-sessions a level of `batches` measured batches splits: about four batches each,
/// at least 3 (fewer give no spread worth stating) and at most [`SUB_SESSIONS_MAX`]; 0 (no split) below 3 batches.
/// Longer sub-sessions have means less moved by one batch's noise, which the spread would otherwise count as
/// between-session drift.
pub fn sub_session_count(batches: usize) -> usize {
    if batches < 3 { 0 } else { (batches / 4).clamp(3, SUB_SESSIONS_MAX) }
}

/// The sub-session of measured batch `index` of `batches` when they split into `count`: consecutive runs of nearly
/// equal length, in the order the batches ran.
pub fn sub_session_of(index: usize, batches: usize, count: usize) -> usize {
    if batches == 0 || count == 0 {
        return 0;
    }
    (index.min(batches - 1) * count / batches).min(count - 1)
}

/// What to run: closed-loop batches (every request of a batch released together), warm-ups discarded.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Workload {
    pub concurrency: Vec<usize>,
    pub max_tokens: u64,
    pub warmups: usize,
    /// Measured batches per concurrency: one sample of every metric each.
    pub repetitions: usize,
    /// The prompts' corpus (`prompts` in the manifest): where it came from and its digest, so that records of
    /// different corpora are never compared. Absent: the built-in prompts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus: Option<Corpus>,
    /// The corpus's prompts, in order (not written into records: the digest stands for them).
    #[serde(skip)]
    pub prompts: Vec<String>,
    /// Open loop: each batch's `concurrency` requests arrive as a Poisson process at this many requests per second
    /// (seeded by `seed`) instead of all at once. Absent: closed loop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Goodput limits (`[profiles.P.bench.slo]`): a request is good when it meets every one given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slo: Option<Slo>,
    /// A trace replay or conversations instead of the prompts (version 11).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<crate::field::FieldWorkload>,
    /// The trace's rows or the conversations, in order (not written into records: the digest stands for them).
    #[serde(skip)]
    pub field_data: FieldData,
    /// Structured output (version 13): the `response_format` sent with every request, a `json_schema` whose
    /// schema each answer is judged against. Records of different formats are never compared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<Value>,
}

/// The parsed input of a field workload.
#[derive(Debug, Clone, Default)]
pub enum FieldData {
    #[default]
    None,
    Trace(std::sync::Arc<Vec<crate::field::TraceRow>>),
    Conversations(std::sync::Arc<Vec<crate::field::Conversation>>),
}

/// Service-level limits for goodput, in seconds; absent ones are not checked.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e2el: Option<f64>,
}

impl Workload {
    /// A workload of the built-in prompts.
    pub fn new(concurrency: Vec<usize>, max_tokens: u64, warmups: usize, repetitions: usize) -> Workload {
        Workload {
            concurrency,
            max_tokens,
            warmups,
            repetitions,
            corpus: None,
            prompts: Vec::new(),
            rate: None,
            seed: None,
            slo: None,
            field: None,
            field_data: FieldData::None,
            response_format: None,
        }
    }

    /// When each of the `n` requests of batch `index` is sent, in seconds after the release: all at 0 in a closed
    /// loop; in an open loop, a Poisson process at `rate` (exponential gaps, the first request at 0), the same for
    /// the same seed and batch.
    pub fn arrivals(&self, index: usize, n: usize) -> Vec<f64> {
        let Some(rate) = self.rate.filter(|r| *r > 0.0 && r.is_finite()) else { return vec![0.0; n] };
        // One stream per batch: the bench's own seeded generator, keyed by the seed and the batch index.
        let mut rng = Rng::new(self.seed.unwrap_or(1) ^ (index as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let mut t = 0.0;
        (0..n)
            .map(|i| {
                if i > 0 {
                    // Exponential gap with mean 1 / rate, from a uniform in (0, 1].
                    t += -(1.0 - rng.uniform()).ln() / rate;
                }
                t
            })
            .collect()
    }

    /// The `i`-th prompt sent, cycling through the corpus (or the built-in prompts).
    pub fn prompt(&self, i: usize) -> &str {
        if self.prompts.is_empty() { PROMPTS[i % PROMPTS.len()] } else { &self.prompts[i % self.prompts.len()] }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Corpus {
    pub path: String,
    pub sha256: String,
    pub prompts: usize,
}

string_enum! {
    /// A bench run's verdict. `candidate`: nothing to compare with; `fail`: the server did not load or a request
    /// failed.
    pub enum BenchVerdict {
        Pass => "pass",
        Regression => "regression",
        Inconclusive => "inconclusive",
        Improvement => "improvement",
        Candidate => "candidate",
        Fail => "fail",
    }
}

string_enum! {
    /// What one metric's comparison with the baseline says.
    pub enum Call {
        Regression => "regression",
        Improvement => "improvement",
        NoChange => "no-change",
        Inconclusive => "inconclusive",
    }
}

string_enum! {
    /// Which way is better for a metric.
    pub enum Better {
        Higher => "higher",
        Lower => "lower",
    }
}

/// Prompts of the built-in workload: varied enough that no answer is trivially short.
pub const PROMPTS: &[&str] = &[
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain how a refrigerator keeps food cold, step by step.",
    "Describe a walk through a busy market in the morning.",
    "Write a letter to a friend about learning to bake bread.",
    "Explain why the sky is blue to a curious child.",
    "Describe the life cycle of a butterfly in detail.",
    "Write a short story about a robot that wants to become a gardener.",
    "Explain how trains switch from one track to another.",
];

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RequestRecord {
    /// Seconds after the batch was released.
    pub start: f64,
    /// `[t, content, reasoning]` per SSE event, t in seconds after the request was sent.
    pub events: Vec<(f64, String, String)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// No open connection was ready for it, so it opened its own just before it was sent: the connect is not in
    /// its times, but the server saw it on a new connection.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub connected: bool,
    /// Bytes of answer text not kept: a request keeps a few KiB of text, and past them every event only its
    /// first character (its time stays exact). 0, and absent, when the whole text is kept (and before version 5).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub text_dropped: u64,
    /// The server's own timings of this request, when it sent them (version 11): its decode rate without the
    /// client's scheduling in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<crate::ServerTimings>,
    /// A field workload's request (version 11): how far behind its scheduled time it was sent (seconds; a trace
    /// replay), its conversation and turn (0 first), the prompt tokens the server reported, those it said came
    /// from its cache (`usage.prompt_tokens_details.cached_tokens`, else llama.cpp's `timings.cache_n`), and those
    /// the workload shares with what was sent before it (what a cache that kept everything would reuse).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lateness: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conversation: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_cached: Option<u64>,
    /// A structured-output workload's judgment of the answer (version 13): whether its JSON object validates
    /// against the schema sent, and when not, why (bounded, control characters dropped: it quotes server text).
    /// Absent when nothing was judged (no structured workload, or the request failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_ok: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_error: Option<String>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Batch {
    /// Seconds from release to the last response.
    pub seconds: f64,
    /// CLOCK_MONOTONIC at the release, in nanoseconds: lines the batch up with a server's or the kernel's own
    /// monotonic timestamps (absent in version-1 records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_monotonic_ns: Option<u64>,
    /// The most requests the client had open at once.
    pub in_flight_max: usize,
    /// Where the times of arriving bytes come from: `kernel` (the kernel's receive stamp of every read), `client`
    /// (when the client's read returned: HTTPS, or no stamps), or `mixed`; absent in records before version 3 and
    /// when no request of the batch got as far as reading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receive_clock: Option<ReceiveClock>,
    pub requests: Vec<RequestRecord>,
}

/// Per concurrency: the raw batches, the metrics over all of them, and one sample per batch (or group of
/// `batches_per_sample` batches) of each compared metric.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Level {
    pub concurrency: usize,
    /// The batches the record lists: every measured one, unless a spill file's cap dropped some (`tally` counts
    /// them all).
    pub batches: Vec<Batch>,
    /// What every measured batch added up to (absent before version 8: see [`Level::tally_or_fold`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tally: Option<BatchTally>,
    pub metrics: Value,
    pub samples: std::collections::BTreeMap<String, Vec<f64>>,
    /// How many consecutive batches each sample is the mean of (the last one possibly fewer); 1, and absent, until a
    /// level reaches [`SAMPLES_KEPT`] samples.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub batches_per_sample: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub comparisons: Vec<MetricComparison>,
    /// The level's measured batches as consecutive short sessions of one run (version 10; absent before, and when
    /// too few batches were measured to split).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_sessions: Option<SubSessions>,
    /// The engine whose timings every measured request of the level carried (`llama.cpp`, `vllm`, `mistral.rs`;
    /// version 11): its samples then hold `server_tpot_mean`, the decode metric on the server's own clock. Absent
    /// when a request lacked them or engines were mixed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_clock: Option<String>,
    /// A structured-output workload's correctness at this level (version 13; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<StructuredTally>,
}

/// How many of a level's answers kept to the structured-output schema.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StructuredTally {
    /// Measured requests.
    pub requests: u64,
    /// Requests answered, so judged (a failed request is counted by the level's `failed`, not here).
    pub judged: u64,
    /// Judged answers whose JSON object validated against the schema.
    pub valid: u64,
    /// `valid / judged`; absent when nothing was judged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
}

impl StructuredTally {
    /// Counts one measured request.
    pub fn add(&mut self, r: &RequestRecord) {
        self.requests += 1;
        if let Some(ok) = r.structured_ok {
            self.judged += 1;
            self.valid += u64::from(ok);
        }
        self.rate = (self.judged > 0).then(|| self.valid as f64 / self.judged as f64);
    }
}

/// A level's measured batches split into consecutive sub-sessions, in the order they ran: each sub-session is a
/// short session of the same server, and the spread of their means is the bench's own measure of how much a
/// session's mean moves between sessions (a comparison with a stored baseline counts it instead of a default).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SubSessions {
    /// Measured batches in each sub-session, in order.
    pub batches: Vec<u64>,
    /// Per compared metric, each sub-session's mean (the mean of its batches' values), in order; a sub-session with
    /// no value of a metric (every request of its batches failed) is left out of that metric's list.
    pub means: std::collections::BTreeMap<String, Vec<f64>>,
}

fn one() -> u64 {
    1
}

fn is_one(n: &u64) -> bool {
    *n == 1
}

/// A level's batches, summed up as they went by.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BatchTally {
    /// Measured batches.
    pub batches: u64,
    /// The most requests the client had in flight at once, over every batch.
    pub in_flight_max: usize,
    /// Batches that never had the level's whole concurrency in flight at once.
    pub short: u64,
    /// Each arrival clock some batch's reads used, once, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub receive_clocks: Vec<ReceiveClock>,
}

impl BatchTally {
    /// Counts one batch of a level of `concurrency`.
    pub fn add(&mut self, batch: &Batch, concurrency: usize) {
        self.batches += 1;
        self.in_flight_max = self.in_flight_max.max(batch.in_flight_max);
        if batch.in_flight_max < concurrency {
            self.short += 1;
        }
        if let Some(clock) = batch.receive_clock
            && let Err(at) = self.receive_clocks.binary_search(&clock)
        {
            self.receive_clocks.insert(at, clock);
        }
    }
}

/// Samples of one granularity made coarser by `factor`: the means of consecutive runs of `factor` (the last run
/// possibly shorter). Two levels compared must stand for as many batches a sample: a rank test between single
/// batches and means of eight would see their different spreads, not a change.
pub fn coarsen(samples: &[f64], factor: u64) -> Vec<f64> {
    let factor = usize::try_from(factor.max(1)).unwrap_or(usize::MAX);
    if factor == 1 {
        return samples.to_vec();
    }
    samples.chunks(factor).map(|c| c.iter().sum::<f64>() / c.len() as f64).collect()
}

impl Level {
    /// Bounds a level read from a record (untrusted: gauntlet writes at most [`SAMPLES_KEPT`] samples a metric, a
    /// hand-made or older record may hold millions, and every comparison resamples them thousands of times): past
    /// [`SAMPLES_KEPT`], every metric's samples merge by the smallest power of two that brings the longest within
    /// it, as a long bench merges them while it runs, and `batches_per_sample` grows by that factor. Returns the
    /// factor (1: nothing changed).
    pub fn bound_samples(&mut self) -> u64 {
        let longest = self.samples.values().map(Vec::len).max().unwrap_or(0);
        let mut factor = 1u64;
        while longest.div_ceil(usize::try_from(factor).unwrap_or(usize::MAX)) > SAMPLES_KEPT {
            factor *= 2;
        }
        if factor > 1 {
            for v in self.samples.values_mut() {
                *v = coarsen(v, factor);
            }
            self.batches_per_sample = self.batches_per_sample.max(1).saturating_mul(factor);
        }
        factor
    }

    /// A bench metric's value pooled over the level's measured batches; `None` when the level has none that is a
    /// finite number (no request succeeded, no SLO for goodput, no structured-output workload, or a record that
    /// lacks it).
    pub fn pooled(&self, metric: Metric) -> Option<f64> {
        match metric.pooled() {
            Pooled::No => None,
            Pooled::Metrics(path) => path.iter().try_fold(&self.metrics, |v, k| v.get(k)).and_then(Value::as_f64),
            Pooled::StructuredRate => self.structured.as_ref().and_then(|s| s.rate),
        }
        .filter(|x| x.is_finite())
    }

    /// A sampled metric's per-batch samples ([`Metric::sampled`]), when the level has any.
    pub fn samples_of(&self, metric: Metric) -> Option<&[f64]> {
        self.samples.get(metric.key()).map(Vec::as_slice).filter(|s| !s.is_empty())
    }

    /// The level's comparison of `metric` with the baseline, when it was compared.
    pub fn comparison(&self, metric: Metric) -> Option<&MetricComparison> {
        self.comparisons.iter().find(|c| c.metric == metric.key())
    }

    /// Requests the level sent, and those that failed (0 for a record that does not say).
    pub fn requests(&self) -> u64 {
        self.metrics["requests"].as_u64().unwrap_or(0)
    }

    pub fn failed(&self) -> u64 {
        self.metrics["failed"].as_u64().unwrap_or(0)
    }

    /// The level's tally: the one it carries, or for a record before version 8 the one its batches give.
    pub fn tally_or_fold(&self) -> BatchTally {
        self.tally.clone().unwrap_or_else(|| {
            let mut t = BatchTally::default();
            for b in &self.batches {
                t.add(b, self.concurrency);
            }
            t
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MetricComparison {
    pub metric: String,
    pub better: Better,
    pub baseline_mean: f64,
    pub mean: f64,
    pub change: f64,
    pub interval: (f64, f64),
    pub p_value: Option<f64>,
    pub call: Call,
    pub why: String,
    /// The minimum detectable effect at 80 % power (relative change) at the noise counted: within the sessions and
    /// between them. Absent in records before version 6.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mde: Option<f64>,
    /// The bootstrap interval from the two sessions' own samples alone (`interval` adds the between-session spread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_interval: Option<(f64, f64)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub between_session: Option<BetweenSession>,
    /// Which clock timed the compared samples (version 11): `server clock (llama.cpp timings)` when both sides'
    /// every request carried the server's own timings, else `client clock`. Absent before version 11 (the client's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<String>,
    /// Whether the bench's verdict rests on this comparison (version 15; older records: every one did). A metric
    /// that does not decide is reported with its interval and MDE, and its call changes no verdict.
    #[serde(default = "deciding_by_default")]
    pub deciding: bool,
}

fn deciding_by_default() -> bool {
    true
}

/// The spread of a session's mean between sessions on one machine (relative standard deviation), and where it
/// came from: `measured` (version 10: each side's own sub-sessions, `baseline_side` and `candidate_side`; `spread`
/// is their root mean square and `sessions` the sub-sessions of both), `history` (measured over `sessions` benches
/// of the same identity and workload) or `default` (the rules' stated default, when neither was there).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BetweenSession {
    pub spread: f64,
    pub source: String,
    pub sessions: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline_side: Option<SideSpread>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate_side: Option<SideSpread>,
    /// Why this source, when it is a fallback (e.g. a baseline of an older version that carries no measured spread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One side's measured spread: the relative sample standard deviation of its sub-session means, and how many
/// sub-sessions it rests on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideSpread {
    pub spread: f64,
    pub sub_sessions: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchRecord {
    pub bench_version: u32,
    pub gauntlet_version: String,
    pub profile: String,
    pub started_at: String,
    pub identity: IdentityRecord,
    pub identity_digest: String,
    pub runtime: Value,
    pub workload: Workload,
    pub definitions: Value,
    pub levels: Vec<Level>,
    /// `pass`, `regression`, `inconclusive`, `improvement`, `candidate` (nothing to compare with) or `fail`.
    pub verdict: BenchVerdict,
    pub rules: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<crate::Problem>,
    /// A regression measured again (`bench --confirm`): what the re-run said and what stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub confirmation: Option<Confirmation>,
    /// The server's lifecycle findings (killed, stuck, leftover processes, build) and the sentry's; a `fail` among
    /// them fails the bench.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<crate::Finding>,
    /// What the kernel-log bracket and the GPU wait saw around the bench.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentry: Option<crate::run::SentryRecord>,
    /// The server's build step, when it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build: Option<crate::run::BuildRecord>,
    /// Where the requests were kept while the bench ran (absent before version 6, and in a qualification's R5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spill: Option<Spill>,
    /// The server's Prometheus counters around the bench (warm-ups included), where its kind serves them
    /// (version 7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_metrics: Option<crate::server_metrics::ServerMetrics>,
    /// With a baseline (version 15): the metrics the verdict rests on. Absent: every compared metric decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deciding: Option<Deciding>,
}

/// The metrics a bench's comparison with its baseline rests its verdict on (their keys in `levels[].samples` and
/// `comparisons[].metric`), and why those: the profile's `decide`, or the default for the workload's prompts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deciding {
    pub metrics: Vec<String>,
    pub why: String,
}

/// The spill file of a bench: every measured request's record, one JSON line each, written as the request's batch
/// ended, so that the bench holds numbers, not records. Its size is capped: past `cap_bytes` records are counted in
/// `dropped` and not kept (the metrics still count them: they are computed as the requests finish).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Spill {
    /// The file's name in the bench's folder.
    pub file: String,
    pub cap_bytes: u64,
    /// Records written.
    pub records: u64,
    /// Records not written: past the cap, or after a write failed (`error`).
    pub dropped: u64,
    /// Batches whose own line was not written (version 8: a batch's line has some room past the cap): the record
    /// lists the others.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub batches_dropped: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Confirmation {
    /// The re-run's record, relative to this one's folder.
    pub record: String,
    pub verdict: BenchVerdict,
    /// `regression` when the re-run shows it too, else `inconclusive`.
    pub stands: BenchVerdict,
}

impl BenchRecord {
    /// The verdict after a confirm re-run, if there was one.
    pub fn final_verdict(&self) -> BenchVerdict {
        self.confirmation.as_ref().map_or(self.verdict, |c| c.stands)
    }
}

/// SplitMix64: small, fast and identical on every platform and version, so a recorded seed reproduces a result.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Uniform index in [0, n).
    pub fn index(&mut self, n: usize) -> usize {
        ((self.next_u64() as u128 * n as u128) >> 64) as usize
    }

    /// Standard normal (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

#[cfg(test)]
mod sub_session_tests {
    use super::*;

    #[test]
    fn batches_split_into_three_to_eight_consecutive_runs_of_nearly_equal_length() {
        assert_eq!((0..3).map(sub_session_count).collect::<Vec<_>>(), vec![0, 0, 0]);
        assert_eq!([3, 4, 12, 16, 20, 100].map(sub_session_count), [3, 3, 3, 4, 5, SUB_SESSIONS_MAX]);
        let of = |n: usize| {
            let k = sub_session_count(n);
            (0..n).map(|i| sub_session_of(i, n, k)).collect::<Vec<_>>()
        };
        assert_eq!(of(4), vec![0, 0, 1, 2]);
        assert_eq!(of(12), vec![0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2]);
        // A batch past the planned ones (never, but the input is a count) stays in the last sub-session.
        assert_eq!(sub_session_of(50, 12, 3), 2);
        assert_eq!(sub_session_of(0, 0, 0), 0);
    }
}
