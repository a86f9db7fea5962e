//! A local deny cache: a client known to be over its limit is denied in
//! process until it could next be allowed, so a flood from one client costs
//! no store round trips.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::algorithm::{unix_nanos, Inspection};
use crate::clock::Clock;
use crate::decision::Decision;
use crate::error::Error;
use crate::limiter::contract::Limiter;
use crate::limiter::stats::LimiterStats;
use crate::quota::Quota;

/// Wraps a limiter and remembers its denials.
///
/// When the store denies a request of cost `c` with `retry_after = r`, the
/// same request from that client cannot be allowed before `r` has passed:
/// other clients and other processes can only add to what the client is
/// counted for. So until then requests of cost `c` from that client are
/// denied here, without asking the store, with the `retry_after` and
/// `reset_after` of the remembered denial counted down. Requests of another
/// cost go to the store, since a cheaper one may fit earlier and a dearer
/// one may have to wait longer (its answer then replaces the remembered
/// one).
///
/// Costs and limits:
/// - With denied requests refunded (the default), a single process gets
///   exactly the answers the store would have given. Across processes a
///   remembered denial can outlast the store's by a little: when another
///   process's denied request had raised a window counter and refunded it
///   just after, when another process resets the client, or, for the
///   token bucket and GCRA, by up to the clock skew when a process whose
///   clock runs ahead refills the bucket early.
/// - In strict mode ([`DeniedRequests::Counted`](crate::limiter::DeniedRequests)),
///   requests denied here are not counted in the store, so a flooding
///   client is held only until the remembered `retry_after`, as if it had
///   paused.
/// - [`reset`](Limiter::reset) clears the client here too, but only in
///   this process; other processes keep their own caches until their
///   entries run out.
/// - At most `capacity` clients are remembered; when full, expired entries
///   are dropped first (at most once a second) and then, if still full,
///   the new denial is simply not remembered.
///
/// ```
/// use memcache_ratelimit::store::CountingStore;
/// use memcache_ratelimit::{DenyCache, FixedWindow, Limiter, ManualClock, MemoryStore};
/// use std::sync::Arc;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let clock = ManualClock::from_unix_secs(1_800_000_000);
/// let store = Arc::new(CountingStore::new(MemoryStore::with_clock(clock.clone())));
/// let limiter = FixedWindow::builder("10/minute".parse()?, store.clone()).clock(clock).build()?;
/// let limiter = DenyCache::new(limiter, 10_000);
///
/// for _ in 0..1_000 {
///     limiter.check(b"flood").await?;
/// }
/// // 10 allowed, 1 denied by the store (with its refund): 12 round trips.
/// assert_eq!(store.calls().round_trips(), 12);
/// assert_eq!(limiter.hits(), 989);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct DenyCache<L> {
    inner: L,
    capacity: usize,
    denials: Mutex<HashMap<Vec<u8>, Denial>>,
    hits: std::sync::atomic::AtomicU64,
    next_sweep: std::sync::atomic::AtomicI64,
}

/// A remembered denial: a request of `cost` does not fit before `until`.
#[derive(Debug, Clone, Copy)]
struct Denial {
    cost: u64,
    at: i64,
    until: i64,
    decision: Decision,
}

impl<L: Limiter> DenyCache<L> {
    /// Remembers the denials of `inner` for at most `capacity` clients.
    pub fn new(inner: L, capacity: usize) -> Self {
        Self {
            inner,
            capacity,
            denials: Mutex::new(HashMap::new()),
            hits: Default::default(),
            next_sweep: Default::default(),
        }
    }

    /// The wrapped limiter.
    pub fn inner(&self) -> &L {
        &self.inner
    }

    /// How many decisions were answered here, without the store.
    pub fn hits(&self) -> u64 {
        self.hits.load(std::sync::atomic::Ordering::Relaxed)
    }

    // The map is only touched between awaits, never across one, so a std
    // mutex is the right lock; a poisoned one only means a panic elsewhere.
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Vec<u8>, Denial>> {
        self.denials
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn cached(&self, key: &[u8], cost: u64, now: i64) -> Option<Decision> {
        let mut denials = self.lock();
        let denial = *denials.get(key)?;
        if now >= denial.until || now < denial.at {
            denials.remove(key);
            return None;
        }
        if cost != denial.cost {
            return None;
        }
        let elapsed = Duration::from_nanos((now - denial.at) as u64);
        let d = denial.decision;
        Some(
            Decision::denied(
                d.limit(),
                d.remaining(),
                d.reset_after().saturating_sub(elapsed),
                Duration::from_nanos((denial.until - now) as u64),
            )
            .with_used(d.used())
            // A denial leaves a session as it was: the remembered start.
            .with_session_of(&d),
        )
    }

    fn remember(&self, key: &[u8], cost: u64, now: i64, decision: Decision) {
        let Some(retry) = decision.retry_after() else {
            return;
        };
        let until = now.saturating_add(i64::try_from(retry.as_nanos()).unwrap_or(i64::MAX));
        let mut denials = self.lock();
        if denials.len() >= self.capacity && !denials.contains_key(key) {
            // Sweeping is a pass over every entry: a cache that stays full
            // sweeps at most once a second, not on every denial.
            let next = self.next_sweep.load(std::sync::atomic::Ordering::Relaxed);
            if now < next {
                return;
            }
            self.next_sweep.store(
                now.saturating_add(1_000_000_000),
                std::sync::atomic::Ordering::Relaxed,
            );
            denials.retain(|_, denial| denial.until > now);
            if denials.len() >= self.capacity {
                return;
            }
        }
        denials.insert(
            key.to_vec(),
            Denial {
                cost,
                at: now,
                until,
                decision,
            },
        );
    }
}

impl<L: Limiter> DenyCache<L> {
    /// The remembered denial of `key` for `cost` at `now`, counted as a
    /// hit.
    fn hit(&self, key: &[u8], cost: u64, now: i64) -> Option<Decision> {
        let decision = self.cached(key, cost, now)?;
        self.hits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(decision)
    }

    /// A decision of `key` for `cost` at `now`: the remembered denial, or
    /// the inner limiter's, asked by `ask` only on a miss and learned from.
    async fn decide<F>(
        &self,
        key: &[u8],
        cost: u64,
        now: i64,
        ask: impl FnOnce() -> F,
    ) -> Result<Decision, Error>
    where
        F: std::future::Future<Output = Result<Decision, Error>>,
    {
        if let Some(decision) = self.hit(key, cost, now) {
            return Ok(decision);
        }
        let decision = ask().await?;
        self.learn(key, cost, now, decision);
        Ok(decision)
    }

    /// Remembers the inner limiter's `decision` of `key` at `now` if it
    /// denied; otherwise forgets any denial remembered: the client just
    /// spent quota (a cheaper request got in), so a remembered denial
    /// may now end too early.
    fn learn(&self, key: &[u8], cost: u64, now: i64, decision: Decision) {
        if decision.is_denied() {
            self.remember(key, cost, now, decision);
        } else {
            self.lock().remove(key);
        }
    }
}

#[async_trait]
impl<L: Limiter> Limiter for DenyCache<L> {
    fn quota(&self) -> Quota {
        self.inner.quota()
    }

    fn clock(&self) -> &dyn Clock {
        self.inner.clock()
    }

    fn quota_for(&self, key: &[u8]) -> Quota {
        self.inner.quota_for(key)
    }

    async fn inspect(&self, key: &[u8]) -> Result<Inspection, Error> {
        self.inner.inspect(key).await
    }

    /// The inner limiter's counts, with the denials answered from the
    /// cache added to `denied`.
    fn stats(&self) -> LimiterStats {
        let mut stats = self.inner.stats();
        stats.denied += self.hits();
        stats
    }

    async fn check_at(&self, key: &[u8], cost: u64, at: DateTime<Utc>) -> Result<Decision, Error> {
        let now = unix_nanos(at)?;
        self.decide(key, cost, now, || self.inner.check_at(key, cost, at))
            .await
    }

    async fn check_at_nanos(&self, key: &[u8], cost: u64, now: i64) -> Result<Decision, Error> {
        self.decide(key, cost, now, || self.inner.check_at_nanos(key, cost, now))
            .await
    }

    fn check_now_nanos(&self, key: &[u8], cost: u64, now: i64) -> Option<Result<Decision, Error>> {
        if let Some(decision) = self.hit(key, cost, now) {
            return Some(Ok(decision));
        }
        let decision = self.inner.check_now_nanos(key, cost, now)?;
        if let Ok(decision) = decision {
            self.learn(key, cost, now, decision);
        }
        Some(decision)
    }

    /// Forgets a cached denial of `key` too: what it remembered may no
    /// longer hold once units come back.
    async fn refund_at(&self, key: &[u8], cost: u64, at: DateTime<Utc>) -> Result<(), Error> {
        self.lock().remove(key);
        self.inner.refund_at(key, cost, at).await
    }

    async fn reset(&self, key: &[u8]) -> Result<(), Error> {
        self.lock().remove(key);
        self.inner.reset(key).await
    }
}
