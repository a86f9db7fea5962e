//! What a limiter holds for one client, read without counting anything:
//! for operators, not for deciding.

use std::time::Duration;

/// One key a limiter keeps for a client, as read from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InspectedKey {
    /// The key, as the store holds it.
    pub key: String,
    /// The value: a counter's count, or a compare-and-swap state's bytes
    /// as text. `None` when the key is absent (never written, expired or
    /// evicted).
    pub value: Option<String>,
}

/// A client's keys and, for the window algorithms, the estimate they add
/// up to; see [`RateLimiter::inspect`](crate::RateLimiter::inspect).
///
/// ```
/// use memcache_ratelimit::{ManualClock, MemoryStore, RateLimiter, SlidingWindow};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let clock = ManualClock::from_unix_secs(1_800_000_000);
/// let limiter = SlidingWindow::builder("100/minute".parse()?, Arc::new(MemoryStore::with_clock(clock.clone())))
///     .sub_windows(1)
///     .clock(clock.clone())
///     .build()?;
/// for _ in 0..40 {
///     limiter.check(b"alice").await?;
/// }
/// clock.advance(Duration::from_secs(90));
/// let seen = limiter.inspect(b"alice").await?;
/// assert_eq!(seen.keys[0].key, "rl:alice_202701150801");
/// assert_eq!(seen.keys[0].value, None);
/// assert_eq!(seen.keys[1].value.as_deref(), Some("40"));
/// // Half of the older minute is still inside the window.
/// assert_eq!(seen.estimate, Some(20.0));
/// assert_eq!(seen.remaining, Some(80));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Inspection {
    /// The limit of the client's quota.
    pub limit: u64,
    /// The keys the next decision would touch, the current bucket first
    /// for the windows.
    pub keys: Vec<InspectedKey>,
    /// The windows' estimate of the count in the sliding window now;
    /// `None` for the compare-and-swap algorithms, whose state is shown
    /// as stored.
    pub estimate: Option<f64>,
    /// What a request of cost 1 would leave, for the windows.
    pub remaining: Option<u64>,
    /// When every counted request will have left the window, for the
    /// windows.
    pub reset_after: Option<Duration>,
}
