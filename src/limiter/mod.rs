//! The façade every algorithm presents, and the settings they share.

pub(crate) mod deny_cache;
pub mod dynamic;
pub mod failure;
pub(crate) mod spec;
pub(crate) mod stats;

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

pub(crate) use crate::algorithm::window::buckets::unix_nanos;
use crate::algorithm::{CasPolicy, Inspection};
use crate::clock::Clock;
use crate::decision::Decision;
use crate::error::{ConfigError, Error};
use crate::key::KeySpace;
use crate::limiter::failure::{scale_quota, FailurePolicy, Failures};
use crate::limiter::spec::LimiterSpec;
use crate::limiter::stats::LimiterStats;
use crate::quota::{Quota, MAX_LIMIT};
use crate::store::{MemoryStore, Store};

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
/// may go ahead. Every algorithm implements it, over any [`Store`], and it
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

/// The settings every limiter shares, validated by [`LimiterBuilder`].
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) quota: Quota,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) keys: KeySpace,
    pub(crate) deadline: Duration,
    pub(crate) denied: DeniedRequests,
    pub(crate) max_clock_skew: Duration,
    pub(crate) failures: Arc<Failures>,
}

impl Settings {
    /// How much longer than its algorithm reads it an item is kept: memcached
    /// expires items on a one-second clock, a process whose clock is up to
    /// `max_clock_skew` behind the writer's still reads it that much later,
    /// and a decision can land up to its deadline after it was made.
    pub(crate) fn expiry_slack(&self) -> Duration {
        self.max_clock_skew.max(Duration::from_secs(1)) + self.deadline
    }

    /// The clock's time in unix nanoseconds, or the error for a clock that
    /// reads a time beyond what they can hold.
    pub(crate) fn now(&self) -> Result<i64, Error> {
        match self.clock.unix_nanos() {
            Some(now) => Ok(now),
            None => unix_nanos(self.clock.now()),
        }
    }

    /// Runs `work` within the deadline; past it, the work is dropped (a
    /// request already written may still land) and the answer is
    /// [`Error::DeadlineExceeded`].
    pub(crate) async fn within_deadline<T, E: Into<Error>>(
        &self,
        work: impl Future<Output = Result<T, E>>,
    ) -> Result<T, Error> {
        match timeout(self.deadline, work).await {
            Some(outcome) => outcome.map_err(Into::into),
            None => Err(Error::DeadlineExceeded(self.deadline)),
        }
    }

    /// Rejects a cost that can never be decided: zero, or more than
    /// `capacity`, the most the limiter can ever admit at once.
    pub(crate) fn check_cost(&self, cost: u64, capacity: u64) -> Result<(), Error> {
        if cost == 0 {
            return Err(Error::ZeroCost);
        }
        if cost > capacity {
            return Err(Error::CostExceedsLimit {
                cost,
                limit: capacity,
            });
        }
        Ok(())
    }
}

/// `work`, given at most `limit` (`None` past it), as
/// [`tokio::time::timeout`] runs it, but with the timer started only the
/// first time the work has to wait: work that completes at once (every call
/// to an in-process store) costs no timer and no clock read. The limit
/// counts from that first poll, which does not wait. The timer is polled
/// outside the task's cooperative budget, so work that spends the budget
/// cannot keep it from firing.
pub(crate) async fn timeout<F: Future>(limit: Duration, work: F) -> Option<F::Output> {
    let mut work = std::pin::pin!(work);
    let mut timer = std::pin::pin!(None);
    std::future::poll_fn(|context| {
        if let Poll::Ready(output) = work.as_mut().poll(context) {
            return Poll::Ready(Some(output));
        }
        if timer.is_none() {
            timer.set(Some(tokio::task::unconstrained(tokio::time::sleep(limit))));
        }
        match timer.as_mut().as_pin_mut().map(|timer| timer.poll(context)) {
            Some(Poll::Ready(())) => Poll::Ready(None),
            _ => Poll::Pending,
        }
    })
    .await
}

/// Builds a limiter of algorithm `A` ([`SlidingWindow`](crate::SlidingWindow),
/// [`Gcra`](crate::Gcra), ...): a [`LimiterSpec`] and the store. Each
/// algorithm's `builder` starts one, every setter writes into the spec,
/// and `build` validates everything at once, so a limiter that exists is
/// correctly configured. [`LimiterSpec::build`] goes through the same
/// builder.
///
/// ```
/// use memcache_ratelimit::{Algorithm, DeniedRequests, ManualClock, MemoryStore, SlidingWindow};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let clock = ManualClock::default();
/// let builder = SlidingWindow::builder("100/minute".parse()?, Arc::new(MemoryStore::with_clock(clock.clone())))
///     .sub_windows(4)
///     .clock(clock)
///     .namespace("api")
///     .deadline(Duration::from_millis(50))
///     .denied_requests(DeniedRequests::Counted);
/// assert_eq!(builder.spec().algorithm(), Algorithm::SlidingWindow { sub_windows: 4 });
/// let limiter = builder.build()?;
///
/// let bad = SlidingWindow::builder("100/minute".parse()?, Arc::new(MemoryStore::new()))
///     .namespace("has space")
///     .build();
/// assert_eq!(bad.unwrap_err().field(), "namespace");
/// # Ok::<(), memcache_ratelimit::ConfigError>(())
/// ```
#[must_use]
pub struct LimiterBuilder<A> {
    pub(crate) spec: LimiterSpec,
    store: Arc<dyn Store>,
    algorithm: PhantomData<fn() -> A>,
}

impl<A> Clone for LimiterBuilder<A> {
    fn clone(&self) -> Self {
        Self {
            spec: self.spec.clone(),
            store: self.store.clone(),
            algorithm: PhantomData,
        }
    }
}

impl<A> std::fmt::Debug for LimiterBuilder<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LimiterBuilder")
            .field("spec", &self.spec)
            .field("store", &self.store)
            .finish()
    }
}

impl<A> LimiterBuilder<A> {
    /// A builder of `spec` on `store`; the algorithm's own type checks, at
    /// `build`, that the spec's algorithm is its own.
    pub(crate) fn from_spec(spec: LimiterSpec, store: Arc<dyn Store>) -> Self {
        Self {
            spec,
            store,
            algorithm: PhantomData,
        }
    }

    /// What this builder builds: the algorithm, the quota and the settings.
    pub fn spec(&self) -> &LimiterSpec {
        &self.spec
    }

    /// What to decide when the store fails or misses the deadline
    /// (default [`FailurePolicy::Open`]); see [`FailurePolicy`]. A
    /// fallback share outside (0, 1] is rejected by `build`.
    pub fn on_failure(mut self, policy: FailurePolicy) -> Self {
        self.spec = self.spec.on_failure(policy);
        self
    }

    /// The clock to read (default [`SystemClock`](crate::SystemClock)).
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.spec = self.spec.clock(clock);
        self
    }

    /// The first part of every key (default `rl`): 1 to 64 printable ASCII
    /// bytes, without `#`. Two limiters over the same clients need
    /// different namespaces unless they are meant to share counts: counters
    /// are named by client and bucket, not by limit or algorithm, so a fixed
    /// window and a one-sub-window sliding window of the same period in one
    /// namespace count into the same keys.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.spec = self.spec.namespace(namespace);
        self
    }

    /// The longest a decision may take (default [`DEFAULT_DEADLINE`], at
    /// most [`MAX_DEADLINE`]). Past it, the caller gets
    /// [`Error::DeadlineExceeded`] rather than waiting on the store. The
    /// deadline runs on tokio's timer, so the runtime needs its time driver
    /// (`#[tokio::main]` and `Runtime::new` enable it); the timer is only
    /// started once the store makes a decision wait, so decisions on an
    /// in-process store never touch it.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.spec = self.spec.deadline(deadline);
        self
    }

    /// How far apart the clocks of any two processes sharing the store may
    /// be (default [`DEFAULT_MAX_CLOCK_SKEW`], at most [`MAX_CLOCK_SKEW`]):
    /// with clocks within ±1 s of the true time, that is 2 s. A window
    /// bucket that closed longer ago than this, plus the deadline, can no
    /// longer change, so the sliding window reads it at most once per
    /// client and then keeps it in process. Every counter and state is
    /// also kept this much (at least 1 s) plus the deadline longer than
    /// its algorithm reads it, so a process whose clock lags still finds
    /// it.
    pub fn max_clock_skew(mut self, skew: Duration) -> Self {
        self.spec = self.spec.max_clock_skew(skew);
        self
    }

    /// What denied requests cost (default [`DeniedRequests::Refunded`]).
    pub fn denied_requests(mut self, denied: DeniedRequests) -> Self {
        self.spec = self.spec.denied_requests(denied);
        self
    }

    /// Shorthand: `true` for [`DeniedRequests::Counted`], `false` for
    /// [`DeniedRequests::Refunded`].
    pub fn strict(self, strict: bool) -> Self {
        self.denied_requests(if strict {
            DeniedRequests::Counted
        } else {
            DeniedRequests::Refunded
        })
    }

    /// How the compare-and-swap loop retries (default [`CasPolicy::default`]).
    pub fn cas_policy(mut self, policy: CasPolicy) -> Self
    where
        A: CasAlgorithm,
    {
        self.spec = self.spec.cas_policy(policy);
        self
    }

    /// Validates the shared settings and hands back the runtime settings
    /// and the spec, with the local stand-in of a
    /// [`FailurePolicy::Fallback`] built by `build`: the same algorithm and
    /// settings on a [`MemoryStore`] of the same clock, with the quota (and
    /// the algorithm's own burst or capacity) scaled to the share.
    pub(crate) fn into_parts<L: RateLimiter + 'static>(
        self,
        build: fn(Self) -> Result<L, ConfigError>,
    ) -> Result<(Settings, LimiterSpec), ConfigError> {
        let fallback = match self.spec.failure {
            FailurePolicy::Fallback { share } => {
                let spec = self
                    .spec
                    .clone()
                    .with_quota(scale_quota(self.spec.quota, share))
                    .with_algorithm(self.spec.algorithm.scaled(share))
                    .on_failure(FailurePolicy::ReturnError);
                let store = Arc::new(MemoryStore::with_clock(self.spec.clock.clone()));
                Some(Arc::new(build(Self::from_spec(spec, store))?) as Arc<dyn RateLimiter>)
            }
            _ => None,
        };
        self.settings(fallback)
    }

    /// [`into_parts`](Self::into_parts) for engines tested on their own,
    /// under a policy with no stand-in.
    #[cfg(test)]
    pub(crate) fn into_settings(self) -> Result<Settings, ConfigError> {
        self.settings(None).map(|(settings, _)| settings)
    }

    fn settings(
        self,
        fallback: Option<Arc<dyn RateLimiter>>,
    ) -> Result<(Settings, LimiterSpec), ConfigError> {
        let spec = self.spec;
        if spec.deadline.is_zero() || spec.deadline > MAX_DEADLINE {
            return Err(ConfigError::new(
                "deadline",
                format!("{:?} is outside (0, {MAX_DEADLINE:?}]", spec.deadline),
            ));
        }
        if spec.quota.limit() > MAX_LIMIT {
            return Err(ConfigError::new(
                "limit",
                format!(
                    "{} is more than MAX_LIMIT ({MAX_LIMIT}, 2^56), beyond which memcached's 64-bit counters could wrap",
                    spec.quota.limit()
                ),
            ));
        }
        if spec.max_clock_skew > MAX_CLOCK_SKEW {
            return Err(ConfigError::new(
                "max_clock_skew",
                format!("{:?} is more than {MAX_CLOCK_SKEW:?}", spec.max_clock_skew),
            ));
        }
        let settings = Settings {
            quota: spec.quota,
            store: self.store,
            clock: spec.clock.clone(),
            keys: KeySpace::new(spec.namespace.clone())?,
            deadline: spec.deadline,
            denied: spec.denied,
            max_clock_skew: spec.max_clock_skew,
            failures: Arc::new(Failures::new(spec.failure, fallback)?),
        };
        Ok((settings, spec))
    }
}

/// The error of a builder whose spec names another algorithm than its own,
/// which the crate's constructors never make.
pub(crate) fn other_algorithm(spec: &LimiterSpec, expected: &str) -> ConfigError {
    ConfigError::new(
        "algorithm",
        format!(
            "a {expected} builder cannot build {}",
            spec.algorithm.name()
        ),
    )
}

/// The algorithms that decide by compare-and-swap, whose builders take a
/// [`CasPolicy`](LimiterBuilder::cas_policy).
pub trait CasAlgorithm: cas_algorithm::Sealed {}

mod cas_algorithm {
    /// Keeps [`CasAlgorithm`](super::CasAlgorithm) to the crate's
    /// algorithms.
    pub trait Sealed {}

    impl Sealed for crate::TokenBucket {}
    impl Sealed for crate::Gcra {}
    impl Sealed for crate::SlidingLog {}
    impl Sealed for crate::HybridQuota {}
}

impl CasAlgorithm for crate::TokenBucket {}
impl CasAlgorithm for crate::Gcra {}
impl CasAlgorithm for crate::SlidingLog {}
impl CasAlgorithm for crate::HybridQuota {}
