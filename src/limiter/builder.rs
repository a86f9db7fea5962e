//! [`LimiterBuilder`]: a limiter's settings, written into its
//! [`LimiterSpec`] and validated once, when it is built.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::algorithm::CasPolicy;
use crate::clock::Clock;
use crate::error::ConfigError;
use crate::key::KeySpace;
use crate::limiter::failure::{scale_quota, FailurePolicy, Failures};
use crate::limiter::settings::Settings;
use crate::limiter::spec::LimiterSpec;
use crate::limiter::{DeniedRequests, RateLimiter, MAX_CLOCK_SKEW, MAX_DEADLINE};
use crate::quota::MAX_LIMIT;
use crate::store::{MemoryStore, Store};

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

    /// The longest a decision may take (default [`DEFAULT_DEADLINE`](crate::DEFAULT_DEADLINE), at
    /// most [`MAX_DEADLINE`]). Past it, the caller gets
    /// [`Error::DeadlineExceeded`](crate::Error::DeadlineExceeded) rather than waiting on the store. The
    /// deadline runs on tokio's timer, so the runtime needs its time driver
    /// (`#[tokio::main]` and `Runtime::new` enable it); the timer is only
    /// started once the store makes a decision wait, so decisions on an
    /// in-process store never touch it.
    pub fn deadline(mut self, deadline: Duration) -> Self {
        self.spec = self.spec.deadline(deadline);
        self
    }

    /// How far apart the clocks of any two processes sharing the store may
    /// be (default [`DEFAULT_MAX_CLOCK_SKEW`](crate::DEFAULT_MAX_CLOCK_SKEW), at most [`MAX_CLOCK_SKEW`](crate::MAX_CLOCK_SKEW)):
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
