//! Many clients racing on one counter in a real memcached, and through
//! twemproxy over the classic protocol: 4 independent
//! store clients (each with its own connection pool) × 64 tasks send 1,000
//! requests for one client id.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{unique_client, Fleet, T0};
use memcache_ratelimit::store::Store;
use memcache_ratelimit::Limiter;
use memcache_ratelimit::{FixedWindow, ManualClock, SlidingWindow};

const CLIENTS: usize = 4;
const TASKS: usize = 64;
const REQUESTS: usize = 1_000;

/// Sends REQUESTS checks for `client` through CLIENTS × TASKS tasks, each
/// store client with its own limiter, and returns how many were allowed.
async fn race(limiters: Vec<Arc<dyn Limiter>>, client: Vec<u8>) -> usize {
    let client = Arc::new(client);
    let mut tasks = Vec::new();
    for t in 0..CLIENTS * TASKS {
        let limiter = limiters[t % CLIENTS].clone();
        let client = client.clone();
        // Spread the 1,000 requests over the 256 tasks.
        let share = REQUESTS / (CLIENTS * TASKS) + usize::from(t < REQUESTS % (CLIENTS * TASKS));
        tasks.push(tokio::spawn(async move {
            let mut allowed = 0;
            for _ in 0..share {
                if limiter.check(&client).await.expect("decision").is_allowed() {
                    allowed += 1;
                }
            }
            allowed
        }));
    }
    let mut allowed = 0;
    for task in tasks {
        allowed += task.await.unwrap();
    }
    allowed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_window_admits_exactly_the_limit() {
    for fleet in Fleet::both() {
        // 30 s into a minute: the window does not roll over during the race.
        let clock = ManualClock::from_unix_secs(T0 + 30);
        let limiters = fleet
            .stores(CLIENTS)
            .await
            .into_iter()
            .map(|store| {
                Arc::new(
                    common::patient(FixedWindow::builder("100/minute".parse().unwrap(), store))
                        .clock(clock.clone())
                        .deadline(Duration::from_secs(5))
                        .build()
                        .unwrap(),
                ) as Arc<dyn Limiter>
            })
            .collect();
        assert_eq!(
            race(limiters, unique_client("race-fixed")).await,
            100,
            "{}",
            fleet.name()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_window_admits_the_limit_less_the_weighted_history() {
    for fleet in Fleet::both() {
        let clock = ManualClock::from_unix_secs(T0);
        let stores = fleet.stores(CLIENTS).await;
        let build = |n: u32, store: Arc<dyn Store>| {
            Arc::new(
                common::patient(SlidingWindow::builder("100/minute".parse().unwrap(), store))
                    .sub_windows(n)
                    .clock(clock.clone())
                    .deadline(Duration::from_secs(5))
                    .build()
                    .unwrap(),
            ) as Arc<dyn Limiter>
        };
        for n in [1, 4, 12] {
            let client = unique_client("race-sliding");
            // 40 admitted at the start of the previous minute...
            clock.set(chrono::DateTime::from_timestamp(T0, 0).unwrap());
            let warm = build(n, stores[0].clone());
            for _ in 0..40 {
                assert!(warm.check(&client).await.unwrap().is_allowed());
            }
            // ...then the race, 62 s after them. The 40 sit in the oldest
            // sub-window, weighted by its share still inside the minute, so
            // exactly floor(100 − 40 × weight) fit, whatever the interleaving:
            // n = 1: weight 58/60, 38.67, 61 fit; n = 4: weight 13/15, 34.67,
            // 65 fit; n = 12: weight 3/5, 24, 76 fit.
            clock.set(chrono::DateTime::from_timestamp(T0 + 62, 0).unwrap());
            let limiters = stores.iter().map(|store| build(n, store.clone())).collect();
            let allowed = race(limiters, client).await;
            let expected = match n {
                1 => 61,
                4 => 65,
                _ => 76,
            };
            assert_eq!(allowed, expected, "{} n = {n}", fleet.name());
        }
    }
}
