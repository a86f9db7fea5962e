//! A counter written over with something that is not a count, or evicted,
//! on both stores: no panic, the counter is made again, and an overwrite is
//! reported.

use crate::common;

use std::time::Duration;

use common::{fixtures, unique_client, Fixture};
use memcache_ratelimit::store::PutCondition;
use memcache_ratelimit::{Clock, Decision, FixedWindow, Gcra, SlidingWindow};

const MINUTE: Duration = Duration::from_secs(60);

/// Writes `value` over whatever the fixture's store holds at `key`.
async fn write_over(f: &Fixture, key: &[u8], value: &[u8]) {
    f.store
        .put(key, value, MINUTE, PutCondition::Always)
        .await
        .unwrap();
}

/// `decision`, of 10 a minute, was made on a counter or state made again:
/// allowed by the store, not by the failure policy, with 9 left.
fn assert_made_again(decision: &Decision, f: &Fixture, why: &str) {
    assert!(
        decision.is_allowed() && !decision.under_failure(),
        "{}: {decision:?}",
        f.name
    );
    assert_eq!(decision.remaining(), 9, "{}: {why}", f.name);
}

#[tokio::test]
async fn a_window_counter_written_over_is_reset_and_reported() {
    for f in fixtures().await {
        let fixed = f.limiter(FixedWindow::builder, "10/minute");
        let client = unique_client("garbage");
        for _ in 0..3 {
            assert!(fixed.check(&client).await.unwrap().is_allowed());
        }
        let key = fixed.keys_at(&client, f.clock.now()).unwrap().remove(0);
        for garbage in [&b"not a number"[..], b"-1", b"18446744073709551616"] {
            write_over(&f, &key, garbage).await;
            let decision = fixed.check(&client).await.unwrap();
            assert_made_again(&decision, &f, "counted from zero again");
            assert_eq!(
                f.store
                    .get_counters(std::slice::from_ref(&key))
                    .await
                    .unwrap(),
                [Some(1)],
                "{}",
                f.name
            );
        }
        let stats = fixed.stats().failures;
        assert_eq!((stats.repaired, stats.absorbed), (3, 0), "{}", f.name);
    }
}

#[tokio::test]
async fn an_older_bucket_written_over_is_reset_and_the_increment_counted_once() {
    for f in fixtures().await {
        let sliding = f
            .builder(SlidingWindow::builder, "10/minute")
            .sub_windows(4)
            .sealed_cache(0)
            .build()
            .unwrap();
        let client = unique_client("older");
        for _ in 0..4 {
            assert!(sliding.check(&client).await.unwrap().is_allowed());
        }
        // Into the next sub-window: the 4 are in the bucket before.
        f.clock.advance(Duration::from_secs(15));
        let keys = sliding.keys_at(&client, f.clock.now()).unwrap();
        write_over(&f, &keys[1], b"x").await;
        // The increment lands before the read of the older bucket fails:
        // after the reset it is read again, not made again.
        let decision = sliding.check(&client).await.unwrap();
        assert_made_again(&decision, &f, "the old 4 are gone");
        let counts = f.store.get_counters(&keys[..2]).await.unwrap();
        assert_eq!(counts, [Some(1), Some(0)], "{}", f.name);
        assert_eq!(sliding.stats().failures.repaired, 1, "{}", f.name);
    }
}

#[tokio::test]
async fn evicted_counters_and_states_are_made_again() {
    for f in fixtures().await {
        let fixed = f.limiter(FixedWindow::builder, "10/minute");
        let gcra = f.limiter(Gcra::builder, "10/minute");
        let client = unique_client("evicted");
        for _ in 0..5 {
            assert!(fixed.check(&client).await.unwrap().is_allowed());
            assert!(gcra.check(&client).await.unwrap().is_allowed());
        }
        let mut keys = fixed.keys_at(&client, f.clock.now()).unwrap();
        keys.push(common::state_key(&gcra, &client));
        assert_eq!(f.store.delete(&keys).await.unwrap(), 2, "{}", f.name);
        // An eviction looks like a client never seen: the whole quota again,
        // the one extra window the README promises at most.
        for limiter in [&fixed, &gcra] {
            let remaining = limiter.check(&client).await.unwrap().remaining();
            assert_eq!(remaining, 9, "{}", f.name);
        }
        assert_eq!(f.store.get_counters(&keys[..1]).await.unwrap(), [Some(1)]);
    }
}

#[tokio::test]
async fn a_compare_and_swap_state_written_over_is_replaced_and_reported() {
    for f in fixtures().await {
        let gcra = f.limiter(Gcra::builder, "10/minute");
        let client = unique_client("state");
        assert!(gcra.check(&client).await.unwrap().is_allowed());
        write_over(&f, &common::state_key(&gcra, &client), b"\xff garbage").await;
        let decision = gcra.check(&client).await.unwrap();
        assert_made_again(&decision, &f, "a fresh state");
        assert_eq!(gcra.cas_stats().replaced, 1, "{}", f.name);
    }
}
