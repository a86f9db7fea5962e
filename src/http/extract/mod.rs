//! Who sent a request: the key a request is counted under, and whether it
//! is counted at all.
//!
//! - [`KeyExtractor`]: the trait, with closures as extractors.
//! - [`ClientIp`] (`client_ip`): the client's address, from the peer or
//!   from what trusted proxies wrote; [`ProxyHeader`] and
//!   [`TrustedProxies`] (`proxies`) say which header and which proxies;
//!   `hops` reads the header's entries, `forwarded` parses RFC 7239's
//!   `Forwarded`, `networks` holds CIDR lists.
//! - [`Header`] (`header`) and [`ApiKey`] (`api_key`).

mod api_key;
mod client_ip;
mod forwarded;
mod header;
mod hops;
mod networks;
mod proxies;
mod proxy_header;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod trust_tests;

use std::borrow::Cow;

use ::http::request::Parts;
use ::http::{HeaderValue, StatusCode};

pub use self::api_key::ApiKey;
pub use self::client_ip::ClientIp;
pub use self::header::Header;
pub use self::proxies::TrustedProxies;
pub use self::proxy_header::ProxyHeader;

/// Names the client of a request, from its head (method, URI, header
/// fields, extensions). Closures `Fn(&Parts) -> Option<Vec<u8>>` are
/// extractors too.
///
/// ```
/// use memcache_ratelimit::http::KeyExtractor;
///
/// // One counter per tenant, from the first path segment.
/// let tenant = |parts: &http::request::Parts| {
///     let segment = parts.uri.path().trim_start_matches('/').split('/').next()?;
///     (!segment.is_empty()).then(|| segment.as_bytes().to_vec())
/// };
/// let (parts, ()) = http::Request::get("/acme/orders").body(()).unwrap().into_parts();
/// assert_eq!(tenant.extract(&parts), Some(b"acme".to_vec()));
/// assert!(!tenant.is_exempt(&parts)); // closures never exempt a request
/// ```
pub trait KeyExtractor: Send + Sync + 'static {
    /// The client key, or `None` when the request does not say.
    fn extract(&self, parts: &Parts) -> Option<Vec<u8>>;

    /// [`extract`](Self::extract), lending the key from `parts` where the
    /// extractor can: the layer asks this, so that [`Header`] counts a
    /// request under its field's value without copying it. By default,
    /// what `extract` returns.
    ///
    /// ```
    /// use memcache_ratelimit::http::{Header, KeyExtractor};
    /// use std::borrow::Cow;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let request = http::Request::builder().header("x-api-key", "k-123").body(())?;
    /// let (parts, _) = request.into_parts();
    /// let key = Header::new("x-api-key")?.extract_borrowed(&parts);
    /// assert!(matches!(key, Some(Cow::Borrowed(b"k-123"))));
    /// # Ok(())
    /// # }
    /// ```
    fn extract_borrowed<'a>(&self, parts: &'a Parts) -> Option<Cow<'a, [u8]>> {
        self.extract(parts).map(Cow::Owned)
    }

    /// The status a request without a key gets, unless the layer is told
    /// otherwise ([`MissingKey`](super::MissingKey)): 400 Bad Request
    /// unless the extractor knows better.
    fn missing(&self) -> StatusCode {
        StatusCode::BAD_REQUEST
    }

    /// The `WWW-Authenticate` challenge sent with a 401 for a request
    /// without a key, when the key is a credential: a 401 must carry one
    /// (R. Fielding, M. Nottingham and J. Reschke, *HTTP Semantics*,
    /// RFC 9110, section 11.6.1, <https://www.rfc-editor.org/rfc/rfc9110#section-11.6.1>).
    /// `None` unless the extractor knows one.
    fn challenge(&self) -> Option<HeaderValue> {
        None
    }

    /// Whether the request is exempt from the limit. The layer asks this
    /// before [`extract`](Self::extract): an exempt request goes on to the
    /// service without being counted, without a key being extracted and
    /// without rate-limit header fields. Default: no request is exempt
    /// (so closures, which cannot override it, never exempt one).
    /// [`ClientIp::exempt`] exempts client networks.
    ///
    /// ```
    /// use http::request::Parts;
    /// use memcache_ratelimit::http::{Header, KeyExtractor};
    ///
    /// /// Counts by `x-tenant`, except the load balancer's health checks.
    /// struct Tenant(Header);
    ///
    /// impl KeyExtractor for Tenant {
    ///     fn extract(&self, parts: &Parts) -> Option<Vec<u8>> {
    ///         self.0.extract(parts)
    ///     }
    ///     fn is_exempt(&self, parts: &Parts) -> bool {
    ///         parts.uri.path() == "/healthz"
    ///     }
    /// }
    ///
    /// let tenant = Tenant(Header::new("x-tenant")?);
    /// let (health, ()) = http::Request::get("/healthz").body(()).unwrap().into_parts();
    /// let (orders, ()) = http::Request::get("/orders").body(()).unwrap().into_parts();
    /// assert!(tenant.is_exempt(&health));
    /// assert!(!tenant.is_exempt(&orders));
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    fn is_exempt(&self, parts: &Parts) -> bool {
        let _ = parts;
        false
    }
}

impl<F: Fn(&Parts) -> Option<Vec<u8>> + Send + Sync + 'static> KeyExtractor for F {
    fn extract(&self, parts: &Parts) -> Option<Vec<u8>> {
        self(parts)
    }
}
