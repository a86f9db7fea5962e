//! The embedded store: memcached's rules, in process.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::fmt;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;

use super::{
    check_key, check_value, parse_counter, ttl_secs, Counters, ImmediateStore, PutCondition,
    PutOutcome, Store, UpdateStep, Versioned,
};
use crate::clock::{Clock, SystemClock};
use crate::error::{StoreError, StoreErrorKind};
use crate::key::KeyHasher;

const SHARDS: usize = 16;

thread_local! {
    /// Where [`ImmediateStore::update_now`] has its step write the new
    /// value.
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

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
    /// Seeds the hash of keys (shard and map), so that ids chosen by
    /// clients cannot be made to collide.
    hasher: KeyHasher,
}

/// One shard. A key is held once, shared by the map and its expiry entry.
struct Shard {
    items: HashMap<Arc<[u8]>, Item, KeyHasher>,
    /// When items are due to be looked at for expiry: `(when, created,
    /// key)`. Each item has exactly one live entry, at `Item::scheduled`,
    /// never after it expires; an entry whose item is gone, was created
    /// again (`created` differs) or was rescheduled (the time differs) is
    /// stale and dropped when it comes up. An item written again with a
    /// later expiry keeps its entry, which is moved on when it comes up.
    expiries: BinaryHeap<Reverse<Expiry>>,
}

/// An expiry entry: when, the item's `created`, its key.
type Expiry = (i64, u64, Arc<[u8]>);

struct Item {
    value: Value,
    version: u64,
    /// The version the item was created at, naming its expiry entry.
    created: u64,
    expires_at: i64,
    /// When its expiry entry comes up: at most `expires_at`.
    scheduled: i64,
}

enum Value {
    Counter(u64),
    Bytes(Vec<u8>),
}

/// The value of an item being written.
#[derive(Clone, Copy)]
enum New<'a> {
    Counter(u64),
    Bytes(&'a [u8]),
}

impl New<'_> {
    fn owned(self) -> Value {
        match self {
            New::Counter(n) => Value::Counter(n),
            New::Bytes(bytes) => Value::Bytes(bytes.to_vec()),
        }
    }
}

impl MemoryStore {
    /// A store on the system clock.
    pub fn new() -> Self {
        Self::with_clock(SystemClock)
    }

    /// A store whose items expire by `clock`.
    pub fn with_clock(clock: impl Clock + 'static) -> Self {
        let hasher = KeyHasher::random();
        Self {
            clock: Arc::new(clock),
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        items: HashMap::with_hasher(hasher),
                        expiries: BinaryHeap::new(),
                    })
                })
                .collect(),
            versions: AtomicU64::new(0),
            hasher,
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
        self.clock.unix_nanos().unwrap_or(i64::MAX)
    }

    fn shard(&self, key: &[u8]) -> MutexGuard<'_, Shard> {
        // The top bits: the map uses the low ones, so a shard's keys still
        // spread over all of its buckets.
        let index = (self.hasher.hash_one(key) >> 56) as usize % SHARDS;
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

    /// Writes a whole new item at `key`: value, version and expiry. An item
    /// already held there (live, or expired and not reclaimed yet) is
    /// overwritten in place, keeping its key, its byte buffer (unless far
    /// too big for the value) and its expiry entry, which is only
    /// rescheduled if the new expiry comes before it; otherwise the key is
    /// stored once, shared by the map and a new expiry entry.
    fn write(&mut self, key: &[u8], value: New<'_>, version: u64, expires_at: i64) {
        let Some(item) = self.items.get_mut(key) else {
            return self.insert(key, value.owned(), version, expires_at);
        };
        match (&mut item.value, value) {
            (Value::Bytes(bytes), New::Bytes(value))
                if bytes.capacity() <= 2 * value.len() + 64 =>
            {
                bytes.clear();
                bytes.extend_from_slice(value);
            }
            (held, value) => *held = value.owned(),
        }
        if let Some(entry) = item.renew(version, expires_at) {
            self.schedule(key, entry);
        }
    }

    /// A new expiry entry `(when, created)` for the item held at `key`.
    fn schedule(&mut self, key: &[u8], (when, created): (i64, u64)) {
        let (key, _) = self.items.get_key_value(key).expect("a held item");
        let key = Arc::clone(key);
        self.expiries.push(Reverse((when, created, key)));
    }

    fn insert(&mut self, key: &[u8], value: Value, version: u64, expires_at: i64) {
        let key: Arc<[u8]> = Arc::from(key);
        self.expiries
            .push(Reverse((expires_at, version, Arc::clone(&key))));
        self.items.insert(
            key,
            Item {
                value,
                version,
                created: version,
                expires_at,
                scheduled: expires_at,
            },
        );
    }

    fn reclaim(&mut self, now: i64) {
        while let Some(Reverse((when, _, _))) = self.expiries.peek() {
            if *when > now {
                break;
            }
            let Reverse((when, created, key)) = self.expiries.pop().expect("peeked");
            let Some(item) = self.items.get_mut(&key) else {
                continue; // deleted
            };
            if item.created != created || item.scheduled != when {
                continue; // a stale entry: the item has a newer one
            }
            if item.expires_at <= now {
                self.items.remove(&key);
            } else {
                // Written again since, with a later expiry: look again then.
                item.scheduled = item.expires_at;
                let at = item.expires_at;
                self.expiries.push(Reverse((at, created, key)));
            }
        }
    }
}

impl Item {
    /// The new version and expiry of an item whose value was just
    /// replaced; returns the expiry entry to add if its current one comes
    /// too late.
    fn renew(&mut self, version: u64, expires_at: i64) -> Option<(i64, u64)> {
        self.version = version;
        self.expires_at = expires_at;
        (expires_at < self.scheduled).then(|| {
            self.scheduled = expires_at;
            (expires_at, self.created)
        })
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

impl ImmediateStore for MemoryStore {
    fn increment_now(
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
                    shard.write(key, New::Counter(delta), version, Self::expiry(now, ttl));
                    delta
                }
            }
        };
        // The increment has landed: a read failing now must say so, as
        // memcached's does.
        let read = also_read
            .iter()
            .map(|k| self.read_counter(k, now).map_err(StoreError::ambiguous))
            .collect::<Result<_, _>>()?;
        Ok(Counters { value, read })
    }

    fn decrement_now(&self, key: &[u8], delta: u64) -> Result<Option<u64>, StoreError> {
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

    fn update_now(&self, key: &[u8], step: &mut UpdateStep<'_>) -> Result<(), StoreError> {
        check_key(key)?;
        let now = self.now();
        let mut shard = self.shard(key);
        shard.reclaim(now);
        // The new value is written into a buffer of this thread's, then
        // copied into the item's own: no allocation once both have grown.
        SCRATCH.with_borrow_mut(|next| {
            next.clear();
            let digits;
            let current = match shard.live(key, now).map(|item| &item.value) {
                None => None,
                Some(Value::Bytes(bytes)) => Some(bytes.as_slice()),
                Some(Value::Counter(n)) => {
                    digits = n.to_string();
                    Some(digits.as_bytes())
                }
            };
            let Some(ttl) = step(current, next) else {
                return Ok(());
            };
            check_value(next)?;
            let version = self.next_version();
            shard.write(key, New::Bytes(next), version, Self::expiry(now, ttl));
            Ok(())
        })
    }
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
        self.increment_now(key, delta, ttl, also_read)
    }

    async fn decrement(&self, key: &[u8], delta: u64) -> Result<Option<u64>, StoreError> {
        self.decrement_now(key, delta)
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
        shard.write(key, New::Bytes(value), version, Self::expiry(now, ttl));
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

    fn immediate(&self) -> Option<&dyn ImmediateStore> {
        Some(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ManualClock;

    fn expiries(store: &MemoryStore) -> usize {
        store.shards.iter().map(|s| lock(s).expiries.len()).sum()
    }

    #[tokio::test]
    async fn rewriting_a_key_keeps_one_expiry_entry_and_honours_each_ttl() {
        let clock = ManualClock::from_unix_secs(1_000);
        let store = MemoryStore::with_clock(clock.clone());
        let secs = Duration::from_secs;
        // A thousand writes of one key, each pushing its expiry later: one
        // entry, moved on when it comes up.
        for _ in 0..1_000 {
            store
                .put(b"k", b"v", secs(2), PutCondition::Always)
                .await
                .unwrap();
            clock.advance(Duration::from_millis(10));
        }
        assert_eq!(expiries(&store), 1);
        clock.advance(secs(2));
        store.purge_expired();
        assert!(store.is_empty());
        assert_eq!(expiries(&store), 0);

        // Written with a shorter lifetime than its entry's: it expires on
        // the new, earlier schedule.
        store
            .put(b"k", b"long", secs(60), PutCondition::Always)
            .await
            .unwrap();
        store
            .put(b"k", b"short", secs(1), PutCondition::Always)
            .await
            .unwrap();
        assert_eq!(expiries(&store), 2);
        assert_eq!(store.get(b"k").await.unwrap().unwrap().value, b"short");
        clock.advance(secs(1));
        store.purge_expired();
        assert!(store.is_empty());
        assert_eq!(expiries(&store), 1, "the stale entry is still queued");
        clock.advance(secs(60));
        store.purge_expired();
        assert_eq!(expiries(&store), 0);

        // A counter created again over an expired item that was not
        // reclaimed yet starts afresh, with its own lifetime.
        store.increment(b"c", 5, secs(1), &[]).await.unwrap();
        clock.advance(secs(1));
        let again = store.increment(b"c", 2, secs(10), &[]).await.unwrap();
        assert_eq!(again.value, 2);
        clock.advance(secs(9));
        store.purge_expired();
        assert_eq!(
            store.get_counters(&[b"c".to_vec()]).await.unwrap(),
            [Some(2)]
        );
        clock.advance(secs(1));
        store.purge_expired();
        assert!(store.is_empty());
    }
}
