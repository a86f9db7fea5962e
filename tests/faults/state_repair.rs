//! Compare-and-swap states read back from the store are untrusted: a time
//! far in the future (a client clock far ahead, or another program writing
//! nonsense), or bytes that are no state at all, are repaired, counted in
//! `failure_stats().repaired`, and never make a decision promise a wait
//! longer than the policy's own horizon.

use crate::common;

use std::time::Duration;

use chrono::DateTime;
use common::states::{self, Algorithm};
use common::{fixtures, unique_client, Fixture, T0};
use memcache_ratelimit::store::PutCondition;
use memcache_ratelimit::{Decision, Limiter, RateLimiter};
use memcache_ratelimit::{DiscreteRefill, Gcra, HybridQuota, Sessionize, SlidingLog, TokenBucket};

const YEAR_2200: i64 = 7_258_118_400;

/// Spends `cost` of `limiter`'s quota for `client` at a time in the year
/// 2200, then asks at the limiter's own time: the decision waits no longer
/// than `horizon`, and the state read was counted as repaired. Returns the
/// decision and its wait.
async fn spent_in_2200_then_asked_now(
    limiter: &dyn Limiter,
    client: &[u8],
    cost: u64,
    name: &str,
    horizon: Duration,
) -> (Decision, Duration) {
    let future = DateTime::from_timestamp(YEAR_2200, 0).unwrap();
    let spent = limiter.check_at(client, cost, future).await.unwrap();
    assert!(spent.is_allowed(), "{name}: {spent:?}");
    let decision = limiter.check(client).await.unwrap();
    let retry = decision.retry_after().unwrap_or_default();
    assert!(
        retry <= horizon && decision.reset_after() <= horizon,
        "{name}: retry_after {retry:?}, reset_after {:?}, horizon {horizon:?}: {decision:?}",
        decision.reset_after()
    );
    assert_eq!(limiter.stats().failures.repaired, 1, "{name}");
    (decision, retry)
}

#[tokio::test]
async fn gcra_state_from_the_far_future_does_not_block_for_centuries() {
    let f = common::memory();
    let gcra = f.limiter(Gcra::builder, "10/minute");
    let client = unique_client("far-future");
    // Burst tolerance 60 s, the longest reservation one period (60 s), the
    // allowed clock skew 1 s.
    let horizon = Duration::from_secs(121);
    let (_, retry) = spent_in_2200_then_asked_now(&gcra, &client, 1, "gcra", horizon).await;
    // Admitted again no later than promised.
    f.clock.advance(retry);
    assert!(gcra.check(&client).await.unwrap().is_allowed());
}

/// Spends `limiter`'s whole quota at a time in the year 2200, then asks at
/// the limiter's own time: the decision is bounded by `horizon`, tells the
/// truth, and the state read was counted as repaired.
async fn spent_all_in_2200_then_asked_now(
    f: &common::Fixture,
    limiter: &dyn Limiter,
    name: &str,
    horizon: Duration,
) {
    let client = unique_client("far-future");
    let limit = limiter.quota().limit();
    let (decision, retry) =
        spent_in_2200_then_asked_now(limiter, &client, limit, name, horizon).await;
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
    let bucket = f.limiter(TokenBucket::builder, "10/minute");
    // A refill of the whole bucket (60 s) plus the skew.
    spent_all_in_2200_then_asked_now(&f, &bucket, "token bucket", Duration::from_secs(61)).await;
}

#[tokio::test]
async fn sliding_log_state_from_the_far_future_is_clamped() {
    let f = common::memory();
    let log = f.limiter(SlidingLog::builder, "10/minute");
    // One period plus the skew.
    spent_all_in_2200_then_asked_now(&f, &log, "sliding log", Duration::from_secs(61)).await;
}

#[tokio::test]
async fn hybrid_quota_state_from_the_far_future_is_clamped() {
    let f = common::memory();
    let quota = f.limiter(HybridQuota::builder, "10/minute");
    // Two windows (a smooth refill from −q to q) plus the skew.
    spent_all_in_2200_then_asked_now(&f, &quota, "hybrid quota", Duration::from_secs(121)).await;
}

#[tokio::test]
async fn discrete_refill_state_from_the_far_future_is_clamped() {
    let f = common::memory();
    let bucket = f.limiter(DiscreteRefill::builder, "10/minute");
    // One refill of the whole bucket (60 s) after a mark clamped to the skew.
    spent_all_in_2200_then_asked_now(&f, &bucket, "discrete refill", Duration::from_secs(61)).await;
}

#[tokio::test]
async fn sessionize_state_from_the_far_future_is_clamped() {
    let f = common::memory();
    let sessions = f.limiter(Sessionize::builder, "10/minute");
    // As the discrete refill: a whole refill after a mark clamped to the
    // skew (the denial restarts the mark at most there, never further).
    spent_all_in_2200_then_asked_now(&f, &sessions, "sessionize", Duration::from_secs(61)).await;
}

const DAY: Duration = Duration::from_secs(86_400);
const NANOS: i64 = 1_000_000_000;

/// Writes `value` at the key `limiter` keeps for `client`, found through
/// [`RateLimiter::inspect`].
async fn write_raw(f: &common::Fixture, limiter: &dyn Limiter, client: &[u8], value: &[u8]) {
    let key = limiter.inspect(client).await.unwrap().keys.remove(0).key;
    f.store
        .put(key.as_bytes(), value, DAY, PutCondition::Always)
        .await
        .unwrap();
}

/// Each compare-and-swap algorithm's limiter on the fixture, with its name
/// in messages.
fn every_algorithm(f: &Fixture) -> Vec<(Algorithm, RateLimiter, String)> {
    states::ALL
        .into_iter()
        .map(|algorithm| {
            let limiter = states::build(algorithm, f.store.clone(), &f.clock, false);
            (algorithm, limiter, format!("{} {algorithm:?}", f.name))
        })
        .collect()
}

#[tokio::test]
async fn a_spent_state_written_for_the_year_2200_is_clamped_on_every_store() {
    for f in fixtures().await {
        for (algorithm, limiter, name) in every_algorithm(&f) {
            let client = unique_client("raw-2200");
            let spent = states::spent_at(algorithm, YEAR_2200 * NANOS);
            write_raw(&f, &limiter, &client, &spent).await;
            let denied = limiter.check(&client).await.unwrap();
            assert!(denied.is_denied(), "{name}: {denied:?}");
            let retry = denied.retry_after().unwrap();
            let horizon = states::horizon(algorithm);
            assert!(
                retry <= horizon && denied.reset_after() <= horizon,
                "{name}: {denied:?} beyond {horizon:?}"
            );
            assert_eq!(limiter.stats().failures.repaired, 1, "{name}");
            // The clamped state was written back: the next decision finds
            // nothing to repair, and admits at the promised time.
            let again = limiter.check(&client).await.unwrap();
            assert!(again.is_denied(), "{name}: {again:?}");
            f.clock.advance(retry);
            let admitted = limiter.check(&client).await.unwrap();
            assert!(
                admitted.is_allowed(),
                "{name}: denied for {retry:?}, then {admitted:?}"
            );
            assert_eq!(limiter.stats().failures.repaired, 1, "{name}");
            assert_eq!(limiter.stats().failures.absorbed, 0, "{name}");
        }
    }
}

#[tokio::test]
async fn a_value_that_is_no_state_is_replaced_and_counted_as_repaired() {
    for f in fixtures().await {
        for (algorithm, limiter, name) in every_algorithm(&f) {
            let now = T0 * NANOS;
            let garbage: Vec<Vec<u8>> = vec![
                b"\xff not a state".to_vec(),
                u64::MAX.to_string().into_bytes(),
                // Plausible, but not this algorithm's: another's encoding.
                match algorithm {
                    Algorithm::Gcra { .. } => states::token_bucket("1", &now.to_string()),
                    _ => states::gcra_at(now),
                },
                // Out of range: tokens beyond the capacity, more entries
                // than the limit, a bucket beyond the quota.
                match algorithm {
                    Algorithm::Gcra { .. } => b"1e40".to_vec(),
                    Algorithm::TokenBucket { .. } => {
                        states::token_bucket("1e300", &now.to_string())
                    }
                    Algorithm::SlidingLog => states::sliding_log(now, &[0; 9]),
                    Algorithm::HybridQuota => states::hybrid_quota('s', "-1e300", &now.to_string()),
                    Algorithm::DiscreteRefill { .. } => {
                        states::discrete_refill("99", &now.to_string())
                    }
                    Algorithm::Sessionize { .. } => {
                        let now = now.to_string();
                        states::sessionize("99", &now, &now)
                    }
                    window => states::not_cas(window),
                },
            ];
            for (index, value) in garbage.iter().enumerate() {
                let client = unique_client("no-state");
                write_raw(&f, &limiter, &client, value).await;
                let decision = limiter.check(&client).await.unwrap();
                if algorithm == states::GCRA && index == 1 {
                    // For GCRA a number is a state: a TAT centuries ahead,
                    // clamped to the horizon.
                    assert!(
                        decision.retry_after().unwrap() <= states::horizon(algorithm),
                        "{name} #{index}: {decision:?}"
                    );
                } else {
                    // A fresh client: the whole quota less this request.
                    assert!(
                        decision.is_allowed() && !decision.under_failure(),
                        "{name} #{index}: {decision:?}"
                    );
                }
                assert_eq!(
                    limiter.stats().failures.repaired,
                    index as u64 + 1,
                    "{name} #{index}"
                );
            }
        }
    }
}

#[tokio::test]
async fn states_from_the_past_or_within_the_skew_are_believed() {
    let f = common::memory();
    for algorithm in states::ALL {
        let limiter = states::build(algorithm, f.store.clone(), &f.clock, false);
        let now = T0 * NANOS;
        for at in [i64::MIN, 0, now - 100 * NANOS, now, now + NANOS] {
            let client = unique_client("believed");
            write_raw(&f, &limiter, &client, &states::spent_at(algorithm, at)).await;
            let decision = limiter.check(&client).await.unwrap();
            if let Some(retry) = decision.retry_after() {
                assert!(retry <= states::horizon(algorithm), "{algorithm:?} at {at}");
            }
        }
        assert_eq!(limiter.stats().failures.repaired, 0, "{algorithm:?}");
    }
}
