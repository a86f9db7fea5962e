//! The answer to one request.

use std::time::Duration;

use chrono::{DateTime, Utc};

/// Whether a request may go ahead, and the state of the client's limit to
/// report back to it (for example in `RateLimit` and `Retry-After` headers).
///
/// ```
/// use memcache_ratelimit::{FixedWindow, ManualClock, MemoryStore, Quota, RateLimiter};
/// use std::num::NonZeroU64;
/// use std::sync::Arc;
///
/// # tokio_test_block(async {
/// let clock = ManualClock::from_unix_secs(1_700_000_000);
/// let store = Arc::new(MemoryStore::with_clock(clock.clone()));
/// let limiter = FixedWindow::builder(Quota::per_minute(NonZeroU64::new(1).unwrap()), store)
///     .clock(clock)
///     .build()?;
///
/// let first = limiter.check(b"alice").await?;
/// assert!(first.is_allowed());
/// assert_eq!(first.remaining(), 0);
///
/// let second = limiter.check(b"alice").await?;
/// assert!(!second.is_allowed());
/// // The window started 20 s before this clock's time, so 40 s remain.
/// assert_eq!(second.retry_after().unwrap().as_secs(), 40);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # });
/// # fn tokio_test_block<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    allowed: bool,
    limit: u64,
    remaining: u64,
    reset_after: Duration,
    retry_after: Option<Duration>,
    used: f64,
    under_failure: bool,
    /// [`session_start`](Self::session_start), unix nanoseconds.
    session_start: Option<i64>,
}

impl Decision {
    /// A decision that lets the request through.
    pub fn allowed(limit: u64, remaining: u64, reset_after: Duration) -> Self {
        Self {
            allowed: true,
            limit,
            remaining,
            reset_after,
            retry_after: None,
            used: limit.saturating_sub(remaining) as f64,
            under_failure: false,
            session_start: None,
        }
    }

    /// A decision that turns the request away until `retry_after` has
    /// passed.
    pub fn denied(
        limit: u64,
        remaining: u64,
        reset_after: Duration,
        retry_after: Duration,
    ) -> Self {
        Self {
            allowed: false,
            limit,
            remaining,
            reset_after,
            retry_after: Some(retry_after),
            used: limit.saturating_sub(remaining) as f64,
            under_failure: false,
            session_start: None,
        }
    }

    /// Sets what the algorithm counts against the limit after this
    /// decision, when it knows it more finely than `limit − remaining`.
    #[must_use]
    pub fn with_used(mut self, used: f64) -> Self {
        self.used = used;
        self
    }

    /// Whether the request may go ahead.
    pub fn is_allowed(&self) -> bool {
        self.allowed
    }

    /// Whether the request was turned away.
    pub fn is_denied(&self) -> bool {
        !self.allowed
    }

    /// The limit per period.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// How many more cost units the client may spend right now, rounded
    /// down.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// How long until the client's usage has fully drained, if it sends
    /// nothing more.
    pub fn reset_after(&self) -> Duration {
        self.reset_after
    }

    /// How much the algorithm counts against the limit right after this
    /// decision, unrounded: the sliding window's weighted estimate, the
    /// tokens missing from a bucket, the entries in a log. Simulations
    /// compare it with the exact count; `remaining` is the limit less this,
    /// rounded down.
    pub fn used(&self) -> f64 {
        self.used
    }

    /// For a denied request, how long until the same request would be
    /// allowed if the client sends nothing else meanwhile; `None` when the
    /// request was allowed.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// Whether the store failed (an error, or the deadline passed) and this
    /// decision was made by the limiter's
    /// [`FailurePolicy`](crate::FailurePolicy) instead.
    pub fn under_failure(&self) -> bool {
        self.under_failure
    }

    /// When the client's current session started, for
    /// [`Sessionize`](crate::Sessionize) (Smyte's `RL.SESSIONIZE`): the
    /// time of the last request it allowed, this one's own time if it was
    /// allowed. `None` for every other algorithm, and for a decision made
    /// under the failure policy, which knows nothing stored (the
    /// fallback's local stand-in keeps sessions of its own, not the
    /// store's).
    ///
    /// ```
    /// use memcache_ratelimit::{FixedWindow, MemoryStore, Sessionize};
    /// use std::sync::Arc;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let store = Arc::new(MemoryStore::new());
    /// let at = "2026-11-25T10:00:00Z".parse()?;
    /// let sessions = Sessionize::builder("1/hour".parse()?, store.clone()).build()?;
    /// assert_eq!(sessions.check_at(b"alice", 1, at).await?.session_start(), Some(at));
    /// let window = FixedWindow::builder("1/hour".parse()?, store).build()?;
    /// assert_eq!(window.check_at(b"alice", 1, at).await?.session_start(), None);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn session_start(&self) -> Option<DateTime<Utc>> {
        self.session_start.map(DateTime::from_timestamp_nanos)
    }

    /// The same decision, reporting a session started at `nanos` (unix
    /// nanoseconds).
    #[must_use]
    pub(crate) fn with_session_start(mut self, nanos: i64) -> Self {
        self.session_start = Some(nanos);
        self
    }

    /// The same decision, reporting `other`'s session start (or none).
    #[must_use]
    pub(crate) fn with_session_of(mut self, other: &Decision) -> Self {
        self.session_start = other.session_start;
        self
    }

    /// The same decision with `cost` units given back: as many more
    /// remaining, up to the limit.
    #[must_use]
    pub(crate) fn refunded(mut self, cost: u64) -> Self {
        self.remaining = self.remaining.saturating_add(cost).min(self.limit);
        self.used = (self.used - cost as f64).max(0.0);
        self
    }

    /// Marks the decision as made under the failure policy, which knows
    /// no session stored.
    #[must_use]
    pub(crate) fn made_under_failure(mut self) -> Self {
        self.under_failure = true;
        self.session_start = None;
        self
    }

    /// The same decision for a request made `lead` earlier: its waits,
    /// counted from the request's own time, are that much longer.
    #[must_use]
    pub(crate) fn delayed_by(mut self, lead: Duration) -> Self {
        self.reset_after = self.reset_after.saturating_add(lead);
        self.retry_after = self.retry_after.map(|retry| retry.saturating_add(lead));
        self
    }
}
