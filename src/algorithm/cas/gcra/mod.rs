//! GCRA, the generic cell rate algorithm, by optimistic compare-and-swap;
//! with a delay mode that makes it a leaky bucket used as a queue.

mod core;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub(crate) use self::core::GcraCore;
use crate::decision::Decision;
use crate::error::ConfigError;
use crate::quota::Quota;

/// GCRA (Tony Finch, "hybrid quota-linear rate limiter", 2026, <https://dotat.at/@/2026-01-12-hqlr.html>, "the case for GCRA").
///
/// The whole state is one number per client: the theoretical arrival time
/// (TAT), the moment the client's past traffic would have been served had
/// it arrived at exactly the permitted rate. With emission interval
/// `T = period / limit` and a burst of `B` requests, a request of cost `c`
/// at time `t` is allowed when
///
/// ```text
/// max(TAT, t) + c·T − t ≤ B·T
/// ```
///
/// and then moves the TAT to `max(TAT, t) + c·T`. It behaves exactly as a
/// [`TokenBucket`](crate::TokenBucket) of capacity `B`, refilled at the
/// quota's rate, in half the state. Times are kept exactly, in units of
/// `1/limit` nanoseconds, so no rounding accumulates. It uses the same
/// optimistic compare-and-swap loop as the token bucket.
///
/// **Delay mode, the leaky bucket as a queue**: [`RateLimiter::until_ready`](crate::RateLimiter::until_ready) and
/// [`RateLimiter::reserve`](crate::RateLimiter::reserve) accept a request that does not fit yet if it will fit
/// within `max_delay`: the slot is reserved at once and the caller waits
/// until it comes, so requests leave at the permitted rate instead of being
/// turned away. A request that would have to wait longer than `max_delay`
/// is rejected at once and reserves nothing. A reservation waits at most
/// one period of the quota: a longer `max_delay` counts as one period.
///
/// **Strict mode** moves the TAT for denied requests too, at most `2·B·T`
/// ahead, so a client that keeps sending stays denied until it slows down.
///
/// **Timestamps**: an event older than the TAT's present sees the TAT
/// further ahead of it, so it is judged more strictly, never more leniently.
///
/// **Stored state** is validated: a value that is not a number counts as a
/// new client, and a TAT further ahead than any writer could have put it
/// (the burst tolerance `B·T`, plus the longer of one period and `B·T`,
/// plus the limiter's `max_clock_skew`) is clamped to that horizon; either
/// repair is counted in [`FailureStats::repaired`](crate::limiter::FailureStats).
/// No decision announces a wait beyond the horizon.
///
/// ```
/// use memcache_ratelimit::{Gcra, ManualClock, MemoryStore, RateLimiter};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let clock = ManualClock::from_unix_secs(1_800_000_000);
/// let store = Arc::new(MemoryStore::with_clock(clock.clone()));
/// let gcra = Gcra::builder("10/second".parse()?, store).burst(2).clock(clock.clone()).build()?;
///
/// assert!(gcra.check(b"alice").await?.is_allowed());
/// assert!(gcra.check(b"alice").await?.is_allowed());
/// assert!(gcra.check(b"alice").await?.is_denied());
///
/// // Queue instead: the next slot is 100 ms away, within the 250 ms allowed.
/// let slot = gcra.reserve(b"alice", 1, Duration::from_millis(250)).await?;
/// assert!(slot.decision().is_allowed());
/// assert_eq!(slot.delay(), Duration::from_millis(100));
/// // Two more slots would be 300 ms away: rejected at once.
/// let full = gcra.reserve(b"alice", 2, Duration::from_millis(250)).await?;
/// assert!(full.decision().is_denied());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
///
/// A type only names the algorithm: `Gcra::builder` starts a
/// [`LimiterBuilder`](crate::LimiterBuilder) whose `build` gives a
/// [`RateLimiter`](crate::RateLimiter).
#[derive(Debug, Clone, Copy)]
pub enum Gcra {}

/// A request accepted for later, or rejected, in delay mode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reservation {
    decision: Decision,
    delay: Duration,
}

impl Reservation {
    pub(crate) fn new(decision: Decision, delay: Duration) -> Self {
        Self { decision, delay }
    }

    /// Whether the request got a slot, and the limit's state.
    pub fn decision(&self) -> Decision {
        self.decision
    }

    /// How long to wait before acting, when the request got a slot.
    pub fn delay(&self) -> Duration {
        self.delay
    }
}

/// GCRA's core: a burst of `burst` requests (the quota's limit if
/// `None`) at `quota`'s rate.
pub(crate) fn gcra(burst: Option<u64>, quota: Quota) -> Result<GcraCore, ConfigError> {
    let burst = burst.unwrap_or(quota.limit());
    if burst == 0 {
        return Err(ConfigError::new("burst", "must be at least 1"));
    }
    Ok(GcraCore::new(burst, quota))
}
