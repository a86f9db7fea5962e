//! A limiter described as data: the algorithm, the quota and every setting,
//! all but the store. The builders, configuration files, dynamic quotas,
//! the command line, the benchmarks and the simulations all describe
//! limiters with one.

use std::sync::Arc;
use std::time::Duration;

use crate::algorithm::{Algorithm, CasPolicy, DeniedRequests, Estimator, DEFAULT_SEALED_CACHE};
use crate::clock::{Clock, SystemClock};
use crate::error::ConfigError;
use crate::key::KeySpace;
use crate::limiter::failure::FailurePolicy;
use crate::limiter::{RateLimiter, DEFAULT_DEADLINE, DEFAULT_MAX_CLOCK_SKEW};
use crate::quota::Quota;
use crate::store::Store;

/// Everything a limiter is built from except its store: the algorithm, the
/// quota and the settings every [`LimiterBuilder`](crate::LimiterBuilder) takes. A builder holds
/// one ([`LimiterBuilder::spec`](crate::LimiterBuilder::spec)) and a limiter keeps the one it was built
/// from ([`RateLimiter::spec`]); [`build`](Self::build) validates it as a
/// builder's `build` does. [`with_quota`](Self::with_quota) gives the same limiter
/// for another quota.
///
/// ```
/// use memcache_ratelimit::{Algorithm, FailurePolicy, LimiterSpec, MemoryStore};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let spec = LimiterSpec::new(Algorithm::SlidingWindow { sub_windows: 12 }, "100/minute".parse()?)
///     .namespace("api")
///     .deadline(Duration::from_millis(50))
///     .on_failure(FailurePolicy::Closed);
/// let store = Arc::new(MemoryStore::new());
/// let limiter = spec.build(store.clone())?;
/// assert!(limiter.check(b"alice").await?.is_allowed());
/// assert_eq!(spec.with_quota("5/second".parse()?).quota(), "5/second".parse()?);
/// // 7 sub-windows do not divide a minute into whole milliseconds.
/// let bad = LimiterSpec::new(Algorithm::SlidingWindow { sub_windows: 7 }, "100/minute".parse()?);
/// assert_eq!(bad.build(store).err().map(|error| error.field().to_owned()).as_deref(), Some("sub_windows"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct LimiterSpec {
    pub(crate) algorithm: Algorithm,
    pub(crate) quota: Quota,
    pub(crate) namespace: String,
    pub(crate) deadline: Duration,
    pub(crate) max_clock_skew: Duration,
    pub(crate) denied: DeniedRequests,
    pub(crate) failure: FailurePolicy,
    pub(crate) cas: CasPolicy,
    pub(crate) sealed_cache: usize,
    pub(crate) estimator: Estimator,
    pub(crate) clock: Arc<dyn Clock>,
}

impl LimiterSpec {
    /// A spec for `algorithm` enforcing `quota`, with every builder
    /// default.
    pub fn new(algorithm: Algorithm, quota: Quota) -> Self {
        Self {
            algorithm,
            quota,
            namespace: KeySpace::default().namespace().to_owned(),
            deadline: DEFAULT_DEADLINE,
            max_clock_skew: DEFAULT_MAX_CLOCK_SKEW,
            denied: DeniedRequests::default(),
            failure: FailurePolicy::default(),
            cas: CasPolicy::default(),
            sealed_cache: DEFAULT_SEALED_CACHE,
            estimator: Estimator::default(),
            clock: Arc::new(SystemClock),
        }
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The quota.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The same spec, enforcing `quota` instead.
    pub fn with_quota(mut self, quota: Quota) -> Self {
        self.quota = quota;
        self
    }

    /// The same spec, with `algorithm` instead.
    pub fn with_algorithm(mut self, algorithm: Algorithm) -> Self {
        self.algorithm = algorithm;
        self
    }

    /// See [`LimiterBuilder::namespace`](crate::LimiterBuilder::namespace).
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
        self
    }

    /// See [`LimiterBuilder::deadline`](crate::LimiterBuilder::deadline).
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// See [`LimiterBuilder::max_clock_skew`](crate::LimiterBuilder::max_clock_skew).
    pub fn max_clock_skew(mut self, skew: Duration) -> Self {
        self.max_clock_skew = skew;
        self
    }

    /// See [`LimiterBuilder::denied_requests`](crate::LimiterBuilder::denied_requests).
    pub fn denied_requests(mut self, denied: DeniedRequests) -> Self {
        self.denied = denied;
        self
    }

    /// See [`LimiterBuilder::on_failure`](crate::LimiterBuilder::on_failure).
    pub fn on_failure(mut self, policy: FailurePolicy) -> Self {
        self.failure = policy;
        self
    }

    /// The failure policy (see [`LimiterBuilder::on_failure`](crate::LimiterBuilder::on_failure)).
    ///
    /// ```
    /// use memcache_ratelimit::{Algorithm, FailurePolicy, LimiterSpec};
    ///
    /// let spec = LimiterSpec::new(Algorithm::FixedWindow, "5/second".parse()?);
    /// assert_eq!(spec.failure_policy(), FailurePolicy::Open);
    /// let spec = spec.on_failure(FailurePolicy::Closed);
    /// assert_eq!(spec.failure_policy(), FailurePolicy::Closed);
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn failure_policy(&self) -> FailurePolicy {
        self.failure
    }

    /// See [`LimiterBuilder::cas_policy`](crate::LimiterBuilder::cas_policy); used by the compare-and-swap
    /// algorithms ([`Algorithm::uses_cas`]) and ignored by the windows.
    pub fn cas_policy(mut self, policy: CasPolicy) -> Self {
        self.cas = policy;
        self
    }

    /// See [`LimiterBuilder::sealed_cache`](crate::LimiterBuilder::sealed_cache); used by the sliding window and
    /// ignored by the other algorithms.
    pub fn sealed_cache(mut self, buckets: usize) -> Self {
        self.sealed_cache = buckets;
        self
    }

    /// See [`LimiterBuilder::estimator`](crate::LimiterBuilder::estimator); used by the sliding window and
    /// ignored by the other algorithms.
    pub fn estimator(mut self, estimator: Estimator) -> Self {
        self.estimator = estimator;
        self
    }

    /// The sliding window's estimator (see
    /// [`LimiterBuilder::estimator`](crate::LimiterBuilder::estimator)).
    pub fn estimator_choice(&self) -> Estimator {
        self.estimator
    }

    /// See [`LimiterBuilder::clock`](crate::LimiterBuilder::clock).
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The limiter this spec describes, on `store`, every setting
    /// validated.
    pub fn build(&self, store: Arc<dyn Store>) -> Result<RateLimiter, ConfigError> {
        RateLimiter::new(self.clone(), store)
    }
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
