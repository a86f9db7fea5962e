//! [`DynamicLimiter`]: quotas picked per client at request time, API plans
//! and per-tenant limits.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::algorithm::Inspection;
use crate::clock::Clock;
use crate::decision::Decision;
use crate::error::{ConfigError, Error};
use crate::limiter::contract::Limiter;
use crate::limiter::spec::LimiterSpec;
use crate::limiter::stats::LimiterStats;
use crate::limiter::RateLimiter;
use crate::quota::Quota;
use crate::store::Store;

/// The most distinct quotas one [`DynamicLimiter`] builds limiters for.
/// Quotas come from plans, and a service has a handful; a resolver that
/// returns more is almost certainly computing quotas from request data.
pub const MAX_DYNAMIC_QUOTAS: usize = 1024;

/// Picks the quota a client is held to, at request time. Closures
/// `Fn(&[u8]) -> Quota` are resolvers.
///
/// It is called on every decision (twice when the HTTP middleware also
/// writes the header fields), so it should answer from memory: a plan
/// looked up in a database belongs in a cache the resolver reads.
pub trait QuotaResolver: Send + Sync + 'static {
    /// The quota for client `key`.
    fn quota(&self, key: &[u8]) -> Quota;
}

impl<F: Fn(&[u8]) -> Quota + Send + Sync + 'static> QuotaResolver for F {
    fn quota(&self, key: &[u8]) -> Quota {
        self(key)
    }
}

/// A limiter whose quota is picked per client by a [`QuotaResolver`]
/// (API plans, per-tenant limits).
///
/// It asks the resolver which quota a client is held to, then decides with
/// the limiter one [`LimiterSpec`] describes, for that quota
/// ([`LimiterSpec::with_quota`]; built on first use, then kept). All of
/// them share one store and one namespace, and the key layout keeps state
/// made under different parameters apart wherever mixing it would be
/// wrong:
///
/// - **Window algorithms** count requests, and a count does not depend on
///   the limit. A window counter's key carries its bucket's start and,
///   unless it is one minute, its length (`rl:alice_20261122071015-15s`).
///   So a client moved from 100/minute to 1,000/minute keeps the requests
///   it made in the last minute, now held against 1,000; moved back, they
///   count against 100 again. A quota with another bucket length (another
///   period, or the same period cut into other sub-windows) reads other
///   keys and starts from zero.
/// - **Compare-and-swap algorithms** keep a state whose meaning depends on
///   the parameters (tokens of a capacity, a theoretical arrival time at a
///   rate, a log of at most `limit` entries). Their key carries the
///   parameters (`rl:alice_tb-<capacity/limit/period>`, `gcra-…`, `log-…`,
///   `hq-…`), so a client whose quota changes starts a fresh state under
///   the new one; the old state expires on its own.
///
/// Changing a client's quota therefore never reads a state written under
/// other parameters as if it were its own.
///
/// ```
/// use memcache_ratelimit::{Algorithm, DynamicLimiter, Limiter, LimiterSpec, ManualClock, MemoryStore, Quota};
/// use std::sync::Arc;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let free: Quota = "2/minute".parse()?;
/// let pro: Quota = "5/minute".parse()?;
/// let clock = ManualClock::from_unix_secs(1_800_000_000);
/// let limiter = DynamicLimiter::new(
///     LimiterSpec::new(Algorithm::SlidingWindow { sub_windows: 4 }, free).clock(clock.clone()),
///     Arc::new(MemoryStore::with_clock(clock)),
///     move |client: &[u8]| if client.starts_with(b"pro-") { pro } else { free },
/// )?
/// .prepare([pro])?;
///
/// assert_eq!(limiter.quota_for(b"pro-acme"), pro);
/// let mut allowed = 0;
/// for _ in 0..10 {
///     allowed += limiter.check(b"pro-acme").await?.is_allowed() as u32;
/// }
/// assert_eq!(allowed, 5);
/// assert_eq!(limiter.check(b"someone").await?.limit(), 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
pub struct DynamicLimiter {
    spec: LimiterSpec,
    store: Arc<dyn Store>,
    default: Arc<RateLimiter>,
    resolver: Box<dyn QuotaResolver>,
    limiters: RwLock<HashMap<Quota, Arc<RateLimiter>>>,
    /// Requests whose quota could not be built.
    unbuilt: AtomicU64,
}

impl std::fmt::Debug for DynamicLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynamicLimiter")
            .field("spec", &self.spec)
            .field("default", &self.default.quota())
            .field("quotas", &self.quotas())
            .finish()
    }
}

impl DynamicLimiter {
    /// A limiter deciding with `spec` on `store`, holding each client to
    /// the quota `resolver` picks. The spec's own quota is the default,
    /// [`Limiter::quota`]'s answer; its limiter is built here, so an
    /// invalid spec is rejected now.
    pub fn new(
        spec: LimiterSpec,
        store: Arc<dyn Store>,
        resolver: impl QuotaResolver,
    ) -> Result<Self, ConfigError> {
        let default = spec.quota();
        let built: Arc<RateLimiter> = Arc::new(spec.build(store.clone())?);
        Ok(Self {
            spec,
            store,
            default: built.clone(),
            resolver: Box::new(resolver),
            limiters: RwLock::new(HashMap::from([(default, built)])),
            unbuilt: AtomicU64::new(0),
        })
    }

    /// Builds the limiters for `quotas` now (the plans a service knows of),
    /// so a quota the spec cannot hold is rejected at start-up rather than
    /// at its first request.
    pub fn prepare(self, quotas: impl IntoIterator<Item = Quota>) -> Result<Self, ConfigError> {
        for quota in quotas {
            self.limiter(quota)?;
        }
        Ok(self)
    }

    /// The quotas limiters have been built for.
    pub fn quotas(&self) -> Vec<Quota> {
        let mut quotas: Vec<Quota> = self.read().keys().copied().collect();
        quotas.sort_by_key(|quota| (quota.period(), quota.limit()));
        quotas
    }

    /// The limiter for `quota`, built on first use.
    fn limiter(&self, quota: Quota) -> Result<Arc<RateLimiter>, ConfigError> {
        if let Some(limiter) = self.read().get(&quota) {
            return Ok(limiter.clone());
        }
        let mut limiters = self.limiters.write().unwrap_or_else(|e| e.into_inner());
        if let Some(limiter) = limiters.get(&quota) {
            return Ok(limiter.clone());
        }
        if limiters.len() >= MAX_DYNAMIC_QUOTAS {
            return Err(ConfigError::new(
                "quota",
                format!("{quota} would be quota number {} of this limiter, above the maximum of {MAX_DYNAMIC_QUOTAS}", limiters.len() + 1),
            ));
        }
        let built: Arc<RateLimiter> = self
            .spec
            .clone()
            .with_quota(quota)
            .build(self.store.clone())?
            .into();
        limiters.insert(quota, built.clone());
        Ok(built)
    }

    /// The limiter for the quota `key` is held to; a quota that cannot be
    /// built is counted as an error.
    fn limiter_for(&self, key: &[u8]) -> Result<Arc<RateLimiter>, Error> {
        self.limiter(self.resolver.quota(key)).map_err(|error| {
            self.unbuilt.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%error, "no limiter for the quota picked");
            Error::Config(error)
        })
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<Quota, Arc<RateLimiter>>> {
        self.limiters.read().unwrap_or_else(|e| e.into_inner())
    }

    fn all(&self) -> Vec<Arc<RateLimiter>> {
        self.read().values().cloned().collect()
    }
}

#[async_trait]
impl Limiter for DynamicLimiter {
    /// The default quota.
    fn quota(&self) -> Quota {
        self.default.quota()
    }

    fn clock(&self) -> &dyn Clock {
        self.default.clock()
    }

    fn quota_for(&self, key: &[u8]) -> Quota {
        self.resolver.quota(key)
    }

    /// Decides with the limiter of the quota the resolver picks for `key`.
    /// A quota the spec cannot hold, or one beyond
    /// [`MAX_DYNAMIC_QUOTAS`], is [`Error::Config`].
    async fn check_at(&self, key: &[u8], cost: u64, at: DateTime<Utc>) -> Result<Decision, Error> {
        self.limiter_for(key)?.check_at(key, cost, at).await
    }

    async fn check_at_nanos(&self, key: &[u8], cost: u64, now: i64) -> Result<Decision, Error> {
        self.limiter_for(key)?.check_at_nanos(key, cost, now).await
    }

    async fn check(&self, key: &[u8]) -> Result<Decision, Error> {
        self.limiter_for(key)?.check(key).await
    }

    /// With the limiter of the client's quota, at once if its store
    /// answers at once. A quota that cannot be built is its error, as in
    /// [`check_at`](Limiter::check_at), on either kind of store.
    fn check_now_nanos(&self, key: &[u8], cost: u64, now: i64) -> Option<Result<Decision, Error>> {
        match self.limiter_for(key) {
            Ok(limiter) => Limiter::check_now_nanos(&limiter, key, cost, now),
            Err(error) => Some(Err(error)),
        }
    }

    /// To the limiter of the client's quota now; a quota changed between
    /// the decision and the refund gives the units to the new one.
    async fn refund_at(&self, key: &[u8], cost: u64, at: DateTime<Utc>) -> Result<(), Error> {
        self.limiter_for(key)?.refund_at(key, cost, at).await
    }

    async fn check_n(&self, key: &[u8], cost: u64) -> Result<Decision, Error> {
        self.limiter_for(key)?.check_n(key, cost).await
    }

    /// What the store holds for `key` under the quota it is held to now.
    async fn inspect(&self, key: &[u8]) -> Result<Inspection, Error> {
        self.limiter_for(key)?.inspect(key).await
    }

    /// Forgets client `key` under every quota built so far.
    async fn reset(&self, key: &[u8]) -> Result<(), Error> {
        for limiter in self.all() {
            limiter.reset(key).await?;
        }
        Ok(())
    }

    /// The sum over the limiters of every quota, with the requests whose
    /// quota could not be built as errors.
    fn stats(&self) -> LimiterStats {
        let unbuilt = LimiterStats {
            errors: self.unbuilt.load(Ordering::Relaxed),
            ..LimiterStats::default()
        };
        self.all()
            .iter()
            .fold(unbuilt, |sum, limiter| sum.plus(limiter.stats()))
    }
}
