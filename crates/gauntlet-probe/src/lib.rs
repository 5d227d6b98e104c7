//! The fixed work gauntlet times to tell how fast the machine itself is (the engine's `server::probe` times it and
//! says why). Its own crate so that it is compiled optimised in every profile (the workspace's
//! `[profile.dev.package.gauntlet-probe]`): unoptimised, a pass over memory is bound by the instructions around
//! each load and measures the compiler, not the memory, and the real-server tests run debug builds. The functions
//! are not `#[inline]`, so a caller in a debug crate calls this crate's optimised code.

/// The wrapping sum of `words`, four lanes wide so that the core is never the limit: a pass over them at the speed
/// the caches and memory deliver.
pub fn sum(words: &[u64]) -> u64 {
    let mut lanes = [0u64; 4];
    let chunks = words.chunks_exact(4);
    let rest = chunks.remainder().iter().fold(0u64, |a, b| a.wrapping_add(*b));
    for chunk in chunks {
        for (lane, w) in lanes.iter_mut().zip(chunk) {
            *lane = lane.wrapping_add(*w);
        }
    }
    lanes.iter().fold(rest, |a, b| a.wrapping_add(*b))
}

/// `n` dependent multiply-adds from `y`: each step waits for the one before, so the time is the core's latency.
pub fn steps(mut y: f64, n: u32) -> f64 {
    for _ in 0..n {
        y = y * 1.000_000_1 + 1e-9;
    }
    y
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sum_is_every_word_s_wrapping_sum() {
        for len in [0, 1, 3, 4, 10] {
            let words: Vec<u64> = (0..len).map(|i| u64::MAX - i).collect();
            assert_eq!(sum(&words), words.iter().fold(0u64, |a, b| a.wrapping_add(*b)), "{len} words");
        }
    }

    #[test]
    fn the_steps_are_the_recurrence() {
        assert_eq!(steps(1.0, 0), 1.0);
        assert_eq!(steps(1.0, 2), (1.0f64 * 1.000_000_1 + 1e-9) * 1.000_000_1 + 1e-9);
    }
}
