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
//! (Jean Baptiste Muscat, "Distributed Rate-Limiting Algorithms", Criteo R&D Blog, 2022, <https://medium.com/criteo-engineering/distributed-rate-limiting-algorithms-a35f7e24783>,
//! "Approximated sliding window"). That is the uniform rule; with a
//! moment [`Estimator`] the oldest bucket's weight comes from the offsets
//! its counter also sums ([`moment`](super::moment)).

use std::time::Duration;

use super::buckets::Buckets;
use super::moment::{inside_scaled, Estimator};
use crate::wide::{div_u128, u128_to_f64};

/// One number per bucket a decision weighs, the current one first: inline
/// up to 8 (a window of up to 7 sub-windows), so that most decisions
/// allocate nothing for them.
pub(super) type Counts = smallvec::SmallVec<InlineCounts>;

/// The counts [`Counts`] holds without allocating.
pub(super) type InlineCounts = [u64; 8];

/// The buckets a decision reads, newest first: their counts, and with a
/// moment estimator their offset sums, by which the oldest is weighed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window<'a> {
    /// The count of each bucket.
    pub(crate) counts: &'a [u64],
    /// The offset sum of each bucket, beside `counts`, for a moment
    /// estimator; empty for the uniform rule.
    pub(crate) offsets: &'a [u64],
}

impl<'a> Window<'a> {
    /// `counts` weighed by the uniform rule.
    #[cfg(test)]
    pub(crate) fn uniform(counts: &'a [u64]) -> Self {
        Self {
            counts,
            offsets: &[],
        }
    }

    /// How the oldest bucket is weighed: by its offsets if it has them.
    fn estimator(&self) -> Estimator {
        if self.offsets.is_empty() {
            Estimator::Uniform
        } else {
            Estimator::Moment
        }
    }

    /// The part of bucket `age` still inside the window when the current
    /// one is `into` nanoseconds in, times `len`.
    fn inside(&self, age: usize, into: u64, len: u64) -> u128 {
        let count = self.counts.get(age).copied().unwrap_or(0);
        let offsets = self.offsets.get(age).copied().unwrap_or(0);
        inside_scaled(self.estimator(), count, offsets, into, len)
    }
}

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

/// Where a moment falls in its bucket: `into` nanoseconds of `len`.
///
/// Every comparison below is made on the estimate multiplied by `len`,
/// in 128-bit integers, so it is exact at every limit a builder accepts:
/// `counts[n] * (1 - into / len) <= room` is decided as
/// `counts[n] * (len - into) <= room * len`. With sums of at most 2^64
/// per bucket, a few dozen buckets and `len` below 2^55 (a year in
/// nanoseconds), no product comes near 2^128.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Position {
    pub(crate) into: u64,
    pub(crate) len: u64,
}

/// A time and where it falls: its bucket and its position in that bucket,
/// from one division, computed once for a decision and handed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct When {
    /// Unix nanoseconds.
    pub(crate) nanos: i64,
    /// Its bucket's index.
    pub(crate) index: i64,
    pub(crate) at: Position,
}

impl When {
    pub(crate) fn of(buckets: &Buckets, nanos: i64) -> Self {
        let (index, into) = buckets.place(nanos);
        Self {
            nanos,
            index,
            at: Position {
                into,
                len: buckets.len_nanos(),
            },
        }
    }
}

/// The estimate times the bucket length, exactly (given the oldest
/// bucket's weight, which a moment estimator rounds down to 2^-32 of a
/// request).
fn scaled_estimate(window: &Window, at: Position) -> u128 {
    let len = u128::from(at.len);
    match window.counts.split_last() {
        None => 0,
        Some((&only, [])) => u128::from(only) * len,
        Some((_, newer)) => {
            let newer: u128 = newer.iter().map(|&c| u128::from(c)).sum();
            newer.saturating_mul(len).saturating_add(window.inside(
                window.counts.len() - 1,
                at.into,
                at.len,
            ))
        }
    }
}

/// The approximated count in the window ending at `at`, for reports
/// (decisions compare [`scaled_estimate`] instead).
#[cfg(test)]
fn estimate(window: &Window, at: Position) -> f64 {
    scaled_estimate(window, at) as f64 / at.len as f64
}

/// Whether a request whose cost is already in `counts[0]` is within
/// `limit`: the estimate is at most the limit, compared exactly.
pub(crate) fn admits(window: &Window, at: Position, limit: u64) -> bool {
    scaled_estimate(window, at) <= u128::from(limit) * u128::from(at.len)
}

/// What is left of `limit` under the estimate `scaled` (times `at.len`),
/// rounded down.
fn remaining(scaled: u128, at: Position, limit: u64) -> u64 {
    let room = (u128::from(limit) * u128::from(at.len)).saturating_sub(scaled);
    let whole = div_u128(room, u128::from(at.len));
    // At most `limit`, so it fits.
    u64::try_from(whole).unwrap_or(limit)
}

/// `scaled / len` as a float.
fn ratio(scaled: u128, len: u64) -> f64 {
    u128_to_f64(scaled) / len as f64
}

/// The counts of the buckets read, and for packed counters their offset
/// sums beside them.
pub(crate) struct Decoded {
    pub(crate) counts: Counts,
    pub(crate) offsets: Counts,
}

impl Decoded {
    /// The window it holds, as the estimate weighs it.
    pub(crate) fn window(&self) -> Window<'_> {
        Window {
            counts: &self.counts,
            offsets: &self.offsets,
        }
    }
}

/// The verdict for a request of `cost`, given `counts` as they stand once
/// the decision is settled (with the request's cost in `counts[0]` when it
/// was allowed or counted anyway, without it when it was refunded).
pub(crate) fn verdict(
    buckets: &Buckets,
    window: &Window,
    when: When,
    allowed: bool,
    cost: u64,
    limit: u64,
) -> Verdict {
    let at = when.at;
    let scaled = scaled_estimate(window, at);
    Verdict {
        allowed,
        used: ratio(scaled, at.len),
        remaining: remaining(scaled, at, limit),
        reset_after: reset_after(buckets, window.counts, when),
        retry_after: (!allowed).then(|| retry_after(buckets, window, when, cost, limit)),
    }
}

/// Time until every counted request has slid out of the window: the newest
/// non-empty bucket stops counting at the end of the bucket `history` after
/// it.
fn reset_after(buckets: &Buckets, counts: &[u64], when: When) -> Duration {
    match counts.iter().position(|&c| c > 0) {
        None => Duration::ZERO,
        Some(age) => buckets.until(
            when.nanos,
            when.index - age as i64 + i64::from(buckets.history()) + 1,
            0,
        ),
    }
}

/// The earliest time at which a request of `cost` would fit if nothing else
/// arrives, to the nanosecond, by the same exact comparison as [`admits`].
/// The estimate only falls as time passes: within bucket `j` it is the sum
/// of the newer buckets plus the oldest one's falling share, and at
/// `history + 1` buckets from now it is zero, which a cost within the limit
/// always fits.
fn retry_after(buckets: &Buckets, window: &Window, when: When, cost: u64, limit: u64) -> Duration {
    let counts = window.counts;
    let When {
        nanos: now_nanos,
        index,
        at,
    } = when;
    let history = buckets.history() as usize;
    let len = u128::from(at.len);
    // The count of the bucket `ahead` buckets from now minus `age`, where
    // future buckets are empty.
    let count_at = |ahead: usize, age: usize| -> u128 {
        age.checked_sub(ahead)
            .and_then(|back| counts.get(back))
            .map_or(0, |&count| u128::from(count))
    };
    for ahead in 0..=history + 1 {
        let from = if ahead == 0 { at.into } else { 0 };
        let bucket = index + ahead as i64;
        let newer: u128 = (0..history).map(|age| count_at(ahead, age)).sum();
        let oldest = if history == 0 {
            0
        } else {
            count_at(ahead, history)
        };
        let newer = if history == 0 {
            count_at(ahead, 0)
        } else {
            newer
        };
        let Some(room) = u128::from(limit).checked_sub(newer + u128::from(cost)) else {
            continue;
        };
        let needed = if oldest == 0 {
            0
        } else if window.estimator() == Estimator::Uniform {
            // oldest * (len - t) <= room * len  <=>  t >= len - room * len / oldest,
            // with the division rounded down (t is whole nanoseconds).
            len.saturating_sub(room.saturating_mul(len) / oldest)
        } else {
            // The oldest bucket's weight only falls as its cut moves on:
            // the first moment it fits, by bisection.
            let back = history - ahead;
            let fits = |t: u64| window.inside(back, t, at.len) <= room * len;
            if fits(0) {
                0
            } else if !fits(at.len - 1) {
                len
            } else {
                let (mut low, mut high) = (0u64, at.len - 1);
                while high - low > 1 {
                    let middle = low + (high - low) / 2;
                    if fits(middle) {
                        high = middle;
                    } else {
                        low = middle;
                    }
                }
                u128::from(high)
            }
        };
        if needed < len {
            // `needed` is below `len`, which is a u64.
            let offset = u64::try_from(needed).unwrap_or(at.len).max(from);
            return buckets.until(now_nanos, bucket, offset);
        }
    }
    buckets.until(now_nanos, index + history as i64 + 2, 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MINUTE: Duration = Duration::from_secs(60);

    #[test]
    fn weights_the_previous_minute_by_what_is_still_inside() {
        let quarter = Position {
            into: 15_000_000_000,
            len: 60_000_000_000,
        };
        // 42 requests in the previous minute, 18 in this one, 15 s in.
        assert_eq!(estimate(&Window::uniform(&[18, 42]), quarter), 49.5);
        // Under constant load the approximation is exact.
        assert_eq!(estimate(&Window::uniform(&[25, 100]), quarter), 100.0);
        assert!(admits(&Window::uniform(&[25, 100]), quarter, 100));
        assert!(!admits(&Window::uniform(&[26, 100]), quarter, 100));
    }

    #[test]
    fn sub_windows_weight_only_the_oldest() {
        // Four 15 s windows plus the partial oldest one, 5 s into the current.
        let counts = Window::uniform(&[1, 2, 3, 4, 30]);
        let third = Position {
            into: 5_000_000_000,
            len: 15_000_000_000,
        };
        assert_eq!(estimate(&counts, third), 10.0 + 20.0);
        assert!(admits(&counts, third, 30));
        assert!(!admits(&counts, third, 29));
    }

    /// The verdict on a denied request of `cost` under `limit`, with
    /// `counts` (newest first) at `now`.
    fn denied(buckets: &Buckets, counts: &[u64], now: i64, cost: u64, limit: u64) -> Verdict {
        let when = When::of(buckets, now);
        verdict(buckets, &Window::uniform(counts), when, false, cost, limit)
    }

    #[test]
    fn fixed_window_retry_is_the_next_window() {
        let buckets = Buckets::new(MINUTE, 1, 0).unwrap();
        let now = 20_000_000_000; // 20 s into a minute
        let v = denied(&buckets, &[10], now, 1, 10);
        assert_eq!(v.retry_after, Some(Duration::from_secs(40)));
        assert_eq!(v.reset_after, Duration::from_secs(40));
        assert_eq!(v.remaining, 0);
    }

    #[test]
    fn sliding_retry_waits_for_the_old_share_to_slide_out() {
        let buckets = Buckets::new(MINUTE, 1, 1).unwrap();
        // 15 s in: weight 0.75. 60 before, 40 now: estimate 85; a cost of
        // 20 fits once 40 + 60 (1 - f) <= 80, i.e. f >= 1/3, 20 s in: 5 s
        // from now.
        let now = 15_000_000_000;
        let v = denied(&buckets, &[40, 60], now, 20, 100);
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
        let v = denied(&buckets, &[100, 0], now, 1, 100);
        let wait = v.retry_after.unwrap();
        // 100 (1 - t / 60 s) <= 99  <=>  t >= 0.6 s
        assert_eq!(wait, Duration::from_millis(30_600));
    }

    #[test]
    fn the_comparison_is_exact_far_beyond_float_precision() {
        let minute = Position {
            into: 59_999_999_999,
            len: 60_000_000_000,
        };
        let limit = (1 << 53) + 1;
        // The limit now and 1 before, weighing 1 / 60e9: over the limit.
        assert!(!admits(&Window::uniform(&[limit, 1]), minute, limit));
        assert!(admits(&Window::uniform(&[limit, 0]), minute, limit));
        assert!(admits(&Window::uniform(&[limit - 1, 1]), minute, limit));
        assert!(admits(
            &Window::uniform(&[limit]),
            Position { into: 0, len: 1 },
            limit
        ));
        assert!(!admits(
            &Window::uniform(&[limit + 1]),
            Position { into: 0, len: 1 },
            limit
        ));
        assert!(!admits(
            &Window::uniform(&[u64::MAX, u64::MAX]),
            minute,
            u64::MAX
        ));
        assert!(admits(&Window::uniform(&[u64::MAX, 0]), minute, u64::MAX));
    }
}
