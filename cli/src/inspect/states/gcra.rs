//! GCRA's state: the theoretical arrival time (TAT), in units of
//! `1/limit` nanoseconds since the epoch.

use super::{decoded, stored_as, whole, Decoded, Detail};
use crate::inspect::units::{clamp, ms_up};

/// A theoretical arrival time in units of `1/limit` nanoseconds; `burst`
/// requests at once, one more every `period/limit`.
pub fn gcra(value: Option<&str>, now: i64, period: i128, limit: u64, burst: u64) -> Decoded {
    let parsed: Option<i128> = value.and_then(|text| text.trim().parse().ok());
    let l = i128::from(limit);
    let now_units = i128::from(now).saturating_mul(l);
    let tolerance = i128::from(burst).saturating_mul(period);
    let tat = parsed.unwrap_or(now_units).max(now_units);
    // How far ahead of now the client is booked.
    let booked = tat.saturating_sub(now_units);
    let tokens = (tolerance - booked) as f64 / period as f64;
    let to_ms = |units: i128| ms_up(u128::try_from(units.saturating_add(l - 1) / l).unwrap_or(0));
    let next_refill = (booked > 0).then(|| {
        let next = (tolerance - booked).div_euclid(period) + 1;
        let target = (tolerance - next.saturating_mul(period)).max(0);
        to_ms(booked - target)
    });
    let detail = Detail::Gcra {
        burst,
        emission_interval_ms: period as f64 / l as f64 / 1e6,
        stored_tat_unix_ms: parsed.map(|tat| clamp(tat.div_euclid(l).div_euclid(1_000_000))),
        tokens,
        next_refill_ms: next_refill,
        full_in_ms: to_ms(booked),
    };
    decoded(stored_as(value, &parsed), detail, whole(tokens))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{summary, MINUTE, NOW, SECOND};
    use super::*;

    #[test]
    fn a_gcra_tat_is_in_units_of_one_over_the_limit() {
        // 3 per minute, burst 3: a TAT 40 s ahead leaves one token.
        let tat = (i128::from(NOW) + 40 * i128::from(SECOND)) * 3;
        let decoded = gcra(Some(&tat.to_string()), NOW, MINUTE, 3, 3);
        assert_eq!(summary(&decoded), ("decoded", 1, 40_000, Some(20_000)));
    }
}
