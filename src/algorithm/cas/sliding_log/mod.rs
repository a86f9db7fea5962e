//! The exact sliding log, by optimistic compare-and-swap.

mod core;
mod log;
#[cfg(test)]
mod log_tests;
#[cfg(test)]
mod tests;
mod varint;

pub(crate) use self::core::SlidingLogCore;
use crate::error::ConfigError;
use crate::quota::Quota;

/// The largest limit a [`SlidingLog`] accepts: its state holds one
/// timestamp per admitted cost unit, so the limit bounds the stored value
/// (at most about 8 bytes an entry, 80 KB at this limit, well under
/// memcached's default 1 MB item size).
///
/// ```
/// use memcache_ratelimit::algorithm::MAX_LOG_LIMIT;
/// use memcache_ratelimit::{MemoryStore, Quota, SlidingLog};
/// use std::num::NonZeroU64;
/// use std::sync::Arc;
///
/// let too_many = Quota::per_hour(NonZeroU64::new(MAX_LOG_LIMIT + 1).unwrap());
/// let error = SlidingLog::builder(too_many, Arc::new(MemoryStore::new())).build().unwrap_err();
/// assert_eq!(error.field(), "limit");
/// ```
pub const MAX_LOG_LIMIT: u64 = 10_000;

/// The entries (unix nanoseconds, oldest first) of a [`SlidingLog`]'s
/// stored value, or `None` if `bytes` are not a log of at most `limit`
/// entries: for tools that read the store, such as an operator's
/// inspector. Reads the value exactly as the limiter does, clamping
/// included (see the format in [`SlidingLog`]).
///
/// ```
/// use memcache_ratelimit::algorithm::stored_log_entries;
///
/// let at: i64 = 1_800_000_000_000_000_000;
/// // The version, the oldest and the newest entry, a check (which only
/// // decides how a write rewrites the log), then the distances of the
/// // second and third entries: 0, and 300 as a varint.
/// let mut bytes = vec![3];
/// bytes.extend_from_slice(&at.to_le_bytes());
/// bytes.extend_from_slice(&(at + 300).to_le_bytes());
/// bytes.extend_from_slice(&[0; 8]);
/// bytes.extend_from_slice(&[0, 0x80 | 44, 2]);
/// assert_eq!(stored_log_entries(&bytes, 3), Some(vec![at, at, at + 300]));
/// // More entries than the limit, or not a log at all.
/// assert_eq!(stored_log_entries(&bytes, 2), None);
/// assert_eq!(stored_log_entries(b"garbage", 3), None);
/// ```
pub fn stored_log_entries(bytes: &[u8], limit: u64) -> Option<Vec<i64>> {
    log::Log::decode(bytes, limit).map(|log| log.to_vec())
}

/// The first byte of every stored log, so even an empty log is a value.
const VERSION: u8 = 3;

/// The exact sliding log ("Designing an API Rate Limiter", system design interview notes, "Sliding (Rolling) Log").
///
/// Each client's state is one memcached value: the timestamps of its
/// admitted requests still inside the period, one entry per cost unit, so
/// never more than `limit` of them. A request of cost `c` at time `t` first
/// drops the entries at or before `t − period`; it is allowed if the
/// entries left plus `c` fit in the limit, and then records `c` entries at
/// `t`. The limit holds exactly over every window of one period, with no
/// boundary effects and no estimate, at the price of a value that grows
/// with the limit (hence [`MAX_LOG_LIMIT`]) and is read and written whole
/// on every decision, in the shared optimistic loop
/// ([`CasPolicy`](crate::algorithm::CasPolicy)).
///
/// The log is stored compactly: a version byte, the oldest and the newest
/// timestamps as little-endian `i64`s (unix nanoseconds), a check (XXH3 of
/// those and the distances), then each later entry as the LEB128 varint of
/// its distance from the previous one (1 byte for entries of one request,
/// 1 to 8 bytes otherwise). A denial reads the ends and the oldest entries
/// only, not the whole log; a write keeps the distances of the entries
/// that stay as they are, when the check shows the log was written so. A
/// denial on a log of 1 KiB or more that this limiter wrote or read last
/// does not fetch it at all, while its known logs are nearly always
/// current: the store is asked whether it still holds that log's version
/// ([`CasPolicy::known_states`](crate::algorithm::CasPolicy::known_states)),
/// so a client kept at a full log of 10,000 entries costs memcached a
/// dozen bytes a request, not the log's tens of kilobytes.
///
/// **Decision**: `remaining` is `limit` minus the entries after the
/// decision; `retry_after` is the time until enough of the oldest entries
/// leave the window for the request to fit; `reset_after` is the time until
/// the newest entry leaves it.
///
/// **Strict mode** ([`DeniedRequests::Counted`](crate::limiter::DeniedRequests)):
/// denied requests are recorded too, dropping the oldest entries to stay at
/// `limit`, so a client sending faster than the limit stays denied until
/// it slows down. Admitted requests still never exceed the limit in any
/// window: the log always keeps the newest recorded entries, a superset of
/// the admitted ones inside the window or else a full log.
///
/// **Timestamps** ([`check_at`](crate::RateLimiter::check_at)): time never
/// runs backwards for a key. An event older than the newest recorded entry
/// is decided, and recorded, as of that newest time, so the log stays
/// sorted and replaying out of order can never free quota from the past;
/// its `retry_after` and `reset_after` count from its own time.
///
/// **Stored state** is validated: a value that is not a log (or holds more
/// than `limit` entries) counts as a new client, and entries further ahead
/// than the limiter's `max_clock_skew` are clamped to it; either repair is
/// counted in [`FailureStats::repaired`](crate::limiter::FailureStats). No decision
/// announces a wait longer than one period plus the skew.
///
/// ```
/// use memcache_ratelimit::{ManualClock, MemoryStore, RateLimiter, SlidingLog};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let clock = ManualClock::from_unix_secs(1_800_000_000);
/// let store = Arc::new(MemoryStore::with_clock(clock.clone()));
/// let log = SlidingLog::builder("3/minute".parse()?, store).clock(clock.clone()).build()?;
///
/// assert!(log.check(b"alice").await?.is_allowed());
/// clock.advance(Duration::from_secs(40));
/// assert!(log.check_n(b"alice", 2).await?.is_allowed());
/// let denied = log.check(b"alice").await?;
/// assert!(denied.is_denied());
/// // The first request leaves the window 60 s after it was made.
/// assert_eq!(denied.retry_after(), Some(Duration::from_secs(20)));
/// clock.advance(Duration::from_secs(20));
/// assert_eq!(log.check(b"alice").await?.remaining(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
///
/// A type only names the algorithm: `SlidingLog::builder` starts a
/// [`LimiterBuilder`](crate::LimiterBuilder) whose `build` gives a
/// [`RateLimiter`](crate::RateLimiter).
#[derive(Debug, Clone, Copy)]
pub enum SlidingLog {}

/// The sliding log's core for `quota`.
pub(crate) fn sliding_log(quota: Quota) -> Result<SlidingLogCore, ConfigError> {
    let limit = quota.limit();
    if limit > MAX_LOG_LIMIT {
        return Err(ConfigError::new(
            "limit",
            format!("{limit} is above the sliding log's maximum of {MAX_LOG_LIMIT}"),
        ));
    }
    Ok(SlidingLogCore::new(quota))
}
