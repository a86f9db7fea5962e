//! [`RateLimiter::new`]: a [`LimiterSpec`] on a store, validated once, with
//! the engine of its algorithm and the stand-in its failure policy needs.

use std::sync::Arc;

use crate::algorithm::{Engine, Repairs, Settings};
use crate::error::ConfigError;
use crate::key::KeySpace;
use crate::limiter::failure::{scale_algorithm, scale_quota, FailurePolicy, Failures};
use crate::limiter::spec::LimiterSpec;
use crate::limiter::{RateLimiter, MAX_CLOCK_SKEW, MAX_DEADLINE};
use crate::quota::MAX_LIMIT;
use crate::store::{MemoryStore, Store};
use crate::timer::TimerQueue;

impl RateLimiter {
    /// The limiter `spec` describes, on `store`. Every setting is checked
    /// here, so a limiter that exists is correctly configured. Under
    /// [`FailurePolicy::Fallback`] the local stand-in is built too: the
    /// same algorithm and settings on a [`MemoryStore`] of the same clock,
    /// with the quota (and the algorithm's own burst or capacity) scaled to
    /// the share.
    pub(crate) fn new(spec: LimiterSpec, store: Arc<dyn Store>) -> Result<Self, ConfigError> {
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
        let repairs = Arc::new(Repairs::default());
        let settings = Settings {
            quota: spec.quota,
            store,
            keys: KeySpace::new(spec.namespace.clone())?,
            deadline: TimerQueue::new(spec.deadline),
            denied: spec.denied,
            max_clock_skew: spec.max_clock_skew,
            repairs: repairs.clone(),
            clock: spec.clock.clone(),
        };
        let engine = Engine::new(
            spec.algorithm,
            settings,
            spec.cas.clone(),
            spec.sealed_cache,
            spec.estimator,
        )?;
        let failures = Failures::new(spec.failure, Self::stand_in(&spec)?)?;
        Ok(Self {
            spec,
            engine,
            failures,
            repairs,
        })
    }

    /// The local limiter that decides in the store's place under
    /// [`FailurePolicy::Fallback`]; `None` under the other policies.
    fn stand_in(spec: &LimiterSpec) -> Result<Option<RateLimiter>, ConfigError> {
        let FailurePolicy::Fallback { share } = spec.failure else {
            return Ok(None);
        };
        if !(share > 0.0 && share <= 1.0) {
            // Failures::new names the error.
            return Ok(None);
        }
        let local = spec
            .clone()
            .with_quota(scale_quota(spec.quota, share))
            .with_algorithm(scale_algorithm(spec.algorithm, share))
            .on_failure(FailurePolicy::ReturnError);
        let store = Arc::new(MemoryStore::with_clock(spec.clock.clone()));
        Self::new(local, store).map(Some)
    }
}
