//! Tony Finch's hybrid bursty/smooth quota, by optimistic compare-and-swap.

mod core;
mod refund;
#[cfg(test)]
mod refund_tests;
#[cfg(test)]
mod tests;

pub(crate) use self::core::HybridQuotaCore;
use self::core::MAX_EXACT_LIMIT;
use crate::error::ConfigError;
use crate::quota::Quota;

/// Tony Finch's hybrid quota (Tony Finch, "hybrid quota-linear rate limiter", 2026, <https://dotat.at/@/2026-01-12-hqlr.html>): low-traffic clients may burst, high-traffic
/// clients are held to an even rate.
///
/// With quota `q` per window `w` (the [`Quota`]'s limit and period) and
/// `rate = q/w`, each client has a `bucket` of tokens, a `time` and a
/// `mode`. In **bursty** mode `time` is the start of a fixed window of the
/// client's own and the bucket holds whole tokens, refilled to a full quota
/// when the window ends. When a request takes the last tokens, the client
/// switches to **smooth** mode, where tokens accrue continuously at `rate`,
/// starting from a penalty, until the bucket holds a whole quota again and
/// the client is bursty once more. The rules, in order, with Finch's notes
/// quoted, for a request of cost `c` at time `now`:
///
/// ```text
/// reset():                     bucket = q − c; time = now; mode = BURSTY; ALLOW
///   "a client that returns after a long absence is reinitialized like a
///    new client; ... we subtract one from the quota to account for the
///    current request"
/// new client:                  reset()
/// BURSTY and time + w <= now:  reset()
///   "reset the state when a bursty client's window has expired"
/// BURSTY and bucket == c:      remaining = time + w − now
///                              bucket = −remaining · rate + 1
///                              time = now; mode = SMOOTH; ALLOW
///   "apply a negative penalty so we don't allow any over-quota requests
///    before the end of the fixed window; add one to allow the next
///    request at the start of the next window"
/// SMOOTH:                      bucket += (now − time) · rate; time = now
///   "update the request time so that tokens accumulate at the same rate
///    whether the request is allowed or denied"
/// SMOOTH and bucket >= q:      reset()
///   "when the bucket has refilled, switch back to bursty mode"
/// otherwise:                   if bucket >= c { bucket −= c; ALLOW } else DENY
/// ```
///
/// **Costs**: Finch's pseudocode takes one token per request; here every
/// `1` that stands for the request's token is its cost `c`, while the `+1`
/// of the switch stays `+1`: it is one token's worth of the smallest
/// request, so the bucket reaches 1 exactly when the fixed window ends and
/// no request of any cost is admitted before then, and a cost-`c` request
/// waits `(c − 1)/rate` more. (`+c` would admit a cost-1 request
/// `(c − 1)/rate` before the window ends, over the quota.) A first request
/// costing the whole quota empties the bucket in `reset()` and, as in the
/// pseudocode with a quota of 1, stays bursty: the client simply waits for
/// the end of its window.
///
/// **Guarantees** (from the seed): a bursty client never gets more than `q`
/// in its fixed window; a smooth client stays below `rate` on average over
/// the whole time it is smooth. A smooth client that slows down, but not
/// for long enough to refill, can speed up again and exceed `q` within one
/// window; and as the bucket carries fractions, even a client sending
/// steadily faster than the rate may see `q + 1` in some span of `w`. It
/// reacts within one window, unlike a
/// [`TokenBucket`](crate::TokenBucket).
///
/// **Decision**: `limit` is `q`; `remaining` is the whole tokens in the
/// bucket; `retry_after` is the end of the fixed window (bursty) or the
/// time for the bucket to earn the missing tokens (smooth); `reset_after`
/// is the time until a whole quota is available again: the end of the
/// window (bursty) or the refill to `q` (smooth). The state is one
/// memcached value, `<b|s> <bucket> <time>`, in the shared optimistic loop
/// ([`CasPolicy`](crate::algorithm::CasPolicy)); it expires once it would mean the
/// same as no state.
/// A denial writes nothing unless strict: tokens accrue linearly, so the
/// stored state already implies the same later decisions, and a flooding
/// client costs reads only.
///
/// **Strict mode** ([`DeniedRequests::Counted`](crate::limiter::DeniedRequests)): a
/// denied request takes its cost too, down to `−q`. In bursty mode that
/// debt lasts only until the window ends.
///
/// **Refunds** (a request decided all or nothing by several limiters and
/// denied by another gives back what it took here): a take within a
/// bursty window or in smooth mode is undone exactly; a take that started
/// a fresh window is undone to a full quota that starts a fresh window at
/// the next request; the take of a window's last tokens, whose switch to
/// smooth mode forgets the window, is given back to the smooth bucket,
/// which holds the client back at least as much as the window would have.
/// A refund never gives back more than was taken, and what cannot be
/// traced to the current state (a bursty window started after the
/// refunded request's time) is not given back.
///
/// **Timestamps** ([`check_at`](crate::RateLimiter::check_at)): `now` is
/// never before the stored `time`; an older event is decided as of `time`,
/// and its `retry_after` and `reset_after` count from its own time.
///
/// **Stored state** is validated: a value that is not a state (or a bucket
/// outside `±q`) counts as a new client, and a `time` further ahead than
/// the limiter's `max_clock_skew` is clamped to it; either repair is
/// counted in [`FailureStats::repaired`](crate::limiter::FailureStats). No decision
/// announces a wait longer than two windows plus the skew.
///
/// ```
/// use memcache_ratelimit::{HybridQuota, ManualClock, MemoryStore, RateLimiter};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let clock = ManualClock::from_unix_secs(1_800_000_000);
/// let store = Arc::new(MemoryStore::with_clock(clock.clone()));
/// let quota = HybridQuota::builder("10/second".parse()?, store).clock(clock.clone()).build()?;
///
/// // A quiet client may spend its whole quota at once...
/// for _ in 0..10 {
///     assert!(quota.check(b"alice").await?.is_allowed());
/// }
/// // ...and is then held to the smooth rate, from the end of its window.
/// clock.advance(Duration::from_millis(990));
/// let denied = quota.check(b"alice").await?;
/// assert_eq!(denied.retry_after(), Some(Duration::from_millis(10)));
/// clock.advance(Duration::from_millis(10));
/// assert!(quota.check(b"alice").await?.is_allowed());
/// clock.advance(Duration::from_millis(50));
/// assert!(quota.check(b"alice").await?.is_denied()); // one per 100 ms
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
///
/// A type only names the algorithm: `HybridQuota::builder` starts a
/// [`LimiterBuilder`](crate::LimiterBuilder) whose `build` gives a
/// [`RateLimiter`](crate::RateLimiter).
#[derive(Debug, Clone, Copy)]
pub enum HybridQuota {}

/// The hybrid quota's core for `quota`.
pub(crate) fn hybrid_quota(quota: Quota) -> Result<HybridQuotaCore, ConfigError> {
    let limit = quota.limit();
    if limit > MAX_EXACT_LIMIT {
        return Err(ConfigError::new(
            "limit",
            format!("{limit} is above the hybrid quota's maximum of 2^53"),
        ));
    }
    Ok(HybridQuotaCore::new(quota))
}
