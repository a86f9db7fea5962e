//! The token bucket's state: `<tokens> <updated>` (unix nanoseconds).

use super::{decoded, next_whole_wait, stored_as, wait, whole, Decoded, Detail, EPSILON};
use crate::inspect::units::ms_up;

/// `<tokens> <updated>`, refilled at `limit` per `period` nanoseconds up to
/// `capacity`.
pub fn token_bucket(
    value: Option<&str>,
    now: i64,
    period: i128,
    limit: u64,
    capacity: u64,
) -> Decoded {
    let cap = capacity as f64;
    let parsed = value.and_then(|text| {
        let (tokens, updated) = text.trim().split_once(' ')?;
        let tokens: f64 = tokens.parse().ok()?;
        let updated: i64 = updated.parse().ok()?;
        (tokens.is_finite() && (-cap..=cap).contains(&tokens)).then_some((tokens, updated))
    });
    // Tokens per nanosecond.
    let rate = limit as f64 / period as f64;
    let (tokens, lead) = match parsed {
        None => (cap, 0),
        Some((tokens, updated)) => {
            let earned = (i128::from(now) - i128::from(updated)).max(0) as f64 * rate;
            let lead = (i128::from(updated) - i128::from(now)).max(0) as u128;
            ((tokens + earned).min(cap), lead)
        }
    };
    let next_refill =
        (tokens < cap - EPSILON).then(|| ms_up(lead + next_whole_wait(tokens, cap, rate)));
    let detail = Detail::TokenBucket {
        capacity,
        refill_per_second: rate * 1e9,
        stored_tokens: parsed.map(|(tokens, _)| tokens),
        stored_at_unix_ms: parsed.map(|(_, updated)| updated.div_euclid(1_000_000)),
        tokens,
        next_refill_ms: next_refill,
        full_in_ms: ms_up(lead + wait(cap - tokens, rate)),
    };
    decoded(stored_as(value, &parsed), detail, whole(tokens))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{summary, MINUTE, NOW, SECOND};
    use super::*;

    #[test]
    fn a_token_bucket_refills_from_its_stored_time() {
        // 1 token 10 s ago, 3 per minute: 1.5 now.
        let stored = format!("1 {}", NOW - 10 * SECOND);
        let decoded = token_bucket(Some(&stored), NOW, MINUTE, 3, 3);
        assert_eq!(summary(&decoded), ("decoded", 1, 30_000, Some(10_000)));
        let Detail::TokenBucket { tokens, .. } = decoded.0.detail else {
            panic!("{decoded:?}")
        };
        assert!((tokens - 1.5).abs() < 1e-9);
        let unreadable = token_bucket(Some("many"), NOW, MINUTE, 3, 3);
        assert_eq!(summary(&unreadable), ("unreadable", 3, 0, None));
    }
}
