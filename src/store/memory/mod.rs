//! The embedded store: memcached's rules, in process.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;

use super::{
    check_key, check_value, parse_counter, ttl_secs, Counters, ImmediateStore, PutCondition,
    PutOutcome, Store, Versioned,
};
use crate::clock::{Clock, CoarseClock};
use crate::error::StoreError;
use crate::key::KeyHasher;

mod immediate;
mod item;
mod shard;

use self::item::Value;
use self::shard::{lock, Hashed, Shard};

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
    /// Seeds the hash of keys (shard and map), so that ids chosen by
    /// clients cannot be made to collide.
    hasher: KeyHasher,
    /// Whether a shard has held [`OUTGROWS_CACHE`](shard::OUTGROWS_CACHE)
    /// items, so that [`ImmediateStore::warm`] is worth its lookup.
    outgrown: Arc<AtomicBool>,
}

impl MemoryStore {
    /// A store whose items expire by the kernel's coarse clock
    /// ([`CoarseClock`]): read on every call, it costs a few nanoseconds
    /// where the precise one costs tens, and like memcached's own clock
    /// it may lag by a tick (1 to 4 ms), which an expiry in whole seconds
    /// does not notice.
    pub fn new() -> Self {
        Self::with_clock(CoarseClock)
    }

    /// A store whose items expire by `clock`.
    pub fn with_clock(clock: impl Clock + 'static) -> Self {
        let hasher = KeyHasher::random();
        let outgrown = Arc::new(AtomicBool::new(false));
        Self {
            clock: Arc::new(clock),
            shards: (0..SHARDS)
                .map(|_| Mutex::new(Shard::new(hasher, outgrown.clone())))
                .collect(),
            hasher,
            outgrown,
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

    /// Whether the items have outgrown a core's caches: once a shard has
    /// held [`OUTGROWS_CACHE`](shard::OUTGROWS_CACHE) of them.
    fn outgrown(&self) -> bool {
        self.outgrown.load(Ordering::Relaxed)
    }

    fn now(&self) -> i64 {
        self.clock.unix_nanos().unwrap_or(i64::MAX)
    }

    /// `key` with its hash, which picks its shard and finds it there.
    fn hashed<'a>(&self, key: &'a [u8]) -> Hashed<'a> {
        Hashed::new(&self.hasher, key)
    }

    fn shard(&self, key: Hashed<'_>) -> MutexGuard<'_, Shard> {
        lock(&self.shards[shard_index(key.hash)])
    }

    fn expiry(now: i64, ttl: Duration) -> i64 {
        let secs = i64::try_from(ttl_secs(ttl)).unwrap_or(i64::MAX);
        now.saturating_add(secs.saturating_mul(1_000_000_000))
    }

    fn read_counter(&self, key: &[u8], now: i64) -> Result<Option<u64>, StoreError> {
        let hashed = self.hashed(key);
        let shard = self.shard(hashed);
        match shard.live(hashed, now).map(|item| item.value()) {
            None => Ok(None),
            Some(Value::Counter(n)) => Ok(Some(n)),
            Some(Value::Bytes(bytes)) => parse_counter(key, bytes).map(Some),
        }
    }
}

/// The shard of a key's `hash`: bits that its shard's table does not use.
/// The table finds a key's group of slots by the low bits and tells its
/// slot among them by a tag of the top 7 ([hashbrown]'s Swiss table).
/// Picked by top bits, every key of a shard shared the tag's first ones,
/// leaving 16 tags of 128: a lookup compared its key with 8 times as many
/// other items, each a cache line more to fetch.
///
/// [hashbrown]: https://github.com/rust-lang/hashbrown
fn shard_index(hash: u64) -> usize {
    (hash >> 40) as usize % SHARDS
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
#[async_trait]
impl Store for MemoryStore {
    async fn increment(
        &self,
        key: &[u8],
        delta: u64,
        ttl: Duration,
        also_read: &[&[u8]],
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
        let hashed = self.hashed(key);
        let now = self.now();
        let shard = self.shard(hashed);
        Ok(shard.live(hashed, now).map(|item| Versioned {
            value: match item.value() {
                Value::Counter(n) => n.to_string().into_bytes(),
                Value::Bytes(bytes) => bytes.to_vec(),
            },
            version: item.version,
        }))
    }

    async fn version(&self, key: &[u8]) -> Result<Option<u64>, StoreError> {
        check_key(key)?;
        let hashed = self.hashed(key);
        let now = self.now();
        Ok(self
            .shard(hashed)
            .live(hashed, now)
            .map(|item| item.version))
    }

    async fn put_versioned(
        &self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
        condition: PutCondition,
    ) -> Result<(PutOutcome, Option<u64>), StoreError> {
        check_key(key)?;
        check_value(value)?;
        let hashed = self.hashed(key);
        let now = self.now();
        let mut shard = self.shard(hashed);
        shard.reclaim(now);
        let current = shard.live(hashed, now).map(|item| item.version);
        let refused = match (condition, current) {
            (PutCondition::Version(_), None) => Some(PutOutcome::Vanished),
            (PutCondition::Version(version), Some(current)) if current != version => {
                Some(PutOutcome::Conflict)
            }
            (PutCondition::VersionOrAbsent(version), Some(current)) if current != version => {
                Some(PutOutcome::Conflict)
            }
            (PutCondition::Absent, Some(_)) => Some(PutOutcome::Conflict),
            _ => None,
        };
        if let Some(outcome) = refused {
            return Ok((outcome, None));
        }
        let version = shard.next_version();
        shard.write(hashed, Value::Bytes(value), version, Self::expiry(now, ttl));
        Ok((PutOutcome::Stored, Some(version)))
    }

    async fn delete(&self, keys: &[Vec<u8>]) -> Result<usize, StoreError> {
        for key in keys {
            check_key(key)?;
        }
        let now = self.now();
        let mut deleted = 0;
        for key in keys {
            let hashed = self.hashed(key);
            let mut shard = self.shard(hashed);
            if shard.live(hashed, now).is_some() {
                deleted += 1;
            }
            shard.remove(hashed);
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
    use std::hash::BuildHasher;

    fn expiries(store: &MemoryStore) -> usize {
        store.shards.iter().map(|s| lock(s).expiries.len()).sum()
    }

    #[test]
    fn the_keys_of_a_shard_take_every_tag_of_its_table() {
        // hashbrown's tag: the hash's top 7 bits.
        let tag = |hash: u64| (hash >> 57) as usize;
        let hasher = KeyHasher::random();
        let mut tags = vec![std::collections::HashSet::new(); SHARDS];
        // 6,250 keys a shard: a shard missing one of its 128 tags by
        // chance is about e^-49 likely; picked by the top bits, each has 16.
        for i in 0..100_000u32 {
            let hash = hasher.hash_one(format!("client{i}_202612012123").as_bytes());
            tags[shard_index(hash)].insert(tag(hash));
        }
        for (shard, tags) in tags.iter().enumerate() {
            assert_eq!(tags.len(), 128, "shard {shard}: {} tags of 128", tags.len());
        }
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

    #[tokio::test]
    async fn a_store_outgrows_the_cache_once_a_shard_holds_512_items() {
        let store = MemoryStore::new();
        let ttl = Duration::from_secs(60);
        let full = SHARDS * (shard::OUTGROWS_CACHE - 1) + 1;
        for i in 0..full {
            let key = format!("k{i}");
            store.increment(key.as_bytes(), 1, ttl, &[]).await.unwrap();
            if i + 1 < shard::OUTGROWS_CACHE {
                assert!(
                    !store.outgrown(),
                    "no shard can hold 512 of {} items",
                    i + 1
                );
            }
        }
        // 16 shards of 511 hold one fewer: some shard holds 512.
        assert!(store.outgrown());
        store.delete(&[b"k0".to_vec()]).await.unwrap();
        assert!(store.outgrown(), "for good");
    }

    #[tokio::test]
    async fn warming_a_key_changes_nothing() {
        for outgrown in [false, true] {
            let clock = ManualClock::from_unix_secs(1_000);
            let store = MemoryStore::with_clock(clock.clone());
            store.outgrown.store(outgrown, Ordering::Relaxed);
            let now = store.immediate().unwrap();
            let secs = Duration::from_secs;
            now.warm(b"missing");
            assert!(store.is_empty(), "nothing created");
            store.increment(b"c", 5, secs(1), &[]).await.unwrap();
            let before = store.get(b"c").await.unwrap().unwrap();
            now.warm(b"c");
            let after = store.get(b"c").await.unwrap().unwrap();
            assert_eq!((after.value, after.version), (before.value, before.version));
            // Expired and not reclaimed yet: neither revived nor reclaimed.
            clock.advance(secs(1));
            now.warm(b"c");
            assert_eq!(expiries(&store), 1);
            assert_eq!(store.get(b"c").await.unwrap(), None);
        }
    }
}
