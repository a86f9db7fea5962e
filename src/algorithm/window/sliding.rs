//! The approximated sliding window.

use super::buckets::Buckets;
use super::engine::WindowCounter;
use super::sealed::SealedCache;
use crate::algorithm::settings::Settings;
use crate::error::ConfigError;

/// The most sub-windows a sliding window accepts.
pub const MAX_SUB_WINDOWS: u32 = 600;

/// The sub-windows a sliding window has unless told otherwise: the builder,
/// the configuration file, the command line and [`Algorithm::default`](crate::Algorithm::default)
/// all use it.
///
/// Four is where the simulations' accuracy-and-cost table turns. Averaged
/// over their fifteen workloads, against the exact sliding window, the
/// mean relative difference of the estimate falls from 3.8% with one
/// sub-window to 1.35% with four (0.74% with twelve, 0.45% with sixty),
/// while the keys touched per decision go from 1.43 to 1.63 (2.13 with
/// twelve, 5.35 with sixty) and the counters a client holds from 1.9 to
/// 4.3 (11 with twelve). Most of the gain comes by four; past it, each
/// halving of the error costs several times the memory.
pub const DEFAULT_SUB_WINDOWS: u32 = 4;

/// The approximated sliding window (Jean Baptiste Muscat, "Distributed Rate-Limiting Algorithms", Criteo R&D Blog, 2022, <https://medium.com/criteo-engineering/distributed-rate-limiting-algorithms-a35f7e24783>,
/// "Approximated sliding window from fixed windows").
///
/// The period is split into `n` sub-windows (default
/// [`DEFAULT_SUB_WINDOWS`]), each a fixed-window
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
///
/// A type only names the algorithm: `SlidingWindow::builder` starts a
/// [`LimiterBuilder`](crate::LimiterBuilder) whose `build` gives a
/// [`RateLimiter`](crate::RateLimiter).
#[derive(Debug, Clone, Copy)]
pub enum SlidingWindow {}

/// How many sealed buckets a sliding window keeps by default, as whole
/// clients of `n` buckets each: 65,536 clients with one sub-window, 1,092
/// with 60. A service with more active clients per process sets
/// [`sealed_cache`](crate::LimiterBuilder::sealed_cache) to clients × `n`.
pub const DEFAULT_SEALED_CACHE: usize = 65_536;

impl WindowCounter {
    /// The sliding window's engine: `n` sub-windows, with a cache of
    /// `sealed_cache` sealed buckets (none for 0).
    pub(crate) fn sliding(
        settings: Settings,
        n: u32,
        sealed_cache: usize,
    ) -> Result<Self, ConfigError> {
        if n > MAX_SUB_WINDOWS {
            return Err(ConfigError::new(
                "sub_windows",
                format!("{n} is more than {MAX_SUB_WINDOWS}"),
            ));
        }
        let buckets = Buckets::new(settings.quota.period(), n, n)?;
        let sealed = (sealed_cache > 0).then(|| SealedCache::new(sealed_cache, n));
        Ok(WindowCounter {
            settings,
            buckets,
            sealed,
        })
    }
}
