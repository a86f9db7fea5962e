//! A limiter described as data: the algorithm and the settings, without the
//! quota and the store. Configuration files and dynamic quotas build
//! limiters from one.

use std::sync::Arc;
use std::time::Duration;

use crate::algorithm::{
    CasPolicy, FixedWindow, Gcra, HybridQuota, SlidingLog, SlidingWindow, TokenBucket,
};
use crate::clock::{Clock, SystemClock};
use crate::error::ConfigError;
use crate::failure::FailurePolicy;
use crate::limiter::{
    DeniedRequests, LimiterBuilder, RateLimiter, DEFAULT_DEADLINE, DEFAULT_MAX_CLOCK_SKEW,
};
use crate::quota::Quota;
use crate::store::Store;

/// Which algorithm a [`LimiterSpec`] builds, with the parameters it takes
/// beside the quota.
///
/// ```
/// use memcache_ratelimit::Algorithm;
///
/// assert_eq!(Algorithm::default(), Algorithm::SlidingWindow { sub_windows: 4 });
/// assert_eq!(Algorithm::Gcra { burst: None }.name(), "gcra");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// [`SlidingWindow`] with `sub_windows` sub-windows (1 to 60, dividing
    /// the period into whole milliseconds).
    SlidingWindow {
        /// The number of sub-windows, `n`.
        sub_windows: u32,
    },
    /// [`FixedWindow`].
    FixedWindow,
    /// [`TokenBucket`]; `capacity` defaults to the quota's limit.
    TokenBucket {
        /// The bucket's capacity in tokens.
        capacity: Option<u64>,
    },
    /// [`Gcra`]; `burst` defaults to the quota's limit.
    Gcra {
        /// The most requests admitted at once.
        burst: Option<u64>,
    },
    /// [`SlidingLog`].
    SlidingLog,
    /// [`HybridQuota`].
    HybridQuota,
}

impl Default for Algorithm {
    /// The sliding window with 4 sub-windows.
    fn default() -> Self {
        Self::SlidingWindow { sub_windows: 4 }
    }
}

impl Algorithm {
    /// The algorithm's name in configuration files and metrics:
    /// `sliding_window`, `fixed_window`, `token_bucket`, `gcra`,
    /// `sliding_log` or `hybrid_quota`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::SlidingWindow { .. } => "sliding_window",
            Self::FixedWindow => "fixed_window",
            Self::TokenBucket { .. } => "token_bucket",
            Self::Gcra { .. } => "gcra",
            Self::SlidingLog => "sliding_log",
            Self::HybridQuota => "hybrid_quota",
        }
    }
}

/// Everything a limiter is built from except its quota and its store: the
/// algorithm and the settings every [`LimiterBuilder`] takes. One spec
/// builds limiters for many quotas, each validated as its builder
/// validates it.
///
/// ```
/// use memcache_ratelimit::{Algorithm, FailurePolicy, LimiterSpec, MemoryStore};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let spec = LimiterSpec::new(Algorithm::SlidingWindow { sub_windows: 12 })
///     .namespace("api")
///     .deadline(Duration::from_millis(50))
///     .on_failure(FailurePolicy::Closed);
/// let store = Arc::new(MemoryStore::new());
/// let limiter = spec.build("100/minute".parse()?, store.clone())?;
/// assert!(limiter.check(b"alice").await?.is_allowed());
/// // 7 sub-windows do not divide a minute into whole milliseconds.
/// let bad = LimiterSpec::new(Algorithm::SlidingWindow { sub_windows: 7 });
/// assert!(bad.build("100/minute".parse()?, store).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct LimiterSpec {
    algorithm: Algorithm,
    namespace: Option<String>,
    deadline: Duration,
    max_clock_skew: Duration,
    denied: DeniedRequests,
    failure: FailurePolicy,
    cas: Option<CasPolicy>,
    clock: Arc<dyn Clock>,
}

impl Default for LimiterSpec {
    fn default() -> Self {
        Self::new(Algorithm::default())
    }
}

impl LimiterSpec {
    /// A spec for `algorithm`, with every builder default.
    pub fn new(algorithm: Algorithm) -> Self {
        Self {
            algorithm,
            namespace: None,
            deadline: DEFAULT_DEADLINE,
            max_clock_skew: DEFAULT_MAX_CLOCK_SKEW,
            denied: DeniedRequests::default(),
            failure: FailurePolicy::default(),
            cas: None,
            clock: Arc::new(SystemClock),
        }
    }

    /// The algorithm.
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// See [`LimiterBuilder::namespace`].
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// See [`LimiterBuilder::deadline`].
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// See [`LimiterBuilder::max_clock_skew`].
    pub fn max_clock_skew(mut self, skew: Duration) -> Self {
        self.max_clock_skew = skew;
        self
    }

    /// See [`LimiterBuilder::denied_requests`].
    pub fn denied_requests(mut self, denied: DeniedRequests) -> Self {
        self.denied = denied;
        self
    }

    /// See [`LimiterBuilder::on_failure`].
    pub fn on_failure(mut self, policy: FailurePolicy) -> Self {
        self.failure = policy;
        self
    }

    /// The failure policy (see [`LimiterBuilder::on_failure`]).
    ///
    /// ```
    /// use memcache_ratelimit::{Algorithm, FailurePolicy, LimiterSpec};
    ///
    /// let spec = LimiterSpec::new(Algorithm::FixedWindow);
    /// assert_eq!(spec.failure_policy(), FailurePolicy::Open);
    /// let spec = spec.on_failure(FailurePolicy::Closed);
    /// assert_eq!(spec.failure_policy(), FailurePolicy::Closed);
    /// ```
    pub fn failure_policy(&self) -> FailurePolicy {
        self.failure
    }

    /// See [`LimiterBuilder::cas_policy`]; used by the compare-and-swap
    /// algorithms and ignored by the windows.
    pub fn cas_policy(mut self, policy: CasPolicy) -> Self {
        self.cas = Some(policy);
        self
    }

    /// See [`LimiterBuilder::clock`].
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// A limiter enforcing `quota` on `store`, validated as its builder
    /// validates it.
    pub fn build(
        &self,
        quota: Quota,
        store: Arc<dyn Store>,
    ) -> Result<Box<dyn RateLimiter>, ConfigError> {
        Ok(match self.algorithm {
            Algorithm::SlidingWindow { sub_windows } => Box::new(
                self.settings(SlidingWindow::builder(quota, store))
                    .sub_windows(sub_windows)
                    .build()?,
            ),
            Algorithm::FixedWindow => {
                Box::new(self.settings(FixedWindow::builder(quota, store)).build()?)
            }
            Algorithm::TokenBucket { capacity } => {
                let builder = self.cas(self.settings(TokenBucket::builder(quota, store)));
                Box::new(match capacity {
                    Some(tokens) => builder.capacity(tokens).build()?,
                    None => builder.build()?,
                })
            }
            Algorithm::Gcra { burst } => {
                let builder = self.cas(self.settings(Gcra::builder(quota, store)));
                Box::new(match burst {
                    Some(requests) => builder.burst(requests).build()?,
                    None => builder.build()?,
                })
            }
            Algorithm::SlidingLog => Box::new(
                self.cas(self.settings(SlidingLog::builder(quota, store)))
                    .build()?,
            ),
            Algorithm::HybridQuota => Box::new(
                self.cas(self.settings(HybridQuota::builder(quota, store)))
                    .build()?,
            ),
        })
    }

    /// The shared settings, on `builder`.
    fn settings<A>(&self, builder: LimiterBuilder<A>) -> LimiterBuilder<A> {
        let builder = builder
            .clock(self.clock.clone())
            .deadline(self.deadline)
            .max_clock_skew(self.max_clock_skew)
            .denied_requests(self.denied)
            .on_failure(self.failure);
        match &self.namespace {
            Some(namespace) => builder.namespace(namespace.clone()),
            None => builder,
        }
    }

    /// The compare-and-swap policy, on a builder of an algorithm that has
    /// one.
    fn cas<A: AsMut<CasPolicy>>(&self, builder: LimiterBuilder<A>) -> LimiterBuilder<A> {
        match self.cas {
            Some(policy) => builder.cas_policy(policy),
            None => builder,
        }
    }
}
