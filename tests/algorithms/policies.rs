//! Several policies on one request, all or nothing: a request denied by
//! one policy spends nothing in the others, on every store, for every
//! algorithm, whichever order the policies decide in.

use crate::common;

use std::sync::Arc;

use common::{fixtures, unique_client, Fixture};
use memcache_ratelimit::{
    Algorithm, Error, FixedWindow, Limiter, LimiterSpec, Policies, Policy, RateLimiter,
};

/// A per-address burst limit of 3 a second.
fn burst(fixture: &Fixture) -> RateLimiter {
    fixture
        .builder(FixedWindow::builder, "3/second")
        .namespace("burst")
        .build()
        .unwrap()
}

/// A per-user quota of 20 a month, run by `algorithm`.
fn monthly(fixture: &Fixture, algorithm: Algorithm) -> Arc<RateLimiter> {
    let spec = LimiterSpec::new(algorithm, "20/30d".parse().unwrap())
        .clock(fixture.clock.clone())
        .namespace("month");
    Arc::new(spec.build(fixture.store.clone()).unwrap())
}

/// How many units `limiter` has left for `user`, found by taking them one
/// at a time until one is denied (the limiter is used up after). One at a
/// time, so that a denial takes nothing left to count: an always-strict
/// algorithm (`Sessionize`) drains the bucket on a denial of a larger cost.
async fn units_left(limiter: &RateLimiter, user: &[u8]) -> u64 {
    let mut taken = 0;
    while taken <= limiter.quota().limit() && limiter.check(user).await.unwrap().is_allowed() {
        taken += 1;
    }
    taken
}

#[tokio::test]
async fn requests_denied_by_the_burst_limit_do_not_spend_the_monthly_quota() {
    for fixture in fixtures().await {
        for algorithm in Algorithm::ALL {
            for burst_first in [true, false] {
                let case = format!("{} {algorithm} burst first: {burst_first}", fixture.name);
                let (address, user) = (unique_client("ip"), unique_client("user"));
                let month = monthly(&fixture, algorithm);
                let (policies, keys): (Vec<Policy>, [&[u8]; 2]) = if burst_first {
                    let policies = vec![
                        Policy::new("per-ip-burst", burst(&fixture)),
                        Policy::new("per-user-month", month.clone()),
                    ];
                    (policies, [&address, &user])
                } else {
                    let policies = vec![
                        Policy::new("per-user-month", month.clone()),
                        Policy::new("per-ip-burst", burst(&fixture)),
                    ];
                    (policies, [&user, &address])
                };
                let policies = Policies::all(policies).unwrap();
                let mut allowed = 0;
                for _ in 0..10 {
                    let decided = policies.check(&keys).await.unwrap();
                    if decided.is_allowed() {
                        allowed += 1;
                        assert_eq!(decided.decisions().count(), 2, "{case}");
                    } else {
                        assert_eq!(decided.denied_by(), Some("per-ip-burst"), "{case}");
                        assert!(decided.retry_after().is_some(), "{case}");
                    }
                }
                assert_eq!(allowed, 3, "{case}");
                // Three admitted requests spent three units of twenty; the
                // seven denied ones spent none.
                assert_eq!(units_left(&month, &user).await, 17, "{case}");
            }
        }
    }
}

#[tokio::test]
async fn a_denial_reports_the_units_given_back() {
    let fixture = common::memory();
    let month = monthly(&fixture, Algorithm::FixedWindow);
    let tight = fixture
        .builder(FixedWindow::builder, "1/minute")
        .namespace("tight")
        .build()
        .unwrap();
    let policies = Policies::all([
        Policy::new("per-user-month", month),
        Policy::new("tight", tight),
    ])
    .unwrap();
    let keys: [&[u8]; 2] = [b"alice", b"alice"];
    let first = policies.check(&keys).await.unwrap();
    assert!(first.is_allowed());
    assert_eq!(first.decision().remaining(), 0, "the tight policy binds");
    let second = policies.check(&keys).await.unwrap();
    assert_eq!(second.denied_by(), Some("tight"));
    let (policy, month_decision) = second.decisions().next().unwrap();
    assert_eq!(policy.name(), "per-user-month");
    assert!(month_decision.is_allowed());
    assert_eq!(
        month_decision.remaining(),
        19,
        "one unit spent, the refunded one back"
    );
}

#[cfg(feature = "memcached")]
#[tokio::test]
async fn a_store_failure_in_one_policy_gives_back_what_the_others_took() {
    use memcache_ratelimit::FailurePolicy;
    let fixture = common::memcached().await;
    let month = monthly(&fixture, Algorithm::SlidingWindow { sub_windows: 4 });
    let broken = FixedWindow::builder("3/second".parse().unwrap(), common::refusing_store().await)
        .on_failure(FailurePolicy::ReturnError)
        .build()
        .unwrap();
    let policies = Policies::all([
        Policy::new("per-user-month", month.clone()),
        Policy::new("broken", broken),
    ])
    .unwrap();
    let user = unique_client("user");
    for _ in 0..5 {
        let outcome = policies.check(&[&user, &user]).await;
        assert!(matches!(outcome, Err(Error::Store(_))), "{outcome:?}");
    }
    assert_eq!(units_left(&month, &user).await, 20);
}

#[tokio::test]
async fn policies_are_checked_when_built_and_keys_when_used() {
    let fixture = common::memory();
    let limiter = || burst(&fixture);
    assert_eq!(Policies::all(Vec::new()).unwrap_err().field(), "policies");
    assert_eq!(
        Policies::all([Policy::new("a", limiter()), Policy::new("a", limiter())])
            .unwrap_err()
            .field(),
        "policies"
    );
    let policies =
        Policies::all([Policy::new("a", limiter()), Policy::new("b", limiter())]).unwrap();
    let outcome = policies.check(&[b"alice"]).await;
    assert!(matches!(outcome, Err(Error::Config(_))), "{outcome:?}");
    assert_eq!(policies.policies()[1].limiter().quota(), limiter().quota());
}

/// Policies on in-process stores decide within the call. A policy whose
/// store must be waited for, after one that decided at once, has that one
/// give the request back: it counts once, on the waiting path, and from
/// then on the policies go that way at once.
#[tokio::test]
async fn policies_decide_at_once_in_process_and_give_back_when_one_must_wait() {
    use memcache_ratelimit::store::CountingStore;
    use memcache_ratelimit::{ManualClock, MemoryStore};

    let clock = ManualClock::from_unix_secs(common::T0);
    let in_process = || {
        FixedWindow::builder(
            "5/minute".parse().unwrap(),
            Arc::new(MemoryStore::with_clock(clock.clone())),
        )
        .clock(clock.clone())
        .build()
        .unwrap()
    };
    let burst = Arc::new(in_process());
    let at_once = Policies::all([Policy::new("burst", burst.clone())]).unwrap();
    let decided = at_once
        .check_now(&[b"alice"], 2)
        .expect("decided at once")
        .unwrap();
    assert!(decided.is_allowed());
    assert_eq!(decided.decision().remaining(), 3);

    // The second policy's store is in process too, but behind a decorator
    // that must see every call, so it is waited for.
    let waiting = Arc::new(CountingStore::new(MemoryStore::with_clock(clock.clone())));
    let monthly = FixedWindow::builder("100/30d".parse().unwrap(), waiting.clone())
        .namespace("month")
        .clock(clock.clone())
        .build()
        .unwrap();
    let mixed = Policies::all([
        Policy::new("burst", burst.clone()),
        Policy::new("month", monthly),
    ])
    .unwrap();
    let keys: [&[u8]; 2] = [b"bob", b"bob"];
    assert!(mixed.check_now(&keys, 1).is_none());
    assert_eq!(
        waiting.calls().increments,
        0,
        "the waiting policy was not asked"
    );
    // Bob's burst unit was given back: the waiting path counts him once.
    let decided = mixed.check_n(&keys, 1).await.unwrap();
    assert_eq!(
        decided
            .decisions()
            .map(|(_, d)| d.remaining())
            .collect::<Vec<_>>(),
        [4, 99]
    );
    // From now on these policies take the waiting path at once, asking
    // nothing.
    let allowed_before = burst.stats().allowed;
    assert!(mixed.check_now(&keys, 1).is_none());
    assert_eq!(burst.stats().allowed, allowed_before);
    // Each policy set keeps its own path.
    assert!(at_once.check_now(&[b"alice"], 1).is_some());
}
