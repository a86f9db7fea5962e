//! The façade every algorithm presents, and the settings they share.

mod builder;
pub(crate) mod deny_cache;
pub mod dynamic;
pub mod failure;
pub(crate) mod settings;
pub(crate) mod spec;
pub(crate) mod stats;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

pub(crate) use crate::algorithm::window::buckets::unix_nanos;
use crate::algorithm::Inspection;
use crate::clock::Clock;
use crate::decision::Decision;
use crate::error::Error;
use crate::limiter::stats::LimiterStats;
use crate::quota::Quota;

/// The default bound on one decision: 100 ms. memcached answers in well
/// under a millisecond on a healthy network; a decision that has waited
/// this long is better reported as a failure (and decided by the failure
/// policy) than left hanging for the store's own I/O timeout, which is
/// longer (500 ms by default for
/// [`MemcachedStore`](crate::MemcachedStore), see
/// [`io_timeout`](crate::store::MemcachedStoreBuilder::io_timeout)).
pub const DEFAULT_DEADLINE: Duration = Duration::from_millis(100);
/// The default bound on how far apart the clocks of the processes sharing a
/// store are: hosts kept by NTP agree far better than this.
pub const DEFAULT_MAX_CLOCK_SKEW: Duration = Duration::from_secs(1);
/// The largest clock skew a limiter accepts.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(60);
/// The longest deadline a limiter accepts.
pub const MAX_DEADLINE: Duration = Duration::from_secs(60);

/// A rate limiter: decides, for a client key of any bytes, whether a request
/// may go ahead. Every algorithm implements it, over any [`Store`](crate::store::Store), and it
/// is object safe, so a service can hold a `Box<dyn RateLimiter>` chosen by
/// configuration.
///
/// ```
/// use memcache_ratelimit::{MemoryStore, RateLimiter, SlidingWindow};
/// use std::sync::Arc;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let limiter: Box<dyn RateLimiter> = Box::new(
///     SlidingWindow::builder("2/second".parse()?, Arc::new(MemoryStore::new())).build()?,
/// );
/// assert!(limiter.check(b"alice").await?.is_allowed());
/// assert!(limiter.check_n(b"alice", 1).await?.is_allowed());
/// limiter.reset(b"alice").await?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[async_trait]
pub trait RateLimiter: Send + Sync {
    /// The quota this limiter enforces.
    fn quota(&self) -> Quota;

    /// The clock [`check`](Self::check) and [`check_n`](Self::check_n) read.
    fn clock(&self) -> &dyn Clock;

    /// Decides one request of cost 1 from client `key`, now.
    async fn check(&self, key: &[u8]) -> Result<Decision, Error> {
        self.check_at(key, 1, self.clock().now()).await
    }

    /// Decides one request of `cost` units from client `key`, now. A cost
    /// of 0 is [`Error::ZeroCost`]; a cost above what the limiter can ever
    /// hold is [`Error::CostExceedsLimit`].
    async fn check_n(&self, key: &[u8], cost: u64) -> Result<Decision, Error> {
        self.check_at(key, cost, self.clock().now()).await
    }

    /// Decides one request of `cost` units from client `key` as if it
    /// happened `at`, a timestamp supplied by the caller, for example to
    /// replay historical events. Window algorithms count each event in the
    /// bucket of its own timestamp. The compare-and-swap algorithms keep
    /// time moving forward per key: an event older than the newest one the
    /// key has seen is decided as of that newest time (see each algorithm's
    /// documentation), so replaying out of order can never earn quota from
    /// the past.
    async fn check_at(&self, key: &[u8], cost: u64, at: DateTime<Utc>) -> Result<Decision, Error>;

    /// Forgets everything counted for client `key`.
    async fn reset(&self, key: &[u8]) -> Result<(), Error>;

    /// The quota client `key` is held to: [`quota`](Self::quota), unless
    /// the limiter picks quotas per client
    /// ([`DynamicLimiter`](crate::DynamicLimiter)).
    fn quota_for(&self, key: &[u8]) -> Quota {
        let _ = key;
        self.quota()
    }

    /// What this limiter has decided since it was built; see
    /// [`LimiterStats`].
    fn stats(&self) -> LimiterStats;

    /// What the store holds for client `key` now, read without counting
    /// anything: its keys and values and, for the window algorithms, the
    /// estimate; see [`Inspection`]. For operators.
    async fn inspect(&self, key: &[u8]) -> Result<Inspection, Error>;
}

/// A boxed or shared limiter is a limiter, so decorators such as
/// [`DenyCache`](crate::DenyCache) can wrap one chosen at run time. Every
/// method goes to the limiter's own, so its shortcuts are kept.
macro_rules! forward_rate_limiter {
    ($($wrapper:ident),*) => {$(
        #[async_trait]
        impl<L: RateLimiter + ?Sized> RateLimiter for $wrapper<L> {
            fn quota(&self) -> Quota {
                (**self).quota()
            }

            fn clock(&self) -> &dyn Clock {
                (**self).clock()
            }

            async fn check(&self, key: &[u8]) -> Result<Decision, Error> {
                (**self).check(key).await
            }

            async fn check_n(&self, key: &[u8], cost: u64) -> Result<Decision, Error> {
                (**self).check_n(key, cost).await
            }

            async fn check_at(&self, key: &[u8], cost: u64, at: DateTime<Utc>) -> Result<Decision, Error> {
                (**self).check_at(key, cost, at).await
            }

            async fn reset(&self, key: &[u8]) -> Result<(), Error> {
                (**self).reset(key).await
            }

            fn quota_for(&self, key: &[u8]) -> Quota {
                (**self).quota_for(key)
            }

            fn stats(&self) -> LimiterStats {
                (**self).stats()
            }

            async fn inspect(&self, key: &[u8]) -> Result<Inspection, Error> {
                (**self).inspect(key).await
            }
        }
    )*};
}

forward_rate_limiter!(Box, Arc);

/// Implements [`RateLimiter`] for a public algorithm type by handing every
/// call to its `inner` engine, with the failure policy applied. `check`
/// and `check_n` do what the trait's defaults do, but call the engine
/// directly (through the defaults, `check_at` would be one more boxed
/// future per decision), and read the clock as nanoseconds, which is what
/// the engines compute with, rather than building a `DateTime` to take
/// apart again.
macro_rules! delegate_rate_limiter {
    ($ty:ty, $name:literal) => {
        impl $ty {
            /// The store failures this limiter absorbed under its
            /// [`FailurePolicy`](crate::FailurePolicy), since it was built.
            pub fn failure_stats(&self) -> $crate::FailureStats {
                self.inner.settings.failures.stats()
            }

            /// The engine's decision at `now` (unix nanoseconds), or the
            /// failure policy's in its place.
            async fn decide(
                &self,
                key: &[u8],
                cost: u64,
                now: i64,
            ) -> Result<$crate::Decision, $crate::Error> {
                use tracing::Instrument;
                let settings = &self.inner.settings;
                let span = tracing::debug_span!(
                    "rate_limit",
                    algorithm = $name,
                    client = %$crate::key::Printable(key),
                    cost,
                );
                async {
                    let outcome = self.inner.check_nanos(key, cost, now).await;
                    let outcome = settings
                        .failures
                        .decide(outcome, settings.quota, key, cost, now)
                        .await;
                    match &outcome {
                        Ok(decision) => tracing::trace!(
                            allowed = decision.is_allowed(),
                            remaining = decision.remaining(),
                            under_failure = decision.under_failure(),
                            "decided"
                        ),
                        Err(error) => tracing::debug!(%error, "no decision"),
                    }
                    outcome
                }
                .instrument(span)
                .await
            }
        }

        #[async_trait::async_trait]
        impl $crate::RateLimiter for $ty {
            fn quota(&self) -> $crate::Quota {
                self.inner.settings.quota
            }

            fn clock(&self) -> &dyn $crate::Clock {
                self.inner.settings.clock.as_ref()
            }

            async fn check(&self, key: &[u8]) -> Result<$crate::Decision, $crate::Error> {
                self.decide(key, 1, self.inner.settings.now()?).await
            }

            async fn check_n(
                &self,
                key: &[u8],
                cost: u64,
            ) -> Result<$crate::Decision, $crate::Error> {
                self.decide(key, cost, self.inner.settings.now()?).await
            }

            async fn check_at(
                &self,
                key: &[u8],
                cost: u64,
                at: chrono::DateTime<chrono::Utc>,
            ) -> Result<$crate::Decision, $crate::Error> {
                self.decide(key, cost, $crate::limiter::unix_nanos(at)?)
                    .await
            }

            async fn reset(&self, key: &[u8]) -> Result<(), $crate::Error> {
                self.inner.settings.failures.reset(key).await;
                self.inner.reset(key).await
            }

            async fn inspect(
                &self,
                key: &[u8],
            ) -> Result<$crate::Inspection, $crate::Error> {
                self.inner.inspect(key, self.inner.settings.now()?).await
            }

            fn stats(&self) -> $crate::LimiterStats {
                let failures = &self.inner.settings.failures;
                let (allowed, denied, errors) = failures.outcomes();
                $crate::LimiterStats {
                    allowed,
                    denied,
                    errors,
                    cas_retries: self.inner.cas_retries(),
                    failures: failures.stats(),
                }
            }
        }
    };
}
pub(crate) use delegate_rate_limiter;

/// What happens to the cost of a denied request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DeniedRequests {
    /// Denied requests do not consume quota: their cost is given back with a
    /// decrement right after the decision. A client that keeps retrying
    /// while it is denied gets through again as soon as its earlier traffic
    /// slides out of the window. The refund is a second round trip, paid
    /// only by denied requests.
    #[default]
    Refunded,
    /// Denied requests count like allowed ones ("strict mode"): a client
    /// that keeps sending while it is denied stays denied until it slows
    /// down below the limit. Costs one round trip per decision, allowed or
    /// not.
    Counted,
}

pub(crate) use self::builder::other_algorithm;
pub use self::builder::{CasAlgorithm, LimiterBuilder};
pub(crate) use self::settings::{timeout, Settings};
