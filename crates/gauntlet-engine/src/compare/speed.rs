//! The gate's decode check, case by case. One run's decode median swings with whatever else the machine does
//! while it runs (on a shared 2-core runner a neighbour's build halves a case's speed for a few seconds and leaves
//! the next alone), so a run is compared with its baseline case against same case: the ratio of each case's decode
//! speed to its speed on the baseline. A slowdown of the server moves every ratio; a busy neighbour moves some.
//! The check warns only when the whole one-sided 95 % interval of the median ratio is below the warn line, so a
//! run whose cases disagree is a note, not a warning.

use gauntlet_schema::{CaseRecord, CaseStatus, Finding, FindingKind, LoadCpu, RunRecord, Severity, Thresholds};

use super::LOAD_NOISE_FLOOR_SECONDS;

/// A case decoding fewer completion tokens than this is left out: its speed is mostly its first token's.
pub const MIN_CASE_TOKENS: u64 = 8;

/// The confidence of the interval whose upper end must be below the warn line.
const ONE_SIDED_ALPHA: f64 = 0.05;

/// Decode compared case against case.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseRatios {
    /// The median of the per-case ratios (now / baseline).
    pub median: f64,
    /// The upper end of the one-sided 95 % distribution-free interval of that median: an order statistic of the
    /// ratios (with fewer than five cases, the largest: every case must be below the line).
    pub upper: f64,
    pub cases: usize,
    /// `the server's timings` or `the client's clock`.
    pub clock: &'static str,
}

/// One case's decode speed: the server's own (`timings.predicted_per_second`, llama.cpp's and the engines' that
/// report one) when `server`, else completion tokens from `usage` over the request's wall seconds. None when the
/// case did not answer, decoded fewer than [`MIN_CASE_TOKENS`], or lacks what the clock needs.
fn case_rate(c: &CaseRecord, server: bool) -> Option<f64> {
    if c.status == CaseStatus::Error || c.status == CaseStatus::Skipped {
        return None;
    }
    let a = c.answer.as_ref()?;
    let tokens = a.usage.and_then(|u| u.completion_tokens)?;
    if tokens < MIN_CASE_TOKENS {
        return None;
    }
    let rate = if server {
        a.timings.and_then(|t| t.predicted_per_second).or_else(|| {
            a.server_timings.as_ref().and_then(|t| t.get("predicted_per_second")).and_then(|v| v.as_f64())
        })?
    } else {
        tokens as f64 / c.seconds.filter(|s| *s > 0.0)?
    };
    (rate.is_finite() && rate > 0.0).then_some(rate)
}

/// Each case's speed now against the same case on the baseline, on the server's clock when every compared case
/// has it on both sides, else on the client's. None when no case has a speed on both sides.
pub fn case_ratios(run: &RunRecord, baseline: &RunRecord) -> Option<CaseRatios> {
    let pairs: Vec<(&CaseRecord, &CaseRecord)> = run
        .cases
        .iter()
        .filter_map(|c| Some((c, baseline.cases.iter().find(|o| o.id == c.id)?)))
        .filter(|(c, o)| case_rate(c, false).is_some() && case_rate(o, false).is_some())
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let server = pairs.iter().all(|(c, o)| case_rate(c, true).is_some() && case_rate(o, true).is_some());
    let mut ratios: Vec<f64> =
        pairs.iter().filter_map(|(c, o)| Some(case_rate(c, server)? / case_rate(o, server)?)).collect();
    ratios.sort_by(f64::total_cmp);
    let n = ratios.len();
    let median = if n % 2 == 1 { ratios[n / 2] } else { (ratios[n / 2 - 1] + ratios[n / 2]) / 2.0 };
    Some(CaseRatios {
        median,
        upper: ratios[upper_rank(n) - 1],
        cases: n,
        clock: if server { "the server's timings" } else { "the client's clock" },
    })
}

/// The 1-based rank k of the order statistic that bounds the median from above with one-sided confidence
/// 1 − [`ONE_SIDED_ALPHA`]: the smallest k with P(Binomial(n, ½) ≥ k) ≤ α (the true median lies above the k-th
/// smallest ratio only when at least k of n ratios fall below it). n when no rank reaches that confidence (n < 5).
fn upper_rank(n: usize) -> usize {
    // P(B ≥ k) for k = n, n-1, … accumulated from the top, in exact binomial terms.
    let total = 2f64.powi(n as i32);
    let mut tail = 0.0;
    let mut choose = 1.0; // C(n, n)
    let mut rank = n;
    for k in (1..=n).rev() {
        tail += choose / total;
        if tail > ONE_SIDED_ALPHA {
            break;
        }
        rank = k;
        // C(n, k-1) = C(n, k) · k / (n − k + 1)
        choose = choose * k as f64 / (n - k + 1) as f64;
    }
    rank
}

/// The load check. Wall seconds from spawn to the first generation swing with the machine. Measured on a busy
/// 2-core runner (load average 28–30, six loads of the embedded default's server): wall 6.5–14.2 s, the server's
/// CPU time 1.8–3.1 s (its threads spin while they wait for each other, so even that grows with contention), and
/// its threads' summed wait for a CPU 9.7–24.4 s, growing with the wall time. So a load over the line
/// (`load_ratio_warn` and longer by more than [`LOAD_NOISE_FLOOR_SECONDS`]) warns only when what its threads spent
/// waiting for a CPU, beyond the baseline's, does not explain it: the rest must still be over the line. Otherwise
/// it is a note. Without the CPU account on both records (older records, attached servers), the wall time alone
/// decides, as before.
pub fn load_finding(
    now: f64,
    then: f64,
    cpu_now: Option<LoadCpu>,
    cpu_then: Option<LoadCpu>,
    t: &Thresholds,
) -> Option<Finding> {
    let over =
        |now: f64, then: f64| then > 0.0 && now / then > t.load_ratio_warn && now - then > LOAD_NOISE_FLOOR_SECONDS;
    if !over(now, then) {
        return None;
    }
    let wall = format!(
        "load took {now:.2}s, {:.1}× the baseline's {then:.2}s (warn above {:.1}×)",
        now / then,
        t.load_ratio_warn
    );
    let warn =
        |message: String| Some(Finding { kind: FindingKind::SlowLoad, severity: Severity::Warn, message, case: None });
    let (Some(a), Some(b)) = (cpu_now, cpu_then) else {
        return warn(wall);
    };
    // The part of the longer load its threads did not spend waiting for a CPU.
    let waited = (a.wait_seconds - b.wait_seconds).max(0.0);
    let unexplained = now - then - waited;
    if over(then + unexplained, then) {
        return warn(format!(
            "{wall}; its threads waited {waited:.2}s longer for a CPU than on the baseline, which leaves \
             {unexplained:.2}s unexplained (CPU time {:.2}s against {:.2}s)",
            a.cpu_seconds, b.cpu_seconds
        ));
    }
    Some(Finding {
        kind: FindingKind::SpeedUnsettled,
        severity: Severity::Info,
        message: format!(
            "{wall}, but the server's CPU time is {:.2}s against {:.2}s and its threads waited {waited:.2}s longer \
             for a CPU: a busy machine, not a slower load; not a warning",
            a.cpu_seconds, b.cpu_seconds
        ),
        case: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_upper_rank_is_the_binomial_bound() {
        // n ≤ 4: no rank reaches 95 %, the largest ratio bounds; n = 5: P(B ≥ 5) = 1/32; n = 10: P(B ≥ 9) =
        // 11/1024 while P(B ≥ 8) = 56/1024 > 0.05; n = 16: P(B ≥ 12) = 2517/65536 = 0.038, P(B ≥ 11) = 0.105.
        assert_eq!([1, 2, 3, 4, 5].map(upper_rank), [1, 2, 3, 4, 5]);
        assert_eq!(upper_rank(10), 9);
        assert_eq!(upper_rank(16), 12);
    }

    fn thresholds() -> Thresholds {
        Thresholds {
            min_pass_rate: 0.5,
            fail_regressions: 2,
            decode_ratio_warn: 0.85,
            load_ratio_warn: 1.5,
            load_timeout_seconds: 120.0,
            request_timeout_seconds: 120.0,
            suite_budget_seconds: 300.0,
            expected_failures: Vec::new(),
            draft_acceptance_ratio_warn: 0.9,
        }
    }

    fn cpu(cpu_seconds: f64, wait_seconds: f64) -> Option<LoadCpu> {
        Some(LoadCpu { cpu_seconds, wait_seconds })
    }

    /// Loads measured on a busy runner (6.5 s and 14.2 s, CPU 1.81 s and 2.79 s, threads' wait 9.7 s and 24.4 s):
    /// a note. A load that waited on something other than a CPU (a sleep, a download, more work on a quiet
    /// machine) warns; without the CPU account, the wall time decides.
    #[test]
    fn a_longer_load_warns_only_when_the_wait_for_a_cpu_does_not_explain_it() {
        let t = thresholds();
        let kind = |f: Option<Finding>| f.map(|f| (f.kind.to_string(), f.severity));
        let note = Some(("speed-unsettled".to_string(), Severity::Info));
        let warn = Some(("slow-load".to_string(), Severity::Warn));
        assert_eq!(kind(load_finding(14.212, 6.477, cpu(2.79, 24.407), cpu(1.81, 9.746), &t)), note);
        assert_eq!(kind(load_finding(13.625, 8.724, cpu(2.5, 23.213), cpu(2.07, 13.214), &t)), note);
        assert_eq!(kind(load_finding(13.6, 8.7, cpu(2.1, 13.5), cpu(2.07, 13.2), &t)), warn, "not waiting for a CPU");
        assert_eq!(kind(load_finding(13.6, 8.7, None, cpu(2.07, 13.2), &t)), warn, "no account: the wall time");
        assert_eq!(kind(load_finding(1.2, 0.84, cpu(0.9, 5.0), cpu(0.8, 0.1), &t)), None, "under the line");
    }
}
