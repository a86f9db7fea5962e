//! The limiters the commands run, one per parameter set.
//!
//! A command names its algorithm's parameters in every call (Smyte's `max`
//! and `refilltime`, redis-cell's burst and rate, a window's limit), and
//! the parameters are part of the bucket's identity. Building a
//! [`RateLimiter`] is cheap but not free (it validates its settings and
//! names its keys), so the server keeps one per parameter set, up to
//! [`Limiters::CAPACITY`]; past that it starts again from empty, which only
//! costs rebuilding the limiters in use: their state is in the store.
//!
//! The compare-and-swap limiters remember the bucket states they last saw
//! within one bound for all of them ([`SharedKnownStates`]), so that the
//! server's memory does not grow with the number of parameter sets.

use std::num::NonZeroU64;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use chrono::{DateTime, Utc};
use memcache_ratelimit::algorithm::{CasPolicy, Estimator, SharedKnownStates};
use memcache_ratelimit::limiter::{DeniedRequests, FailurePolicy, LimiterStats};
use memcache_ratelimit::store::Store;
use memcache_ratelimit::{Algorithm, Decision, LimiterSpec, Quota, RateLimiter};

/// What identifies a limiter: the command family's namespace, the
/// algorithm with its parameters, the quota, and whether denied requests
/// are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LimiterKey {
    /// The key namespace: each command family has its own, so the same key
    /// name in `RL.REDUCE` and `CL.THROTTLE` names two buckets.
    pub namespace: &'static str,
    pub algorithm: Algorithm,
    pub quota: Quota,
    pub denied_counted: bool,
    /// How a sliding window weighs its oldest sub-window (its counters
    /// are named apart, so this too names the buckets).
    pub estimator: Estimator,
}

impl LimiterKey {
    /// `algorithm` allowing `limit` per `period` in `namespace`; the
    /// library's words when it refuses the quota.
    pub fn new(
        namespace: &'static str,
        algorithm: Algorithm,
        limit: u64,
        period: Duration,
        denied_counted: bool,
    ) -> Result<Self, String> {
        let limit = NonZeroU64::new(limit).ok_or("the limit must be at least 1")?;
        let quota = Quota::with_period(limit, period).map_err(|error| error.to_string())?;
        Ok(Self {
            namespace,
            algorithm,
            quota,
            denied_counted,
            estimator: Estimator::Uniform,
        })
    }

    /// The same, a sliding window weighing its oldest sub-window by
    /// `estimator`.
    pub fn with_estimator(self, estimator: Estimator) -> Self {
        Self { estimator, ..self }
    }
}

/// The limiters built so far, and what they share.
pub struct Limiters {
    store: Arc<dyn Store>,
    failure: FailurePolicy,
    /// The bound on the bucket states the limiters remember together.
    known_states: SharedKnownStates,
    /// Read on every decision, written once per parameter set.
    built: RwLock<foldhash::HashMap<LimiterKey, Arc<RateLimiter>>>,
    /// The statistics of limiters dropped when the cache started again,
    /// so that `INFO` never goes backwards.
    retired: Mutex<LimiterStats>,
}

impl Limiters {
    /// The most limiters kept at once.
    pub const CAPACITY: usize = 4096;

    /// Limiters on `store`, deciding by `failure` when the store fails,
    /// remembering the states of at most about `known_states` keys
    /// together.
    pub fn new(store: Arc<dyn Store>, failure: FailurePolicy, known_states: usize) -> Self {
        Self {
            store,
            failure,
            known_states: SharedKnownStates::new(known_states),
            built: RwLock::new(foldhash::HashMap::default()),
            retired: Mutex::new(LimiterStats::default()),
        }
    }

    /// The limiter for `key`, built on first use.
    fn get(&self, key: LimiterKey) -> Result<Arc<RateLimiter>, String> {
        if let Some(limiter) = read(&self.built).get(&key) {
            return Ok(limiter.clone());
        }
        let spec = LimiterSpec::new(key.algorithm, key.quota)
            .namespace(key.namespace)
            .on_failure(self.failure)
            .estimator(key.estimator)
            .cas_policy(CasPolicy::default().known_states_shared(&self.known_states))
            .denied_requests(if key.denied_counted {
                DeniedRequests::Counted
            } else {
                DeniedRequests::Refunded
            });
        let mut built = write(&self.built);
        if let Some(limiter) = built.get(&key) {
            return Ok(limiter.clone());
        }
        let limiter = Arc::new(
            spec.build(self.store.clone())
                .map_err(|error| error.to_string())?,
        );
        if built.len() >= Self::CAPACITY {
            let mut retired = lock(&self.retired);
            for old in built.values() {
                *retired = retired.plus(old.stats());
            }
            built.clear();
        }
        built.insert(key, limiter.clone());
        Ok(limiter)
    }

    /// Decides `cost` units for `client` on the limiter of `key`, at `at`
    /// (a client's timestamp) or now by the limiter's clock; the library's
    /// words for a refused configuration or a failed decision.
    pub async fn decide(
        &self,
        key: LimiterKey,
        client: &[u8],
        cost: u64,
        at: Option<DateTime<Utc>>,
    ) -> Result<Decision, String> {
        let limiter = self.get(key)?;
        let decided = match at {
            Some(at) => limiter.check_at(client, cost, at).await,
            None => limiter.check_n(client, cost).await,
        };
        decided.map_err(|error| error.to_string())
    }

    /// The statistics of every limiter the server has run, summed.
    pub fn stats(&self) -> LimiterStats {
        let retired = *lock(&self.retired);
        read(&self.built)
            .values()
            .fold(retired, |total, limiter| total.plus(limiter.stats()))
    }

    /// How many keys' states the limiters remember now.
    pub fn known_states(&self) -> usize {
        self.known_states.held()
    }

    /// How many limiters are kept now.
    pub fn len(&self) -> usize {
        read(&self.built).len()
    }
}

// The locks, even if a thread panicked holding one: the values stay valid.

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
