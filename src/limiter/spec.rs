//! A limiter described as data: the algorithm, the quota and every setting,
//! all but the store. The builders, configuration files, dynamic quotas,
//! the command line, the benchmarks and the simulations all describe
//! limiters with one.

use std::sync::Arc;
use std::time::Duration;

use crate::algorithm::{
    CasPolicy, FixedWindow, Gcra, HybridQuota, SlidingLog, SlidingWindow, TokenBucket,
    DEFAULT_SEALED_CACHE,
};
use crate::clock::{Clock, SystemClock};
use crate::error::ConfigError;
use crate::key::KeySpace;
use crate::limiter::failure::{scale, FailurePolicy};
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
/// assert_eq!(Algorithm::SlidingWindow { sub_windows: 12 }.sub_windows(), Some(12));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// [`SlidingWindow`] with `sub_windows` sub-windows (dividing the period
    /// into whole milliseconds, at most
    /// [`MAX_SUB_WINDOWS`](crate::algorithm::MAX_SUB_WINDOWS)).
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

    /// Every algorithm, by [`name`](Self::name), with its default
    /// parameters: 4 sub-windows, the token bucket's capacity and GCRA's
    /// burst left to the quota's limit.
    pub const ALL: [Algorithm; 6] = [
        Self::SlidingWindow { sub_windows: 4 },
        Self::FixedWindow,
        Self::TokenBucket { capacity: None },
        Self::Gcra { burst: None },
        Self::SlidingLog,
        Self::HybridQuota,
    ];

    /// The algorithm called `name` (see [`name`](Self::name)), with its
    /// default parameters ([`ALL`](Self::ALL)).
    ///
    /// ```
    /// use memcache_ratelimit::Algorithm;
    ///
    /// assert_eq!(Algorithm::from_name("gcra"), Some(Algorithm::Gcra { burst: None }));
    /// assert_eq!(Algorithm::from_name("leaky_bucket"), None);
    /// ```
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|algorithm| algorithm.name() == name)
    }

    /// The sliding window's number of sub-windows; `None` for the other
    /// algorithms.
    pub fn sub_windows(&self) -> Option<u32> {
        match self {
            Self::SlidingWindow { sub_windows } => Some(*sub_windows),
            _ => None,
        }
    }

    /// Whether the algorithm decides by compare-and-swap, and so takes a
    /// [`CasPolicy`]: the token bucket, GCRA, the sliding log and the
    /// hybrid quota.
    pub fn uses_cas(&self) -> bool {
        matches!(
            self,
            Self::TokenBucket { .. } | Self::Gcra { .. } | Self::SlidingLog | Self::HybridQuota
        )
    }

    /// The same algorithm with what it sets beside the quota (a burst, a
    /// capacity) scaled to `share`, for the local stand-in of
    /// [`FailurePolicy::Fallback`].
    pub(crate) fn scaled(self, share: f64) -> Self {
        match self {
            Self::TokenBucket { capacity } => Self::TokenBucket {
                capacity: capacity.map(|value| scale(value, share)),
            },
            Self::Gcra { burst } => Self::Gcra {
                burst: burst.map(|value| scale(value, share)),
            },
            other => other,
        }
    }
}

impl std::fmt::Display for Algorithm {
    /// The algorithm's type and the parameters set beside the quota:
    /// `SlidingWindow n=4`, `FixedWindow`, `TokenBucket`,
    /// `TokenBucket capacity=10`, `Gcra`, `Gcra burst=3`, `SlidingLog`,
    /// `HybridQuota`.
    ///
    /// ```
    /// use memcache_ratelimit::Algorithm;
    ///
    /// assert_eq!(Algorithm::SlidingWindow { sub_windows: 4 }.to_string(), "SlidingWindow n=4");
    /// assert_eq!(Algorithm::Gcra { burst: None }.to_string(), "Gcra");
    /// assert_eq!(Algorithm::Gcra { burst: Some(3) }.to_string(), "Gcra burst=3");
    /// ```
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::SlidingWindow { sub_windows } => write!(f, "SlidingWindow n={sub_windows}"),
            Self::FixedWindow => f.write_str("FixedWindow"),
            Self::TokenBucket { capacity: None } => f.write_str("TokenBucket"),
            Self::TokenBucket {
                capacity: Some(tokens),
            } => write!(f, "TokenBucket capacity={tokens}"),
            Self::Gcra { burst: None } => f.write_str("Gcra"),
            Self::Gcra {
                burst: Some(requests),
            } => write!(f, "Gcra burst={requests}"),
            Self::SlidingLog => f.write_str("SlidingLog"),
            Self::HybridQuota => f.write_str("HybridQuota"),
        }
    }
}

/// Everything a limiter is built from except its store: the algorithm, the
/// quota and the settings every [`LimiterBuilder`] takes. A builder holds
/// one ([`LimiterBuilder::spec`]), and [`build`](Self::build) builds
/// through the same builder, so a spec is validated as its builder
/// validates it. [`with_quota`](Self::with_quota) gives the same limiter
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

    /// See [`LimiterBuilder::namespace`].
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = namespace.into();
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
    /// let spec = LimiterSpec::new(Algorithm::FixedWindow, "5/second".parse()?);
    /// assert_eq!(spec.failure_policy(), FailurePolicy::Open);
    /// let spec = spec.on_failure(FailurePolicy::Closed);
    /// assert_eq!(spec.failure_policy(), FailurePolicy::Closed);
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn failure_policy(&self) -> FailurePolicy {
        self.failure
    }

    /// See [`LimiterBuilder::cas_policy`]; used by the compare-and-swap
    /// algorithms ([`Algorithm::uses_cas`]) and ignored by the windows.
    pub fn cas_policy(mut self, policy: CasPolicy) -> Self {
        self.cas = policy;
        self
    }

    /// See [`LimiterBuilder::sealed_cache`]; used by the sliding window and
    /// ignored by the other algorithms.
    pub fn sealed_cache(mut self, buckets: usize) -> Self {
        self.sealed_cache = buckets;
        self
    }

    /// See [`LimiterBuilder::clock`].
    pub fn clock(mut self, clock: impl Clock + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// The limiter this spec describes, on `store`, validated by its
    /// algorithm's builder.
    pub fn build(&self, store: Arc<dyn Store>) -> Result<Box<dyn RateLimiter>, ConfigError> {
        let spec = self.clone();
        Ok(match self.algorithm {
            Algorithm::SlidingWindow { .. } => {
                Box::new(LimiterBuilder::<SlidingWindow>::from_spec(spec, store).build()?)
            }
            Algorithm::FixedWindow => {
                Box::new(LimiterBuilder::<FixedWindow>::from_spec(spec, store).build()?)
            }
            Algorithm::TokenBucket { .. } => {
                Box::new(LimiterBuilder::<TokenBucket>::from_spec(spec, store).build()?)
            }
            Algorithm::Gcra { .. } => {
                Box::new(LimiterBuilder::<Gcra>::from_spec(spec, store).build()?)
            }
            Algorithm::SlidingLog => {
                Box::new(LimiterBuilder::<SlidingLog>::from_spec(spec, store).build()?)
            }
            Algorithm::HybridQuota => {
                Box::new(LimiterBuilder::<HybridQuota>::from_spec(spec, store).build()?)
            }
        })
    }
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
