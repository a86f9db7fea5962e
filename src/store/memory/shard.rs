//! The item table of a [`MemoryStore`](super::MemoryStore): shards of
//! items with memcached's rules (expiry, CAS versions, counters as
//! decimals), each behind its own lock, with a heap of expiry times to
//! reclaim memory.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::{Mutex, MutexGuard};

use crate::error::{StoreError, StoreErrorKind};
use crate::held_key::HeldKey;
use crate::key::KeyHasher;

/// One shard. A short key is held inline, by the map and by its expiry
/// entry, so that finding an item follows no pointer to its key.
pub(super) struct Shard {
    pub(super) items: HashMap<HeldKey, Item, KeyHasher>,
    /// When items are due to be looked at for expiry: `(when, created,
    /// key)`. Each item has exactly one live entry, at `Item::scheduled`,
    /// never after it expires; an entry whose item is gone, was created
    /// again (`created` differs) or was rescheduled (the time differs) is
    /// stale and dropped when it comes up. An item written again with a
    /// later expiry keeps its entry, which is moved on when it comes up.
    pub(super) expiries: BinaryHeap<Reverse<Expiry>>,
}

/// An expiry entry: when, the item's `created`, its key.
pub(super) type Expiry = (i64, u64, HeldKey);

pub(super) struct Item {
    pub(super) value: Value,
    pub(super) version: u64,
    /// The version the item was created at, naming its expiry entry.
    pub(super) created: u64,
    pub(super) expires_at: i64,
    /// When its expiry entry comes up: at most `expires_at`.
    pub(super) scheduled: i64,
}

pub(super) enum Value {
    Counter(u64),
    Bytes(Vec<u8>),
}

/// The value of an item being written.
#[derive(Clone, Copy)]
pub(super) enum New<'a> {
    Counter(u64),
    Bytes(&'a [u8]),
}

impl New<'_> {
    pub(super) fn owned(self) -> Value {
        match self {
            New::Counter(n) => Value::Counter(n),
            New::Bytes(bytes) => Value::Bytes(bytes.to_vec()),
        }
    }
}

pub(super) fn lock(shard: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    shard
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shard {
    pub(super) fn live(&self, key: &[u8], now: i64) -> Option<&Item> {
        self.items.get(key).filter(|item| item.expires_at > now)
    }

    pub(super) fn live_mut(&mut self, key: &[u8], now: i64) -> Option<&mut Item> {
        self.items.get_mut(key).filter(|item| item.expires_at > now)
    }

    /// Writes a whole new item at `key`: value, version and expiry. An item
    /// already held there (live, or expired and not reclaimed yet) is
    /// overwritten in place, keeping its key, its byte buffer (unless far
    /// too big for the value) and its expiry entry, which is only
    /// rescheduled if the new expiry comes before it; otherwise the key is
    /// held by the map and by a new expiry entry.
    pub(super) fn write(&mut self, key: &[u8], value: New<'_>, version: u64, expires_at: i64) {
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
    pub(super) fn schedule(&mut self, key: &[u8], (when, created): (i64, u64)) {
        self.expiries
            .push(Reverse((when, created, HeldKey::new(key))));
    }

    pub(super) fn insert(&mut self, key: &[u8], value: Value, version: u64, expires_at: i64) {
        let key = HeldKey::new(key);
        self.expiries
            .push(Reverse((expires_at, version, key.clone())));
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

    pub(super) fn reclaim(&mut self, now: i64) {
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
    pub(super) fn renew(&mut self, version: u64, expires_at: i64) -> Option<(i64, u64)> {
        self.version = version;
        self.expires_at = expires_at;
        (expires_at < self.scheduled).then(|| {
            self.scheduled = expires_at;
            (expires_at, self.created)
        })
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
