//! A store error names the server it came from and keeps the error that
//! caused it, so an operator can tell which memcached failed and why.

use crate::common;

use std::error::Error as _;
use std::time::Duration;

use common::memcached::Memcached;
use memcache_ratelimit::store::StoreErrorKind;
use memcache_ratelimit::store::{ClassicStore, Protocol, Store};
use memcache_ratelimit::{MemcachedStore, StoreError};

/// The I/O error at the end of `error`'s chain of sources.
fn io_cause(error: &StoreError) -> Option<std::io::ErrorKind> {
    let mut source = error.source();
    while let Some(cause) = source {
        if let Some(io) = cause.downcast_ref::<std::io::Error>() {
            return Some(io.kind());
        }
        source = cause.source();
    }
    None
}

async fn refused(name: &str, store: &dyn Store) {
    let error = store
        .increment(b"rl:alice_1", 1, Duration::from_secs(60), &[])
        .await
        .expect_err("nothing listens on port 1");
    eprintln!("{name}: {error}");
    assert_eq!(error.kind(), StoreErrorKind::Io, "{name}: {error}");
    assert_eq!(error.server(), Some("127.0.0.1:1"), "{name}: {error}");
    assert!(
        error.to_string().contains("from 127.0.0.1:1"),
        "{name}: {error}"
    );
    assert_eq!(
        io_cause(&error),
        Some(std::io::ErrorKind::ConnectionRefused),
        "{name}: {error:?}"
    );
}

#[tokio::test]
async fn a_refused_connection_is_named_and_kept_as_the_cause() {
    refused("meta", &*common::refusing_store().await).await;
    let classic = MemcachedStore::builder()
        .server("127.0.0.1:1")
        .protocol(Protocol::Classic)
        .build()
        .await
        .unwrap();
    refused("memcached store, classic protocol", &classic).await;
    let classic = ClassicStore::builder()
        .server("127.0.0.1:1")
        .build()
        .unwrap();
    refused("classic store", &classic).await;
}

#[tokio::test]
async fn a_timeout_names_the_server_that_did_not_answer() {
    let server = Memcached::start();
    let store = MemcachedStore::builder()
        .server(server.address())
        .io_timeout(Duration::from_millis(50))
        .build()
        .await
        .unwrap();
    server.signal("STOP");
    let error = store
        .increment(b"rl:bob_1", 1, Duration::from_secs(60), &[])
        .await
        .expect_err("a stopped server does not answer");
    server.signal("CONT");
    assert_eq!(error.kind(), StoreErrorKind::Timeout, "{error}");
    assert_eq!(error.server(), Some(server.address().as_str()), "{error}");
    assert!(error.is_ambiguous(), "an increment was written: {error}");
}
