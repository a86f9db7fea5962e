//! The storage contract every limiter is written against, and its
//! implementations.
//!
//! The contract offers only what memcached really has, so an algorithm that
//! works on one store works on all of them:
//!
//! | operation | memcached | semantics |
//! |---|---|---|
//! | [`Store::increment`] | `ma` with `N`/`J`, then `mg` per read, pipelined | add `delta` to a counter, creating it at `delta` with `ttl` if it is missing; read other counters in the same round trip |
//! | [`Store::decrement`] | `ma MD` | subtract, saturating at 0; a missing counter stays missing |
//! | [`Store::get_counters`] | `mg` per key, pipelined | read counters; a missing key is `None` |
//! | [`Store::get`] | `mg v c` | read raw bytes with their version (CAS token) |
//! | [`Store::version`] | `mg c` (classic: `gets`) | read the version alone, without the bytes |
//! | [`Store::put_versioned`] | `ms` (`ME` add, or `C` compare, or both pipelined) with `c` | write if absent, or if the version still matches, or either, or always; the written item's version |
//! | [`Store::put`] | the same | the same, without the version |
//! | [`Store::delete`] | `md`, pipelined | remove keys |
//!
//! Rules that hold on every store:
//!
//! - **Keys** are 1 to 250 bytes with no whitespace or control bytes
//!   ([`is_valid_key`](crate::key::is_valid_key)); anything else is an
//!   [`InvalidKey`](crate::store::StoreErrorKind::InvalidKey) error. Keys built by
//!   [`KeySpace`](crate::key::KeySpace) always qualify.
//! - **Expiry** is set when an item is created and never extended:
//!   incrementing or decrementing a counter keeps its expiry, and only a
//!   `put` (which writes a whole new item) sets a new one. TTLs are rounded
//!   up to whole seconds, as memcached keeps them. A lifetime over 30 days
//!   is sent to memcached as the unix time it ends at, since memcached reads
//!   a larger relative number as an absolute time (long quotas such as
//!   `1000/31d` depend on it).
//! - **Counters** are unsigned 64-bit decimals. An increment wraps at 2^64,
//!   a decrement stops at 0. Incrementing a value that is not a number is a
//!   [`Rejected`](crate::store::StoreErrorKind::Rejected) error and reading it as
//!   a counter is [`NotACounter`](crate::store::StoreErrorKind::NotACounter).
//! - **Versions** change on every write, counters included. A write on a
//!   version tells a key stored at another version
//!   ([`PutOutcome::Conflict`]) from a key not stored at all
//!   ([`PutOutcome::Vanished`]), as memcached's `EX` and `NF` do.
//! - **Routing**: a store spread over several servers places a key by its
//!   [`routing_prefix`](crate::key::routing_prefix), so all the keys of one
//!   client share a server and one call is one round trip to one server.
//! - A call that fails after its request was written returns an error with
//!   [`is_ambiguous`](crate::StoreError::is_ambiguous) set, and is never
//!   retried by the store.

mod counting;
mod decimal;
mod immediate;
#[cfg(feature = "memcached")]
mod memcached;
mod memory;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::StoreError;

pub(crate) use self::decimal::decimal;

pub use crate::error::StoreErrorKind;
pub use counting::{CountingStore, StoreCalls};
pub(crate) use immediate::at_once;
pub use immediate::{ImmediateStore, UpdateStep};
#[cfg(feature = "config")]
pub(crate) use memcached::is_host_port;
#[cfg(feature = "memcached")]
pub use memcached::{
    ClassicStore, ClassicStoreBuilder, ClientRouter, MemcachedStore, MemcachedStoreBuilder,
    PipelineStats, Protocol, DEFAULT_DRAIN_TIMEOUT, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_PIPELINE_BATCH, DEFAULT_PIPELINE_DEPTH,
};
pub use memory::MemoryStore;

/// A counter after an increment, and the counters read beside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counters {
    /// The incremented counter's new value.
    pub value: u64,
    /// The other counters, in the order asked for; `None` where missing.
    pub read: Vec<Option<u64>>,
}

/// Raw bytes and the version they were read at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versioned {
    /// The stored bytes.
    pub value: Vec<u8>,
    /// The item's version (memcached's CAS token).
    pub version: u64,
}

/// When a [`Store::put`] may write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutCondition {
    /// Only if the key is missing (memcached `add`).
    Absent,
    /// Only if the item is still at this version (memcached `cas`).
    Version(u64),
    /// Only if the item is still at this version or is not stored at all:
    /// on memcached a `cas` and an `add` in one round trip, of which at
    /// most one writes. For a writer that knows the state at this version
    /// and would write the same had it found none: one whose state may
    /// just have expired.
    VersionOrAbsent(u64),
    /// Unconditionally (memcached `set`).
    Always,
}

/// Whether a conditional [`Store::put`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PutOutcome {
    /// The value was written.
    Stored,
    /// The condition did not hold: the key exists (for
    /// [`PutCondition::Absent`]), or it is stored at another version (for
    /// [`PutCondition::Version`]). Nothing was written.
    Conflict,
    /// For [`PutCondition::Version`]: the key is not stored at all any
    /// more (it expired, was evicted, or was deleted). Nothing was
    /// written. A writer that knew the state may decide again on no state
    /// and write with [`PutCondition::Absent`], without reading first.
    Vanished,
}

/// What a compare and an add sent together for
/// [`PutCondition::VersionOrAbsent`] did, from each one's outcome and the
/// version it told: at most one of them writes, and the pair wrote if
/// either did.
#[cfg(feature = "memcached")]
pub(crate) fn either_written(
    compare: (PutOutcome, Option<u64>),
    add: (PutOutcome, Option<u64>),
) -> (PutOutcome, Option<u64>) {
    match (compare, add) {
        ((PutOutcome::Stored, version), _) | (_, (PutOutcome::Stored, version)) => {
            (PutOutcome::Stored, version)
        }
        _ => (PutOutcome::Conflict, None),
    }
}

/// The storage contract; see the [module documentation](self) for the rules
/// every implementation follows.
#[async_trait]
pub trait Store: Send + Sync + fmt::Debug {
    /// Adds `delta` to the counter at `key`, creating it with the value
    /// `delta` and a lifetime of `ttl` if it is missing, then reads the
    /// counters at `also_read`, all in one round trip. The increment is
    /// atomic; the reads see the store as it is right after it.
    async fn increment(
        &self,
        key: &[u8],
        delta: u64,
        ttl: Duration,
        also_read: &[&[u8]],
    ) -> Result<Counters, StoreError>;

    /// Subtracts `delta` from the counter at `key`, stopping at 0. Returns
    /// the new value, or `None` if the counter is missing (it is not
    /// created).
    async fn decrement(&self, key: &[u8], delta: u64) -> Result<Option<u64>, StoreError>;

    /// Reads counters; `None` where a key is missing.
    async fn get_counters(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<u64>>, StoreError>;

    /// Reads the raw bytes at `key` with their version.
    async fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError>;

    /// The version of the item at `key` (memcached's CAS token), without
    /// its bytes; `None` if the key is missing. A limiter that knows the
    /// state stored at a version confirms with this that it is still the
    /// stored one, without fetching it: on memcached's meta protocol an
    /// `mg` with `c` and no `v`, whose answer is a dozen bytes where a
    /// sliding log's value is up to 80 KB. The default reads the item
    /// with [`get`](Self::get), as the classic protocol must (it has no
    /// read of a version alone).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use memcache_ratelimit::MemoryStore;
    /// use memcache_ratelimit::store::{PutCondition, Store};
    /// use std::time::Duration;
    ///
    /// let store = MemoryStore::new();
    /// assert_eq!(store.version(b"k").await?, None);
    /// let ttl = Duration::from_secs(60);
    /// let (_, written) = store.put_versioned(b"k", b"state", ttl, PutCondition::Absent).await?;
    /// assert_eq!(store.version(b"k").await?, written);
    /// # Ok::<(), memcache_ratelimit::StoreError>(())
    /// # }).unwrap();
    /// ```
    async fn version(&self, key: &[u8]) -> Result<Option<u64>, StoreError> {
        Ok(self.get(key).await?.map(|stored| stored.version))
    }

    /// Writes `value` (not empty) with a lifetime of `ttl` if `condition`
    /// holds; when it wrote, also the version the written item has, if the
    /// store can tell it in the same call: the meta protocol's `ms` with
    /// `c` does, the classic protocol's `cas` does not (`None`). A limiter
    /// that knows the version of what it wrote can write its next state on
    /// it without reading it first (the write fails if anyone wrote since).
    ///
    /// ```
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// use memcache_ratelimit::MemoryStore;
    /// use memcache_ratelimit::store::{PutCondition, PutOutcome, Store};
    /// use std::time::Duration;
    ///
    /// let store = MemoryStore::new();
    /// let ttl = Duration::from_secs(60);
    /// let (outcome, version) = store.put_versioned(b"k", b"1", ttl, PutCondition::Absent).await?;
    /// assert_eq!(outcome, PutOutcome::Stored);
    /// assert_eq!(version, Some(store.get(b"k").await?.unwrap().version));
    /// # Ok::<(), memcache_ratelimit::StoreError>(())
    /// # }).unwrap();
    /// ```
    async fn put_versioned(
        &self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
        condition: PutCondition,
    ) -> Result<(PutOutcome, Option<u64>), StoreError>;

    /// [`put_versioned`](Self::put_versioned), without the version.
    async fn put(
        &self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
        condition: PutCondition,
    ) -> Result<PutOutcome, StoreError> {
        let (outcome, _) = self.put_versioned(key, value, ttl, condition).await?;
        Ok(outcome)
    }

    /// Deletes `keys`; returns how many existed.
    async fn delete(&self, keys: &[Vec<u8>]) -> Result<usize, StoreError>;

    /// The same store, called synchronously, if it answers without waiting
    /// (see [`ImmediateStore`]). `None`, the default, for a store whose
    /// calls wait (a network round trip), and for a decorator that must see
    /// every call through the methods above.
    fn immediate(&self) -> Option<&dyn ImmediateStore> {
        None
    }
}

/// TTL in whole seconds, rounded up, at least 1: memcached's granularity,
/// and 0 would mean "never expires" there. memcached is sent its
/// `wire_ttl`.
pub(crate) fn ttl_secs(ttl: Duration) -> u64 {
    ttl.as_secs()
        .saturating_add(u64::from(ttl.subsec_nanos() > 0))
        .max(1)
}

/// The counters an increment reads beside its key: one per item of
/// `reads`, each by `read`. The increment has landed by then, so a read
/// that fails must not pass for a call that did nothing: its error is
/// ambiguous, or a caller might count the request again. Nothing is
/// allocated for no reads (most increments); otherwise the list is sized
/// once, where collecting through `Result` would grow it from nothing (a
/// window reads up to 60 keys). Inlined, so that no read costs no call.
#[inline]
pub(crate) fn read_beside_increment<T>(
    reads: impl ExactSizeIterator<Item = T>,
    mut read: impl FnMut(T) -> Result<Option<u64>, StoreError>,
) -> Result<Vec<Option<u64>>, StoreError> {
    if reads.len() == 0 {
        return Ok(Vec::new());
    }
    let mut counters = Vec::with_capacity(reads.len());
    for item in reads {
        counters.push(read(item).map_err(StoreError::ambiguous)?);
    }
    Ok(counters)
}

/// Checks an increment's key and the keys it reads with it.
pub(crate) fn check_keys(key: &[u8], also_read: &[&[u8]]) -> Result<(), StoreError> {
    check_key(key)?;
    also_read.iter().try_for_each(|other| check_key(other))
}

pub(crate) fn check_key(key: &[u8]) -> Result<(), StoreError> {
    if crate::key::is_valid_key(key) {
        Ok(())
    } else {
        Err(StoreError::new(
            crate::store::StoreErrorKind::InvalidKey,
            format!(
                "{} is not a memcached key (1 to 250 bytes, no whitespace or control bytes)",
                String::from_utf8_lossy(&key[..key.len().min(60)]).escape_debug()
            ),
        ))
    }
}

pub(crate) fn check_value(value: &[u8]) -> Result<(), StoreError> {
    if value.is_empty() {
        return Err(StoreError::new(
            crate::store::StoreErrorKind::Rejected,
            "empty values are not stored",
        ));
    }
    Ok(())
}

/// Parses a stored counter: decimal digits, possibly padded with spaces, as
/// memcached leaves them after a decrement.
pub(crate) fn parse_counter(key: &[u8], bytes: &[u8]) -> Result<u64, StoreError> {
    counter_digits(bytes).ok_or_else(|| {
        StoreError::new(
            crate::store::StoreErrorKind::NotACounter,
            format!(
                "{} holds {:?}, not a counter",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(&bytes[..bytes.len().min(40)])
            ),
        )
    })
}

/// A stored counter's number, if `bytes` are one: decimal digits, possibly
/// padded with ASCII whitespace, at most `u64::MAX`.
pub(crate) fn counter_digits(bytes: &[u8]) -> Option<u64> {
    decimal(bytes.trim_ascii())
}

/// The future a method of [`Store`] returns, as `async_trait` writes it.
pub(crate) type Answer<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// Methods of [`Store`] with the signature `async_trait` gives them, for
/// an impl that returns a boxed future it made itself rather than writing
/// an `async fn`: each is written as `fn get<'life0, 'life1>(&'life0 self,
/// key: &'life1 [u8]) -> Option<Versioned> { … }`, naming a lifetime for
/// `self` and each borrowed argument, all of which outlive the returned
/// [`Answer`] of the value after `->`.
macro_rules! by_hand {
    ($(fn $name:ident<$($life:lifetime),+>(
        &$self_life:lifetime $self:ident $(, $arg:ident: $ty:ty)* $(,)?
    ) -> $out:ty $body:block)+) => {$(
        fn $name<$($life,)+ 'async_trait>(
            &$self_life $self $(, $arg: $ty)*
        ) -> $crate::store::Answer<'async_trait, $out>
        where
            $($life: 'async_trait,)+
            Self: 'async_trait,
        $body
    )+};
}
// Used by `MemcachedStore` too, which the `memcached` feature builds.
#[cfg_attr(not(feature = "memcached"), allow(unused_imports))]
pub(crate) use by_hand;

/// A shared store is a store, so decorators such as [`CountingStore`] can
/// wrap an `Arc<dyn Store>` that limiters also hold. Each call hands on
/// the shared store's own boxed future rather than boxing it again: a
/// limiter's store call through its `Arc<dyn Store>` costs one
/// allocation, not two.
impl<S: Store + ?Sized> Store for std::sync::Arc<S> {
    by_hand! {
        fn increment<'life0, 'life1, 'life2, 'life3>(
            &'life0 self,
            key: &'life1 [u8],
            delta: u64,
            ttl: Duration,
            also_read: &'life2 [&'life3 [u8]],
        ) -> Counters {
            (**self).increment(key, delta, ttl, also_read)
        }

        fn decrement<'life0, 'life1>(&'life0 self, key: &'life1 [u8], delta: u64) -> Option<u64> {
            (**self).decrement(key, delta)
        }

        fn get_counters<'life0, 'life1>(
            &'life0 self,
            keys: &'life1 [Vec<u8>],
        ) -> Vec<Option<u64>> {
            (**self).get_counters(keys)
        }

        fn get<'life0, 'life1>(&'life0 self, key: &'life1 [u8]) -> Option<Versioned> {
            (**self).get(key)
        }

        fn version<'life0, 'life1>(&'life0 self, key: &'life1 [u8]) -> Option<u64> {
            (**self).version(key)
        }

        fn put_versioned<'life0, 'life1, 'life2>(
            &'life0 self,
            key: &'life1 [u8],
            value: &'life2 [u8],
            ttl: Duration,
            condition: PutCondition,
        ) -> (PutOutcome, Option<u64>) {
            (**self).put_versioned(key, value, ttl, condition)
        }

        fn delete<'life0, 'life1>(&'life0 self, keys: &'life1 [Vec<u8>]) -> usize {
            (**self).delete(keys)
        }
    }

    fn immediate(&self) -> Option<&dyn ImmediateStore> {
        (**self).immediate()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_digits_padded_with_whitespace_and_nothing_else() {
        assert_eq!(counter_digits(b"42"), Some(42));
        assert_eq!(counter_digits(b"7   "), Some(7), "after a decrement");
        assert_eq!(counter_digits(b" 0\r\n"), Some(0));
        let max = u64::MAX.to_string();
        assert_eq!(counter_digits(max.as_bytes()), Some(u64::MAX));
        let over = "18446744073709551616";
        for bad in [
            &b""[..],
            b"  ",
            b"+5",
            b"-1",
            b"1 2",
            b"0x10",
            b"\xd9\xa1",
            over.as_bytes(),
        ] {
            assert_eq!(counter_digits(bad), None, "{bad:?}");
        }
        assert_eq!(decimal(b"12"), Some(12));
        assert_eq!(decimal(b" 12"), None, "a flag's number is digits only");
        assert_eq!(decimal(b"000000000000000000000000000042"), Some(42));
        assert_eq!(decimal(&[0xff; 19]), None);
    }
}
