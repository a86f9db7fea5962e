//! One conformance suite for the `Store` contract, run on every store.
//! Only the memcached expiry test waits in real time; the memory store's
//! expiry follows its ManualClock.

use crate::common;

use std::time::Duration;

use common::{fixtures, unique_client, Fixture};
use memcache_ratelimit::store::StoreErrorKind;
use memcache_ratelimit::store::{PutCondition, PutOutcome};

fn key(tag: &str) -> Vec<u8> {
    let mut key = b"conf:".to_vec();
    key.extend(unique_client(tag));
    key
}

const MINUTE: Duration = Duration::from_secs(60);

/// Lets `by` pass for the fixture's store: the manual clock for the memory
/// store, real time for memcached.
async fn pass(fixture: &Fixture, by: Duration) {
    if fixture.real_time() {
        tokio::time::sleep(by).await;
    } else {
        fixture.clock.advance(by);
    }
}

#[tokio::test]
async fn increment_creates_at_delta_then_adds_and_reads_in_one_call() {
    for f in fixtures().await {
        let (a, b, missing) = (key("a"), key("b"), key("missing"));
        let first = f.store.increment(&a, 5, MINUTE, &[]).await.unwrap();
        assert_eq!(first.value, 5, "{}", f.name);
        f.store.increment(&b, 7, MINUTE, &[]).await.unwrap();
        let second = f
            .store
            .increment(&a, 2, MINUTE, &[&b, &missing, &a])
            .await
            .unwrap();
        assert_eq!(second.value, 7, "{}", f.name);
        assert_eq!(second.read, vec![Some(7), None, Some(7)], "{}", f.name);
    }
}

#[tokio::test]
async fn decrement_stops_at_zero_and_never_creates() {
    for f in fixtures().await {
        let (a, missing) = (key("a"), key("missing"));
        f.store.increment(&a, 100, MINUTE, &[]).await.unwrap();
        assert_eq!(
            f.store.decrement(&a, 1).await.unwrap(),
            Some(99),
            "{}",
            f.name
        );
        // memcached pads a shrunken number with spaces; reads still parse it.
        assert_eq!(
            f.store
                .get_counters(std::slice::from_ref(&a))
                .await
                .unwrap(),
            vec![Some(99)]
        );
        assert_eq!(
            f.store.increment(&a, 1, MINUTE, &[]).await.unwrap().value,
            100
        );
        assert_eq!(
            f.store.decrement(&a, 1000).await.unwrap(),
            Some(0),
            "{}",
            f.name
        );
        assert_eq!(
            f.store.decrement(&missing, 1).await.unwrap(),
            None,
            "{}",
            f.name
        );
        assert_eq!(f.store.get_counters(&[missing]).await.unwrap(), vec![None]);
    }
}

#[tokio::test]
async fn increment_wraps_at_two_to_the_sixty_four() {
    for f in fixtures().await {
        let a = key("wrap");
        let top = u64::MAX.to_string();
        f.store
            .put(&a, top.as_bytes(), MINUTE, PutCondition::Always)
            .await
            .unwrap();
        assert_eq!(
            f.store.increment(&a, 2, MINUTE, &[]).await.unwrap().value,
            1,
            "{}",
            f.name
        );
    }
}

#[tokio::test]
async fn versions_change_on_every_write() {
    for f in fixtures().await {
        let a = key("v");
        f.store.increment(&a, 1, MINUTE, &[]).await.unwrap();
        let v1 = f.store.get(&a).await.unwrap().unwrap();
        assert_eq!(v1.value, b"1", "{}", f.name);
        f.store.increment(&a, 1, MINUTE, &[]).await.unwrap();
        let v2 = f.store.get(&a).await.unwrap().unwrap();
        assert_ne!(
            v1.version, v2.version,
            "{}: increment keeps the version",
            f.name
        );
        f.store.decrement(&a, 1).await.unwrap();
        let v3 = f.store.get(&a).await.unwrap().unwrap();
        assert_ne!(
            v2.version, v3.version,
            "{}: decrement keeps the version",
            f.name
        );
        let stored = f
            .store
            .put(&a, b"x", MINUTE, PutCondition::Version(v3.version))
            .await
            .unwrap();
        assert_eq!(stored, PutOutcome::Stored, "{}", f.name);
        let v4 = f.store.get(&a).await.unwrap().unwrap();
        assert_ne!(v3.version, v4.version, "{}", f.name);
        assert_eq!(v4.value, b"x");
        assert_eq!(f.store.get(&key("none")).await.unwrap(), None);
    }
}

#[tokio::test]
async fn a_version_read_alone_is_the_version_a_whole_read_finds() {
    for f in fixtures().await {
        let a = key("version-alone");
        assert_eq!(f.store.version(&a).await.unwrap(), None, "{}", f.name);
        f.store.increment(&a, 1, MINUTE, &[]).await.unwrap();
        let counter = f.store.get(&a).await.unwrap().unwrap().version;
        assert_eq!(
            f.store.version(&a).await.unwrap(),
            Some(counter),
            "{}",
            f.name
        );
        let large = vec![b'x'; 100_000];
        f.store
            .put(&a, &large, MINUTE, PutCondition::Version(counter))
            .await
            .unwrap();
        let whole = f.store.get(&a).await.unwrap().unwrap();
        assert_eq!(whole.value.len(), large.len());
        assert_ne!(whole.version, counter, "{}", f.name);
        assert_eq!(
            f.store.version(&a).await.unwrap(),
            Some(whole.version),
            "{}",
            f.name
        );
        f.store.delete(std::slice::from_ref(&a)).await.unwrap();
        assert_eq!(f.store.version(&a).await.unwrap(), None, "{}", f.name);
        let error = f.store.version(b"has space").await.unwrap_err();
        assert_eq!(error.kind(), StoreErrorKind::InvalidKey, "{}", f.name);
    }
}

#[tokio::test]
async fn conditional_puts_write_only_when_the_condition_holds() {
    for f in fixtures().await {
        let a = key("put");
        let add = |v: &'static [u8]| f.store.put(&a, v, MINUTE, PutCondition::Absent);
        assert_eq!(
            add(b"first").await.unwrap(),
            PutOutcome::Stored,
            "{}",
            f.name
        );
        assert_eq!(
            add(b"second").await.unwrap(),
            PutOutcome::Conflict,
            "{}",
            f.name
        );
        let current = f.store.get(&a).await.unwrap().unwrap();
        assert_eq!(current.value, b"first");

        let stale = current.version;
        let cas = f
            .store
            .put(&a, b"third", MINUTE, PutCondition::Version(stale))
            .await
            .unwrap();
        assert_eq!(cas, PutOutcome::Stored, "{}", f.name);
        let again = f
            .store
            .put(&a, b"fourth", MINUTE, PutCondition::Version(stale))
            .await
            .unwrap();
        assert_eq!(
            again,
            PutOutcome::Conflict,
            "{}: a stale version wrote",
            f.name
        );
        assert_eq!(f.store.get(&a).await.unwrap().unwrap().value, b"third");

        let gone = key("gone");
        let missing = f
            .store
            .put(&gone, b"x", MINUTE, PutCondition::Version(stale))
            .await
            .unwrap();
        assert_eq!(
            missing,
            PutOutcome::Vanished,
            "{}: a version put on no key",
            f.name
        );
        assert_eq!(f.store.get(&gone).await.unwrap(), None);

        // A key deleted after it was read: gone, not changed.
        let version = f.store.get(&a).await.unwrap().unwrap().version;
        assert_eq!(f.store.delete(std::slice::from_ref(&a)).await.unwrap(), 1);
        let deleted = f
            .store
            .put(&a, b"fifth", MINUTE, PutCondition::Version(version))
            .await
            .unwrap();
        assert_eq!(deleted, PutOutcome::Vanished, "{}", f.name);
        assert_eq!(f.store.get(&a).await.unwrap(), None, "{}", f.name);

        // On a version or absent: writes on no key, and on the version...
        let either = |v: &'static [u8], version| {
            f.store
                .put(&a, v, MINUTE, PutCondition::VersionOrAbsent(version))
        };
        assert_eq!(either(b"sixth", version).await.unwrap(), PutOutcome::Stored);
        let sixth = f.store.get(&a).await.unwrap().unwrap();
        assert_eq!(sixth.value, b"sixth", "{}", f.name);
        assert_eq!(
            either(b"seventh", sixth.version).await.unwrap(),
            PutOutcome::Stored,
            "{}",
            f.name
        );
        let seventh = f.store.get(&a).await.unwrap().unwrap();
        assert_eq!(seventh.value, b"seventh", "{}", f.name);
        // ...but not on another version.
        assert_eq!(
            either(b"eighth", sixth.version).await.unwrap(),
            PutOutcome::Conflict,
            "{}",
            f.name
        );
        assert_eq!(f.store.get(&a).await.unwrap().unwrap(), seventh);
    }
}

#[tokio::test]
async fn a_versioned_put_returns_the_version_a_read_then_finds() {
    for f in fixtures().await {
        let a = key("versioned");
        let (outcome, version) = f
            .store
            .put_versioned(&a, b"one", MINUTE, PutCondition::Absent)
            .await
            .unwrap();
        assert_eq!(outcome, PutOutcome::Stored, "{}", f.name);
        let read = f.store.get(&a).await.unwrap().unwrap();
        // The classic protocol's `cas` command does not tell the new
        // version; every other store does.
        if matches!(f.name, "classic" | "twemproxy") {
            assert_eq!(version, None, "{}", f.name);
            continue;
        }
        assert_eq!(version, Some(read.version), "{}", f.name);
        // Writing on it works once; the version after is new again.
        let (outcome, next) = f
            .store
            .put_versioned(&a, b"two", MINUTE, PutCondition::Version(read.version))
            .await
            .unwrap();
        assert_eq!(outcome, PutOutcome::Stored, "{}", f.name);
        let next = next.unwrap();
        assert_ne!(next, read.version, "{}", f.name);
        assert_eq!(f.store.get(&a).await.unwrap().unwrap().version, next);
        let (outcome, none) = f
            .store
            .put_versioned(&a, b"three", MINUTE, PutCondition::Version(read.version))
            .await
            .unwrap();
        assert_eq!((outcome, none), (PutOutcome::Conflict, None), "{}", f.name);
        assert_eq!(f.store.get(&a).await.unwrap().unwrap().value, b"two");
        // On a version or absent, the version written either way.
        let (outcome, on_version) = f
            .store
            .put_versioned(&a, b"four", MINUTE, PutCondition::VersionOrAbsent(next))
            .await
            .unwrap();
        assert_eq!(outcome, PutOutcome::Stored, "{}", f.name);
        assert_eq!(
            on_version,
            Some(f.store.get(&a).await.unwrap().unwrap().version)
        );
        f.store.delete(std::slice::from_ref(&a)).await.unwrap();
        let (outcome, as_new) = f
            .store
            .put_versioned(&a, b"five", MINUTE, PutCondition::VersionOrAbsent(next))
            .await
            .unwrap();
        assert_eq!(outcome, PutOutcome::Stored, "{}", f.name);
        let five = f.store.get(&a).await.unwrap().unwrap();
        assert_eq!((as_new, five.value), (Some(five.version), b"five".to_vec()));
    }
}

#[tokio::test]
async fn delete_counts_what_existed() {
    for f in fixtures().await {
        let (a, b, c) = (key("d1"), key("d2"), key("d3"));
        f.store.increment(&a, 1, MINUTE, &[]).await.unwrap();
        f.store.increment(&b, 1, MINUTE, &[]).await.unwrap();
        assert_eq!(
            f.store.delete(&[a.clone(), b.clone(), c]).await.unwrap(),
            2,
            "{}",
            f.name
        );
        assert_eq!(
            f.store.get_counters(&[a, b]).await.unwrap(),
            vec![None, None]
        );
    }
}

#[tokio::test]
async fn non_numbers_are_not_counters() {
    for f in fixtures().await {
        let a = key("text");
        f.store
            .put(&a, b"hello", MINUTE, PutCondition::Always)
            .await
            .unwrap();
        let error = f.store.increment(&a, 1, MINUTE, &[]).await.unwrap_err();
        assert_eq!(
            error.kind(),
            StoreErrorKind::Rejected,
            "{}: {error}",
            f.name
        );
        let error = f
            .store
            .get_counters(std::slice::from_ref(&a))
            .await
            .unwrap_err();
        assert_eq!(
            error.kind(),
            StoreErrorKind::NotACounter,
            "{}: {error}",
            f.name
        );
        assert_eq!(
            f.store.get(&a).await.unwrap().unwrap().value,
            b"hello",
            "{}",
            f.name
        );
    }
}

/// A read beside an increment that finds something other than a counter
/// fails the call, and says the call may have landed: the increment did,
/// and a caller that took the failure for nothing done might count the
/// request twice.
#[tokio::test]
async fn a_read_that_fails_after_the_increment_landed_is_ambiguous() {
    for f in fixtures().await {
        let counter = key("landed");
        let text = key("beside");
        f.store
            .put(&text, b"hello", MINUTE, PutCondition::Always)
            .await
            .unwrap();
        let error = f
            .store
            .increment(&counter, 1, MINUTE, &[&text[..]])
            .await
            .unwrap_err();
        assert_eq!(
            error.kind(),
            StoreErrorKind::NotACounter,
            "{}: {error}",
            f.name
        );
        assert!(error.is_ambiguous(), "{}: {error}", f.name);
        let read = f
            .store
            .get_counters(std::slice::from_ref(&counter))
            .await
            .unwrap();
        assert_eq!(read, [Some(1)], "{}: the increment landed", f.name);
    }
}

#[tokio::test]
async fn invalid_keys_and_values_are_rejected_before_anything_is_sent() {
    for f in fixtures().await {
        for bad in [
            Vec::new(),
            vec![b'k'; 251],
            b"has space".to_vec(),
            b"cr\r\nlf".to_vec(),
        ] {
            let error = f.store.increment(&bad, 1, MINUTE, &[]).await.unwrap_err();
            assert_eq!(
                error.kind(),
                StoreErrorKind::InvalidKey,
                "{}: {bad:?}",
                f.name
            );
            let error = f
                .store
                .get_counters(&[key("ok"), bad.clone()])
                .await
                .unwrap_err();
            assert_eq!(
                error.kind(),
                StoreErrorKind::InvalidKey,
                "{}: {bad:?}",
                f.name
            );
        }
        let ok = vec![b'k'; 250];
        f.store.increment(&ok, 1, MINUTE, &[]).await.unwrap();
        let error = f
            .store
            .put(&key("e"), b"", MINUTE, PutCondition::Always)
            .await
            .unwrap_err();
        assert_eq!(error.kind(), StoreErrorKind::Rejected, "{}", f.name);
    }
}

#[tokio::test]
async fn expiry_is_set_at_creation_and_never_extended() {
    for f in fixtures().await {
        let (counter, value) = (key("ttl"), key("ttl-put"));
        let ttl = Duration::from_secs(3);
        f.store.increment(&counter, 1, ttl, &[]).await.unwrap();
        f.store
            .put(&value, b"v", ttl, PutCondition::Always)
            .await
            .unwrap();
        let version = f.store.get(&value).await.unwrap().unwrap().version;
        pass(&f, Duration::from_millis(1_500)).await;
        // Writing to the counter does not push its expiry back.
        let still = f
            .store
            .increment(&counter, 1, Duration::from_secs(60), &[])
            .await
            .unwrap();
        assert_eq!(still.value, 2, "{}", f.name);
        f.store.decrement(&counter, 1).await.unwrap();
        pass(&f, Duration::from_millis(2_700)).await;
        assert_eq!(
            f.store
                .get_counters(std::slice::from_ref(&counter))
                .await
                .unwrap(),
            vec![None],
            "{}",
            f.name
        );
        assert_eq!(f.store.get(&value).await.unwrap(), None, "{}", f.name);
        // A write on the version of an item that expired finds it gone.
        assert_eq!(
            f.store
                .put(&value, b"w", ttl, PutCondition::Version(version))
                .await
                .unwrap(),
            PutOutcome::Vanished,
            "{}",
            f.name
        );
        // A counter that expired starts again from the delta.
        assert_eq!(
            f.store
                .increment(&counter, 4, ttl, &[])
                .await
                .unwrap()
                .value,
            4
        );
    }
}
