//! Local combining in the compare-and-swap loop: requests for one key from
//! one limiter never race each other. Overlapping requests are decided as a
//! group, with one read and one write, each getting its own decision in
//! arrival order; a caller that gives up never stalls the others; lost
//! races against other writers are still retried, and still run out.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::cas::{self, CasSettings};
use common::faults::LosingCas;
use common::wrapped::{Hooks, Wrapped};
use common::{fixtures, unique_client, Fixture, T0};
use memcache_ratelimit::algorithm::CasPolicy;
use memcache_ratelimit::store::{CountingStore, Store, StoreCalls};
use memcache_ratelimit::Limiter;
use memcache_ratelimit::{Decision, Error, Gcra, ManualClock, TokenBucket};

/// One of the compare-and-swap limiters, with its statistics.
type Cas = cas::Shared;

/// Every compare-and-swap algorithm on `store`, with a long deadline.
fn every(store: Arc<dyn Store>, clock: &ManualClock, quota: &str, policy: CasPolicy) -> Vec<Cas> {
    let settings = CasSettings {
        policy,
        deadline: Duration::from_secs(10),
        ..CasSettings::on(clock)
    };
    cas::every(store, quota, &settings)
        .into_iter()
        .map(|(name, limiter)| Cas::new(name, limiter))
        .collect()
}

fn all(f: &Fixture, quota: &str) -> Vec<Cas> {
    every(waiting(f), &f.clock, quota, CasPolicy::default())
}

/// The fixture's store, yielding once per read and write as a round trip
/// to memcached would, and without the synchronous path: on MemoryStore a
/// decision would otherwise be made at once, in one atomic step, and
/// there would be nothing to combine.
fn waiting(f: &Fixture) -> Arc<dyn Store> {
    slow(f, Duration::ZERO)
}

/// The fixture's store, answering reads and writes after `pause` (see
/// [`Slow`]).
fn slow(f: &Fixture, pause: Duration) -> Arc<dyn Store> {
    Arc::new(Wrapped::with(f.store.clone(), Slow { pause }))
}

/// Spawns `tasks` tasks that each make `each` decisions for `client` on
/// `limiter`, and returns how many were allowed.
async fn hammer(limiter: &Arc<dyn Limiter>, client: &[u8], tasks: usize, each: usize) -> usize {
    common::admitted_by_tasks((0..tasks).map(|_| (limiter.clone(), each)), client).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_limiter_never_races_itself_on_a_hot_key() {
    for f in fixtures().await {
        // MemoryStore answers without ever waiting, so a request would be
        // decided before any other could join it; a real store awaits the
        // network. Wait a millisecond per call, as a round trip would, so
        // requests overlap (a mere yield leaves them overlapping only by
        // the luck of the scheduler).
        let store: Arc<dyn Store> = match f.real_time() {
            true => f.store.clone(),
            false => slow(&f, Duration::from_millis(1)),
        };
        for cas in every(store.clone(), &f.clock, "50/minute", CasPolicy::default()) {
            let client = unique_client("hot");
            // 64 tasks × 10 decisions, far more than the 50 the quota holds,
            // with the clock standing still.
            let allowed = hammer(&cas.limiter, &client, 64, 10).await;
            let stats = (cas.stats)();
            eprintln!("{} {}: {stats:?}", f.name, cas.name);
            assert_eq!(allowed, 50, "{} {}", f.name, cas.name);
            assert_eq!(stats.decisions, 640, "{} {}", f.name, cas.name);
            assert_eq!(stats.conflicts, 0, "{} {}: raced itself", f.name, cas.name);
            assert_eq!((stats.retries, stats.exhausted), (0, 0));
            assert!(
                stats.combined > 0,
                "{} {}: nothing combined",
                f.name,
                cas.name
            );
            // Fewer reads and writes than decisions: groups shared them.
            assert!(
                stats.attempts < stats.decisions,
                "{} {}: {stats:?}",
                f.name,
                cas.name
            );
        }
    }
}

fn outcome(decision: &Result<Decision, Error>) -> (bool, u64) {
    let decision = decision.as_ref().unwrap();
    (decision.is_allowed(), decision.remaining())
}

#[tokio::test]
async fn each_request_in_a_group_gets_its_own_decision_in_arrival_order() {
    for f in fixtures().await {
        for cas in all(&f, "10/minute") {
            let client = unique_client("mixed");
            let l = &cas.limiter;
            // Polled together, on this one thread: the first finds the key
            // idle and decides alone; the other three queue behind it and
            // form one group, in this order.
            let (seven, four, three, one) = tokio::join!(
                l.check_n(&client, 7),
                l.check_n(&client, 4),
                l.check_n(&client, 3),
                l.check_n(&client, 1),
            );
            let name = format!("{} {}", f.name, cas.name);
            assert_eq!(outcome(&seven), (true, 3), "{name}");
            // 4 does not fit in the 3 left; the smaller 3 after it does.
            assert!(!outcome(&four).0, "{name}: {four:?}");
            assert!(outcome(&three).0, "{name}: {three:?}");
            assert!(!outcome(&one).0, "{name}: {one:?}");
            let stats = (cas.stats)();
            assert_eq!(
                (
                    stats.decisions,
                    stats.attempts + stats.known,
                    stats.combined
                ),
                (4, 2, 3),
                "{name}: one read-decide-write alone, one for the group"
            );
        }
    }
}

#[tokio::test]
async fn each_request_keeps_its_own_time_and_maximum_delay() {
    for f in fixtures().await {
        let bucket = f
            .builder_on(waiting(&f), TokenBucket::builder, "10/minute")
            .build()
            .unwrap();
        let client = unique_client("times");
        let at = |secs: i64| chrono::DateTime::from_timestamp(T0 + secs, 0).unwrap();
        let (all_ten, none_left, six_later, again) = tokio::join!(
            bucket.check_at(&client, 10, at(0)),
            bucket.check_at(&client, 1, at(0)),
            bucket.check_at(&client, 1, at(6)),
            bucket.check_at(&client, 1, at(6)),
        );
        // The third request is 6 s later: one token refilled for it.
        assert_eq!(outcome(&all_ten), (true, 0), "{}", f.name);
        assert!(!outcome(&none_left).0, "{}", f.name);
        assert!(outcome(&six_later).0, "{}", f.name);
        assert!(!outcome(&again).0, "{}", f.name);
        // The first alone, the three behind it as one group.
        assert_eq!(bucket.cas_stats().combined, 3);

        // GCRA's delay mode through one group: each its own maximum delay.
        let gcra = f
            .builder_on(waiting(&f), Gcra::builder, "4/second")
            .burst(1)
            .build()
            .unwrap();
        let client = unique_client("delays");
        let second = Duration::from_secs(1);
        let (now, queued, impatient, later) = tokio::join!(
            gcra.reserve(&client, 1, Duration::ZERO),
            gcra.reserve(&client, 1, second),
            gcra.reserve(&client, 1, Duration::ZERO),
            gcra.reserve(&client, 1, second),
        );
        let slot = |r: Result<memcache_ratelimit::algorithm::Reservation, Error>| {
            let r = r.unwrap();
            r.decision().is_allowed().then_some(r.delay().as_millis())
        };
        assert_eq!(
            [slot(now), slot(queued), slot(impatient), slot(later)],
            [Some(0), Some(250), None, Some(500)],
            "{}",
            f.name
        );
        let stats = gcra.cas_stats();
        assert_eq!(stats.attempts + stats.known, 2);
    }
}

#[tokio::test]
async fn a_group_of_denials_writes_nothing() {
    for f in fixtures().await {
        let store = Arc::new(CountingStore::new(waiting(&f)));
        for cas in every(store.clone(), &f.clock, "2/minute", CasPolicy::default()) {
            let client = unique_client("denials");
            let l = &cas.limiter;
            assert!(l.check_n(&client, 2).await.unwrap().is_allowed());
            let before = store.calls();
            let denied = tokio::join!(
                l.check(&client),
                l.check(&client),
                l.check(&client),
                l.check(&client),
            );
            for d in [denied.0, denied.1, denied.2, denied.3] {
                assert!(d.unwrap().is_denied(), "{} {}", f.name, cas.name);
            }
            // The first alone, then the three queued behind it as one
            // group: a read each (of the state, or of its version alone
            // once it is known), and no write.
            let after = store.calls();
            let reads = |calls: StoreCalls| calls.gets + calls.versions;
            assert_eq!(
                (reads(after) - reads(before), after.puts - before.puts),
                (2, 0),
                "{} {}: two reads, no write",
                f.name,
                cas.name
            );
        }
    }
}

/// Wrapped around a store, answers reads and writes only after a pause, so
/// a group stays in flight long enough for callers to give up during it; a
/// zero pause yields to the scheduler once, as a network round trip would.
#[derive(Debug)]
struct Slow {
    pause: Duration,
}

#[async_trait::async_trait]
impl Hooks for Slow {
    async fn before_get_or_put(&self) {
        if self.pause.is_zero() {
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(self.pause).await;
        }
    }
}

#[tokio::test]
async fn callers_that_give_up_never_stall_the_others() {
    // Every read and write waits PAUSE before it runs, so decisions run on
    // a known timeline. A finds the key idle and decides alone: its read
    // over [0, P), its write meant for [P, 2P). The rest queue behind it.
    // Each caller gives up inside the phase it is meant to miss.
    const PAUSE: Duration = Duration::from_millis(100);
    let ms = |n: u64| Some(Duration::from_millis(n));
    for f in fixtures().await {
        for cas in every(slow(&f, PAUSE), &f.clock, "3/minute", CasPolicy::default()) {
            let name = format!("{} {}", f.name, cas.name);
            let client = Arc::new(unique_client("cancel"));
            let spawn = |patience: Option<Duration>| {
                let (limiter, client) = (cas.limiter.clone(), client.clone());
                tokio::spawn(async move {
                    let check = limiter.check(&client);
                    match patience {
                        Some(patience) => tokio::time::timeout(patience, check).await.ok(),
                        None => Some(check.await),
                    }
                })
            };
            let started = std::time::Instant::now();
            // A gives up at 1.5 P, while its write waits to be sent: the
            // write never goes, so nothing is counted for A, and the
            // requests queued behind it go on at once, on a task.
            let a = spawn(ms(150));
            tokio::time::sleep(Duration::from_millis(5)).await;
            // C gives up while queued (0.5 P), X while its group reads
            // (the group starts when A gives up, so it reads over
            // [1.5 P, 2.5 P); X leaves at 2 P): both are left out before
            // anything is written for them.
            let b = spawn(None);
            let c = spawn(ms(50));
            let x = spawn(ms(200));
            let d = spawn(None);
            let e = spawn(None);
            assert!(a.await.unwrap().is_none(), "{name}: A should time out");
            assert!(c.await.unwrap().is_none(), "{name}: C should time out");
            assert!(x.await.unwrap().is_none(), "{name}: X should time out");
            let (b, d, e) = (
                b.await.unwrap().unwrap(),
                d.await.unwrap().unwrap(),
                e.await.unwrap().unwrap(),
            );
            // A, then one group: about 3.5 P, far from the 10 s deadline a
            // stall would run into.
            let waited = started.elapsed();
            assert!(waited < Duration::from_secs(2), "{name}: waited {waited:?}");
            // A, C and X took nothing: B, D and E take the three.
            assert_eq!(outcome(&b), (true, 2), "{name}");
            assert_eq!(outcome(&d), (true, 1), "{name}");
            assert_eq!(outcome(&e), (true, 0), "{name}");
            let stats = (cas.stats)();
            assert_eq!(stats.decisions, 6, "{name}");
            assert_eq!(stats.combined, 3, "{name}: B, D and E together");
            // The key is free again: a new request is served, and denied.
            let later = cas.limiter.check(&client).await.unwrap();
            assert!(later.is_denied(), "{name}");
        }
    }
}

#[tokio::test]
async fn a_group_still_retries_lost_races_and_runs_out_as_one() {
    for f in fixtures().await {
        let losing = Arc::new(LosingCas::new(waiting(&f)));
        let policy =
            CasPolicy::new(4, Duration::from_micros(10), Duration::from_micros(100)).unwrap();
        for cas in every(losing.clone(), &f.clock, "10/minute", policy) {
            let name = format!("{} {}", f.name, cas.name);
            let client = unique_client("losing");
            let l = &cas.limiter;

            // The first finds the key idle and decides alone: three lost
            // writes, then its fourth attempt lands. The four queued behind
            // it are one group, whose first attempt lands.
            losing.lose_next(3);
            let won = tokio::join!(
                l.check(&client),
                l.check(&client),
                l.check(&client),
                l.check(&client),
                l.check(&client),
            );
            let remaining: Vec<u64> = [won.0, won.1, won.2, won.3, won.4]
                .into_iter()
                .map(|d| {
                    let d = d.unwrap();
                    assert!(d.is_allowed(), "{name}");
                    d.remaining()
                })
                .collect();
            assert_eq!(remaining, [9, 8, 7, 6, 5], "{name}");
            let stats = (cas.stats)();
            assert_eq!(
                (
                    stats.attempts,
                    stats.conflicts,
                    stats.retries,
                    stats.combined
                ),
                (5, 3, 3, 4),
                "{name}"
            );

            // Every attempt lost: the first alone and the two queued behind
            // it as a group each run out, and every member gets Contention.
            losing.lose_next(8);
            let lost = tokio::join!(l.check(&client), l.check(&client), l.check(&client));
            for outcome in [lost.0, lost.1, lost.2] {
                assert!(
                    matches!(outcome, Err(Error::Contention { attempts: 4 })),
                    "{name}: {outcome:?}"
                );
            }
            let stats = (cas.stats)();
            assert_eq!((stats.attempts, stats.exhausted), (13, 3), "{name}");
            // Nothing was taken by the failed group.
            let next = l.check(&client).await.unwrap();
            assert_eq!((next.is_allowed(), next.remaining()), (true, 4), "{name}");
            assert_eq!((cas.stats)().decisions, 9, "{name}");
        }
    }
}
