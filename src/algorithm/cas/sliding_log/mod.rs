//! The exact sliding log, by optimistic compare-and-swap.

mod core;
#[cfg(test)]
mod tests;

use std::sync::Arc;

use self::core::SlidingLogCore;
use crate::algorithm::cas::optimistic::CasLimiter;
use crate::algorithm::cas::stats::CasStats;
use crate::error::ConfigError;
use crate::limiter::spec::{Algorithm, LimiterSpec};
use crate::limiter::{delegate_rate_limiter, other_algorithm, LimiterBuilder};
use crate::quota::Quota;
use crate::store::Store;

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

/// The first byte of every stored log, so even an empty log is a value.
const VERSION: u8 = 1;

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
/// ([`CasPolicy`](crate::CasPolicy)).
///
/// The log is stored compactly: a version byte, the oldest timestamp as a
/// little-endian `i64` (unix nanoseconds), then each later entry as the
/// LEB128 varint of its distance from the previous one (1 byte for entries
/// of one request, 1 to 8 bytes otherwise).
///
/// **Decision**: `remaining` is `limit` minus the entries after the
/// decision; `retry_after` is the time until enough of the oldest entries
/// leave the window for the request to fit; `reset_after` is the time until
/// the newest entry leaves it.
///
/// **Strict mode** ([`DeniedRequests::Counted`](crate::DeniedRequests)):
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
/// counted in [`FailureStats::repaired`](crate::FailureStats). No decision
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
#[derive(Debug)]
pub struct SlidingLog {
    inner: CasLimiter<SlidingLogCore>,
}

impl SlidingLog {
    /// Starts building a sliding log enforcing `quota` on `store`.
    ///
    /// ```
    /// use memcache_ratelimit::{MemoryStore, SlidingLog};
    /// use std::sync::Arc;
    ///
    /// let log = SlidingLog::builder("5/second".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    ///
    /// Its own setting is the compare-and-swap policy:
    ///
    /// ```
    /// use memcache_ratelimit::{CasPolicy, SlidingLog, MemoryStore};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let log = SlidingLog::builder("100/minute".parse()?, Arc::new(MemoryStore::new()))
    ///     .cas_policy(CasPolicy::new(4, Duration::from_micros(100), Duration::from_millis(2))?)
    ///     .build()?;
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn builder(quota: Quota, store: Arc<dyn Store>) -> LimiterBuilder<SlidingLog> {
        LimiterBuilder::from_spec(LimiterSpec::new(Algorithm::SlidingLog, quota), store)
    }

    /// The key holding `client`'s log.
    ///
    /// ```
    /// use memcache_ratelimit::{MemoryStore, SlidingLog};
    /// use std::sync::Arc;
    ///
    /// let log = SlidingLog::builder("5/second".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// assert!(log.key(b"alice").starts_with(b"rl:alice_log-"));
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn key(&self, client: &[u8]) -> Vec<u8> {
        self.inner.key(client)
    }

    /// Retries, conflicts and give-ups of the compare-and-swap loop.
    ///
    /// ```
    /// use memcache_ratelimit::{MemoryStore, RateLimiter, SlidingLog};
    /// use std::sync::Arc;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let log = SlidingLog::builder("5/second".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// log.check(b"alice").await?;
    /// assert_eq!(log.cas_stats().decisions, 1);
    /// assert_eq!(log.cas_stats().conflicts, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn cas_stats(&self) -> CasStats {
        self.inner.stats()
    }
}

impl LimiterBuilder<SlidingLog> {
    /// Validates the settings and builds the limiter. A quota whose limit
    /// is above [`MAX_LOG_LIMIT`] is rejected (field `limit`).
    ///
    /// ```
    /// use memcache_ratelimit::{MemoryStore, SlidingLog};
    /// use std::sync::Arc;
    ///
    /// let store = Arc::new(MemoryStore::new());
    /// assert!(SlidingLog::builder("10000/hour".parse()?, store.clone()).build().is_ok());
    /// assert!(SlidingLog::builder("10001/hour".parse()?, store).build().is_err());
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn build(self) -> Result<SlidingLog, ConfigError> {
        let (settings, spec) = self.into_parts(Self::build)?;
        if spec.algorithm != Algorithm::SlidingLog {
            return Err(other_algorithm(&spec, "sliding log"));
        }
        let limit = settings.quota.limit();
        if limit > MAX_LOG_LIMIT {
            return Err(ConfigError::new(
                "limit",
                format!("{limit} is above the sliding log's maximum of {MAX_LOG_LIMIT}"),
            ));
        }
        let core = SlidingLogCore::new(settings.quota);
        Ok(SlidingLog {
            inner: CasLimiter::new(settings, core, spec.cas),
        })
    }
}

delegate_rate_limiter!(SlidingLog, "sliding_log");
