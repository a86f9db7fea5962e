//! Every algorithm under each failure policy, and what each policy must
//! decide, for the fault tests.

use std::sync::Arc;
use std::time::{Duration, Instant};

use memcache_ratelimit::limiter::FailureStats;
use memcache_ratelimit::{
    Decision, Error, FailurePolicy, FixedWindow, Gcra, HybridQuota, MemcachedStore, RateLimiter,
    SlidingLog, SlidingWindow, TokenBucket,
};

pub const DEADLINE: Duration = Duration::from_millis(100);

/// A limiter and its failure counters.
pub struct Limiter {
    pub name: &'static str,
    pub limiter: Arc<RateLimiter>,
    pub stats: Box<dyn Fn() -> FailureStats + Send + Sync>,
}

/// Every algorithm, 4 per minute, under `policy`, with `deadline`.
pub fn every_algorithm(
    store: &Arc<MemcachedStore>,
    policy: FailurePolicy,
    deadline: Duration,
) -> Vec<Limiter> {
    macro_rules! limiter {
        ($name:literal, $builder:expr) => {{
            let limiter = Arc::new(
                $builder
                    .deadline(deadline)
                    .on_failure(policy)
                    .namespace(format!("{}-{:?}", $name, policy).replace([' ', '{', '}', ':'], ""))
                    .build()
                    .unwrap(),
            );
            let counted = limiter.clone();
            Limiter {
                name: $name,
                limiter,
                stats: Box::new(move || counted.stats().failures),
            }
        }};
    }
    let quota = "4/minute".parse().unwrap();
    let s = || store.clone() as Arc<dyn memcache_ratelimit::store::Store>;
    vec![
        limiter!("fixed", FixedWindow::builder(quota, s())),
        limiter!("sliding", SlidingWindow::builder(quota, s()).sub_windows(4)),
        limiter!("token", TokenBucket::builder(quota, s())),
        limiter!("gcra", Gcra::builder(quota, s())),
        limiter!("log", SlidingLog::builder(quota, s())),
        limiter!("hybrid", HybridQuota::builder(quota, s())),
    ]
}

/// Checks what `policy` decided for the `nth` (0-based) failed request of
/// one client.
pub fn assert_policy(
    policy: FailurePolicy,
    nth: usize,
    outcome: &Result<Decision, Error>,
    what: &str,
) {
    match policy {
        FailurePolicy::ReturnError => assert!(
            matches!(outcome, Err(Error::Store(_) | Error::DeadlineExceeded(_))),
            "{what}: {outcome:?}"
        ),
        _ => {
            let decision = outcome.as_ref().unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(decision.under_failure(), "{what}: {decision:?}");
            let allowed = match policy {
                FailurePolicy::Open => true,
                FailurePolicy::Closed => false,
                // Half of 4: the stand-in admits 2.
                _ => nth < 2,
            };
            assert_eq!(
                decision.is_allowed(),
                allowed,
                "{what}, request {nth}: {decision:?}"
            );
            if !allowed {
                assert!(decision.retry_after().is_some(), "{what}: {decision:?}");
            }
        }
    }
}

/// Waits until every limiter's decisions are the store's again, failing
/// past a second after `since`.
pub async fn decided_by_the_store_within_a_second(limiters: &[Limiter], since: Instant) {
    for l in limiters {
        loop {
            let outcome = l.limiter.check(b"recovered").await;
            if matches!(&outcome, Ok(d) if !d.under_failure()) {
                assert!(outcome.unwrap().is_allowed(), "{}", l.name);
                break;
            }
            assert!(
                since.elapsed() < Duration::from_secs(1),
                "{} not recovered: {outcome:?}",
                l.name
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

pub const POLICIES: [FailurePolicy; 4] = [
    FailurePolicy::Open,
    FailurePolicy::Closed,
    FailurePolicy::Fallback { share: 0.5 },
    FailurePolicy::ReturnError,
];
