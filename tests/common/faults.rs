//! A store decorator that makes the next `k` compare-and-swap writes lose,
//! whatever they carry, to drive the optimistic loop's retry path.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use memcache_ratelimit::store::{Counters, PutCondition, PutOutcome, Store, Versioned};
use memcache_ratelimit::StoreError;

#[derive(Debug)]
pub struct LosingCas {
    inner: Arc<dyn Store>,
    remaining: AtomicU64,
}

impl LosingCas {
    pub fn new(inner: Arc<dyn Store>) -> Self {
        Self {
            inner,
            remaining: AtomicU64::new(0),
        }
    }

    /// The next `k` conditional writes report a conflict and write nothing.
    pub fn lose_next(&self, k: u64) {
        self.remaining.store(k, Ordering::SeqCst);
    }

    fn take_loss(&self) -> bool {
        self.remaining
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

#[async_trait]
impl Store for LosingCas {
    async fn increment(
        &self,
        key: &[u8],
        delta: u64,
        ttl: Duration,
        also_read: &[Vec<u8>],
    ) -> Result<Counters, StoreError> {
        self.inner.increment(key, delta, ttl, also_read).await
    }

    async fn decrement(&self, key: &[u8], delta: u64) -> Result<Option<u64>, StoreError> {
        self.inner.decrement(key, delta).await
    }

    async fn get_counters(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<u64>>, StoreError> {
        self.inner.get_counters(keys).await
    }

    async fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        self.inner.get(key).await
    }

    async fn put(
        &self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
        condition: PutCondition,
    ) -> Result<PutOutcome, StoreError> {
        if condition != PutCondition::Always && self.take_loss() {
            return Ok(PutOutcome::Conflict);
        }
        self.inner.put(key, value, ttl, condition).await
    }

    async fn delete(&self, keys: &[Vec<u8>]) -> Result<usize, StoreError> {
        self.inner.delete(keys).await
    }
}
