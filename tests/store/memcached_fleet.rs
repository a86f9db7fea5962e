//! A fleet of three real memcached servers: every key of a client sits on
//! one server, a decision is one call to it, and clients spread over all
//! three.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;

use common::memcached::Memcached;
use common::T0;
use memcache_ratelimit::store::{CountingStore, Store};
use memcache_ratelimit::{Clock, ManualClock, MemcachedStore, SlidingWindow};

#[tokio::test]
async fn each_client_lives_on_one_server_and_clients_spread_over_all() {
    let servers = [Memcached::start(), Memcached::start(), Memcached::start()];
    let addresses: Vec<String> = servers.iter().map(Memcached::address).collect();
    let fleet = Arc::new(CountingStore::new(
        MemcachedStore::connect(addresses.clone()).await.unwrap(),
    ));
    let clock = ManualClock::from_unix_secs(T0 + 40);
    let limiter = SlidingWindow::builder("100/minute".parse().unwrap(), fleet.clone())
        .sub_windows(4)
        .clock(clock.clone())
        .build()
        .unwrap();
    // Each server on its own, to look at where keys really are.
    let mut singles = Vec::new();
    for address in &addresses {
        singles.push(MemcachedStore::connect([address.clone()]).await.unwrap());
    }

    let clients = 300;
    let mut per_server: HashMap<String, usize> = HashMap::new();
    for c in 0..clients {
        let client = format!("client-{c}");
        // Touch every bucket the estimate reads: one request per sub-window.
        for step in 0..5 {
            fleet.clear();
            assert!(limiter.check(client.as_bytes()).await.unwrap().is_allowed());
            assert_eq!(fleet.calls().round_trips(), 1, "one call per decision");
            if step < 4 {
                clock.advance(std::time::Duration::from_secs(15));
            }
        }
        let keys = limiter.keys_at(client.as_bytes(), clock.now()).unwrap();
        assert_eq!(keys.len(), 5);
        let home = fleet.inner().server_for(&keys[0]).to_owned();
        for key in &keys {
            assert_eq!(fleet.inner().server_for(key), home, "{client}: keys split");
        }
        for (address, single) in addresses.iter().zip(&singles) {
            let found = single.get_counters(&keys).await.unwrap();
            if *address == home {
                assert!(
                    found.iter().all(Option::is_some),
                    "{client}: missing on {address}: {found:?}"
                );
            } else {
                assert!(
                    found.iter().all(Option::is_none),
                    "{client}: stray key on {address}"
                );
            }
        }
        *per_server.entry(home).or_default() += 1;
        clock.advance(std::time::Duration::from_secs(1));
    }
    eprintln!("clients per server: {per_server:?}");
    assert_eq!(per_server.len(), 3, "{per_server:?}");
    for (server, count) in &per_server {
        assert!(
            *count >= clients / 6,
            "{server} holds only {count} of {clients}: {per_server:?}"
        );
    }
}
