//! Behaviour of the fixed and sliding windows, on every store, driven by a
//! ManualClock (memcached counters live for at least a minute here, so no
//! test waits in real time).

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{admitted, admitted_every_second, fixtures, unique_client, Fixture, T0};
use memcache_ratelimit::algorithm::Estimator;
use memcache_ratelimit::limiter::DeniedRequests;
use memcache_ratelimit::store::CountingStore;
use memcache_ratelimit::{FixedWindow, RateLimiter, SlidingWindow};

fn fixed(f: &Fixture, q: &str) -> RateLimiter {
    f.limiter(FixedWindow::builder, q)
}

#[tokio::test]
async fn fixed_window_keys_are_namespaced_minute_stamps() {
    let f = common::memory();
    let limiter = fixed(&f, "10/minute");
    let at = chrono::DateTime::from_timestamp(T0 + 83, 0).unwrap();
    assert_eq!(
        limiter.keys_at(b"alice", at).unwrap(),
        vec![b"rl:alice_202701150801".to_vec()]
    );
    let hourly = common::patient(FixedWindow::builder(
        "10/hour".parse().unwrap(),
        f.store.clone(),
    ))
    .namespace("api")
    .build()
    .unwrap();
    assert_eq!(
        hourly.keys_at(b"alice", at).unwrap(),
        vec![b"api:alice_202701150800-1h".to_vec()]
    );
}

#[tokio::test]
async fn fixed_window_resets_exactly_at_the_window_boundary() {
    for f in fixtures().await {
        let limiter = fixed(&f, "3/minute");
        let client = unique_client("fixed");
        f.clock.advance(Duration::from_millis(59_000));
        assert_eq!(admitted(&limiter, &client, 5).await, 3, "{}", f.name);
        let denied = limiter.check(&client).await.unwrap();
        assert_eq!(
            denied.retry_after(),
            Some(Duration::from_secs(1)),
            "{}",
            f.name
        );
        assert_eq!(denied.reset_after(), Duration::from_secs(1));
        assert_eq!(denied.remaining(), 0);
        f.clock.advance(Duration::from_millis(999));
        assert!(
            limiter.check(&client).await.unwrap().is_denied(),
            "{}",
            f.name
        );
        f.clock.advance(Duration::from_millis(1));
        // The boundary forgets everything: the fixed window's known flaw.
        assert_eq!(admitted(&limiter, &client, 5).await, 3, "{}", f.name);
    }
}

#[tokio::test]
async fn does_not_admit_a_second_full_limit_across_the_boundary() {
    for f in fixtures().await {
        let limiter = f.sliding_window("100/minute", 1);
        let client = unique_client("boundary");
        f.clock.advance(Duration::from_millis(59_500));
        assert_eq!(admitted(&limiter, &client, 100).await, 100, "{}", f.name);
        f.clock.advance(Duration::from_millis(1_000));
        // 0.5 s into the next minute the previous one still weighs 99.17.
        assert_eq!(admitted(&limiter, &client, 100).await, 0, "{}", f.name);
    }
}

#[tokio::test]
async fn weights_the_previous_window_by_what_is_still_inside() {
    for f in fixtures().await {
        let limiter = f.sliding_window("100/minute", 1);
        let client = unique_client("weight");
        assert_eq!(admitted(&limiter, &client, 42).await, 42);
        f.clock.advance(Duration::from_secs(75));
        let mut last = None;
        for _ in 0..18 {
            last = Some(limiter.check(&client).await.unwrap());
        }
        // 18 + 42 × 45/60 = 49.5: 50.5 left, so 50 whole requests.
        let last = last.unwrap();
        assert!(last.is_allowed());
        assert_eq!(last.remaining(), 50, "{}", f.name);
        assert!(
            (last.used() - 49.5).abs() < 1e-9,
            "{}: {}",
            f.name,
            last.used()
        );
        assert_eq!(admitted(&limiter, &client, 60).await, 50, "{}", f.name);
        let denied = limiter.check(&client).await.unwrap();
        // 68 now + 42 × (1 − f) ≤ 99 once f ≥ 11/42: 15.71 s into the minute.
        let retry = denied.retry_after().unwrap();
        assert!(
            retry > Duration::from_millis(710) && retry <= Duration::from_millis(715),
            "{}: {retry:?}",
            f.name
        );
        f.clock.advance(retry);
        assert!(
            limiter.check(&client).await.unwrap().is_allowed(),
            "{}",
            f.name
        );
    }
}

#[tokio::test]
async fn sums_sub_windows_and_weights_only_the_oldest() {
    for f in fixtures().await {
        let limiter = f.sliding_window("20/minute", 4);
        let client = unique_client("sub");
        for (count, gap) in [(8, 15), (4, 15), (2, 15), (1, 20)] {
            assert_eq!(admitted(&limiter, &client, count).await, count);
            f.clock.advance(Duration::from_secs(gap));
        }
        // Now 5 s into the fifth 15 s sub-window: 1 + 1 + 2 + 4 + 8 × 2/3.
        let decision = limiter.check(&client).await.unwrap();
        assert!(decision.is_allowed());
        assert_eq!(decision.remaining(), 6, "{}", f.name); // floor(20 − 13.33)
        assert_eq!(limiter.spec().algorithm().sub_windows(), Some(4));
        assert_eq!(limiter.keys_at(&client, f.clock_now()).unwrap().len(), 5);
    }
}

#[tokio::test]
async fn cost_counts_in_units_and_impossible_costs_are_errors() {
    for f in fixtures().await {
        for limiter in [fixed(&f, "10/minute"), f.sliding_window("10/minute", 4)] {
            let client = unique_client("cost");
            let d = limiter.check_n(&client, 6).await.unwrap();
            assert!(d.is_allowed());
            assert_eq!(d.remaining(), 4);
            assert!(
                limiter.check_n(&client, 5).await.unwrap().is_denied(),
                "{}",
                f.name
            );
            assert!(
                limiter.check_n(&client, 4).await.unwrap().is_allowed(),
                "{}",
                f.name
            );
            common::assert_impossible_costs_are_errors(&limiter, &client).await;
        }
    }
}

#[tokio::test]
async fn reset_forgets_the_client_and_only_that_client() {
    for f in fixtures().await {
        for limiter in [
            fixed(&f, "5/minute"),
            f.sliding_window("5/minute", 1),
            f.sliding_window("5/minute", 12),
        ] {
            let (a, b) = (unique_client("reset-a"), unique_client("reset-b"));
            admitted(&limiter, &a, 5).await;
            admitted(&limiter, &b, 5).await;
            f.clock.advance(Duration::from_secs(30));
            admitted(&limiter, &a, 1).await;
            limiter.reset(&a).await.unwrap();
            assert_eq!(admitted(&limiter, &a, 10).await, 5, "{}", f.name);
            assert!(limiter.check(&b).await.unwrap().is_denied(), "{}", f.name);
        }
    }
}

#[tokio::test]
async fn denied_requests_are_refunded_so_retrying_clients_get_through() {
    for f in fixtures().await {
        let limiter = f.sliding_window("10/minute", 1);
        let client = unique_client("refund");
        assert_eq!(admitted(&limiter, &client, 10).await, 10);
        assert_eq!(admitted(&limiter, &client, 50).await, 0);
        // Retrying at 1/s, the client gets a share as the old minute slides out.
        let allowed = admitted_every_second(&f.clock, &limiter, &client, 120).await;
        assert!((10..=20).contains(&allowed), "{}: {allowed}", f.name);
    }
}

#[tokio::test]
async fn strict_mode_keeps_a_retrying_client_denied_until_it_slows_down() {
    for f in fixtures().await {
        let limiter = f
            .builder(SlidingWindow::builder, "10/minute")
            .denied_requests(DeniedRequests::Counted)
            .build()
            .unwrap();
        let client = unique_client("strict");
        assert_eq!(admitted(&limiter, &client, 10).await, 10);
        assert_eq!(
            admitted_every_second(&f.clock, &limiter, &client, 120).await,
            0,
            "{}",
            f.name
        );
        // Silent for two minutes, it is welcome again.
        f.clock.advance(Duration::from_secs(120));
        assert_eq!(admitted(&limiter, &client, 10).await, 10, "{}", f.name);
    }
}

#[tokio::test]
async fn a_decision_is_one_store_call_for_any_number_of_sub_windows() {
    for f in fixtures().await {
        // The moment estimator packs its offsets into the same increment.
        let estimators = [Estimator::Uniform, Estimator::Moment];
        for (n, estimator) in [1, 2, 4, 6, 12, 60]
            .into_iter()
            .flat_map(|n| estimators.map(|estimator| (n, estimator)))
        {
            let counting = Arc::new(CountingStore::new(f.store.clone()));
            let limiter = f
                .builder_on(counting.clone(), SlidingWindow::builder, "3/minute")
                .sub_windows(n)
                .estimator(estimator)
                .build()
                .unwrap();
            let client = unique_client("calls");
            limiter.check(&client).await.unwrap();
            let calls = counting.calls();
            assert_eq!(
                (calls.round_trips(), calls.increments),
                (1, 1),
                "{} n={n} {estimator}",
                f.name
            );
            assert_eq!(calls.keys, u64::from(n) + 1, "{} n={n} {estimator}", f.name);

            admitted(&limiter, &client, 2).await;
            counting.clear();
            assert!(limiter.check(&client).await.unwrap().is_denied());
            let calls = counting.calls();
            // A denial adds the refund; counted denials do not.
            assert_eq!(
                (calls.increments, calls.decrements),
                (1, 1),
                "{} n={n} {estimator}",
                f.name
            );
        }
        let counting = Arc::new(CountingStore::new(f.store.clone()));
        let strict = f
            .builder_on(counting.clone(), FixedWindow::builder, "1/minute")
            .strict(true)
            .build()
            .unwrap();
        let client = unique_client("strict-calls");
        strict.check(&client).await.unwrap();
        assert!(strict.check(&client).await.unwrap().is_denied());
        assert_eq!(counting.calls().round_trips(), 2, "{}", f.name);
    }
}

trait ClockNow {
    fn clock_now(&self) -> chrono::DateTime<chrono::Utc>;
}

impl ClockNow for Fixture {
    fn clock_now(&self) -> chrono::DateTime<chrono::Utc> {
        use memcache_ratelimit::Clock;
        self.clock.now()
    }
}

#[tokio::test]
async fn replayed_events_count_in_the_bucket_of_their_own_timestamp() {
    for f in fixtures().await {
        let limiter = fixed(&f, "3/minute");
        let client = unique_client("replay");
        let past = |secs: i64| chrono::DateTime::from_timestamp(T0 - 3_600 + secs, 0).unwrap();
        for _ in 0..3 {
            assert!(limiter
                .check_at(&client, 1, past(10))
                .await
                .unwrap()
                .is_allowed());
        }
        assert!(
            limiter
                .check_at(&client, 1, past(50))
                .await
                .unwrap()
                .is_denied(),
            "{}",
            f.name
        );
        // Out of order: an earlier minute has its own count.
        assert!(
            limiter
                .check_at(&client, 1, past(-30))
                .await
                .unwrap()
                .is_allowed(),
            "{}",
            f.name
        );
        // The present is untouched by the replay.
        assert_eq!(admitted(&limiter, &client, 5).await, 3, "{}", f.name);
    }
}
