//! The layer's settings for what the header fields announce: the legacy
//! fields, the quota unit and the partition key.

use super::RateLimitLayer;
use crate::http::headers::{PartitionKeySecret, QuotaUnit};

impl RateLimitLayer {
    /// Adds `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
    /// `X-RateLimit-Reset` (seconds until the client's usage has drained)
    /// to every response with rate-limit fields.
    ///
    /// ```
    /// use memcache_ratelimit::http::{ClientIp, RateLimitLayer};
    /// use memcache_ratelimit::{FixedWindow, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = FixedWindow::builder("100/minute".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// let layer = RateLimitLayer::new(limiter, ClientIp::peer()).legacy_headers(true);
    /// # let _ = layer;
    /// # Ok(())
    /// # }
    /// ```
    pub fn legacy_headers(self, legacy: bool) -> Self {
        self.with(|shared| shared.fields.legacy = legacy)
    }

    /// What the quota of the policy added last counts, announced as `qu` (default
    /// [`QuotaUnit::Requests`], announced by leaving `qu` out): for
    /// example [`QuotaUnit::ContentBytes`] when the [`cost`](Self::cost)
    /// of a request is its size.
    ///
    /// ```
    /// use memcache_ratelimit::http::{Header, QuotaUnit, RateLimitLayer};
    /// use memcache_ratelimit::{FixedWindow, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = FixedWindow::builder("10000000/hour".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// let layer = RateLimitLayer::new(limiter, Header::new("x-tenant")?)
    ///     .quota_unit(QuotaUnit::ContentBytes)
    ///     .cost(|parts| {
    ///         parts.headers.get(http::header::CONTENT_LENGTH)
    ///             .and_then(|length| length.to_str().ok()?.parse().ok())
    ///             .unwrap_or(1)
    ///             .max(1)
    ///     });
    /// # let _ = layer;
    /// # Ok(())
    /// # }
    /// ```
    pub fn quota_unit(self, unit: QuotaUnit) -> Self {
        self.with(|shared| {
            let member = shared.last();
            member.policy = member.policy.clone().quota_unit(unit);
        })
    }

    /// Whether the fields of the policy added last carry `pk`, the keyed
    /// hash of the client's key
    /// (default: true, since the layer counts each client apart). Turn it
    /// off when the extractor names one key for everyone, a global limit.
    ///
    /// ```
    /// use memcache_ratelimit::http::RateLimitLayer;
    /// use memcache_ratelimit::{FixedWindow, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = FixedWindow::builder("5000/second".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// // Every request counted under one key: the whole service's limit.
    /// let everyone = |_: &http::request::Parts| Some(b"everyone".to_vec());
    /// let layer = RateLimitLayer::new(limiter, everyone)
    ///     .policy_name("service")?
    ///     .announce_partition_key(false);
    /// # let _ = layer;
    /// # Ok(())
    /// # }
    /// ```
    pub fn announce_partition_key(self, announce: bool) -> Self {
        self.with(|shared| {
            let member = shared.last();
            member.policy = member.policy.clone().per_client(announce);
        })
    }

    /// The secret `pk` is keyed with (default: random, for this layer and
    /// its clones). Give every instance of a service the same one so they
    /// announce the same `pk` for a client; see [`PartitionKeySecret`] for
    /// why the client's key is never sent as it is.
    ///
    /// ```
    /// use memcache_ratelimit::http::{ClientIp, PartitionKeySecret, RateLimitLayer};
    /// use memcache_ratelimit::{FixedWindow, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// // In a real deployment: read from the fleet's secret store.
    /// let secret = PartitionKeySecret::new(b"a secret of at least thirty-two bytes")?;
    /// let limiter = FixedWindow::builder("100/minute".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// let layer = RateLimitLayer::new(limiter, ClientIp::peer()).partition_key_secret(secret);
    /// # let _ = layer;
    /// # Ok(())
    /// # }
    /// ```
    pub fn partition_key_secret(self, secret: PartitionKeySecret) -> Self {
        self.with(|shared| shared.fields.secret = secret)
    }
}
