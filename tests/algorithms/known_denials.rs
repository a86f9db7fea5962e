//! A denial on a state the limiter knows, on real memcached: the state is
//! confirmed by its version alone, never fetched whole, and a state
//! someone else changed is read and decided again.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::memcached::Memcached;
use common::{unique_client, T0};
use memcache_ratelimit::store::{PutCondition, Store};
use memcache_ratelimit::{ManualClock, MemcachedStore, RateLimiter, SlidingLog};

/// A sliding log of 1,000 a minute on `store`, on `clock`.
fn log(store: Arc<MemcachedStore>, clock: &ManualClock) -> RateLimiter {
    SlidingLog::builder("1000/minute".parse().unwrap(), store)
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// `client`'s log filled with 1,000 requests a millisecond apart: some
/// 3 KB stored, 3 bytes an entry.
async fn fill(limiter: &RateLimiter, clock: &ManualClock, client: &[u8]) {
    for _ in 0..1_000 {
        assert!(limiter.check(client).await.unwrap().is_allowed());
        clock.advance(Duration::from_millis(1));
    }
}

/// A memcached, a store on it, a clock, and a log of 1,000 a minute whose
/// client (tagged `tag`) has filled it.
struct Filled {
    server: Memcached,
    store: Arc<MemcachedStore>,
    clock: ManualClock,
    limiter: RateLimiter,
    client: Vec<u8>,
}

async fn filled(tag: &str) -> Filled {
    let server = Memcached::start();
    let store = Arc::new(MemcachedStore::connect([server.address()]).await.unwrap());
    let clock = ManualClock::from_unix_secs(T0);
    let limiter = log(store.clone(), &clock);
    let client = unique_client(tag);
    fill(&limiter, &clock, &client).await;
    Filled {
        server,
        store,
        clock,
        limiter,
        client,
    }
}

#[tokio::test]
async fn a_denial_on_a_full_sliding_log_does_not_fetch_the_log() {
    let Filled {
        server,
        store,
        limiter,
        client,
        ..
    } = filled("known-denial").await;
    let key = common::state_key(&limiter, &client);
    let stored = store.get(&key).await.unwrap().unwrap().value.len();
    assert!(stored > 2_000, "a log of {stored} bytes");
    let before = server.stat("bytes_written");
    for _ in 0..100 {
        let denied = limiter.check(&client).await.unwrap();
        assert!(denied.is_denied());
        assert_eq!(denied.retry_after(), Some(Duration::from_secs(59)));
    }
    let sent = server.stat("bytes_written") - before;
    // A version's answer is a dozen bytes; the log, some 3,000.
    assert!(
        sent < 100 * 50,
        "memcached sent {sent} bytes for 100 denials on a log of {stored} bytes"
    );
}

#[tokio::test]
async fn a_denial_on_a_log_someone_rewrote_is_decided_on_the_stored_log() {
    let Filled {
        server: _server,
        store,
        clock,
        limiter,
        client,
    } = filled("rewritten").await;
    assert!(limiter.check(&client).await.unwrap().is_denied());
    // Another instance, with the same log of 1,000 a minute, admits one
    // request on a log of its own: an operator's reset, say, then one
    // request. The first limiter knows a full log, at an older version.
    let key = common::state_key(&limiter, &client);
    store.delete(std::slice::from_ref(&key)).await.unwrap();
    let other = log(store.clone(), &clock);
    assert!(other.check(&client).await.unwrap().is_allowed());
    let rewritten = store.get(&key).await.unwrap().unwrap();
    // Decided on what is stored: one entry used, 998 left after this one.
    let allowed = limiter.check(&client).await.unwrap();
    assert!(allowed.is_allowed(), "{allowed:?}");
    assert_eq!(allowed.remaining(), 998);
    // And written on the version it read, not on the one it knew.
    let (outcome, _) = store
        .put_versioned(
            &key,
            b"x",
            Duration::from_secs(60),
            PutCondition::Version(rewritten.version),
        )
        .await
        .unwrap();
    assert_ne!(
        outcome,
        memcache_ratelimit::store::PutOutcome::Stored,
        "the rewritten version is no longer stored"
    );
}
