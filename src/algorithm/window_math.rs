//! The pure core of the counter windows: the estimate, and the decision
//! drawn from it. No store, no clock: counts and a time go in, a verdict
//! comes out, so this is what the unit tests and simulations exercise.
//!
//! `counts[0]` is the current bucket and `counts[k]` the bucket `k` before
//! it; there are `history + 1` of them. With no history (the fixed window)
//! the estimate is the current count. With a history of `n` (the sliding
//! window of `n` sub-windows) the window of one period ending now covers the
//! current bucket, the `n - 1` before it in full, and the part of the oldest
//! one that has not yet slid out, which is weighted by that part:
//!
//! ```text
//! estimate = counts[0] + ... + counts[n-1] + counts[n] * (1 - elapsed)
//! ```
//!
//! where `elapsed` is the fraction of the current bucket already gone
//! (seed `000_2b9745f3300e7285.txt`, "Approximated sliding window").

use std::time::Duration;

use super::buckets::Buckets;

/// The outcome of one decision, before it is wrapped in a
/// [`Decision`](crate::Decision).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Verdict {
    pub(crate) allowed: bool,
    pub(crate) used: f64,
    pub(crate) remaining: u64,
    pub(crate) reset_after: Duration,
    pub(crate) retry_after: Option<Duration>,
}

/// Comparisons allow this much floating-point slack per unit of limit, so
/// that an estimate that is exactly at the limit on paper is at the limit.
const EPSILON: f64 = 1e-9;

/// The approximated count in the window ending `elapsed` into the current
/// bucket.
pub(crate) fn estimate(counts: &[u64], elapsed: f64) -> f64 {
    match counts.split_last() {
        None => 0.0,
        Some((&only, [])) => only as f64,
        Some((&oldest, newer)) => {
            newer.iter().map(|&c| c as f64).sum::<f64>() + oldest as f64 * (1.0 - elapsed)
        }
    }
}

fn fits(estimate: f64, limit: u64) -> bool {
    estimate <= limit as f64 * (1.0 + EPSILON) + EPSILON
}

/// Whether a request whose cost is already in `counts[0]` is within
/// `limit`.
pub(crate) fn admits(counts: &[u64], elapsed: f64, limit: u64) -> bool {
    fits(estimate(counts, elapsed), limit)
}

/// The verdict for a request of `cost`, given `counts` as they stand once
/// the decision is settled (with the request's cost in `counts[0]` when it
/// was allowed or counted anyway, without it when it was refunded).
pub(crate) fn verdict(
    buckets: &Buckets,
    counts: &[u64],
    now_nanos: i64,
    allowed: bool,
    cost: u64,
    limit: u64,
) -> Verdict {
    let elapsed = buckets.elapsed_fraction(now_nanos);
    let used = estimate(counts, elapsed);
    let remaining = (limit as f64 - used + EPSILON).floor().max(0.0) as u64;
    Verdict {
        allowed,
        used,
        remaining,
        reset_after: reset_after(buckets, counts, now_nanos),
        retry_after: (!allowed).then(|| retry_after(buckets, counts, now_nanos, cost, limit)),
    }
}

/// Time until every counted request has slid out of the window: the newest
/// non-empty bucket stops counting at the end of the bucket `history` after
/// it.
fn reset_after(buckets: &Buckets, counts: &[u64], now_nanos: i64) -> Duration {
    let index = buckets.index(now_nanos);
    match counts.iter().position(|&c| c > 0) {
        None => Duration::ZERO,
        Some(age) => buckets.until(
            now_nanos,
            index - age as i64 + i64::from(buckets.history()) + 1,
            0.0,
        ),
    }
}

/// The earliest time at which a request of `cost` would fit if nothing else
/// arrives. The estimate only falls as time passes: within bucket `j` it is
/// the sum of the newer buckets plus the oldest one's falling share, and at
/// `history + 1` buckets from now it is zero, which a cost within the limit
/// always fits.
fn retry_after(
    buckets: &Buckets,
    counts: &[u64],
    now_nanos: i64,
    cost: u64,
    limit: u64,
) -> Duration {
    let index = buckets.index(now_nanos);
    let history = buckets.history() as usize;
    // The count of the bucket `ahead` buckets from now minus `age`, where
    // future buckets are empty.
    let count_at = |ahead: usize, age: usize| -> u64 {
        age.checked_sub(ahead)
            .and_then(|back| counts.get(back))
            .copied()
            .unwrap_or(0)
    };
    for ahead in 0..=history + 1 {
        let from = if ahead == 0 {
            buckets.elapsed_fraction(now_nanos)
        } else {
            0.0
        };
        let bucket = index + ahead as i64;
        if history == 0 {
            if fits((count_at(ahead, 0) + cost) as f64, limit) {
                return buckets.until(now_nanos, bucket, from);
            }
            continue;
        }
        let newer: u64 = (0..history).map(|age| count_at(ahead, age)).sum();
        let oldest = count_at(ahead, history) as f64;
        let room = limit as f64 - (newer + cost) as f64;
        if room < -EPSILON {
            continue;
        }
        // oldest * (1 - f) <= room  <=>  f >= 1 - room / oldest
        let needed = if oldest <= 0.0 {
            0.0
        } else {
            1.0 - room / oldest
        };
        if needed < 1.0 {
            return buckets.until(now_nanos, bucket, needed.max(from));
        }
    }
    buckets.until(now_nanos, index + history as i64 + 2, 0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn weights_the_previous_minute_by_what_is_still_inside() {
        // 42 requests in the previous minute, 18 in this one, 15 s in.
        assert_eq!(estimate(&[18, 42], 0.25), 49.5);
        // Under constant load the approximation is exact.
        assert_eq!(estimate(&[25, 100], 0.25), 100.0);
    }

    #[test]
    fn sub_windows_weight_only_the_oldest() {
        // Four 15 s windows plus the partial oldest one, 5 s into the current.
        let counts = [1, 2, 3, 4, 30];
        assert!((estimate(&counts, 1.0 / 3.0) - (10.0 + 20.0)).abs() < 1e-9);
    }

    #[test]
    fn fixed_window_retry_is_the_next_window() {
        let buckets = Buckets::new(MINUTE, 1, 0).unwrap();
        let now = 20_000_000_000; // 20 s into a minute
        let v = verdict(&buckets, &[10], now, false, 1, 10);
        assert_eq!(v.retry_after, Some(Duration::from_secs(40)));
        assert_eq!(v.reset_after, Duration::from_secs(40));
        assert_eq!(v.remaining, 0);
    }

    #[test]
    fn sliding_retry_waits_for_the_old_share_to_slide_out() {
        let buckets = Buckets::new(MINUTE, 1, 1).unwrap();
        let now = 15_000_000_000; // 15 s in: weight 0.75
                                  // 60 before, 40 now: estimate 85; a cost of 20 fits once
                                  // 40 + 60 (1 - f) <= 80, i.e. f >= 1/3, 20 s in: 5 s from now.
        let v = verdict(&buckets, &[40, 60], now, false, 20, 100);
        assert_eq!(v.retry_after, Some(Duration::from_secs(5)));
        assert_eq!(v.remaining, 15);
        // The 40 of this minute stop counting at the end of the next one.
        assert_eq!(v.reset_after, Duration::from_secs(105));
    }

    #[test]
    fn retry_moves_to_a_later_bucket_when_the_current_one_is_full() {
        let buckets = Buckets::new(MINUTE, 1, 1).unwrap();
        let now = 30_000_000_000;
        // 100 now: only once this minute weighs (1 - f) * 100 <= 99 next minute.
        let v = verdict(&buckets, &[100, 0], now, false, 1, 100);
        let wait = v.retry_after.unwrap();
        assert!(
            wait > Duration::from_secs(30) && wait <= Duration::from_millis(30_601),
            "{wait:?}"
        );
    }
}
