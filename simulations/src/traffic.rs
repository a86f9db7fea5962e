//! Seeded Poisson arrivals for one client.

use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Arrival times, as offsets from the start, of a Poisson process of
/// `per_second` requests per second over `length`, drawn from a `StdRng`
/// seeded with `seed`: exponential gaps of mean `1 / per_second`, rounded
/// to the nanosecond.
pub fn poisson(seed: u64, per_second: f64, length: Duration) -> Vec<Duration> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut arrivals = Vec::new();
    let mut at = 0.0;
    loop {
        // 1 - U is in (0, 1], so the logarithm is finite.
        let u: f64 = rng.random();
        at += -(1.0 - u).ln() / per_second;
        let at = Duration::from_secs_f64(at);
        if at >= length {
            return arrivals;
        }
        arrivals.push(at);
    }
}
