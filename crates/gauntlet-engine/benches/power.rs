//! Detection power and false-alarm rate of the bench comparison, on a seeded simulation, and its cost.
//! `cargo bench -p gauntlet-engine --bench power` prints, for several true changes and spreads, how often a
//! regression is called (20 samples per side, default rules: ±1.5 % noise band, α = 0.05, 2000 resamples).

use std::time::Instant;

use gauntlet_engine::bench::stats::{self, Better, Call, Rng, Rules};

fn samples(rng: &mut Rng, n: usize, mean: f64, cv: f64) -> Vec<f64> {
    (0..n).map(|_| mean * (1.0 + cv * rng.normal())).collect()
}

fn main() {
    let trials: usize = std::env::var("POWER_TRIALS").ok().and_then(|t| t.parse().ok()).unwrap_or(5000);
    let rules = Rules::default();
    println!("trials per cell: {trials}; 20 samples per side; throughput metric (higher is better)");
    println!("{:>6} {:>10} {:>12} {:>13} {:>14}", "spread", "true drop", "regression", "inconclusive", "µs/compare");
    for cv in [0.01, 0.03, 0.05] {
        for drop in [0.0, 0.03, 0.05, 0.10] {
            let mut rng = Rng::new(2026);
            let (mut regressions, mut inconclusive) = (0, 0);
            let started = Instant::now();
            for _ in 0..trials {
                let base = samples(&mut rng, 20, 100.0, cv);
                let cand = samples(&mut rng, 20, 100.0 * (1.0 - drop), cv);
                match stats::compare(&base, &cand, Better::Higher, &rules).unwrap().call {
                    Call::Regression => regressions += 1,
                    Call::Inconclusive => inconclusive += 1,
                    _ => {}
                }
            }
            let per = started.elapsed().as_secs_f64() * 1e6 / trials as f64;
            println!(
                "{:>5.0}% {:>9.0}% {:>11.2}% {:>12.2}% {:>14.1}",
                cv * 100.0,
                drop * 100.0,
                100.0 * regressions as f64 / trials as f64,
                100.0 * inconclusive as f64 / trials as f64,
                per
            );
        }
    }
}
