//! The compare-and-swap algorithms as their tests build them: every one of
//! them at one quota and with one set of settings, named.

use std::sync::Arc;
use std::time::Duration;

use memcache_ratelimit::algorithm::{CasPolicy, CasStats};
use memcache_ratelimit::limiter::CasAlgorithm;
use memcache_ratelimit::store::Store;
use memcache_ratelimit::{
    Gcra, HybridQuota, Limiter, LimiterBuilder, ManualClock, Quota, RateLimiter, SlidingLog,
    TokenBucket,
};

use super::patient;

/// How the limiters are built: [`patient`], then reading `clock` (the
/// system clock if `None`), in either mode, with a retry policy and a
/// deadline.
pub struct CasSettings {
    pub clock: Option<ManualClock>,
    pub strict: bool,
    pub policy: CasPolicy,
    pub deadline: Duration,
}

impl CasSettings {
    /// Reading `clock`, in the default mode, with the default policy and
    /// [`patient`]'s deadline.
    pub fn on(clock: &ManualClock) -> Self {
        CasSettings {
            clock: Some(clock.clone()),
            strict: false,
            policy: CasPolicy::default(),
            deadline: Duration::from_secs(5),
        }
    }

    /// `builder` with these settings, built.
    pub fn build<A: CasAlgorithm>(&self, builder: LimiterBuilder<A>) -> RateLimiter {
        let builder = match &self.clock {
            Some(clock) => patient(builder).clock(clock.clone()),
            None => patient(builder),
        };
        builder
            .strict(self.strict)
            .cas_policy(self.policy.clone())
            .deadline(self.deadline)
            .build()
            .unwrap()
    }
}

/// Every compare-and-swap algorithm at `quota` on `store`, named: the
/// linear ones first (token bucket, GCRA), then the sliding log and the
/// hybrid quota.
pub fn every(
    store: Arc<dyn Store>,
    quota: &str,
    settings: &CasSettings,
) -> Vec<(&'static str, RateLimiter)> {
    let q: Quota = quota.parse().unwrap();
    vec![
        (
            "token bucket",
            settings.build(TokenBucket::builder(q, store.clone())),
        ),
        ("gcra", settings.build(Gcra::builder(q, store.clone()))),
        (
            "sliding log",
            settings.build(SlidingLog::builder(q, store.clone())),
        ),
        (
            "hybrid quota",
            settings.build(HybridQuota::builder(q, store)),
        ),
    ]
}

/// A compare-and-swap limiter shared as a [`Limiter`], with its
/// statistics.
pub struct Shared {
    pub name: &'static str,
    pub limiter: Arc<dyn Limiter>,
    pub stats: Box<dyn Fn() -> CasStats + Send + Sync>,
}

impl Shared {
    pub fn new(name: &'static str, limiter: RateLimiter) -> Self {
        let limiter = Arc::new(limiter);
        Shared {
            name,
            limiter: limiter.clone(),
            stats: Box::new(move || limiter.cas_stats()),
        }
    }
}
