//! [`LimiterBuilder`]: a limiter's settings, written into its
//! [`LimiterSpec`] and validated once, when it is built.

use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use crate::algorithm::DeniedRequests;
use crate::clock::Clock;
use crate::error::ConfigError;
use crate::limiter::failure::FailurePolicy;
use crate::limiter::spec::LimiterSpec;
use crate::limiter::RateLimiter;
use crate::store::Store;

/// Builds a [`RateLimiter`] of algorithm `A`
/// ([`SlidingWindow`](crate::SlidingWindow), [`Gcra`](crate::Gcra), ...):
/// a [`LimiterSpec`] and the store. Each algorithm's `builder` starts one,
/// every setter writes into the spec (`A` decides which setters there
/// are: `sub_windows` for the sliding window, `burst` for GCRA, ...), and
/// `build` validates everything at once, so a limiter that exists is
/// correctly configured. [`LimiterSpec::build`] validates the same way.
///
/// ```
/// use memcache_ratelimit::limiter::DeniedRequests;
/// use memcache_ratelimit::{Algorithm, ManualClock, MemoryStore, SlidingWindow};
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
    /// A builder of `spec`, whose algorithm is `A`'s, on `store`.
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

    /// The longest a decision may take (default [`DEFAULT_DEADLINE`](crate::limiter::DEFAULT_DEADLINE), at
    /// most [`MAX_DEADLINE`](crate::limiter::MAX_DEADLINE)). Past it, the caller gets
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
    /// be (default [`DEFAULT_MAX_CLOCK_SKEW`](crate::limiter::DEFAULT_MAX_CLOCK_SKEW), at most [`MAX_CLOCK_SKEW`](crate::limiter::MAX_CLOCK_SKEW)):
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

    /// Validates every setting and builds the limiter.
    pub fn build(self) -> Result<RateLimiter, ConfigError> {
        RateLimiter::new(self.spec, self.store)
    }
}
