//! A store decorator that counts calls, to measure what a decision costs.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::{Counters, PutCondition, PutOutcome, Store, Versioned};
use crate::error::StoreError;

/// Counts of store calls. Each call is one round trip to one server for
/// keys of one client (see the [contract](crate::store)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreCalls {
    /// [`Store::increment`] calls.
    pub increments: u64,
    /// [`Store::decrement`] calls.
    pub decrements: u64,
    /// [`Store::get_counters`] calls.
    pub counter_reads: u64,
    /// [`Store::get`] calls.
    pub gets: u64,
    /// [`Store::version`] calls.
    pub versions: u64,
    /// [`Store::put`] and [`Store::put_versioned`] calls.
    pub puts: u64,
    /// [`Store::delete`] calls.
    pub deletes: u64,
    /// Keys named across all calls.
    pub keys: u64,
}

impl StoreCalls {
    /// All calls, that is, round trips.
    pub fn round_trips(&self) -> u64 {
        self.increments
            + self.decrements
            + self.counter_reads
            + self.gets
            + self.versions
            + self.puts
            + self.deletes
    }
}

/// Wraps a store and counts the calls made through it.
///
/// ```
/// use memcache_ratelimit::store::{CountingStore, MemoryStore};
/// use memcache_ratelimit::{FixedWindow, Quota, RateLimiter};
/// use std::sync::Arc;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let store = Arc::new(CountingStore::new(MemoryStore::new()));
/// let limiter = FixedWindow::builder("10/minute".parse()?, store.clone()).build()?;
/// limiter.check(b"alice").await?;
/// assert_eq!(store.calls().round_trips(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct CountingStore<S> {
    inner: S,
    counts: Arc<[AtomicU64; 8]>,
}

impl<S: Store> CountingStore<S> {
    /// Counts the calls made to `inner`.
    pub fn new(inner: S) -> Self {
        Self {
            inner,
            counts: Arc::new(Default::default()),
        }
    }

    /// The wrapped store.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The counts so far.
    pub fn calls(&self) -> StoreCalls {
        let n = |i: usize| self.counts[i].load(Ordering::Relaxed);
        StoreCalls {
            increments: n(0),
            decrements: n(1),
            counter_reads: n(2),
            gets: n(3),
            puts: n(4),
            deletes: n(5),
            keys: n(6),
            versions: n(7),
        }
    }

    /// Sets every count back to zero.
    pub fn clear(&self) {
        for count in self.counts.iter() {
            count.store(0, Ordering::Relaxed);
        }
    }

    fn count(&self, call: usize, keys: usize) {
        self.counts[call].fetch_add(1, Ordering::Relaxed);
        self.counts[6].fetch_add(keys as u64, Ordering::Relaxed);
    }
}

#[async_trait]
impl<S: Store> Store for CountingStore<S> {
    async fn increment(
        &self,
        key: &[u8],
        delta: u64,
        ttl: Duration,
        also_read: &[&[u8]],
    ) -> Result<Counters, StoreError> {
        self.count(0, 1 + also_read.len());
        self.inner.increment(key, delta, ttl, also_read).await
    }

    async fn decrement(&self, key: &[u8], delta: u64) -> Result<Option<u64>, StoreError> {
        self.count(1, 1);
        self.inner.decrement(key, delta).await
    }

    async fn get_counters(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<u64>>, StoreError> {
        self.count(2, keys.len());
        self.inner.get_counters(keys).await
    }

    async fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        self.count(3, 1);
        self.inner.get(key).await
    }

    async fn version(&self, key: &[u8]) -> Result<Option<u64>, StoreError> {
        self.count(7, 1);
        self.inner.version(key).await
    }

    async fn put_versioned(
        &self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
        condition: PutCondition,
    ) -> Result<(PutOutcome, Option<u64>), StoreError> {
        self.count(4, 1);
        self.inner.put_versioned(key, value, ttl, condition).await
    }

    async fn delete(&self, keys: &[Vec<u8>]) -> Result<usize, StoreError> {
        self.count(5, keys.len());
        self.inner.delete(keys).await
    }
}
