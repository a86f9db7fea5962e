//! The limiter a service holds: [`RateLimiter`], built by a
//! [`LimiterBuilder`] or from a [`LimiterSpec`], with its failure policy,
//! and what wraps one: [`DenyCache`], [`DynamicLimiter`] and the
//! [`Limiter`] trait they share.
//!
//! A decision goes from [`RateLimiter::check`] to the algorithm's engine
//! (`algorithm::Engine`), which calls the store; a store failure goes to
//! the [`FailurePolicy`]; the outcome is counted in [`LimiterStats`].

mod algorithm_builders;
mod builder;
mod construct;
mod contract;
mod deny_cache;
mod dynamic;
mod failure;
mod policies;
mod spec;
mod stats;

use std::future::Future;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tracing::Instrument;

use crate::algorithm::{unix_nanos, CasStats, Engine, Inspection, Repairs, Reservation};
use crate::clock::Clock;
use crate::decision::Decision;
use crate::error::Error;
use crate::key::Printable;
use crate::quota::Quota;
use crate::store::at_once;
use std::sync::Arc;

pub use self::algorithm_builders::CasAlgorithm;
pub use self::builder::LimiterBuilder;
pub use self::contract::Limiter;
pub use self::deny_cache::DenyCache;
pub use self::dynamic::{DynamicLimiter, QuotaResolver, MAX_DYNAMIC_QUOTAS};
use self::failure::Failures;
pub use self::failure::{FailurePolicy, FailureStats};
pub use self::policies::{Policies, Policy, PolicyDecisions};
pub use self::spec::LimiterSpec;
pub use self::stats::LimiterStats;
pub use crate::algorithm::DeniedRequests;

/// The default bound on one decision: 100 ms. memcached answers in well
/// under a millisecond on a healthy network; a decision that has waited
/// this long is better reported as a failure (and decided by the failure
/// policy) than left hanging for the store's own I/O timeout, which is
/// longer (500 ms by default for
/// [`MemcachedStore`](crate::MemcachedStore), see
/// [`io_timeout`](crate::store::MemcachedStoreBuilder::io_timeout)).
pub const DEFAULT_DEADLINE: Duration = Duration::from_millis(100);
/// The default bound on how far apart the clocks of the processes sharing a
/// store are: hosts kept by NTP agree far better than this.
pub const DEFAULT_MAX_CLOCK_SKEW: Duration = Duration::from_secs(1);
/// The largest clock skew a limiter accepts.
pub const MAX_CLOCK_SKEW: Duration = Duration::from_secs(60);
/// The longest deadline a limiter accepts.
pub const MAX_DEADLINE: Duration = Duration::from_secs(60);

/// A rate limiter: decides, for a client key of any bytes, whether a
/// request may go ahead. Every algorithm builds one
/// ([`SlidingWindow::builder`](crate::SlidingWindow::builder),
/// [`Gcra::builder`](crate::Gcra::builder), ...; or
/// [`LimiterSpec::build`]), over any [`Store`](crate::store::Store).
///
/// A decision reads the clock, asks the algorithm's engine, which calls
/// the store, and hands a store failure to the [`FailurePolicy`]:
///
/// ```text
/// check(key) -> decide(key, cost, now) -> Engine::check -> Store
///                                       \-> FailurePolicy, on a store failure
/// ```
///
/// ```
/// use memcache_ratelimit::{MemoryStore, RateLimiter, SlidingWindow};
/// use std::sync::Arc;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let limiter: RateLimiter =
///     SlidingWindow::builder("2/second".parse()?, Arc::new(MemoryStore::new())).build()?;
/// assert!(limiter.check(b"alice").await?.is_allowed());
/// assert!(limiter.check_n(b"alice", 1).await?.is_allowed());
/// assert!(limiter.check(b"alice").await?.is_denied());
/// limiter.reset(b"alice").await?;
/// assert_eq!(limiter.stats().decisions(), 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct RateLimiter {
    spec: LimiterSpec,
    engine: Engine,
    failures: Failures,
    repairs: Arc<Repairs>,
}

impl RateLimiter {
    /// Decides one request of cost 1 from client `key`, now.
    pub async fn check(&self, key: &[u8]) -> Result<Decision, Error> {
        // Decided here when the store answers at once: through `decide`,
        // this future would hold the waiting decision's, over a kilobyte,
        // and move it on every call.
        let now = self.now()?;
        match self.decide_now(key, 1, now) {
            Some(outcome) => outcome,
            None => self.waiting(key, 1, now).await,
        }
    }

    /// Decides one request of `cost` units from client `key`, now. A cost
    /// of 0 is [`Error::ZeroCost`]; a cost above what the limiter can ever
    /// hold is [`Error::CostExceedsLimit`].
    pub async fn check_n(&self, key: &[u8], cost: u64) -> Result<Decision, Error> {
        let now = self.now()?;
        match self.decide_now(key, cost, now) {
            Some(outcome) => outcome,
            None => self.waiting(key, cost, now).await,
        }
    }

    /// Decides one request of `cost` units from client `key` as if it
    /// happened `at`, a timestamp supplied by the caller, for example to
    /// replay historical events. Window algorithms count each event in the
    /// bucket of its own timestamp. The compare-and-swap algorithms keep
    /// time moving forward per key: an event older than the newest one the
    /// key has seen is decided as of that newest time (see each algorithm's
    /// documentation), so replaying out of order can never earn quota from
    /// the past.
    pub async fn check_at(
        &self,
        key: &[u8],
        cost: u64,
        at: DateTime<Utc>,
    ) -> Result<Decision, Error> {
        let now = unix_nanos(at)?;
        match self.decide_now(key, cost, now) {
            Some(outcome) => outcome,
            None => self.waiting(key, cost, now).await,
        }
    }

    /// Gives back `cost` units that an allowed [`check_at`](Self::check_at)
    /// of client `key` at `at` took, as if that request had not come: a
    /// window's counter is decremented, a bucket gets its tokens back, a log
    /// drops the entries. For a request that was admitted and then refused
    /// by something else, such as another policy of [`Policies`].
    ///
    /// Give back only what an allowed decision at the same `at` took and
    /// that was decided by the store (not [`Decision::under_failure`]):
    /// anything else hands the client units it never spent. A refund that
    /// fails is returned; it may still have landed, and is not retried.
    ///
    /// ```
    /// use memcache_ratelimit::{FixedWindow, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let limiter = FixedWindow::builder("2/minute".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// let at = "2026-11-25T10:00:00Z".parse()?;
    /// assert_eq!(limiter.check_at(b"alice", 2, at).await?.remaining(), 0);
    /// limiter.refund_at(b"alice", 2, at).await?;
    /// assert_eq!(limiter.check_at(b"alice", 1, at).await?.remaining(), 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn refund_at(&self, key: &[u8], cost: u64, at: DateTime<Utc>) -> Result<(), Error> {
        self.engine.refund(key, cost, unix_nanos(at)?).await
    }

    /// Reserves a slot for a request of `cost` that may wait up to
    /// `max_delay`, without waiting: GCRA's delay mode, the leaky bucket as
    /// a queue (see [`Gcra`](crate::Gcra)). An allowed reservation is
    /// already counted: act after [`Reservation::delay`]. The other
    /// algorithms never queue: their reservation is the decision of
    /// [`check_n`](Self::check_n), with no delay. A decision made under the
    /// failure policy has no delay either.
    ///
    /// ```
    /// use memcache_ratelimit::{Gcra, ManualClock, MemoryStore};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let clock = ManualClock::from_unix_secs(1_800_000_000);
    /// let store = Arc::new(MemoryStore::with_clock(clock.clone()));
    /// let gcra = Gcra::builder("10/second".parse()?, store).burst(1).clock(clock).build()?;
    /// assert!(gcra.check(b"alice").await?.is_allowed());
    /// let slot = gcra.reserve(b"alice", 1, Duration::from_millis(250)).await?;
    /// assert!(slot.decision().is_allowed());
    /// assert_eq!(slot.delay(), Duration::from_millis(100));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn reserve(
        &self,
        key: &[u8],
        cost: u64,
        max_delay: Duration,
    ) -> Result<Reservation, Error> {
        let now = self.now()?;
        match self.engine.reserve(key, cost, now, max_delay).await {
            Ok((decision, delay)) => Ok(Reservation::new(decision, delay)),
            Err(error) => {
                let decision = self
                    .failures
                    .decide(Err(error), self.spec.quota, key, cost, now)
                    .await?;
                Ok(Reservation::new(decision, Duration::ZERO))
            }
        }
    }

    /// Waits until a request of `cost` may go ahead, if that is within
    /// `max_delay`; otherwise returns the denial at once (see
    /// [`reserve`](Self::reserve)). Waiting uses tokio's timer.
    pub async fn until_ready(
        &self,
        key: &[u8],
        cost: u64,
        max_delay: Duration,
    ) -> Result<Decision, Error> {
        let reservation = self.reserve(key, cost, max_delay).await?;
        if reservation.decision().is_allowed() && !reservation.delay().is_zero() {
            tokio::time::sleep(reservation.delay()).await;
        }
        Ok(reservation.decision())
    }

    /// Forgets everything counted for client `key`.
    pub async fn reset(&self, key: &[u8]) -> Result<(), Error> {
        self.failures.reset(key).await;
        self.engine.reset(key, self.now()?).await
    }

    /// What the store holds for client `key` now, read without counting
    /// anything: its keys and values and, for the window algorithms, the
    /// estimate; see [`Inspection`]. For operators.
    pub async fn inspect(&self, key: &[u8]) -> Result<Inspection, Error> {
        self.engine.inspect(key, self.now()?).await
    }

    /// The store keys a decision for `client` at `at` reads: a window's
    /// buckets, the current one first, then each older one; or the one key
    /// of a compare-and-swap algorithm's state.
    ///
    /// ```
    /// use memcache_ratelimit::{Gcra, MemoryStore, SlidingWindow};
    /// use std::sync::Arc;
    ///
    /// let store = Arc::new(MemoryStore::new());
    /// let at = "2026-11-22T01:07:30Z".parse()?;
    /// let window = SlidingWindow::builder("5/minute".parse()?, store.clone()).sub_windows(2).build()?;
    /// let keys = window.keys_at(b"alice", at)?;
    /// assert_eq!(keys.len(), 3);
    /// let gcra = Gcra::builder("5/second".parse()?, store).build()?;
    /// assert!(gcra.keys_at(b"alice", at)?[0].starts_with(b"rl:alice_"));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn keys_at(&self, client: &[u8], at: DateTime<Utc>) -> Result<Vec<Vec<u8>>, Error> {
        Ok(self.engine.keys(client, unix_nanos(at)?))
    }

    /// What this limiter was built from: its algorithm, quota and settings.
    pub fn spec(&self) -> &LimiterSpec {
        &self.spec
    }

    /// The quota this limiter enforces.
    pub fn quota(&self) -> Quota {
        self.spec.quota
    }

    /// The clock [`check`](Self::check) and [`check_n`](Self::check_n) read.
    pub fn clock(&self) -> &dyn Clock {
        self.spec.clock.as_ref()
    }

    /// What this limiter has decided since it was built; see
    /// [`LimiterStats`].
    pub fn stats(&self) -> LimiterStats {
        let (allowed, denied, errors) = self.failures.outcomes();
        let cas = self.engine.cas_stats();
        LimiterStats {
            allowed,
            denied,
            errors,
            cas_retries: cas.retries,
            cas_known: cas.known,
            cas_stale: cas.stale,
            cas_vanished: cas.vanished,
            sealed_refused: self.engine.sealed_refused(),
            failures: self.failures.stats(self.repairs.count()),
        }
    }

    /// Retries, conflicts and give-ups of the compare-and-swap loop; all
    /// zero for the window algorithms, which never compare and swap.
    pub fn cas_stats(&self) -> CasStats {
        self.engine.cas_stats()
    }

    /// The clock's time in unix nanoseconds; see [`clock_nanos`].
    fn now(&self) -> Result<i64, Error> {
        clock_nanos(&*self.spec.clock)
    }

    /// The engine's decision at `now` (unix nanoseconds), or the failure
    /// policy's in its place: within this poll on a store that answers
    /// at once ([`decide_now`](Self::decide_now)), else waiting for it.
    ///
    /// A `tracing` span wraps the decision only when some subscriber
    /// takes debug records: building, entering and leaving a span nobody
    /// records cost some 400 instructions a decision. The test is the
    /// global most verbose level any subscriber asked for (one atomic
    /// load), so a filter that names the span still gets it; the span
    /// itself then asks its subscriber as before.
    pub(crate) async fn decide(&self, key: &[u8], cost: u64, now: i64) -> Result<Decision, Error> {
        match self.decide_now(key, cost, now) {
            Some(outcome) => outcome,
            None => self.waiting(key, cost, now).await,
        }
    }

    /// [`decide_waiting`](Self::decide_waiting) at `now` through
    /// [`Engine::check`]: what the deciding methods await once
    /// [`decide_now`](Self::decide_now) has found that the store must be
    /// waited for. A plain function, so that its caller's future holds
    /// the waiting decision's future itself, not one more around it.
    fn waiting<'a>(
        &'a self,
        key: &'a [u8],
        cost: u64,
        now: i64,
    ) -> impl Future<Output = Result<Decision, Error>> + 'a {
        self.decide_waiting(
            key,
            cost,
            move |_| Ok(now),
            |k, c, n| self.engine.check(k, c, n),
        )
    }

    /// [`decide`](Self::decide) as a future, for a store that must be
    /// waited for: at the time `now` gives (read when first polled), by
    /// the future `check` makes, [`Engine::check`] or one algorithm's own
    /// where the caller knows which ([`boxed_check`](Self::boxed_check)).
    ///
    /// What the future holds beside the engine's is kept small: a span and
    /// a failure policy's stand-in, both rare where decisions are many,
    /// are boxed when they are needed, and `check` captures no more than
    /// its engine.
    async fn decide_waiting<'a, F>(
        &'a self,
        key: &'a [u8],
        cost: u64,
        now: impl FnOnce(&Self) -> Result<i64, Error>,
        check: impl FnOnce(&'a [u8], u64, i64) -> F,
    ) -> Result<Decision, Error>
    where
        F: Future<Output = Result<Decision, Error>> + 'a,
    {
        let now = now(self)?;
        if let Some(span) = self.span(key, cost) {
            let decision = async move {
                let outcome = check(key, cost, now).await;
                self.conclude(outcome, key, cost, now).await
            };
            return Box::pin(decision.instrument(span)).await;
        }
        let outcome = check(key, cost, now).await;
        match self.concluded(outcome, key, cost, now) {
            Ok(outcome) => outcome,
            Err(stand_in) => stand_in.await,
        }
    }

    /// A decision at `at` (the clock's time when first polled, for
    /// [`When::Now`]),
    /// boxed as a [`Limiter`]'s deciding methods return it, each algorithm
    /// in a box of its own size rather than the size of
    /// [`Engine::check`]'s future, which is the largest algorithm's. Every
    /// box (960 to 1,024 bytes) is then within the sizes glibc's allocator
    /// serves from its per-thread cache (up to 1,032 bytes), where
    /// allocating and freeing a larger block costs some hundreds of
    /// instructions more (callgrind); a unit test holds them there. Each
    /// is built in its box ([`pinned`](crate::boxed::pinned)), not copied
    /// there. A store that answers at once decides within the first poll,
    /// as the engine's future does.
    fn boxed_check<'a>(&'a self, key: &'a [u8], cost: u64, at: When) -> contract::Decided<'a> {
        // Takes the limiter rather than holding it: 8 bytes less in a box
        // that must stay within 1,032.
        let now = move |limiter: &Self| match at {
            When::Now => limiter.now(),
            When::At(at) => unix_nanos(at),
            When::Nanos(now) => Ok(now),
        };
        macro_rules! boxed {
            ($engine:expr) => {
                crate::boxed::pinned(|| {
                    self.decide_waiting(key, cost, now, |k, c, n| $engine.check_nanos(k, c, n))
                })
            };
        }
        match &self.engine {
            Engine::Window(engine) => boxed!(engine),
            Engine::TokenBucket(engine) => boxed!(engine),
            Engine::Gcra(engine) => boxed!(engine),
            Engine::SlidingLog(engine) => boxed!(engine),
            Engine::HybridQuota(engine) => boxed!(engine),
            Engine::DiscreteRefill(engine) => boxed!(engine),
            Engine::Sessionize(engine) => boxed!(engine),
        }
    }

    /// [`decide`](Self::decide) within the caller's poll, with no future
    /// at all, when the store answers at once; `None`, having done
    /// nothing, when it must be waited for.
    pub(crate) fn decide_now(
        &self,
        key: &[u8],
        cost: u64,
        now: i64,
    ) -> Option<Result<Decision, Error>> {
        let span = self.span(key, cost);
        // A span is built and entered only for a decision made here.
        if span.is_some() && !self.engine.answers_at_once() {
            return None;
        }
        let _entered = span.as_ref().map(tracing::Span::enter);
        Some(match self.engine.check_now(key, cost, now)? {
            Ok(decision) => {
                self.failures.count(&decision);
                decided(&decision);
                Ok(decision)
            }
            // The failure policy's stand-in decides on an in-process store
            // too.
            failed => at_once(self.conclude(failed, key, cost, now)).and_then(|outcome| outcome),
        })
    }

    /// The span of a decision, when some subscriber takes debug records.
    #[inline]
    fn span(&self, key: &[u8], cost: u64) -> Option<tracing::Span> {
        if tracing::level_filters::LevelFilter::current() < tracing::Level::DEBUG {
            return None;
        }
        Some(self.debug_span(key, cost))
    }

    /// [`span`](Self::span)'s span, out of the decision's way.
    #[cold]
    #[inline(never)]
    fn debug_span(&self, key: &[u8], cost: u64) -> tracing::Span {
        tracing::debug_span!(
            "rate_limit",
            algorithm = self.spec.algorithm.name(),
            client = %Printable(key),
            cost,
        )
    }

    /// The engine's `outcome`, or the failure policy's decision in place
    /// of its error, counted and traced.
    async fn conclude(
        &self,
        outcome: Result<Decision, Error>,
        key: &[u8],
        cost: u64,
        now: i64,
    ) -> Result<Decision, Error> {
        let outcome = self
            .failures
            .decide(outcome, self.spec.quota, key, cost, now)
            .await;
        traced(outcome)
    }

    /// [`conclude`](Self::conclude) within the caller's poll; or, where
    /// the failure policy waits for a stand-in's decision (rare: the store
    /// failed, under a fallback policy), `conclude`'s future, boxed.
    fn concluded<'a>(
        &'a self,
        outcome: Result<Decision, Error>,
        key: &'a [u8],
        cost: u64,
        now: i64,
    ) -> Result<Result<Decision, Error>, contract::Decided<'a>> {
        if self.failures.stand_in(&outcome).is_some() {
            return Err(Box::pin(self.conclude(outcome, key, cost, now)));
        }
        Ok(traced(self.failures.settle(outcome, self.spec.quota, None)))
    }
}

/// `outcome`, traced.
fn traced(outcome: Result<Decision, Error>) -> Result<Decision, Error> {
    match &outcome {
        Ok(decision) => decided(decision),
        Err(error) => tracing::debug!(%error, "no decision"),
    }
    outcome
}

/// The `tracing` record of a decision.
#[inline]
fn decided(decision: &Decision) {
    tracing::trace!(
        allowed = decision.is_allowed(),
        remaining = decision.remaining(),
        under_failure = decision.under_failure(),
        "decided"
    );
}

/// When a boxed decision is taken.
#[derive(Debug, Clone, Copy)]
pub(crate) enum When {
    /// The clock's time when the decision is first polled.
    Now,
    /// This time.
    At(DateTime<Utc>),
    /// This time, in nanoseconds since the unix epoch.
    Nanos(i64),
}

/// `clock`'s time in unix nanoseconds, read without building a
/// `DateTime` where the clock can ([`Clock::unix_nanos`]), or the error
/// for a clock that reads a time beyond what they can hold.
pub(crate) fn clock_nanos(clock: &dyn Clock) -> Result<i64, Error> {
    match clock.unix_nanos() {
        Some(now) => Ok(now),
        None => unix_nanos(clock.now()),
    }
}
