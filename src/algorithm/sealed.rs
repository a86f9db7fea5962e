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
    entries: Mutex<HashMap<Vec<u8>, Sealed>>,
}

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
            entries: Mutex::new(HashMap::new()),
        }
    }

    // Only touched between awaits, never across one, so a std mutex is the
    // right lock; a poisoned one only means a panic elsewhere.
    fn lock(&self) -> MutexGuard<'_, HashMap<Vec<u8>, Sealed>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The final count of `key`, if it is known.
    pub(crate) fn get(&self, key: &[u8], now: i64) -> Option<u64> {
        let entries = self.lock();
        let sealed = entries.get(key).filter(|sealed| sealed.last_read >= now)?;
        Some(sealed.count)
    }

    /// Keeps the final `count` of `key` until `last_read`. When full,
    /// entries no longer read are dropped first; if it is still full, the
    /// count is not kept (the bucket is simply read again next time).
    pub(crate) fn insert(&self, key: &[u8], count: u64, last_read: i64, now: i64) {
        let mut entries = self.lock();
        if entries.len() >= self.capacity {
            entries.retain(|_, sealed| sealed.last_read >= now);
            if entries.len() >= self.capacity {
                return;
            }
        }
        entries.insert(key.to_vec(), Sealed { count, last_read });
    }

    /// Forgets `keys` (a reset of their client).
    pub(crate) fn remove(&self, keys: &[Vec<u8>]) {
        let mut entries = self.lock();
        for key in keys {
            entries.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_counts_until_their_last_read_and_stays_bounded() {
        let cache = SealedCache::new(2);
        cache.insert(b"a", 3, 100, 0);
        cache.insert(b"b", 4, 50, 0);
        cache.insert(b"c", 5, 100, 0); // full: not kept
        assert_eq!(cache.get(b"a", 10), Some(3));
        assert_eq!(cache.get(b"c", 10), None);
        assert_eq!(cache.get(b"b", 51), None);
        cache.insert(b"c", 5, 100, 60); // b no longer read: room made
        assert_eq!(cache.get(b"c", 60), Some(5));
        cache.remove(&[b"a".to_vec()]);
        assert_eq!(cache.get(b"a", 10), None);
    }
}
