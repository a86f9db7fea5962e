//! [`Engine`]: the algorithm a limiter runs, built from its
//! [`Algorithm`] and settings. The window algorithms share one engine, the
//! time-bucketed counters; each compare-and-swap algorithm is the shared
//! optimistic loop over its own pure core. A limiter holds one engine and
//! calls it through a `match`, so a decision costs no virtual call and no
//! boxed future on the way to the store.

use std::time::Duration;

use super::cas::{discrete_refill, gcra, hybrid_quota, sessionize, sliding_log, token_bucket};
use super::cas::{CasLimiter, CasPolicy, CasStats};
use super::cas::{DiscreteRefillCore, GcraCore, HybridQuotaCore, SessionizeCore};
use super::cas::{SlidingLogCore, TokenBucketCore};
use super::choice::Algorithm;
use super::inspect::Inspection;
use super::settings::Settings;
use super::window::{Estimator, WindowCounter};
use crate::decision::Decision;
use crate::error::{ConfigError, Error};

/// One algorithm, ready to decide.
#[derive(Debug)]
pub(crate) enum Engine {
    /// The fixed and the sliding window.
    Window(WindowCounter),
    TokenBucket(CasLimiter<TokenBucketCore>),
    Gcra(CasLimiter<GcraCore>),
    SlidingLog(CasLimiter<SlidingLogCore>),
    HybridQuota(CasLimiter<HybridQuotaCore>),
    DiscreteRefill(CasLimiter<DiscreteRefillCore>),
    Sessionize(CasLimiter<SessionizeCore>),
}

impl Engine {
    /// `algorithm` over `settings`, its parameters checked; `cas` is the
    /// compare-and-swap algorithms' retry policy, `sealed_cache` the
    /// sliding window's cache size and `estimator` its weighing of the
    /// oldest sub-window, each ignored by the others.
    pub(crate) fn new(
        algorithm: Algorithm,
        settings: Settings,
        cas: CasPolicy,
        sealed_cache: usize,
        estimator: Estimator,
    ) -> Result<Self, ConfigError> {
        let quota = settings.quota;
        Ok(match algorithm {
            Algorithm::SlidingWindow { sub_windows } => Self::Window(WindowCounter::sliding(
                settings,
                sub_windows,
                sealed_cache,
                estimator,
            )?),
            Algorithm::FixedWindow => Self::Window(WindowCounter::fixed(settings)?),
            Algorithm::TokenBucket { capacity } => Self::TokenBucket(CasLimiter::new(
                settings,
                token_bucket(capacity, quota)?,
                cas,
            )),
            Algorithm::Gcra { burst } => {
                Self::Gcra(CasLimiter::new(settings, gcra(burst, quota)?, cas))
            }
            Algorithm::SlidingLog => {
                Self::SlidingLog(CasLimiter::new(settings, sliding_log(quota)?, cas))
            }
            Algorithm::HybridQuota => {
                Self::HybridQuota(CasLimiter::new(settings, hybrid_quota(quota)?, cas))
            }
            Algorithm::DiscreteRefill {
                refill,
                restart_when_empty,
            } => Self::DiscreteRefill(CasLimiter::new(
                settings,
                discrete_refill(refill, restart_when_empty, quota)?,
                cas,
            )),
            Algorithm::Sessionize { refill } => {
                Self::Sessionize(CasLimiter::new(settings, sessionize(refill, quota)?, cas))
            }
        })
    }

    /// Decides a request of `cost` from `client` at `now`, unix
    /// nanoseconds.
    pub(crate) async fn check(
        &self,
        client: &[u8],
        cost: u64,
        now: i64,
    ) -> Result<Decision, Error> {
        match self {
            Self::Window(engine) => engine.check_nanos(client, cost, now).await,
            Self::TokenBucket(engine) => engine.check_nanos(client, cost, now).await,
            Self::Gcra(engine) => engine.check_nanos(client, cost, now).await,
            Self::SlidingLog(engine) => engine.check_nanos(client, cost, now).await,
            Self::HybridQuota(engine) => engine.check_nanos(client, cost, now).await,
            Self::DiscreteRefill(engine) => engine.check_nanos(client, cost, now).await,
            Self::Sessionize(engine) => engine.check_nanos(client, cost, now).await,
        }
    }

    /// Its settings, store included.
    fn settings(&self) -> &Settings {
        match self {
            Self::Window(engine) => &engine.settings,
            Self::TokenBucket(engine) => engine.settings(),
            Self::Gcra(engine) => engine.settings(),
            Self::SlidingLog(engine) => engine.settings(),
            Self::HybridQuota(engine) => engine.settings(),
            Self::DiscreteRefill(engine) => engine.settings(),
            Self::Sessionize(engine) => engine.settings(),
        }
    }

    /// Whether its store answers at once, so that
    /// [`check_now`](Self::check_now) decides.
    pub(crate) fn answers_at_once(&self) -> bool {
        self.settings().store.immediate().is_some()
    }

    /// [`check`](Self::check) within the caller's poll, if the store
    /// answers at once; `None` for a store that must be waited for.
    pub(crate) fn check_now(
        &self,
        client: &[u8],
        cost: u64,
        now: i64,
    ) -> Option<Result<Decision, Error>> {
        let store = self.settings().store.immediate()?;
        Some(match self {
            Self::Window(engine) => engine.check_now(store, client, cost, now),
            Self::TokenBucket(engine) => engine.check_now(store, client, cost, now),
            Self::Gcra(engine) => engine.check_now(store, client, cost, now),
            Self::SlidingLog(engine) => engine.check_now(store, client, cost, now),
            Self::HybridQuota(engine) => engine.check_now(store, client, cost, now),
            Self::DiscreteRefill(engine) => engine.check_now(store, client, cost, now),
            Self::Sessionize(engine) => engine.check_now(store, client, cost, now),
        })
    }

    /// Decides a request that may wait up to `max_delay` for its slot, and
    /// how long it must wait. Only GCRA queues; the other algorithms decide
    /// as [`check`](Self::check) does, with no wait.
    pub(crate) async fn reserve(
        &self,
        client: &[u8],
        cost: u64,
        now: i64,
        max_delay: Duration,
    ) -> Result<(Decision, Duration), Error> {
        match self {
            Self::Gcra(engine) => engine.step(client, cost, now, max_delay).await,
            other => Ok((other.check(client, cost, now).await?, Duration::ZERO)),
        }
    }

    /// Gives back `cost` units that an allowed decision for `client` at
    /// `now` took.
    pub(crate) async fn refund(&self, client: &[u8], cost: u64, now: i64) -> Result<(), Error> {
        match self {
            Self::Window(engine) => engine.refund_nanos(client, cost, now).await,
            Self::TokenBucket(engine) => engine.refund(client, cost, now).await,
            Self::Gcra(engine) => engine.refund(client, cost, now).await,
            Self::SlidingLog(engine) => engine.refund(client, cost, now).await,
            Self::HybridQuota(engine) => engine.refund(client, cost, now).await,
            Self::DiscreteRefill(engine) => engine.refund(client, cost, now).await,
            Self::Sessionize(engine) => engine.refund(client, cost, now).await,
        }
    }

    /// Forgets everything `client` has counted, as of `now`.
    pub(crate) async fn reset(&self, client: &[u8], now: i64) -> Result<(), Error> {
        match self {
            Self::Window(engine) => engine.reset(client, now).await,
            Self::TokenBucket(engine) => engine.reset(client).await,
            Self::Gcra(engine) => engine.reset(client).await,
            Self::SlidingLog(engine) => engine.reset(client).await,
            Self::HybridQuota(engine) => engine.reset(client).await,
            Self::DiscreteRefill(engine) => engine.reset(client).await,
            Self::Sessionize(engine) => engine.reset(client).await,
        }
    }

    /// What the store holds for `client` at `now`, read without counting.
    pub(crate) async fn inspect(&self, client: &[u8], now: i64) -> Result<Inspection, Error> {
        match self {
            Self::Window(engine) => engine.inspect(client, now).await,
            Self::TokenBucket(engine) => engine.inspect(client).await,
            Self::Gcra(engine) => engine.inspect(client).await,
            Self::SlidingLog(engine) => engine.inspect(client).await,
            Self::HybridQuota(engine) => engine.inspect(client).await,
            Self::DiscreteRefill(engine) => engine.inspect(client).await,
            Self::Sessionize(engine) => engine.inspect(client).await,
        }
    }

    /// The keys a decision for `client` at `now` reads: a window's buckets,
    /// the current one first, or the one key of a compare-and-swap state.
    pub(crate) fn keys(&self, client: &[u8], now: i64) -> Vec<Vec<u8>> {
        match self {
            Self::Window(engine) => engine.keys_at(client, now),
            Self::TokenBucket(engine) => vec![engine.key(client)],
            Self::Gcra(engine) => vec![engine.key(client)],
            Self::SlidingLog(engine) => vec![engine.key(client)],
            Self::HybridQuota(engine) => vec![engine.key(client)],
            Self::DiscreteRefill(engine) => vec![engine.key(client)],
            Self::Sessionize(engine) => vec![engine.key(client)],
        }
    }

    /// Clients the sliding window's sealed-bucket cache had no room for
    /// (0 for every other algorithm).
    pub(crate) fn sealed_refused(&self) -> u64 {
        match self {
            Self::Window(engine) => engine.sealed.as_ref().map_or(0, |cache| cache.refused()),
            _ => 0,
        }
    }

    /// The compare-and-swap loop's counters; all zero for the windows,
    /// which never compare and swap.
    pub(crate) fn cas_stats(&self) -> CasStats {
        match self {
            Self::Window(_) => CasStats::default(),
            Self::TokenBucket(engine) => engine.stats(),
            Self::Gcra(engine) => engine.stats(),
            Self::SlidingLog(engine) => engine.stats(),
            Self::HybridQuota(engine) => engine.stats(),
            Self::DiscreteRefill(engine) => engine.stats(),
            Self::Sessionize(engine) => engine.stats(),
        }
    }
}
