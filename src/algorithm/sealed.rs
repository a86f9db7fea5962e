//! The sealed-bucket cache: window buckets that can no longer change, kept
//! in process so each is read from the store at most once per client.
//!
//! A bucket stops receiving increments when it closes. Processes whose
//! clocks lag can still add to it for up to the allowed clock skew, and a
//! denied request's refund can land up to one deadline after its decision.
//! Past both, the bucket is sealed: its count is final, and reading it
//! again would only return the same number. Keeping it here turns a
//! sliding-window decision into a single increment in steady state,
//! whatever the number of sub-windows.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

/// Final counts of sealed buckets, by key, each kept until the last moment
/// any decision reads it.
#[derive(Debug)]
pub(crate) struct SealedCache {
    capacity: usize,
    entries: Mutex<Entries>,
}

#[derive(Debug, Default)]
struct Entries {
    map: HashMap<Vec<u8>, Sealed>,
    /// When a full cache may next be swept for entries no longer read:
    /// sweeping is a pass over every entry, so a cache that stays full
    /// under many clients sweeps at most once per [`SWEEP_EVERY`] rather
    /// than on every insert.
    next_sweep: i64,
}

/// The least time between two sweeps of a full cache.
const SWEEP_EVERY: i64 = 1_000_000_000;

#[derive(Debug, Clone, Copy)]
struct Sealed {
    count: u64,
    /// Unix nanoseconds after which no decision reads this bucket.
    last_read: i64,
}

impl SealedCache {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity,
            entries: Mutex::new(Entries::default()),
        }
    }

    // Only touched between awaits, never across one, so a std mutex is the
    // right lock; a poisoned one only means a panic elsewhere.
    fn lock(&self) -> MutexGuard<'_, Entries> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The final count of `key`, if it is known.
    pub(crate) fn get(&self, key: &[u8], now: i64) -> Option<u64> {
        let entries = self.lock();
        let sealed = entries
            .map
            .get(key)
            .filter(|sealed| sealed.last_read >= now)?;
        Some(sealed.count)
    }

    /// Keeps the final `count` of `key` until `last_read`. When full,
    /// entries no longer read are dropped first (at most once a second);
    /// if it is still full, the count is not kept (the bucket is simply
    /// read again next time).
    pub(crate) fn insert(&self, key: &[u8], count: u64, last_read: i64, now: i64) {
        let mut entries = self.lock();
        if entries.map.len() >= self.capacity {
            if now < entries.next_sweep {
                return;
            }
            entries.next_sweep = now.saturating_add(SWEEP_EVERY);
            entries.map.retain(|_, sealed| sealed.last_read >= now);
            if entries.map.len() >= self.capacity {
                return;
            }
        }
        entries
            .map
            .insert(key.to_vec(), Sealed { count, last_read });
    }

    /// Forgets `keys` (a reset of their client).
    pub(crate) fn remove(&self, keys: &[Vec<u8>]) {
        let mut entries = self.lock();
        for key in keys {
            entries.map.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_counts_until_their_last_read_and_stays_bounded() {
        const S: i64 = SWEEP_EVERY;
        let cache = SealedCache::new(2);
        cache.insert(b"a", 3, 100 * S, 0);
        cache.insert(b"b", 4, 50 * S, 0);
        cache.insert(b"c", 5, 100 * S, 0); // full, nothing to sweep: not kept
        assert_eq!(cache.get(b"a", 10 * S), Some(3));
        assert_eq!(cache.get(b"c", 10 * S), None);
        assert_eq!(cache.get(b"b", 51 * S), None);
        cache.insert(b"c", 5, 100 * S, 60 * S); // b no longer read: room made
        assert_eq!(cache.get(b"c", 60 * S), Some(5));
        cache.remove(&[b"a".to_vec()]);
        assert_eq!(cache.get(b"a", 60 * S), None);
        // A cache that stays full sweeps at most once a second.
        cache.insert(b"a", 3, 100 * S, 60 * S);
        cache.insert(b"d", 6, 100 * S, 60 * S + 1);
        assert_eq!(cache.get(b"d", 60 * S + 1), None);
    }
}
