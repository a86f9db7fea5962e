//! Choosing the protocol: meta on memcached 1.6, classic through
//! twemproxy (which does not pass the meta protocol through), and
//! detection telling the two apart, against real processes.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::memcached::Memcached;
use common::twemproxy::Twemproxy;
use common::unique_client;
use memcache_ratelimit::store::{MemcachedStore, Protocol, Store};
use memcache_ratelimit::{FailurePolicy, SlidingWindow};

async fn store(address: String, protocol: Protocol) -> MemcachedStore {
    MemcachedStore::builder()
        .server(address)
        .protocol(protocol)
        .io_timeout(Duration::from_secs(5))
        .build()
        .await
        .unwrap()
}

/// How many of 8 requests a 5-per-minute sliding window on `store` admits.
async fn admitted(store: MemcachedStore) -> u32 {
    let limiter = SlidingWindow::builder("5/minute".parse().unwrap(), Arc::new(store))
        .sub_windows(6)
        .deadline(Duration::from_secs(5))
        .on_failure(FailurePolicy::ReturnError)
        .build()
        .unwrap();
    let client = unique_client("protocol");
    common::admitted(&limiter, &client, 8).await as u32
}

#[tokio::test]
async fn detection_picks_meta_on_memcached_and_classic_behind_twemproxy() {
    let server = Memcached::start();
    let proxy = Twemproxy::start(2);

    let direct = store(server.address(), Protocol::Detect).await;
    assert_eq!(direct.protocol(), Protocol::Meta);
    assert!(direct.is_pipelining());
    assert_eq!(admitted(direct).await, 5);

    let proxied = store(proxy.address(), Protocol::Detect).await;
    assert_eq!(proxied.protocol(), Protocol::Classic);
    proxied.ping().await.unwrap();
    assert_eq!(admitted(proxied).await, 5);
}

#[tokio::test]
async fn twemproxy_refuses_the_meta_protocol_and_classic_works_everywhere() {
    let server = Memcached::start();
    let proxy = Twemproxy::start(2);

    // What a new user meets: the meta protocol through twemproxy fails.
    let meta_through_proxy = store(proxy.address(), Protocol::Meta).await;
    let key = b"rl:probe_1".to_vec();
    let error = meta_through_proxy
        .increment(&key, 1, Duration::from_secs(60), &[])
        .await
        .unwrap_err();
    eprintln!("meta through twemproxy: {error}");

    // Classic, chosen, on memcached itself as well as through the proxy.
    let classic_direct = store(server.address(), Protocol::Classic).await;
    assert_eq!(classic_direct.protocol(), Protocol::Classic);
    assert!(!classic_direct.is_pipelining());
    assert_eq!(admitted(classic_direct).await, 5);
    assert_eq!(
        admitted(store(proxy.address(), Protocol::Classic).await).await,
        5
    );
}
