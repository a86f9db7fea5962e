//! The embedded store reclaims expired counters: a stream of one-shot
//! clients leaves it bounded by the traffic of one TTL.

use std::sync::Arc;
use std::time::Duration;

use memcache_ratelimit::Limiter;
use memcache_ratelimit::{FixedWindow, ManualClock, MemoryStore, SlidingWindow};

#[tokio::test]
async fn a_million_one_shot_clients_leave_the_store_bounded() {
    let clock = ManualClock::from_unix_secs(1_800_000_000);
    let store = Arc::new(MemoryStore::with_clock(clock.clone()));
    let fixed = FixedWindow::builder("10/minute".parse().unwrap(), store.clone())
        .clock(clock.clone())
        .build()
        .unwrap();
    let sliding = SlidingWindow::builder("10/minute".parse().unwrap(), store.clone())
        .namespace("sw")
        .clock(clock.clone())
        .build()
        .unwrap();
    // 1,000,000 clients, one request each, 5,000 per minute over 200 minutes.
    let per_minute = 5_000;
    let step = Duration::from_secs(60) / per_minute;
    let mut peak = 0;
    for client in 0..1_000_000u32 {
        let id = client.to_le_bytes();
        let limiter: &dyn Limiter = if client % 2 == 0 { &fixed } else { &sliding };
        assert!(limiter.check(&id).await.unwrap().is_allowed());
        clock.advance(step);
        if client % 1_000 == 0 {
            peak = peak.max(store.len());
        }
    }
    peak = peak.max(store.len());
    // Counters live 61 s (fixed) and 121 s (sliding, previous minute still
    // read): at 5,000 clients a minute that is at most 2,500 × 61/60 +
    // 2,500 × 121/60 live, plus those that expired since the last write to
    // their shard.
    let bound = 2_500 * 61 / 60 + 2_500 * 121 / 60 + 1_000;
    assert!(peak <= bound, "peak {peak} above {bound}");
    assert!(
        peak >= 5_000,
        "peak {peak}: the test did not fill the store"
    );
    eprintln!("one million one-shot clients: peak {peak} items (bound {bound})");
    clock.advance(Duration::from_secs(300));
    store.purge_expired();
    assert_eq!(store.len(), 0);
}
