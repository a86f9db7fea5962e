//! Decisions keep to their deadline while memcached is hung (SIGSTOP):
//! the failure policy answers at p99 within the deadline plus a margin, and
//! the store decides again once memcached continues. Alone in its test
//! binary, so no other test competes for the two cores while it measures.
//! The margin (25 ms) is what a shared 2-core machine can add to a timer;
//! what the test tells apart is the deadline (50 ms) from the client's own
//! I/O timeout (5 s), which a decision would wait out without it. The
//! measured figures are printed (`-- --nocapture`).

use crate::common;

use std::time::{Duration, Instant};

use common::memcached::{patient_store, Memcached};
use common::policies::{
    assert_policy, decided_by_the_store_within_a_second, every_algorithm, Limiter,
};
use memcache_ratelimit::FailurePolicy;

/// Short, so that many decisions are measured in a few seconds: the bound
/// is the deadline plus 5 ms, whatever the deadline.
const DEADLINE: Duration = Duration::from_millis(50);
/// Rounds of 8 concurrent decisions per limiter: 12 limiters make 960
/// decisions, so one slow moment of the machine (which delays a whole
/// round) cannot alone decide the 99th percentile.
const ROUNDS: u64 = 10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_server_gets_the_policy_within_the_deadline_and_recovers_after() {
    let server = Memcached::start();
    let store = patient_store(vec![server.address()]).await;
    let sets: Vec<(FailurePolicy, Vec<Limiter>)> = [FailurePolicy::Open, FailurePolicy::Closed]
        .iter()
        .map(|&policy| (policy, every_algorithm(&store, policy, DEADLINE)))
        .collect();
    for (_, limiters) in &sets {
        for l in limiters {
            assert!(l.limiter.check(b"warm").await.unwrap().is_allowed());
        }
    }

    server.signal("STOP");
    let mut latencies = Vec::new();
    for (policy, limiters) in &sets {
        for l in limiters {
            // 8 callers at once, 10 rounds each.
            for _round in 0..ROUNDS {
                let calls: Vec<_> = (0..8)
                    .map(|i| {
                        let limiter = l.limiter.clone();
                        tokio::spawn(async move {
                            let client = format!("hung-{i}");
                            let started = Instant::now();
                            let outcome = limiter.check(client.as_bytes()).await;
                            (outcome, started.elapsed())
                        })
                    })
                    .collect();
                for call in calls {
                    let (outcome, waited) = call.await.unwrap();
                    assert_policy(
                        *policy,
                        0,
                        &outcome,
                        &format!("{} under {policy:?}", l.name),
                    );
                    latencies.push(waited);
                }
            }
            assert_eq!((l.stats)().deadlines, 8 * ROUNDS, "{}", l.name);
        }
    }
    latencies.sort();
    let p =
        |q: f64| latencies[((latencies.len() as f64 * q).ceil() as usize).min(latencies.len()) - 1];
    eprintln!(
        "hung memcached, deadline {DEADLINE:?}: {} decisions, p50 {:?}, p99 {:?}, max {:?}",
        latencies.len(),
        p(0.50),
        p(0.99),
        latencies.last().unwrap()
    );
    assert!(
        p(0.99) <= DEADLINE + Duration::from_millis(25),
        "p99 {:?}",
        p(0.99)
    );

    server.signal("CONT");
    let continued = Instant::now();
    for (_, limiters) in &sets {
        decided_by_the_store_within_a_second(limiters, continued).await;
    }
}
