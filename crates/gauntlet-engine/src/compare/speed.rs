//! The gate's decode check, case by case. One run's decode median swings with whatever else the machine does
//! while it runs (on a shared 2-core runner a neighbour's build halves a case's speed for a few seconds and leaves
//! the next alone), so a run is compared with its baseline case against same case: the ratio of each case's decode
//! speed to its speed on the baseline. A slowdown of the server moves every ratio; a busy neighbour moves some.
//! The check warns only when the whole one-sided 95 % interval of the median ratio is below the warn line, so a
//! run whose cases disagree is a note, not a warning.
//!
//! Both clocks the gate has for a case (the client's and the server's own timings) are wall clocks: a server thread
//! that waits for a CPU another process holds makes every token late. So each case's rate is first put on the
//! server's own CPU clock with the run's CPU account ([`SpeedCheck`]: schedstat per thread, the CPU group's throttled
//! time): rate × (cpu + wait) / (cpu + throttled). That correction holds while the waits are the server's own
//! business; with several threads meeting at a barrier every token, one descheduled thread stalls the others
//! without any of them waiting in the scheduler's sense, so beyond a small contention nothing corrects it, and
//! decode is then not judged ([`decode_check`]).
//!
//! The CPU clock itself is not fixed when other processes work beside a server that decodes on the CPU: on a
//! machine whose cores share caches and memory, their traffic makes each CPU second of the server buy fewer tokens,
//! and nothing in the server's counters shows it. Measured on a 2-core VM with a one-thread llama.cpp (2026-12-06,
//! docs/src/validation/2026-12-06-neighbours.md): CPU time per token 0–35 % longer beside a cargo build or a
//! memory-streaming `dd` than on the quiet machine, from one minute to the next, while two servers asked in turn
//! agreed within 4 %. So each case's account also measures the share of the CPU time the server left that other
//! processes used ([`CaseCpu::neighbours`]), and a CPU-bound decode is not judged when that share was over
//! [`NEIGHBOURS_LIMIT`] on either side: the comparison would be of the neighbours, not of the server.
//!
//! Nor is it fixed when nothing in the machine works beside the server: on a virtual machine the host's other
//! guests share its last-level cache, memory and cores. So each run also times a fixed piece of gauntlet's own work
//! before every case ([`SpeedCheck::machine`], `server::probe`): a pass over a buffer the size of the last-level
//! cache, and a dependent chain of floating-point steps. Measured on the 2-core VM (2026-12-07, 57 unchanged runs,
//! docs/src/validation/2026-12-07-machine-probe.md), a run's median decode moved with its cache pass (correlation
//! 0.76), but dividing decode by the pass did not hold up under a CPU quota: it hid the quota in three of five runs
//! of the real test that the plain ratios all caught. So the pass does not correct the ratios; it only stops the
//! judgement where the machine moved further than unchanged runs on the quiet VM ever did (the pass
//! [`MACHINE_MEMORY_LIMIT`] slower on one side, or the chain [`MACHINE_STEPS_LIMIT`] slower):
//! [`DecodeCheck::MachineMoved`].

use gauntlet_schema::{
    CaseCpu, CaseRecord, CaseStatus, Finding, FindingKind, LoadCpu, MachineSpeed, RunRecord, Severity, SpeedCheck,
    SpeedJudgement, Thresholds,
};

use super::LOAD_NOISE_FLOOR_SECONDS;

/// A case decoding fewer completion tokens than this is left out: its speed is mostly its first token's.
pub const MIN_CASE_TOKENS: u64 = 8;

/// The confidence of the interval whose upper end must be below the warn line.
const ONE_SIDED_ALPHA: f64 = 0.05;

/// The highest contention at which a case's decode rate is corrected and judged when one thread does the decode:
/// the correction is then exact in principle (the thread's decode time is its CPU time plus its waits), and only a
/// case that hardly ran at all is left too little to measure.
pub const CONTENTION_LIMIT_ONE_THREAD: f64 = 0.85;
/// The same when several threads share the decode: they meet at a barrier every token, so the wait of one is idle
/// time of the others that no counter shows; only a small contention leaves the correction valid.
pub const CONTENTION_LIMIT_SHARED: f64 = 0.10;

/// The highest share of the CPU time a server left that other processes may use, on either side, for a decode
/// computed on the CPU to be judged. Measured on the 2-core VM the tests run on: 0–2 % on a quiet machine, 50–100 %
/// beside a cargo build or a memory-streaming neighbour, whose traffic made the server's CPU time per token 0–35 %
/// longer; a quarter sits between the two and keeps a neighbour using less than a quarter of one spare CPU of a
/// 2-core machine from deciding.
pub const NEIGHBOURS_LIMIT: f64 = 0.25;

/// The most the machine's cache pass ([`MachineSpeed::memory_bytes_per_second`]) may be slower on one side than on
/// the other, as a fraction of the faster side's, for a decode on the CPU to be judged: the widest the unchanged
/// runs on the quiet 2-core VM spread (2026-12-07: passes 9.1–13.1 GB/s across 57 runs, 30 % apart at most). With
/// the host's other guests holding the whole cache the pass fell to 4.5 GB/s (60 % slower) and the decode by a
/// third, nothing in the VM to show it.
pub const MACHINE_MEMORY_LIMIT: f64 = 0.30;
/// The most the machine's dependent chain ([`MachineSpeed::steps_per_second`]) may be slower on one side than on
/// the other for a decode on the CPU to be judged: the core itself at another speed. Its runs' medians stayed
/// within 9 % of each other over the 57 quiet runs on the 2-core VM (480–528 M steps/s).
pub const MACHINE_STEPS_LIMIT: f64 = 0.10;

/// The time a case's account is a share of: its threads' time on a CPU and waiting for one, or the request's wall
/// seconds when longer (threads that slept part of it: a server waiting on a GPU, on I/O, on a timer). For a server
/// that computes the whole request on one thread the two are the same.
fn span(cpu: f64, wait: f64, wall: f64) -> f64 {
    let threads = cpu + wait;
    if wall.is_finite() && wall > threads { wall } else { threads }
}

/// The share of a case's time its threads spent waiting for CPUs other processes held: (wait − throttled) / (cpu +
/// wait) (the request's wall seconds instead of cpu + wait when longer, see [`span`]), clamped to 0–1. Throttled
/// time is the server's own slowdown: a quota is part of what is tested. 0 when the threads neither ran nor waited.
pub fn contention(cpu: f64, wait: f64, throttled: f64, wall: f64) -> f64 {
    let total = span(cpu, wait, wall);
    if !(total.is_finite() && total > 0.0) {
        return 0.0;
    }
    ((wait - throttled.min(wait)) / total).clamp(0.0, 1.0)
}

/// What a case's decode rate is multiplied by to put it on the server's CPU clock: (cpu + wait) / (cpu +
/// throttled), the wait for other processes' CPU taken out (over the wall seconds when longer, see [`span`]).
/// Throttled time counts at most as the wait it is part of; 1 when the threads neither ran nor waited.
pub fn correction(cpu: f64, wait: f64, throttled: f64, wall: f64) -> f64 {
    let total = span(cpu, wait, wall);
    let others = (wait - throttled.min(wait).max(0.0)).max(0.0);
    let factor = total / (total - others);
    if factor.is_finite() && factor >= 1.0 { factor } else { 1.0 }
}

/// One case's account in the run record's form; `wall` is the request's seconds, `neighbours` the share of the CPU
/// time the server left that other processes used ([`CaseCpu::neighbours`]).
pub fn case_cpu(
    case: &str,
    (cpu, wait, throttled, wall): (f64, f64, f64, f64),
    busy_threads: u32,
    neighbours: Option<f64>,
) -> CaseCpu {
    CaseCpu {
        case: case.to_owned(),
        cpu_seconds: cpu,
        wait_seconds: wait,
        throttled_seconds: throttled,
        wall_seconds: wall,
        busy_threads,
        contention: contention(cpu, wait, throttled, wall),
        factor: correction(cpu, wait, throttled, wall),
        neighbours: neighbours.filter(|n| n.is_finite()).map(|n| n.clamp(0.0, 1.0)),
        machine: None,
    }
}

/// The threads that shared a case's decode in the sense of [`CONTENTION_LIMIT_SHARED`]: its busy threads when they
/// were on a CPU or waiting for one for at least half of the request each (a compute-bound decode whose threads
/// meet every token), else 1. Threads that slept through most of the request (a server waiting on a GPU, a timer,
/// I/O) do not meet at a compute barrier, and what they waited is a share of the wall time that the correction
/// takes out ([`span`]); counting them as a shared decode would hold a sleeping server to the 10 % limit, which a
/// busy runner's wake-up delays alone pass.
fn decode_threads(c: &CaseCpu) -> u32 {
    if c.busy_threads > 1 && !compute_bound(c) { 1 } else { c.busy_threads }
}

/// Whether a case's busy threads were on a CPU or waiting for one for at least half of the request each: a decode
/// computed on the CPU, not a server that slept while a GPU (a timer, I/O) did the work. True when the request has
/// no wall time to compare with.
fn compute_bound(c: &CaseCpu) -> bool {
    let runnable = c.cpu_seconds + c.wait_seconds;
    !(c.wall_seconds.is_finite() && c.wall_seconds > 0.0 && runnable.is_finite())
        || runnable >= 0.5 * f64::from(c.busy_threads.max(1)) * c.wall_seconds
}

/// Over a check's cases that measured one, weighted by their seconds: the neighbours' share (see
/// [`CaseCpu::neighbours`]). None when no case has one.
fn pooled_neighbours(cases: &[CaseCpu]) -> Option<f64> {
    let weight = |c: &CaseCpu| if c.wall_seconds.is_finite() && c.wall_seconds > 0.0 { c.wall_seconds } else { 1.0 };
    let measured: Vec<(f64, f64)> = cases.iter().filter_map(|c| Some((c.neighbours?, weight(c)))).collect();
    let total: f64 = measured.iter().map(|m| m.1).sum();
    (!measured.is_empty() && total > 0.0).then(|| measured.iter().map(|(n, w)| n * w).sum::<f64>() / total)
}

/// A run's speed check from its cases' accounts: contention pooled over them, the most threads that shared any
/// case's decode ([`decode_threads`]); `machine`, the machine's own speed over the run.
pub fn speed_check(cases: Vec<CaseCpu>, cpu_group: Option<String>, machine: Option<MachineSpeed>) -> SpeedCheck {
    let sum = |f: fn(&CaseCpu) -> f64| cases.iter().map(f).sum::<f64>();
    let (cpu, wait, throttled) = (sum(|c| c.cpu_seconds), sum(|c| c.wait_seconds), sum(|c| c.throttled_seconds));
    // Each case's span (its threads' time or its wall time), summed: the pooled share.
    let total = sum(|c| span(c.cpu_seconds, c.wait_seconds, c.wall_seconds));
    SpeedCheck {
        contention: (!cases.is_empty()).then(|| contention(cpu, wait, throttled, total)),
        busy_threads: cases.iter().map(decode_threads).max().unwrap_or(0),
        throttled_seconds: throttled,
        cpu_group,
        neighbours: pooled_neighbours(&cases),
        machine,
        judgement: None,
        cases,
    }
}

/// The contention limit for a decode shared by `threads` threads.
pub fn contention_limit(threads: u32) -> f64 {
    if threads <= 1 { CONTENTION_LIMIT_ONE_THREAD } else { CONTENTION_LIMIT_SHARED }
}

/// How decode is to be judged against a baseline.
#[derive(Debug, Clone, PartialEq)]
pub enum DecodeCheck {
    /// Case against case; `corrected` when both records carry a CPU account, else `why_not` says which lacks it
    /// (None when neither has one: an attached server, older records).
    Ratios { ratios: CaseRatios, corrected: bool, why_not: Option<String> },
    /// Too much contention on one side to correct: `side` is `this run` or `the baseline`.
    NotJudged { contention: f64, limit: f64, threads: u32, side: &'static str },
    /// A decode on the CPU with other processes using more than [`NEIGHBOURS_LIMIT`] of the CPU time it left on one
    /// side: `side` is `this run` or `the baseline`.
    Crowded { neighbours: f64, limit: f64, side: &'static str },
    /// A decode on the CPU on a machine whose own speed moved more than [`MACHINE_MEMORY_LIMIT`] (its cache pass)
    /// or [`MACHINE_STEPS_LIMIT`] (its chain): `memory` says which, `slower` is `this run` or `the baseline`.
    MachineMoved { shift: f64, memory: bool, slower: &'static str },
    /// No case has a speed on both sides.
    NoCases,
}

/// How the machine's speed compared between a run and its baseline.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MachineShift {
    /// 1 − slower / faster of the cache passes, and whether this run was the slower.
    pub memory: (f64, bool),
    /// The same of the dependent chains.
    pub steps: (f64, bool),
}

impl MachineShift {
    /// The larger of the two shifts.
    pub fn largest(&self) -> f64 {
        self.memory.0.max(self.steps.0)
    }
}

/// How the machine's speed compared between two runs; None unless both measured every rate as a positive number.
pub fn machine_shift(now: &MachineSpeed, then: &MachineSpeed) -> Option<MachineShift> {
    let shift = |a: f64, b: f64| {
        (a.is_finite() && b.is_finite() && a > 0.0 && b > 0.0).then(|| (1.0 - a.min(b) / a.max(b), a < b))
    };
    Some(MachineShift {
        memory: shift(now.memory_bytes_per_second, then.memory_bytes_per_second)?,
        steps: shift(now.steps_per_second, then.steps_per_second)?,
    })
}

/// The machine's shift between two records, when both measured the machine.
fn machine_shift_of(run: &RunRecord, baseline: &RunRecord) -> Option<MachineShift> {
    let m = |r: &RunRecord| r.decode.speed_check.as_ref().and_then(|c| c.machine);
    machine_shift(&m(run)?, &m(baseline)?)
}

/// A record's account when it has one for at least one case.
fn account(r: &RunRecord) -> Option<(&SpeedCheck, f64)> {
    let c = r.decode.speed_check.as_ref()?;
    Some((c, c.contention?))
}

/// Decode case against case, corrected onto the server's CPU clock when both records carry a CPU account (version
/// 11 and spawned servers), and not judged at all when either side's contention is over the limit for the threads
/// that shared its decode ([`contention_limit`]).
pub fn decode_check(run: &RunRecord, baseline: &RunRecord) -> DecodeCheck {
    let (Some((now, c_now)), Some((then, c_then))) = (account(run), account(baseline)) else {
        let why = match (account(run), account(baseline)) {
            (Some(_), None) => Some(format!(
                "uncorrected: the baseline (run.json version {}) has no CPU account",
                baseline.schema_version
            )),
            (None, Some(_)) => Some("uncorrected: this run has no CPU account".to_string()),
            // Attached servers, older records: as before version 11, nothing to say.
            _ => None,
        };
        return match case_ratios(run, baseline) {
            Some(ratios) => DecodeCheck::Ratios { ratios, corrected: false, why_not: why },
            None => DecodeCheck::NoCases,
        };
    };
    let threads = now.busy_threads.max(then.busy_threads).max(1);
    let limit = contention_limit(threads);
    for (side, c) in [("this run", c_now), ("the baseline", c_then)] {
        if c > limit {
            return DecodeCheck::NotJudged { contention: c, limit, threads, side };
        }
    }
    if on_the_cpu(now) || on_the_cpu(then) {
        for (side, check) in [("this run", now), ("the baseline", then)] {
            if let Some(n) = check.neighbours.filter(|n| *n > NEIGHBOURS_LIMIT) {
                return DecodeCheck::Crowded { neighbours: n, limit: NEIGHBOURS_LIMIT, side };
            }
        }
        if let Some(shift) = machine_shift_of(run, baseline) {
            let side = |now_slower: bool| if now_slower { "this run" } else { "the baseline" };
            if shift.steps.0 > MACHINE_STEPS_LIMIT {
                return DecodeCheck::MachineMoved { shift: shift.steps.0, memory: false, slower: side(shift.steps.1) };
            }
            if shift.memory.0 > MACHINE_MEMORY_LIMIT {
                return DecodeCheck::MachineMoved { shift: shift.memory.0, memory: true, slower: side(shift.memory.1) };
            }
        }
    }
    let factor = |check: &SpeedCheck, id: &str| check.cases.iter().find(|c| c.case == id).map(|c| c.factor);
    match case_ratios_by(run, baseline, |c, own| factor(if own { now } else { then }, &c.id)) {
        Some(ratios) => DecodeCheck::Ratios { ratios, corrected: true, why_not: None },
        None => DecodeCheck::NoCases,
    }
}

/// Whether a case's busy threads computed on a CPU for at least half of the time they were not waiting for one
/// each: a decode on the CPU. A server that sleeps while a GPU (a timer, I/O) works does not, however long a busy
/// machine keeps its wake-ups waiting (that wait is what [`compute_bound`] counts in). True when the request has
/// no wall time to compare with.
fn computes_on_the_cpu(c: &CaseCpu) -> bool {
    on_a_cpu(c.cpu_seconds, c.wait_seconds, c.wall_seconds, c.busy_threads.max(1))
}

/// Whether `threads` threads spent at least half of the `wall` seconds they did not wait for a CPU computing on one
/// (`cpu` seconds between them); true when the numbers cannot tell (nothing left after the wait, or not finite).
fn on_a_cpu(cpu: f64, wait: f64, wall: f64, threads: u32) -> bool {
    let own = wall - wait;
    !(own.is_finite() && own > 0.0 && cpu.is_finite()) || cpu >= 0.5 * f64::from(threads) * own
}

/// Whether most of a check's cases decoded on the CPU ([`computes_on_the_cpu`]).
fn on_the_cpu(check: &SpeedCheck) -> bool {
    2 * check.cases.iter().filter(|c| computes_on_the_cpu(c)).count() > check.cases.len()
}

/// The higher neighbours' share of two records, when both measured one.
fn neighbours_of(run: &RunRecord, baseline: &RunRecord) -> Option<f64> {
    let n = |r: &RunRecord| r.decode.speed_check.as_ref().and_then(|c| c.neighbours);
    Some(n(run)?.max(n(baseline)?))
}

/// The record's form of [`decode_check`], for `decode.speed_check.judgement`.
pub fn judgement(run: &RunRecord, baseline: &RunRecord) -> Option<SpeedJudgement> {
    let threads = |r: &RunRecord| r.decode.speed_check.as_ref().map_or(1, |c| c.busy_threads.max(1));
    let limit = contention_limit(threads(run).max(threads(baseline)));
    let highest = match (account(run), account(baseline)) {
        (Some((_, a)), Some((_, b))) => Some(a.max(b)),
        _ => None,
    };
    let uncorrected = case_ratios(run, baseline).map(|r| r.median);
    let machine = machine_shift_of(run, baseline).map(|m| m.largest());
    // Decode not judged, for `reason`: the contention and neighbours' share that were weighed.
    let not_judged = |reason: String, contention: Option<f64>, neighbours: Option<f64>| SpeedJudgement {
        judged: false,
        reason,
        clock: String::new(),
        corrected: false,
        contention,
        contention_limit: limit,
        neighbours,
        median_ratio: None,
        upper_ratio: None,
        uncorrected_median_ratio: uncorrected,
        machine_shift: machine,
    };
    Some(match decode_check(run, baseline) {
        DecodeCheck::Ratios { ratios, corrected, why_not } => SpeedJudgement {
            judged: true,
            reason: match why_not {
                Some(why) => format!("{} cases compared on {}, {why}", ratios.cases, ratios.clock),
                None if !corrected => format!(
                    "{} cases compared on {}, uncorrected: neither record has a CPU account",
                    ratios.cases, ratios.clock
                ),
                None => format!(
                    "{} cases compared on {}, each corrected onto the server's CPU clock (its threads' wait for \
                     other processes' CPU taken out)",
                    ratios.cases, ratios.clock
                ),
            },
            clock: ratios.clock.to_owned(),
            corrected,
            contention: highest,
            contention_limit: limit,
            neighbours: neighbours_of(run, baseline),
            median_ratio: Some(ratios.median),
            upper_ratio: Some(ratios.upper),
            uncorrected_median_ratio: uncorrected,
            machine_shift: machine,
        },
        // The variant's limit is `limit` (the same threads), named as decided.
        DecodeCheck::NotJudged { contention, limit: decided, threads, side } => not_judged(
            not_judged_reason(contention, decided, threads, side),
            Some(contention),
            neighbours_of(run, baseline),
        ),
        DecodeCheck::Crowded { neighbours, limit: _, side } => not_judged(
            crowded_reason(neighbours, side),
            highest,
            Some(neighbours_of(run, baseline).unwrap_or(neighbours)),
        ),
        DecodeCheck::MachineMoved { shift, memory, slower } => {
            not_judged(machine_moved_reason(shift, memory, slower), highest, neighbours_of(run, baseline))
        }
        DecodeCheck::NoCases => return None,
    })
}

/// Why a decode on the CPU was not judged on a machine whose own speed moved, in words.
pub fn machine_moved_reason(shift: f64, memory: bool, slower: &str) -> String {
    let (what, limit) = if memory {
        ("a pass over a buffer the size of its last-level cache", MACHINE_MEMORY_LIMIT)
    } else {
        ("a chain of dependent floating-point steps", MACHINE_STEPS_LIMIT)
    };
    format!(
        "the machine itself was slower during {slower}'s cases: {what} took {:.0} % longer than during the other's, \
         with nothing in it working beside the server that a counter shows (judged up to {:.0} %, the widest unchanged \
         runs spread on a quiet VM); on a virtual machine that is the host's other guests, and the comparison would \
         be of them, not of the server",
        (1.0 / (1.0 - shift) - 1.0) * 100.0,
        (1.0 / (1.0 - limit) - 1.0) * 100.0,
    )
}

/// Why decode was not judged, in words.
pub fn not_judged_reason(contention: f64, limit: f64, threads: u32, side: &str) -> String {
    let why = if threads > 1 {
        format!(
            "{threads} threads share the decode and meet every token, so one that waits stalls the others \
             uncounted; the correction holds only up to {:.0} %",
            limit * 100.0
        )
    } else {
        format!("too little of the time was the server's own to correct the rate (limit {:.0} %)", limit * 100.0)
    };
    format!(
        "the server's threads spent {:.0} % of their time in {side}'s cases waiting for CPUs other processes held; \
         {why}",
        contention * 100.0
    )
}

/// Why a decode on the CPU was not judged beside busy neighbours, in words.
pub fn crowded_reason(neighbours: f64, side: &str) -> String {
    format!(
        "other processes used {:.0} % of the CPU time the server left during {side}'s cases (judged up to {:.0} %); \
         on CPUs that share caches and memory their work changes what each CPU second of the server decodes, by an \
         amount no counter here shows (0–35 % measured on a 2-core VM), more than the warn line allows",
        neighbours * 100.0,
        NEIGHBOURS_LIMIT * 100.0
    )
}

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
    case_ratios_by(run, baseline, |_, _| Some(1.0))
}

/// [`case_ratios`], each case's rate multiplied by `factor(case, own)` (`own`: the case is this run's, else the
/// baseline's); a case without a factor on either side is left out.
fn case_ratios_by(
    run: &RunRecord,
    baseline: &RunRecord,
    factor: impl Fn(&CaseRecord, bool) -> Option<f64>,
) -> Option<CaseRatios> {
    let pairs: Vec<(&CaseRecord, &CaseRecord, f64, f64)> = run
        .cases
        .iter()
        .filter_map(|c| {
            let o = baseline.cases.iter().find(|o| o.id == c.id)?;
            Some((c, o, factor(c, true)?, factor(o, false)?))
        })
        .filter(|(c, o, _, _)| case_rate(c, false).is_some() && case_rate(o, false).is_some())
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let server = pairs.iter().all(|(c, o, _, _)| case_rate(c, true).is_some() && case_rate(o, true).is_some());
    let mut ratios: Vec<f64> = pairs
        .iter()
        .filter_map(|(c, o, fc, fo)| Some(case_rate(c, server)? * fc / (case_rate(o, server)? * fo)))
        .filter(|r| r.is_finite() && *r > 0.0)
        .collect();
    if ratios.is_empty() {
        return None;
    }
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
/// decides, as before. A load over the line that computed on a CPU for at least half of the time it did not wait
/// for one, while other processes used more than [`NEIGHBOURS_LIMIT`] of the CPU time the server left (on either
/// side), is not judged either, as a crowded decode is not: a neighbour's work makes each CPU second of the load buy
/// less, with no wait to show for it. A load that slept is judged whatever its neighbours did.
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
    // Neighbours slow what the load computes, not a load that slept (a download, a timer, a lock): only a load that
    // was on a CPU for at least half of the time it did not wait for one can be explained by them.
    let crowded = [(a.neighbours, "this run"), (b.neighbours, "the baseline")]
        .into_iter()
        .filter_map(|(n, side)| Some((n.filter(|n| *n > NEIGHBOURS_LIMIT)?, side)))
        .max_by(|x, y| x.0.total_cmp(&y.0))
        .filter(|_| on_a_cpu(a.cpu_seconds, a.wait_seconds, now, 1));
    if let Some((n, side)) = crowded {
        return Some(Finding {
            kind: FindingKind::SpeedUnsettled,
            severity: Severity::Info,
            message: format!(
                "{wall}, but other processes used {:.0} % of the CPU time the server left during {side}'s load \
                 (judged up to {:.0} %): a busy machine, the load not judged",
                n * 100.0,
                NEIGHBOURS_LIMIT * 100.0
            ),
            case: None,
        });
    }
    // The part of the longer load its threads did not spend waiting for a CPU that another process held: time its
    // CPU group's quota throttled it is its own slowdown (part of the wait, but not the machine's doing).
    let others = |c: &LoadCpu| c.wait_seconds - c.throttled_seconds.unwrap_or(0.0).clamp(0.0, c.wait_seconds);
    let waited = (others(&a) - others(&b)).max(0.0);
    let unexplained = now - then - waited;
    if over(then + unexplained, then) {
        return warn(format!(
            "{wall}; its threads waited {waited:.2}s longer for CPUs other processes held than on the baseline, which leaves \
             {unexplained:.2}s unexplained (CPU time {:.2}s against {:.2}s)",
            a.cpu_seconds, b.cpu_seconds
        ));
    }
    Some(Finding {
        kind: FindingKind::SpeedUnsettled,
        severity: Severity::Info,
        message: format!(
            "{wall}, but the server's CPU time is {:.2}s against {:.2}s and its threads waited {waited:.2}s longer \
             for CPUs other processes held: a busy machine, not a slower load; not a warning",
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

    #[test]
    fn contention_counts_only_the_wait_for_other_processes() {
        // One thread ran 0.3 s and waited as long in a 0.6 s request: half the time was someone else's.
        assert!((contention(0.3, 0.3, 0.0, 0.6) - 0.5).abs() < 1e-12);
        assert!((correction(0.3, 0.3, 0.0, 0.6) - 2.0).abs() < 1e-12);
        // The same wait, all of it throttled by the server's own quota: no contention, nothing to correct.
        assert_eq!(contention(0.3, 0.3, 0.3, 0.6), 0.0);
        assert_eq!(correction(0.3, 0.3, 0.3, 0.6), 1.0);
        // Half of it throttled: (cpu + wait) / (cpu + throttled).
        assert!((contention(0.3, 0.3, 0.15, 0.6) - 0.25).abs() < 1e-12);
        assert!((correction(0.3, 0.3, 0.15, 0.6) - 0.6 / 0.45).abs() < 1e-12);
        // Throttled beyond the wait (the group's other CPUs): counted as the wait at most.
        assert_eq!(contention(0.3, 0.1, 0.5, 0.4), 0.0);
        assert_eq!(correction(0.3, 0.1, 0.5, 0.4), 1.0);
        // A server that slept most of a 2 s request (a timer, a GPU): its 3 ms wait is 0.15 % of the request, not
        // 60 % of its 5 ms of thread time, and the correction is as small.
        assert!((contention(0.002, 0.003, 0.0, 2.0) - 0.0015).abs() < 1e-12);
        assert!((correction(0.002, 0.003, 0.0, 2.0) - 2.0 / 1.997).abs() < 1e-12);
        // Nothing ran, or numbers that are no numbers: no contention, no correction.
        assert_eq!(contention(0.0, 0.0, 0.0, 0.0), 0.0);
        assert_eq!(correction(0.0, 0.0, 0.0, 0.0), 1.0);
        assert_eq!(contention(f64::NAN, 1.0, 0.0, 1.0), 0.0);
        assert_eq!(correction(f64::INFINITY, 1.0, 0.0, 1.0), 1.0);
        assert_eq!(correction(f64::NAN, 1.0, 0.0, f64::NAN), 1.0);
        assert_eq!(contention(0.0, 1.0, 0.0, 1.0), 1.0, "waited only");
        assert_eq!(correction(0.0, 1.0, 0.0, 1.0), 1.0, "waited only: nothing of its own to scale to");
    }

    #[test]
    fn the_limit_depends_on_the_threads_that_share_the_decode() {
        assert_eq!(contention_limit(0), 0.85);
        assert_eq!(contention_limit(1), 0.85);
        assert_eq!(contention_limit(2), 0.10);
        let check = speed_check(
            vec![case_cpu("a", (0.3, 0.1, 0.0, 0.4), 1, None), case_cpu("b", (0.1, 0.3, 0.2, 0.4), 2, None)],
            Some("/sys/fs/cgroup/cpu/x".into()),
            None,
        );
        // Pooled: (0.4 − 0.2) / (0.4 + 0.4).
        assert!((check.contention.unwrap() - 0.25).abs() < 1e-12, "{check:?}");
        assert_eq!(check.busy_threads, 2);
        assert!((check.throttled_seconds - 0.2).abs() < 1e-12);
        assert_eq!(speed_check(Vec::new(), None, None).contention, None);
    }

    #[test]
    fn threads_that_slept_through_the_request_do_not_share_a_compute_bound_decode() {
        // Two threads that ran or waited through a 0.4 s request each (llama.cpp's barrier): shared.
        let two = speed_check(vec![case_cpu("a", (0.5, 0.3, 0.0, 0.4), 2, None)], None, None);
        assert_eq!(two.busy_threads, 2);
        assert_eq!(contention_limit(two.busy_threads), CONTENTION_LIMIT_SHARED);
        // Two threads with a few milliseconds each in a 0.5 s request (a server sleeping between tokens, or waiting
        // on a GPU): one decode, judged up to the one-thread limit.
        let sleeping = speed_check(vec![case_cpu("a", (0.004, 0.02, 0.0, 0.5), 2, None)], None, None);
        assert_eq!(sleeping.busy_threads, 1);
        assert_eq!(contention_limit(sleeping.busy_threads), CONTENTION_LIMIT_ONE_THREAD);
        // Half of the request each is the line; no wall time to compare with keeps the busy count.
        assert_eq!(speed_check(vec![case_cpu("a", (0.3, 0.1, 0.0, 0.4), 2, None)], None, None).busy_threads, 2);
        assert_eq!(speed_check(vec![case_cpu("a", (0.2, 0.1, 0.0, 0.4), 2, None)], None, None).busy_threads, 1);
        assert_eq!(speed_check(vec![case_cpu("a", (0.01, 0.0, 0.0, f64::NAN), 3, None)], None, None).busy_threads, 3);
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
        Some(LoadCpu { cpu_seconds, wait_seconds, throttled_seconds: None, neighbours: None })
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
        // The same longer load with 14 of its 24.4 s of wait throttled by the server's own quota: the wait for other
        // processes (10.4 s) explains 0.7 s of the 7.7 s, a warning; all of it throttled, a warning too.
        let throttled = |c: f64, w: f64, th: f64| Some(LoadCpu { throttled_seconds: Some(th), ..cpu(c, w).unwrap() });
        assert_eq!(kind(load_finding(14.212, 6.477, throttled(2.79, 24.407, 14.0), cpu(1.81, 9.746), &t)), warn);
        assert_eq!(kind(load_finding(14.212, 6.477, throttled(2.79, 24.407, 24.407), cpu(1.81, 9.746), &t)), warn);
        // Throttled on the baseline too, as much: the busy machine's share is what is left, a note.
        let base = throttled(1.81, 19.746, 10.0);
        assert_eq!(kind(load_finding(14.212, 6.477, throttled(2.79, 34.407, 10.0), base, &t)), note);
    }

    /// A load over the line while other processes used more than a quarter of the CPU time the server left, on
    /// either side, is a note that names the share and the side; below the limit the load is judged as before, and
    /// a load under the line is nothing whatever its neighbours did.
    #[test]
    fn a_load_beside_busy_neighbours_is_not_judged() {
        let t = thresholds();
        let beside = |c: f64, w: f64, n: f64| Some(LoadCpu { neighbours: Some(n), ..cpu(c, w).unwrap() });
        let f = load_finding(1.45, 0.84, beside(1.2, 0.1, 0.62), beside(0.8, 0.1, 0.02), &t).unwrap();
        assert_eq!((f.kind, f.severity), (FindingKind::SpeedUnsettled, Severity::Info), "{}", f.message);
        assert!(f.message.contains("62 % of the CPU time the server left during this run's load"), "{}", f.message);
        let f = load_finding(1.45, 0.84, beside(1.2, 0.1, 0.05), beside(0.8, 0.1, 0.3), &t).unwrap();
        assert!(f.message.contains("30 % of the CPU time the server left during the baseline's load"), "{}", f.message);
        let f = load_finding(1.45, 0.84, beside(1.2, 0.1, 0.2), beside(0.8, 0.1, 0.02), &t).unwrap();
        assert_eq!((f.kind, f.severity), (FindingKind::SlowLoad, Severity::Warn), "quiet enough: judged");
        let f = load_finding(1.45, 0.84, beside(1.2, 0.1, 0.9), None, &t).unwrap();
        assert_eq!(f.kind, FindingKind::SlowLoad, "no account on the baseline: the wall time decides");
        // A load that slept most of its time (1.2 s of a 1.45 s load off any CPU): its neighbours do not explain it.
        let f = load_finding(1.45, 0.84, beside(0.2, 0.05, 0.9), beside(0.15, 0.05, 0.9), &t).unwrap();
        assert_eq!(f.kind, FindingKind::SlowLoad, "{}", f.message);
        assert_eq!(load_finding(1.0, 0.84, beside(0.9, 0.1, 0.9), beside(0.8, 0.1, 0.9), &t), None);
    }
}
