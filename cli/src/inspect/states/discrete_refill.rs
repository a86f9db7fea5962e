//! Smyte's bucket states: the discrete refill's `dr1 <tokens> <refill
//! mark>` and sessionize's `ds1 <tokens> <refill mark> <session start>`
//! (unix nanoseconds).

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
    bucket(value, false, now, period, limit, refill)
}

/// `ds1 <tokens> <mark> <session start>`: the discrete refill's bucket,
/// and when the client's session started.
pub fn sessionize(value: Option<&str>, now: i64, period: i128, limit: u64, refill: u64) -> Decoded {
    bucket(value, true, now, period, limit, refill)
}

/// Either state: with a session start when `sessionize`.
fn bucket(
    value: Option<&str>,
    sessionize: bool,
    now: i64,
    period: i128,
    limit: u64,
    refill: u64,
) -> Decoded {
    let tag = if sessionize { "ds1" } else { "dr1" };
    let parsed = value.and_then(|text| {
        let mut words = text.trim().split(' ');
        (words.next()? == tag).then_some(())?;
        let tokens: u64 = words.next()?.parse().ok()?;
        let mark: i64 = words.next()?.parse().ok()?;
        let start: Option<i64> = match sessionize {
            true => Some(words.next()?.parse().ok()?),
            false => None,
        };
        words.next().is_none().then_some((tokens, mark, start))
    });
    let (max, refill, period) = (u128::from(limit), u128::from(refill.max(1)), period.max(1));
    let now = i128::from(now);
    // As of now: whole periods since the mark refilled, the mark moved by
    // them; a mark ahead of now refills nothing yet.
    let (tokens, mark) = match parsed {
        None => (max, now),
        Some((tokens, mark, _)) => {
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
        stored_tokens: parsed.map(|(tokens, _, _)| tokens),
        stored_mark_unix_ms: parsed.map(|(_, mark, _)| mark.div_euclid(1_000_000)),
        mark_unix_ms: clamp(mark.div_euclid(1_000_000)),
        tokens: tokens as u64,
        next_refill_ms: (tokens < max).then(|| after(1)),
        full_in_ms: after((max - tokens).div_ceil(refill)),
        sessionize,
        session_start_unix_ms: parsed
            .and_then(|(_, _, start)| start)
            .map(|start| start.div_euclid(1_000_000)),
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
        for other in ["dr2 1 5", "1 5", "dr1 x 5", "dr1 1 5 6", "ds1 1 5 6"] {
            let unreadable = discrete_refill(Some(other), NOW, MINUTE, 10, 3);
            assert_eq!(summary(&unreadable), ("unreadable", 10, 0, None), "{other}");
        }
        let absent = discrete_refill(None, NOW, MINUTE, 10, 3);
        assert_eq!(summary(&absent), ("absent", 10, 0, None));
    }

    #[test]
    fn a_sessionize_state_is_the_bucket_and_its_session_start() {
        let stored = format!("ds1 1 {} {}", NOW - 70 * SECOND, NOW - 90 * SECOND);
        let decoded = sessionize(Some(&stored), NOW, MINUTE, 10, 3);
        assert_eq!(summary(&decoded), ("decoded", 4, 110_000, Some(50_000)));
        let Detail::DiscreteRefill {
            session_start_unix_ms,
            ..
        } = decoded.0.detail
        else {
            panic!("{decoded:?}")
        };
        assert_eq!(session_start_unix_ms, Some((NOW - 90 * SECOND) / 1_000_000));
        for other in ["dr1 1 5", "ds1 1 5", "ds1 1 5 x", "ds1 1 5 6 7"] {
            let unreadable = sessionize(Some(other), NOW, MINUTE, 10, 3);
            assert_eq!(summary(&unreadable), ("unreadable", 10, 0, None), "{other}");
        }
    }
}
