//! How fast the machine itself is, measured beside a server that decodes on the CPU. The gate's CPU account
//! ([`super::sched`]) puts each case's decode onto the server's own CPU clock, but that clock is not fixed: on a
//! virtual machine the host's other guests share its last-level cache, its memory and its cores, and their work
//! makes each CPU second of the server buy fewer tokens, with nothing in the guest's counters to show it. Measured
//! on a quiet 2-core VM (2026-12-07, docs/src/validation/2026-12-07-machine-probe.md): a one-thread llama.cpp's CPU
//! time per 64-token request went from 0.87–0.92 s to 1.0–1.5 s for minutes with nothing else running in the VM,
//! while a pass over a buffer the size of the last-level cache fell from 11–12 GB/s to 4.5–10 (the host's other
//! guests held the cache); a CI run of the same day had its baseline take 37 % more CPU time per token than the run
//! ten seconds later, no wait, no neighbour, no steal.
//!
//! So before each case, while the server is idle, gauntlet times a fixed piece of work of its own: a pass over a
//! buffer as large as one core's last-level cache (what a decode on the CPU keeps there or goes to memory for) and
//! a chain of dependent floating-point steps (the core's own speed). Two runs whose machines differ in either by
//! more than the gate allows are not compared on decode; see `compare::speed`.
//!
//! The work is gauntlet's, in gauntlet's process and CPU group: a server's own CPU quota never slows it.

use std::time::Instant;

use gauntlet_schema::MachineSpeed;

use crate::util::bounded::read_text;

/// The buffer when the machine does not say how large its last-level cache is.
const BUFFER_DEFAULT: usize = 32 << 20;
/// The bounds on the buffer, whatever the machine says: a pass takes between a fraction of a millisecond and a few
/// tens of milliseconds.
const BUFFER_MIN: usize = 4 << 20;
const BUFFER_MAX: usize = 256 << 20;
/// Steps in one arithmetic chain: a few milliseconds on a 2026 core.
const CHAIN_STEPS: u32 = 4_000_000;
/// Passes of each kind per reading; the fastest counts (the others were interrupted or met a cold cache).
const PASSES: usize = 2;
/// Readings taken at each stop (before each case, after the last): their medians over a run of eight cases are
/// of 27, which a reading interrupted by the host leaves alone.
pub const READINGS_PER_STOP: usize = 3;
/// A sysfs cache `size` is a short line (`32768K`).
const SIZE_CAP: u64 = 64;

/// One reading of the machine's speed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    /// Bytes read per second in a pass over the buffer.
    pub memory_bytes_per_second: f64,
    /// Dependent floating-point steps per second.
    pub steps_per_second: f64,
}

/// The fixed work and its buffer, allocated and touched once per run.
pub struct Probe {
    buffer: Vec<u64>,
}

impl Default for Probe {
    fn default() -> Self {
        Self::new()
    }
}

impl Probe {
    /// The buffer sized like CPU 0's last-level cache ([`last_level_cache`]), within [`BUFFER_MIN`] and
    /// [`BUFFER_MAX`].
    pub fn new() -> Self {
        let bytes = last_level_cache(std::path::Path::new("/sys/devices/system/cpu/cpu0/cache"))
            .unwrap_or(BUFFER_DEFAULT)
            .clamp(BUFFER_MIN, BUFFER_MAX);
        Self::with_buffer(bytes)
    }

    fn with_buffer(bytes: usize) -> Self {
        let words = bytes / 8;
        // Distinct values, written once, so that every page is the process's own before the first pass.
        let buffer = (0..words as u64).map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).collect();
        Self { buffer }
    }

    /// [`READINGS_PER_STOP`] readings, those that measured something.
    pub fn readings(&self) -> Vec<Reading> {
        (0..READINGS_PER_STOP).filter_map(|_| self.read()).collect()
    }

    /// Time the fixed work: the fastest of [`PASSES`] passes of each kind. None when a clock read nothing (a pass
    /// faster than the clock can tell).
    pub fn read(&self) -> Option<Reading> {
        let mut memory = f64::INFINITY;
        let mut chain = f64::INFINITY;
        for _ in 0..PASSES {
            let started = Instant::now();
            std::hint::black_box(gauntlet_probe::sum(std::hint::black_box(&self.buffer)));
            memory = memory.min(started.elapsed().as_secs_f64());
        }
        for _ in 0..PASSES {
            let started = Instant::now();
            std::hint::black_box(gauntlet_probe::steps(std::hint::black_box(1.0), CHAIN_STEPS));
            chain = chain.min(started.elapsed().as_secs_f64());
        }
        let rate = |work: f64, secs: f64| (secs.is_finite() && secs > 0.0).then(|| work / secs);
        Some(Reading {
            memory_bytes_per_second: rate((self.buffer.len() * 8) as f64, memory)?,
            steps_per_second: rate(f64::from(CHAIN_STEPS), chain)?,
        })
    }
}

/// The size of the highest-level data or unified cache under a sysfs `cache` directory (`indexN/level`, `type`,
/// `size` as `32768K`), in bytes. None when nothing there reads as one.
fn last_level_cache(dir: &std::path::Path) -> Option<usize> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut best: Option<(u32, usize)> = None;
    for entry in entries.flatten().take(64) {
        let at = entry.path();
        let field = |name: &str| read_text(&at.join(name), SIZE_CAP).ok().map(|t| t.trim().to_owned());
        let (Some(level), Some(kind), Some(size)) = (field("level"), field("type"), field("size")) else {
            continue;
        };
        let (Ok(level), Some(bytes)) = (level.parse::<u32>(), parse_size(&size)) else { continue };
        if kind != "Instruction" && best.is_none_or(|(l, _)| level > l) {
            best = Some((level, bytes));
        }
    }
    best.map(|b| b.1)
}

/// A sysfs cache size: digits with an optional `K`, `M` or `G` suffix. None for anything else or an overflow.
fn parse_size(text: &str) -> Option<usize> {
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((at, _)) => text.split_at(at),
        None => (text, ""),
    };
    let n: usize = digits.parse().ok()?;
    let scale = match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(scale)
}

/// The record's form of some readings: the median memory rate and the median step rate, each on its own, and how
/// many readings. None without a reading that measured both.
pub fn speed(readings: &[Reading]) -> Option<MachineSpeed> {
    let mid = |f: fn(&Reading) -> f64| {
        let mut v: Vec<f64> = readings.iter().map(f).filter(|x| x.is_finite() && *x > 0.0).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        match n {
            0 => None,
            _ if n % 2 == 1 => Some(v[n / 2]),
            _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
        }
    };
    Some(MachineSpeed {
        memory_bytes_per_second: mid(|r| r.memory_bytes_per_second)?,
        steps_per_second: mid(|r| r.steps_per_second)?,
        readings: u32::try_from(readings.len()).unwrap_or(u32::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reading_is_two_positive_rates_and_the_summary_takes_each_median_on_its_own() {
        let r = Probe::new().read().expect("a reading");
        assert!(r.memory_bytes_per_second > 1e8 && r.memory_bytes_per_second.is_finite(), "{r:?}");
        assert!(r.steps_per_second > 1e6 && r.steps_per_second.is_finite(), "{r:?}");
        let at = |m: f64, s: f64| Reading { memory_bytes_per_second: m, steps_per_second: s };
        let summary = |m: f64, s: f64, readings: u32| {
            Some(MachineSpeed { memory_bytes_per_second: m, steps_per_second: s, readings })
        };
        assert_eq!(speed(&[at(1.0, 30.0), at(3.0, 10.0), at(2.0, 20.0)]), summary(2.0, 20.0, 3));
        assert_eq!(speed(&[at(1.0, 10.0), at(3.0, f64::NAN), at(2.0, 30.0)]), summary(2.0, 20.0, 3));
        assert_eq!(speed(&[]), None);
    }

    #[test]
    fn the_buffer_is_the_last_level_cache_read_without_trust() {
        assert_eq!(parse_size("32768K"), Some(32 << 20));
        assert_eq!(parse_size("8M"), Some(8 << 20));
        assert_eq!(parse_size("512"), Some(512));
        for bad in ["", "K", "12KB", "-1K", "1.5M", "99999999999999999999G"] {
            assert_eq!(parse_size(bad), None, "{bad:?}");
        }
        let dir = tempfile::tempdir().unwrap();
        let index = |n: u32, level: &str, kind: &str, size: &str| {
            let d = dir.path().join(format!("index{n}"));
            std::fs::create_dir_all(&d).unwrap();
            for (name, text) in [("level", level), ("type", kind), ("size", size)] {
                std::fs::write(d.join(name), format!("{text}\n")).unwrap();
            }
        };
        assert_eq!(last_level_cache(dir.path()), None);
        index(0, "1", "Data", "32K");
        index(1, "1", "Instruction", "32K");
        index(2, "2", "Unified", "512K");
        assert_eq!(last_level_cache(dir.path()), Some(512 << 10));
        index(3, "3", "Unified", "32768K");
        index(4, "4", "Instruction", "1G");
        index(5, "x", "Unified", "1G");
        assert_eq!(last_level_cache(dir.path()), Some(32 << 20));
        assert_eq!(last_level_cache(&dir.path().join("missing")), None);
        assert_eq!(Probe::with_buffer(BUFFER_MIN).buffer.len() * 8, BUFFER_MIN);
    }
}
