//! Paired A/B statistics: two servers measured in the same minutes, request by request, so that the drift of a
//! shared machine hits both members of a pair and cancels in their ratio.
//!
//! - Order: pair `i` runs A then B when `i` is even, B then A when odd (ABBA / BAAB blocks), the same prompt for
//!   both members, so that a trend within the run favours neither side.
//! - Per pair and metric, the log ratio `ln(B / A)`.
//! - Crossover analysis ([`blocks`]): pairs `2j` (A first) and `2j + 1` (B first) form a block. Whatever being
//!   the first request of a pair does to a metric (a hop that holds the first tokens of every other request, a
//!   cache that has the second answer ready) enters the two ratios of a block with opposite signs: the block's
//!   mean ratio cancels it, and half their difference estimates it ([`period_effect`]). The calls are made on the
//!   block means; an odd last pair has no partner and is left out of them (recorded, not analysed).
//! - Test: the two-sided Wilcoxon signed-rank test on the block means; zeros dropped (Wilcoxon's convention),
//!   tied magnitudes given their average rank. Exact (the distribution of the rank sum enumerated, ties included)
//!   up to [`EXACT_MAX`] non-zero values, normal approximation with tie and continuity correction above. With
//!   `n` blocks the smallest p is `2 / 2^n`: 4 blocks (8 pairs) cannot be significant at any useful level, 8 blocks
//!   (16 pairs) can, so a call of a change needs about 16 pairs; "no change" (an interval) can come earlier.
//! - Interval: a seeded percentile bootstrap of the median block mean, reported as a relative change `exp(x) − 1`.
//! - MDE: `power::minimum_detectable_effect` of the mean block mean's standard error (sample sd / √blocks), as a
//!   relative change.
//! - Sequential stopping: looks at a fixed schedule ([`looks`]: at block boundaries, the minimum number of pairs,
//!   then every [`LOOK_EVERY`] pairs, and the last pair). Each look tests at `alpha / looks` (Bonferroni), so the
//!   chance of a false call over all looks stays below `alpha`.
//! - Several metrics: a look's level is shared by the metrics the verdict rests on (the deciding ones,
//!   [`holm_levels`], Holm's step-down), so the chance that an unchanged twin has *any* deciding metric called
//!   stays below `alpha` too, not once per metric. A metric that does not decide is judged at the look's whole
//!   level and only reported. Each metric's interval is at one minus its own level.

use gauntlet_schema::Metric;
use gauntlet_schema::bench::{Better, Call};
pub use gauntlet_schema::paired::{Member, MetricVerdict, PairedRules, PeriodEffect};

use super::power::minimum_detectable_effect;
use super::stats::{self, Rng};

/// Above this many non-zero ratios the signed-rank p-value is the normal approximation.
pub const EXACT_MAX: usize = 60;
/// Pairs between two looks after the first.
pub const LOOK_EVERY: usize = 4;

/// The order of each pair: ABBA / BAAB blocks.
pub fn order(pairs: usize) -> Vec<[Member; 2]> {
    (0..pairs).map(|i| if i % 2 == 0 { [Member::A, Member::B] } else { [Member::B, Member::A] }).collect()
}

/// The pair counts at which the statistics are looked at, each at the end of a block: `min_pairs` (rounded up to a
/// whole block, at least one), then every [`LOOK_EVERY`] pairs, and `max_pairs`. An odd `max_pairs` is the last
/// look (its last pair measured, outside any block), and the look at the block before it is not repeated.
pub fn looks(min_pairs: usize, max_pairs: usize) -> Vec<usize> {
    let max = max_pairs.max(1);
    let whole = max - max % 2;
    let first = (min_pairs + min_pairs % 2).max(2).min(whole);
    let mut out: Vec<usize> = (first..whole).step_by(LOOK_EVERY).collect();
    out.push(max);
    out
}

/// One pair of one metric for the crossover analysis: its order and the `[A, B]` values (`None` where the metric
/// is missing on a side).
pub type PairValues = ([Member; 2], Option<[f64; 2]>);

/// A metric's ABBA blocks: pairs `2j` (A first) and `2j + 1` (B first), both with the metric.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Blocks {
    /// Per block, the mean of its two log ratios `ln(B / A)`: a first-versus-second effect cancels in it.
    pub means: Vec<f64>,
    /// Per block, half the difference of its two ratios: `ln(first / second)` averaged over its two pairs.
    pub period: Vec<f64>,
    /// Per block, first − second in the metric's own unit, averaged over its two pairs.
    pub difference: Vec<f64>,
    /// The per-pair log ratios of the pairs in the blocks, in order.
    pub pair_logs: Vec<f64>,
}

/// The complete blocks of a metric's pairs in run order: pairs `2j` and `2j + 1`, the first in A-B order and the
/// second in B-A order, both with a positive finite value on each side. A block missing either is left out whole
/// (its one ratio would carry the period effect uncancelled); so is an odd last pair.
pub fn blocks(series: &[PairValues]) -> Blocks {
    use Member::{A, B};
    let mut out = Blocks::default();
    let good = |v: &Option<[f64; 2]>| v.filter(|[a, b]| a.is_finite() && b.is_finite() && *a > 0.0 && *b > 0.0);
    for block in series.chunks_exact(2) {
        let (([A, B], first), ([B, A], second)) = (&block[0], &block[1]) else { continue };
        let (Some([a1, b1]), Some([a2, b2])) = (good(first), good(second)) else { continue };
        let (r1, r2) = ((b1 / a1).ln(), (b2 / a2).ln());
        out.means.push((r1 + r2) / 2.0);
        // A first in the first pair (first / second = A / B = −r1), B first in the second (B / A = r2).
        out.period.push((r2 - r1) / 2.0);
        out.difference.push(((a1 - b1) + (b2 - a2)) / 2.0);
        out.pair_logs.extend([r1, r2]);
    }
    out
}

/// Judges one metric on its blocks ([`judge`] of the block means), saying how many blocks and both spreads.
pub fn judge_blocks(
    metric: &str,
    blocks: &Blocks,
    better: Better,
    rules: &PairedRules,
    alpha_look: f64,
    deciding: bool,
) -> Option<MetricVerdict> {
    let mut v = judge(metric, &blocks.means, better, rules, alpha_look)?;
    v.pairs = blocks.pair_logs.len();
    v.blocks = blocks.means.len();
    v.deciding = deciding;
    v.pair_sd = stats::std_sample(&blocks.pair_logs);
    v.block_sd = stats::std_sample(&blocks.means);
    Some(v)
}

/// The period effect of one metric from its blocks' half-differences: its median as a relative change of the
/// first request of a pair against the second, a bootstrap interval at `1 − alpha`, the signed-rank p, and
/// whether it is large, then with a sentence. `None` without a block.
///
/// Large: the whole interval beyond the equivalence margin, and the blocks showing it, by a signed-rank p below
/// `alpha` or, where there are too few blocks for that (four reach no p below 2/16), by a Student t interval of
/// their mean at the same confidence also wholly beyond the margin. The bootstrap alone is not enough: over a few
/// blocks it resamples those few values, so four noisy blocks that happen to lean one way give it an interval
/// beyond the margin; t's tails at n − 1 degrees of freedom pay for the few blocks and for their spread, so a
/// hop's steady 40 ms is still named at four blocks and a lean of noise is not.
pub fn period_effect(metric: &str, blocks: &Blocks, better: Better, rules: &PairedRules) -> Option<PeriodEffect> {
    if blocks.period.is_empty() || blocks.period.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let confidence = 1.0 - rules.alpha;
    let median = stats::percentile(&blocks.period, 0.5)?;
    let (lo, hi) = median_interval(&blocks.period, rules.resamples, confidence, rules.seed)?;
    let interval = (lo.exp_m1(), hi.exp_m1());
    let change = median.exp_m1();
    let difference = stats::percentile(&blocks.difference, 0.5);
    let p_value = signed_rank_p(&blocks.period);
    let beyond = |(lo, hi): (f64, f64)| lo > rules.equivalence || hi < -rules.equivalence;
    let shown = p_value.is_some_and(|p| p < rules.alpha) || t_interval(&blocks.period, confidence).is_some_and(beyond);
    let large = beyond(interval) && shown;
    Some(PeriodEffect {
        metric: metric.into(),
        blocks: blocks.period.len(),
        change,
        interval,
        confidence,
        difference,
        p_value,
        large,
        sentence: large.then(|| period_sentence(metric, better, change, difference)),
    })
}

/// The Student t interval at `confidence` of the mean of `logs` (log ratios), as relative changes; `None` below two
/// values or without a spread.
fn t_interval(logs: &[f64], confidence: f64) -> Option<(f64, f64)> {
    let n = logs.len();
    let (mean, sd) = (stats::mean(logs)?, stats::std_sample(logs)?);
    if n < 2 || !sd.is_finite() {
        return None;
    }
    let half = stats::student_quantile((1.0 + confidence) / 2.0, (n - 1) as f64) * sd / (n as f64).sqrt();
    Some(((mean - half).exp_m1(), (mean + half).exp_m1()))
}

/// "the first request of each pair is 35 ms slower to its first token (+410 %): …", for a large period effect.
fn period_sentence(metric: &str, better: Better, change: f64, difference: Option<f64>) -> String {
    let pct = format!("{:+.0} %", change * 100.0);
    let ms = |d: f64| {
        let ms = d.abs() * 1000.0;
        if ms < 10.0 { format!("{ms:.1} ms") } else { format!("{ms:.0} ms") }
    };
    // Whether the first request of a pair comes off worse on this metric.
    let first_worse = match better {
        Better::Lower => change > 0.0,
        Better::Higher => change < 0.0,
    };
    let what = match (metric, better) {
        (_, Better::Higher) => {
            let rate = difference.map_or(String::new(), |d| format!(", {:+.1} per second", d));
            let way = if change > 0.0 { "faster" } else { "slower" };
            format!("decodes {:.0} % {way} ({pct}{rate})", change.abs() * 100.0)
        }
        (m, Better::Lower) => {
            let way = if change > 0.0 { "slower" } else { "faster" };
            let tail = match Metric::from_paired_key(m) {
                Some(Metric::TtftMean) => " to its first token",
                Some(Metric::E2elMean) => " end to end",
                Some(Metric::TpotMean) => " per output token",
                _ => "",
            };
            match difference {
                Some(d) => format!("is {} {way}{tail} ({pct})", ms(d)),
                None => format!("is {:.0} % {way}{tail}", change.abs() * 100.0),
            }
        }
    };
    let cause = match (first_worse, better) {
        (true, _) => {
            "typical of a buffering hop (small writes held against delayed ACKs) or of a cache that has \
                      the second answer ready"
        }
        (false, Better::Higher) => {
            "typical of a hop that holds the first tokens and then bursts them, which \
                                    shortens the decode measured from the first token"
        }
        (false, Better::Lower) => "the second request of a pair waits on something the first left behind",
    };
    format!(
        "the first request of each pair {what}, whichever member it is: {cause}; the crossover analysis cancels it \
         from B against A"
    )
}

/// Holm's step-down levels for p-values tested together at family level `alpha`: the smallest p is tested at
/// `alpha / m`, the next at `alpha / (m − 1)`, and so on; once one is not below its level, each after it gets that
/// same level (it cannot be below it either). A missing p (nothing to rank) sorts last and counts in `m`.
pub fn holm_levels(p_values: &[Option<f64>], alpha: f64) -> Vec<f64> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&i, &j| p_values[i].unwrap_or(f64::INFINITY).total_cmp(&p_values[j].unwrap_or(f64::INFINITY)));
    let mut levels = vec![alpha; m];
    let mut held: Option<f64> = None;
    for (rank, &i) in order.iter().enumerate() {
        let level = held.unwrap_or(alpha / (m - rank) as f64);
        levels[i] = level;
        if held.is_none() && !p_values[i].is_some_and(|p| p < level) {
            held = Some(level);
        }
    }
    levels
}

/// Two-sided p-value of the Wilcoxon signed-rank test that the differences are symmetric about zero. `None` when
/// no difference is non-zero (or one is not a number): there is nothing to rank.
pub fn signed_rank_p(differences: &[f64]) -> Option<f64> {
    if differences.iter().any(|d| !d.is_finite()) {
        return None;
    }
    let mut d: Vec<f64> = differences.iter().copied().filter(|x| *x != 0.0).collect();
    if d.is_empty() {
        return None;
    }
    d.sort_by(|x, y| x.abs().total_cmp(&y.abs()));
    let n = d.len();
    // Doubled ranks are integers even for average ranks of ties: rank of i..=j (0-based) is (i + j) / 2 + 1.
    let mut doubled = vec![0usize; n];
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && d[j + 1].abs() == d[i].abs() {
            j += 1;
        }
        for r in &mut doubled[i..=j] {
            *r = i + j + 2;
        }
        let t = (j - i + 1) as f64;
        tie_term += t.powi(3) - t;
        i = j + 1;
    }
    let plus: usize = d.iter().zip(&doubled).filter(|(x, _)| **x > 0.0).map(|(_, r)| r).sum();
    if n <= EXACT_MAX {
        let ways = sign_patterns(&doubled);
        let all: f64 = ways.iter().sum();
        return Some(two_sided(ways[..=plus].iter().sum(), ways[plus..].iter().sum(), all));
    }
    let nf = n as f64;
    let w = plus as f64 / 2.0;
    let mean = nf * (nf + 1.0) / 4.0;
    let variance = nf * (nf + 1.0) * (2.0 * nf + 1.0) / 24.0 - tie_term / 48.0;
    if variance <= 0.0 {
        return None;
    }
    let z = ((w - mean).abs() - 0.5).max(0.0) / variance.sqrt();
    Some((2.0 * stats::normal_sf(z)).clamp(0.0, 1.0))
}

/// The number of sign patterns of `doubled` (doubled ranks) giving each doubled positive-rank sum, as f64 (2^60 is
/// exact enough here): the signed-rank statistic's exact null distribution.
fn sign_patterns(doubled: &[usize]) -> Vec<f64> {
    let total: usize = doubled.iter().sum();
    let mut ways = vec![0.0f64; total + 1];
    ways[0] = 1.0;
    for &r in doubled {
        for s in (r..=total).rev() {
            ways[s] += ways[s - r];
        }
    }
    ways
}

/// The two-sided exact p of a rank sum from the patterns at or below it (`low`) and at or above it (`high`).
fn two_sided(low: f64, high: f64, all: f64) -> f64 {
    (2.0 * low.min(high) / all).min(1.0)
}

/// The chance that `n` contrasts of an unchanged pair of servers give a two-sided signed-rank p below `level`:
/// exact over the 2^n equally likely sign patterns of the ranks 1..=n (the test's null, no ties) up to
/// [`EXACT_MAX`] contrasts, `level` itself above (the normal approximation's nominal size). 0 for no contrast.
pub fn null_tail(n: usize, level: f64) -> f64 {
    if n == 0 {
        return 0.0;
    }
    if n > EXACT_MAX {
        return level.clamp(0.0, 1.0);
    }
    let doubled: Vec<usize> = (1..=n).map(|r| 2 * r).collect();
    let ways = sign_patterns(&doubled);
    let all: f64 = ways.iter().sum();
    let mut below = 0.0;
    let mut tail = 0.0;
    for &here in &ways {
        let low = below + here;
        if here > 0.0 && two_sided(low, all - below, all) < level {
            tail += here;
        }
        below = low;
    }
    tail / all
}

/// The most often an unchanged twin has any deciding metric called a regression over the looks of `schedule`
/// (pairs at each look), `deciding` metrics sharing each look's level `alpha / looks` by Holm's step-down: at a
/// look Holm rejects nothing unless the smallest deciding p is below `alpha / looks / deciding`; each metric's p is
/// below that with at most [`null_tail`] chance over its blocks (or fewer, where some were left out), half of it
/// on the side of a regression (an unchanged twin's block contrasts are symmetric about zero); summed over the
/// metrics and the looks. A union bound, so it holds however the metrics correlate and the looks depend on each
/// other; distribution-free, so it holds whatever the spread or shape of the noise, as long as the block contrasts
/// are independent and symmetric about zero. A call also needs the interval wholly beyond the noise band, which
/// only lowers the chance.
pub fn false_regression_bound(schedule: &[usize], alpha: f64, deciding: usize) -> f64 {
    if schedule.is_empty() || deciding == 0 {
        return 0.0;
    }
    let level = alpha / schedule.len() as f64 / deciding as f64;
    // The level is the same at every look: each block count's tail once, then the most any count up to a look's
    // blocks gives (`most[n]`).
    let blocks = schedule.iter().max().map_or(0, |p| p / 2);
    let mut most = vec![0.0f64; blocks + 1];
    for n in 1..=blocks {
        most[n] = most[n - 1].max(null_tail(n, level));
    }
    let sum: f64 = schedule.iter().map(|&pairs| deciding as f64 * 0.5 * most[pairs / 2]).sum();
    sum.min(1.0)
}

/// Seeded percentile-bootstrap interval of the median of `values` at `confidence`.
pub fn median_interval(values: &[f64], resamples: usize, confidence: f64, seed: u64) -> Option<(f64, f64)> {
    if values.is_empty() || resamples == 0 {
        return None;
    }
    let mut rng = Rng::new(seed);
    let n = values.len();
    let mut medians: Vec<f64> = (0..resamples)
        .map(|_| {
            let sample: Vec<f64> = (0..n).map(|_| values[rng.index(n)]).collect();
            stats::percentile(&sample, 0.5).unwrap_or(0.0)
        })
        .collect();
    medians.sort_by(f64::total_cmp);
    let tail = (1.0 - confidence) / 2.0;
    Some((stats::percentile(&medians, tail)?, stats::percentile(&medians, 1.0 - tail)?))
}

/// Judges one metric from its contrasts (the block means of `ln(B / A)`, or any log ratios), testing at
/// `alpha_look`. `None` without a contrast.
pub fn judge(
    metric: &str,
    logs: &[f64],
    better: Better,
    rules: &PairedRules,
    alpha_look: f64,
) -> Option<MetricVerdict> {
    if logs.is_empty() || logs.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let confidence = 1.0 - alpha_look;
    let median = stats::percentile(logs, 0.5)?;
    let (lo, hi) = median_interval(logs, rules.resamples, confidence, rules.seed)?;
    let interval = (lo.exp_m1(), hi.exp_m1());
    let p_value = signed_rank_p(logs);
    let se = stats::std_sample(logs).map(|s| s / (logs.len() as f64).sqrt());
    let mde = se.and_then(minimum_detectable_effect).map(f64::exp_m1);
    let significant = p_value.is_some_and(|p| p < alpha_look);
    let (worse_lo, worse_hi) = match better {
        Better::Lower => interval,
        Better::Higher => (-interval.1, -interval.0),
    };
    let pct = |x: f64| x * 100.0;
    let p_text = p_value.map_or("p undefined (every pair equal)".to_owned(), |p| format!("p = {p:.4}"));
    let (call, why) = if worse_lo > rules.noise_band && significant {
        let why = format!(
            "the whole interval is worse than the ±{:.1} % noise band and {p_text} < {alpha_look:.4}",
            pct(rules.noise_band)
        );
        (Call::Regression, why)
    } else if worse_hi < -rules.noise_band && significant {
        let why = format!(
            "the whole interval is better than the ±{:.1} % noise band and {p_text} < {alpha_look:.4}",
            pct(rules.noise_band)
        );
        (Call::Improvement, why)
    } else if worse_lo > rules.noise_band || worse_hi < -rules.noise_band {
        // A change the interval places wholly beyond the noise band is not "no change" because it is also within
        // the margin (a steady −4.8 % at four blocks, whose p cannot yet reach the look's level): it stays open,
        // so that a later look can call it.
        let side = if worse_lo > rules.noise_band { "worse" } else { "better" };
        let why = format!(
            "the whole interval is {side} than the ±{:.1} % noise band but {p_text} is not below {alpha_look:.4}: \
             a change not yet shown",
            pct(rules.noise_band)
        );
        (Call::Inconclusive, why)
    } else if interval.0 >= -rules.equivalence && interval.1 <= rules.equivalence {
        (Call::NoChange, format!("the whole interval lies within ±{:.1} % ({p_text})", pct(rules.equivalence)))
    } else {
        let why = format!(
            "neither a significant change beyond ±{:.1} % nor an interval within ±{:.1} % ({p_text})",
            pct(rules.noise_band),
            pct(rules.equivalence)
        );
        (Call::Inconclusive, why)
    };
    Some(MetricVerdict {
        metric: metric.into(),
        better,
        pairs: logs.len(),
        median_change: median.exp_m1(),
        interval,
        confidence,
        p_value,
        alpha: alpha_look,
        mde,
        call,
        why,
        blocks: 0,
        deciding: true,
        pair_sd: None,
        block_sd: None,
    })
}

/// Whether to stop after `done` pairs: at a look where every deciding metric is decided, or at the last look.
pub fn stop_after(done: usize, schedule: &[usize], verdicts: &[MetricVerdict]) -> bool {
    if schedule.last().is_some_and(|last| done >= *last) {
        return true;
    }
    let mut deciding = verdicts.iter().filter(|v| v.deciding).peekable();
    schedule.contains(&done) && deciding.peek().is_some() && deciding.all(|v| v.call != Call::Inconclusive)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holm_levels_step_down_and_hold_after_the_first_p_not_below_its_level() {
        let levels = holm_levels(&[Some(0.01), Some(0.04), Some(0.03), Some(0.005)], 0.05);
        // Sorted: 0.005 at 0.05/4 (below), 0.01 at 0.05/3 (below), 0.03 at 0.05/2 (not below: held), 0.04 held.
        assert_eq!(levels, vec![0.05 / 3.0, 0.025, 0.025, 0.0125]);
        // A missing p sorts last and still counts in m.
        assert_eq!(holm_levels(&[None, Some(0.001)], 0.05), vec![0.05, 0.025]);
        // One metric: its own level.
        assert_eq!(holm_levels(&[Some(0.5)], 0.05), vec![0.05]);
        // The flake that asked for this: an unchanged twin's TTFT at p = 0.0156 with three quiet metrics, at a look
        // of alpha 0.05 / 3. Alone it was called; shared by four metrics its level is a quarter of that.
        let levels = holm_levels(&[Some(0.6), Some(0.0156), Some(0.4), Some(0.9)], 0.05 / 3.0);
        assert!(0.0156 > levels[1] && (levels[1] - 0.05 / 12.0).abs() < 1e-15, "{levels:?}");
        assert!(levels.iter().all(|l| *l == levels[1]), "held after the first: {levels:?}");
    }

    #[test]
    fn signed_rank_p_values_match_the_exact_distribution() {
        // Five positive differences: the most extreme of 2^5 sign patterns on each side, p = 2/32.
        assert_eq!(signed_rank_p(&[1.0, 2.0, 3.0, 4.0, 5.0]), Some(0.0625));
        // n = 8, negatives at ranks 1 and 2: W- = 3; five of 256 patterns have W- ≤ 3, p = 10/256.
        assert_eq!(signed_rank_p(&[-0.1, -0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]), Some(0.0390625));
        // The sign does not matter, nor a zero (dropped).
        assert_eq!(signed_rank_p(&[0.0, 0.1, 0.2, -0.3, -0.4, -0.5, -0.6, -0.7, -0.8]), Some(0.0390625));
        // Ties: |d| = 1, 1, 1, 2, 3 have ranks 2, 2, 2, 4, 5; one negative at rank 2: four of 32 patterns have
        // W- ≤ 2, p = 8/32.
        assert_eq!(signed_rank_p(&[1.0, 1.0, -1.0, 2.0, 3.0]), Some(0.25));
        // Balanced: p = 1.
        assert_eq!(signed_rank_p(&[1.0, -1.0]), Some(1.0));
        assert_eq!(signed_rank_p(&[0.0, 0.0]), None);
        assert_eq!(signed_rank_p(&[]), None);
        assert_eq!(signed_rank_p(&[1.0, f64::NAN]), None);
    }

    #[test]
    fn null_tail_counts_the_sign_patterns_whose_p_is_below_the_level() {
        // Every sign pattern of the ranks 1..=n, judged by the test itself.
        for n in 1..=12usize {
            for level in [0.002, 0.00625, 0.0125, 0.05, 0.2] {
                let below = (0u32..1 << n)
                    .filter(|signs| {
                        let d: Vec<f64> =
                            (1..=n).map(|r| if signs >> (r - 1) & 1 == 1 { r as f64 } else { -(r as f64) }).collect();
                        signed_rank_p(&d).unwrap() < level
                    })
                    .count();
                let exact = below as f64 / f64::from(1u32 << n);
                assert!((null_tail(n, level) - exact).abs() < 1e-12, "n {n}, level {level}: {exact}");
            }
        }
        assert_eq!(null_tail(0, 0.05), 0.0);
        // Four blocks cannot reach p below 2/16; ten reach 2/1024.
        assert_eq!(null_tail(4, 0.1), 0.0);
        assert!((null_tail(10, 0.00625) - 6.0 / 1024.0).abs() < 1e-12);
        assert_eq!(null_tail(EXACT_MAX + 1, 0.01), 0.01);
    }

    #[test]
    fn the_default_schedule_calls_an_unchanged_twin_a_regression_less_than_one_time_in_a_hundred() {
        // 20 pairs, looks at 8, 12, 16 and 20 (alpha 0.05 / 4 each), decode and E2EL deciding: only the look at
        // 20 pairs (10 blocks) can reach Holm's first level 0.00625, with 6 of 1024 sign patterns, half of them
        // on the side of a regression, for each of the two metrics.
        let schedule = looks(8, 20);
        assert_eq!(schedule, [8, 12, 16, 20]);
        let alpha = PairedRules::default().alpha;
        let two = false_regression_bound(&schedule, alpha, 2);
        assert!((two - 6.0 / 1024.0).abs() < 1e-12, "{two}");
        let three = false_regression_bound(&schedule, alpha, 3);
        assert!(two < 0.01 && three < 0.01, "{two} {three}");
        // One deciding metric at a single look is the test's own size on one side: at most alpha / 2.
        let one = false_regression_bound(&[20], alpha, 1);
        assert!(one <= alpha / 2.0 && one > 0.0, "{one}");
        // More looks at more pairs: still bounded, never above 1.
        let long = false_regression_bound(&looks(8, 400), alpha, 3);
        assert!(long > 0.0 && long <= alpha / 2.0 + 1e-12, "{long}");
        assert_eq!(false_regression_bound(&[], alpha, 2), 0.0);
        assert_eq!(false_regression_bound(&schedule, alpha, 0), 0.0);
    }

    #[test]
    fn signed_rank_p_uses_the_normal_approximation_for_many_pairs() {
        // n = 70 > EXACT_MAX, negatives at ranks 1..=20: W- = 210, mean 1242.5, variance 70·71·141/24.
        let d: Vec<f64> = (1..=70).map(|i| if i <= 20 { -(i as f64) } else { i as f64 }).collect();
        let (mean, var): (f64, f64) = (1242.5, 70.0 * 71.0 * 141.0 / 24.0);
        let z = (mean - 210.0 - 0.5) / var.sqrt();
        let p = signed_rank_p(&d).unwrap();
        assert!((p - 2.0 * stats::normal_sf(z)).abs() < 1e-12, "{p}");
        // Against a value computed independently (erfc): n = 60 would be exact, so check the formula's z = 5.18625
        // at n = 60 by hand instead: 2.1457e-7.
        let z60 = (915.0 - 210.0 - 0.5) / (60.0f64 * 61.0 * 121.0 / 24.0).sqrt();
        assert!((2.0 * stats::normal_sf(z60) - 2.1457e-7).abs() < 2e-9);
        // Near the boundary, exact and approximate agree to a few thousandths.
        let d60: Vec<f64> = (1..=60).map(|i| if i % 3 == 0 { -(i as f64) } else { i as f64 }).collect();
        let exact = signed_rank_p(&d60).unwrap();
        let n = 60.0f64;
        let w: f64 = (1..=60).filter(|i| i % 3 != 0).map(|i| i as f64).sum();
        let z = ((w - n * (n + 1.0) / 4.0).abs() - 0.5) / (n * (n + 1.0) * (2.0 * n + 1.0) / 24.0).sqrt();
        assert!((exact - 2.0 * stats::normal_sf(z)).abs() < 0.005, "{exact}");
    }

    #[test]
    fn bootstrap_interval_of_the_median_is_determined_by_its_seed() {
        let v: Vec<f64> = (0..15).map(|i| ((i * 7) % 11) as f64 / 100.0).collect();
        let a = median_interval(&v, 2000, 0.95, 7).unwrap();
        assert_eq!(a, median_interval(&v, 2000, 0.95, 7).unwrap(), "the same seed, the same interval");
        assert_ne!(a, median_interval(&v, 2000, 0.5, 7).unwrap());
        let median = stats::percentile(&v, 0.5).unwrap();
        assert!(a.0 <= median && median <= a.1, "{a:?} around {median}");
        assert!(a.0 >= 0.0 && a.1 <= 0.10, "within the data: {a:?}");
        assert_eq!(median_interval(&[], 10, 0.95, 1), None);
    }

    #[test]
    fn pairs_alternate_in_abba_blocks() {
        use Member::{A, B};
        assert_eq!(order(4), vec![[A, B], [B, A], [A, B], [B, A]]);
        let flat: Vec<Member> = order(6).into_iter().flatten().collect();
        assert_eq!(flat.iter().filter(|m| **m == A).count(), 6);
        // Each member runs first as often as second: no position favours a side.
        assert_eq!(order(6).iter().filter(|p| p[0] == A).count(), 3);
    }

    fn noisy(n: usize, shift: f64, seed: u64) -> Vec<f64> {
        let mut rng = Rng::new(seed);
        (0..n).map(|_| shift + 0.01 * rng.normal()).collect()
    }

    #[test]
    fn calls_a_clear_regression_an_equivalence_and_says_its_mde() {
        let rules = PairedRules::default();
        // B's decode 12 % slower, 1 % noise per pair, 8 pairs at alpha 0.05.
        let slow = noisy(8, (0.88f64).ln(), 3);
        let v = judge("decode", &slow, Better::Higher, &rules, 0.05).unwrap();
        assert_eq!(v.call, Call::Regression, "{v:?}");
        assert!(v.p_value.unwrap() < 0.01 && (v.median_change + 0.12).abs() < 0.02, "{v:?}");
        let mde = v.mde.unwrap();
        assert!(mde > 0.0 && mde < 0.03, "{v:?}");
        // The same on a lower-is-better metric is an improvement.
        assert_eq!(judge("ttft", &slow, Better::Lower, &rules, 0.05).unwrap().call, Call::Improvement);
        // Unchanged: the interval lies within ±5 %.
        let same = noisy(8, 0.0, 4);
        let v = judge("decode", &same, Better::Higher, &rules, 0.05).unwrap();
        assert_eq!(v.call, Call::NoChange, "{v:?}");
        // Too noisy to tell.
        let mut rng = Rng::new(5);
        let wild: Vec<f64> = (0..8).map(|_| 0.3 * rng.normal()).collect();
        assert_eq!(judge("decode", &wild, Better::Higher, &rules, 0.05).unwrap().call, Call::Inconclusive);
        // Exactly eight positive ratios give p = 2/256: not enough at a stricter per-look level.
        let v = judge("decode", &slow, Better::Higher, &rules, 0.005).unwrap();
        assert_eq!(v.call, Call::Inconclusive, "{v:?}");
        assert_eq!(judge("x", &[], Better::Lower, &rules, 0.05), None);
    }

    #[test]
    fn a_steady_change_inside_the_margin_is_not_called_no_change_before_it_can_be_shown() {
        // The H100 lone-lane trial that asked for this: a 5 % longer token (decode −4.8 %) measured so steadily
        // that four blocks gave an interval within ±5 %, where four blocks cannot reach any p below 2/16; it was
        // called "no change" at the first look and the bench stopped.
        let rules = PairedRules::default();
        let alpha = rules.alpha / 4.0;
        let mut rng = Rng::new(21);
        let logs: Vec<f64> = (0..10).map(|_| (1.0f64 / 1.05).ln() + 0.002 * rng.normal()).collect();
        let early = judge("decode", &logs[..4], Better::Higher, &rules, alpha).unwrap();
        assert!(early.interval.0 > -rules.equivalence && early.interval.1 < -rules.noise_band, "{early:?}");
        assert_eq!(early.call, Call::Inconclusive, "{early:?}");
        assert!(early.why.contains("worse than the ±1.5 % noise band"), "{}", early.why);
        assert!(!stop_after(8, &[8, 12, 16, 20], &[early]), "the bench goes on to the next look");
        // Ten blocks show it.
        let late = judge("decode", &logs, Better::Higher, &rules, alpha).unwrap();
        assert_eq!(late.call, Call::Regression, "{late:?}");
        // The same steadiness without a change, or a change inside the noise band, is still "no change".
        let same: Vec<f64> = logs.iter().map(|x| x - (1.0f64 / 1.05).ln() - 0.01).collect();
        assert_eq!(judge("decode", &same[..4], Better::Higher, &rules, alpha).unwrap().call, Call::NoChange);
    }

    #[test]
    fn sequential_stopping_looks_on_a_schedule_and_stops_once_decided() {
        assert_eq!(looks(8, 20), vec![8, 12, 16, 20]);
        assert_eq!(looks(8, 8), vec![8]);
        assert_eq!(looks(8, 5), vec![5]);
        assert_eq!(looks(6, 9), vec![6, 9]);
        // At block boundaries: an odd minimum rounds up; an odd last pair is the last look, the block before it
        // not looked at twice.
        assert_eq!(looks(7, 20), vec![8, 12, 16, 20]);
        assert_eq!(looks(8, 9), vec![9]);
        assert_eq!(looks(8, 13), vec![8, 13]);
        assert_eq!(looks(1, 1), vec![1]);
        let rules = PairedRules::default();
        let run = |shift: f64, noise: f64, max: usize| -> usize {
            let schedule = looks(8, max);
            let alpha = rules.alpha / schedule.len() as f64;
            let mut rng = Rng::new(11);
            let mut logs = Vec::new();
            loop {
                logs.push(shift + noise * rng.normal());
                let v = judge("decode", &logs, Better::Higher, &rules, alpha).unwrap();
                if stop_after(logs.len(), &schedule, &[v]) {
                    return logs.len();
                }
            }
        };
        assert_eq!(run(-0.2, 0.01, 20), 8, "a 20 % slowdown is decided at the first look");
        assert_eq!(run(0.0, 0.3, 20), 20, "noise runs to the last pair");
        // Stopping never happens between looks, nor with an undecided metric.
        let undecided = judge("x", &[0.3, -0.3, 0.2], Better::Higher, &rules, 0.05).unwrap();
        assert!(!stop_after(8, &[8, 12], std::slice::from_ref(&undecided)));
        assert!(stop_after(12, &[8, 12], &[undecided]));
        let decided = judge("x", &noisy(9, 0.0, 1), Better::Higher, &rules, 0.05).unwrap();
        assert!(!stop_after(9, &[8, 12], std::slice::from_ref(&decided)), "9 is not a look");
        assert!(stop_after(8, &[8, 12], &[decided]));
    }

    /// `n` pairs in ABBA order of a metric whose value is 100 on A and `100 · e^shift` on B, each times its own
    /// noise, with the first request of each pair `first` times the second's (a period effect), plus `first_add`.
    fn crossover(n: usize, shift: f64, noise: f64, first: f64, first_add: f64, seed: u64) -> Vec<PairValues> {
        let mut rng = Rng::new(seed);
        order(n)
            .into_iter()
            .map(|o| {
                let (mut a, mut b) =
                    (100.0 * (noise * rng.normal()).exp(), 100.0 * (shift + noise * rng.normal()).exp());
                match o[0] {
                    Member::A => a = a * first + first_add,
                    Member::B => b = b * first + first_add,
                }
                (o, Some([a, b]))
            })
            .collect()
    }

    #[test]
    fn blocks_cancel_a_first_versus_second_effect_and_estimate_it() {
        let rules = PairedRules::default();
        // An unchanged twin whose first request of each pair decodes 22 % faster (a hop that bursts its held
        // tokens), 2 % noise per request, 20 pairs: the shape (pair sd 0.233, block sd 0.046 on the GPU).
        let series = crossover(20, 0.0, 0.02, 1.22, 0.0, 21);
        let b = blocks(&series);
        assert_eq!(b.means.len(), 10);
        let pair_sd = stats::std_sample(&b.pair_logs).unwrap();
        let block_sd = stats::std_sample(&b.means).unwrap();
        eprintln!("synthetic +22 % period effect: sd {pair_sd:.4} per pair, {block_sd:.4} per block");
        assert!(pair_sd > 0.18 && block_sd < 0.03, "pair sd {pair_sd}, block sd {block_sd}");
        // Pair by pair the effect is noise and the twin cannot be told unchanged; per block it is, at the level of
        // the last of four looks shared by two deciding metrics.
        let level = 0.05 / 4.0 / 2.0;
        let alone = judge("decode", &b.pair_logs, Better::Higher, &rules, level).unwrap();
        assert_eq!(alone.call, Call::Inconclusive, "{alone:?}");
        let v = judge_blocks("decode", &b, Better::Higher, &rules, level, true).unwrap();
        assert_eq!(v.call, Call::NoChange, "{v:?}");
        assert_eq!((v.pairs, v.blocks, v.deciding), (20, 10, true));
        assert_eq!((v.pair_sd, v.block_sd), (Some(pair_sd), Some(block_sd)));
        assert!(v.mde.unwrap() < alone.mde.unwrap() / 4.0, "{v:?} against {alone:?}");
        // The period effect: +22 % on the first request, large, in words.
        let e = period_effect("decode_tokens_per_second", &b, Better::Higher, &rules).unwrap();
        assert!((e.change - 0.22).abs() < 0.03 && e.large && e.blocks == 10, "{e:?}");
        assert!(e.interval.0 > 0.15 && e.interval.1 < 0.30, "{e:?}");
        let sentence = e.sentence.unwrap();
        assert!(
            sentence.starts_with("the first request of each pair decodes 2") && sentence.contains("faster"),
            "{sentence}"
        );
        // A real 10 % slowdown under the same period effect is still called, at 20 pairs.
        let slow = blocks(&crossover(20, (0.9f64).ln(), 0.02, 1.22, 0.0, 22));
        let v = judge_blocks("decode", &slow, Better::Higher, &rules, level, true).unwrap();
        assert_eq!(v.call, Call::Regression, "{v:?}");
        assert!((v.median_change + 0.10).abs() < 0.02, "{v:?}");
        // Without a period effect the period is small and says nothing.
        let quiet = blocks(&crossover(20, 0.0, 0.02, 1.0, 0.0, 23));
        let e = period_effect("decode_tokens_per_second", &quiet, Better::Higher, &rules).unwrap();
        assert!(!e.large && e.sentence.is_none() && e.change.abs() < 0.02, "{e:?}");
    }

    /// Four blocks (8 pairs, a bench that stopped at its first look) whose first requests all happen to be slower,
    /// by 6, 8, 20 and 30 %: the bootstrap of their median lies beyond the ±5 % margin, but four blocks one way are
    /// p = 2/16 and their t interval reaches below the margin, so no period effect is named. Four blocks of a
    /// steady 8 % (1 % apart) are.
    #[test]
    fn a_lean_of_four_noisy_blocks_is_not_named_a_period_effect_and_four_steady_ones_are() {
        let rules = PairedRules::default();
        let of = |period: &[f64]| Blocks {
            means: vec![0.0; period.len()],
            period: period.iter().map(|x: &f64| x.ln_1p()).collect(),
            difference: period.to_vec(),
            pair_logs: vec![0.0; 2 * period.len()],
        };
        let e = period_effect("ttft", &of(&[0.06, 0.08, 0.20, 0.30]), Better::Lower, &rules).unwrap();
        assert!(e.interval.0 > rules.equivalence, "the bootstrap alone would name it: {e:?}");
        assert_eq!(e.p_value, Some(0.125));
        assert!(!e.large && e.sentence.is_none(), "{e:?}");
        let e = period_effect("ttft", &of(&[0.075, 0.08, 0.085, 0.08]), Better::Lower, &rules).unwrap();
        assert!(e.large && e.sentence.is_some(), "{e:?}");
    }

    #[test]
    fn a_held_first_token_is_named_in_milliseconds() {
        let rules = PairedRules::default();
        // TTFT of 10 ms (values in seconds), the first request of each pair 40 ms later.
        let series: Vec<PairValues> = crossover(12, 0.0, 0.05, 1.0, 0.0, 5)
            .into_iter()
            .map(|(o, v)| {
                let [a, b] = v.unwrap().map(|x| x / 10_000.0);
                let (a, b) = if o[0] == Member::A { (a + 0.040, b) } else { (a, b + 0.040) };
                (o, Some([a, b]))
            })
            .collect();
        let b = blocks(&series);
        let e = period_effect("ttft", &b, Better::Lower, &rules).unwrap();
        assert!(e.large && (e.difference.unwrap() - 0.040).abs() < 0.002, "{e:?}");
        let sentence = e.sentence.unwrap();
        assert!(
            sentence.contains("is 40 ms slower to its first token") && sentence.contains("buffering hop"),
            "{sentence}"
        );
        assert!(!judge_blocks("ttft", &b, Better::Lower, &rules, 0.05, false).unwrap().deciding);
    }

    #[test]
    fn a_block_needs_both_pairs_in_abba_order_and_an_odd_last_pair_is_left_out() {
        use Member::{A, B};
        let v = |a: f64, b: f64| Some([a, b]);
        // Block 1 complete; block 2 missing a value; block 3 complete; a lone last pair.
        let series = vec![
            ([A, B], v(1.0, 2.0)),
            ([B, A], v(1.0, 1.0)),
            ([A, B], v(1.0, 2.0)),
            ([B, A], None),
            ([A, B], v(2.0, 1.0)),
            ([B, A], v(4.0, 1.0)),
            ([A, B], v(1.0, 9.0)),
        ];
        let b = blocks(&series);
        assert_eq!(b.means.len(), 2);
        let ln2 = 2f64.ln();
        // Block 1: r1 = ln 2 (A first), r2 = 0 (B first): mean ln2 / 2, period (0 − ln 2) / 2, first − second:
        // ((1 − 2) + (1 − 1)) / 2.
        assert!((b.means[0] - ln2 / 2.0).abs() < 1e-12 && (b.period[0] + ln2 / 2.0).abs() < 1e-12);
        assert_eq!(b.difference[0], -0.5);
        assert_eq!(b.pair_logs.len(), 4);
        // Out of order (a block starting B first), zero or non-finite values: no block.
        assert!(blocks(&[([B, A], v(1.0, 2.0)), ([A, B], v(1.0, 2.0))]).means.is_empty());
        assert!(blocks(&[([A, B], v(0.0, 2.0)), ([B, A], v(1.0, 2.0))]).means.is_empty());
        assert!(blocks(&[([A, B], v(f64::NAN, 2.0)), ([B, A], v(1.0, 2.0))]).means.is_empty());
        assert_eq!(period_effect("x", &Blocks::default(), Better::Lower, &PairedRules::default()), None);
    }

    #[test]
    fn stopping_waits_for_the_deciding_metrics_only() {
        let rules = PairedRules::default();
        let decided = judge("decode", &noisy(9, 0.0, 1), Better::Higher, &rules, 0.05).unwrap();
        let mut wild = judge("ttft", &[0.3, -0.3, 0.2], Better::Lower, &rules, 0.05).unwrap();
        assert_eq!(wild.call, Call::Inconclusive);
        assert!(!stop_after(8, &[8, 12], &[decided.clone(), wild.clone()]));
        wild.deciding = false;
        assert!(stop_after(8, &[8, 12], &[decided.clone(), wild.clone()]), "an undecided reported metric");
        assert!(!stop_after(8, &[8, 12], std::slice::from_ref(&wild)), "no deciding metric: no early stop");
    }
}
