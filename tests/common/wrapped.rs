//! One store decorator for the tests' fault and timing wrappers: every
//! call goes on to the store inside, and [`Hooks`] may pause before a
//! read or write, answer a write in the store's place, or see what the
//! store answered.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use memcache_ratelimit::store::{Counters, PutCondition, PutOutcome, Store, Versioned};
use memcache_ratelimit::StoreError;

/// What a wrapper does around the calls it forwards; each hook does
/// nothing unless a wrapper says otherwise.
#[async_trait]
pub trait Hooks: Send + Sync + fmt::Debug {
    /// Runs before each `get` and `put` (the compare-and-swap read and
    /// write) goes on to the store.
    async fn before_get_or_put(&self) {}

    /// An outcome for a `put` with `condition` in place of the store's, or
    /// `None` to send it on.
    fn instead_of_put(&self, _condition: PutCondition) -> Option<PutOutcome> {
        None
    }

    /// Sees an increment of `key` by `delta` with lifetime `ttl`, and what
    /// the store answered.
    fn incremented(&self, _key: &[u8], _delta: u64, _ttl: Duration, _counters: &Counters) {}

    /// Sees a `put` at `key` with lifetime `ttl`, and what the store
    /// answered.
    fn put_answered(&self, _key: &[u8], _ttl: Duration, _outcome: PutOutcome) {}
}

/// A store that forwards every call to `inner`, with `hooks` around them.
#[derive(Debug)]
pub struct Wrapped<H> {
    inner: Arc<dyn Store>,
    pub hooks: H,
}

impl<H> Wrapped<H> {
    pub fn with(inner: Arc<dyn Store>, hooks: H) -> Self {
        Self { inner, hooks }
    }
}

impl<H: Default> Wrapped<H> {
    pub fn new(inner: Arc<dyn Store>) -> Self {
        Self::with(inner, H::default())
    }
}

#[async_trait]
impl<H: Hooks> Store for Wrapped<H> {
    async fn increment(
        &self,
        key: &[u8],
        delta: u64,
        ttl: Duration,
        also_read: &[&[u8]],
    ) -> Result<Counters, StoreError> {
        let counters = self.inner.increment(key, delta, ttl, also_read).await?;
        self.hooks.incremented(key, delta, ttl, &counters);
        Ok(counters)
    }

    async fn decrement(&self, key: &[u8], delta: u64) -> Result<Option<u64>, StoreError> {
        self.inner.decrement(key, delta).await
    }

    async fn get_counters(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<u64>>, StoreError> {
        self.inner.get_counters(keys).await
    }

    async fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        self.hooks.before_get_or_put().await;
        self.inner.get(key).await
    }

    /// Tells no version: every decision through the hooks reads first,
    /// so the hooks see each read and write as the tests expect.
    async fn put_versioned(
        &self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
        condition: PutCondition,
    ) -> Result<(PutOutcome, Option<u64>), StoreError> {
        self.hooks.before_get_or_put().await;
        if let Some(outcome) = self.hooks.instead_of_put(condition) {
            return Ok((outcome, None));
        }
        let outcome = self.inner.put(key, value, ttl, condition).await?;
        self.hooks.put_answered(key, ttl, outcome);
        Ok((outcome, None))
    }

    async fn delete(&self, keys: &[Vec<u8>]) -> Result<usize, StoreError> {
        self.inner.delete(keys).await
    }
}
