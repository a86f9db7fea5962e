//! The sliding window with a moment estimator, on every store: the packed
//! counter (count and offset sum in one increment) under its own key
//! suffix, refunds that take the offset back with the count, and the
//! decisions the offsets make right. Its single store call per decision is
//! in `window_behaviour`, beside the uniform rule's.

use crate::common;

use std::time::Duration;

use common::{admitted, fixtures, unique_client, Fixture};
use memcache_ratelimit::algorithm::{Estimator, MAX_MOMENT_COUNT};
use memcache_ratelimit::store::PutCondition;
use memcache_ratelimit::{Clock, RateLimiter, SlidingWindow};

fn moment(f: &Fixture, quota: &str, n: u32) -> RateLimiter {
    f.builder(SlidingWindow::builder, quota)
        .sub_windows(n)
        .estimator(Estimator::Moment)
        .build()
        .unwrap()
}

/// The count and offset sum stored for `client`'s current sub-window.
async fn stored(f: &Fixture, limiter: &RateLimiter, client: &[u8]) -> (u64, u64) {
    let keys = limiter.keys_at(client, f.clock.now()).unwrap();
    let value = f.store.get_counters(&keys[..1]).await.unwrap()[0].unwrap_or(0);
    (value >> 37, value & ((1 << 37) - 1))
}

/// A 100/minute moment window of one sub-window, with `client`'s current
/// counter written over with `value` (another writer, or an attack).
async fn written_over(f: &Fixture, client: &[u8], value: u64) -> RateLimiter {
    let limiter = moment(f, "100/minute", 1);
    if f.real_time() {
        f.clock.set(chrono::Utc::now());
    }
    let key = limiter.keys_at(client, f.clock.now()).unwrap().remove(0);
    f.store
        .put(
            &key,
            value.to_string().as_bytes(),
            Duration::from_secs(120),
            PutCondition::Always,
        )
        .await
        .unwrap();
    limiter
}

#[tokio::test]
async fn the_counter_packs_the_offsets_under_its_own_suffix() {
    for f in fixtures().await {
        let limiter = moment(&f, "10/minute", 4);
        let client = unique_client("packed");
        let keys = limiter.keys_at(&client, f.clock.now()).unwrap();
        assert!(
            keys.iter().all(|key| key.ends_with(b"-15s-mom")),
            "{}: {:?}",
            f.name,
            String::from_utf8_lossy(&keys[0])
        );
        // 7.5 s into a 15 s sub-window: cell 512 of 1024.
        f.clock.advance(Duration::from_millis(7_500));
        assert_eq!(admitted(&limiter, &client, 3).await, 3);
        assert_eq!(
            stored(&f, &limiter, &client).await,
            (3, 3 * 512),
            "{}",
            f.name
        );
        // A denied request is refunded, offset and all.
        assert_eq!(admitted(&limiter, &client, 20).await, 7);
        assert_eq!(
            stored(&f, &limiter, &client).await,
            (10, 10 * 512),
            "{}",
            f.name
        );
        // The uniform rule's counters are other keys.
        let uniform = f.sliding_window("10/minute", 4);
        assert_eq!(admitted(&uniform, &client, 10).await, 10, "{}", f.name);
    }
}

/// Requests at the start of a minute have slid out half a second into the
/// next, and requests at its end are still inside: the offsets tell the
/// two apart where the uniform rule cannot.
#[tokio::test]
async fn the_offsets_tell_early_requests_from_late_ones() {
    for f in fixtures().await {
        let early = moment(&f, "10/minute", 1);
        let early_uniform = f.sliding_window("10/minute", 1);
        let (a, b) = (unique_client("early"), unique_client("early-uniform"));
        f.clock.advance(Duration::from_millis(100));
        assert_eq!(admitted(&early, &a, 10).await, 10);
        assert_eq!(admitted(&early_uniform, &b, 10).await, 10);
        f.clock.advance(Duration::from_millis(60_400));
        // The power density's tail still puts 0.03 of a request inside.
        assert_eq!(admitted(&early, &a, 10).await, 9, "{}", f.name);
        assert_eq!(admitted(&early_uniform, &b, 10).await, 0, "{}", f.name);

        let late = moment(&f, "10/minute", 1);
        let c = unique_client("late");
        f.clock.advance(Duration::from_millis(59_000 - 500));
        assert_eq!(admitted(&late, &c, 10).await, 10);
        f.clock.advance(Duration::from_secs(2));
        let denied = late.check(&c).await.unwrap();
        assert!(denied.is_denied(), "{}", f.name);
        let retry = denied.retry_after().unwrap();
        assert!(
            (Duration::from_secs(56)..=Duration::from_secs(58)).contains(&retry),
            "{}: {retry:?}",
            f.name
        );
    }
}

#[tokio::test]
async fn a_limit_beyond_the_packed_count_counts_plainly() {
    for f in fixtures().await {
        let quota = format!("{}/minute", MAX_MOMENT_COUNT + 1);
        let limiter = f
            .builder(SlidingWindow::builder, quota.as_str())
            .estimator(Estimator::Moment)
            .build()
            .unwrap();
        let client = unique_client("plain");
        let keys = limiter.keys_at(&client, f.clock.now()).unwrap();
        assert!(!keys[0].ends_with(b"-mom"), "{}", f.name);
        limiter.check_n(&client, 5).await.unwrap();
        assert_eq!(
            f.store.get_counters(&keys[..1]).await.unwrap()[0],
            Some(5),
            "{}",
            f.name
        );
    }
}

/// A packed counter one request short of wrapping (another writer, or
/// 2^27 requests in one sub-window): the increment that wraps it is seen,
/// denied, reported, and the counter set to a full window, offsets in
/// the middle.
#[tokio::test]
async fn a_wrapped_packed_counter_is_read_as_a_full_window_and_repaired() {
    for f in fixtures().await {
        let client = unique_client("moment-wrapped");
        let limiter = written_over(&f, &client, u64::MAX - 1).await;
        let key = limiter.keys_at(&client, f.clock.now()).unwrap().remove(0);
        let decision = limiter.check(&client).await.unwrap();
        assert!(decision.is_denied(), "{}", f.name);
        assert_eq!(limiter.stats().failures.repaired, 1, "{}", f.name);
        assert!(limiter.check(&client).await.unwrap().is_denied());
        assert_eq!(limiter.stats().failures.repaired, 1, "{}", f.name);
        let held = f.store.get_counters(&[key]).await.unwrap()[0].unwrap();
        assert_eq!(held >> 37, 100, "{}: repaired to {held}", f.name);
    }
}

/// An offset sum beyond what its count allows is no value an increment
/// writes: it is cut to the count's most and reported.
#[tokio::test]
async fn an_offset_sum_beyond_its_count_is_cut_and_reported() {
    for f in fixtures().await {
        let client = unique_client("moment-garbage");
        // Count 1, offset sum 5,000: at most 1,023 for one request.
        let limiter = written_over(&f, &client, (1 << 37) | 5_000).await;
        assert!(limiter.check(&client).await.unwrap().is_allowed());
        assert_eq!(limiter.stats().failures.repaired, 1, "{}", f.name);
        // Ten seconds into the next minute the counter is the previous
        // sub-window, sealed: read once more (and reported once more),
        // then kept, cut, in the sealed-bucket cache and never reported
        // again.
        let now = f.clock.now();
        let next_minute =
            now - chrono::Duration::seconds(now.timestamp() % 60) + chrono::Duration::seconds(70);
        f.clock.set(next_minute);
        for _ in 0..3 {
            assert!(limiter.check(&client).await.unwrap().is_allowed());
        }
        assert_eq!(limiter.stats().failures.repaired, 2, "{}", f.name);
    }
}
