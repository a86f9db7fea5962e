//! The sealed-bucket cache: a bucket past the clock-skew allowance is read
//! once per client and then kept, so a sliding-window decision is a single
//! increment in steady state, with the same answers.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{unique_client, T0};
use memcache_ratelimit::limiter::DEFAULT_MAX_CLOCK_SKEW;
use memcache_ratelimit::store::CountingStore;
use memcache_ratelimit::{ManualClock, MemoryStore, RateLimiter, SlidingWindow};
use rand::{Rng, SeedableRng};

fn sliding(
    store: Arc<CountingStore<MemoryStore>>,
    clock: &ManualClock,
    n: u32,
    cache: usize,
) -> RateLimiter {
    SlidingWindow::builder("100/minute".parse().unwrap(), store)
        .sub_windows(n)
        .sealed_cache(cache)
        .clock(clock.clone())
        .build()
        .unwrap()
}

#[tokio::test]
async fn steady_state_is_one_increment_with_the_same_answers() {
    for n in [1, 4, 12, 60] {
        let clock = ManualClock::from_unix_secs(T0);
        let cached_store = Arc::new(CountingStore::new(MemoryStore::with_clock(clock.clone())));
        let plain_store = Arc::new(CountingStore::new(MemoryStore::with_clock(clock.clone())));
        let cached = sliding(cached_store.clone(), &clock, n, 1_000);
        let plain = sliding(plain_store.clone(), &clock, n, 0);
        let mut rng = rand::rngs::StdRng::seed_from_u64(u64::from(n));
        let (mut late_decisions, mut late_keys) = (0u64, 0u64);
        let mut late_buckets = std::collections::HashSet::new();
        for step in 0..3_000 {
            clock.advance(Duration::from_millis(rng.random_range(0..200)));
            let client = [rng.random_range(0..4u8)];
            let before = cached_store.calls();
            let got = cached.check(&client).await.unwrap();
            let after = cached_store.calls();
            // Keys named by the decision's increment (a refund names one more).
            let keys = (after.keys - before.keys) - (after.decrements - before.decrements);
            let expected = plain.check(&client).await.unwrap();
            assert_eq!(got, expected, "n = {n}, step {step}");
            // After the first period, and more than the allowance into its
            // bucket, a decision names only its own bucket's key.
            let bucket = Duration::from_secs(60) / n;
            let into_bucket = clock_offset(&clock) % bucket.as_nanos();
            let allowance = DEFAULT_MAX_CLOCK_SKEW + memcache_ratelimit::limiter::DEFAULT_DEADLINE;
            if step > 1_000 && into_bucket > allowance.as_nanos() {
                late_decisions += 1;
                late_keys += keys;
                late_buckets.insert(clock_offset(&clock) / bucket.as_nanos());
            }
        }
        let plain_keys = plain_store.calls().keys as f64 / 3_000.0;
        let cached_keys = cached_store.calls().keys as f64 / 3_000.0;
        eprintln!("n = {n}: keys per decision {plain_keys:.2} without the cache, {cached_keys:.2} with it");
        // Each decision names its own bucket; beyond that, each of the 4
        // clients reads the bucket that just got sealed once, never again.
        let once_each = 4 * late_buckets.len() as u64;
        assert!(
            late_keys <= late_decisions + once_each,
            "n = {n}: {late_keys} keys for {late_decisions} decisions"
        );
        assert_eq!(
            cached_store.calls().round_trips(),
            plain_store.calls().round_trips()
        );
    }
}

fn clock_offset(clock: &ManualClock) -> u128 {
    use memcache_ratelimit::Clock;
    clock.now().timestamp_nanos_opt().unwrap() as u128
}

#[tokio::test]
async fn a_late_write_within_the_allowance_is_still_seen() {
    // Two processes share a store; the second one's clock lags by 0.5 s.
    let clock = ManualClock::from_unix_secs(T0);
    let lagging = ManualClock::from_unix_secs(T0);
    let store = Arc::new(CountingStore::new(MemoryStore::with_clock(clock.clone())));
    let ahead = sliding(store.clone(), &clock, 1, 1_000);
    let behind = sliding(store.clone(), &lagging, 1, 1_000);
    let client = unique_client("late");
    clock.advance(Duration::from_millis(60_200));
    lagging.advance(Duration::from_millis(59_700));
    // 0.2 s into the new minute: the previous one is not sealed yet.
    ahead.check(&client).await.unwrap();
    // The lagging process still counts into the previous minute.
    for _ in 0..10 {
        behind.check(&client).await.unwrap();
    }
    clock.advance(Duration::from_millis(100));
    let seen = ahead.check(&client).await.unwrap();
    // 2 in this minute + 10 in the previous one × (1 − 0.005).
    assert!(
        (seen.used() - (2.0 + 10.0 * 0.995)).abs() < 1e-6,
        "{}",
        seen.used()
    );
}

#[tokio::test]
async fn reset_forgets_the_sealed_counts_too() {
    let clock = ManualClock::from_unix_secs(T0);
    let store = Arc::new(CountingStore::new(MemoryStore::with_clock(clock.clone())));
    let limiter = sliding(store, &clock, 4, 1_000);
    let client = unique_client("reset");
    for _ in 0..100 {
        limiter.check(&client).await.unwrap();
    }
    clock.advance(Duration::from_secs(20));
    assert!(limiter.check(&client).await.unwrap().is_denied());
    limiter.reset(&client).await.unwrap();
    assert!(limiter.check(&client).await.unwrap().is_allowed());
    assert_eq!(limiter.check(&client).await.unwrap().remaining(), 98);
}

#[test]
fn an_impossible_clock_skew_is_rejected_when_built() {
    let built = SlidingWindow::builder("1/minute".parse().unwrap(), Arc::new(MemoryStore::new()))
        .max_clock_skew(Duration::from_secs(61))
        .build();
    assert_eq!(built.unwrap_err().field(), "max_clock_skew");
}

/// Keys a decision names beyond its own bucket, over `clients` decisions
/// one minute and 2 s after their first: each has one sealed bucket, read
/// again unless the cache kept it.
async fn extra_keys_after_a_minute(
    limiter: &RateLimiter,
    store: &CountingStore<MemoryStore>,
    clock: &ManualClock,
    clients: u32,
) -> u64 {
    for id in 0..clients {
        limiter.check(&id.to_be_bytes()).await.unwrap();
    }
    clock.advance(Duration::from_secs(62));
    for id in 0..clients {
        limiter.check(&id.to_be_bytes()).await.unwrap();
    }
    let before = store.calls().keys;
    for id in 0..clients {
        limiter.check(&id.to_be_bytes()).await.unwrap();
    }
    store.calls().keys - before - u64::from(clients)
}

#[tokio::test]
async fn clients_the_cache_has_no_room_for_are_counted_and_read_again() {
    let clock = ManualClock::from_unix_secs(T0);
    let store = Arc::new(CountingStore::new(MemoryStore::with_clock(clock.clone())));
    // Room for 100 clients of one sealed bucket; 150 come.
    let limiter = sliding(store.clone(), &clock, 1, 100);
    let extra = extra_keys_after_a_minute(&limiter, &store, &clock, 150).await;
    assert_eq!(extra, 50, "the 50 that did not fit read their bucket again");
    // Refused once per decision that found no room: twice for each.
    assert_eq!(limiter.stats().sealed_refused, 100);
}

#[tokio::test]
async fn by_default_100_000_clients_at_four_sub_windows_fit() {
    let clock = ManualClock::from_unix_secs(T0);
    let store = Arc::new(CountingStore::new(MemoryStore::with_clock(clock.clone())));
    let limiter = SlidingWindow::builder("100/minute".parse().unwrap(), store.clone())
        .sub_windows(4)
        .clock(clock.clone())
        .build()
        .unwrap();
    let extra = extra_keys_after_a_minute(&limiter, &store, &clock, 100_000).await;
    assert_eq!(extra, 0);
    assert_eq!(limiter.stats().sealed_refused, 0);
}
