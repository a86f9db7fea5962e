//! The hybrid quota's state: `<b|s> <bucket> <time>`, bursty or smooth.

use super::{decoded, next_whole_wait, stored_as, wait, whole, Decoded, Detail, EPSILON};
use crate::inspect::units::{clamp, ms_up};

/// `<b|s> <bucket> <time>`: bursty, with the bucket's whole tokens until
/// the fixed window starting at `time` ends; or smooth, earning `limit`
/// per `period` since `time`, bursty again once the bucket holds the
/// whole quota.
pub fn hybrid_quota(value: Option<&str>, now: i64, period: i128, limit: u64) -> Decoded {
    let q = limit as f64;
    let parsed = value.and_then(|text| {
        let mut parts = text.split(' ');
        let smooth = match parts.next()? {
            "b" => false,
            "s" => true,
            _ => return None,
        };
        let bucket: f64 = parts.next()?.parse().ok()?;
        let time: i64 = parts.next()?.parse().ok()?;
        let sane = bucket.is_finite() && (-q..=q).contains(&bucket) && parts.next().is_none();
        sane.then_some((smooth, bucket, time))
    });
    // Tokens per nanosecond.
    let rate = q / period as f64;
    let now128 = i128::from(now);
    let (mode, window_end, tokens, next_refill, full_in) = match parsed {
        None => ("new", None, q, None, 0),
        Some((false, bucket, time)) => {
            let end = i128::from(time) + period;
            if end <= now128 {
                ("bursty, window over", None, q, None, 0)
            } else {
                let left = ms_up((end - now128) as u128);
                let next = (bucket < q - EPSILON).then_some(left);
                (
                    "bursty",
                    Some(clamp(end.div_euclid(1_000_000))),
                    bucket,
                    next,
                    left,
                )
            }
        }
        Some((true, bucket, time)) => {
            let earned = (now128 - i128::from(time)).max(0) as f64 * rate;
            let tokens = bucket + earned;
            if tokens >= q - EPSILON {
                ("smooth, refilled", None, q, None, 0)
            } else {
                let next = ms_up(next_whole_wait(tokens, q, rate));
                let full = ms_up(wait(q - tokens, rate));
                ("smooth", None, tokens, Some(next), full)
            }
        }
    };
    let detail = Detail::HybridQuota {
        stored_mode: parsed.map(|(smooth, _, _)| if smooth { "smooth" } else { "bursty" }),
        stored_bucket: parsed.map(|(_, bucket, _)| bucket),
        stored_at_unix_ms: parsed.map(|(_, _, time)| time.div_euclid(1_000_000)),
        mode,
        window_end_unix_ms: window_end,
        tokens,
        next_refill_ms: next_refill,
        full_in_ms: full_in,
    };
    decoded(stored_as(value, &parsed), detail, whole(tokens))
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{summary, MINUTE, NOW, SECOND};
    use super::*;

    #[test]
    fn a_hybrid_quota_reads_by_its_mode() {
        let read = |value: String| summary(&hybrid_quota(Some(&value), NOW, MINUTE, 3));
        let bursty = format!("b 1 {}", NOW - 15 * SECOND);
        assert_eq!(read(bursty), ("decoded", 1, 45_000, Some(45_000)));
        let over = format!("b 1 {}", NOW - 61 * SECOND);
        assert_eq!(read(over), ("decoded", 3, 0, None));
        // Smooth, at −0.5 10 s ago: 3 per minute earns 0.5, so 0 now.
        let smooth = format!("s -0.5 {}", NOW - 10 * SECOND);
        assert_eq!(read(smooth), ("decoded", 0, 60_000, Some(20_000)));
    }
}
