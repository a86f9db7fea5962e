//! Fixed window: one counter per client per calendar window.

use super::buckets::Buckets;
use super::engine::WindowCounter;
use super::moment::Estimator;
use crate::algorithm::settings::Settings;
use crate::error::ConfigError;

/// The fixed window: one counter per client per window, such as
/// `rl:alice_202611220107` for the minute starting 01:07 UTC, incremented
/// with one atomic create-on-miss increment per request (Jean Baptiste Muscat, "Distributed Rate-Limiting Algorithms", Criteo R&D Blog, 2022, <https://medium.com/criteo-engineering/distributed-rate-limiting-algorithms-a35f7e24783>,
/// "Fixed window").
///
/// Windows are aligned on unix time, so every process agrees on them. It is
/// exact within a window and the cheapest algorithm there is, but it forgets
/// everything at the window boundary: a client can spend its whole limit
/// just before a boundary and again just after it, so up to twice the limit
/// can pass in one period.
///
/// ```
/// use memcache_ratelimit::{FixedWindow, ManualClock, MemoryStore, RateLimiter};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let clock = ManualClock::from_unix_secs(1_800_000_000); // a minute boundary
/// let store = Arc::new(MemoryStore::with_clock(clock.clone()));
/// let limiter = FixedWindow::builder("3/minute".parse()?, store).clock(clock.clone()).build()?;
///
/// for _ in 0..3 {
///     assert!(limiter.check(b"alice").await?.is_allowed());
/// }
/// assert!(limiter.check(b"alice").await?.is_denied());
/// clock.advance(Duration::from_secs(60));
/// assert!(limiter.check(b"alice").await?.is_allowed());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
///
/// A type only names the algorithm: `FixedWindow::builder` starts a
/// [`LimiterBuilder`](crate::LimiterBuilder) whose `build` gives a
/// [`RateLimiter`](crate::RateLimiter).
#[derive(Debug, Clone, Copy)]
pub enum FixedWindow {}

impl WindowCounter {
    /// The fixed window's engine: one bucket per period, none read before
    /// it.
    pub(crate) fn fixed(settings: Settings) -> Result<Self, ConfigError> {
        let buckets = Buckets::new(settings.quota.period(), 1, 0)?;
        Ok(WindowCounter {
            settings,
            buckets,
            sealed: None,
            estimator: Estimator::Uniform,
        })
    }
}
