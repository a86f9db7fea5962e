//! The benchmarks' connections to the memcached under test: the raw
//! meta-protocol client of the baselines and the library's
//! `MemcachedStore`, both with the same connection settings.

use std::sync::Arc;
use std::time::Duration;

use memcache::exp::AsyncMetaClient;
use memcache_ratelimit::MemcachedStore;

/// How long a connection may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);
/// Idle connections kept open, more than any benchmark has in flight.
const MAX_IDLE: usize = 1024;

/// A raw meta-protocol client of the memcached at `address`.
pub async fn raw_client(address: &str, io_timeout: Duration) -> AsyncMetaClient {
    AsyncMetaClient::builder()
        .io_timeout(Some(io_timeout))
        .connect_timeout(Some(CONNECT_TIMEOUT))
        .max_idle(MAX_IDLE)
        .connect_async(address)
        .await
        .expect("connect the raw client")
}

/// A `MemcachedStore` on the memcached at `address`.
pub async fn store(address: &str, io_timeout: Duration) -> Arc<MemcachedStore> {
    Arc::new(
        MemcachedStore::builder()
            .server(address)
            .io_timeout(io_timeout)
            .connect_timeout(CONNECT_TIMEOUT)
            .max_idle(MAX_IDLE)
            .build()
            .await
            .expect("build the store"),
    )
}
