//! Smyte's sessionizing bucket, by optimistic compare-and-swap.

mod core;
#[cfg(test)]
mod tests;

pub(crate) use self::core::SessionizeCore;
use crate::error::ConfigError;
use crate::quota::Quota;

/// Smyte's sessionizing bucket, `RL.SESSIONIZE` (source
/// <https://github.com/smyte/ratelimit>, `RateLimitHandler.cpp`): the
/// [`DiscreteRefill`](crate::DiscreteRefill) bucket, always strict and
/// restarting when empty, that also tells when the client's **session**
/// started: the time of the last request it allowed.
///
/// The bucket's rules are the discrete refill's, the same code: at most
/// `max` tokens (the quota's limit), `refill` back (the
/// [`refill_amount`](crate::LimiterBuilder::refill_amount), default `max`)
/// at each whole period after the refill mark, and
///
/// - **always strict**: a denied request takes whatever is left, so the
///   bucket is stored empty, whatever the limiter's
///   [`DeniedRequests`](crate::limiter::DeniedRequests) says (it is
///   Smyte's rule for this command, which counts denials itself);
/// - **always restarting**: a request that leaves the bucket empty moves
///   the mark to its own time (never back), so a client that keeps
///   knocking stays blocked until a whole period passes with no request.
///
/// With the default refill, a session is a burst of activity: it lasts as
/// long as the client never pauses for a whole period, and its
/// [`Decision::session_start`](crate::Decision::session_start) stays the
/// time of the request that opened it.
///
/// **The session start**: an allowed request (its cost fits in the tokens
/// available) starts a new session at its own time; a denied one reports
/// the stored start (a new client's, the request's own time). Every other
/// part of the decision is the discrete refill's: a denied request's
/// `remaining` is the tokens that were available when it came, so Smyte's
/// "tokens available before" is `remaining + cost` when allowed and
/// `remaining` when denied.
///
/// **Stored state** is `ds1 <tokens> <mark, unix ns> <session start, unix
/// ns>`, under a key of its own: unlike Smyte's server, where a
/// `RL.SESSIONIZE` and a `RL.REDUCE` with the same parameters share a
/// bucket (and reading one's value as the other's aborts the server), a
/// sessionize bucket and a discrete-refill bucket never share a key. The
/// state is kept until the bucket would be full again; once forgotten, the
/// next request is a new client's, whose session starts at its own time,
/// as it would anyway (a full bucket allows it), unless its cost is above
/// `max`. A value that is not this format counts as a new client; tokens
/// above `max` are cut to `max`, a mark or a session start further ahead
/// than the limiter's `max_clock_skew` clamped to it; either repair is
/// counted in [`FailureStats::repaired`](crate::limiter::FailureStats).
///
/// **A cost above `max`** is denied (and drains the bucket), not an error.
/// A refund gives back tokens as the discrete refill's does, and leaves
/// the session start alone.
///
/// ```
/// use memcache_ratelimit::{Clock, ManualClock, MemoryStore, Sessionize};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let clock = ManualClock::from_unix_secs(1_800_000_000);
/// let store = Arc::new(MemoryStore::with_clock(clock.clone()));
/// // One token an hour: Smyte's own test.
/// let sessions = Sessionize::builder("1/hour".parse()?, store).clock(clock.clone()).build()?;
/// let opened = clock.now();
///
/// let first = sessions.check(b"alice").await?;
/// assert!(first.is_allowed());
/// assert_eq!(first.session_start(), Some(opened));
/// // Every request within the hour is denied, restarts the hour, and
/// // belongs to the same session.
/// for _ in 0..3 {
///     clock.advance(Duration::from_secs(1_800));
///     let busy = sessions.check(b"alice").await?;
///     assert!(busy.is_denied());
///     assert_eq!(busy.session_start(), Some(opened));
/// }
/// // A whole hour of silence: a new session.
/// clock.advance(Duration::from_secs(3_600));
/// let again = sessions.check(b"alice").await?;
/// assert!(again.is_allowed());
/// assert_eq!(again.session_start(), Some(clock.now()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
///
/// A type only names the algorithm: `Sessionize::builder` starts a
/// [`LimiterBuilder`](crate::LimiterBuilder) whose `build` gives a
/// [`RateLimiter`](crate::RateLimiter).
#[derive(Debug, Clone, Copy)]
pub enum Sessionize {}

/// The sessionize core: `quota.limit()` tokens at most, `refill` (the
/// limit if `None`, at least 1) more at each whole `quota.period()`.
pub(crate) fn sessionize(refill: Option<u64>, quota: Quota) -> Result<SessionizeCore, ConfigError> {
    let refill = refill.unwrap_or(quota.limit());
    if refill == 0 {
        return Err(ConfigError::new("refill_amount", "must be at least 1"));
    }
    Ok(SessionizeCore::new(quota, refill))
}
