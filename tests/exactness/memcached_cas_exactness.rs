//! Exactness of the compare-and-swap algorithms under contention on a real
//! memcached, and through twemproxy over the classic protocol: 4
//! independent store clients × 64 tasks hit one client key,
//! and over several refill periods the token bucket, GCRA and the sliding
//! log each admit exactly what the quota allows, never more.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{unique_client, Fleet, T0};
use memcache_ratelimit::algorithm::CasPolicy;
use memcache_ratelimit::store::Store;
use memcache_ratelimit::Limiter;
use memcache_ratelimit::{Error, Gcra, ManualClock, RateLimiter, SlidingLog, TokenBucket};

const CLIENTS: usize = 4;
const TASKS: usize = 64;
/// Decisions per round: far more than any round can admit.
const DECISIONS: usize = 600;

/// Runs DECISIONS decisions for `client` across the tasks and returns how
/// many were allowed. A decision that lost every compare-and-swap race is
/// an error, not a decision: it is asked again.
async fn round(limiters: &[Arc<dyn Limiter>], client: &Arc<Vec<u8>>) -> (usize, usize) {
    let budget = Arc::new(AtomicUsize::new(DECISIONS));
    let mut tasks = Vec::new();
    for t in 0..CLIENTS * TASKS {
        let limiter = limiters[t % CLIENTS].clone();
        let (client, budget) = (client.clone(), budget.clone());
        tasks.push(tokio::spawn(async move {
            let (mut allowed, mut contention) = (0, 0);
            while budget
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok()
            {
                loop {
                    match limiter.check(&client).await {
                        Ok(decision) => {
                            allowed += usize::from(decision.is_allowed());
                            break;
                        }
                        Err(Error::Contention { .. }) => contention += 1,
                        Err(other) => panic!("{other}"),
                    }
                }
            }
            (allowed, contention)
        }));
    }
    let mut totals = (0, 0);
    for task in tasks {
        let (allowed, contention) = task.await.unwrap();
        totals.0 += allowed;
        totals.1 += contention;
    }
    totals
}

/// The rounds for the linear limiters: how far the clock moves before
/// each, and what the quota of 50 a minute (capacity 50) then allows: a
/// full bucket, a full refill (capped), half a period, and 6 s (5 tokens).
const LINEAR_ROUNDS: [(u64, usize); 4] = [(0, 50), (60, 50), (30, 25), (6, 5)];
/// The same for the sliding log: everything at once, again once those have
/// left the window, nothing while the last 50 are inside it, and 50 again
/// once they leave.
const LOG_ROUNDS: [(u64, usize); 4] = [(0, 50), (60, 50), (30, 0), (30, 50)];

async fn check_rounds(
    name: &str,
    clock: &ManualClock,
    limiters: Vec<Arc<dyn Limiter>>,
    conflicts: impl Fn() -> u64,
    rounds: [(u64, usize); 4],
) {
    let client = Arc::new(unique_client(name));
    for (advance, expected) in rounds {
        clock.advance(Duration::from_secs(advance));
        let (allowed, contention) = round(&limiters, &client).await;
        eprintln!("{name}: +{advance}s admitted {allowed} (expected {expected}); {contention} decisions ran out of attempts");
        assert_eq!(allowed, expected, "{name} after +{advance}s");
    }
    // The race was real: writes did lose to other writers.
    eprintln!("{name}: {} compare-and-swap conflicts in all", conflicts());
    assert!(
        conflicts() > 0,
        "{name}: no write ever conflicted; the test raced nothing"
    );
}

fn policy() -> CasPolicy {
    CasPolicy::new(64, Duration::from_micros(100), Duration::from_millis(2)).unwrap()
}

/// Builds one limiter per independent store client with `build` and runs
/// the rounds on them.
async fn exactness<L: Limiter + 'static>(
    name: &str,
    rounds: [(u64, usize); 4],
    build: impl Fn(Arc<dyn Store>, &ManualClock) -> L,
    conflicts: fn(&L) -> u64,
) {
    for fleet in Fleet::both() {
        let clock = ManualClock::from_unix_secs(T0);
        let typed: Vec<Arc<L>> = fleet
            .stores(CLIENTS)
            .await
            .into_iter()
            .map(|store| Arc::new(build(store, &clock)))
            .collect();
        let limiters = typed
            .iter()
            .map(|l| l.clone() as Arc<dyn Limiter>)
            .collect();
        let total = move || typed.iter().map(|l| conflicts(l)).sum();
        let name = format!("{name} on {}", fleet.name());
        check_rounds(&name, &clock, limiters, total, rounds).await;
    }
}

/// The limiters' shared settings: many attempts and a long deadline, so
/// contention shows as conflicts, not as errors.
macro_rules! contended {
    ($ty:ident) => {
        |store: Arc<dyn Store>, clock: &ManualClock| {
            common::patient($ty::builder("50/minute".parse().unwrap(), store))
                .clock(clock.clone())
                .cas_policy(policy())
                .deadline(Duration::from_secs(10))
                .build()
                .unwrap()
        }
    };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_bucket_admits_exactly_the_quota_under_contention() {
    let conflicts = |l: &RateLimiter| l.cas_stats().conflicts;
    exactness(
        "token bucket",
        LINEAR_ROUNDS,
        contended!(TokenBucket),
        conflicts,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gcra_admits_exactly_the_quota_under_contention() {
    let conflicts = |l: &RateLimiter| l.cas_stats().conflicts;
    exactness("gcra", LINEAR_ROUNDS, contended!(Gcra), conflicts).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sliding_log_admits_exactly_the_quota_under_contention() {
    let conflicts = |l: &RateLimiter| l.cas_stats().conflicts;
    exactness("sliding log", LOG_ROUNDS, contended!(SlidingLog), conflicts).await;
}
