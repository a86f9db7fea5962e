//! Any client id, of any bytes and any length, maps to valid memcached keys
//! of at most 250 bytes, distinct ids never share a key, and nothing a
//! client sends reaches memcached as a command.

use crate::common;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use common::memcached::Memcached;
use memcache_ratelimit::key::KeySpace;
use memcache_ratelimit::key::{is_valid_key, routing_prefix, MAX_KEY_LEN};
use memcache_ratelimit::store::{PutCondition, Store};
use memcache_ratelimit::{
    FixedWindow, Gcra, MemcachedStore, MemoryStore, Quota, RateLimiter, SlidingWindow,
};
use proptest::prelude::*;

fn at() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(common::T0 + 1234, 567_000_000).unwrap()
}

/// Every key a limiter of each kind reads for `id`, in the longest
/// namespace and with the longest suffixes.
fn keys_for(id: &[u8]) -> Vec<Vec<u8>> {
    let store = Arc::new(MemoryStore::new());
    let namespace = "n".repeat(memcache_ratelimit::key::MAX_NAMESPACE_LEN);
    let mut keys = Vec::new();
    let fixed = FixedWindow::builder(Quota::per_hour(7.try_into().unwrap()), store.clone())
        .namespace(&namespace)
        .build()
        .unwrap();
    keys.extend(fixed.keys_at(id, at()).unwrap());
    for (quota, n) in [("100/minute", 1), ("100/minute", 60), ("10/999ms", 3)] {
        let sliding = SlidingWindow::builder(quota.parse().unwrap(), store.clone())
            .sub_windows(n)
            .namespace(&namespace)
            .build()
            .unwrap();
        keys.extend(sliding.keys_at(id, at()).unwrap());
    }
    keys
}

fn check_id(id: &[u8]) -> Vec<u8> {
    let keys = keys_for(id);
    let prefix = routing_prefix(&keys[0]).to_vec();
    for key in &keys {
        assert!(is_valid_key(key), "invalid key {key:?} for id {id:?}");
        assert!(key.len() <= MAX_KEY_LEN);
        assert_eq!(
            routing_prefix(key),
            &prefix[..],
            "a key of {id:?} routes elsewhere"
        );
    }
    prefix
}

proptest! {
    #![proptest_config(common::proptest_config("key_safety", 256))]

    #[test]
    fn any_bytes_make_valid_keys(id in proptest::collection::vec(any::<u8>(), 0..10_240)) {
        check_id(&id);
    }

    #[test]
    fn distinct_ids_never_share_a_key(
        a in proptest::collection::vec(any::<u8>(), 0..300),
        b in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        prop_assume!(a != b);
        prop_assert_ne!(check_id(&a), check_id(&b));
    }

    #[test]
    fn near_identical_printable_ids_stay_apart(
        base in "[ -~]{0,200}",
        tail in prop::sample::select(vec!["", "_", "#", " ", "\r\n", "_202701150800", ":x"]),
    ) {
        let a = base.as_bytes().to_vec();
        let mut b = a.clone();
        b.extend_from_slice(tail.as_bytes());
        prop_assume!(a != b);
        prop_assert_ne!(check_id(&a), check_id(&b));
    }
}

/// A random id, biased to what breaks protocols and key builders: bytes
/// memcached's text protocol gives meaning to, printable ASCII, and any
/// byte; lengths that are tiny, around where raw ids turn hashed, longer
/// than a key, and up to 10 KB.
fn fuzzed_id(rng: &mut impl rand::Rng) -> Vec<u8> {
    let length = match rng.random_range(0..4) {
        0 => rng.random_range(0..8),
        1 => rng.random_range(190..220),
        2 => rng.random_range(220..300),
        _ => rng.random_range(0..10_240),
    };
    (0..length)
        .map(|_| match rng.random_range(0..4) {
            0 => b" \r\n\t\0_#:"[rng.random_range(0..8)],
            1 => rng.random_range(0x21..0x7f),
            _ => rng.random(),
        })
        .collect()
}

/// Fuzzing: 5,000 seeded random ids, each through every key builder and
/// through decisions of a fixed window and GCRA: no panic, valid keys, one
/// server per client, and no two ids sharing a key.
#[tokio::test]
async fn fuzzed_ids_make_valid_distinct_keys_and_decisions() {
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
    let store = Arc::new(MemoryStore::new());
    let quota: Quota = "3/minute".parse().unwrap();
    let fixed = FixedWindow::builder(quota, store.clone()).build().unwrap();
    let gcra = Gcra::builder(quota, store.clone()).build().unwrap();
    let mut owners: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
    for _ in 0..5_000 {
        let id = fuzzed_id(&mut rng);
        let prefix = check_id(&id);
        if let Some(other) = owners.insert(prefix, id.clone()) {
            assert_eq!(other, id, "two ids share a key");
        }
        assert!(fixed.check(&id).await.unwrap().remaining() < 3);
        assert!(is_valid_key(&common::state_key(&gcra, &id)));
        assert!(gcra.check(&id).await.is_ok());
    }
}

fn hostile_ids() -> Vec<Vec<u8>> {
    let mut ids: Vec<Vec<u8>> = [
        "",
        " ",
        "a b",
        "\r\n",
        "x\r\nflush_all\r\n",
        "\r\nflush_all\r\n",
        "y\r\ndelete canary\r\n",
        "delete canary",
        "mg canary v",
        "md canary q",
        "canary b",
        "Y2FuYXJ5 b",
        "ma canary D99",
        "_",
        "#",
        "##",
        "canary",
        "a_b_c",
        "\t",
        "\0",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    ids.push((0u8..=255).collect());
    ids.push(vec![0xff; 10_240]);
    ids.push(vec![b'z'; 10_240]);
    ids.push("é✓ unicode".as_bytes().to_vec());
    ids
}

#[test]
fn the_listed_hostile_ids_make_distinct_valid_keys() {
    let mut prefixes = HashSet::new();
    for id in hostile_ids() {
        assert!(prefixes.insert(check_id(&id)), "{id:?} collides");
    }
    let keys = KeySpace::default();
    assert_eq!(keys.client(b"").as_str().len(), "rl:#".len() + 64);
}

#[tokio::test]
async fn a_canary_key_survives_ids_that_carry_protocol_commands() {
    let server = Memcached::start();
    let store = Arc::new(MemcachedStore::connect([server.address()]).await.unwrap());
    for canary in [&b"canary"[..], b"rl:canary_1"] {
        store
            .put(
                canary,
                b"alive",
                std::time::Duration::from_secs(600),
                PutCondition::Always,
            )
            .await
            .unwrap();
    }
    let limiters: Vec<RateLimiter> = vec![
        FixedWindow::builder("2/minute".parse().unwrap(), store.clone())
            .build()
            .unwrap(),
        SlidingWindow::builder("2/minute".parse().unwrap(), store.clone())
            .sub_windows(4)
            .namespace("sw")
            .build()
            .unwrap(),
    ];
    for id in hostile_ids() {
        for limiter in &limiters {
            // Each id is a client of its own: two allowed, then denied.
            assert!(limiter.check(&id).await.unwrap().is_allowed(), "{id:?}");
            assert!(limiter.check(&id).await.unwrap().is_allowed(), "{id:?}");
            assert!(limiter.check(&id).await.unwrap().is_denied(), "{id:?}");
            limiter.reset(&id).await.unwrap();
            assert!(limiter.check(&id).await.unwrap().is_allowed(), "{id:?}");
        }
    }
    for canary in [&b"canary"[..], b"rl:canary_1"] {
        let found = store.get(canary).await.unwrap().expect("canary survives");
        assert_eq!(found.value, b"alive");
    }
}
