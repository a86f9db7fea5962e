//! [`CasPolicy`]: how hard a compare-and-swap algorithm tries before it
//! gives up.

use std::time::Duration;

use rand::Rng;

use crate::error::ConfigError;

/// How hard a compare-and-swap algorithm tries before giving up.
///
/// Requests for one key that overlap in one limiter are decided together,
/// one read and one write for the group, so they never race each other;
/// the attempts and pauses are spent only on writes that lose to another
/// process. A group that runs out of attempts fails every one of its
/// requests with [`Error::Contention`](crate::Error::Contention).
///
/// ```
/// use memcache_ratelimit::{MemoryStore, TokenBucket};
/// use memcache_ratelimit::algorithm::CasPolicy;
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let bucket = TokenBucket::builder("10/second".parse()?, Arc::new(MemoryStore::new()))
///     .cas_policy(CasPolicy::new(16, Duration::from_micros(200), Duration::from_millis(5))?)
///     .build()?;
/// # Ok::<(), memcache_ratelimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CasPolicy {
    pub(super) attempts: u32,
    pub(super) base_backoff: Duration,
    pub(super) max_backoff: Duration,
}

impl CasPolicy {
    /// At most `attempts` tries (1 to 1,000); before retry `k` the loop
    /// sleeps a random time up to `base_backoff × 2^(k−1)`, capped at
    /// `max_backoff`.
    pub fn new(
        attempts: u32,
        base_backoff: Duration,
        max_backoff: Duration,
    ) -> Result<Self, ConfigError> {
        if attempts == 0 || attempts > 1_000 {
            return Err(ConfigError::new(
                "cas_attempts",
                format!("{attempts} is outside 1..=1000"),
            ));
        }
        if base_backoff > max_backoff {
            return Err(ConfigError::new(
                "cas_backoff",
                format!("base {base_backoff:?} exceeds max {max_backoff:?}"),
            ));
        }
        Ok(Self {
            attempts,
            base_backoff,
            max_backoff,
        })
    }

    /// The most attempts per decision (per group of combined decisions).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The pause before retry `retry` (1-based): full jitter over an
    /// exponentially growing, capped range.
    pub(super) fn backoff(&self, retry: u32) -> Duration {
        let ceiling = self
            .base_backoff
            .saturating_mul(1u32 << retry.saturating_sub(1).min(20))
            .min(self.max_backoff);
        if ceiling.is_zero() {
            return Duration::ZERO;
        }
        rand::rng().random_range(Duration::ZERO..=ceiling)
    }
}

impl Default for CasPolicy {
    /// 8 attempts, pauses from up to 500 µs growing to at most 10 ms.
    fn default() -> Self {
        Self {
            attempts: 8,
            base_backoff: Duration::from_micros(500),
            max_backoff: Duration::from_millis(10),
        }
    }
}
