//! The fixed trace of the instruction-count benchmark
//! (`benches/instructions.rs`), and the table made from its results.

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Decisions in one trace; instructions per decision are a case's count
/// divided by this.
pub const TRACE: usize = 1_000;

/// Seed of the many-client trace.
const SEED: u64 = 42;

/// The instant the limiters' clocks stand at: 37.5 s into the current
/// minute, where the bucket before the current one is sealed (closed more
/// than the default 1.1 s earlier) at every sub-window count but 60, whose
/// 1 s buckets are always within that allowance of the present.
pub fn fixed_time() -> DateTime<Utc> {
    let minute = Utc::now()
        .duration_trunc(TimeDelta::minutes(1))
        .expect("a minute is a whole number of nanoseconds");
    minute + TimeDelta::milliseconds(37_500)
}

/// `length` client indices below `clients`, drawn uniformly with a fixed
/// seed: the same trace in every run.
pub fn picks(clients: usize, length: usize) -> Vec<u32> {
    let mut rng = StdRng::seed_from_u64(SEED);
    (0..length)
        .map(|_| rng.random_range(0..clients as u32))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trace_is_the_same_every_time_and_spreads_over_the_clients() {
        let trace = picks(100_000, TRACE);
        assert_eq!(trace, picks(100_000, TRACE));
        assert!(trace.iter().all(|&i| i < 100_000));
        let distinct: std::collections::HashSet<_> = trace.iter().collect();
        assert!(distinct.len() > 990, "{} distinct", distinct.len());
        assert_eq!(picks(1, 10), vec![0; 10]);
    }

    #[test]
    fn the_clock_stands_inside_a_minute_past_the_seal_of_15_s_buckets() {
        use chrono::Timelike;
        let at = fixed_time();
        assert_eq!(at.second(), 37);
        assert_eq!(at.nanosecond(), 500_000_000);
    }
}
