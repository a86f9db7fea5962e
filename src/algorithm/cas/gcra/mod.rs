//! GCRA, the generic cell rate algorithm, by optimistic compare-and-swap;
//! with a delay mode that makes it a leaky bucket used as a queue.

mod core;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use self::core::GcraCore;
use crate::algorithm::cas::optimistic::CasLimiter;
use crate::algorithm::cas::stats::CasStats;
use crate::decision::Decision;
use crate::error::{ConfigError, Error};
use crate::limiter::spec::{Algorithm, LimiterSpec};
use crate::limiter::{delegate_rate_limiter, other_algorithm, LimiterBuilder};
use crate::quota::Quota;
use crate::store::Store;

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
/// **Delay mode, the leaky bucket as a queue**: [`Gcra::until_ready`] and
/// [`Gcra::reserve`] accept a request that does not fit yet if it will fit
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
/// repair is counted in [`FailureStats::repaired`](crate::FailureStats).
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
#[derive(Debug)]
pub struct Gcra {
    inner: CasLimiter<GcraCore>,
}

/// A request accepted for later, or rejected, in delay mode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reservation {
    decision: Decision,
    delay: Duration,
}

impl Reservation {
    /// Whether the request got a slot, and the limit's state.
    pub fn decision(&self) -> Decision {
        self.decision
    }

    /// How long to wait before acting, when the request got a slot.
    pub fn delay(&self) -> Duration {
        self.delay
    }
}

impl Gcra {
    /// Starts building a GCRA limiter enforcing `quota` on `store`.
    pub fn builder(quota: Quota, store: Arc<dyn Store>) -> LimiterBuilder<Gcra> {
        LimiterBuilder::from_spec(
            LimiterSpec::new(Algorithm::Gcra { burst: None }, quota),
            store,
        )
    }

    /// The burst: how many requests a quiet client may send at once.
    pub fn burst(&self) -> u64 {
        self.inner.core.burst
    }

    /// The key holding `client`'s theoretical arrival time.
    pub fn key(&self, client: &[u8]) -> Vec<u8> {
        self.inner.key(client)
    }

    /// Retries, conflicts and give-ups of the compare-and-swap loop.
    pub fn cas_stats(&self) -> CasStats {
        self.inner.stats()
    }

    /// Reserves a slot for a request of `cost` that may wait up to
    /// `max_delay`, without waiting. An allowed reservation is already
    /// counted: act after [`Reservation::delay`].
    pub async fn reserve(
        &self,
        key: &[u8],
        cost: u64,
        max_delay: Duration,
    ) -> Result<Reservation, Error> {
        let settings = &self.inner.settings;
        let now = settings.now()?;
        match self.inner.step(key, cost, now, max_delay).await {
            Ok((decision, delay)) => Ok(Reservation { decision, delay }),
            // The failure policy decides; its decision is immediate, so
            // there is nothing to wait for.
            Err(error) => {
                let decision = settings
                    .failures
                    .decide(Err(error), settings.quota, key, cost, now)
                    .await?;
                Ok(Reservation {
                    decision,
                    delay: Duration::ZERO,
                })
            }
        }
    }

    /// Waits until a request of `cost` may go ahead, if that is within
    /// `max_delay`; otherwise returns the denial at once. Waiting uses
    /// tokio's timer.
    pub async fn until_ready(
        &self,
        key: &[u8],
        cost: u64,
        max_delay: Duration,
    ) -> Result<Decision, Error> {
        let reservation = self.reserve(key, cost, max_delay).await?;
        if reservation.decision.is_allowed() && !reservation.delay.is_zero() {
            tokio::time::sleep(reservation.delay).await;
        }
        Ok(reservation.decision)
    }
}

impl LimiterBuilder<Gcra> {
    /// How many requests a quiet client may send at once (default: the
    /// quota's limit). A request may cost at most this much.
    pub fn burst(mut self, requests: u64) -> Self {
        self.spec = self.spec.with_algorithm(Algorithm::Gcra {
            burst: Some(requests),
        });
        self
    }

    /// Validates the settings and builds the limiter.
    pub fn build(self) -> Result<Gcra, ConfigError> {
        let (settings, spec) = self.into_parts(Self::build)?;
        let Algorithm::Gcra { burst } = spec.algorithm else {
            return Err(other_algorithm(&spec, "GCRA"));
        };
        let burst = burst.unwrap_or(settings.quota.limit());
        if burst == 0 {
            return Err(ConfigError::new("burst", "must be at least 1"));
        }
        let core = GcraCore::new(burst, settings.quota);
        Ok(Gcra {
            inner: CasLimiter::new(settings, core, spec.cas),
        })
    }
}

delegate_rate_limiter!(Gcra, "gcra");
