//! The one percentile convention every record uses: linear interpolation, Hyndman–Fan type 7 (numpy's default;
//! reference/metrics.md §4.4). Here, beside the records, because both the bench statistics and the token jitter of
//! a divergence (a pure function of two answers, [`crate::tokens`]) need it.

/// Type-7 percentile of `p` in [0, 1]; `None` for an empty sample. NaNs are not accepted (callers filter them).
pub fn percentile(values: &[f64], p: f64) -> Option<f64> {
    if values.is_empty() || !(0.0..=1.0).contains(&p) {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    Some(percentile_sorted(&v, p))
}

/// [`percentile`] of an already sorted, non-empty sample.
pub fn percentile_sorted(v: &[f64], p: f64) -> f64 {
    let h = (v.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(v.len() - 1);
    v[lo] + (h - lo as f64) * (v[hi] - v[lo])
}
