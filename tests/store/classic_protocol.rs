//! The classic-protocol store's own rules, on a real memcached: a counter
//! created by many processes at once loses no count when they race on
//! `add`, and an increment brings back the reads asked with it.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::memcached::Memcached;
use common::unique_client;
use memcache_ratelimit::store::{ClassicStore, Store};

const MINUTE: Duration = Duration::from_secs(60);

fn store(server: &Memcached) -> Arc<ClassicStore> {
    Arc::new(
        ClassicStore::builder()
            .server(server.address())
            .io_timeout(Duration::from_secs(5))
            .build()
            .unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_creators_lose_no_count() {
    let server = Memcached::start();
    // Separate stores, each with its own connections, as separate
    // processes would have.
    let stores: Vec<Arc<ClassicStore>> = (0..8).map(|_| store(&server)).collect();
    let mut raced = 0;
    for round in 0..20 {
        let key = [b"race:".as_slice(), &unique_client("add")].concat();
        let misses_before = server.stat("incr_misses");
        let barrier = Arc::new(tokio::sync::Barrier::new(stores.len() * 4));
        let tasks: Vec<_> = stores
            .iter()
            .flat_map(|store| (0..4).map(move |_| store.clone()))
            .map(|store| {
                let (key, barrier) = (key.clone(), barrier.clone());
                tokio::spawn(async move {
                    barrier.wait().await;
                    store.increment(&key, 3, MINUTE, &[]).await.unwrap().value
                })
            })
            .collect();
        let mut values = Vec::new();
        for task in tasks {
            values.push(task.await.unwrap());
        }
        values.sort_unstable();
        // 32 increments of 3, each seeing a distinct total: nothing lost,
        // nothing counted twice.
        assert_eq!(
            values,
            (1..=32).map(|i| i * 3).collect::<Vec<u64>>(),
            "round {round}"
        );
        let final_value = store(&server).get_counters(&[key]).await.unwrap();
        assert_eq!(final_value, vec![Some(96)]);
        // More than one increment found the key missing: they raced to
        // create it, and all but one lost the `add`.
        if server.stat("incr_misses") - misses_before > 1 {
            raced += 1;
        }
    }
    eprintln!("rounds in which creators raced on add: {raced} of 20");
    assert!(
        raced > 0,
        "the creators never raced; the test proves nothing"
    );
}

#[tokio::test]
async fn an_increment_and_its_reads_come_back_together() {
    let server = Memcached::start();
    let store = store(&server);
    let client = unique_client("one-write");
    let keys: Vec<Vec<u8>> = (0..4)
        .map(|i| [b"ow:".as_slice(), &client, format!("_{i}").as_bytes()].concat())
        .collect();
    for (i, key) in keys.iter().enumerate().skip(1) {
        store.increment(key, i as u64, MINUTE, &[]).await.unwrap();
    }
    let gets_before = server.stat("cmd_get");
    let counters = store
        .increment(&keys[0], 5, MINUTE, &[&keys[1], &keys[2], &keys[3]])
        .await
        .unwrap();
    assert_eq!(counters.value, 5);
    assert_eq!(counters.read, vec![Some(1), Some(2), Some(3)]);
    // The three reads went as one multi-key get (memcached counts each key).
    assert_eq!(server.stat("cmd_get") - gets_before, 3);
    // After a decrement memcached pads the number with spaces; still a count.
    assert_eq!(store.decrement(&keys[3], 1).await.unwrap(), Some(2));
    assert_eq!(store.get_counters(&keys[3..]).await.unwrap(), vec![Some(2)]);
}
