//! The library's algorithms as the benchmarks build them: each case is a
//! [`LimiterSpec`] of the library's own
//! [`Algorithm`](memcache_ratelimit::Algorithm).

use std::sync::Arc;

use memcache_ratelimit::algorithm::{CasPolicy, Estimator};
use memcache_ratelimit::store::Store;
use memcache_ratelimit::{FailurePolicy, LimiterBuilder, LimiterSpec, RateLimiter};

use crate::{LOG_QUOTA, MOMENT_QUOTA, OPEN_QUOTA};

/// One benchmark case: one of the library's algorithms, with its
/// parameters, and for the sliding window how it weighs its oldest
/// sub-window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Case(pub memcache_ratelimit::Algorithm, pub Estimator);

/// What a benchmark sets beyond the library's defaults.
#[derive(Clone, Debug, Default)]
pub struct Setup {
    /// The compare-and-swap algorithms' policy; the library's default if
    /// `None`.
    pub cas_policy: Option<CasPolicy>,
    /// Clients the sliding window's sealed-bucket cache is sized for (times
    /// its sub-windows); the library's default if `None`.
    pub sealed_clients: Option<usize>,
}

impl Case {
    /// Every algorithm, at the sub-window counts the benchmarks compare.
    pub const ALL: [Case; 10] = {
        use memcache_ratelimit::Algorithm as A;
        [
            Case(A::FixedWindow, Estimator::Uniform),
            Case(A::SlidingWindow { sub_windows: 1 }, Estimator::Uniform),
            Case(A::SlidingWindow { sub_windows: 4 }, Estimator::Uniform),
            Case(A::SlidingWindow { sub_windows: 12 }, Estimator::Uniform),
            Case(A::SlidingWindow { sub_windows: 60 }, Estimator::Uniform),
            Case(A::SlidingWindow { sub_windows: 4 }, Estimator::Moment),
            Case(A::TokenBucket { capacity: None }, Estimator::Uniform),
            Case(A::Gcra { burst: None }, Estimator::Uniform),
            Case(A::SlidingLog, Estimator::Uniform),
            Case(A::HybridQuota, Estimator::Uniform),
        ]
    };

    /// The name in the tables: the algorithm's own (`SlidingWindow n=4`,
    /// `Gcra`, ...), and a sliding window's estimator unless it is the
    /// uniform rule (`SlidingWindow n=4 moment`).
    pub fn name(self) -> String {
        match self.1 {
            Estimator::Uniform => self.0.to_string(),
            estimator => format!("{} {estimator}", self.0),
        }
    }

    /// A namespace of its own, so that cases sharing a memcached never
    /// share keys.
    pub fn namespace(self) -> String {
        use memcache_ratelimit::Algorithm as A;
        match self.0 {
            A::FixedWindow => "fw".into(),
            A::SlidingWindow { sub_windows } => match self.1 {
                Estimator::Uniform => format!("sw{sub_windows}"),
                _ => format!("sw{sub_windows}m"),
            },
            A::TokenBucket { .. } => "tb".into(),
            A::Gcra { .. } => "gcra".into(),
            A::SlidingLog => "log".into(),
            A::HybridQuota => "hq".into(),
            A::DiscreteRefill { .. } => "dr".into(),
            A::Sessionize { .. } => "ds".into(),
        }
    }

    /// The limiter's description: so high a quota that every decision is
    /// allowed ([`LOG_QUOTA`] for the sliding log, its most), the library's
    /// defaults but for `setup`, and store failures returned rather than
    /// absorbed (as [`measured`]).
    pub fn spec(self, setup: Setup) -> LimiterSpec {
        let algorithm = self.0;
        let quota = match (algorithm, self.1) {
            (memcache_ratelimit::Algorithm::SlidingLog, _) => LOG_QUOTA,
            (_, Estimator::Uniform) => OPEN_QUOTA,
            // A packed counter counts up to 2^27 - 1 per sub-window.
            _ => MOMENT_QUOTA,
        };
        let mut spec = LimiterSpec::new(algorithm, quota.parse().expect("valid quota"))
            .namespace(self.namespace())
            .on_failure(FailurePolicy::ReturnError)
            .estimator(self.1);
        if let (Some(clients), Some(n)) = (setup.sealed_clients, algorithm.sub_windows()) {
            spec = spec.sealed_cache(clients * n as usize);
        }
        if let (Some(policy), true) = (setup.cas_policy, algorithm.uses_cas()) {
            spec = spec.cas_policy(policy);
        }
        spec
    }

    /// The limiter of [`spec`](Self::spec) on `store`.
    pub fn build(self, store: Arc<dyn Store>, setup: Setup) -> Arc<RateLimiter> {
        self.spec(setup).build(store).expect("valid limiter").into()
    }
}

/// `builder` with what every benchmark sets: store failures returned to
/// the caller, so the tables count them as errors, where the default
/// policy would turn them into allowed decisions.
pub fn measured<A>(builder: LimiterBuilder<A>) -> LimiterBuilder<A> {
    builder.on_failure(FailurePolicy::ReturnError)
}
