//! The statistics against scipy's: the normal distribution (statrs), the Student quantile's series, the Wilcoxon
//! signed-rank test (exact, exact with tied ranks, normal approximation) and the Mann–Whitney test, on the values
//! of `tests/it/fixtures/stats-reference.tsv`, which `stats-reference.py` beside it wrote (its header names the
//! scipy version and each call). A change of library or formula that moves a p-value shows here.

use std::collections::BTreeMap;

use super::paired::signed_rank_p;
use super::stats::{mann_whitney_p, normal_quantile, normal_sf, student_quantile};

const FIXTURE: &str = include_str!("../../tests/it/fixtures/stats-reference.tsv");

fn numbers(s: &str) -> Vec<f64> {
    s.split(',').map(|x| x.parse().unwrap_or_else(|e| panic!("`{x}`: {e}"))).collect()
}

#[test]
fn the_statistics_match_scipy() {
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut off_values = Vec::new();
    for line in FIXTURE.lines().filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let fields: Vec<&str> = line.split('\t').collect();
        let [kind, args, want] = fields[..] else { panic!("not three fields: {line}") };
        let want: f64 = want.parse().unwrap();
        let one = || args.parse::<f64>().unwrap();
        // Relative tolerances. The normal tail through statrs 0.18's erfc is within about 1e-10 of scipy's (measured
        // here: 9e-11 at worst, from z = -8 to 8), and so is each p-value resting on it; the exact signed-rank counts
        // and the quantile agree to double precision; the Student quantile is a series, documented within 1 % at the
        // 97.5 % quantile from 2 degrees of freedom on.
        let (got, tolerance) = match kind {
            // Φ(z) = 1 − Φ(−z): the upper tail at −z.
            "normal_cdf" => (normal_sf(-one()), 1e-9),
            "normal_sf" => (normal_sf(one()), 1e-9),
            "normal_ppf" => (normal_quantile(one()), 1e-12),
            "student_ppf" => {
                let [q, df] = numbers(args)[..] else { panic!("{line}") };
                (student_quantile(q, df), 0.01)
            }
            "signed_rank_exact" | "signed_rank_ties" => (signed_rank_p(&numbers(args)).unwrap(), 1e-12),
            "signed_rank_approx" => (signed_rank_p(&numbers(args)).unwrap(), 1e-9),
            "mann_whitney" => {
                let (a, b) = args.split_once(';').unwrap();
                (mann_whitney_p(&numbers(a), &numbers(b)).unwrap(), 1e-9)
            }
            other => panic!("unknown kind `{other}`"),
        };
        let off = (got - want).abs();
        if off.is_nan() || off > tolerance * want.abs() {
            off_values
                .push(format!("{kind} {args}: gauntlet {got:e}, scipy {want:e}, relative {:e}", off / want.abs()));
        }
        *seen.entry(kind).or_default() += 1;
    }
    assert!(off_values.is_empty(), "beyond the tolerance:\n{}", off_values.join("\n"));
    let kinds = seen.keys().copied().collect::<Vec<_>>();
    assert_eq!(
        kinds,
        [
            "mann_whitney",
            "normal_cdf",
            "normal_ppf",
            "normal_sf",
            "signed_rank_approx",
            "signed_rank_exact",
            "signed_rank_ties",
            "student_ppf"
        ],
        "every kind is checked: {seen:?}"
    );
}
