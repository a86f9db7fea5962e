//! Keys are injective over (namespace, limiter identity, client id, window
//! suffix): two namespaces never share a counter, whatever bytes the
//! namespace and the client id hold, and two limiters of different
//! identities (bucket lengths, CAS algorithms and parameters) never read
//! each other's items.

use crate::common;

use std::collections::HashMap;
use std::sync::Arc;

use memcache_ratelimit::key::KeySpace;
use memcache_ratelimit::key::{is_valid_key, routing_prefix};
use memcache_ratelimit::{
    FixedWindow, Gcra, MemoryStore, Quota, SlidingLog, SlidingWindow, TokenBucket,
};
use proptest::prelude::*;

#[test]
fn a_namespace_holding_the_separator_does_not_share_a_counter() {
    let api = KeySpace::new("api").unwrap().client(b"login:alice");
    let api_login = KeySpace::new("api:login").unwrap().client(b"alice");
    assert_ne!(api.as_str(), api_login.as_str());
    // Namespaces without ':' or '%' keep their readable keys.
    assert_eq!(api.as_str(), "api:login:alice");
}

/// A namespace from an alphabet where collisions would be likely: the
/// separator, the escape byte, the bucket separator and what follows an
/// escape.
fn namespace() -> impl Strategy<Value = String> {
    "[:%_3Aa25\\-]{1,12}"
}

/// A client id: bytes that mean something to the key layout, spaces and
/// control bytes, any byte, and ids long enough to be hashed.
fn client_id() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        4 => prop::sample::select(b":%_-#3Aa ".to_vec()),
        1 => any::<u8>(),
    ];
    prop_oneof![
        4 => prop::collection::vec(byte.clone(), 0..12),
        1 => prop::collection::vec(byte, 140..260),
    ]
}

fn prefix(namespace: &str, id: &[u8]) -> String {
    KeySpace::new(namespace)
        .unwrap()
        .client(id)
        .as_str()
        .to_owned()
}

proptest! {
    #![proptest_config(common::proptest_config("key_injectivity", 512))]

    #[test]
    fn moving_bytes_between_namespace_and_client_changes_the_key(
        namespace in namespace(),
        moved in "[:%_3Aa\\-]{0,8}",
        id in client_id(),
    ) {
        // (ns, moved:id) against (ns:moved, id), and the same around '%'.
        for separator in [":", "%", "%3A", "%25"] {
            let mut longer_id = format!("{moved}{separator}").into_bytes();
            longer_id.extend_from_slice(&id);
            let longer_namespace = format!("{namespace}{separator}{moved}");
            if longer_namespace.len() > memcache_ratelimit::key::MAX_NAMESPACE_LEN {
                continue;
            }
            let Ok(keys) = KeySpace::new(&longer_namespace) else {
                continue;
            };
            prop_assert_ne!(
                prefix(&namespace, &longer_id),
                keys.client(&id).as_str().to_owned(),
                "{:?}+{:?} against {:?}+{:?}", namespace, longer_id, longer_namespace, id
            );
        }
    }

    #[test]
    fn distinct_namespace_and_client_pairs_never_share_a_prefix(
        a in (namespace(), client_id()),
        b in (namespace(), client_id()),
    ) {
        prop_assume!(a != b);
        let (Ok(_), Ok(_)) = (KeySpace::new(&a.0), KeySpace::new(&b.0)) else {
            return Ok(());
        };
        prop_assert_ne!(prefix(&a.0, &a.1), prefix(&b.0, &b.1));
    }
}

/// Every key each limiter identity reads for `id` in `namespace`.
fn keys_of(namespace: &str, id: &[u8]) -> Vec<(&'static str, Vec<u8>)> {
    let store = Arc::new(MemoryStore::new());
    let at = chrono::DateTime::from_timestamp(common::T0 + 1234, 567_000_000).unwrap();
    let quota = |text: &str| -> Quota { text.parse().unwrap() };
    let mut keys = Vec::new();
    let fixed = |q: &str| {
        FixedWindow::builder(quota(q), store.clone())
            .namespace(namespace)
            .build()
            .unwrap()
            .keys_at(id, at)
            .unwrap()
    };
    for key in fixed("10/minute") {
        keys.push(("fixed minute", key));
    }
    for key in fixed("10/hour") {
        keys.push(("fixed hour", key));
    }
    let sliding = SlidingWindow::builder(quota("10/minute"), store.clone())
        .sub_windows(4)
        .namespace(namespace)
        .build()
        .unwrap();
    for key in sliding.keys_at(id, at).unwrap() {
        keys.push(("sliding 4 x 15 s", key));
    }
    let gcra = |q: &str| {
        let limiter = Gcra::builder(quota(q), store.clone())
            .namespace(namespace)
            .build()
            .unwrap();
        common::state_key(&limiter, id)
    };
    keys.push(("gcra 10/minute", gcra("10/minute")));
    keys.push(("gcra 10/hour", gcra("10/hour")));
    let bucket = TokenBucket::builder(quota("10/minute"), store.clone())
        .namespace(namespace)
        .build()
        .unwrap();
    keys.push(("token bucket", common::state_key(&bucket, id)));
    let log = SlidingLog::builder(quota("10/minute"), store.clone())
        .namespace(namespace)
        .build()
        .unwrap();
    keys.push(("sliding log", common::state_key(&log, id)));
    keys
}

/// Seeded random (namespace, client, limiter) tuples from alphabets made
/// to collide: no key belongs to two tuples, every key is valid and routes
/// with its client.
#[test]
fn no_two_tuples_of_namespace_limiter_client_and_suffix_share_a_key() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x6b65_7973);
    let alphabet = b":%_-#3Aa \r\0";
    let mut owners: HashMap<Vec<u8>, (String, Vec<u8>, &'static str)> = HashMap::new();
    for _ in 0..1_500 {
        let namespace: String = (0..rng.random_range(1..5))
            .map(|_| char::from(b":%a"[rng.random_range(0..3)]))
            .collect();
        let length = match rng.random_range(0..5) {
            0 => rng.random_range(150..260),
            _ => rng.random_range(0..5),
        };
        let id: Vec<u8> = (0..length)
            .map(|_| alphabet[rng.random_range(0..alphabet.len())])
            .collect();
        let Ok(space) = KeySpace::new(&namespace) else {
            continue;
        };
        let client = space.client(&id);
        for (identity, key) in keys_of(&namespace, &id) {
            assert!(is_valid_key(&key), "{key:?}");
            assert_eq!(routing_prefix(&key), client.as_str().as_bytes());
            let owner = (namespace.clone(), id.clone(), identity);
            if let Some(other) = owners.insert(key.clone(), owner.clone()) {
                assert_eq!(other, owner, "{} is shared", String::from_utf8_lossy(&key));
            }
        }
    }
}
