//! Synchronous access to a store that answers without waiting.

use std::future::Future;
use std::time::Duration;

use super::Counters;
use crate::error::{Error, StoreError, StoreErrorKind};

/// One step of [`ImmediateStore::update_now`]: given the value held (if
/// any) and an empty buffer, writes the new value into the buffer and
/// returns its lifetime, or returns `None` to leave the item as it is.
pub type UpdateStep<'a> = dyn FnMut(Option<&[u8]>, &mut Vec<u8>) -> Option<Duration> + 'a;

/// The operations of a store that never waits (one in process, such as
/// [`MemoryStore`](crate::MemoryStore)), called synchronously. A store
/// offers it through [`Store::immediate`](crate::store::Store::immediate);
/// limiters then decide within the caller's poll, with no future boxed per
/// store call, no deadline timer and no compare-and-swap round: the rules
/// of the [contract](crate::store) still hold, and every algorithm is the
/// same code on either path.
///
/// ```
/// use memcache_ratelimit::store::{MemoryStore, Store};
/// use std::time::Duration;
///
/// let store = MemoryStore::new();
/// let now = store.immediate().expect("an in-process store answers at once");
/// let ttl = Duration::from_secs(10);
/// assert_eq!(now.increment_now(b"hits", 2, ttl, &[])?.value, 2);
/// now.update_now(b"state", &mut |current, next| {
///     assert_eq!(current, None);
///     next.extend_from_slice(b"7");
///     Some(ttl)
/// })?;
/// now.update_now(b"state", &mut |current, _| {
///     assert_eq!(current, Some(&b"7"[..]));
///     None // keep it
/// })?;
/// # Ok::<(), memcache_ratelimit::StoreError>(())
/// ```
pub trait ImmediateStore: Send + Sync {
    /// [`Store::increment`](crate::store::Store::increment), at once.
    fn increment_now(
        &self,
        key: &[u8],
        delta: u64,
        ttl: Duration,
        also_read: &[&[u8]],
    ) -> Result<Counters, StoreError>;

    /// [`Store::decrement`](crate::store::Store::decrement), at once.
    fn decrement_now(&self, key: &[u8], delta: u64) -> Result<Option<u64>, StoreError>;

    /// Reads the value at `key` (`None` if missing; a counter reads as its
    /// decimal digits) and hands it to `step` with an empty buffer. If
    /// `step` returns a lifetime, what it wrote into the buffer is stored
    /// as a new item with that lifetime; `None` leaves the item untouched.
    /// All of it is one atomic step: the read-modify-write a
    /// compare-and-swap makes safe on a remote store. `step` runs exactly
    /// once, while the item is held, so it must not call the store. An
    /// empty value is not written and is an error, as
    /// [`Store::put`](crate::store::Store::put) rejects it.
    fn update_now(&self, key: &[u8], step: &mut UpdateStep<'_>) -> Result<(), StoreError>;

    /// Touches what a call at `key` is about to read, changing nothing,
    /// so that fetching it into the processor's caches overlaps the work
    /// the caller does before that call rather than stalling the call.
    /// Only a hint: it returns nothing and may do nothing, as this default
    /// does. [`MemoryStore`](crate::MemoryStore) looks the item up.
    ///
    /// ```
    /// use memcache_ratelimit::store::{MemoryStore, Store};
    /// use std::time::Duration;
    ///
    /// let store = MemoryStore::new();
    /// let now = store.immediate().expect("an in-process store answers at once");
    /// now.warm(b"hits"); // creates nothing
    /// assert_eq!(now.decrement_now(b"hits", 1)?, None);
    /// now.warm(b"hits");
    /// assert_eq!(now.increment_now(b"hits", 1, Duration::from_secs(10), &[])?.value, 1);
    /// # Ok::<(), memcache_ratelimit::StoreError>(())
    /// ```
    fn warm(&self, _key: &[u8]) {}
}

/// The result of `work` that only calls stores that answer at once, which
/// completes it in its first poll: the rare steps of a decision that are
/// written once, as futures, taken on the immediate path too. Work that
/// does not complete at once is an error, never a wait.
pub(crate) fn at_once<T>(work: impl Future<Output = T>) -> Result<T, Error> {
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    match std::pin::pin!(work).poll(&mut context) {
        std::task::Poll::Ready(value) => Ok(value),
        std::task::Poll::Pending => Err(Error::Store(StoreError::new(
            StoreErrorKind::Io,
            "a store that answers at once did not complete a call at once",
        ))),
    }
}
