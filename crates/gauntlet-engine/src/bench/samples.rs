//! A level's samples of the compared metrics: one per batch, bounded. A long bench (thousands of batches) would
//! otherwise hold one number per batch and metric for its whole length; past [`SAMPLES_KEPT`] samples, neighbours
//! merge into their means and each sample stands for twice as many consecutive batches as before. The comparison's
//! statistics are on means, and the mean of `k` batches varies `k` times less than one batch, so the interval of the
//! mean they give is the same (the rank test then compares group means with group means: see [`coarsen`]).
//!
//! Until the limit is reached every sample is one batch's number exactly, as before there was a limit.

use std::collections::BTreeMap;

pub use gauntlet_schema::bench::SAMPLES_KEPT;

/// Samples of each named metric, grouped `per` batches to a sample.
#[derive(Debug, Clone)]
pub struct Samples {
    /// Each metric's groups: the sum of the values its batches gave, and how many gave one (a batch with no value
    /// of a metric, e.g. all its requests failed, adds none).
    groups: BTreeMap<String, Vec<(f64, u32)>>,
    /// Consecutive batches a group holds.
    per: u64,
    /// Batches in the last, open group (0: none open).
    open: u64,
}

impl Samples {
    /// Samples of the metrics `names`, each with room for all [`SAMPLES_KEPT`] from the start: adding batches
    /// never allocates (a long bench's heap does not grow as the samples fill).
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>) -> Samples {
        let groups = names.into_iter().map(|n| (n.to_owned(), Vec::with_capacity(SAMPLES_KEPT))).collect();
        Samples { groups, per: 1, open: 0 }
    }

    /// Heap bytes of the groups (the names aside).
    pub fn heap_bytes(&self) -> usize {
        self.groups.values().map(|g| g.capacity() * std::mem::size_of::<(f64, u32)>()).sum()
    }

    /// Adds one batch: `value` gives its number of each metric, if it has one.
    pub fn add(&mut self, value: impl Fn(&str) -> Option<f64>) {
        for (name, groups) in &mut self.groups {
            if self.open == 0 {
                groups.push((0.0, 0));
            }
            if let (Some(v), Some(last)) = (value(name), groups.last_mut()) {
                last.0 += v;
                last.1 += 1;
            }
        }
        self.open += 1;
        if self.open == self.per {
            self.open = 0;
            if self.groups.values().next().is_some_and(|g| g.len() >= SAMPLES_KEPT) {
                self.merge();
            }
        }
    }

    /// Neighbouring groups become one: half as many, each twice as long.
    fn merge(&mut self) {
        // In place: the vectors keep the room they grew to, and never grow past the limit.
        for groups in self.groups.values_mut() {
            let half = groups.len().div_ceil(2);
            for i in 0..half {
                let (a, b) = (groups[2 * i], groups.get(2 * i + 1).copied().unwrap_or((0.0, 0)));
                groups[i] = (a.0 + b.0, a.1 + b.1);
            }
            groups.truncate(half);
        }
        self.per *= 2;
    }

    /// Batches each sample stands for (the last one possibly fewer).
    pub fn batches_per_sample(&self) -> u64 {
        self.per
    }

    /// Each metric's samples, the mean of each group that has a value; a metric no batch gave is left out.
    pub fn finish(&self) -> BTreeMap<String, Vec<f64>> {
        self.groups
            .iter()
            .map(|(name, groups)| {
                (name.clone(), groups.iter().filter(|(_, n)| *n > 0).map(|(s, n)| s / f64::from(*n)).collect())
            })
            .filter(|(_, v): &(String, Vec<f64>)| !v.is_empty())
            .collect()
    }
}

/// Coarsening lives with the record type: a record read is bounded with it too ([`gauntlet_schema::bench::Level`]).
pub use gauntlet_schema::bench::coarsen;

/// The factor by which each side of a comparison is coarsened: both end at the larger of their batches per sample
/// (values read from a record are untrusted: 0 counts as 1).
pub fn common_grain(a: u64, b: u64) -> (u64, u64) {
    let (a, b) = (a.max(1), b.max(1));
    let grain = a.max(b);
    (grain / a, grain / b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one_metric(values: impl IntoIterator<Item = f64>) -> Samples {
        let mut s = Samples::new(["m"]);
        for v in values {
            s.add(|_| Some(v));
        }
        s
    }

    #[test]
    fn below_the_limit_every_batch_is_its_own_sample_exactly() {
        let values: Vec<f64> = (0..SAMPLES_KEPT - 1).map(|i| 0.1 * i as f64 + 1.0 / 3.0).collect();
        let s = one_metric(values.iter().copied());
        assert_eq!(s.batches_per_sample(), 1);
        assert_eq!(s.finish()["m"], values);
    }

    #[test]
    fn past_the_limit_samples_are_means_of_neighbours_and_their_number_stays_bounded() {
        // Batch i's value is i: a group of k batches starting at j has mean j + (k - 1) / 2.
        let n = SAMPLES_KEPT * 10 + 3;
        let s = one_metric((0..n).map(|i| i as f64));
        let per = s.batches_per_sample();
        assert_eq!(per, 16, "512 → 256 groups of 2 at 512 batches, … of 16 at 4096");
        let got = &s.finish()["m"];
        assert!(got.len() <= SAMPLES_KEPT, "{}", got.len());
        assert_eq!(got.len(), n.div_ceil(per as usize));
        for (g, v) in got.iter().enumerate().take(got.len() - 1) {
            assert_eq!(*v, (g * per as usize) as f64 + (per as f64 - 1.0) / 2.0);
        }
        // The last, open group: the mean of what it has.
        let start = (got.len() - 1) * per as usize;
        let last: Vec<f64> = (start..n).map(|i| i as f64).collect();
        assert_eq!(*got.last().unwrap(), last.iter().sum::<f64>() / last.len() as f64);
        // The overall mean is kept (equal groups but the last).
        let mean = got.iter().sum::<f64>() / got.len() as f64;
        assert!((mean - (n - 1) as f64 / 2.0).abs() < per as f64, "{mean}");
    }

    #[test]
    fn memory_holds_at_the_limit_however_many_batches() {
        let mut s = Samples::new(["m"]);
        for i in 0..SAMPLES_KEPT * 100 {
            s.add(|_| Some(i as f64));
            assert!(s.groups["m"].capacity() <= SAMPLES_KEPT, "batch {i}: {}", s.groups["m"].capacity());
        }
    }

    #[test]
    fn a_batch_without_a_value_adds_nothing_and_a_metric_never_given_is_absent() {
        let mut s = Samples::new(["a", "b"]);
        for i in 0..4 {
            s.add(|name| (name == "a" && i != 2).then_some(i as f64));
        }
        let got = s.finish();
        assert_eq!(got["a"], vec![0.0, 1.0, 3.0]);
        assert!(!got.contains_key("b"));
    }

    #[test]
    fn coarsening_averages_runs_and_a_zero_factor_is_one() {
        assert_eq!(coarsen(&[1.0, 3.0, 5.0, 7.0, 9.0], 2), vec![2.0, 6.0, 9.0]);
        assert_eq!(coarsen(&[1.0, 2.0], 0), vec![1.0, 2.0]);
        assert_eq!(common_grain(1, 8), (8, 1));
        assert_eq!(common_grain(4, 0), (1, 4));
    }
}
