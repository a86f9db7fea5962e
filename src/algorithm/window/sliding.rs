//! The approximated sliding window.

use std::sync::Arc;

use chrono::{DateTime, Utc};

use super::buckets::Buckets;
use super::engine::WindowCounter;
use super::sealed::SealedCache;
use crate::error::{ConfigError, Error};
use crate::limiter::spec::{Algorithm, LimiterSpec};
use crate::limiter::{delegate_rate_limiter, other_algorithm, LimiterBuilder};
use crate::quota::Quota;
use crate::store::Store;

/// The most sub-windows a sliding window accepts.
pub const MAX_SUB_WINDOWS: u32 = 600;

/// The approximated sliding window (Jean Baptiste Muscat, "Distributed Rate-Limiting Algorithms", Criteo R&D Blog, 2022, <https://medium.com/criteo-engineering/distributed-rate-limiting-algorithms-a35f7e24783>,
/// "Approximated sliding window from fixed windows").
///
/// The period is split into `n` sub-windows (default 1), each a fixed-window
/// counter aligned on unix time. A request increments the current
/// sub-window's counter and, in the same round trip to the same server,
/// reads the `n` before it. The count over the period ending now is
/// estimated as the current and the `n - 1` previous sub-windows in full,
/// plus the oldest one weighted by the share of it still inside the period:
///
/// ```text
/// n = 1:  estimate = current + previous × (1 − elapsed)
/// n > 1:  estimate = sub[0] + … + sub[n−1] + sub[n] × (1 − elapsed)
/// ```
///
/// where `elapsed` is the fraction of the current sub-window already gone.
/// For example, with 42 requests in the previous minute, 18 in this one and
/// 15 s into it, the estimate is `18 + 42 × 45/60 = 49.5`. Under a steady
/// rate the estimate is exact. It errs only when the oldest sub-window's
/// traffic was bunched at one end. With `c` requests in the oldest
/// sub-window, the estimate differs from the exact count by between
/// `−c × elapsed` (they all came at its end, still inside the period) and
/// `+c × (1 − elapsed)` (they all came at its start, already out of it), so
/// smaller sub-windows bound it more tightly, at the price of `n + 1` keys
/// read per decision (all in the same round trip; a client holds up to
/// `n + 2` counters, since each lives past its last read by the allowed
/// clock skew, at least one second, plus the deadline).
///
/// ```
/// use memcache_ratelimit::{ManualClock, MemoryStore, RateLimiter, SlidingWindow};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let clock = ManualClock::from_unix_secs(1_800_000_000); // a minute boundary
/// let store = Arc::new(MemoryStore::with_clock(clock.clone()));
/// let limiter = SlidingWindow::builder("10/minute".parse()?, store)
///     .sub_windows(4)
///     .clock(clock.clone())
///     .build()?;
///
/// for _ in 0..10 {
///     assert!(limiter.check(b"alice").await?.is_allowed());
/// }
/// // A fixed window would forget all ten at the minute mark; here they
/// // still count until they slide out.
/// clock.advance(Duration::from_secs(60));
/// assert!(limiter.check(b"alice").await?.is_denied());
/// clock.advance(Duration::from_secs(15));
/// assert!(limiter.check(b"alice").await?.is_allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct SlidingWindow {
    inner: WindowCounter,
}

/// How many sealed buckets a sliding window keeps by default, as whole
/// clients of `n` buckets each: 65,536 clients with one sub-window, 1,092
/// with 60. A service with more active clients per process sets
/// [`sealed_cache`](LimiterBuilder::sealed_cache) to clients × `n`.
pub const DEFAULT_SEALED_CACHE: usize = 65_536;

impl SlidingWindow {
    /// Starts building a sliding window enforcing `quota` on `store`.
    /// It starts with one sub-window.
    pub fn builder(quota: Quota, store: Arc<dyn Store>) -> LimiterBuilder<SlidingWindow> {
        LimiterBuilder::from_spec(
            LimiterSpec::new(Algorithm::SlidingWindow { sub_windows: 1 }, quota),
            store,
        )
    }

    /// The number of sub-windows the period is split into.
    pub fn sub_windows(&self) -> u32 {
        self.inner.buckets.history()
    }

    /// The keys read for `client` at `at`: the current sub-window first,
    /// then each older one.
    pub fn keys_at(&self, client: &[u8], at: DateTime<Utc>) -> Result<Vec<Vec<u8>>, Error> {
        self.inner.keys_at(client, at)
    }
}

impl LimiterBuilder<SlidingWindow> {
    /// Splits the period into `n` sub-windows (default 1). `n` must divide
    /// the period into whole milliseconds and be at most
    /// [`MAX_SUB_WINDOWS`].
    pub fn sub_windows(mut self, n: u32) -> Self {
        self.spec = self
            .spec
            .with_algorithm(Algorithm::SlidingWindow { sub_windows: n });
        self
    }

    /// How many sealed buckets to keep in process (default
    /// [`DEFAULT_SEALED_CACHE`]; 0 turns the cache off). A bucket is sealed
    /// once it closed longer ago than the allowed clock skew
    /// ([`max_clock_skew`](LimiterBuilder::max_clock_skew)) plus the
    /// deadline: no process can change it any more, so its count is read
    /// once per client and kept until no decision reads it. In steady
    /// state a decision is then one increment, whatever `n` is. The cache
    /// is kept per client, `n` buckets each, so it holds
    /// `max(1, buckets / n)` clients; each takes about `16·n + 80` bytes
    /// plus its key. With more active clients than that, the clients that
    /// do not fit read their sealed buckets again each time: size it to
    /// the clients one process sees within a window. The cache assumes time
    /// moves forward: replaying events out of order with
    /// [`check_at`](crate::RateLimiter::check_at) wants it off.
    pub fn sealed_cache(mut self, buckets: usize) -> Self {
        self.spec = self.spec.sealed_cache(buckets);
        self
    }

    /// Validates the settings and builds the limiter.
    pub fn build(self) -> Result<SlidingWindow, ConfigError> {
        let (settings, spec) = self.into_parts(Self::build)?;
        let n = spec
            .algorithm
            .sub_windows()
            .ok_or_else(|| other_algorithm(&spec, "sliding window"))?;
        if n > MAX_SUB_WINDOWS {
            return Err(ConfigError::new(
                "sub_windows",
                format!("{n} is more than {MAX_SUB_WINDOWS}"),
            ));
        }
        let buckets = Buckets::new(settings.quota.period(), n, n)?;
        let sealed = (spec.sealed_cache > 0).then(|| SealedCache::new(spec.sealed_cache, n));
        Ok(SlidingWindow {
            inner: WindowCounter {
                settings,
                buckets,
                sealed,
            },
        })
    }
}

delegate_rate_limiter!(SlidingWindow, "sliding_window");
