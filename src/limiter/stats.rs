//! What a limiter has decided since it was built, for a service to export.

use crate::limiter::failure::FailureStats;

/// Counts of a limiter's decisions and of the work behind them, since it
/// was built. Every limiter keeps them ([`RateLimiter::stats`]) at the cost
/// of one relaxed atomic add per decision; a service exports them by
/// reading them periodically, for example into the `metrics` crate's
/// facade with `record` (cargo feature `metrics`).
///
/// ```
/// use memcache_ratelimit::{MemoryStore, RateLimiter, SlidingWindow};
/// use std::sync::Arc;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let limiter = SlidingWindow::builder("2/minute".parse()?, Arc::new(MemoryStore::new())).build()?;
/// for _ in 0..3 {
///     limiter.check(b"alice").await?;
/// }
/// assert!(limiter.check_n(b"alice", 0).await.is_err());
/// let stats = limiter.stats();
/// assert_eq!((stats.allowed, stats.denied, stats.errors), (2, 1, 1));
/// assert_eq!(stats.decisions(), 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
///
/// [`RateLimiter::stats`]: crate::RateLimiter::stats
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LimiterStats {
    /// Requests allowed, by the store or under the failure policy.
    pub allowed: u64,
    /// Requests denied, by the store or under the failure policy.
    pub denied: u64,
    /// Calls answered with an error rather than a decision: bad costs,
    /// exhausted compare-and-swap attempts, and store failures returned
    /// under [`FailurePolicy::ReturnError`](crate::FailurePolicy::ReturnError).
    pub errors: u64,
    /// Compare-and-swap attempts made again after losing a race to
    /// another writer (always 0 for the window algorithms).
    pub cas_retries: u64,
    /// Compare-and-swap decisions written on the state the limiter already
    /// knew, without reading it first (see
    /// [`CasPolicy::known_states`](crate::algorithm::CasPolicy::known_states)).
    pub cas_known: u64,
    /// Of those, the ones that found the state changed by another writer,
    /// or gone, and decided again.
    pub cas_stale: u64,
    /// Of the stale ones, those that found the state gone (expired or
    /// evicted) and wrote it anew without a read.
    pub cas_vanished: u64,
    /// Sliding window: clients whose sealed buckets the in-process cache
    /// had no room for, since it was full of clients still read (see
    /// [`sealed_cache`](crate::LimiterBuilder::sealed_cache)). Each of
    /// their decisions reads those buckets from the store again; a count
    /// that keeps growing means the cache is too small for the clients one
    /// process sees within a window. Always 0 for the other algorithms.
    pub sealed_refused: u64,
    /// Store failures, what the failure policy made of them, and counters
    /// repaired.
    pub failures: FailureStats,
}

impl LimiterStats {
    /// Decisions made: allowed plus denied.
    pub fn decisions(&self) -> u64 {
        self.allowed + self.denied
    }

    /// The sum of two limiters' counts, for a limiter made of several.
    #[must_use]
    pub fn plus(self, other: Self) -> Self {
        let f = (self.failures, other.failures);
        Self {
            allowed: self.allowed + other.allowed,
            denied: self.denied + other.denied,
            errors: self.errors + other.errors,
            cas_retries: self.cas_retries + other.cas_retries,
            cas_known: self.cas_known + other.cas_known,
            cas_stale: self.cas_stale + other.cas_stale,
            cas_vanished: self.cas_vanished + other.cas_vanished,
            sealed_refused: self.sealed_refused + other.sealed_refused,
            failures: FailureStats {
                absorbed: f.0.absorbed + f.1.absorbed,
                store_errors: f.0.store_errors + f.1.store_errors,
                deadlines: f.0.deadlines + f.1.deadlines,
                fallbacks: f.0.fallbacks + f.1.fallbacks,
                returned: f.0.returned + f.1.returned,
                repaired: f.0.repaired + f.1.repaired,
            },
        }
    }
}

#[cfg(feature = "metrics")]
impl LimiterStats {
    /// Sets these counts on the `metrics` crate's facade, as counters
    /// labelled `limiter = <limiter>`, for whichever exporter the service
    /// installed (Prometheus, StatsD, ...). The counts only grow, so a
    /// service calls this on a timer with a fresh [`RateLimiter::stats`]:
    ///
    /// | counter | labels |
    /// |---|---|
    /// | `ratelimit_decisions_total` | `outcome` = `allowed` or `denied` |
    /// | `ratelimit_errors_total` | |
    /// | `ratelimit_cas_retries_total` | |
    /// | `ratelimit_cas_known_total` | |
    /// | `ratelimit_cas_stale_total` | |
    /// | `ratelimit_cas_vanished_total` | |
    /// | `ratelimit_sealed_refused_total` | |
    /// | `ratelimit_store_failures_total` | `kind` = `error` or `deadline` |
    /// | `ratelimit_fallbacks_total` | |
    /// | `ratelimit_counter_repairs_total` | |
    ///
    /// ```
    /// use memcache_ratelimit::{MemoryStore, RateLimiter, SlidingWindow};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let limiter = Arc::new(
    ///     SlidingWindow::builder("100/minute".parse()?, Arc::new(MemoryStore::new())).build()?,
    /// );
    /// let exported = limiter.clone();
    /// let exporter = tokio::spawn(async move {
    ///     let mut every = tokio::time::interval(Duration::from_secs(10));
    ///     loop {
    ///         every.tick().await;
    ///         exported.stats().record("api");
    ///     }
    /// });
    /// limiter.check(b"alice").await?;
    /// exporter.abort();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    ///
    /// [`RateLimiter::stats`]: crate::RateLimiter::stats
    pub fn record(&self, limiter: &str) {
        let name = limiter.to_owned();
        let set = |counter: metrics::Counter, value: u64| counter.absolute(value);
        let outcome = |outcome: &'static str| metrics::counter!("ratelimit_decisions_total", "limiter" => name.clone(), "outcome" => outcome);
        set(outcome("allowed"), self.allowed);
        set(outcome("denied"), self.denied);
        let kind = |kind: &'static str| metrics::counter!("ratelimit_store_failures_total", "limiter" => name.clone(), "kind" => kind);
        set(kind("error"), self.failures.store_errors);
        set(kind("deadline"), self.failures.deadlines);
        let plain = |counter: &'static str| metrics::counter!(counter, "limiter" => name.clone());
        set(plain("ratelimit_errors_total"), self.errors);
        set(plain("ratelimit_cas_retries_total"), self.cas_retries);
        set(plain("ratelimit_cas_known_total"), self.cas_known);
        set(plain("ratelimit_cas_stale_total"), self.cas_stale);
        set(plain("ratelimit_cas_vanished_total"), self.cas_vanished);
        set(plain("ratelimit_sealed_refused_total"), self.sealed_refused);
        set(plain("ratelimit_fallbacks_total"), self.failures.fallbacks);
        set(
            plain("ratelimit_counter_repairs_total"),
            self.failures.repaired,
        );
    }
}
