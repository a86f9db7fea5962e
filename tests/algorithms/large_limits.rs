//! The windows decide in integers: at any limit the builder accepts, a
//! fixed window admits exactly the limit and a sliding window exactly what
//! its estimate allows, with no floating-point slack. Limits whose sums
//! could wrap memcached's 64-bit counters are refused when the limiter is
//! built, and a counter that wraps anyway is read as a full window, not as
//! a small count.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{fixtures, unique_client, Fixture, T0};
use memcache_ratelimit::limiter::DeniedRequests;
use memcache_ratelimit::quota::MAX_LIMIT;
use memcache_ratelimit::store::{PutCondition, Store};
use memcache_ratelimit::{FixedWindow, Gcra, Quota, RateLimiter, SlidingWindow, TokenBucket};

const MINUTE: Duration = Duration::from_secs(60);

fn per_minute(limit: u64) -> Quota {
    Quota::with_period(limit.try_into().unwrap(), MINUTE).unwrap()
}

fn fixed(f: &Fixture, limit: u64) -> RateLimiter {
    f.limiter(FixedWindow::builder, per_minute(limit))
}

/// The limits the exactness is held to, up to the largest one accepted.
const LIMITS: [u64; 5] = [
    1_000_000_000,
    1_000_000_000_000,
    (1 << 53) + 1,
    MAX_LIMIT - 1,
    MAX_LIMIT,
];

#[tokio::test]
async fn fixed_window_does_not_admit_one_more_than_a_large_limit() {
    for f in fixtures().await {
        for limit in LIMITS {
            let limiter = fixed(&f, limit);
            let client = unique_client("fixed-large");
            let all = limiter.check_n(&client, limit).await.unwrap();
            assert!(all.is_allowed(), "{}: the whole limit {limit}", f.name);
            assert_eq!(all.remaining(), 0, "{}: {limit}", f.name);
            let one_more = limiter.check_n(&client, 1).await.unwrap();
            assert!(
                !one_more.is_allowed(),
                "{}: admitted {} at a limit of {limit}",
                f.name,
                u128::from(limit) + 1
            );
        }
    }
}

#[tokio::test]
async fn fixed_window_admits_a_large_limit_one_by_one_up_to_exactly_the_limit() {
    let f = common::memory();
    for limit in LIMITS {
        let limiter = fixed(&f, limit);
        let client = unique_client("fixed-large-steps");
        // All but three at once, then one at a time.
        assert!(limiter
            .check_n(&client, limit - 3)
            .await
            .unwrap()
            .is_allowed());
        let mut admitted = 0;
        for _ in 0..6 {
            admitted += u64::from(limiter.check(&client).await.unwrap().is_allowed());
        }
        assert_eq!(admitted, 3, "at a limit of {limit}");
    }
}

#[tokio::test]
async fn sliding_window_does_not_admit_a_fraction_over_its_estimate() {
    for limit in [100_000, 1_000_000_000_000, (1 << 53) + 1, MAX_LIMIT] {
        let f = common::memory();
        let limiter = f.sliding_window(per_minute(limit), 1);
        let client = unique_client("sliding-fraction");
        // One request in the previous minute, the rest of the limit in
        // this one but one.
        assert!(limiter.check_n(&client, 1).await.unwrap().is_allowed());
        f.clock.advance(MINUTE);
        assert!(limiter
            .check_n(&client, limit - 1)
            .await
            .unwrap()
            .is_allowed());
        // 1 ns before the minute ends, the old request still weighs
        // 1/60e9: the estimate of one more is limit + 1/60e9, over it.
        f.clock.advance(MINUTE - Duration::from_nanos(1));
        let decision = limiter.check_n(&client, 1).await.unwrap();
        assert!(
            !decision.is_allowed(),
            "admitted over the estimate at a limit of {limit}"
        );
        assert_eq!(decision.retry_after(), Some(Duration::from_nanos(1)));
        // At the boundary the old minute has slid out: exactly the limit.
        f.clock.advance(Duration::from_nanos(1));
        assert!(limiter.check_n(&client, 1).await.unwrap().is_allowed());
    }
}

#[tokio::test]
async fn sliding_window_remaining_is_exact_at_large_limits() {
    let f = common::memory();
    let limit = (1 << 53) + 1;
    let limiter = f.sliding_window(per_minute(limit), 4);
    let client = unique_client("sliding-remaining");
    let first = limiter.check_n(&client, 2).await.unwrap();
    assert_eq!(first.remaining(), limit - 2);
}

#[test]
fn a_limit_whose_sums_could_wrap_is_refused_when_built() {
    let store: Arc<dyn Store> = Arc::new(memcache_ratelimit::MemoryStore::new());
    for limit in [MAX_LIMIT + 1, 1 << 63, u64::MAX] {
        let quota = per_minute(limit);
        let errors = [
            FixedWindow::builder(quota, store.clone()).build().err(),
            SlidingWindow::builder(quota, store.clone()).build().err(),
            Gcra::builder(quota, store.clone()).build().err(),
            TokenBucket::builder(quota, store.clone()).build().err(),
        ];
        for error in errors {
            let error = error.expect("refused").to_string();
            assert!(
                error.contains("limit") && error.contains(&MAX_LIMIT.to_string()),
                "{error}"
            );
        }
    }
}

#[tokio::test]
async fn four_requests_of_half_the_counter_range_are_not_all_admitted() {
    // The largest limit accepted, and requests as large as it: the
    // counter never wraps, and the limit holds.
    let f = common::memory();
    let limiter = f
        .builder(FixedWindow::builder, per_minute(MAX_LIMIT))
        .denied_requests(DeniedRequests::Counted)
        .build()
        .unwrap();
    let client = unique_client("half-range");
    let mut admitted = 0;
    for _ in 0..4 {
        admitted += u64::from(
            limiter
                .check_n(&client, MAX_LIMIT)
                .await
                .unwrap()
                .is_allowed(),
        );
    }
    assert_eq!(admitted, 1);
}

#[tokio::test]
async fn a_wrapped_counter_is_read_as_a_full_window_and_repaired() {
    for f in fixtures().await {
        for counted in [DeniedRequests::Counted, DeniedRequests::Refunded] {
            let limiter = f
                .builder(FixedWindow::builder, per_minute(100))
                .denied_requests(counted)
                .build()
                .unwrap();
            let client = unique_client("wrapped");
            let at = chrono::DateTime::from_timestamp(T0, 0).unwrap();
            let now = if f.real_time() {
                chrono::Utc::now()
            } else {
                at
            };
            f.clock.set(now);
            let key = limiter.keys_at(&client, now).unwrap().remove(0);
            // Another writer (or 2^64 requests) left the counter one short
            // of wrapping; the next increment of 5 wraps it to 3.
            let near = (u64::MAX - 1).to_string();
            f.store
                .put(&key, near.as_bytes(), MINUTE * 2, PutCondition::Always)
                .await
                .unwrap();
            let decision = limiter.check_n(&client, 5).await.unwrap();
            assert!(
                !decision.is_allowed(),
                "{}: a wrapped counter passed for a small count",
                f.name
            );
            assert_eq!(decision.remaining(), 0, "{}", f.name);
            assert_eq!(limiter.stats().failures.repaired, 1, "{}", f.name);
            // Repaired to a full window, not left wrapped: still denied,
            // and no further repair.
            assert!(!limiter.check(&client).await.unwrap().is_allowed());
            assert_eq!(limiter.stats().failures.repaired, 1, "{}", f.name);
            let held = f.store.get_counters(&[key]).await.unwrap()[0].unwrap();
            assert!(held >= 100, "{}: repaired to {held}", f.name);
        }
    }
}
