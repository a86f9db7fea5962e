//! The failure policy against real faults on real memcached processes the
//! tests start: a killed server, a restart on the same port, a server hung
//! by SIGSTOP and continued, and one server of three down.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::memcached::Memcached;
use memcache_ratelimit::{
    Decision, Error, FailurePolicy, FailureStats, FixedWindow, Gcra, HybridQuota, MemcachedStore,
    RateLimiter, SlidingLog, SlidingWindow, TokenBucket,
};

const DEADLINE: Duration = Duration::from_millis(100);

/// A store whose own timeout is far beyond the deadline, so the deadline
/// is what ends a wait.
async fn store(addresses: Vec<String>) -> Arc<MemcachedStore> {
    Arc::new(
        MemcachedStore::builder()
            .servers(addresses)
            .io_timeout(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(5))
            .build()
            .await
            .unwrap(),
    )
}

/// A limiter and its failure counters.
struct Limiter {
    name: &'static str,
    limiter: Arc<dyn RateLimiter>,
    stats: Box<dyn Fn() -> FailureStats + Send + Sync>,
}

/// Every algorithm, 4 per minute, under `policy`.
fn every_algorithm(store: &Arc<MemcachedStore>, policy: FailurePolicy) -> Vec<Limiter> {
    macro_rules! limiter {
        ($name:literal, $builder:expr) => {{
            let limiter = Arc::new(
                $builder
                    .deadline(DEADLINE)
                    .on_failure(policy)
                    .namespace(format!("{}-{:?}", $name, policy).replace([' ', '{', '}', ':'], ""))
                    .build()
                    .unwrap(),
            );
            let counted = limiter.clone();
            Limiter {
                name: $name,
                limiter: limiter as Arc<dyn RateLimiter>,
                stats: Box::new(move || counted.failure_stats()),
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
fn assert_policy(policy: FailurePolicy, nth: usize, outcome: &Result<Decision, Error>, what: &str) {
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
async fn decided_by_the_store_within_a_second(limiters: &[Limiter], since: Instant) {
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

const POLICIES: [FailurePolicy; 4] = [
    FailurePolicy::Open,
    FailurePolicy::Closed,
    FailurePolicy::Fallback { share: 0.5 },
    FailurePolicy::ReturnError,
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_server_gets_each_policy_within_the_deadline_and_a_restart_recovers() {
    let mut server = Memcached::start();
    let store = store(vec![server.address()]).await;
    let sets: Vec<(FailurePolicy, Vec<Limiter>)> = POLICIES
        .iter()
        .map(|&policy| (policy, every_algorithm(&store, policy)))
        .collect();
    for (_, limiters) in &sets {
        for l in limiters {
            let decision = l.limiter.check(b"before").await.unwrap();
            assert!(
                decision.is_allowed() && !decision.under_failure(),
                "{}",
                l.name
            );
        }
    }

    server.kill();
    for (policy, limiters) in &sets {
        for l in limiters {
            for nth in 0..3 {
                let started = Instant::now();
                let outcome = l.limiter.check(b"during").await;
                let waited = started.elapsed();
                let what = format!("{} under {policy:?}", l.name);
                assert_policy(*policy, nth, &outcome, &what);
                assert!(
                    waited <= DEADLINE + Duration::from_millis(50),
                    "{what}: {waited:?}"
                );
            }
            let stats = (l.stats)();
            match policy {
                FailurePolicy::ReturnError => assert_eq!((stats.absorbed, stats.returned), (0, 3)),
                FailurePolicy::Fallback { .. } => {
                    assert_eq!((stats.absorbed, stats.fallbacks), (3, 3), "{}", l.name)
                }
                _ => assert_eq!(stats.absorbed, 3, "{}", l.name),
            }
            assert_eq!(stats.absorbed, stats.store_errors + stats.deadlines);
        }
    }

    server.restart();
    let restarted = Instant::now();
    for (_, limiters) in &sets {
        // The first call after the restart may still find a pooled
        // connection to the old process.
        decided_by_the_store_within_a_second(limiters, restarted).await;
    }
    eprintln!(
        "restart: every limiter decided by the store again after {:?}",
        restarted.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_server_gets_the_policy_within_the_deadline_and_recovers_after() {
    let server = Memcached::start();
    let store = store(vec![server.address()]).await;
    let sets: Vec<(FailurePolicy, Vec<Limiter>)> = [FailurePolicy::Open, FailurePolicy::Closed]
        .iter()
        .map(|&policy| (policy, every_algorithm(&store, policy)))
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
            // 8 callers at once, 4 rounds each.
            for _round in 0..4 {
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
            assert_eq!((l.stats)().deadlines, 32, "{}", l.name);
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
        p(0.99) <= DEADLINE + Duration::from_millis(5),
        "p99 {:?}",
        p(0.99)
    );

    server.signal("CONT");
    let continued = Instant::now();
    for (_, limiters) in &sets {
        decided_by_the_store_within_a_second(limiters, continued).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_server_of_three_down_affects_only_the_clients_placed_on_it() {
    let mut servers = [Memcached::start(), Memcached::start(), Memcached::start()];
    let addresses: Vec<String> = servers.iter().map(Memcached::address).collect();
    let fleet = store(addresses.clone()).await;
    let limiter = FixedWindow::builder("100/minute".parse().unwrap(), fleet.clone())
        .deadline(DEADLINE)
        .on_failure(FailurePolicy::Closed)
        .build()
        .unwrap();
    let clients: Vec<String> = (0..60).map(|c| format!("fleet-{c}")).collect();
    let home = |client: &String| {
        let key = &limiter
            .keys_at(client.as_bytes(), limiter.clock().now())
            .unwrap()[0];
        fleet.server_for(key).to_owned()
    };
    for client in &clients {
        assert!(limiter.check(client.as_bytes()).await.unwrap().is_allowed());
    }

    servers[1].kill();
    let down = &addresses[1];
    let (mut affected, mut unaffected) = (0, 0);
    for client in &clients {
        let decision = limiter.check(client.as_bytes()).await.unwrap();
        if home(client) == *down {
            assert!(
                decision.is_denied() && decision.under_failure(),
                "{client}: {decision:?}"
            );
            affected += 1;
        } else {
            assert!(
                decision.is_allowed() && !decision.under_failure(),
                "{client}: {decision:?}"
            );
            unaffected += 1;
        }
    }
    eprintln!("one of three servers down: {affected} clients under the policy, {unaffected} decided as usual");
    assert!(affected > 0 && unaffected > 0);
    assert_eq!(limiter.failure_stats().absorbed, affected);
}
