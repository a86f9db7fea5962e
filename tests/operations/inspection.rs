//! Reading what a limiter holds for a client, on both stores: the keys and
//! values, the windows' estimate, and nothing counted by looking.

use crate::common;

use std::time::Duration;

use common::{fixtures, unique_client};
use memcache_ratelimit::{Clock, FixedWindow, Gcra};

#[tokio::test]
async fn inspecting_shows_the_counts_and_counts_nothing() {
    for f in fixtures().await {
        let window = f.sliding_window("10/minute", 4);
        let client = unique_client("inspect");
        for _ in 0..4 {
            window.check(&client).await.unwrap();
        }
        f.clock.advance(Duration::from_secs(20));
        for _ in 0..2 {
            window.check(&client).await.unwrap();
        }
        for _ in 0..3 {
            let seen = window.inspect(&client).await.unwrap();
            assert_eq!(seen.limit, 10);
            let values: Vec<Option<&str>> = seen.keys.iter().map(|k| k.value.as_deref()).collect();
            // 15 s buckets: 2 in the current one (20 s), 4 in the one before.
            assert_eq!(
                values,
                [Some("2"), Some("4"), None, None, None],
                "{}",
                f.name
            );
            assert!(seen.keys[0].key.ends_with("-15s"), "{}", seen.keys[0].key);
            assert_eq!(seen.estimate, Some(6.0), "{}", f.name);
            assert_eq!(seen.remaining, Some(4));
        }
        // The keys a decision touches, as keys_at names them.
        let keys = window.keys_at(&client, f.clock.now()).unwrap();
        let seen = window.inspect(&client).await.unwrap();
        let listed: Vec<&[u8]> = seen.keys.iter().map(|k| k.key.as_bytes()).collect();
        assert_eq!(listed, keys.iter().map(Vec::as_slice).collect::<Vec<_>>());

        let fixed = f
            .builder(FixedWindow::builder, "3/minute")
            .namespace("fixed")
            .build()
            .unwrap();
        fixed.check(&client).await.unwrap();
        let seen = fixed.inspect(&client).await.unwrap();
        assert_eq!(seen.keys.len(), 1);
        assert_eq!(seen.keys[0].value.as_deref(), Some("1"));
        assert_eq!(seen.estimate, Some(1.0));

        let gcra = f.limiter(Gcra::builder, "3/minute");
        assert_eq!(gcra.inspect(&client).await.unwrap().keys[0].value, None);
        gcra.check(&client).await.unwrap();
        let seen = gcra.inspect(&client).await.unwrap();
        assert_eq!(
            seen.keys[0].key.as_bytes(),
            &common::state_key(&gcra, &client)[..]
        );
        assert!(seen.keys[0].value.is_some(), "{}", f.name);
        assert_eq!(seen.estimate, None);
        // Looking changed nothing: two more of three fit.
        assert!(gcra.check(&client).await.unwrap().is_allowed());
        assert!(gcra.check(&client).await.unwrap().is_allowed());
        assert!(gcra.check(&client).await.unwrap().is_denied());
    }
}
