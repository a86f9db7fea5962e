//! The discrete refill's state: `dr1 <tokens> <refill mark>` (unix
//! nanoseconds), Smyte's token bucket.

use super::{decoded, stored_as, Decoded, Detail};
use crate::inspect::units::{clamp, ms_up};

/// `dr1 <tokens> <mark>`: at most `limit` tokens, `refill` more at each
/// whole `period` nanoseconds after the mark, which moves by whole periods.
pub fn discrete_refill(
    value: Option<&str>,
    now: i64,
    period: i128,
    limit: u64,
    refill: u64,
) -> Decoded {
    let parsed = value.and_then(|text| {
        let mut words = text.trim().split(' ');
        (words.next()? == "dr1").then_some(())?;
        let tokens: u64 = words.next()?.parse().ok()?;
        let mark: i64 = words.next()?.parse().ok()?;
        words.next().is_none().then_some((tokens, mark))
    });
    let (max, refill, period) = (u128::from(limit), u128::from(refill.max(1)), period.max(1));
    let now = i128::from(now);
    // As of now: whole periods since the mark refilled, the mark moved by
    // them; a mark ahead of now refills nothing yet.
    let (tokens, mark) = match parsed {
        None => (max, now),
        Some((tokens, mark)) => {
            let mark = i128::from(mark);
            let refills = u128::try_from((now - mark).max(0) / period).unwrap_or(0);
            let tokens = u128::from(tokens)
                .saturating_add(refills.saturating_mul(refill))
                .min(max);
            (tokens, mark + refills as i128 * period)
        }
    };
    // From now until `refills` periods after the mark.
    let after = |refills: u128| {
        let at = mark.saturating_add(
            i128::try_from(refills)
                .unwrap_or(i128::MAX)
                .saturating_mul(period),
        );
        ms_up(u128::try_from(at.saturating_sub(now)).unwrap_or(0))
    };
    let detail = Detail::DiscreteRefill {
        refill: refill as u64,
        refill_every_ms: period as f64 / 1e6,
        stored_tokens: parsed.map(|(tokens, _)| tokens),
        stored_mark_unix_ms: parsed.map(|(_, mark)| mark.div_euclid(1_000_000)),
        mark_unix_ms: clamp(mark.div_euclid(1_000_000)),
        tokens: tokens as u64,
        next_refill_ms: (tokens < max).then(|| after(1)),
        full_in_ms: after((max - tokens).div_ceil(refill)),
    };
    decoded(stored_as(value, &parsed), detail, tokens as u64)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{summary, MINUTE, NOW, SECOND};
    use super::*;

    #[test]
    fn a_discrete_refill_comes_back_in_whole_periods_from_its_mark() {
        // 1 of 10, 3 back a minute: 70 s after the mark, one refill (4),
        // the mark a minute on; 6 missing, two more refills.
        let stored = format!("dr1 1 {}", NOW - 70 * SECOND);
        let decoded = discrete_refill(Some(&stored), NOW, MINUTE, 10, 3);
        assert_eq!(summary(&decoded), ("decoded", 4, 110_000, Some(50_000)));
        let Detail::DiscreteRefill { mark_unix_ms, .. } = decoded.0.detail else {
            panic!("{decoded:?}")
        };
        assert_eq!(mark_unix_ms, (NOW - 10 * SECOND) / 1_000_000);
        for other in ["dr2 1 5", "1 5", "dr1 x 5", "dr1 1 5 6"] {
            let unreadable = discrete_refill(Some(other), NOW, MINUTE, 10, 3);
            assert_eq!(summary(&unreadable), ("unreadable", 10, 0, None), "{other}");
        }
        let absent = discrete_refill(None, NOW, MINUTE, 10, 3);
        assert_eq!(summary(&absent), ("absent", 10, 0, None));
    }
}
