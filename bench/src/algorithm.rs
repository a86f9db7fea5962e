//! The library's algorithms as the benchmarks build them.

use std::sync::Arc;

use memcache_ratelimit::store::Store;
use memcache_ratelimit::{
    CasPolicy, FailurePolicy, FixedWindow, Gcra, HybridQuota, LimiterBuilder, Quota, RateLimiter,
    SlidingLog, SlidingWindow, TokenBucket,
};

use crate::{LOG_QUOTA, OPEN_QUOTA};

/// One algorithm, with its parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Algorithm {
    FixedWindow,
    /// With this many sub-windows.
    SlidingWindow(u32),
    TokenBucket,
    Gcra,
    SlidingLog,
    HybridQuota,
}

/// What a benchmark sets beyond the library's defaults.
#[derive(Clone, Copy, Debug, Default)]
pub struct Setup {
    /// The compare-and-swap algorithms' policy; the library's default if
    /// `None`.
    pub cas_policy: Option<CasPolicy>,
    /// Clients the sliding window's sealed-bucket cache is sized for (times
    /// its sub-windows); the library's default if `None`.
    pub sealed_clients: Option<usize>,
}

impl Algorithm {
    /// Every algorithm, at the sub-window counts the benchmarks compare.
    pub const ALL: [Algorithm; 9] = [
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow(1),
        Algorithm::SlidingWindow(4),
        Algorithm::SlidingWindow(12),
        Algorithm::SlidingWindow(60),
        Algorithm::TokenBucket,
        Algorithm::Gcra,
        Algorithm::SlidingLog,
        Algorithm::HybridQuota,
    ];

    /// The name in the tables.
    pub fn name(self) -> String {
        match self {
            Algorithm::FixedWindow => "FixedWindow".into(),
            Algorithm::SlidingWindow(n) => format!("SlidingWindow n={n}"),
            Algorithm::TokenBucket => "TokenBucket".into(),
            Algorithm::Gcra => "Gcra".into(),
            Algorithm::SlidingLog => "SlidingLog".into(),
            Algorithm::HybridQuota => "HybridQuota".into(),
        }
    }

    /// A namespace of its own, so that cases sharing a memcached never
    /// share keys.
    pub fn namespace(self) -> String {
        match self {
            Algorithm::FixedWindow => "fw".into(),
            Algorithm::SlidingWindow(n) => format!("sw{n}"),
            Algorithm::TokenBucket => "tb".into(),
            Algorithm::Gcra => "gcra".into(),
            Algorithm::SlidingLog => "log".into(),
            Algorithm::HybridQuota => "hq".into(),
        }
    }

    /// The limiter on `store`: so high a quota that every decision is
    /// allowed ([`LOG_QUOTA`] for the sliding log, its most), the library's
    /// defaults but for `setup`, and store failures returned rather than
    /// absorbed ([`measured`]).
    pub fn build(self, store: Arc<dyn Store>, setup: Setup) -> Arc<dyn RateLimiter> {
        let quota: Quota = OPEN_QUOTA.parse().expect("valid quota");
        let namespace = self.namespace();
        match self {
            Algorithm::FixedWindow => Arc::new(
                measured(FixedWindow::builder(quota, store).namespace(namespace))
                    .build()
                    .expect("valid limiter"),
            ),
            Algorithm::SlidingWindow(n) => {
                let mut builder = SlidingWindow::builder(quota, store).sub_windows(n);
                if let Some(clients) = setup.sealed_clients {
                    builder = builder.sealed_cache(clients * n as usize);
                }
                Arc::new(
                    measured(builder.namespace(namespace))
                        .build()
                        .expect("valid limiter"),
                )
            }
            Algorithm::TokenBucket => Arc::new(
                with_cas(TokenBucket::builder(quota, store), setup.cas_policy)
                    .namespace(namespace)
                    .build()
                    .expect("valid limiter"),
            ),
            Algorithm::Gcra => Arc::new(
                with_cas(Gcra::builder(quota, store), setup.cas_policy)
                    .namespace(namespace)
                    .build()
                    .expect("valid limiter"),
            ),
            Algorithm::SlidingLog => Arc::new(
                with_cas(
                    SlidingLog::builder(LOG_QUOTA.parse().expect("valid quota"), store),
                    setup.cas_policy,
                )
                .namespace(namespace)
                .build()
                .expect("valid limiter"),
            ),
            Algorithm::HybridQuota => Arc::new(
                with_cas(HybridQuota::builder(quota, store), setup.cas_policy)
                    .namespace(namespace)
                    .build()
                    .expect("valid limiter"),
            ),
        }
    }
}

/// `builder` with what every benchmark sets: store failures returned to
/// the caller, so the tables count them as errors, where the default
/// policy would turn them into allowed decisions.
pub fn measured<A>(builder: LimiterBuilder<A>) -> LimiterBuilder<A> {
    builder.on_failure(FailurePolicy::ReturnError)
}

/// [`measured`], with `policy` if one is given.
fn with_cas<A: AsMut<CasPolicy>>(
    builder: LimiterBuilder<A>,
    policy: Option<CasPolicy>,
) -> LimiterBuilder<A> {
    let builder = measured(builder);
    match policy {
        Some(policy) => builder.cas_policy(policy),
        None => builder,
    }
}
