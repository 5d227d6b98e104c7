//! One distribution's values folded one at a time in bounded memory, for benches that run for as long as asked.
//!
//! Up to [`EXACT_MAX`] values every value is kept and the summary is [`distribution`] of them, bit for bit. Past
//! that the values move into a fixed set of logarithmic buckets (each bucket's upper bound is
//! [`GAMMA`] times its lower one, from [`LOWEST`] to [`HIGHEST`] seconds, about 2,800 32-bit counters, 11 KiB,
//! allocated once):
//! count, mean, population std (Welford) and max stay exact; a percentile is the midpoint of the bucket that holds
//! the value at its rank, within [`RELATIVE_ERROR`] of that value (DDSketch's mapping). A value at or below
//! [`LOWEST`] (a zero gap, two tokens in one read) counts as zero; one above [`HIGHEST`] as [`HIGHEST`], its max
//! still exact.

use serde::Serialize;

use super::stats;

/// A distribution as the peers print it: mean, population std, type-7 percentiles.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Distribution {
    pub count: usize,
    pub mean: f64,
    pub std: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    /// Set when the percentiles come from buckets (a bench past `summary::EXACT_MAX` values of this
    /// distribution): each is within this share of the value at its rank. Absent: exact.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub percentiles_within: Option<f64>,
}

pub fn distribution(values: &[f64]) -> Option<Distribution> {
    Some(Distribution {
        count: values.len(),
        mean: stats::mean(values)?,
        std: stats::std_population(values)?,
        p50: stats::percentile(values, 0.50)?,
        p90: stats::percentile(values, 0.90)?,
        p99: stats::percentile(values, 0.99)?,
        max: values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        percentiles_within: None,
    })
}

/// Values kept exactly before the buckets take over: 2 KiB a distribution. Small, so that a long bench reaches
/// its bound within its first minutes (a soak at one request a second grew by the exact values' vectors for the
/// whole hour with 2048).
pub const EXACT_MAX: usize = 256;
/// The percentiles' bound past [`EXACT_MAX`], relative to the value at the percentile's rank.
pub const RELATIVE_ERROR: f64 = 0.005;
/// `(1 + e) / (1 − e)` for `e` = [`RELATIVE_ERROR`].
pub const GAMMA: f64 = (1.0 + RELATIVE_ERROR) / (1.0 - RELATIVE_ERROR);
/// The smallest value told apart from zero (100 ns) and the largest kept as itself (one day), in seconds.
pub const LOWEST: f64 = 1e-7;
pub const HIGHEST: f64 = 86_400.0;

/// A distribution's values: every one up to [`EXACT_MAX`], then buckets.
#[derive(Debug, Clone, Default)]
pub struct Values {
    exact: Vec<f64>,
    buckets: Option<Buckets>,
    /// Buckets allocated ahead, unused until the switch ([`Values::reserved`]).
    room: Option<Buckets>,
}

#[derive(Debug, Clone)]
struct Buckets {
    count: usize,
    mean: f64,
    m2: f64,
    max: f64,
    zeros: u32,
    counts: Vec<u32>,
}

fn bucket_count() -> usize {
    ((HIGHEST / LOWEST).ln() / GAMMA.ln()).ceil() as usize + 1
}

impl Buckets {
    fn new() -> Buckets {
        Buckets { count: 0, mean: 0.0, m2: 0.0, max: f64::NEG_INFINITY, zeros: 0, counts: vec![0; bucket_count()] }
    }

    fn add(&mut self, x: f64) {
        self.count += 1;
        let d = x - self.mean;
        self.mean += d / self.count as f64;
        self.m2 += d * (x - self.mean);
        self.max = self.max.max(x);
        if x <= LOWEST || x.is_nan() {
            self.zeros = self.zeros.saturating_add(1);
        } else {
            // Bucket i holds (LOWEST·γ^(i−1), LOWEST·γ^i].
            let i = ((x.min(HIGHEST) / LOWEST).ln() / GAMMA.ln()).ceil() as usize;
            let last = self.counts.len() - 1;
            let c = &mut self.counts[i.min(last)];
            *c = c.saturating_add(1);
        }
    }

    /// The value at rank `floor((n − 1)·p)` (0-based), as its bucket's midpoint (within the relative error), never
    /// above the exact max.
    fn percentile(&self, p: f64) -> f64 {
        self.at_rank(((self.count - 1) as f64 * p).floor() as u64)
    }

    fn at_rank(&self, rank: u64) -> f64 {
        if rank < u64::from(self.zeros) {
            return 0.0;
        }
        let mut seen = u64::from(self.zeros);
        for (i, c) in self.counts.iter().enumerate() {
            seen += u64::from(*c);
            if seen > rank {
                let upper = LOWEST * GAMMA.powi(i as i32);
                return (2.0 * upper / (GAMMA + 1.0)).min(self.max);
            }
        }
        self.max
    }
}

impl Values {
    /// Values that hold from the start all the memory they will ever hold: room for [`EXACT_MAX`] values and the
    /// buckets. A long bench's distributions then allocate nothing as they fill (and free nothing at the switch to
    /// buckets), so its heap is the same from the first request to the last; `default()` grows as values come,
    /// for the many small distributions (one batch's, one gate run's) that never reach the limit.
    pub fn reserved() -> Values {
        Values { exact: Vec::with_capacity(EXACT_MAX), buckets: None, room: Some(Buckets::new()) }
    }

    pub fn push(&mut self, x: f64) {
        if let Some(b) = &mut self.buckets {
            b.add(x);
            return;
        }
        if self.exact.len() < EXACT_MAX {
            self.exact.push(x);
            return;
        }
        let mut b = self.room.take().unwrap_or_else(Buckets::new);
        // `drain` keeps the vector's room: nothing is freed mid-run.
        for v in self.exact.drain(..) {
            b.add(v);
        }
        b.add(x);
        self.buckets = Some(b);
    }

    pub fn extend(&mut self, xs: impl IntoIterator<Item = f64>) {
        for x in xs {
            self.push(x);
        }
    }

    pub fn len(&self) -> usize {
        self.buckets.as_ref().map_or(self.exact.len(), |b| b.count)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The summary: exact up to [`EXACT_MAX`] values; past that, percentiles within [`RELATIVE_ERROR`] and saying
    /// so in `percentiles_within`.
    pub fn distribution(&self) -> Option<Distribution> {
        let Some(b) = &self.buckets else { return distribution(&self.exact) };
        Some(Distribution {
            count: b.count,
            mean: b.mean,
            std: (b.m2 / b.count as f64).max(0.0).sqrt(),
            p50: b.percentile(0.50),
            p90: b.percentile(0.90),
            p99: b.percentile(0.99),
            max: b.max,
            percentiles_within: Some(RELATIVE_ERROR),
        })
    }

    /// Every value, while they are all kept.
    pub fn exact(&self) -> Option<&[f64]> {
        self.buckets.is_none().then_some(self.exact.as_slice())
    }

    /// Empirical CDF points past the exact limit: `points` ranks spread evenly from the first to the last value,
    /// each as (its value within the relative error, fraction ≤ it). Empty while every value is kept (`exact`).
    pub fn bucket_cdf(&self, points: usize) -> Vec<(f64, f64)> {
        let Some(b) = &self.buckets else { return Vec::new() };
        let n = b.count as u64;
        let points = points.max(2) as u64;
        (0..points).map(|k| k * (n - 1) / (points - 1)).map(|r| (b.at_rank(r), (r + 1) as f64 / n as f64)).collect()
    }

    /// Heap bytes held: what a bench's memory test can check stays bounded.
    pub fn heap_bytes(&self) -> usize {
        let buckets = |b: &Option<Buckets>| b.as_ref().map_or(0, |b| b.counts.capacity() * 4);
        self.exact.capacity() * 8 + buckets(&self.buckets) + buckets(&self.room)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::stats::Rng;

    #[test]
    fn up_to_the_exact_limit_the_summary_is_the_exact_distribution() {
        let mut v = Values::default();
        let xs: Vec<f64> = (0..EXACT_MAX).map(|i| 0.001 * ((i * 7919) % 1000) as f64 + 0.01).collect();
        v.extend(xs.iter().copied());
        assert_eq!(v.distribution(), distribution(&xs));
        assert_eq!(v.distribution().unwrap().percentiles_within, None);
    }

    #[test]
    fn past_the_limit_memory_stops_growing_and_percentiles_stay_within_the_bound() {
        // Log-normal-ish latencies between 1 ms and 2 s, a million of them, some zero gaps.
        let mut rng = Rng::new(7);
        let mut v = Values::default();
        let mut all = Vec::new();
        let mut held_after_switch = None;
        for i in 0..1_000_000 {
            let x = if i % 97 == 0 { 0.0 } else { 0.001 * (rng.uniform() * 7.6).exp() };
            v.push(x);
            all.push(x);
            if i == EXACT_MAX + 10 {
                held_after_switch = Some(v.heap_bytes());
            }
        }
        assert_eq!(v.heap_bytes(), held_after_switch.unwrap(), "no growth after the switch to buckets");
        assert!(v.heap_bytes() < 16 * 1024, "{} bytes", v.heap_bytes());
        let d = v.distribution().unwrap();
        let exact = distribution(&all).unwrap();
        assert_eq!(d.count, exact.count);
        assert_eq!(d.max, exact.max);
        assert!((d.mean - exact.mean).abs() <= 1e-9 * exact.mean, "{} vs {}", d.mean, exact.mean);
        assert!((d.std - exact.std).abs() <= 1e-9 * exact.std, "{} vs {}", d.std, exact.std);
        all.sort_by(f64::total_cmp);
        for (p, got) in [(0.5, d.p50), (0.9, d.p90), (0.99, d.p99)] {
            let at_rank = all[((all.len() - 1) as f64 * p).floor() as usize];
            assert!((got - at_rank).abs() <= RELATIVE_ERROR * at_rank, "p{p}: {got} vs {at_rank}");
        }
        assert_eq!(d.percentiles_within, Some(RELATIVE_ERROR));
        let cdf = v.bucket_cdf(1000);
        assert_eq!(cdf.len(), 1000);
        assert_eq!(cdf.last().unwrap().1, 1.0);
        assert!(cdf.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 < w[1].1), "monotone");
        assert!(v.exact().is_none());
    }

    #[test]
    fn a_reserved_distribution_holds_the_same_memory_from_its_first_value_to_its_millionth() {
        let mut rng = Rng::new(11);
        let (mut reserved, mut grown) = (Values::reserved(), Values::default());
        let at_start = reserved.heap_bytes();
        let mut grown_sizes = std::collections::BTreeSet::new();
        for _ in 0..1_000_000 {
            let x = 0.001 * (rng.uniform() * 7.6).exp();
            reserved.push(x);
            grown.push(x);
            assert_eq!(reserved.heap_bytes(), at_start);
            grown_sizes.insert(grown.heap_bytes());
        }
        // The same summary as values that grew as they came …
        assert_eq!(reserved.distribution(), grown.distribution());
        assert_eq!(reserved.bucket_cdf(100), grown.bucket_cdf(100));
        // … which went through every doubling of the exact values and then the buckets' allocation.
        assert!(grown_sizes.len() > 5, "{grown_sizes:?}");
        assert_eq!(grown_sizes.last(), Some(&at_start), "the same bound, reached late");
        // Below the limit too: the exact values are the same.
        let mut few = Values::reserved();
        few.extend([0.3, 0.1, 0.2]);
        assert_eq!((few.exact(), few.heap_bytes()), (Some(&[0.3, 0.1, 0.2][..]), at_start));
    }

    #[test]
    fn extreme_values_land_in_the_end_buckets_without_a_panic() {
        let mut v = Values::default();
        for x in [f64::NAN, -1.0, 0.0, 1e-12, 1e12, f64::INFINITY, f64::MAX, 5e-324] {
            for _ in 0..EXACT_MAX {
                v.push(x);
            }
        }
        let d = v.distribution().unwrap();
        assert_eq!(d.count, 8 * EXACT_MAX);
        assert_eq!(d.p50, 0.0, "half the values are zero or below");
        assert!(d.p99 <= HIGHEST * GAMMA, "{}", d.p99);
    }
}
