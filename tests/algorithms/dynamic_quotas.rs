//! Quotas picked per client at request time: a client moved between plans
//! is held to the new plan at once, and state kept under one plan's
//! parameters is never read as another's.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{fixtures, unique_client, Fixture};
use memcache_ratelimit::limiter::MAX_DYNAMIC_QUOTAS;
use memcache_ratelimit::Limiter;
use memcache_ratelimit::{Algorithm, DynamicLimiter, Error, FailurePolicy, LimiterSpec, Quota};

/// Plans by client, changed by the test as an operator would.
#[derive(Clone, Default)]
struct Plans(Arc<Mutex<HashMap<Vec<u8>, Quota>>>);

impl Plans {
    fn set(&self, client: &[u8], quota: &str) {
        self.0
            .lock()
            .unwrap()
            .insert(client.to_vec(), quota.parse().unwrap());
    }
}

const FREE: &str = "4/minute";
const PRO: &str = "10/minute";
const HOURLY: &str = "30/hour";

fn limiter(f: &Fixture, algorithm: Algorithm, plans: &Plans) -> DynamicLimiter {
    let free: Quota = FREE.parse().unwrap();
    let spec = LimiterSpec::new(algorithm, free)
        .clock(f.clock.clone())
        .deadline(Duration::from_secs(5))
        .on_failure(FailurePolicy::ReturnError);
    let plans = plans.clone();
    DynamicLimiter::new(spec, f.store.clone(), move |client: &[u8]| {
        plans.0.lock().unwrap().get(client).copied().unwrap_or(free)
    })
    .unwrap()
}

/// How many of `n` requests get through, and the limit they were told.
async fn admitted(limiter: &DynamicLimiter, client: &[u8], n: u32) -> (u32, u64) {
    let mut allowed = 0;
    let mut limit = 0;
    for _ in 0..n {
        let decision = limiter.check(client).await.unwrap();
        allowed += u32::from(decision.is_allowed());
        limit = decision.limit();
    }
    (allowed, limit)
}

#[tokio::test]
async fn moving_a_client_between_plans_keeps_counts_or_starts_fresh_as_the_key_layout_says() {
    for f in fixtures().await {
        for algorithm in Algorithm::ALL {
            let plans = Plans::default();
            let limiter = limiter(&f, algorithm, &plans);
            let client = unique_client("plan");
            let at = format!("{} {}", f.name, algorithm.name());

            // On the free plan: 4 of 6 through.
            assert_eq!(admitted(&limiter, &client, 6).await, (4, 4), "{at}");

            // Upgraded, same minute. A window's counts do not depend on the
            // limit, so the 4 already made count against 10: 6 more. A
            // compare-and-swap state does, so it starts fresh under the new
            // parameters: a whole burst of 10.
            plans.set(&client, PRO);
            let windows = matches!(
                algorithm,
                Algorithm::SlidingWindow { .. } | Algorithm::FixedWindow
            );
            let expected = if windows { 6 } else { 10 };
            assert_eq!(
                admitted(&limiter, &client, 12).await,
                (expected, 10),
                "{at}"
            );

            // Downgraded again: every earlier request still counts (windows:
            // 10 made, over 4), or the free plan's state, spent, is found as
            // it was left. Nothing through either way.
            plans.set(&client, FREE);
            assert_eq!(admitted(&limiter, &client, 3).await, (0, 4), "{at}");

            // A plan with another period reads other keys: a fresh start.
            plans.set(&client, HOURLY);
            let (allowed, limit) = admitted(&limiter, &client, 40).await;
            assert_eq!((allowed, limit), (30, 30), "{at}");

            let stats = limiter.stats();
            assert_eq!(
                (stats.allowed, stats.denied, stats.errors),
                (
                    u64::from(4 + expected + 30),
                    u64::from(2 + 12 - expected + 3 + 10),
                    0
                ),
                "{at}"
            );
            assert_eq!(limiter.quotas().len(), 3, "{at}");
        }
    }
}

#[tokio::test]
async fn a_reset_forgets_the_client_under_every_plan() {
    for f in fixtures().await {
        let plans = Plans::default();
        let limiter = limiter(&f, Algorithm::Gcra { burst: None }, &plans);
        let client = unique_client("reset");
        assert_eq!(admitted(&limiter, &client, 5).await.0, 4);
        plans.set(&client, PRO);
        assert_eq!(admitted(&limiter, &client, 11).await.0, 10);
        limiter.reset(&client).await.unwrap();
        assert_eq!(admitted(&limiter, &client, 11).await.0, 10, "{}", f.name);
        plans.set(&client, FREE);
        assert_eq!(admitted(&limiter, &client, 5).await.0, 4, "{}", f.name);
    }
}

#[tokio::test]
async fn a_quota_the_spec_cannot_hold_is_rejected_at_start_or_as_an_error() {
    let f = common::memory();
    // Four sub-windows of a 2 ms period are not whole milliseconds.
    let odd: Quota = "1/2ms".parse().unwrap();
    let plans = Plans::default();
    let prepared = limiter(&f, Algorithm::SlidingWindow { sub_windows: 4 }, &plans).prepare([odd]);
    assert_eq!(prepared.unwrap_err().field(), "sub_windows");

    let limiter = limiter(&f, Algorithm::SlidingWindow { sub_windows: 4 }, &plans);
    plans.set(b"odd", "1/2ms");
    match limiter.check(b"odd").await {
        Err(Error::Config(error)) => assert_eq!(error.field(), "sub_windows"),
        other => panic!("expected a configuration error, got {other:?}"),
    }
    assert!(limiter.check(b"even").await.unwrap().is_allowed());
    assert_eq!(limiter.stats().errors, 1);
}

#[tokio::test]
async fn quotas_computed_from_request_data_are_bounded() {
    let f = common::memory();
    let spec = LimiterSpec::new(Algorithm::FixedWindow, "1/second".parse().unwrap())
        .clock(f.clock.clone());
    let limiter = DynamicLimiter::new(spec, f.store.clone(), |client: &[u8]| {
        let limit: u64 = std::str::from_utf8(client).unwrap().parse().unwrap();
        format!("{limit}/second").parse().unwrap()
    })
    .unwrap();
    for limit in 1..=MAX_DYNAMIC_QUOTAS {
        let client = limit.to_string();
        assert!(limiter.check(client.as_bytes()).await.unwrap().is_allowed());
    }
    let over = (MAX_DYNAMIC_QUOTAS + 1).to_string();
    match limiter.check(over.as_bytes()).await {
        Err(Error::Config(error)) => assert_eq!(error.field(), "quota"),
        other => panic!("expected the quota bound, got {other:?}"),
    }
}
