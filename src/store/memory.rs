//! The embedded store: memcached's rules, in process.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;

use super::{
    check_key, check_value, parse_counter, ttl_secs, Counters, PutCondition, PutOutcome, Store,
    Versioned,
};
use crate::clock::{Clock, SystemClock};
use crate::error::{StoreError, StoreErrorKind};

const SHARDS: usize = 16;

/// An in-process store that follows memcached's rules (see the
/// [contract](crate::store)): expiry is fixed when an item is created and
/// read from the injected clock, versions change on every write, counters
/// wrap and saturate as memcached's do. Expired items are reclaimed as the
/// store is written to, so a stream of one-shot clients leaves the store
/// bounded by the traffic of one TTL, not by all the traffic ever seen.
///
/// It is the store for a single instance, for tests and for simulations:
/// with a [`ManualClock`](crate::ManualClock) everything is deterministic.
///
/// ```
/// use memcache_ratelimit::store::{MemoryStore, Store};
/// use memcache_ratelimit::ManualClock;
/// use std::time::Duration;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let clock = ManualClock::from_unix_secs(1_000);
/// let store = MemoryStore::with_clock(clock.clone());
/// let hits = store.increment(b"hits", 1, Duration::from_secs(10), &[]).await?;
/// assert_eq!(hits.value, 1);
/// clock.advance(Duration::from_secs(10));
/// assert_eq!(store.get_counters(&[b"hits".to_vec()]).await?, vec![None]);
/// # Ok::<(), memcache_ratelimit::StoreError>(())
/// # }).unwrap();
/// ```
pub struct MemoryStore {
    clock: Arc<dyn Clock>,
    shards: Box<[Mutex<Shard>]>,
    versions: AtomicU64,
}

#[derive(Default)]
struct Shard {
    items: HashMap<Vec<u8>, Item>,
    /// When each item expires, with the version it was created at, so a key
    /// deleted and created again is not reclaimed on its old schedule.
    expiries: BinaryHeap<Reverse<(i64, u64, Vec<u8>)>>,
}

struct Item {
    value: Value,
    version: u64,
    created: u64,
    expires_at: i64,
}

enum Value {
    Counter(u64),
    Bytes(Vec<u8>),
}

impl MemoryStore {
    /// A store on the system clock.
    pub fn new() -> Self {
        Self::with_clock(SystemClock)
    }

    /// A store whose items expire by `clock`.
    pub fn with_clock(clock: impl Clock + 'static) -> Self {
        Self {
            clock: Arc::new(clock),
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            versions: AtomicU64::new(0),
        }
    }

    /// How many items are held, counting expired ones not yet reclaimed.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| lock(s).items.len()).sum()
    }

    /// Whether no item is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every expired item now, rather than as writes come.
    pub fn purge_expired(&self) {
        let now = self.now();
        for shard in self.shards.iter() {
            lock(shard).reclaim(now);
        }
    }

    fn now(&self) -> i64 {
        self.clock.now().timestamp_nanos_opt().unwrap_or(i64::MAX)
    }

    fn shard(&self, key: &[u8]) -> MutexGuard<'_, Shard> {
        let index = xxhash_rust::xxh3::xxh3_64(key) as usize % SHARDS;
        lock(&self.shards[index])
    }

    fn next_version(&self) -> u64 {
        self.versions.fetch_add(1, Ordering::Relaxed) + 1
    }

    fn expiry(now: i64, ttl: Duration) -> i64 {
        let secs = i64::try_from(ttl_secs(ttl)).unwrap_or(i64::MAX);
        now.saturating_add(secs.saturating_mul(1_000_000_000))
    }

    fn read_counter(&self, key: &[u8], now: i64) -> Result<Option<u64>, StoreError> {
        let shard = self.shard(key);
        match shard.live(key, now) {
            None => Ok(None),
            Some(Item {
                value: Value::Counter(n),
                ..
            }) => Ok(Some(*n)),
            Some(Item {
                value: Value::Bytes(bytes),
                ..
            }) => parse_counter(key, bytes).map(Some),
        }
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for MemoryStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryStore")
            .field("clock", &self.clock)
            .field("items", &self.len())
            .finish()
    }
}

// A poisoned shard only means a panic elsewhere while it was held; every
// write below leaves the map consistent at each step, so keep serving.
fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    shard
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shard {
    fn live(&self, key: &[u8], now: i64) -> Option<&Item> {
        self.items.get(key).filter(|item| item.expires_at > now)
    }

    fn live_mut(&mut self, key: &[u8], now: i64) -> Option<&mut Item> {
        self.items.get_mut(key).filter(|item| item.expires_at > now)
    }

    fn insert(&mut self, key: &[u8], value: Value, version: u64, expires_at: i64) {
        self.expiries
            .push(Reverse((expires_at, version, key.to_vec())));
        self.items.insert(
            key.to_vec(),
            Item {
                value,
                version,
                created: version,
                expires_at,
            },
        );
    }

    fn reclaim(&mut self, now: i64) {
        while let Some(Reverse((expires_at, _, _))) = self.expiries.peek() {
            if *expires_at > now {
                break;
            }
            let Reverse((_, created, key)) = self.expiries.pop().expect("peeked");
            if self
                .items
                .get(&key)
                .is_some_and(|item| item.created == created)
            {
                self.items.remove(&key);
            }
        }
    }
}

fn not_a_number(key: &[u8]) -> StoreError {
    StoreError::new(
        StoreErrorKind::Rejected,
        format!(
            "cannot increment or decrement the non-numeric value of {}",
            String::from_utf8_lossy(key)
        ),
    )
}

#[async_trait]
impl Store for MemoryStore {
    async fn increment(
        &self,
        key: &[u8],
        delta: u64,
        ttl: Duration,
        also_read: &[Vec<u8>],
    ) -> Result<Counters, StoreError> {
        check_key(key)?;
        for read in also_read {
            check_key(read)?;
        }
        let now = self.now();
        let value = {
            let mut shard = self.shard(key);
            shard.reclaim(now);
            let version = self.next_version();
            match shard.live_mut(key, now) {
                Some(item) => {
                    let current = match &item.value {
                        Value::Counter(n) => *n,
                        Value::Bytes(bytes) => {
                            parse_counter(key, bytes).map_err(|_| not_a_number(key))?
                        }
                    };
                    let next = current.wrapping_add(delta);
                    item.value = Value::Counter(next);
                    item.version = version;
                    next
                }
                None => {
                    shard.insert(key, Value::Counter(delta), version, Self::expiry(now, ttl));
                    delta
                }
            }
        };
        let read = also_read
            .iter()
            .map(|k| self.read_counter(k, now))
            .collect::<Result<_, _>>()?;
        Ok(Counters { value, read })
    }

    async fn decrement(&self, key: &[u8], delta: u64) -> Result<Option<u64>, StoreError> {
        check_key(key)?;
        let now = self.now();
        let version = self.next_version();
        let mut shard = self.shard(key);
        let Some(item) = shard.live_mut(key, now) else {
            return Ok(None);
        };
        let current = match &item.value {
            Value::Counter(n) => *n,
            Value::Bytes(bytes) => parse_counter(key, bytes).map_err(|_| not_a_number(key))?,
        };
        let next = current.saturating_sub(delta);
        item.value = Value::Counter(next);
        item.version = version;
        Ok(Some(next))
    }

    async fn get_counters(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<u64>>, StoreError> {
        for key in keys {
            check_key(key)?;
        }
        let now = self.now();
        keys.iter().map(|k| self.read_counter(k, now)).collect()
    }

    async fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        check_key(key)?;
        let now = self.now();
        let shard = self.shard(key);
        Ok(shard.live(key, now).map(|item| Versioned {
            value: match &item.value {
                Value::Counter(n) => n.to_string().into_bytes(),
                Value::Bytes(bytes) => bytes.clone(),
            },
            version: item.version,
        }))
    }

    async fn put(
        &self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
        condition: PutCondition,
    ) -> Result<PutOutcome, StoreError> {
        check_key(key)?;
        check_value(value)?;
        let now = self.now();
        let mut shard = self.shard(key);
        shard.reclaim(now);
        let current = shard.live(key, now).map(|item| item.version);
        let allowed = match condition {
            PutCondition::Always => true,
            PutCondition::Absent => current.is_none(),
            PutCondition::Version(version) => current == Some(version),
        };
        if !allowed {
            return Ok(PutOutcome::Conflict);
        }
        let version = self.next_version();
        shard.insert(
            key,
            Value::Bytes(value.to_vec()),
            version,
            Self::expiry(now, ttl),
        );
        Ok(PutOutcome::Stored)
    }

    async fn delete(&self, keys: &[Vec<u8>]) -> Result<usize, StoreError> {
        for key in keys {
            check_key(key)?;
        }
        let now = self.now();
        let mut deleted = 0;
        for key in keys {
            let mut shard = self.shard(key);
            if shard.live(key, now).is_some() {
                deleted += 1;
            }
            shard.items.remove(key.as_slice());
        }
        Ok(deleted)
    }
}
