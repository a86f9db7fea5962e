//! HTTP: the response header fields that tell a client where it stands
//! ([`RateLimitFields`] over one or several [`HeaderPolicy`]s, for any
//! HTTP stack), and with the cargo feature
//! `tower` a [`tower`](https://docs.rs/tower) layer that rate limits
//! requests before they reach a service, for axum, hyper and any other
//! stack built on `tower` and the `http` crate (with `axum`, `ClientIp`
//! also reads axum's `ConnectInfo`).
//!
//! - A [`KeyExtractor`] names the client of each request: [`ClientIp`],
//!   a [`Header`], an [`ApiKey`], or any closure over the request's head.
//! - The [`RateLimitLayer`] asks its limiter for a decision. An allowed
//!   request goes on to the service; a denied one gets `429 Too Many
//!   Requests` with `Retry-After`. Every response carries the
//!   `RateLimit-Policy` and `RateLimit` fields of R. Polli, A. Martinez
//!   and D. Miller, *RateLimit header fields for HTTP*,
//!   draft-ietf-httpapi-ratelimit-headers-11,
//!   <https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/11/>
//!   (for example `RateLimit-Policy: "per-ip";q=100;w=60;pk=:…:` and
//!   `RateLimit: "per-ip";r=99;t=60;pk=:…:`; what each parameter means,
//!   and how `t` and `Retry-After` agree on a denial, is in
//!   [`RateLimitFields`]), and the older
//!   `X-RateLimit-Limit`, `-Remaining` and `-Reset` fields if asked
//!   ([`RateLimitLayer::legacy_headers`]).
//! - `pk` is a keyed hash of the client's key, never the key itself
//!   ([`PartitionKeySecret`]): random per layer unless a fleet shares one
//!   ([`RateLimitLayer::partition_key_secret`]).
//! - With a [`DynamicLimiter`](crate::DynamicLimiter), each client's
//!   fields announce the quota it is held to.
//!
//! ```
//! # #[cfg(feature = "tower")] {
//! use memcache_ratelimit::http::{ClientIp, RateLimitLayer};
//! use memcache_ratelimit::{MemoryStore, SlidingWindow};
//! use std::sync::Arc;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let limiter = SlidingWindow::builder("100/minute".parse()?, Arc::new(MemoryStore::new()))
//!     .sub_windows(12)
//!     .build()?;
//! let layer = RateLimitLayer::new(limiter, ClientIp::peer())
//!     .policy_name("per-ip")?
//!     .legacy_headers(true);
//! // axum: Router::new().route("/", get(handler)).layer(layer)
//! # let _ = layer;
//! # Ok(())
//! # }
//! # main().unwrap();
//! # }
//! ```
//!
//! How each outcome is answered:
//!
//! | outcome | status | header fields |
//! |---|---|---|
//! | allowed | the service's | `RateLimit-Policy`, `RateLimit` (+ legacy) |
//! | denied | 429 | the same, and `Retry-After`, equal to `RateLimit`'s `t` |
//! | no key in the request | the extractor's ([`KeyExtractor::missing`]), or per [`MissingKey`] | none |
//! | store failure returned ([`FailurePolicy::ReturnError`](crate::FailurePolicy::ReturnError)), or compare-and-swap contention | 503 | `Retry-After: 1` |
//! | a cost above the limit | 413 | none |
//! | a quota or cost the limiter cannot take | 500 | none |

#[cfg(feature = "tower")]
mod extract;
mod headers;
#[cfg(feature = "tower")]
mod layer;

#[cfg(feature = "tower")]
pub use self::extract::{ApiKey, ClientIp, Header, KeyExtractor, ProxyHeader, TrustedProxies};
pub use self::headers::{
    HeaderPolicy, PartitionKeySecret, PolicyDecision, QuotaUnit, RateLimitFields, MAX_POLICY_NAME,
};
#[cfg(feature = "tower")]
pub use self::layer::{Denial, MissingKey, RateLimit, RateLimitLayer, ResponseFuture};
