//! Statistics with the conventions of the tools users already trust (reference/metrics.md §4.4), and a comparison
//! that calls a change only when it is both beyond the noise band and significant.
//!
//! - Percentiles: linear interpolation, Hyndman–Fan type 7 (numpy's default).
//! - Standard deviation: population (ddof = 0) within a run, sample (ddof = 1) across runs.
//! - Comparison: a seeded percentile-bootstrap confidence interval of the relative change of the means, plus a
//!   two-sided Mann–Whitney U test. A regression needs the whole interval beyond the noise band in the worse
//!   direction and p < alpha; an interval wider than `max_interval` that is not a clear change is inconclusive.

use serde::Serialize;

/// Type-7 percentile of `p` in [0, 1]; `None` for an empty sample. NaNs are not accepted (callers filter them).
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() || !(0.0..=1.0).contains(&p) {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    Some(percentile_sorted(&v, p))
}

fn percentile_sorted(v: &[f64], p: f64) -> f64 {
    let h = (v.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(v.len() - 1);
    v[lo] + (h - lo as f64) * (v[hi] - v[lo])
}

pub fn mean(values: &[f64]) -> Option<f64> {
    (!values.is_empty()).then(|| values.iter().sum::<f64>() / values.len() as f64)
}

/// Population standard deviation (ddof = 0): the spread within one run, as vLLM and AIPerf report it.
pub fn std_population(values: &[f64]) -> Option<f64> {
    let m = mean(values)?;
    Some((values.iter().map(|x| (x - m).powi(2)).sum::<f64>() / values.len() as f64).sqrt())
}

/// Sample standard deviation (ddof = 1): the spread across runs. `None` below two values.
pub fn std_sample(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let m = mean(values)?;
    Some((values.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (values.len() - 1) as f64).sqrt())
}

/// The seeded generator lives with the workload it defines (a recorded seed means this generator).
pub use gauntlet_schema::bench::Rng;

/// Two-sided Mann–Whitney U test (normal approximation with tie and continuity correction): the p-value that the
/// two samples come from the same distribution. `None` when either side is empty or every value is tied.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> Option<f64> {
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    if a.is_empty() || b.is_empty() {
        return None;
    }
    let mut all: Vec<(f64, bool)> = a.iter().map(|&x| (x, true)).chain(b.iter().map(|&x| (x, false))).collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = all.len();
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        let t = (j - i + 1) as f64;
        tie_term += t.powi(3) - t;
        rank_sum_a += all[i..=j].iter().filter(|x| x.1).count() as f64 * rank;
        i = j + 1;
    }
    let u = rank_sum_a - n1 * (n1 + 1.0) / 2.0;
    let nn = n1 + n2;
    let variance = n1 * n2 / 12.0 * ((nn + 1.0) - tie_term / (nn * (nn - 1.0)));
    if variance <= 0.0 {
        return None;
    }
    let diff = u - n1 * n2 / 2.0;
    let z = (diff.abs() - 0.5).max(0.0) / variance.sqrt();
    Some((2.0 * (1.0 - normal_cdf(z))).clamp(0.0, 1.0))
}

/// Φ(z) through erf (Abramowitz & Stegun 7.1.26, absolute error below 1.5e-7).
pub(crate) fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly =
        t * (0.254_829_592 + t * (-0.284_496_736 + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 { 0.5 * (1.0 + erf) } else { 0.5 * (1.0 - erf) }
}

/// Which way is better for a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Lower,
    Higher,
}

/// The rules of a comparison; manifest data, recorded with every verdict.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Rules {
    /// Relative changes within ±noise_band are not changes (0.015 = 1.5 %).
    pub noise_band: f64,
    /// Significance level of the Mann–Whitney test.
    pub alpha: f64,
    /// A confidence interval wider than this (relative) that shows no clear change is inconclusive.
    pub max_interval: f64,
    pub resamples: usize,
    pub confidence: f64,
    pub seed: u64,
}

impl Default for Rules {
    fn default() -> Rules {
        Rules { noise_band: 0.015, alpha: 0.05, max_interval: 0.10, resamples: 2000, confidence: 0.95, seed: 1 }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Call {
    Regression,
    Improvement,
    NoChange,
    Inconclusive,
}

#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// candidate mean / baseline mean − 1.
    pub change: f64,
    pub interval: (f64, f64),
    pub p_value: Option<f64>,
    pub call: Call,
    /// Why, in words, for the report line "baseline → now (change, interval, verdict)".
    pub why: String,
}

/// Compares a candidate's samples with a baseline's. `None` when a side has fewer than two samples or a mean of
/// zero (no relative change exists); the caller reports that as missing evidence, never as a pass.
pub fn compare(baseline: &[f64], candidate: &[f64], better: Better, rules: &Rules) -> Option<Comparison> {
    if baseline.len() < 2 || candidate.len() < 2 {
        return None;
    }
    let (mb, mc) = (mean(baseline)?, mean(candidate)?);
    if mb == 0.0 || !mb.is_finite() || !mc.is_finite() {
        return None;
    }
    let change = mc / mb - 1.0;
    let mut rng = Rng::new(rules.seed);
    let mut changes = Vec::with_capacity(rules.resamples);
    for _ in 0..rules.resamples {
        let b = resampled_mean(baseline, &mut rng);
        let c = resampled_mean(candidate, &mut rng);
        if b != 0.0 {
            changes.push(c / b - 1.0);
        }
    }
    changes.sort_by(f64::total_cmp);
    let tail = (1.0 - rules.confidence) / 2.0;
    let interval = (percentile_sorted(&changes, tail), percentile_sorted(&changes, 1.0 - tail));
    let p_value = mann_whitney_p(baseline, candidate);
    let significant = p_value.is_some_and(|p| p < rules.alpha);
    // "Worse" as a signed quantity: positive means the candidate is worse.
    let (worse_lo, worse_hi) = match better {
        Better::Lower => interval,
        Better::Higher => (-interval.1, -interval.0),
    };
    let band = rules.noise_band;
    let width = interval.1 - interval.0;
    let p_text = p_value.map(|p| format!("p = {p:.3}")).unwrap_or_else(|| "p undefined (all tied)".into());
    let (call, why) = if worse_lo > band && significant {
        (
            Call::Regression,
            format!("the whole interval is worse than the ±{:.1} % noise band and {p_text}", band * 100.0),
        )
    } else if worse_hi < -band && significant {
        (
            Call::Improvement,
            format!("the whole interval is better than the ±{:.1} % noise band and {p_text}", band * 100.0),
        )
    } else if width > rules.max_interval {
        (
            Call::Inconclusive,
            format!(
                "the interval is {:.1} % wide (limit {:.1} %): too much spread to tell",
                width * 100.0,
                rules.max_interval * 100.0
            ),
        )
    } else {
        (Call::NoChange, format!("not beyond the ±{:.1} % noise band with significance ({p_text})", band * 100.0))
    };
    Some(Comparison { change, interval, p_value, call, why })
}

fn resampled_mean(values: &[f64], rng: &mut Rng) -> f64 {
    let n = values.len();
    (0..n).map(|_| values[rng.index(n)]).sum::<f64>() / n as f64
}
