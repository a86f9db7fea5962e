//! Behaviour of the compare-and-swap algorithms on every store, driven by a
//! ManualClock: refill, cost, strict mode, caller timestamps, lost races
//! and foreign values.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::cas::{self, CasSettings};
use common::faults::LosingCas;
use common::{admitted, fixtures, unique_client, Fixture, T0};
use memcache_ratelimit::algorithm::CasPolicy;
use memcache_ratelimit::algorithm::CasStats;
use memcache_ratelimit::store::PutCondition;
use memcache_ratelimit::{DiscreteRefill, Error, Gcra, RateLimiter, TokenBucket};

/// One of the compare-and-swap limiters, named.
struct Cas {
    name: &'static str,
    limiter: RateLimiter,
}

impl Cas {
    fn stats(&self) -> CasStats {
        self.limiter.cas_stats()
    }

    fn key(&self, client: &[u8]) -> Vec<u8> {
        common::state_key(&self.limiter, client)
    }
}

fn named(limiters: Vec<(&'static str, RateLimiter)>) -> Vec<Cas> {
    limiters
        .into_iter()
        .map(|(name, limiter)| Cas { name, limiter })
        .collect()
}

/// Every compare-and-swap algorithm on a fixture.
fn all(f: &Fixture, quota: &str, strict: bool) -> Vec<Cas> {
    let settings = CasSettings {
        strict,
        ..CasSettings::on(&f.clock)
    };
    named(cas::every(f.store.clone(), quota, &settings))
}

/// The linear limiters on a fixture: token bucket and GCRA, the first two
/// of [`all`].
fn linear(f: &Fixture, quota: &str, strict: bool) -> Vec<Cas> {
    let mut linear = all(f, quota, strict);
    linear.truncate(2);
    linear
}

#[tokio::test]
async fn a_full_bucket_admits_its_capacity_then_refills_at_the_rate() {
    for f in fixtures().await {
        for cas in linear(&f, "5/minute", false) {
            let name = format!("{} {}", f.name, cas.name);
            let client = unique_client("refill");
            assert_eq!(admitted(&cas.limiter, &client, 8).await, 5, "{name}");
            let denied = cas.limiter.check(&client).await.unwrap();
            assert_eq!(
                denied.retry_after(),
                Some(Duration::from_secs(12)),
                "{name}"
            );
            assert_eq!(denied.reset_after(), Duration::from_secs(60));
            f.clock.advance(Duration::from_millis(11_999));
            assert!(
                cas.limiter.check(&client).await.unwrap().is_denied(),
                "{name}"
            );
            f.clock.advance(Duration::from_millis(1));
            let allowed = cas.limiter.check(&client).await.unwrap();
            assert!(allowed.is_allowed(), "{name}");
            assert_eq!(allowed.remaining(), 0);
            f.clock.advance(Duration::from_secs(600));
            assert_eq!(
                admitted(&cas.limiter, &client, 8).await,
                5,
                "{name}: refill is capped"
            );
        }
    }
}

#[tokio::test]
async fn costs_count_in_units_and_a_cost_above_capacity_is_an_error() {
    for f in fixtures().await {
        for cas in all(&f, "10/minute", false) {
            let client = unique_client("cost");
            let seven = cas.limiter.check_n(&client, 7).await.unwrap();
            assert_eq!((seven.remaining(), seven.used()), (3, 7.0), "{}", cas.name);
            assert!(
                cas.limiter.check_n(&client, 4).await.unwrap().is_denied(),
                "{}",
                cas.name
            );
            assert!(
                cas.limiter.check_n(&client, 3).await.unwrap().is_allowed(),
                "{}",
                cas.name
            );
            common::assert_impossible_costs_are_errors(&cas.limiter, &client).await;
        }
    }
}

#[tokio::test]
async fn strict_mode_keeps_a_flooding_client_denied_until_it_stops() {
    for f in fixtures().await {
        for (lenient, strict) in
            all(&f, "10/minute", false)
                .into_iter()
                .zip(all(&f, "10/minute", true))
        {
            // Both are the same algorithm.
            let name = format!("{} {}", f.name, strict.name);
            let (a, b) = (unique_client("lenient"), unique_client("strict"));
            assert_eq!(admitted(&lenient.limiter, &a, 10).await, 10);
            assert_eq!(admitted(&strict.limiter, &b, 10).await, 10);
            // One request a second, six times the rate, for two minutes.
            let (mut lenient_through, mut strict_through) = (0, 0);
            for _ in 0..120 {
                f.clock.advance(Duration::from_secs(1));
                lenient_through +=
                    usize::from(lenient.limiter.check(&a).await.unwrap().is_allowed());
                strict_through += usize::from(strict.limiter.check(&b).await.unwrap().is_allowed());
            }
            // The linear limiters refill 10 a minute; the log and the hybrid
            // quota wait out the first minute, then let 10 and 1 through.
            let expected = match lenient.name {
                "sliding log" | "hybrid quota" => 11,
                _ => 20,
            };
            assert_eq!(lenient_through, expected, "{name}: refunded denials");
            assert_eq!(strict_through, 0, "{name}");
            // Quiet for two minutes, the strict client is welcome again.
            f.clock.advance(Duration::from_secs(120));
            assert_eq!(admitted(&strict.limiter, &b, 10).await, 10, "{name}");
        }
    }
}

#[tokio::test]
async fn replayed_timestamps_are_honoured_and_older_events_earn_nothing() {
    for f in fixtures().await {
        for cas in linear(&f, "10/minute", false) {
            let name = format!("{} {}", f.name, cas.name);
            let client = unique_client("replay");
            let at = |secs: i64| chrono::DateTime::from_timestamp(T0 - 3_600 + secs, 0).unwrap();
            let allowed_at = |secs: i64| {
                let limiter = &cas.limiter;
                let client = &client;
                async move {
                    limiter
                        .check_at(client, 1, at(secs))
                        .await
                        .unwrap()
                        .is_allowed()
                }
            };
            // A historical burst an hour ago, replayed in order.
            for _ in 0..10 {
                assert!(allowed_at(0).await);
            }
            assert!(!allowed_at(0).await, "{}", cas.name);
            assert!(!allowed_at(5).await, "{}", cas.name);
            assert!(allowed_at(6).await, "{}", cas.name);
            // An event from before the latest one cannot use the time since.
            assert!(!allowed_at(3).await, "{name}: an older event was admitted");
        }
    }
}

/// An event replayed from long before a client's latest state (further
/// back than the clock-skew allowance) is not a sign of a clock running
/// ahead: the state is judged against this process's present, not the
/// event's time, so the old event moves nothing and earns nothing later.
#[tokio::test]
async fn an_event_far_older_than_the_latest_state_earns_nothing() {
    let mut earned = Vec::new();
    for f in fixtures().await {
        let settings = CasSettings::on(&f.clock);
        let quota: memcache_ratelimit::Quota = "10/minute".parse().unwrap();
        let mut limiters = all(&f, "10/minute", false);
        limiters.push(Cas {
            name: "discrete refill",
            limiter: settings.build(DiscreteRefill::builder(quota, f.store.clone())),
        });
        for cas in limiters {
            let name = format!("{} {}", f.name, cas.name);
            let client = unique_client("old-event");
            let at = |secs: i64| chrono::DateTime::from_timestamp(T0 - 3_600 + secs, 0).unwrap();
            let check = |secs: i64| {
                let limiter = &cas.limiter;
                let client = &client;
                async move { limiter.check_at(client, 1, at(secs)).await.unwrap() }
            };
            for _ in 0..10 {
                assert!(check(60).await.is_allowed(), "{name}");
            }
            assert!(check(60).await.is_denied(), "{name}");
            // Sixty seconds before the latest state: beyond the 1 s allowance.
            let _ = check(0).await;
            if check(61).await.is_allowed() {
                earned.push(name);
            }
        }
    }
    assert!(
        earned.is_empty(),
        "an event long before the latest state earned quota: {earned:?}"
    );
}

#[tokio::test]
async fn lost_races_are_retried_and_running_out_never_admits() {
    for f in fixtures().await {
        let losing = Arc::new(LosingCas::new(f.store.clone()));
        let settings = CasSettings {
            policy: CasPolicy::new(4, Duration::from_micros(10), Duration::from_micros(100))
                .unwrap(),
            ..CasSettings::on(&f.clock)
        };
        for cas in named(cas::every(losing.clone(), "3/minute", &settings)) {
            let name = format!("{} {}", f.name, cas.name);
            let client = unique_client("race");
            losing.lose_next(3);
            let first = cas.limiter.check(&client).await.unwrap();
            assert!(first.is_allowed(), "{name}");
            let stats = cas.stats();
            assert_eq!(
                (stats.attempts, stats.conflicts, stats.retries),
                (4, 3, 3),
                "{name}"
            );

            losing.lose_next(4);
            let outcome = cas.limiter.check(&client).await;
            assert!(
                matches!(outcome, Err(Error::Contention { attempts: 4 })),
                "{outcome:?}"
            );
            assert_eq!(cas.stats().exhausted, 1);
            // Nothing was taken by the failed decision: two of three remain.
            let next = cas.limiter.check(&client).await.unwrap();
            assert_eq!((next.is_allowed(), next.remaining()), (true, 1), "{name}");
            assert_eq!(cas.stats().decisions, 3);
        }
    }
}

#[tokio::test]
async fn a_value_that_is_not_the_state_is_replaced() {
    for f in fixtures().await {
        for cas in all(&f, "3/minute", false) {
            let name = format!("{} {}", f.name, cas.name);
            let client = unique_client("garbage");
            let key = cas.key(&client);
            f.store
                .put(
                    &key,
                    b"not a state",
                    Duration::from_secs(60),
                    PutCondition::Always,
                )
                .await
                .unwrap();
            let decision = cas.limiter.check(&client).await.unwrap();
            assert_eq!(
                (decision.is_allowed(), decision.remaining()),
                (true, 2),
                "{name}"
            );
            assert_eq!(cas.stats().replaced, 1);
            assert_ne!(
                f.store.get(&key).await.unwrap().unwrap().value,
                b"not a state"
            );
        }
    }
}

#[tokio::test]
async fn a_state_the_store_dropped_is_decided_anew_without_a_read() {
    for f in fixtures().await {
        // Only the meta protocol's limiters write on a known state: the
        // classic protocol's `cas` tells no version, and the memory store
        // decides in one atomic step.
        let versions = f.name == "memcached";
        for cas in all(&f, "3/minute", false) {
            let name = format!("{} {}", f.name, cas.name);
            let client = unique_client("dropped");
            assert_eq!(admitted(&cas.limiter, &client, 2).await, 2, "{name}");
            // Evicted or expired early: memcached no longer holds it.
            assert_eq!(f.store.delete(&[cas.key(&client)]).await.unwrap(), 1);
            let before = cas.stats();
            let decision = cas.limiter.check(&client).await.unwrap();
            assert_eq!(
                (decision.is_allowed(), decision.remaining()),
                (true, 2),
                "{name}: decided on a full quota"
            );
            let after = cas.stats();
            let vanished = (after.vanished - before.vanished, after.stale - before.stale);
            let reads = after.attempts - before.attempts;
            match versions {
                true => assert_eq!((vanished, reads), ((1, 1), 0), "{name}"),
                false => assert_eq!((vanished, reads), ((0, 0), 1), "{name}"),
            }
            assert!(f.store.get(&cas.key(&client)).await.unwrap().is_some());
        }
    }
}

#[tokio::test]
async fn reset_forgets_the_client_and_only_that_client() {
    for f in fixtures().await {
        for cas in all(&f, "2/minute", false) {
            let name = format!("{} {}", f.name, cas.name);
            let (a, b) = (unique_client("reset-a"), unique_client("reset-b"));
            admitted(&cas.limiter, &a, 2).await;
            admitted(&cas.limiter, &b, 2).await;
            cas.limiter.reset(&a).await.unwrap();
            assert_eq!(admitted(&cas.limiter, &a, 5).await, 2, "{name}");
            assert!(cas.limiter.check(&b).await.unwrap().is_denied());
        }
    }
}

#[tokio::test]
async fn a_larger_capacity_bursts_without_raising_the_rate() {
    let f = common::memory();
    let bucket = |capacity| {
        f.builder(TokenBucket::builder, "60/minute")
            .capacity(capacity)
            .build()
    };
    let bucket_of_150 = bucket(150).unwrap();
    let client = unique_client("burst");
    assert_eq!(admitted(&bucket_of_150, &client, 200).await, 150);
    // Then one a second, the quota's rate.
    assert_eq!(
        common::admitted_every_second(&f.clock, &bucket_of_150, &client, 60).await,
        60
    );
    assert_eq!(bucket(0).unwrap_err().field(), "capacity");
}

#[tokio::test]
async fn gcra_delay_mode_spaces_requests_at_the_rate() {
    let f = common::memory();
    let gcra = f
        .builder(Gcra::builder, "4/second")
        .burst(1)
        .build()
        .unwrap();
    let client = unique_client("queue");
    let max = Duration::from_secs(1);
    let mut delays = Vec::new();
    for _ in 0..6 {
        let slot = gcra.reserve(&client, 1, max).await.unwrap();
        if slot.decision().is_allowed() {
            delays.push(slot.delay().as_millis());
        } else {
            delays.push(u128::MAX);
        }
    }
    // Slots every 250 ms, up to the 1 s the caller accepts; then rejected.
    assert_eq!(delays, vec![0, 250, 500, 750, 1000, u128::MAX]);
}

#[tokio::test]
async fn gcra_until_ready_waits_for_its_slot() {
    let store = Arc::new(memcache_ratelimit::MemoryStore::new());
    let gcra = common::patient(Gcra::builder("20/second".parse().unwrap(), store))
        .burst(1)
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    for _ in 0..3 {
        let decision = gcra
            .until_ready(b"queue", 1, Duration::from_millis(500))
            .await
            .unwrap();
        assert!(decision.is_allowed());
    }
    // Two waits of 50 ms each (the first request goes at once).
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(95),
        "waited only {waited:?}"
    );
    let rejected = gcra.until_ready(b"queue", 1, Duration::ZERO).await.unwrap();
    assert!(rejected.is_denied());
}
