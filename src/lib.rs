//! Distributed rate limiting on memcached.
//!
//! A fleet of service instances enforces per-client limits by sharing
//! counters in memcached. memcached has atomic counters but no
//! transactions, so the core algorithm is the **approximated sliding
//! window**: each request does one atomic, create-on-miss increment of the
//! counter for the current time bucket (a key such as
//! `rl:alice_202611220107`) and, in the same round trip to the same server,
//! reads the counters of the buckets before it. The count over the last
//! period is estimated from them, weighting the oldest bucket by the share
//! of it still inside the period. One round trip per decision, no locks,
//! no read-modify-write races.
//!
//! - [`SlidingWindow`]: the approximated sliding window, with `n`
//!   sub-windows for more accuracy.
//! - [`FixedWindow`]: one counter per calendar window; the cheapest, and up
//!   to twice the limit across a window boundary.
//! - [`TokenBucket`] and [`Gcra`]: linear limiters with a burst, kept as one
//!   value per client and updated by optimistic compare-and-swap (memcached
//!   has no transactions), with bounded, jittered retries ([`CasPolicy`]).
//!   [`Gcra`] can also queue requests up to a maximum delay.
//! - [`SlidingLog`]: the exact sliding log, every admitted timestamp in one
//!   value, for small limits that must hold over every window.
//! - [`HybridQuota`]: Tony Finch's hybrid quota, bursty for quiet clients
//!   and held to an even rate once a client spends its whole quota.
//! - All run on any [`Store`](store::Store): [`MemcachedStore`] (one server
//!   or a fleet, meta protocol) or [`MemoryStore`] (embedded, in process,
//!   with memcached's rules).
//! - Time comes from a [`Clock`]: [`SystemClock`] in production,
//!   [`ManualClock`] in tests and simulations.
//! - [`DynamicLimiter`] picks each client's quota at request time (API
//!   plans), building limiters from a [`LimiterSpec`].
//! - With the `tower` feature, the `middleware` module rate limits axum and hyper
//!   services, answering 429 with `Retry-After` and the IETF `RateLimit`
//!   header fields.
//! - Every limiter counts its decisions ([`RateLimiter::stats`]), exports
//!   them through the `metrics` facade (feature `metrics`) and runs each
//!   decision in a `tracing` span.
//!
//! # Example
//!
//! ```
//! use memcache_ratelimit::{ManualClock, MemoryStore, Quota, RateLimiter, SlidingWindow};
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let clock = ManualClock::from_unix_secs(1_800_000_000);
//! let store = Arc::new(MemoryStore::with_clock(clock.clone()));
//! let limiter = SlidingWindow::builder("100/minute".parse::<Quota>()?, store)
//!     .clock(clock.clone())
//!     .build()?;
//!
//! // 42 requests in one minute...
//! for _ in 0..42 {
//!     limiter.check(b"client-42").await?;
//! }
//! // ...and 18 in the next, 15 s into it.
//! clock.advance(Duration::from_secs(75));
//! let mut last = None;
//! for _ in 0..18 {
//!     last = Some(limiter.check(b"client-42").await?);
//! }
//! // Estimate: 18 + 42 × 45/60 = 49.5, so 50 of 100 remain.
//! let decision = last.unwrap();
//! assert!(decision.is_allowed());
//! assert_eq!(decision.remaining(), 50);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! With memcached, only the store changes:
//!
//! ```no_run
//! use memcache_ratelimit::{MemcachedStore, RateLimiter, SlidingWindow};
//! use std::sync::Arc;
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let store = MemcachedStore::connect(["10.0.0.1:11211", "10.0.0.2:11211"]).await?;
//! let limiter = SlidingWindow::builder("100/minute".parse()?, Arc::new(store))
//!     .sub_windows(4)
//!     .build()?;
//! let decision = limiter.check(b"client-42").await?;
//! if decision.is_denied() {
//!     println!("429, retry after {:?}", decision.retry_after());
//! }
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod algorithm;
mod clock;
#[cfg(feature = "config")]
pub mod config;
mod decision;
mod deny_cache;
pub mod dynamic;
mod error;
pub mod failure;
mod headers;
pub mod key;
mod limiter;
#[cfg(feature = "tower")]
pub mod middleware;
mod quota;
mod spec;
mod stack_text;
mod stats;
pub mod store;

pub use algorithm::{
    CasPolicy, CasStats, FixedWindow, Gcra, HybridQuota, InspectedKey, Inspection, Reservation,
    SlidingLog, SlidingWindow, TokenBucket,
};
pub use clock::{Clock, ManualClock, SystemClock};
pub use decision::Decision;
pub use deny_cache::DenyCache;
pub use dynamic::{DynamicLimiter, QuotaResolver, MAX_DYNAMIC_QUOTAS};
pub use error::{ConfigError, Error, StoreError, StoreErrorKind};
pub use failure::{FailurePolicy, FailureStats};
pub use headers::HeaderPolicy;
pub use key::KeySpace;
pub use limiter::{
    DeniedRequests, LimiterBuilder, RateLimiter, DEFAULT_DEADLINE, DEFAULT_MAX_CLOCK_SKEW,
    MAX_CLOCK_SKEW, MAX_DEADLINE,
};
pub use quota::{Quota, MAX_PERIOD, MIN_PERIOD};
pub use spec::{Algorithm, LimiterSpec};
pub use stats::LimiterStats;
pub use store::{MemcachedStore, MemoryStore};

/// The README's examples, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
