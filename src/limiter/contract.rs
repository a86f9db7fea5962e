//! [`Limiter`]: what [`RateLimiter`] and the limiters wrapping one
//! ([`DenyCache`](crate::DenyCache), [`DynamicLimiter`](crate::DynamicLimiter))
//! have in common, so that a decorator or the http layer takes any of them.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::algorithm::{unix_nanos, Inspection};
use crate::clock::Clock;
use crate::decision::Decision;
use crate::error::Error;
use crate::limiter::stats::LimiterStats;
use crate::limiter::{RateLimiter, When};
use crate::quota::Quota;

/// The future a deciding method of [`Limiter`] returns, as
/// `async_trait` writes it.
pub(super) type Decided<'a> = Pin<Box<dyn Future<Output = Result<Decision, Error>> + Send + 'a>>;

/// Anything that decides requests per client: a [`RateLimiter`], or a
/// limiter wrapping one ([`DenyCache`](crate::DenyCache),
/// [`DynamicLimiter`](crate::DynamicLimiter)). It is object safe, so a
/// service can hold an `Arc<dyn Limiter>` chosen by configuration; the
/// http layer takes one. A [`RateLimiter`] has every method of its own, so
/// calling it needs no import of this trait.
///
/// ```
/// use memcache_ratelimit::{DenyCache, Limiter, MemoryStore, SlidingWindow};
/// use std::sync::Arc;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let limiter = SlidingWindow::builder("1/second".parse()?, Arc::new(MemoryStore::new())).build()?;
/// let limiters: Vec<Arc<dyn Limiter>> = vec![
///     Arc::new(DenyCache::new(limiter, 1_000)),
///     Arc::new(SlidingWindow::builder("5/second".parse()?, Arc::new(MemoryStore::new())).build()?),
/// ];
/// for limiter in &limiters {
///     assert!(limiter.check(b"alice").await?.is_allowed());
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[async_trait]
pub trait Limiter: Send + Sync {
    /// The quota this limiter enforces.
    fn quota(&self) -> Quota;

    /// The clock [`check`](Self::check) and [`check_n`](Self::check_n) read.
    fn clock(&self) -> &dyn Clock;

    /// Decides one request of cost 1 from client `key`, now.
    async fn check(&self, key: &[u8]) -> Result<Decision, Error> {
        self.check_at(key, 1, self.clock().now()).await
    }

    /// Decides one request of `cost` units from client `key`, now; see
    /// [`RateLimiter::check_n`].
    async fn check_n(&self, key: &[u8], cost: u64) -> Result<Decision, Error> {
        self.check_at(key, cost, self.clock().now()).await
    }

    /// Decides one request of `cost` units from client `key` as if it
    /// happened `at`; see [`RateLimiter::check_at`].
    async fn check_at(&self, key: &[u8], cost: u64, at: DateTime<Utc>) -> Result<Decision, Error>;

    /// [`check_at`](Self::check_at) at `now`, in nanoseconds since the
    /// unix epoch, as [`Clock::unix_nanos`] reads it: what
    /// [`Policies::check_n`](crate::Policies::check_n) asks of each
    /// policy, with no `DateTime` built and taken apart again on every
    /// request (some 130 instructions of a decision on memcached,
    /// callgrind). By default it is `check_at` at that time.
    ///
    /// ```
    /// use memcache_ratelimit::{Clock, Limiter, ManualClock, MemoryStore, SlidingWindow};
    /// use std::sync::Arc;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let clock = ManualClock::from_unix_secs(1_700_000_000);
    /// let limiter = SlidingWindow::builder("1/minute".parse()?, Arc::new(MemoryStore::new()))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// let limiter: Arc<dyn Limiter> = Arc::new(limiter);
    /// let now = clock.unix_nanos().expect("within the years an i64 holds");
    /// assert!(limiter.check_at_nanos(b"alice", 1, now).await?.is_allowed());
    /// assert!(limiter.check_at(b"alice", 1, clock.now()).await?.is_denied());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    async fn check_at_nanos(&self, key: &[u8], cost: u64, now: i64) -> Result<Decision, Error> {
        self.check_at(key, cost, DateTime::from_timestamp_nanos(now))
            .await
    }

    /// [`check_at`](Self::check_at), decided within the caller's poll
    /// when the limiter's store answers at once (an in-process store such
    /// as [`MemoryStore`](crate::MemoryStore)); `None`, having counted
    /// nothing, when it must be waited for, and then always. The http
    /// layer and [`Policies::check_now`](crate::Policies::check_now)
    /// answer with no future of their own when every limiter decides
    /// here. It is [`check_now_nanos`](Self::check_now_nanos) at `at`,
    /// the method a limiter implements.
    ///
    /// ```
    /// use memcache_ratelimit::{Limiter, MemoryStore, SlidingWindow};
    /// use std::sync::Arc;
    ///
    /// let limiter = SlidingWindow::builder("2/minute".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// let now = chrono::Utc::now();
    /// let first = limiter.check_now(b"alice", 1, now).expect("an in-process store")?;
    /// assert!(first.is_allowed());
    /// assert_eq!(first.remaining(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn check_now(
        &self,
        key: &[u8],
        cost: u64,
        at: DateTime<Utc>,
    ) -> Option<Result<Decision, Error>> {
        match unix_nanos(at) {
            Ok(now) => self.check_now_nanos(key, cost, now),
            Err(error) => Some(Err(error)),
        }
    }

    /// [`check_now`](Self::check_now) at `now`, in nanoseconds since the
    /// unix epoch, as [`Clock::unix_nanos`] reads it: what
    /// [`Policies::check_now`](crate::Policies::check_now) asks, with no
    /// `DateTime` built and taken apart again on every request. By
    /// default `None`: a limiter whose store answers at once implements
    /// this one.
    ///
    /// ```
    /// use memcache_ratelimit::{Clock, Limiter, ManualClock, MemoryStore, SlidingWindow};
    /// use std::sync::Arc;
    ///
    /// let clock = ManualClock::from_unix_secs(1_700_000_000);
    /// let limiter = SlidingWindow::builder("1/minute".parse()?, Arc::new(MemoryStore::new()))
    ///     .clock(clock.clone())
    ///     .build()?;
    /// let now = clock.unix_nanos().expect("within the years an i64 holds");
    /// let first = limiter.check_now_nanos(b"alice", 1, now).expect("an in-process store")?;
    /// assert!(first.is_allowed());
    /// let second = limiter.check_now_nanos(b"alice", 1, now).expect("an in-process store")?;
    /// assert!(second.is_denied());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    fn check_now_nanos(&self, key: &[u8], cost: u64, now: i64) -> Option<Result<Decision, Error>> {
        let _ = (key, cost, now);
        None
    }

    /// Gives back `cost` units that an allowed decision of client `key` at
    /// `at` took; see [`RateLimiter::refund_at`].
    async fn refund_at(&self, key: &[u8], cost: u64, at: DateTime<Utc>) -> Result<(), Error>;

    /// Forgets everything counted for client `key`.
    async fn reset(&self, key: &[u8]) -> Result<(), Error>;

    /// The quota client `key` is held to: [`quota`](Self::quota), unless
    /// the limiter picks quotas per client
    /// ([`DynamicLimiter`](crate::DynamicLimiter)).
    fn quota_for(&self, key: &[u8]) -> Quota {
        let _ = key;
        self.quota()
    }

    /// What this limiter has decided since it was built; see
    /// [`LimiterStats`].
    fn stats(&self) -> LimiterStats;

    /// What the store holds for client `key` now, read without counting;
    /// see [`RateLimiter::inspect`].
    async fn inspect(&self, key: &[u8]) -> Result<Inspection, Error>;
}

/// Deciding methods of [`Limiter`] ([`check`](Limiter::check),
/// [`check_n`](Limiter::check_n), [`check_at`](Limiter::check_at),
/// [`check_at_nanos`](Limiter::check_at_nanos))
/// written with the signatures `async_trait` gives them, for an impl that
/// returns a future boxed elsewhere instead of boxing one more around it.
/// The caller names the receiver and the arguments, so that each body, an
/// expression of type [`Decided`], can use them.
macro_rules! deciding_methods {
    ($this:ident; $($name:ident($key:ident $(, $arg:ident: $ty:ty)*) => $body:expr),* $(,)?) => {
        $(
            fn $name<'life0, 'life1, 'async_trait>(
                &'life0 $this,
                $key: &'life1 [u8],
                $($arg: $ty),*
            ) -> Decided<'async_trait>
            where
                'life0: 'async_trait,
                'life1: 'async_trait,
                Self: 'async_trait,
            {
                $body
            }
        )*
    };
}

/// Each method is the limiter's own.
#[async_trait]
impl Limiter for RateLimiter {
    fn quota(&self) -> Quota {
        RateLimiter::quota(self)
    }

    fn clock(&self) -> &dyn Clock {
        RateLimiter::clock(self)
    }

    // The deciding calls box a future as large as the limiter's own
    // algorithm needs, not the largest any algorithm does; see
    // `boxed_check`.
    deciding_methods! {
        self;
        check(key) => self.boxed_check(key, 1, When::Now),
        check_n(key, cost: u64) => self.boxed_check(key, cost, When::Now),
        check_at(key, cost: u64, at: DateTime<Utc>) => self.boxed_check(key, cost, When::At(at)),
        check_at_nanos(key, cost: u64, now: i64) => self.boxed_check(key, cost, When::Nanos(now)),
    }

    fn check_now_nanos(&self, key: &[u8], cost: u64, now: i64) -> Option<Result<Decision, Error>> {
        self.decide_now(key, cost, now)
    }

    async fn refund_at(&self, key: &[u8], cost: u64, at: DateTime<Utc>) -> Result<(), Error> {
        RateLimiter::refund_at(self, key, cost, at).await
    }

    async fn reset(&self, key: &[u8]) -> Result<(), Error> {
        RateLimiter::reset(self, key).await
    }

    fn stats(&self) -> LimiterStats {
        RateLimiter::stats(self)
    }

    async fn inspect(&self, key: &[u8]) -> Result<Inspection, Error> {
        RateLimiter::inspect(self, key).await
    }
}

/// A shared limiter is a limiter, so one limiter can serve several
/// decorators or layers. Every method goes to the limiter's own, so its
/// shortcuts are kept.
#[async_trait]
impl<L: Limiter + ?Sized> Limiter for Arc<L> {
    fn quota(&self) -> Quota {
        (**self).quota()
    }

    fn clock(&self) -> &dyn Clock {
        (**self).clock()
    }

    // The deciding calls hand on the shared limiter's own boxed future,
    // without boxing it again in one of their own: a decision through an
    // `Arc<dyn Limiter>` (the http layer's, `Policies`') costs one
    // allocation, not two.
    deciding_methods! {
        self;
        check(key) => (**self).check(key),
        check_n(key, cost: u64) => (**self).check_n(key, cost),
        check_at(key, cost: u64, at: DateTime<Utc>) => (**self).check_at(key, cost, at),
        check_at_nanos(key, cost: u64, now: i64) => (**self).check_at_nanos(key, cost, now),
    }

    fn check_now(
        &self,
        key: &[u8],
        cost: u64,
        at: DateTime<Utc>,
    ) -> Option<Result<Decision, Error>> {
        (**self).check_now(key, cost, at)
    }

    fn check_now_nanos(&self, key: &[u8], cost: u64, now: i64) -> Option<Result<Decision, Error>> {
        (**self).check_now_nanos(key, cost, now)
    }

    async fn refund_at(&self, key: &[u8], cost: u64, at: DateTime<Utc>) -> Result<(), Error> {
        (**self).refund_at(key, cost, at).await
    }

    async fn reset(&self, key: &[u8]) -> Result<(), Error> {
        (**self).reset(key).await
    }

    fn quota_for(&self, key: &[u8]) -> Quota {
        (**self).quota_for(key)
    }

    fn stats(&self) -> LimiterStats {
        (**self).stats()
    }

    async fn inspect(&self, key: &[u8]) -> Result<Inspection, Error> {
        (**self).inspect(key).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thread_cache::THREAD_CACHED;
    use crate::{DiscreteRefill, FixedWindow, Gcra, HybridQuota, MemoryStore};
    use crate::{Sessionize, SlidingLog, SlidingWindow, TokenBucket};

    /// Every algorithm boxes its decision within the allocator's
    /// per-thread cache: through a `dyn Limiter` (the http layer,
    /// `Policies`), each decision on a store across the network allocates
    /// its box.
    #[test]
    fn a_decision_is_boxed_within_the_allocators_thread_cache() {
        let store = Arc::new(MemoryStore::new());
        let quota = || "100/minute".parse().unwrap();
        let limiters = [
            SlidingWindow::builder(quota(), store.clone()).build(),
            SlidingWindow::builder(quota(), store.clone())
                .sub_windows(60)
                .build(),
            FixedWindow::builder(quota(), store.clone()).build(),
            TokenBucket::builder(quota(), store.clone()).build(),
            Gcra::builder(quota(), store.clone()).build(),
            SlidingLog::builder(quota(), store.clone()).build(),
            HybridQuota::builder(quota(), store.clone()).build(),
            DiscreteRefill::builder(quota(), store.clone()).build(),
            Sessionize::builder(quota(), store.clone()).build(),
        ];
        let at = "2026-11-25T10:00:00Z".parse().unwrap();
        for limiter in limiters {
            let limiter = limiter.unwrap();
            let name = limiter.spec().algorithm().name();
            let limiter: &dyn Limiter = &limiter;
            for boxed in [
                limiter.check(b"k"),
                limiter.check_n(b"k", 2),
                limiter.check_at(b"k", 1, at),
                limiter.check_at_nanos(b"k", 1, at.timestamp_nanos_opt().unwrap()),
            ] {
                let size = std::mem::size_of_val(&*boxed);
                assert!(size <= THREAD_CACHED, "{name}: {size} bytes");
            }
        }
    }
}
