//! The synchronous read-decide-write a [`MemoryStore`]
//! offers the compare-and-swap algorithms: one atomic step under the
//! shard's lock.

use std::time::Duration;

use super::item::{Item, Value};
use super::shard::not_a_number;
use super::MemoryStore;
use super::SCRATCH;
use crate::error::StoreError;
use crate::store::{
    check_key, check_keys, check_value, parse_counter, read_beside_increment, Counters,
    ImmediateStore, UpdateStep,
};

impl ImmediateStore for MemoryStore {
    /// Reads the first line of the item `key` most likely is, where its
    /// counter is, without comparing keys: nothing is reclaimed, written
    /// or counted. While the items fit in a core's own caches, where the
    /// lookup would find the line there anyway, it does nothing.
    fn warm(&self, key: &[u8]) {
        if !self.outgrown() {
            return;
        }
        let hashed = self.hashed(key);
        let shard = self.shard(hashed);
        if let Some(item) = shard.likely(hashed) {
            // Read for its cache line alone; `black_box` keeps the read.
            std::hint::black_box(item.expires_at);
        }
    }

    fn increment_now(
        &self,
        key: &[u8],
        delta: u64,
        ttl: Duration,
        also_read: &[&[u8]],
    ) -> Result<Counters, StoreError> {
        check_keys(key, also_read)?;
        let hashed = self.hashed(key);
        let now = self.now();
        let value = {
            let mut shard = self.shard(hashed);
            shard.reclaim(now);
            let version = shard.next_version();
            match shard.live_mut(hashed, now) {
                Some(item) => {
                    let current = match item.value() {
                        Value::Counter(n) => n,
                        Value::Bytes(bytes) => {
                            parse_counter(key, bytes).map_err(|_| not_a_number(key))?
                        }
                    };
                    let next = current.wrapping_add(delta);
                    item.set(Value::Counter(next));
                    item.version = version;
                    next
                }
                None => {
                    shard.write(
                        hashed,
                        Value::Counter(delta),
                        version,
                        Self::expiry(now, ttl),
                    );
                    delta
                }
            }
        };
        let read = read_beside_increment(also_read.iter(), |key| self.read_counter(key, now))?;
        Ok(Counters { value, read })
    }

    fn decrement_now(&self, key: &[u8], delta: u64) -> Result<Option<u64>, StoreError> {
        check_key(key)?;
        let hashed = self.hashed(key);
        let now = self.now();
        let mut shard = self.shard(hashed);
        let version = shard.next_version();
        let Some(item) = shard.live_mut(hashed, now) else {
            return Ok(None);
        };
        let current = match item.value() {
            Value::Counter(n) => n,
            Value::Bytes(bytes) => parse_counter(key, bytes).map_err(|_| not_a_number(key))?,
        };
        let next = current.saturating_sub(delta);
        item.set(Value::Counter(next));
        item.version = version;
        Ok(Some(next))
    }

    fn update_now(&self, key: &[u8], step: &mut UpdateStep<'_>) -> Result<(), StoreError> {
        check_key(key)?;
        let hashed = self.hashed(key);
        let now = self.now();
        let mut shard = self.shard(hashed);
        shard.reclaim(now);
        // The new value is written into a buffer of this thread's, then
        // copied into the item's own: no allocation once both have grown.
        // The item is found once: read, then rewritten in place.
        let version = shard.next_version();
        SCRATCH.with_borrow_mut(|next| {
            next.clear();
            let mut item = shard.live_mut(hashed, now);
            let digits;
            let current = match item.as_deref().map(Item::value) {
                None => None,
                Some(Value::Bytes(bytes)) => Some(bytes),
                Some(Value::Counter(n)) => {
                    digits = n.to_string();
                    Some(digits.as_bytes())
                }
            };
            let Some(ttl) = step(current, next) else {
                return Ok(());
            };
            check_value(next)?;
            let expires_at = Self::expiry(now, ttl);
            match item.as_mut() {
                Some(item) => {
                    if let Some(entry) = item.rewrite(Value::Bytes(next), version, expires_at) {
                        shard.schedule(key, entry);
                    }
                }
                None => shard.write(hashed, Value::Bytes(next), version, expires_at),
            }
            Ok(())
        })
    }
}
