//! The benchmarks' connections to the memcached under test: the raw
//! meta-protocol client of the baselines and the library's
//! `MemcachedStore`, both with the same connection settings.

use std::sync::Arc;
use std::time::Duration;

use memcache::exp::AsyncMetaClient;
use memcache_ratelimit::{Error, Limiter, MemcachedStore};

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

/// One decision for `id` before a measurement, asked again on
/// `DeadlineExceeded` (up to 10 times): under callgrind, which slows the
/// program tens of times, a first decision that dials memcached, or any
/// decision on a busy machine, can outlast the limiter's deadline. Only
/// what follows is counted.
///
/// # Panics
///
/// On any other error, or a tenth missed deadline: the measurement would
/// mean nothing.
pub async fn warm_up_decision(limiter: &dyn Limiter, id: &[u8]) {
    const ATTEMPTS: usize = 10;
    for attempt in 1..=ATTEMPTS {
        match limiter.check(id).await {
            Ok(_) => return,
            Err(Error::DeadlineExceeded(_)) if attempt < ATTEMPTS => continue,
            Err(error) => panic!("a warm-up decision: {error}"),
        }
    }
}
