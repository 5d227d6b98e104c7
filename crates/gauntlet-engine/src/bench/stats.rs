//! Statistics with the conventions of the tools users already trust (reference/metrics.md §4.4), and a comparison
//! that calls a change only when it is both beyond the noise band and significant.
//!
//! - Percentiles: linear interpolation, Hyndman–Fan type 7 (numpy's default).
//! - Standard deviation: population (ddof = 0) within a run, sample (ddof = 1) across runs.
//! - Comparison: a seeded percentile-bootstrap confidence interval of the relative change of the means, plus a
//!   two-sided Mann–Whitney U test. A regression needs the whole interval beyond the noise band in the worse
//!   direction and p < alpha; an interval wider than `max_interval` that is not a clear change is inconclusive.
//! - Between sessions: two sessions on one machine differ by more than their own samples show (the machine's load,
//!   clocks and caches drift between them). A comparison with a stored baseline counts that spread too
//!   ([`compare_sessions`]): the relative standard deviation `s` of a session's mean between sessions adds
//!   `√2 · s · (candidate / baseline)` of standard error to the change, each side of the interval widened in
//!   quadrature, and the minimum detectable effect is stated at the total.
//! - Where `s` comes from, best first: `measured` — each bench splits its measured batches into a few consecutive
//!   sub-sessions and records their means, so both sides carry their own spread `s_b`, `s_c` (relative sample
//!   standard deviation of a sub-session mean), counted as `√(s_b² + s_c²) · (candidate / baseline)` and widened by
//!   `t(ν) / z` for the few sub-sessions they rest on (ν by Welch–Satterthwaite); `history` — the spread of the
//!   means of earlier benches of the identity and workload; `default` — [`DEFAULT_BETWEEN_SESSION`], for a baseline
//!   that measured neither (a record before bench version 10), said so in every comparison.
//! - A sub-session's spread is not divided by √(number of sub-sessions): an offset shared by a whole run (a server
//!   restart, another day's clocks) moves every sub-session alike and is invisible to them, so a whole session's mean
//!   is taken to move between sessions as much as a short session's does. That errs wide, never narrow.

use serde::Serialize;
use statrs::distribution::{ContinuousCDF, Normal};

pub use gauntlet_schema::stats::percentile;
use gauntlet_schema::stats::percentile_sorted;

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
    Some((2.0 * normal_sf(z)).clamp(0.0, 1.0))
}

/// 1 − Φ(z), the upper tail of the standard normal distribution (statrs's, through its erfc: to double precision),
/// computed as such rather than as 1 − Φ(z), so that the tiny tail of a two-sided p keeps its digits.
pub(crate) fn normal_sf(z: f64) -> f64 {
    Normal::standard().sf(z)
}

/// The standard normal quantile of `q`. Rules can come from a record someone else wrote: a `q` outside [0, 1] has
/// no quantile (NaN) where statrs would panic.
pub(crate) fn normal_quantile(q: f64) -> f64 {
    if (0.0..=1.0).contains(&q) { Normal::standard().inverse_cdf(q) } else { f64::NAN }
}

/// Which way is better for a metric: the records' own type, which every [`gauntlet_schema::Metric`] states.
pub use gauntlet_schema::bench::Better;

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
    /// The between-session spread (relative standard deviation of a session's mean) assumed when the history of
    /// the identity does not measure it. Records written before it existed compared within sessions only: read
    /// as 0.
    #[serde(default)]
    pub between_session: f64,
}

/// The default between-session spread: 20 % (relative standard deviation of a session's mean), stated in every
/// comparison that uses it. Measured: unchanged benches of one server re-run over an hour on a shared 2-core VM moved
/// by +9 % to +41 % against their stored baseline (issue #19); on this project's 2-core VM, unchanged benches of
/// the fake server re-run a minute apart stayed within ±1.5 % four times out of five and moved by −37 % (output
/// throughput; +48 % TPOT) the fifth, while a build ran beside them (docs/validation/2026-12-03-bench-noise.md).
/// With it, a change of that size is not called from one baseline session; a 3x slowdown still is.
pub const DEFAULT_BETWEEN_SESSION: f64 = 0.20;

/// Sessions of one identity and workload needed before their measured spread replaces the default.
pub const MIN_SESSIONS: usize = 3;

impl Default for Rules {
    fn default() -> Rules {
        Rules {
            noise_band: 0.015,
            alpha: 0.05,
            max_interval: 0.10,
            resamples: 2000,
            confidence: 0.95,
            seed: 1,
            between_session: DEFAULT_BETWEEN_SESSION,
        }
    }
}

/// The effect a comparison that could not decide says it would need more sessions for: 5 %.
pub const TARGET_EFFECT: f64 = 0.05;

/// One side's own measured spread: the relative sample standard deviation of its sub-session means.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Side {
    pub spread: f64,
    pub sub_sessions: usize,
}

impl Side {
    /// The spread of a bench's sub-session means of one metric; `None` below [`MIN_SESSIONS`] sub-sessions or when
    /// it is not a finite number (a mean of zero).
    pub fn of_sub_sessions(means: &[f64]) -> Option<Side> {
        if means.len() < MIN_SESSIONS {
            return None;
        }
        let spread = std_sample(means)? / mean(means)?.abs();
        spread.is_finite().then_some(Side { spread, sub_sessions: means.len() })
    }

    /// A bench level's own spread of one metric (its key in `samples`): [`Side::of_batches`] of its sub-sessions
    /// where its samples are one a batch, else [`Side::of_sub_sessions`]; `None` without sub-sessions.
    pub fn of_level(level: &gauntlet_schema::bench::Level, name: &str) -> Option<Side> {
        let sub = level.sub_sessions.as_ref()?;
        let means = sub.means.get(name)?;
        match level.samples.get(name) {
            Some(samples) if level.batches_per_sample == 1 => Side::of_batches(means, samples, &sub.batches),
            _ => Side::of_sub_sessions(means),
        }
    }

    /// The spread between sessions that a bench's sub-sessions show once the batches' own noise is taken out of
    /// it: the variance of the sub-session means less the part of it their batches' noise explains (the pooled
    /// variance within sub-sessions times the mean of 1 / batches per sub-session; one-way random effects, by
    /// moments), never below zero. The raw spread of the means ([`Side::of_sub_sessions`]) counts that noise a
    /// second time, since a comparison's own interval already holds it: with four batches a sub-session, a machine
    /// with no drift at all got a between-session term twice the within-session one (2026-12-06: stored MDE 8–14 %
    /// on a lone H100 lane, 22–28 % on a 2-core CPU, where paired benches of the same servers measured 2 % and 5 %).
    /// `samples` are the level's values of the metric, one a batch in run order, and `batches` its sub-sessions'
    /// batch counts; where they do not line up (a sample merged from several batches, a batch without the metric),
    /// the raw spread.
    pub fn of_batches(means: &[f64], samples: &[f64], batches: &[u64]) -> Option<Side> {
        let raw = Side::of_sub_sessions(means)?;
        let counts: Vec<usize> = batches.iter().filter_map(|n| usize::try_from(*n).ok()).collect();
        if counts.len() != means.len() || counts.len() != batches.len() || counts.iter().sum::<usize>() != samples.len()
        {
            return Some(raw);
        }
        let (mut squares, mut df, mut inverse, mut at) = (0.0, 0usize, 0.0, 0usize);
        for &n in &counts {
            let group = &samples[at..at + n];
            at += n;
            let m = mean(group)?;
            squares += group.iter().map(|x| (x - m).powi(2)).sum::<f64>();
            df += n.saturating_sub(1);
            inverse += 1.0 / n as f64;
        }
        if df == 0 {
            return Some(raw);
        }
        let within = squares / df as f64;
        let level = mean(means)?.abs();
        let variance = (std_sample(means)?.powi(2) - within * inverse / counts.len() as f64).max(0.0);
        let spread = variance.sqrt() / level;
        Some(if spread.is_finite() { Side { spread, sub_sessions: means.len() } } else { raw })
    }
}

/// The between-session spread a comparison counts and where it came from (`measured`, `history` or `default`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Between {
    /// The relative standard deviation of one session's mean; for `measured`, the root mean square of the sides'.
    pub spread: f64,
    pub source: &'static str,
    /// Sessions it rests on (for `measured`, the sub-sessions of both sides).
    pub sessions: usize,
    /// For `measured`: the baseline's and the candidate's own spreads.
    pub sides: Option<(Side, Side)>,
    /// Why this source, when it is a fallback (said in the comparison's words).
    pub note: Option<String>,
}

impl Between {
    /// The rules' default, for `sessions` known sessions (fewer than [`MIN_SESSIONS`]).
    pub fn default_of(rules: &Rules, sessions: usize) -> Between {
        Between { spread: rules.between_session, source: "default", sessions, sides: None, note: None }
    }

    /// Both sides' own measured spreads.
    pub fn measured(baseline: Side, candidate: Side) -> Between {
        Between {
            spread: ((baseline.spread.powi(2) + candidate.spread.powi(2)) / 2.0).sqrt(),
            source: "measured",
            sessions: baseline.sub_sessions + candidate.sub_sessions,
            sides: Some((baseline, candidate)),
            note: None,
        }
    }

    /// The same spread, with a note on why it was chosen.
    pub fn noted(self, note: impl Into<String>) -> Between {
        Between { note: Some(note.into()), ..self }
    }

    /// The factor on the between-session standard error for a spread measured from few sub-sessions: the Student
    /// quantile over the normal one at the Welch–Satterthwaite degrees of freedom of the two sides' variances (each
    /// with its sub-sessions less one). 1 for the other sources, whose spread is taken as known.
    fn few_sessions_factor(&self, q: f64, z: f64) -> f64 {
        let Some((b, c)) = self.sides else { return 1.0 };
        let (vb, vc) = (b.spread.powi(2), c.spread.powi(2));
        let (db, dc) = (b.sub_sessions.saturating_sub(1).max(1) as f64, c.sub_sessions.saturating_sub(1).max(1) as f64);
        let df = if vb + vc > 0.0 { (vb + vc).powi(2) / (vb.powi(2) / db + vc.powi(2) / dc) } else { db + dc };
        // The series below is good from 2 degrees of freedom on; sides of 3 sub-sessions never give fewer.
        student_quantile(q, df.max(2.0)) / z
    }

    /// The spread of the sessions' means (relative sample standard deviation); the default below
    /// [`MIN_SESSIONS`] sessions or when it cannot be computed.
    pub fn of_sessions(means: &[f64], rules: &Rules) -> Between {
        let measured = (means.len() >= MIN_SESSIONS)
            .then(|| Some(std_sample(means)? / mean(means)?.abs()))
            .flatten()
            .filter(|s| s.is_finite());
        match measured {
            Some(spread) => Between { spread, source: "history", sessions: means.len(), sides: None, note: None },
            None => Between::default_of(rules, means.len()),
        }
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
    /// The minimum detectable effect (relative) at 80 % power at the noise counted.
    pub mde: Option<f64>,
    /// The interval from the samples alone, before the between-session spread is added.
    pub within_interval: (f64, f64),
    pub between: Option<Between>,
}

/// Compares a candidate's samples with a baseline's of the same session (no between-session spread). `None` when a
/// side has fewer than two samples, a mean of zero (no relative change exists) or samples whose statistics are not
/// finite numbers; the caller reports that as missing evidence, never as a pass.
pub fn compare(baseline: &[f64], candidate: &[f64], better: Better, rules: &Rules) -> Option<Comparison> {
    compare_sessions(baseline, candidate, better, rules, None)
}

/// Compares samples of two sessions, counting `between` (the spread of a session's mean between sessions) on top
/// of the samples' own spread. `None` as [`compare`].
pub fn compare_sessions(
    baseline: &[f64],
    candidate: &[f64],
    better: Better,
    rules: &Rules,
    between: Option<Between>,
) -> Option<Comparison> {
    // Rules come from records someone else wrote too (`verify`): a confidence outside (0, 1) has no interval.
    if baseline.len() < 2 || candidate.len() < 2 || !(rules.confidence > 0.0 && rules.confidence < 1.0) {
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
    if changes.is_empty() {
        return None;
    }
    changes.sort_by(f64::total_cmp);
    let tail = (1.0 - rules.confidence) / 2.0;
    let within_interval = (percentile_sorted(&changes, tail), percentile_sorted(&changes, 1.0 - tail));
    // The normal quantile of the interval's confidence, to move between half-widths and standard errors.
    let z = normal_quantile(1.0 - tail);
    let se_between = between.as_ref().map_or(0.0, |b| {
        std::f64::consts::SQRT_2 * b.spread.abs() * (mc / mb).abs() * b.few_sessions_factor(1.0 - tail, z)
    });
    let widen = |half: f64| (half.powi(2) + (z * se_between).powi(2)).sqrt();
    let interval = (change - widen(change - within_interval.0), change + widen(within_interval.1 - change));
    let se_within = (within_interval.1 - within_interval.0) / (2.0 * z);
    let mde = crate::bench::power::minimum_detectable_effect((se_within.powi(2) + se_between.powi(2)).sqrt());
    let p_value = mann_whitney_p(baseline, candidate).filter(|p| p.is_finite());
    let mde = mde.filter(|m| m.is_finite());
    // A statistic that is not a number (denormal or overflowing samples: a mean of 5e-324 makes every ratio
    // infinite and the interval NaN) is no evidence: no comparison, never a call (#32). Every number a comparison
    // holds is then finite, so the record it goes into reads back.
    let finite = [change, interval.0, interval.1, within_interval.0, within_interval.1].iter().all(|x| x.is_finite());
    if !finite {
        return None;
    }
    let significant = p_value.is_some_and(|p| p < rules.alpha);
    // "Worse" as a signed quantity: positive means the candidate is worse.
    let (worse_lo, worse_hi) = match better {
        Better::Lower => interval,
        Better::Higher => (-interval.1, -interval.0),
    };
    let band = rules.noise_band;
    let width = interval.1 - interval.0;
    let note = between.as_ref().and_then(|b| b.note.as_deref()).map_or(String::new(), |n| format!(": {n}"));
    let spread_text = match &between {
        Some(Between { sides: Some((b, c)), .. }) => format!(
            " (with the measured spread between sub-sessions: ±{:.1} % over {} in the baseline, ±{:.1} % over {} in \
             this run{note})",
            b.spread * 100.0,
            b.sub_sessions,
            c.spread * 100.0,
            c.sub_sessions
        ),
        Some(b) if b.source == "history" => {
            format!(" (with the ±{:.1} % spread between {} sessions{note})", b.spread * 100.0, b.sessions)
        }
        Some(b) => format!(" (with the default ±{:.1} % spread between sessions{note})", b.spread * 100.0),
        None => String::new(),
    };
    let mde_text = mde.map_or(String::new(), |m| format!("; it could have seen a change of {:.1} %", m * 100.0));
    let need_text = mde.and_then(|m| sessions_needed(m, TARGET_EFFECT)).map_or(String::new(), |n| {
        let samples = n.saturating_mul(candidate.len() as u64);
        format!(
            "; to detect {:.0} % it would need about {n} sessions like these on each side ({samples} samples a side), \
             or a paired bench",
            TARGET_EFFECT * 100.0
        )
    });
    let p_text = p_value.map(|p| format!("p = {p:.3}")).unwrap_or_else(|| "p undefined (all tied)".into());
    let (call, why) = if worse_lo > band && significant {
        (
            Call::Regression,
            format!("the whole interval{spread_text} is worse than the ±{:.1} % noise band and {p_text}", band * 100.0),
        )
    } else if worse_hi < -band && significant {
        (
            Call::Improvement,
            format!(
                "the whole interval{spread_text} is better than the ±{:.1} % noise band and {p_text}",
                band * 100.0
            ),
        )
    } else if worse_lo > band || worse_hi < -band {
        // Wholly beyond the noise band without significance: a change the test has not shown, not "no change".
        let side = if worse_lo > band { "worse" } else { "better" };
        (
            Call::Inconclusive,
            format!(
                "the whole interval{spread_text} is {side} than the ±{:.1} % noise band but {p_text} is not \
                 significant: a change not yet shown{mde_text}{need_text}",
                band * 100.0
            ),
        )
    } else if width > rules.max_interval {
        (
            Call::Inconclusive,
            format!(
                "the interval{spread_text} is {:.1} % wide (limit {:.1} %): too much spread to tell{mde_text}{need_text}",
                width * 100.0,
                rules.max_interval * 100.0
            ),
        )
    } else {
        (
            Call::NoChange,
            format!(
                "not beyond the ±{:.1} % noise band with significance ({p_text}){spread_text}{mde_text}",
                band * 100.0
            ),
        )
    };
    Some(Comparison { change, interval, p_value, call, why, mde, within_interval, between })
}

/// How many sessions like the two compared (each side's mean averaged over that many) would bring a minimum
/// detectable effect of `mde` down to `target`: every variance counted shrinks with the sessions averaged, so the
/// MDE shrinks with their square root. `None` when `mde` already reaches it or either is not a positive number.
pub fn sessions_needed(mde: f64, target: f64) -> Option<u64> {
    if !(mde.is_finite() && target.is_finite() && target > 0.0 && mde > target) {
        return None;
    }
    let n = (mde / target).powi(2).ceil();
    // Beyond any bench anyone would run; said as a number all the same.
    Some(if n < 1e12 { n as u64 } else { 1_000_000_000_000 })
}

/// The Student t quantile of `q` in (0.5, 1) at `df` degrees of freedom, by the Cornish–Fisher series in the normal
/// quantile (Abramowitz & Stegun 26.7.5): within 1 % of the exact value at the 97.5 % quantile from 2 degrees of
/// freedom on (4.27 for 4.30 at 2, 2.776 at 4), exact as `df` grows.
pub fn student_quantile(q: f64, df: f64) -> f64 {
    let z = normal_quantile(q);
    let (z2, n) = (z * z, df);
    let g1 = (z2 + 1.0) * z / 4.0;
    let g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0;
    let g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0;
    let g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0;
    z + g1 / n + g2 / n.powi(2) + g3 / n.powi(3) + g4 / n.powi(4)
}

fn resampled_mean(values: &[f64], rng: &mut Rng) -> f64 {
    let n = values.len();
    (0..n).map(|_| values[rng.index(n)]).sum::<f64>() / n as f64
}

#[cfg(test)]
mod rule_tests {
    use super::*;

    /// A bundle's R5 rules are untrusted: a confidence outside (0, 1) once indexed past the resampled changes
    /// (found by the bundle_verify fuzz target); it has no interval, so there is no comparison.
    #[test]
    fn a_confidence_outside_zero_to_one_gives_no_comparison_instead_of_a_panic() {
        let (a, b) = ([1.0, 1.1, 0.9, 1.05], [1.2, 1.3, 1.25, 1.22]);
        for confidence in [2.474, 1.0, 0.0, -0.5, f64::NAN, f64::INFINITY] {
            let rules = Rules { confidence, ..Rules::default() };
            assert!(compare(&a, &b, Better::Lower, &rules).is_none(), "{confidence}");
        }
        let rules = Rules { resamples: 0, ..Rules::default() };
        assert!(compare(&a, &b, Better::Lower, &rules).is_none());
        assert!(compare(&a, &b, Better::Lower, &Rules::default()).is_some());
    }
}

#[cfg(test)]
mod session_tests {
    use super::*;

    /// `n` samples around `mean` with a ±1 % seeded spread.
    fn around(mean: f64, n: usize, seed: u64) -> Vec<f64> {
        let mut rng = Rng::new(seed);
        (0..n).map(|_| mean * (1.0 + 0.01 * (rng.uniform() - 0.5) * 2.0)).collect()
    }

    #[test]
    fn a_change_inside_the_between_session_spread_is_not_called_and_states_its_mde() {
        let rules = Rules::default();
        let (base, cand) = (around(100.0, 8, 1), around(90.0, 8, 2));
        // Within the sessions alone, a 10 % drop is a clear regression ...
        let within = compare(&base, &cand, Better::Higher, &rules).unwrap();
        assert_eq!(within.call, Call::Regression, "{}", within.why);
        assert!(within.within_interval.1 < -0.05, "{:?}", within.within_interval);
        // ... but not beyond the default spread between sessions: inconclusive, saying how small a change it sees.
        let b = Between::of_sessions(&[100.0], &rules);
        assert_eq!((b.source, b.spread), ("default", DEFAULT_BETWEEN_SESSION));
        let c = compare_sessions(&base, &cand, Better::Higher, &rules, Some(b)).unwrap();
        assert_eq!(c.call, Call::Inconclusive, "{}", c.why);
        assert_eq!(c.within_interval, within.within_interval, "the samples' own interval is kept");
        assert!(c.interval.0 < within.interval.0 && c.interval.1 > 0.0, "{:?}", c.interval);
        let mde = c.mde.unwrap();
        assert!(mde > 0.10 && mde > within.mde.unwrap() * 5.0, "MDE {mde}");
        assert!(c.why.contains("default ±20.0 % spread") && c.why.contains("could have seen a change of"), "{}", c.why);
        // A history of sessions that agree within 0.5 % measures a small spread: the same drop is called.
        let history = Between::of_sessions(&[100.0, 100.5, 99.8, 100.2], &rules);
        assert_eq!(history.source, "history");
        assert!(history.spread < 0.005, "{}", history.spread);
        let c = compare_sessions(&base, &cand, Better::Higher, &rules, Some(history)).unwrap();
        assert_eq!(c.call, Call::Regression, "{}", c.why);
        assert!(c.mde.unwrap() < 0.05, "{:?}", c.mde);
        // Two sessions are not yet a history.
        assert_eq!(Between::of_sessions(&[100.0, 100.1], &rules).source, "default");
    }

    /// Issue #30 item 3: against the 20 % default an unchanged re-run came out inconclusive (interval −55 … +61 %),
    /// so every stored comparison was useless. Sides that carry their own small spread (three sub-sessions each)
    /// give a narrow interval: the unchanged re-run is "no change", a 20 % slowdown a regression.
    #[test]
    fn a_small_measured_spread_decides_no_change_for_a_rerun_and_regression_for_a_slowdown() {
        let rules = Rules::default();
        let side = |means: &[f64]| Side::of_sub_sessions(means).unwrap();
        let (base, rerun, slow) = (around(100.0, 8, 1), around(100.0, 8, 2), around(80.0, 8, 3));
        let measured = Between::measured(side(&[100.0, 100.6, 99.7]), side(&[99.8, 100.3, 100.5]));
        assert_eq!((measured.source, measured.sessions), ("measured", 6));
        let c = compare_sessions(&base, &rerun, Better::Higher, &rules, Some(measured.clone())).unwrap();
        assert_eq!(c.call, Call::NoChange, "{}", c.why);
        assert!(c.interval.1 - c.interval.0 < 0.05, "{:?}", c.interval);
        assert!(c.mde.unwrap() < 0.05, "{:?}", c.mde);
        assert!(c.why.contains("measured spread between sub-sessions: ±0.5 % over 3 in the baseline"), "{}", c.why);
        let c = compare_sessions(&base, &slow, Better::Higher, &rules, Some(measured.clone())).unwrap();
        assert_eq!(c.call, Call::Regression, "{}", c.why);
        // The same re-run against the default: too wide to tell, and it says how many sessions would do.
        let default = Between::default_of(&rules, 1).noted("baseline from bench_version 9 carries no measured spread");
        let c = compare_sessions(&base, &rerun, Better::Higher, &rules, Some(default)).unwrap();
        assert_eq!(c.call, Call::Inconclusive, "{}", c.why);
        assert!(c.interval.1 - c.interval.0 > 0.5, "{:?}", c.interval);
        assert!(c.why.contains("default ±20.0 % spread between sessions: baseline from bench_version 9"), "{}", c.why);
        let n = sessions_needed(c.mde.unwrap(), TARGET_EFFECT).unwrap();
        assert!(n > 10, "{n}");
        assert!(c.why.contains(&format!("to detect 5 % it would need about {n} sessions")), "{}", c.why);
        // Few sub-sessions cost width: the same spreads over eight sub-sessions a side give a narrower interval.
        let many = Between::measured(
            Side { spread: measured.sides.unwrap().0.spread, sub_sessions: 8 },
            Side { spread: measured.sides.unwrap().1.spread, sub_sessions: 8 },
        );
        let wide = compare_sessions(&base, &rerun, Better::Higher, &rules, Some(measured)).unwrap();
        let narrow = compare_sessions(&base, &rerun, Better::Higher, &rules, Some(many)).unwrap();
        assert!(narrow.interval.1 - narrow.interval.0 < wide.interval.1 - wide.interval.0);
    }

    #[test]
    fn an_interval_wholly_beyond_the_noise_band_is_not_no_change_without_significance() {
        // Three steady samples a side cannot reach a Mann–Whitney p below 0.1, so a steady 4 % longer TPOT is not
        // shown; its narrow interval (under the 10 % width limit) lies wholly beyond the band all the same, and was
        // called "no change".
        let rules = Rules::default();
        let (base, slow) = ([1.000, 1.001, 0.999], [1.040, 1.041, 1.039]);
        let c = compare(&base, &slow, Better::Lower, &rules).unwrap();
        assert!(c.interval.0 > rules.noise_band && c.interval.1 - c.interval.0 < rules.max_interval, "{c:?}");
        assert!(c.p_value.unwrap() >= rules.alpha, "{c:?}");
        assert_eq!(c.call, Call::Inconclusive, "{}", c.why);
        assert!(c.why.contains("worse than the ±1.5 % noise band"), "{}", c.why);
        // Inside the band the same steadiness is "no change".
        let same = [1.0005, 1.0015, 0.9995];
        assert_eq!(compare(&base, &same, Better::Lower, &rules).unwrap().call, Call::NoChange);
    }

    #[test]
    fn the_batches_own_noise_is_taken_out_of_the_sub_sessions_spread() {
        // Five sub-sessions of four batches with no drift between them: the means still spread by the batches'
        // noise over two, which the raw spread counts as drift.
        let mut rng = Rng::new(9);
        let samples: Vec<f64> = (0..20).map(|_| 100.0 * (1.0 + 0.05 * rng.normal())).collect();
        let batches = [4u64; 5];
        let means: Vec<f64> = samples.chunks(4).map(|g| mean(g).unwrap()).collect();
        let raw = Side::of_sub_sessions(&means).unwrap();
        let own = Side::of_batches(&means, &samples, &batches).unwrap();
        assert!(raw.spread > 0.01 && own.spread < raw.spread / 2.0, "raw {raw:?}, own {own:?}");
        assert_eq!(own.sub_sessions, 5);
        // A real drift between sub-sessions (+0, +10, +20, … %) is kept: about its own size, 15.8 %.
        let drifted: Vec<f64> = samples.iter().enumerate().map(|(i, x)| x * (1.0 + 0.1 * (i / 4) as f64)).collect();
        let means: Vec<f64> = drifted.chunks(4).map(|g| mean(g).unwrap()).collect();
        let own = Side::of_batches(&means, &drifted, &batches).unwrap();
        assert!(own.spread > 0.10 && own.spread < 0.20, "{own:?}");
        // Samples that do not line up with the batches (merged, or a batch without the metric): the raw spread.
        let means = [99.0, 100.0, 101.0];
        let raw = Side::of_sub_sessions(&means).unwrap();
        assert_eq!(Side::of_batches(&means, &[99.0, 100.0, 101.0, 5.0], &[1, 1, 1]), Some(raw));
        assert_eq!(Side::of_batches(&means, &[99.0, 100.0, 101.0], &[1, 1, 1]), Some(raw), "no batch noise measured");
        assert_eq!(Side::of_batches(&[1.0, 2.0], &[1.0, 2.0], &[1, 1]), None, "too few sub-sessions");
    }

    #[test]
    fn a_side_needs_three_sub_sessions_and_a_finite_spread() {
        assert_eq!(Side::of_sub_sessions(&[1.0, 1.1]), None);
        assert_eq!(Side::of_sub_sessions(&[0.0, 0.0, 0.0]), None);
        let s = Side::of_sub_sessions(&[9.0, 10.0, 11.0]).unwrap();
        assert_eq!(s.sub_sessions, 3);
        assert!((s.spread - 0.1).abs() < 1e-12, "{}", s.spread);
    }

    #[test]
    fn student_quantiles_match_the_tables_and_sessions_needed_grow_with_the_square() {
        for (df, table) in [(2.0, 4.303), (4.0, 2.776), (10.0, 2.228), (1e9, 1.960)] {
            let t = student_quantile(0.975, df);
            assert!((t / table - 1.0).abs() < 0.01, "t({df}) = {t}, table {table}");
        }
        assert_eq!(sessions_needed(0.20, 0.05), Some(16));
        assert_eq!(sessions_needed(0.051, 0.05), Some(2));
        assert_eq!(sessions_needed(0.04, 0.05), None);
        assert_eq!(sessions_needed(f64::NAN, 0.05), None);
    }

    #[test]
    fn a_threefold_change_is_called_despite_the_default_spread() {
        let rules = Rules::default();
        let b = Some(Between::default_of(&rules, 1));
        let (base, slow) = (around(300.0, 4, 3), around(100.0, 4, 4));
        assert_eq!(compare_sessions(&base, &slow, Better::Higher, &rules, b.clone()).unwrap().call, Call::Regression);
        assert_eq!(compare_sessions(&slow, &base, Better::Higher, &rules, b).unwrap().call, Call::Improvement);
    }
}
