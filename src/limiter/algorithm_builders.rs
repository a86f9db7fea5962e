//! Where each algorithm's builder starts (`SlidingWindow::builder`,
//! `Gcra::builder`, ...), and the settings only some algorithms take:
//! sub-windows and the sealed-bucket cache for the sliding window, the
//! capacity of the token bucket, GCRA's burst, the discrete refill's
//! amount and restart, sessionize's amount, and the compare-and-swap
//! policy of the compare-and-swap algorithms.

use std::sync::Arc;

use crate::algorithm::{
    Algorithm, CasPolicy, DiscreteRefill, FixedWindow, Gcra, HybridQuota, Sessionize, SlidingLog,
    SlidingWindow, TokenBucket,
};
use crate::limiter::builder::LimiterBuilder;
use crate::limiter::spec::LimiterSpec;
use crate::quota::Quota;
use crate::store::Store;

impl SlidingWindow {
    /// Starts building a sliding window enforcing `quota` on `store`, with
    /// [`DEFAULT_SUB_WINDOWS`](crate::algorithm::DEFAULT_SUB_WINDOWS)
    /// sub-windows until [`sub_windows`](LimiterBuilder::sub_windows) says
    /// otherwise.
    pub fn builder(quota: Quota, store: Arc<dyn Store>) -> LimiterBuilder<SlidingWindow> {
        let algorithm = Algorithm::default();
        LimiterBuilder::from_spec(LimiterSpec::new(algorithm, quota), store)
    }
}

impl FixedWindow {
    /// Starts building a fixed window enforcing `quota` on `store`.
    pub fn builder(quota: Quota, store: Arc<dyn Store>) -> LimiterBuilder<FixedWindow> {
        LimiterBuilder::from_spec(LimiterSpec::new(Algorithm::FixedWindow, quota), store)
    }
}

impl TokenBucket {
    /// Starts building a token bucket that refills at `quota` on `store`.
    pub fn builder(quota: Quota, store: Arc<dyn Store>) -> LimiterBuilder<TokenBucket> {
        let algorithm = Algorithm::TokenBucket { capacity: None };
        LimiterBuilder::from_spec(LimiterSpec::new(algorithm, quota), store)
    }
}

impl Gcra {
    /// Starts building a GCRA limiter enforcing `quota` on `store`.
    pub fn builder(quota: Quota, store: Arc<dyn Store>) -> LimiterBuilder<Gcra> {
        let algorithm = Algorithm::Gcra { burst: None };
        LimiterBuilder::from_spec(LimiterSpec::new(algorithm, quota), store)
    }
}

impl SlidingLog {
    /// Starts building a sliding log enforcing `quota` on `store`. A quota
    /// whose limit is above
    /// [`MAX_LOG_LIMIT`](crate::algorithm::MAX_LOG_LIMIT) is rejected by
    /// `build` (field `limit`).
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
    pub fn builder(quota: Quota, store: Arc<dyn Store>) -> LimiterBuilder<SlidingLog> {
        LimiterBuilder::from_spec(LimiterSpec::new(Algorithm::SlidingLog, quota), store)
    }
}

impl HybridQuota {
    /// Starts building a hybrid quota enforcing `quota` on `store`. A limit
    /// above 2^53, whose whole token counts a float cannot hold exactly,
    /// is rejected by `build` (field `limit`).
    ///
    /// ```
    /// use memcache_ratelimit::{HybridQuota, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// let store = Arc::new(MemoryStore::new());
    /// assert!(HybridQuota::builder("5/second".parse()?, store.clone()).build().is_ok());
    /// let too_big = format!("{}/second", (1u64 << 53) + 1).parse()?;
    /// assert_eq!(HybridQuota::builder(too_big, store).build().unwrap_err().field(), "limit");
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn builder(quota: Quota, store: Arc<dyn Store>) -> LimiterBuilder<HybridQuota> {
        LimiterBuilder::from_spec(LimiterSpec::new(Algorithm::HybridQuota, quota), store)
    }
}

impl DiscreteRefill {
    /// Starts building Smyte's discrete-refill bucket on `store`: at most
    /// `quota.limit()` tokens, a full bucket back at each whole
    /// `quota.period()` until [`refill_amount`](LimiterBuilder::refill_amount)
    /// says otherwise, no restart when empty.
    pub fn builder(quota: Quota, store: Arc<dyn Store>) -> LimiterBuilder<DiscreteRefill> {
        let algorithm = Algorithm::DiscreteRefill {
            refill: None,
            restart_when_empty: false,
        };
        LimiterBuilder::from_spec(LimiterSpec::new(algorithm, quota), store)
    }
}

impl Sessionize {
    /// Starts building Smyte's sessionizing bucket on `store`: at most
    /// `quota.limit()` tokens, a full bucket back at each whole
    /// `quota.period()` until [`refill_amount`](LimiterBuilder::refill_amount)
    /// says otherwise; always strict, always restarting when empty.
    pub fn builder(quota: Quota, store: Arc<dyn Store>) -> LimiterBuilder<Sessionize> {
        let algorithm = Algorithm::Sessionize { refill: None };
        LimiterBuilder::from_spec(LimiterSpec::new(algorithm, quota), store)
    }
}

impl LimiterBuilder<SlidingWindow> {
    /// Splits the period into `n` sub-windows (default 1). `n` must divide
    /// the period into whole milliseconds and be at most
    /// [`MAX_SUB_WINDOWS`](crate::algorithm::MAX_SUB_WINDOWS).
    pub fn sub_windows(mut self, n: u32) -> Self {
        self.spec = self
            .spec
            .with_algorithm(Algorithm::SlidingWindow { sub_windows: n });
        self
    }

    /// How many sealed buckets to keep in process (default
    /// [`DEFAULT_SEALED_CACHE`](crate::algorithm::DEFAULT_SEALED_CACHE); 0
    /// turns the cache off). A bucket is sealed once it closed longer ago
    /// than the allowed clock skew
    /// ([`max_clock_skew`](LimiterBuilder::max_clock_skew)) plus the
    /// deadline: no process can change it any more, so its count is read
    /// once per client and kept until no decision reads it. In steady
    /// state a decision is then one increment, whatever `n` is. The cache
    /// is kept per client, `n` buckets each, so it holds
    /// `max(1, buckets / n)` clients at most; each takes about `16·n + 80`
    /// bytes plus its key, and only the clients seen take memory (those no
    /// longer read are dropped each time the cache has doubled). With more
    /// active clients than that, the clients that do not fit read their
    /// sealed buckets again each time, and
    /// [`LimiterStats::sealed_refused`](crate::limiter::LimiterStats::sealed_refused)
    /// counts them: size it to the clients one process sees within a
    /// window. The cache assumes time
    /// moves forward: replaying events out of order with
    /// [`check_at`](crate::RateLimiter::check_at) wants it off.
    pub fn sealed_cache(mut self, buckets: usize) -> Self {
        self.spec = self.spec.sealed_cache(buckets);
        self
    }

    /// How the oldest sub-window, of which only the part after the cut is
    /// still inside the window, is weighed (default
    /// [`Estimator::Uniform`](crate::algorithm::Estimator::Uniform)). A
    /// moment estimator keeps, in the same counter and the same single
    /// increment, the sum of its requests' offsets within their
    /// sub-window, and weighs the oldest by a density with their mean:
    /// the same store calls, a smaller error where traffic is bunched.
    /// Its counters are named apart from the uniform rule's (the suffix
    /// mark `-mom`), and a limit above
    /// [`MAX_MOMENT_COUNT`](crate::algorithm::MAX_MOMENT_COUNT) counts
    /// by the uniform rule.
    ///
    /// ```
    /// use memcache_ratelimit::algorithm::Estimator;
    /// use memcache_ratelimit::{MemoryStore, SlidingWindow};
    /// use std::sync::Arc;
    ///
    /// let limiter = SlidingWindow::builder("100/minute".parse()?, Arc::new(MemoryStore::new()))
    ///     .estimator(Estimator::Moment)
    ///     .build()?;
    /// assert_eq!(limiter.spec().estimator_choice(), Estimator::Moment);
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn estimator(mut self, estimator: crate::algorithm::Estimator) -> Self {
        self.spec = self.spec.estimator(estimator);
        self
    }
}

impl LimiterBuilder<TokenBucket> {
    /// The most tokens the bucket holds (default: the quota's limit). A
    /// request may cost at most this much.
    pub fn capacity(mut self, tokens: u64) -> Self {
        let algorithm = Algorithm::TokenBucket {
            capacity: Some(tokens),
        };
        self.spec = self.spec.with_algorithm(algorithm);
        self
    }
}

impl LimiterBuilder<Gcra> {
    /// How many requests a quiet client may send at once (default: the
    /// quota's limit). A request may cost at most this much.
    pub fn burst(mut self, requests: u64) -> Self {
        let algorithm = Algorithm::Gcra {
            burst: Some(requests),
        };
        self.spec = self.spec.with_algorithm(algorithm);
        self
    }
}

impl LimiterBuilder<DiscreteRefill> {
    /// How many tokens come back at each whole period (default: the
    /// quota's limit, a full bucket; Smyte's `REFILL`). Zero is refused by
    /// `build` (field `refill_amount`).
    ///
    /// ```
    /// use memcache_ratelimit::{DiscreteRefill, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// let store = Arc::new(MemoryStore::new());
    /// assert!(DiscreteRefill::builder("10/5s".parse()?, store.clone()).refill_amount(3).build().is_ok());
    /// let zero = DiscreteRefill::builder("10/5s".parse()?, store).refill_amount(0).build();
    /// assert_eq!(zero.unwrap_err().field(), "refill_amount");
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn refill_amount(mut self, tokens: u64) -> Self {
        if let Algorithm::DiscreteRefill {
            restart_when_empty, ..
        } = self.spec.algorithm
        {
            self.spec = self.spec.with_algorithm(Algorithm::DiscreteRefill {
                refill: Some(tokens),
                restart_when_empty,
            });
        }
        self
    }

    /// Whether a request that leaves the bucket empty restarts its refill
    /// period at its own time (default `false`; Smyte's `STRICT`), so a
    /// client that keeps knocking stays blocked until a whole period
    /// passes with no request.
    pub fn restart_when_empty(mut self, restart: bool) -> Self {
        if let Algorithm::DiscreteRefill { refill, .. } = self.spec.algorithm {
            self.spec = self.spec.with_algorithm(Algorithm::DiscreteRefill {
                refill,
                restart_when_empty: restart,
            });
        }
        self
    }
}

impl LimiterBuilder<Sessionize> {
    /// How many tokens come back at each whole period (default: the
    /// quota's limit; Smyte's `REFILL`). Zero is refused by `build` (field
    /// `refill_amount`).
    ///
    /// ```
    /// use memcache_ratelimit::{MemoryStore, Sessionize};
    /// use std::sync::Arc;
    ///
    /// let store = Arc::new(MemoryStore::new());
    /// assert!(Sessionize::builder("10/5s".parse()?, store.clone()).refill_amount(3).build().is_ok());
    /// let zero = Sessionize::builder("10/5s".parse()?, store).refill_amount(0).build();
    /// assert_eq!(zero.unwrap_err().field(), "refill_amount");
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn refill_amount(mut self, tokens: u64) -> Self {
        if let Algorithm::Sessionize { .. } = self.spec.algorithm {
            let refill = Some(tokens);
            self.spec = self.spec.with_algorithm(Algorithm::Sessionize { refill });
        }
        self
    }
}

impl<A: CasAlgorithm> LimiterBuilder<A> {
    /// How the compare-and-swap loop retries (default [`CasPolicy::default`]).
    ///
    /// ```
    /// use memcache_ratelimit::algorithm::CasPolicy;
    /// use memcache_ratelimit::{MemoryStore, SlidingLog};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let log = SlidingLog::builder("100/minute".parse()?, Arc::new(MemoryStore::new()))
    ///     .cas_policy(CasPolicy::new(4, Duration::from_micros(100), Duration::from_millis(2))?)
    ///     .build()?;
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn cas_policy(mut self, policy: CasPolicy) -> Self {
        self.spec = self.spec.cas_policy(policy);
        self
    }
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
    impl Sealed for crate::DiscreteRefill {}
    impl Sealed for crate::Sessionize {}
}

impl CasAlgorithm for TokenBucket {}
impl CasAlgorithm for Gcra {}
impl CasAlgorithm for SlidingLog {}
impl CasAlgorithm for HybridQuota {}
impl CasAlgorithm for DiscreteRefill {}
impl CasAlgorithm for Sessionize {}
