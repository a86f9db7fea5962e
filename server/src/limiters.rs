//! The limiters the commands run, one per parameter set.
//!
//! A command names its algorithm's parameters in every call (Smyte's `max`
//! and `refilltime`, redis-cell's burst and rate, a window's limit), and
//! the parameters are part of the bucket's identity. Building a
//! [`RateLimiter`] is cheap but not free (it validates its settings and
//! names its keys), so the server keeps one per parameter set, up to
//! [`Limiters::CAPACITY`]; past that it starts again from empty, which only
//! costs rebuilding the limiters in use: their state is in the store.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use memcache_ratelimit::limiter::{DeniedRequests, FailurePolicy, LimiterStats};
use memcache_ratelimit::store::Store;
use memcache_ratelimit::{Algorithm, ConfigError, LimiterSpec, Quota, RateLimiter};

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
}

/// The limiters built so far, and what they share.
pub struct Limiters {
    store: Arc<dyn Store>,
    failure: FailurePolicy,
    built: Mutex<HashMap<LimiterKey, Arc<RateLimiter>>>,
    /// The statistics of limiters dropped when the cache started again,
    /// so that `INFO` never goes backwards.
    retired: Mutex<LimiterStats>,
}

impl Limiters {
    /// The most limiters kept at once.
    pub const CAPACITY: usize = 4096;

    /// Limiters on `store`, deciding by `failure` when the store fails.
    pub fn new(store: Arc<dyn Store>, failure: FailurePolicy) -> Self {
        Self {
            store,
            failure,
            built: Mutex::new(HashMap::new()),
            retired: Mutex::new(LimiterStats::default()),
        }
    }

    /// The limiter for `key`, built on first use.
    pub fn get(&self, key: LimiterKey) -> Result<Arc<RateLimiter>, ConfigError> {
        let mut built = lock(&self.built);
        if let Some(limiter) = built.get(&key) {
            return Ok(limiter.clone());
        }
        let spec = LimiterSpec::new(key.algorithm, key.quota)
            .namespace(key.namespace)
            .on_failure(self.failure)
            .denied_requests(if key.denied_counted {
                DeniedRequests::Counted
            } else {
                DeniedRequests::Refunded
            });
        let limiter = Arc::new(spec.build(self.store.clone())?);
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

    /// The statistics of every limiter the server has run, summed.
    pub fn stats(&self) -> LimiterStats {
        let retired = *lock(&self.retired);
        lock(&self.built)
            .values()
            .fold(retired, |total, limiter| total.plus(limiter.stats()))
    }

    /// How many limiters are kept now.
    pub fn len(&self) -> usize {
        lock(&self.built).len()
    }
}

/// The lock, even if a thread panicked holding it: the map stays valid.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
