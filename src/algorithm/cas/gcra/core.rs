//! The arithmetic of [`Gcra`](super): a pure function from the stored
//! theoretical arrival time, the time and the request to a decision and
//! the time to write.

use crate::algorithm::cas::core::{parameter_suffix, Ask, CasCore, Step};
use crate::algorithm::cas::state_text::push_int;
use crate::decision::Decision;
use crate::quota::Quota;
use crate::wide::{div_i128, i128_to_f64};
use std::time::Duration;

/// The arithmetic, in units of `1/limit` nanoseconds: one request is
/// `interval` (the period in nanoseconds) units, and time `t` is
/// `t × limit` units, so the emission interval `period/limit` is exact.
#[derive(Debug, Clone)]
pub(crate) struct GcraCore {
    pub(super) burst: u64,
    pub(super) limit: i128,
    pub(super) interval: i128,
    pub(super) suffix: String,
    /// [`tolerance`](Self::tolerance) and [`horizon`](Self::horizon),
    /// worked out once: every decision reads them, and each is a chain of
    /// 128-bit saturating multiplications.
    tolerance: i128,
    horizon: i128,
}

impl GcraCore {
    pub(crate) fn new(burst: u64, quota: Quota) -> Self {
        let interval = quota.period().as_nanos() as i128;
        let limit = i128::from(quota.limit());
        let tolerance = i128::from(burst).saturating_mul(interval);
        // One period in scaled units: the longest a reservation may wait.
        let period = interval.saturating_mul(limit);
        Self {
            burst,
            limit,
            interval,
            suffix: parameter_suffix("gcra", &format!("{burst}/{}/{interval}", quota.limit())),
            tolerance,
            horizon: tolerance.saturating_add(tolerance.max(period)),
        }
    }

    /// The furthest ahead of its writer's time a TAT can be, in scaled
    /// units: the burst tolerance, plus the longer of a reservation's
    /// longest wait (one period) and a strict denial's extra tolerance.
    pub(crate) fn horizon(&self) -> i128 {
        self.horizon
    }

    /// The burst tolerance `B·T`, in scaled units.
    pub(super) fn tolerance(&self) -> i128 {
        self.tolerance
    }

    /// `nanos` (a time or a skew) in scaled units: `nanos × limit`, which
    /// cannot overflow, as `limit` is a `u64` and `nanos` an `i64`:
    /// `|nanos × limit| ≤ 2^63 × (2^64 − 1) < 2^127`. A plain product,
    /// not a saturating one, whose 128-bit overflow check every decision
    /// paid (callgrind), as it did in the two products below.
    fn scaled(&self, nanos: i64) -> i128 {
        debug_assert!(u64::try_from(self.limit).is_ok());
        i128::from(nanos) * self.limit
    }

    /// `cost` requests in scaled units: `cost × interval`, below 2^119,
    /// as a quota's period is at most [`MAX_PERIOD`](crate::quota::MAX_PERIOD)
    /// (under 2^55 ns).
    fn cost(&self, cost: u64) -> i128 {
        debug_assert!(self.interval < 1 << 55);
        i128::from(cost) * self.interval
    }

    /// The longest a request may wait, `max_delay`, in scaled units and
    /// at most one period: clamped to the period in nanoseconds first, so
    /// that the product stays below 2^119.
    fn max_delay(&self, max_delay: Duration) -> i128 {
        let nanos = i128::try_from(max_delay.as_nanos()).unwrap_or(i128::MAX);
        nanos.min(self.interval) * self.limit
    }

    /// Scaled units to a duration, rounded up.
    pub(super) fn duration(&self, units: i128) -> Duration {
        if units <= 0 {
            return Duration::ZERO;
        }
        let nanos = div_i128(units + self.limit - 1, self.limit);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

/// A stored TAT: an optional `-` and 1 to 39 decimal digits within
/// `i128`, padded with ASCII whitespace (memcached pads a value it
/// shortened). What `str::parse` reads of what [`encode`](CasCore::encode)
/// writes, in runs of 18 digits read in 64 bits ([`decimal`]) and one
/// 64-by-64-bit multiply for the up to 36 digits a TAT has, rather than
/// a 128-bit multiply per digit; anything else is not a TAT.
///
/// [`decimal`]: crate::store::decimal
pub(super) fn parse_tat(bytes: &[u8]) -> Option<i128> {
    const RUN: usize = 18;
    let bytes = bytes.trim_ascii();
    let (negative, digits) = match bytes.split_first() {
        Some((b'-', digits)) => (true, digits),
        _ => (false, bytes),
    };
    if digits.is_empty() || digits.len() > 39 {
        return None;
    }
    let run = |digits: &[u8]| crate::store::decimal(digits).map(u128::from);
    // Up to 36 digits in two runs of at most 18, which cannot overflow.
    let (head, tail) = digits.split_at(digits.len().min(2 * RUN));
    let (high, low) = head.split_at(head.len().saturating_sub(RUN));
    let mut value = match high.is_empty() {
        true => run(low)?,
        false => run(high)? * 10u128.pow(RUN as u32) + run(low)?,
    };
    if !tail.is_empty() {
        value = value
            .checked_mul(10u128.pow(tail.len() as u32))?
            .checked_add(run(tail)?)?;
    }
    let value = i128::try_from(value).ok()?;
    Some(if negative { -value } else { value })
}

impl CasCore for GcraCore {
    type State = i128;

    fn capacity(&self) -> u64 {
        self.burst
    }

    fn suffix(&self) -> &str {
        &self.suffix
    }

    fn encode(&self, tat: &i128) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(tat, &mut out);
        out
    }

    fn encode_into(&self, tat: &i128, out: &mut Vec<u8>) {
        push_int(out, *tat);
    }

    fn decode(&self, bytes: &[u8]) -> Option<i128> {
        parse_tat(bytes)
    }

    /// A TAT further ahead of `now` than [`horizon`](GcraCore::horizon),
    /// plus the skew, is clamped to that: no writer could have stored it.
    fn repair(&self, tat: &mut i128, now: i64, skew: i64) -> bool {
        let skew = self.scaled(skew);
        let latest = self
            .scaled(now)
            .saturating_add(self.horizon())
            .saturating_add(skew);
        let beyond = *tat > latest;
        *tat = (*tat).min(latest);
        beyond
    }

    fn decide(&self, state: Option<&i128>, ask: Ask) -> Step<i128> {
        let now = self.scaled(ask.now);
        let tolerance = self.tolerance();
        let cost = self.cost(ask.cost);
        let tat = state.copied().unwrap_or(now).max(now);
        let next = tat.saturating_add(cost);
        // How far past the burst tolerance this request would land.
        let excess = next.saturating_sub(now).saturating_sub(tolerance);
        // A reservation waits at most one period.
        let max_delay = self.max_delay(ask.max_delay);
        let allowed = excess <= max_delay;
        let after = if allowed {
            next
        } else if ask.strict {
            // Never below the TAT: a strict denial takes, it never gives.
            next.min(now.saturating_add(2 * tolerance)).max(tat)
        } else {
            tat
        };
        let remaining = div_i128(
            now.saturating_add(tolerance).saturating_sub(after),
            self.interval,
        )
        .max(0) as u64;
        let reset_after = self.duration(after.saturating_sub(now));
        let decision = if allowed {
            Decision::allowed(self.burst, remaining, reset_after)
        } else {
            let retry = self.duration(
                after
                    .saturating_add(cost)
                    .saturating_sub(tolerance)
                    .saturating_sub(now),
            );
            Decision::denied(self.burst, remaining, reset_after, retry)
        }
        .with_used(i128_to_f64(after.saturating_sub(now).max(0)) / i128_to_f64(self.interval));
        Step {
            decision,
            delay: if allowed {
                self.duration(excess)
            } else {
                Duration::ZERO
            },
            write: (allowed || ask.strict).then_some((after, reset_after)),
        }
    }

    /// Moves the TAT back by `cost` emission intervals, exactly as
    /// [`decide`](CasCore::decide) moved it forward, but never before
    /// `now`: a TAT at or before `now` is a full bucket already, and one
    /// moved before it would bank credit for later.
    fn refund(&self, state: Option<&i128>, ask: Ask) -> Step<i128> {
        let now = self.scaled(ask.now);
        let cost = self.cost(ask.cost);
        let tat = state.copied().unwrap_or(now);
        let after = tat.saturating_sub(cost).max(now).min(tat);
        // How far ahead of `now` the bucket is booked: zero when full.
        let booked = after.saturating_sub(now).max(0);
        let remaining =
            div_i128(self.tolerance().saturating_sub(booked), self.interval).max(0) as u64;
        let reset_after = self.duration(booked);
        Step {
            decision: Decision::allowed(self.burst, remaining, reset_after)
                .with_used(i128_to_f64(booked) / i128_to_f64(self.interval)),
            delay: Duration::ZERO,
            write: (after != tat).then_some((after, reset_after)),
        }
    }
}
