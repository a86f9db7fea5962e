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
//!   has no transactions), with bounded, jittered retries
//!   ([`CasPolicy`](algorithm::CasPolicy)).
//!   [`Gcra`] can also queue requests up to a maximum delay.
//! - [`SlidingLog`]: the exact sliding log, every admitted timestamp in one
//!   value, for small limits that must hold over every window.
//! - [`HybridQuota`]: Tony Finch's hybrid quota, bursty for quiet clients
//!   and held to an even rate once a client spends its whole quota.
//! - [`DiscreteRefill`]: Smyte's token bucket, whose tokens come back in
//!   whole steps at each whole period, and [`Sessionize`], the same bucket
//!   always strict, telling when the client's session started
//!   ([`Decision::session_start`]).
//! - All run on any [`Store`](store::Store): [`MemcachedStore`] (one server
//!   or a fleet, meta protocol) or [`MemoryStore`] (embedded, in process,
//!   with memcached's rules).
//! - Time comes from a [`Clock`]: [`SystemClock`] in production,
//!   [`ManualClock`] in tests and simulations.
//! - [`DynamicLimiter`] picks each client's quota at request time (API
//!   plans), building limiters from a [`LimiterSpec`].
//! - With the `tower` feature, the [`http`] module rate limits axum and hyper
//!   services, answering 429 with `Retry-After` and the IETF `RateLimit`
//!   header fields.
//! - Every algorithm builds the same [`RateLimiter`]; what wraps one
//!   ([`DenyCache`], [`DynamicLimiter`]) shares the object-safe [`Limiter`]
//!   trait with it, and the http layer takes any [`Limiter`].
//! - Every limiter counts its decisions ([`RateLimiter::stats`]), exports
//!   them through the `metrics` facade (feature `metrics`) and runs each
//!   decision in a `tracing` span.
//!
//! # Example
//!
//! ```
//! use memcache_ratelimit::{ManualClock, MemoryStore, Quota, SlidingWindow};
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let clock = ManualClock::from_unix_secs(1_800_000_000);
//! let store = Arc::new(MemoryStore::with_clock(clock.clone()));
//! // One sub-window: the previous minute, weighted (the default is 4).
//! let limiter = SlidingWindow::builder("100/minute".parse::<Quota>()?, store)
//!     .sub_windows(1)
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
//! # #[cfg(feature = "memcached")] {
//! use memcache_ratelimit::{MemcachedStore, SlidingWindow};
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
//! # }
//! ```
//!
//! # Layout
//!
//! Each folder of `src/` is one layer, and a layer uses only the layers
//! below it; no module uses one that uses it back (`scripts/check-module-deps`
//! checks both in CI):
//!
//! ```text
//! http ──> limiter ──> algorithm ──> store ──> memcache, tokio
//!   (config builds limiters and stores; key, quota, clock, decision and
//!    error are leaves every layer may use)
//! ```
//!
//! - [`http`]: the tower layer, the IETF `RateLimit` header fields, client
//!   extraction.
//! - [`limiter`]: the façade. [`RateLimiter`] holds its algorithm's engine
//!   and its [`FailurePolicy`]; [`LimiterBuilder`] and [`LimiterSpec`]
//!   describe and validate one; [`DenyCache`] and [`DynamicLimiter`] wrap
//!   one, sharing the [`Limiter`] trait.
//! - [`algorithm`]: one engine per algorithm, written once over the store
//!   contract: `window/` (the fixed and sliding windows, their pure
//!   arithmetic, the sealed-bucket cache) and `cas/` (the optimistic
//!   compare-and-swap loop, local combining, one module per policy: token
//!   bucket, GCRA, sliding log, hybrid quota).
//! - [`store`]: the [`Store`](store::Store) contract, the in-process
//!   [`MemoryStore`], and `store/memcached/` (meta and classic protocols,
//!   the pipeline, the client router, the errors).
//!
//! A decision follows the arrows: [`RateLimiter::check`] reads the clock
//! and asks its engine (`algorithm::Engine`, a `match` over the
//! algorithms), which calls the store once; a store failure goes to the
//! failure policy.
//!
//! # Choosing an algorithm
//!
//! | algorithm | contract | store work per decision |
//! |---|---|---|
//! | [`SlidingWindow`] (the default, 4 sub-windows) | about `limit` per period, estimated from sub-window counters | one round trip: an increment and `n` reads |
//! | [`FixedWindow`] | `limit` per calendar window; up to twice that across a boundary | one increment |
//! | [`TokenBucket`], [`Gcra`] | `capacity + rate·t` in any span `t` | a read and a compare-and-swap write |
//! | [`SlidingLog`] | exactly `limit` in every period | a read and a compare-and-swap write of up to `limit` timestamps |
//! | [`HybridQuota`] | bursty when quiet, an even rate after | a read and a compare-and-swap write |
//! | [`DiscreteRefill`] | `max` at once, then `refill` more at each whole period after the client's mark | a read and a compare-and-swap write |
//! | [`Sessionize`] | as [`DiscreteRefill`], denials counted, plus the session's start | a read and a compare-and-swap write, denials too |
//!
//! How accurate each one is, measured by the `simulations` crate against
//! an exact sliding window on many kinds of traffic, is in the README's
//! table and in docs/simulations.md ("How to choose"), both generated by
//! the simulations.
//!
//! The token bucket and GCRA enforce a different contract (`capacity +
//! rate·t` in any span `t`), so going over a window is not an error for
//! them. Start with [`SlidingWindow`] and `n` = 4 to 12.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod algorithm;
mod boxed;
mod clock;
#[cfg(feature = "config")]
pub mod config;
mod decision;
mod error;
mod held_key;
pub mod http;
pub mod key;
pub mod limiter;
pub mod quota;
mod stack_text;
pub mod store;
#[cfg(test)]
mod thread_cache;
mod timer;
mod wide;

pub use algorithm::{
    Algorithm, DiscreteRefill, FixedWindow, Gcra, HybridQuota, Sessionize, SlidingLog,
    SlidingWindow, TokenBucket,
};
pub use clock::{Clock, CoarseClock, ManualClock, SystemClock};
pub use decision::Decision;
pub use error::{ConfigError, Error, StoreError};
pub use limiter::{
    DenyCache, DynamicLimiter, FailurePolicy, Limiter, LimiterBuilder, LimiterSpec, Policies,
    Policy, PolicyDecisions, RateLimiter,
};
pub use quota::Quota;
#[cfg(feature = "memcached")]
pub use store::MemcachedStore;
pub use store::MemoryStore;

/// The README's examples, compiled and run as doc tests.
#[cfg(all(doctest, feature = "memcached"))]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The examples of `docs/getting-started.md`, as doc tests.
#[cfg(all(doctest, feature = "memcached"))]
#[doc = include_str!("../docs/getting-started.md")]
pub struct GettingStartedDoctests;

/// The examples of `docs/algorithms.md`, as doc tests.
#[cfg(all(doctest, feature = "memcached"))]
#[doc = include_str!("../docs/algorithms.md")]
pub struct AlgorithmsDoctests;

/// The examples of `docs/memcached.md`, as doc tests.
#[cfg(all(doctest, feature = "memcached"))]
#[doc = include_str!("../docs/memcached.md")]
pub struct MemcachedDoctests;

/// The examples of `docs/configuration.md`, as doc tests.
#[cfg(all(doctest, feature = "config", feature = "memcached"))]
#[doc = include_str!("../docs/configuration.md")]
pub struct ConfigurationDoctests;

/// The examples of `docs/http.md`, as doc tests.
#[cfg(all(doctest, feature = "axum", feature = "memcached"))]
#[doc = include_str!("../docs/http.md")]
pub struct HttpDoctests;
