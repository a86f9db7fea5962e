//! Arrival processes: the times, in nanoseconds since the start of a run,
//! at which one client sends. Random ones draw from a caller's seeded
//! `StdRng`, so a run is reproduced exactly from its seed.

use rand::distr::weighted::WeightedIndex;
use rand::distr::Distribution;
use rand::rngs::StdRng;
use rand::Rng;

/// Nanoseconds in a second.
pub const SECOND: u64 = 1_000_000_000;

/// A Poisson process of `per_second` arrivals per second over `[from, to)`:
/// exponential gaps of mean `1 / per_second`, rounded down to the
/// nanosecond.
pub fn poisson(rng: &mut StdRng, per_second: f64, from: u64, to: u64) -> Vec<u64> {
    let mut arrivals = Vec::new();
    if per_second <= 0.0 {
        return arrivals;
    }
    let mut at = from as f64;
    loop {
        // 1 − U is in (0, 1], so the logarithm is finite.
        let u: f64 = rng.random();
        at += -(1.0 - u).ln() / per_second * SECOND as f64;
        if at >= to as f64 {
            return arrivals;
        }
        arrivals.push(at as u64);
    }
}

/// Evenly spaced arrivals at `per_second` over `[from, to)`, the first at
/// `from`: arrival `k` at `from + round(k / per_second)`, so spacing errors
/// never accumulate.
pub fn steady(per_second: f64, from: u64, to: u64) -> Vec<u64> {
    let gap = SECOND as f64 / per_second;
    (0u64..)
        .map(|k| from + (k as f64 * gap).round() as u64)
        .take_while(|&at| at < to)
        .collect()
}

/// On/off bursts: Poisson arrivals at `per_second` during each `on` span,
/// silence during each `off` span, the cycle starting `phase` into an `on`
/// span at time 0, over `[0, length)`.
pub fn on_off(
    rng: &mut StdRng,
    per_second: f64,
    on: u64,
    off: u64,
    phase: u64,
    length: u64,
) -> Vec<u64> {
    let cycle = on + off;
    let mut arrivals = Vec::new();
    // Cycle `k` is on over [k·cycle − phase, k·cycle − phase + on).
    let mut start = 0i128 - i128::from(phase % cycle);
    while start < i128::from(length) {
        let from = start.max(0) as u64;
        let to = ((start + i128::from(on)).max(0) as u64).min(length);
        if from < to {
            arrivals.extend(poisson(rng, per_second, from, to));
        }
        start += i128::from(cycle);
    }
    arrivals
}

/// The boundary attack: `count` requests evenly spread over the `spread`
/// just before a window boundary, and `count` more over the `spread` just
/// after it, at every `every`-th boundary of `period` from the first one
/// (time `period`), over `[0, length)`. Time 0 is itself a boundary.
pub fn boundary_attack(count: u64, period: u64, spread: u64, every: u64, length: u64) -> Vec<u64> {
    let step = spread / count;
    let mut arrivals = Vec::new();
    let mut boundary = period;
    while boundary + spread <= length {
        arrivals.extend((0..count).map(|k| boundary - spread + k * step));
        arrivals.extend((0..count).map(|k| boundary + k * step));
        boundary += every * period;
    }
    arrivals
}

/// Zipf-like weights: client `k` (0-based rank) gets `1 / (k + 1)^exponent`.
pub fn zipf_weights(clients: usize, exponent: f64) -> Vec<f64> {
    (0..clients)
        .map(|k| 1.0 / ((k + 1) as f64).powf(exponent))
        .collect()
}

/// A population sharing one Poisson process of `per_second` arrivals over
/// `[0, length)`, each arrival going to a client drawn by `weights`.
/// Splitting a Poisson process by independent draws gives each client its
/// own Poisson process, of rate `per_second × weight / Σ weights`.
pub fn population(
    rng: &mut StdRng,
    per_second: f64,
    weights: &[f64],
    length: u64,
) -> Vec<(u64, u32)> {
    let pick = WeightedIndex::new(weights).expect("positive weights");
    poisson(rng, per_second, 0, length)
        .into_iter()
        .map(|at| (at, pick.sample(rng) as u32))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn poisson_has_the_asked_rate() {
        let mut rng = StdRng::seed_from_u64(1);
        let arrivals = poisson(&mut rng, 10.0, 0, 1_000 * SECOND);
        assert!(
            (9_700..10_300).contains(&arrivals.len()),
            "{}",
            arrivals.len()
        );
        assert!(arrivals.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn steady_is_evenly_spaced() {
        let arrivals = steady(3.0, SECOND, 2 * SECOND);
        assert_eq!(
            arrivals,
            vec![SECOND, SECOND + 333_333_333, SECOND + 666_666_667]
        );
    }

    #[test]
    fn on_off_is_silent_when_off() {
        let mut rng = StdRng::seed_from_u64(2);
        let arrivals = on_off(
            &mut rng,
            50.0,
            10 * SECOND,
            20 * SECOND,
            5 * SECOND,
            100 * SECOND,
        );
        for at in arrivals {
            let into_cycle = (at + 5 * SECOND) % (30 * SECOND);
            assert!(into_cycle < 10 * SECOND, "{at}");
        }
    }

    #[test]
    fn the_attack_straddles_boundaries() {
        let arrivals = boundary_attack(4, 60 * SECOND, SECOND, 3, 250 * SECOND);
        assert_eq!(arrivals.len(), 16);
        assert_eq!(arrivals[3], 59 * SECOND + 750_000_000);
        assert_eq!(arrivals[4], 60 * SECOND);
        assert_eq!(arrivals[8], 239 * SECOND);
    }
}
