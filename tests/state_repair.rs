//! Compare-and-swap states read back from the store are untrusted: a time
//! far in the future (a client clock far ahead, or another program writing
//! nonsense), or bytes that are no state at all, are repaired, counted in
//! `failure_stats().repaired`, and never make a decision promise a wait
//! longer than the policy's own horizon.

mod common;

use std::time::Duration;

use chrono::DateTime;
use common::{fixtures, unique_client, T0};
use memcache_ratelimit::store::PutCondition;
use memcache_ratelimit::{Clock, Gcra, HybridQuota, RateLimiter, SlidingLog, TokenBucket};

const YEAR_2200: i64 = 7_258_118_400;

#[tokio::test]
async fn gcra_state_from_the_far_future_does_not_block_for_centuries() {
    let f = common::memory();
    let gcra = common::patient(Gcra::builder("10/minute".parse().unwrap(), f.store.clone()))
        .clock(f.clock.clone())
        .build()
        .unwrap();
    let client = unique_client("far-future");
    let future = DateTime::from_timestamp(YEAR_2200, 0).unwrap();
    assert!(gcra.check_at(&client, 1, future).await.unwrap().is_allowed());
    // Burst tolerance 60 s, the longest reservation one period (60 s), the
    // allowed clock skew 1 s.
    let horizon = Duration::from_secs(121);
    let decision = gcra.check(&client).await.unwrap();
    let retry = decision.retry_after().unwrap_or_default();
    assert!(
        retry <= horizon && decision.reset_after() <= horizon,
        "retry_after {retry:?}, reset_after {:?}: {decision:?}",
        decision.reset_after()
    );
    assert_eq!(gcra.failure_stats().repaired, 1);
    // Admitted again no later than promised.
    f.clock.advance(retry);
    assert!(gcra.check(&client).await.unwrap().is_allowed());
}

/// Spends `limiter`'s whole quota at a time in the year 2200, then asks at
/// the limiter's own time: the decision is bounded by `horizon`, tells the
/// truth, and the state read was counted as repaired.
async fn spent_in_2200_then_asked_now(
    f: &common::Fixture,
    limiter: &dyn RateLimiter,
    name: &str,
    horizon: Duration,
) {
    let client = unique_client("far-future");
    let future = DateTime::from_timestamp(YEAR_2200, 0).unwrap();
    let limit = limiter.quota().limit();
    let spent = limiter.check_at(&client, limit, future).await.unwrap();
    assert!(spent.is_allowed(), "{name}: {spent:?}");
    let decision = limiter.check(&client).await.unwrap();
    let retry = decision.retry_after().unwrap_or_default();
    assert!(
        retry <= horizon && decision.reset_after() <= horizon,
        "{name}: retry_after {retry:?}, reset_after {:?}, horizon {horizon:?}",
        decision.reset_after()
    );
    assert_eq!(limiter.stats().failures.repaired, 1, "{name}");
    if decision.is_denied() {
        f.clock.advance(retry);
        let again = limiter.check(&client).await.unwrap();
        assert!(
            again.is_allowed(),
            "{name}: denied with retry_after {retry:?}, and denied again after it: {again:?}"
        );
    }
}

#[tokio::test]
async fn token_bucket_state_from_the_far_future_is_clamped() {
    let f = common::memory();
    let bucket = common::patient(TokenBucket::builder(
        "10/minute".parse().unwrap(),
        f.store.clone(),
    ))
    .clock(f.clock.clone())
    .build()
    .unwrap();
    // A refill of the whole bucket (60 s) plus the skew.
    spent_in_2200_then_asked_now(&f, &bucket, "token bucket", Duration::from_secs(61)).await;
}

#[tokio::test]
async fn sliding_log_state_from_the_far_future_is_clamped() {
    let f = common::memory();
    let log = common::patient(SlidingLog::builder(
        "10/minute".parse().unwrap(),
        f.store.clone(),
    ))
    .clock(f.clock.clone())
    .build()
    .unwrap();
    // One period plus the skew.
    spent_in_2200_then_asked_now(&f, &log, "sliding log", Duration::from_secs(61)).await;
}

#[tokio::test]
async fn hybrid_quota_state_from_the_far_future_is_clamped() {
    let f = common::memory();
    let quota = common::patient(HybridQuota::builder(
        "10/minute".parse().unwrap(),
        f.store.clone(),
    ))
    .clock(f.clock.clone())
    .build()
    .unwrap();
    // Two windows (a smooth refill from −q to q) plus the skew.
    spent_in_2200_then_asked_now(&f, &quota, "hybrid quota", Duration::from_secs(121)).await;
}
