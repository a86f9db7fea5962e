//! One `Gcra` or `TokenBucket` limiter with 64 requests in flight on one
//! hot key, on a real memcached and the real clock, as the
//! `cas-contention` benchmark runs it from one process:
//!
//! - on the allowed path (every decision writes), the limiter never races
//!   itself: no compare-and-swap conflict, no retry, no `Contention`;
//! - with a finite quota, it never admits more than a full bucket plus the
//!   refill over the elapsed time, and not much less either;
//! - two limiters on the same key (two processes, as far as memcached can
//!   tell) do conflict, so the zero above is a measurement, not a counter
//!   that never moves.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::cas::{self, CasSettings};
use common::memcached::{patient_store, Memcached};
use common::unique_client;
use memcache_ratelimit::algorithm::CasPolicy;
use memcache_ratelimit::Limiter;
use memcache_ratelimit::{Error, Gcra, MemcachedStore, Quota, TokenBucket};

const IN_FLIGHT: usize = 64;

/// One limiter under test, with its statistics.
type Cas = cas::Shared;

/// A `Gcra` and a `TokenBucket` enforcing `quota` on `store`, with the
/// system clock and a long deadline.
fn both(quota: &str, store: &Arc<MemcachedStore>) -> Vec<Cas> {
    let quota: Quota = quota.parse().unwrap();
    let settings = CasSettings {
        clock: None,
        strict: false,
        policy: CasPolicy::new(100, Duration::from_micros(50), Duration::from_millis(5)).unwrap(),
        deadline: Duration::from_secs(10),
    };
    vec![
        Cas::new("gcra", settings.build(Gcra::builder(quota, store.clone()))),
        Cas::new(
            "token bucket",
            settings.build(TokenBucket::builder(quota, store.clone())),
        ),
    ]
}

async fn store(server: &Memcached) -> Arc<MemcachedStore> {
    patient_store(vec![server.address()]).await
}

/// What the closed-loop tasks got.
#[derive(Default, Debug)]
struct Tally {
    allowed: u64,
    denied: u64,
    contention: u64,
}

/// `IN_FLIGHT` tasks on `limiter`, each sending its next request for
/// `client` as soon as the previous one is answered, until `each` requests
/// or `until` (whichever comes first).
async fn closed_loop(
    limiter: &Arc<dyn Limiter>,
    client: &[u8],
    each: usize,
    until: Instant,
) -> Tally {
    let handles: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let (limiter, client) = (limiter.clone(), client.to_vec());
            tokio::spawn(async move {
                let mut tally = Tally::default();
                for _ in 0..each {
                    if Instant::now() >= until {
                        break;
                    }
                    match limiter.check(&client).await {
                        Ok(decision) if decision.is_allowed() => tally.allowed += 1,
                        Ok(_) => tally.denied += 1,
                        Err(Error::Contention { .. }) => tally.contention += 1,
                        Err(other) => panic!("{other}"),
                    }
                }
                tally
            })
        })
        .collect();
    let mut total = Tally::default();
    for handle in handles {
        let tally = handle.await.unwrap();
        total.allowed += tally.allowed;
        total.denied += tally.denied;
        total.contention += tally.contention;
    }
    total
}

/// Every decision allowed, so every group reads and writes: one limiter
/// still never loses a compare-and-swap to itself.
async fn never_conflicts_on_the_allowed_path() {
    const EACH: usize = 100;
    let server = Memcached::start();
    let store = store(&server).await;
    for cas in both("1000000000/minute", &store) {
        let client = unique_client("hot");
        let far = Instant::now() + Duration::from_secs(600);
        let tally = closed_loop(&cas.limiter, &client, EACH, far).await;
        let stats = (cas.stats)();
        eprintln!("{}: {tally:?} {stats:?}", cas.name);
        let decisions = (IN_FLIGHT * EACH) as u64;
        assert_eq!(
            (tally.allowed, tally.denied, tally.contention),
            (decisions, 0, 0),
            "{}",
            cas.name
        );
        assert_eq!(stats.decisions, decisions, "{}", cas.name);
        assert_eq!(stats.conflicts, 0, "{}: raced itself: {stats:?}", cas.name);
        assert_eq!((stats.retries, stats.exhausted), (0, 0), "{}", cas.name);
        // The requests did overlap, and shared reads and writes.
        assert!(stats.combined > 0, "{}: {stats:?}", cas.name);
        assert!(stats.attempts < stats.decisions, "{}: {stats:?}", cas.name);
    }
}

#[tokio::test]
async fn one_limiter_at_64_in_flight_never_conflicts_current_thread() {
    never_conflicts_on_the_allowed_path().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_limiter_at_64_in_flight_never_conflicts_multi_thread() {
    never_conflicts_on_the_allowed_path().await;
}

/// Wall-clock seconds since the unix epoch, the clock the limiters read.
fn unix_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[tokio::test]
async fn one_limiter_at_64_in_flight_never_admits_past_the_bound() {
    const QUOTA: &str = "100/second";
    const RUN: Duration = Duration::from_millis(1_500);
    let (capacity, rate) = (100.0, 100.0);
    let server = Memcached::start();
    let store = store(&server).await;
    for cas in both(QUOTA, &store) {
        let client = unique_client("quota");
        let start = unix_seconds();
        let tally = closed_loop(&cas.limiter, &client, usize::MAX, Instant::now() + RUN).await;
        let elapsed = unix_seconds() - start;
        let stats = (cas.stats)();
        // Every decision was made at a time within [start, start + elapsed]
        // on a bucket that started full.
        let bound = capacity + rate * elapsed;
        eprintln!(
            "{}: admitted {} of bound {bound:.1} in {elapsed:.3} s; {tally:?} {stats:?}",
            cas.name, tally.allowed
        );
        assert!(
            tally.allowed as f64 <= bound.floor(),
            "{}: admitted {} past the bound {bound:.1}",
            cas.name,
            tally.allowed
        );
        // Exact, not merely cautious: the tasks ask far more often than the
        // rate, so the refill is taken as it comes, up to the last moments
        // (a second of slack for a stalled machine near the end).
        assert!(
            tally.allowed as f64 >= bound - rate,
            "{}: admitted only {} of the bound {bound:.1}",
            cas.name,
            tally.allowed
        );
        assert!(tally.denied > tally.allowed, "{}: {tally:?}", cas.name);
        assert_eq!(tally.contention, 0, "{}", cas.name);
        assert_eq!(stats.conflicts, 0, "{}: raced itself: {stats:?}", cas.name);
    }
}

/// The control: two limiters on one key, one request each at a time, read
/// before either writes, so one of the two writes loses. The conflict
/// counter does count conflicts.
#[tokio::test]
async fn two_limiters_on_one_key_do_conflict() {
    let server = Memcached::start();
    let (first, second) = (store(&server).await, store(&server).await);
    let quota = "1000000000/minute";
    let (a, b) = (both(quota, &first), both(quota, &second));
    for (a, b) in a.iter().zip(&b) {
        let client = unique_client("pair");
        for _ in 0..20 {
            let (x, y) = tokio::join!(a.limiter.check(&client), b.limiter.check(&client));
            assert!(x.unwrap().is_allowed() && y.unwrap().is_allowed());
        }
        let conflicts = (a.stats)().conflicts + (b.stats)().conflicts;
        eprintln!("{}: {conflicts} conflicts in 20 pairs", a.name);
        assert!(conflicts > 0, "{}: two limiters never conflicted", a.name);
    }
}
