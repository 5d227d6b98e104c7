//! `paired.json`: a paired A/B bench (`gauntlet bench --profile B --paired-with A`), version [`PAIRED_VERSION`].
//! The statistics that fill it are `gauntlet_engine::bench::paired`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Finding;
use crate::bench::{BenchVerdict, Better, Call, RequestRecord, Workload};

/// 2: each side's `server_metrics` (its Prometheus counters around each of its sessions).
/// 3: a server metric that is not a finite number is kept as a marker in `server_metrics.non_finite`, never as a
/// number; and the crossover analysis: each metric judged on its ABBA blocks (`MetricVerdict::blocks`, `pair_sd`,
/// `block_sd`), the metrics the verdict rests on (`deciding`, `MetricVerdict::deciding`), the period effect per
/// metric (`period_effects`), each pair's values (`Pair::values`). A version 2 record reads with none of them (its
/// metrics judged pair by pair, every one deciding).
/// 4: each request's `timings` (the server's own), each pair's `server_decode_tokens_per_second` value when both
/// members' servers timed their decode, and `decode_clock`: the decode metric is judged on the servers' own rates
/// when every pair has them from one engine, else on the client's clock. A version 3 record reads with the client's.
/// 5: each of `problems` carries a stable code beside its words ([`crate::Problem`]); version 4 and older read with
/// their words alone, as code `other`.
/// 6: `false_call_bound`, the most often this run's looks and rules call an unchanged twin's deciding metric a
/// regression (exact under the signed-rank test's null); version 5 and older read without it.
pub const PAIRED_VERSION: u32 = 6;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Member {
    A,
    B,
}

/// The rules of a paired comparison; recorded with it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PairedRules {
    /// Relative changes within ±noise_band are not changes: a call needs the whole interval beyond it.
    pub noise_band: f64,
    /// "No change" needs the whole interval within ±equivalence: it rules out a change larger than that.
    pub equivalence: f64,
    /// The false-alarm rate over every look together.
    pub alpha: f64,
    pub resamples: usize,
    pub seed: u64,
}

impl Default for PairedRules {
    /// The noise band is the bench's (1.5 %): a smaller change is not worth a call even when measured. The
    /// equivalence margin is 5 %: "no change" means a change larger than 5 % is ruled out.
    fn default() -> PairedRules {
        PairedRules { noise_band: 0.015, equivalence: 0.05, alpha: 0.05, resamples: 2000, seed: 1 }
    }
}

/// One metric's verdict on the pairs so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricVerdict {
    pub metric: String,
    pub better: Better,
    pub pairs: usize,
    /// exp(median log ratio) − 1: B's typical change against A.
    pub median_change: f64,
    /// The bootstrap interval of that change at `confidence`.
    pub interval: (f64, f64),
    pub confidence: f64,
    pub p_value: Option<f64>,
    /// The level this metric was tested at: alpha / looks, shared by the look's metrics by Holm's step-down
    /// (the smallest p at a quarter of it for four metrics). The interval is at one minus this level.
    pub alpha: f64,
    /// The smallest relative change this comparison detects with 80 % power (from the mean log ratio's standard
    /// error); `None` below two pairs.
    pub mde: Option<f64>,
    pub call: Call,
    pub why: String,
    /// The ABBA blocks (pairs `2j` and `2j + 1`) the call was made on (v3; 0 in a version 2 record, whose calls
    /// were made on the pairs alone).
    #[serde(default)]
    pub blocks: usize,
    /// Whether the bench's verdict rests on this metric (v3; every metric did before).
    #[serde(default = "yes")]
    pub deciding: bool,
    /// The standard deviation of the per-pair log ratios, and of the per-block means the call was made on: a
    /// period effect shows as a pair sd far above the block sd (v3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair_sd: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub block_sd: Option<f64>,
}

fn yes() -> bool {
    true
}

/// The period effect of one metric: how the first request of a pair differs from the second, whichever member it
/// is, estimated from the ABBA blocks' half-differences (v3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeriodEffect {
    pub metric: String,
    pub blocks: usize,
    /// exp(median over blocks of ln(first / second)) − 1: positive when the first request's value is the larger.
    pub change: f64,
    /// The bootstrap interval of that change at `confidence`.
    pub interval: (f64, f64),
    pub confidence: f64,
    /// The median over blocks of first − second in the metric's own unit (seconds, or tokens per second).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub difference: Option<f64>,
    pub p_value: Option<f64>,
    /// The whole interval lies beyond the equivalence margin: large enough to say so in words.
    pub large: bool,
    /// The plain sentence, when large.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sentence: Option<String>,
}

/// One server of the pair.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Side {
    pub profile: String,
    pub identity_digest: String,
    /// How its server ended (`terminated`, `attached`, …), per session when alternated.
    pub stops: Vec<String>,
    /// Server starts (alternate mode restarts a server at each switch).
    pub starts: usize,
    /// The server's `/metrics` before its first request (warm-ups included) and after its last, one entry per
    /// session (v2; none where the kind serves no metrics or the profile turned them off).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub server_metrics: Vec<crate::server_metrics::ServerMetrics>,
}

/// One pair: the same prompt to both, in `order`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Pair {
    pub order: [Member; 2],
    /// Index of the prompt (the workload's corpus, else the built-in prompts).
    pub prompt: usize,
    pub a: RequestRecord,
    pub b: RequestRecord,
    /// ln(B / A) per metric; a metric missing on a side is absent.
    pub log_ratios: BTreeMap<String, f64>,
    /// Per metric, `[A, B]`: the values the ratio was taken of (v3).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, [f64; 2]>,
}

/// Whether A and B decoded the same number of tokens.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EqualWork {
    /// `ignore_eos: true` was sent with `max_tokens` (llama.cpp and vLLM honour it; another server may ignore it).
    pub ignore_eos: bool,
    /// The prompt cache was asked off (llama.cpp's `cache_prompt: false`), so both prefill the whole prompt.
    pub prompt_cache_off: bool,
    /// Pairs whose two answers had the same number of output tokens.
    pub equal_pairs: usize,
    pub pairs: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PairedRecord {
    pub paired_version: u32,
    pub gauntlet_version: String,
    pub started_at: String,
    pub a: Side,
    pub b: Side,
    /// `both` (both servers up at once) or `alternate` (one at a time, restarted at each switch).
    pub mode: String,
    pub workload: Workload,
    pub min_pairs: usize,
    pub max_pairs: usize,
    /// The pair counts at which the statistics were looked at (each at alpha / looks, shared by
    /// the metrics: see `MetricVerdict::alpha`).
    pub looks: Vec<usize>,
    pub rules: PairedRules,
    pub equal_work: EqualWork,
    pub pairs: Vec<Pair>,
    /// The metrics the verdict rests on (v3; every metric in a version 2 record), and why those.
    #[serde(default)]
    pub deciding: Vec<String>,
    #[serde(default)]
    pub deciding_why: String,
    pub metrics: Vec<MetricVerdict>,
    /// Per metric, the first-versus-second effect the crossover analysis cancelled (v3).
    #[serde(default)]
    pub period_effects: Vec<PeriodEffect>,
    /// What was done with pairs outside a complete ABBA block (an odd last pair), when there was one (v3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub left_out: Option<String>,
    /// Which clock timed the decode metric (version 4): `server clock (llama.cpp timings)` when every pair's two
    /// requests carried the server's own decode rate from one engine, else `client clock` with the reason. Absent
    /// in older records (the client's clock).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_clock: Option<String>,
    /// The most often an unchanged twin would have any deciding metric called a regression with these looks,
    /// rules and deciding metrics (version 6): exact under the signed-rank test's null, whatever the spread or
    /// shape of the noise, when the ABBA blocks' contrasts are independent and symmetric about zero
    /// (`gauntlet_engine::bench::paired::false_regression_bound`). Absent in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub false_call_bound: Option<f64>,
    /// Why the run stopped where it did.
    pub stopped: String,
    pub verdict: BenchVerdict,
    #[serde(default)]
    pub problems: Vec<crate::Problem>,
    #[serde(default)]
    pub findings: Vec<Finding>,
}
