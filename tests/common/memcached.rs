//! Real memcached processes, from the workspace's test kit (started on
//! free loopback ports, stopped when dropped; a missing binary fails the
//! test with instructions, never skips), and stores on them.

#[cfg(feature = "memcached")]
use std::sync::Arc;
#[cfg(feature = "memcached")]
use std::time::Duration;

#[cfg(feature = "memcached")]
use memcache_ratelimit::MemcachedStore;
pub use memcache_ratelimit_testkit::Memcached;

/// A store on `addresses` whose own timeouts (5 s) are far beyond any
/// limiter's deadline, so the deadline is what ends a wait on a hung
/// server.
#[cfg(feature = "memcached")]
pub async fn patient_store(addresses: Vec<String>) -> Arc<MemcachedStore> {
    Arc::new(
        MemcachedStore::builder()
            .servers(addresses)
            .io_timeout(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(5))
            .build()
            .await
            .unwrap(),
    )
}
