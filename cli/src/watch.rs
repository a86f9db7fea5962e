//! A store decorator that remembers which key a failing call was about, so
//! the command can name the memcached server that failed.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use memcache_ratelimit::store::{Counters, PutCondition, PutOutcome, Store, Versioned};
use memcache_ratelimit::StoreError;

/// What the store was last asked, and how its last failure went.
#[derive(Debug, Default, Clone)]
pub struct Seen {
    /// The key of the last call made (the one still waiting, when a
    /// deadline passed).
    pub last_key: Option<Vec<u8>>,
    /// The last call's failure, if it failed: its key and the store's
    /// error.
    pub failure: Option<(Vec<u8>, StoreError)>,
}

/// `inner`, with every call's key and failure noted in [`Seen`].
#[derive(Debug)]
pub struct Watched {
    inner: Arc<dyn Store>,
    seen: Mutex<Seen>,
}

impl Watched {
    pub fn new(inner: Arc<dyn Store>) -> Self {
        Self {
            inner,
            seen: Mutex::default(),
        }
    }

    /// What was noted so far.
    pub fn seen(&self) -> Seen {
        self.seen
            .lock()
            .map(|seen| seen.clone())
            .unwrap_or_default()
    }

    fn note<T>(&self, key: &[u8], outcome: Result<T, StoreError>) -> Result<T, StoreError> {
        if let (Err(error), Ok(mut seen)) = (&outcome, self.seen.lock()) {
            seen.failure = Some((key.to_vec(), error.clone()));
        }
        outcome
    }

    fn asking(&self, key: &[u8]) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.last_key = Some(key.to_vec());
            seen.failure = None;
        }
    }
}

/// The key a call on several keys is reported under: the first.
fn first(keys: &[Vec<u8>]) -> &[u8] {
    keys.first().map(Vec::as_slice).unwrap_or_default()
}

#[async_trait]
impl Store for Watched {
    async fn increment(
        &self,
        key: &[u8],
        delta: u64,
        ttl: Duration,
        also_read: &[&[u8]],
    ) -> Result<Counters, StoreError> {
        self.asking(key);
        let outcome = self.inner.increment(key, delta, ttl, also_read).await;
        self.note(key, outcome)
    }

    async fn decrement(&self, key: &[u8], delta: u64) -> Result<Option<u64>, StoreError> {
        self.asking(key);
        let outcome = self.inner.decrement(key, delta).await;
        self.note(key, outcome)
    }

    async fn get_counters(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<u64>>, StoreError> {
        self.asking(first(keys));
        let outcome = self.inner.get_counters(keys).await;
        self.note(first(keys), outcome)
    }

    async fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        self.asking(key);
        let outcome = self.inner.get(key).await;
        self.note(key, outcome)
    }

    async fn version(&self, key: &[u8]) -> Result<Option<u64>, StoreError> {
        self.asking(key);
        let outcome = self.inner.version(key).await;
        self.note(key, outcome)
    }

    async fn put_versioned(
        &self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
        condition: PutCondition,
    ) -> Result<(PutOutcome, Option<u64>), StoreError> {
        self.asking(key);
        let outcome = self.inner.put_versioned(key, value, ttl, condition).await;
        self.note(key, outcome)
    }

    async fn delete(&self, keys: &[Vec<u8>]) -> Result<usize, StoreError> {
        self.asking(first(keys));
        let outcome = self.inner.delete(keys).await;
        self.note(first(keys), outcome)
    }
}
