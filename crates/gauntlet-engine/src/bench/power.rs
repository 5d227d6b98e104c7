//! Power: the smallest change a comparison could have seen. Every comparison states it, so "no regression" always
//! says how small a regression it would have caught.
//!
//! For an estimate with standard error `se` (on the scale the verdict is made: a relative change, or a mean log
//! ratio), a two-sided test at `alpha` = 0.05 detects a true change of `(z(1 - alpha/2) + z(power)) * se` with
//! probability `power` = 0.8: `(1.960 + 0.842) * se` ≈ `2.80 * se`.

/// z(0.975): the two-sided 5 % critical value.
const Z_ALPHA: f64 = 1.959_964;
/// z(0.80): 80 % power.
const Z_POWER: f64 = 0.841_621;

/// The minimum detectable effect at 80 % power and a two-sided 5 % level for an estimate with standard error `se`,
/// on the estimate's own scale. `None` for a standard error that is not a finite non-negative number.
pub fn minimum_detectable_effect(se: f64) -> Option<f64> {
    (se.is_finite() && se >= 0.0).then_some((Z_ALPHA + Z_POWER) * se)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eighty_percent_power_at_five_percent_is_about_two_point_eight_standard_errors() {
        let mde = minimum_detectable_effect(0.01).unwrap();
        assert!((mde - 0.028).abs() < 1e-4, "{mde}");
        assert_eq!(minimum_detectable_effect(0.0), Some(0.0));
        assert_eq!(minimum_detectable_effect(f64::NAN), None);
        assert_eq!(minimum_detectable_effect(-1.0), None);
        assert_eq!(minimum_detectable_effect(f64::INFINITY), None);
    }
}
