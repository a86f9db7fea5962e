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
    /// [`tolerance`](Self::tolerance), [`period`](Self::period) and
    /// [`horizon`](Self::horizon), worked out once: every decision reads
    /// them, and each is a chain of 128-bit saturating multiplications.
    tolerance: i128,
    period: i128,
    horizon: i128,
}

impl GcraCore {
    pub(crate) fn new(burst: u64, quota: Quota) -> Self {
        let interval = quota.period().as_nanos() as i128;
        let limit = i128::from(quota.limit());
        let tolerance = i128::from(burst).saturating_mul(interval);
        let period = interval.saturating_mul(limit);
        Self {
            burst,
            limit,
            interval,
            suffix: parameter_suffix("gcra", &format!("{burst}/{}/{interval}", quota.limit())),
            tolerance,
            period,
            horizon: tolerance.saturating_add(tolerance.max(period)),
        }
    }

    /// One period, in scaled units: the longest a reservation may wait.
    pub(super) fn period(&self) -> i128 {
        self.period
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
        let skew = i128::from(skew).saturating_mul(self.limit);
        let latest = i128::from(now)
            .saturating_mul(self.limit)
            .saturating_add(self.horizon())
            .saturating_add(skew);
        let beyond = *tat > latest;
        *tat = (*tat).min(latest);
        beyond
    }

    fn decide(&self, state: Option<&i128>, ask: Ask) -> Step<i128> {
        let now = i128::from(ask.now).saturating_mul(self.limit);
        let tolerance = self.tolerance();
        let cost = i128::from(ask.cost).saturating_mul(self.interval);
        let tat = state.copied().unwrap_or(now).max(now);
        let next = tat.saturating_add(cost);
        // How far past the burst tolerance this request would land.
        let excess = next.saturating_sub(now).saturating_sub(tolerance);
        // A reservation waits at most one period.
        let max_delay = (ask.max_delay.as_nanos() as i128)
            .saturating_mul(self.limit)
            .min(self.period());
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
        let now = i128::from(ask.now).saturating_mul(self.limit);
        let cost = i128::from(ask.cost).saturating_mul(self.interval);
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
