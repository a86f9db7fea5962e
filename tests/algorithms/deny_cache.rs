//! The local deny cache: a flood from one client costs (almost) no store
//! round trips, and in one process the cache answers as the store would.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

use common::memcached::Memcached;
use common::{unique_client, T0};
use memcache_ratelimit::Limiter;
use memcache_ratelimit::{
    DenyCache, FixedWindow, Gcra, HybridQuota, ManualClock, MemcachedStore, MemoryStore,
    RateLimiter, Sessionize, SlidingLog, SlidingWindow, TokenBucket,
};
use rand::{Rng, SeedableRng};

/// memcached's own count of the commands it has executed.
fn commands(server: &Memcached) -> u64 {
    let mut stream = TcpStream::connect(server.address()).unwrap();
    stream.write_all(b"stats\r\n").unwrap();
    let mut total = 0;
    for line in BufReader::new(stream).lines() {
        let line = line.unwrap();
        if line == "END" {
            break;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let ["STAT", name, value] = fields[..] {
            if [
                "cmd_get",
                "cmd_set",
                "cmd_touch",
                "incr_misses",
                "incr_hits",
                "decr_misses",
                "decr_hits",
                "delete_misses",
                "delete_hits",
            ]
            .contains(&name)
            {
                total += value.parse::<u64>().unwrap();
            }
        }
    }
    total
}

#[tokio::test]
async fn a_flood_from_one_client_costs_almost_no_memcached_operations() {
    let server = Memcached::start();
    let store = Arc::new(MemcachedStore::connect([server.address()]).await.unwrap());
    let clock = ManualClock::from_unix_secs(T0 + 10);
    let limiters: Vec<(&str, RateLimiter)> = vec![
        (
            "fixed",
            FixedWindow::builder("100/minute".parse().unwrap(), store.clone())
                .clock(clock.clone())
                .build()
                .unwrap(),
        ),
        (
            "sliding n=4",
            SlidingWindow::builder("100/minute".parse().unwrap(), store.clone())
                .sub_windows(4)
                .namespace("sw")
                .clock(clock.clone())
                .build()
                .unwrap(),
        ),
        (
            "token bucket",
            TokenBucket::builder("100/minute".parse().unwrap(), store.clone())
                .clock(clock.clone())
                .build()
                .unwrap(),
        ),
    ];
    for (name, limiter) in limiters {
        let cached = DenyCache::new(limiter, 1_000);
        let client = unique_client("flood");
        // The whole limit first, then 100 times the limit within the window.
        for _ in 0..100 {
            assert!(cached.check(&client).await.unwrap().is_allowed(), "{name}");
            clock.advance(Duration::from_micros(100));
        }
        let before = commands(&server);
        let mut denied = 0u64;
        for _ in 0..9_900 {
            if cached.check(&client).await.unwrap().is_denied() {
                denied += 1;
            }
            clock.advance(Duration::from_micros(100));
        }
        let ops = commands(&server) - before;
        let per_denial = ops as f64 / denied as f64;
        eprintln!(
            "{name}: {denied} denied, memcached ran {ops} commands for them: {per_denial:.5} per denied decision"
        );
        // The token bucket earns 1.65 tokens over the flood's 0.99 s.
        assert!(denied >= 9_898, "{name}: {denied}");
        assert!(per_denial <= 0.01, "{name}: {per_denial}");
    }
}

#[tokio::test]
async fn in_one_process_the_cache_answers_as_the_store_would() {
    let quota: memcache_ratelimit::Quota = "20/10s".parse().unwrap();
    type Build = fn(memcache_ratelimit::Quota, Arc<MemoryStore>, ManualClock) -> RateLimiter;
    let builds: Vec<(&str, Build)> = vec![
        ("fixed", |q, s, c| {
            FixedWindow::builder(q, s).clock(c).build().unwrap()
        }),
        ("sliding n=1", |q, s, c| {
            SlidingWindow::builder(q, s).clock(c).build().unwrap()
        }),
        ("sliding n=5", |q, s, c| {
            SlidingWindow::builder(q, s)
                .sub_windows(5)
                .clock(c)
                .build()
                .unwrap()
        }),
        ("token bucket", |q, s, c| {
            TokenBucket::builder(q, s).clock(c).build().unwrap()
        }),
        ("gcra", |q, s, c| {
            Gcra::builder(q, s).clock(c).build().unwrap()
        }),
        ("sliding log", |q, s, c| {
            SlidingLog::builder(q, s).clock(c).build().unwrap()
        }),
        ("hybrid quota", |q, s, c| {
            HybridQuota::builder(q, s).clock(c).build().unwrap()
        }),
    ];
    for (name, build) in builds {
        let plain_clock = ManualClock::from_unix_secs(T0);
        let cached_clock = ManualClock::from_unix_secs(T0);
        let plain = build(
            quota,
            Arc::new(MemoryStore::with_clock(plain_clock.clone())),
            plain_clock.clone(),
        );
        let cached = DenyCache::new(
            build(
                quota,
                Arc::new(MemoryStore::with_clock(cached_clock.clone())),
                cached_clock.clone(),
            ),
            100,
        );
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for step in 0..5_000 {
            let client = [rng.random_range(0..3u8)];
            let cost = rng.random_range(1..=4);
            let gap = Duration::from_millis(rng.random_range(0..400));
            plain_clock.advance(gap);
            cached_clock.advance(gap);
            let expected = plain.check_n(&client, cost).await.unwrap();
            let got = cached.check_n(&client, cost).await.unwrap();
            assert_eq!(
                got.is_allowed(),
                expected.is_allowed(),
                "{name} at step {step}"
            );
            if got.is_denied() {
                // The same moment, up to float rounding in the token counts.
                let (a, b) = (got.retry_after().unwrap(), expected.retry_after().unwrap());
                let gap = a.abs_diff(b);
                assert!(
                    gap <= Duration::from_micros(1),
                    "{name} at step {step}: {a:?} vs {b:?}"
                );
            }
        }
        assert!(cached.hits() > 0, "{name}: the cache never answered");
    }
}

#[tokio::test]
async fn cheaper_requests_and_resets_go_to_the_store() {
    let clock = ManualClock::from_unix_secs(T0);
    let store = Arc::new(MemoryStore::with_clock(clock.clone()));
    let limiter = TokenBucket::builder("10/minute".parse().unwrap(), store)
        .clock(clock.clone())
        .build()
        .unwrap();
    let cached = DenyCache::new(limiter, 2);
    assert!(cached.check_n(b"a", 8).await.unwrap().is_allowed());
    assert!(cached.check_n(b"a", 5).await.unwrap().is_denied());
    // A smaller request may still fit: it is asked of the store.
    assert!(cached.check_n(b"a", 2).await.unwrap().is_allowed());
    assert_eq!(cached.hits(), 0);
    // That admission made the remembered denial stale; a new one is asked.
    assert!(cached.check_n(b"a", 6).await.unwrap().is_denied());
    assert_eq!(cached.hits(), 0);
    assert!(cached.check_n(b"a", 6).await.unwrap().is_denied());
    assert_eq!(cached.hits(), 1);
    cached.reset(b"a").await.unwrap();
    assert!(cached.check_n(b"a", 6).await.unwrap().is_allowed());
    // Capacity: a third client's denial is not remembered while two live ones are.
    for client in [&b"x"[..], b"y", b"z"] {
        cached.check_n(client, 10).await.unwrap();
        assert!(cached.check(client).await.unwrap().is_denied());
    }
    let hits = cached.hits();
    assert!(cached.check(b"z").await.unwrap().is_denied());
    assert_eq!(cached.hits(), hits, "z was remembered beyond the capacity");
}

#[tokio::test]
async fn a_remembered_sessionize_denial_keeps_the_session_start() {
    let clock = ManualClock::from_unix_secs(T0);
    let store = Arc::new(MemoryStore::with_clock(clock.clone()));
    let sessions = Sessionize::builder("1/hour".parse().unwrap(), store)
        .clock(clock.clone())
        .build()
        .unwrap();
    let cache = DenyCache::new(sessions, 16);
    let opened = cache.check(b"alice").await.unwrap().session_start();
    assert!(opened.is_some());
    for _ in 0..3 {
        clock.advance(Duration::from_secs(60));
        let denied = cache.check(b"alice").await.unwrap();
        assert!(denied.is_denied());
        assert_eq!(denied.session_start(), opened);
    }
    assert_eq!(cache.hits(), 2);
}
