//! The layer's settings for rolling a limit out: shadow mode, exemptions,
//! and the answers to a denial and to a request without a key.

use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use ::http::Response;

use super::{Denial, MissingKey, RateLimitLayer};

impl RateLimitLayer {
    /// Shadow mode: every request is decided, counted, logged and given
    /// its header fields, but none is denied; a request that would have
    /// been is logged (`tracing`, at `info`) and counted in
    /// [`shadow_denials`](Self::shadow_denials), and gets no
    /// `Retry-After`. This is how a new limit is rolled out: watch what it
    /// would deny, then turn shadow mode off.
    ///
    /// ```
    /// use memcache_ratelimit::http::{ClientIp, RateLimitLayer};
    /// use memcache_ratelimit::{FixedWindow, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = FixedWindow::builder("100/minute".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// let layer = RateLimitLayer::new(limiter, ClientIp::peer()).shadow(true);
    /// assert_eq!(layer.shadow_denials(), 0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn shadow(self, shadow: bool) -> Self {
        self.with(|shared| shared.shadow = shadow)
    }

    /// How many requests shadow mode let through that would otherwise have
    /// been denied, across this layer, its clones and their services.
    pub fn shadow_denials(&self) -> u64 {
        self.shared.shadow_denials.load(Ordering::Relaxed)
    }

    /// Requests counted under any of these keys (as an extractor names
    /// them, for example `ip:10.0.0.7` or an API key) are not limited at
    /// all: no policy counts them and they get no rate-limit fields. For
    /// internal callers, health checks and partners with their own terms.
    ///
    /// ```
    /// use memcache_ratelimit::http::{ApiKey, RateLimitLayer};
    /// use memcache_ratelimit::{FixedWindow, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = FixedWindow::builder("100/minute".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// let layer = RateLimitLayer::new(limiter, ApiKey::header("x-api-key")?)
    ///     .exempt_keys([b"internal-batch-job".to_vec()]);
    /// # let _ = layer;
    /// # Ok(())
    /// # }
    /// ```
    pub fn exempt_keys(self, keys: impl IntoIterator<Item = Vec<u8>>) -> Self {
        let keys: HashSet<Vec<u8>> = keys.into_iter().collect();
        self.with(|shared| shared.exempt = Arc::new(keys))
    }

    /// Builds the answer to a denied request (default:
    /// [`Denial::problem`], a 429 with an RFC 9457 problem body). The
    /// layer adds the rate-limit fields and `Retry-After` to whatever it
    /// returns.
    ///
    /// ```
    /// use memcache_ratelimit::http::{ClientIp, RateLimitLayer};
    /// use memcache_ratelimit::{FixedWindow, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = FixedWindow::builder("100/minute".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// let layer = RateLimitLayer::new(limiter, ClientIp::peer()).on_denied(|denial| {
    ///     let mut response = http::Response::new(format!("slow down ({})", denial.policy()));
    ///     *response.status_mut() = http::StatusCode::TOO_MANY_REQUESTS;
    ///     response
    /// });
    /// # let _ = layer;
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_denied(
        self,
        respond: impl Fn(&Denial) -> Response<String> + Send + Sync + 'static,
    ) -> Self {
        self.with(|shared| shared.on_denied = Some(Arc::new(respond)))
    }

    /// What a request without a key gets (default: rejected with the
    /// extractor's [`missing`](crate::http::KeyExtractor::missing) status, and on a 401
    /// the extractor's [`challenge`](crate::http::KeyExtractor::challenge) in
    /// `WWW-Authenticate`: an [`ApiKey`](crate::http::ApiKey) asks for its key).
    pub fn on_missing_key(self, missing: MissingKey) -> Self {
        self.with(|shared| shared.missing = Some(missing))
    }

    /// The answer to a request rejected for having no key, in place of
    /// the bare status: for example a JSON error body, or a redirect to a
    /// sign-in page. It does not change [`MissingKey::Allow`] or
    /// [`MissingKey::Shared`], which let the request through.
    ///
    /// ```
    /// use memcache_ratelimit::http::{ApiKey, RateLimitLayer};
    /// use memcache_ratelimit::{FixedWindow, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let limiter = FixedWindow::builder("100/minute".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// let layer = RateLimitLayer::new(limiter, ApiKey::header("x-api-key")?).missing_key_response(|_| {
    ///     let mut response = http::Response::new(r#"{"error":"send your key in x-api-key"}"#.to_owned());
    ///     *response.status_mut() = http::StatusCode::UNAUTHORIZED;
    ///     response.headers_mut().insert("www-authenticate", http::HeaderValue::from_static(r#"ApiKey header="x-api-key""#));
    ///     response
    /// });
    /// # let _ = layer;
    /// # Ok(())
    /// # }
    /// ```
    pub fn missing_key_response(
        self,
        respond: impl Fn(&http::request::Parts) -> Response<String> + Send + Sync + 'static,
    ) -> Self {
        self.with(|shared| shared.missing_response = Some(Arc::new(respond)))
    }
}
