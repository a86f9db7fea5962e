//! The item table of a [`MemoryStore`](super::MemoryStore): shards of
//! items with memcached's rules (expiry, CAS versions, counters as
//! decimals), each behind its own lock, with a heap of expiry times to
//! reclaim memory.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use hashbrown::HashTable;

use super::item::{Item, Value};
use crate::error::{StoreError, StoreErrorKind};
use crate::held_key::HeldKey;
use crate::key::KeyHasher;

/// One shard. A short key is held inline, by the table's item and by its
/// expiry entry, so that finding an item follows no pointer to its key.
/// The table is found by a key's hash, which then finds the item in it:
/// one hash per key ([`Hashed`]).
pub(super) struct Shard {
    pub(super) items: HashTable<Item>,
    /// The store's hasher, for the keys of expiry entries and for moving
    /// items when the table grows.
    hasher: KeyHasher,
    /// The last version given to a write here. A key's versions only need
    /// to differ from its earlier ones, and a key always lives in the same
    /// shard, so each shard counts its own, under its lock: no atomic
    /// shared by every decision.
    versions: u64,
    /// When items are due to be looked at for expiry: `(when, created,
    /// key)`. Each item has exactly one live entry, at `Item::scheduled`,
    /// never after it expires; an entry whose item is gone, was created
    /// again (`created` differs) or was rescheduled (the time differs) is
    /// stale and dropped when it comes up. An item written again with a
    /// later expiry keeps its entry, which is moved on when it comes up.
    pub(super) expiries: BinaryHeap<Reverse<Expiry>>,
    /// Set, for good, once this shard or another has held
    /// [`OUTGROWS_CACHE`] items: the store's flag, shared by its shards.
    outgrown: Arc<AtomicBool>,
}

/// The items a shard holds when its store's items (128 bytes each, 16
/// shards) fill 1 MiB, the most a processor core's own caches hold: from
/// then on, a lookup among many keys misses them, and touching an item
/// early ([`ImmediateStore::warm`](crate::store::ImmediateStore::warm))
/// pays for itself.
pub(super) const OUTGROWS_CACHE: usize = 512;

/// An expiry entry: when, the item's `created`, its key.
pub(super) type Expiry = (i64, u64, HeldKey);

/// A key with its hash, computed once: it picks the shard, then the item.
#[derive(Clone, Copy)]
pub(super) struct Hashed<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) hash: u64,
}

impl<'a> Hashed<'a> {
    pub(super) fn new(hasher: &KeyHasher, bytes: &'a [u8]) -> Self {
        Self {
            bytes,
            hash: hasher.hash_one(bytes),
        }
    }

    /// Whether a table entry holds this key.
    fn holder(self) -> impl Fn(&Item) -> bool + 'a {
        move |item| item.holds(self.bytes)
    }
}

pub(super) fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    shard
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shard {
    pub(super) fn new(hasher: KeyHasher, outgrown: Arc<AtomicBool>) -> Self {
        Self {
            items: HashTable::new(),
            hasher,
            versions: 0,
            expiries: BinaryHeap::new(),
            outgrown,
        }
    }

    /// A version no item of this shard has had.
    pub(super) fn next_version(&mut self) -> u64 {
        self.versions += 1;
        self.versions
    }

    /// The item at `key`, live or expired.
    fn held_mut(&mut self, key: Hashed<'_>) -> Option<&mut Item> {
        self.items.find_mut(key.hash, key.holder())
    }

    /// The first item whose tag matches `key`'s hash: `key`'s own if it
    /// is held, unless another item's tag matches first (one in 128 per
    /// item probed), found without comparing keys.
    pub(super) fn likely(&self, key: Hashed<'_>) -> Option<&Item> {
        self.items.find(key.hash, |_| true)
    }

    pub(super) fn live(&self, key: Hashed<'_>, now: i64) -> Option<&Item> {
        self.items
            .find(key.hash, key.holder())
            .filter(|item| item.expires_at > now)
    }

    pub(super) fn live_mut(&mut self, key: Hashed<'_>, now: i64) -> Option<&mut Item> {
        self.held_mut(key).filter(|item| item.expires_at > now)
    }

    /// Removes the item at `key`, live or expired.
    pub(super) fn remove(&mut self, key: Hashed<'_>) -> Option<Item> {
        let found = self.items.find_entry(key.hash, key.holder());
        found.ok().map(|entry| entry.remove().0)
    }

    /// Writes a whole new item at `key`: value, version and expiry. An item
    /// already held there (live, or expired and not reclaimed yet) is
    /// overwritten in place, keeping its key, its byte buffer (unless far
    /// too big for the value) and its expiry entry, which is only
    /// rescheduled if the new expiry comes before it; otherwise the key is
    /// held by the table and by a new expiry entry.
    pub(super) fn write(
        &mut self,
        key: Hashed<'_>,
        value: Value<'_>,
        version: u64,
        expires_at: i64,
    ) {
        let Some(item) = self.held_mut(key) else {
            return self.insert(key, value, version, expires_at);
        };
        if let Some(entry) = item.rewrite(value, version, expires_at) {
            self.schedule(key.bytes, entry);
        }
    }

    /// A new expiry entry `(when, created)` for the item held at `key`.
    pub(super) fn schedule(&mut self, key: &[u8], (when, created): (i64, u64)) {
        self.expiries
            .push(Reverse((when, created, HeldKey::new(key))));
    }

    fn insert(&mut self, key: Hashed<'_>, value: Value<'_>, version: u64, expires_at: i64) {
        self.expiries
            .push(Reverse((expires_at, version, HeldKey::new(key.bytes))));
        let item = Item::new(key.bytes, value, version, expires_at);
        let hasher = self.hasher;
        self.items.insert_unique(key.hash, item, |item| {
            item.with_key(|key| hasher.hash_one(key))
        });
        if self.items.len() == OUTGROWS_CACHE {
            self.outgrown.store(true, Ordering::Relaxed);
        }
    }

    pub(super) fn reclaim(&mut self, now: i64) {
        while let Some(Reverse((when, _, _))) = self.expiries.peek() {
            if *when > now {
                break;
            }
            let Reverse((when, created, key)) = self.expiries.pop().expect("peeked");
            let hashed = Hashed::new(&self.hasher, key.as_bytes());
            let Some(item) = self.held_mut(hashed) else {
                continue; // deleted
            };
            if item.created != created || item.scheduled != when {
                continue; // a stale entry: the item has a newer one
            }
            if item.expires_at <= now {
                self.remove(hashed);
            } else {
                // Written again since, with a later expiry: look again then.
                item.scheduled = item.expires_at;
                let at = item.expires_at;
                self.expiries.push(Reverse((at, created, key)));
            }
        }
    }
}

pub(super) fn not_a_number(key: &[u8]) -> StoreError {
    StoreError::new(
        StoreErrorKind::Rejected,
        format!(
            "cannot increment or decrement the non-numeric value of {}",
            String::from_utf8_lossy(key)
        ),
    )
}
