//! Smyte's token bucket with discrete refills, by optimistic
//! compare-and-swap.

mod core;
mod rules;
#[cfg(test)]
mod smyte_tests;
#[cfg(test)]
mod tests;

pub(crate) use self::core::DiscreteRefillCore;
pub(crate) use self::rules::{Bucket, Rules};
use crate::error::ConfigError;
use crate::quota::Quota;

/// Smyte's token bucket with discrete refills (Yunjing Xu, "High-performance rate limiting", Smyte Blog, 2016, <https://medium.com/the-smyte-blog/rate-limiter-df3408325846>; source <https://github.com/smyte/ratelimit>).
///
/// Each client has a bucket of at most `max` tokens (the quota's limit)
/// and a **refill mark**. Tokens come back in whole steps: `refill` of
/// them (the [`refill_amount`](crate::LimiterBuilder::refill_amount),
/// default `max`) for each whole refill period (the quota's period) since
/// the mark, up to `max`, and the mark moves by those whole periods only,
/// even when the bucket was already full. A new client has a full bucket
/// with its mark at its first request. With the default refill the quota
/// is a fixed window of the client's own, starting at its first request.
/// For a request of cost `c` at time `t`:
///
/// ```text
/// refills   = max(0, t − mark) / period        (whole periods)
/// available = min(max, tokens + refills · refill);  mark += refills · period
/// allowed   ⇔ c ≤ available;  tokens = available − c
/// ```
///
/// Everything is integer arithmetic on the stored tokens and nanoseconds;
/// nothing is rounded.
///
/// **Denied requests**: by default nothing is written (Smyte's `RL.GET`).
/// In **strict mode** ([`DeniedRequests::Counted`](crate::limiter::DeniedRequests)) a denial
/// takes what is left: the bucket is stored empty, as Smyte's `RL.REDUCE`
/// always stores `max(available − c, 0)`.
///
/// **Restart when empty** ([`restart_when_empty`](crate::LimiterBuilder::restart_when_empty),
/// Smyte's `STRICT` flag): whenever a request leaves the bucket empty (an
/// allowed one taking the last token, or a strict denial), the mark moves
/// to the request's time, so a client that keeps knocking stays blocked
/// until a whole period passes with no request. It is not part of the
/// bucket's identity: limiters with and without it share a client's
/// bucket, as Smyte's buckets are named by `(max, refill, period)` only.
///
/// **A cost above `max`** is not an error
/// ([`Error::CostExceedsLimit`](crate::Error) is never returned): it is
/// denied (and in strict mode drains the bucket), as Smyte's `TAKE` above
/// the maximum. A cost of 0 is still [`Error::ZeroCost`](crate::Error).
///
/// **The decision**: `limit` is `max`. An allowed request's `remaining` is
/// the tokens left after it; **a denied request's `remaining` is the tokens
/// that were available when it came** (which a strict denial then took).
/// Smyte's reply, "the tokens available before the reduction", is thus
/// `remaining + cost` when allowed and `remaining` when denied.
/// `reset_after` is the time until the bucket is full again, counted in
/// whole periods from the mark of the bucket as written (or as it stands,
/// for a denial that writes nothing). A denial's `retry_after` is the time
/// until `cost` tokens are back, from that same mark (after a restart,
/// the request's own time); for a cost above `max`, which never fits, it
/// is the reset time. `used` is `max` less the tokens left.
///
/// **Timestamps** ([`check_at`](crate::RateLimiter::check_at)): an event
/// at or before the stored mark earns nothing and moves nothing back (a
/// restart never moves the mark earlier either: Smyte's does); its waits
/// count from its own time.
///
/// **Stored state** is `dr1 <tokens> <mark, unix ns>`, kept until the
/// bucket would be full again (then it is forgotten, and the client's next
/// request starts a new bucket, with its mark at that request, as Smyte's
/// compaction drops a full bucket). A value that is not this format counts
/// as a new client; tokens above `max` are cut to `max`, and a mark further
/// ahead than the limiter's `max_clock_skew` is clamped to it; either repair
/// is counted in [`FailureStats::repaired`](crate::limiter::FailureStats).
///
/// A refund ([`refund_at`](crate::RateLimiter::refund_at)) gives back up
/// to `cost` tokens, never above `max`, and never moves the mark.
///
/// ```
/// use memcache_ratelimit::{DiscreteRefill, Error, ManualClock, MemoryStore, RateLimiter};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let clock = ManualClock::from_unix_secs(1_800_000_000);
/// let store = Arc::new(MemoryStore::with_clock(clock.clone()));
/// // At most 10 tokens; 3 come back every 5 s (Smyte's own test).
/// let bucket = DiscreteRefill::builder("10/5s".parse()?, store)
///     .refill_amount(3)
///     .clock(clock.clone())
///     .build()?;
///
/// let first = bucket.check_n(b"alice", 8).await?;
/// assert_eq!((first.is_allowed(), first.remaining()), (true, 2));
/// let denied = bucket.check_n(b"alice", 4).await?;
/// assert!(denied.is_denied());
/// assert_eq!(denied.remaining(), 2); // what was there: nothing taken
/// assert_eq!(denied.retry_after(), Some(Duration::from_secs(5)));
/// // Not an error: just denied.
/// assert!(bucket.check_n(b"alice", 11).await?.is_denied());
///
/// clock.advance(Duration::from_millis(4_999));
/// assert!(bucket.check_n(b"alice", 4).await?.is_denied());
/// clock.advance(Duration::from_millis(1)); // one whole period: 2 + 3
/// let refilled = bucket.check_n(b"alice", 4).await?;
/// assert_eq!((refilled.is_allowed(), refilled.remaining()), (true, 1));
/// // 9 missing, 3 per period: full three periods after the mark.
/// assert_eq!(refilled.reset_after(), Duration::from_secs(15));
/// assert!(matches!(bucket.check_n(b"alice", 0).await, Err(Error::ZeroCost)));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
///
/// A type only names the algorithm: `DiscreteRefill::builder` starts a
/// [`LimiterBuilder`](crate::LimiterBuilder) whose `build` gives a
/// [`RateLimiter`](crate::RateLimiter).
#[derive(Debug, Clone, Copy)]
pub enum DiscreteRefill {}

/// The discrete-refill core: `quota.limit()` tokens at most, `refill`
/// (the limit if `None`, at least 1) more at each whole `quota.period()`.
pub(crate) fn discrete_refill(
    refill: Option<u64>,
    restart_when_empty: bool,
    quota: Quota,
) -> Result<DiscreteRefillCore, ConfigError> {
    let refill = refill.unwrap_or(quota.limit());
    if refill == 0 {
        return Err(ConfigError::new("refill_amount", "must be at least 1"));
    }
    Ok(DiscreteRefillCore::new(quota, refill, restart_when_empty))
}
