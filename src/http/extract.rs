//! Who sent a request: the key a request is counted under.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use ::http::request::Parts;
use ::http::{HeaderName, StatusCode};
use sha2::{Digest, Sha256};

use crate::error::ConfigError;

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
/// ```
pub trait KeyExtractor: Send + Sync + 'static {
    /// The client key, or `None` when the request does not say.
    fn extract(&self, parts: &Parts) -> Option<Vec<u8>>;

    /// The status a request without a key gets, unless the layer is told
    /// otherwise ([`MissingKey`](super::MissingKey)): 400 Bad Request
    /// unless the extractor knows better.
    fn missing(&self) -> StatusCode {
        StatusCode::BAD_REQUEST
    }
}

impl<F: Fn(&Parts) -> Option<Vec<u8>> + Send + Sync + 'static> KeyExtractor for F {
    fn extract(&self, parts: &Parts) -> Option<Vec<u8>> {
        self(parts)
    }
}

/// The client's IP address, as `ip:<address>`. IPv6 clients are counted
/// by their /64 network by default, since one subscriber usually holds a
/// whole /64 and could otherwise take a fresh address per request.
///
/// The peer address comes from the request's extensions: axum's
/// `ConnectInfo<SocketAddr>` (with the `axum` feature, when the app is
/// served with `into_make_service_with_connect_info::<SocketAddr>()`) or a
/// plain `SocketAddr` that a hyper service inserted. Behind reverse
/// proxies, [`behind_proxies`](Self::behind_proxies) reads
/// `X-Forwarded-For` instead, trusting only the entries those proxies
/// wrote. A request with no address is a deployment error: 500.
///
/// ```
/// use memcache_ratelimit::http::{ClientIp, KeyExtractor};
/// use std::net::SocketAddr;
///
/// let mut request = http::Request::get("/")
///     .header("x-forwarded-for", "203.0.113.9, 198.51.100.7")
///     .body(())
///     .unwrap();
/// request.extensions_mut().insert("10.0.0.2:41000".parse::<SocketAddr>().unwrap());
/// let (parts, ()) = request.into_parts();
/// assert_eq!(ClientIp::peer().extract(&parts), Some(b"ip:10.0.0.2".to_vec()));
/// // One trusted proxy (it appended 198.51.100.7, the address it saw):
/// assert_eq!(ClientIp::behind_proxies(1).extract(&parts), Some(b"ip:198.51.100.7".to_vec()));
/// assert_eq!(ClientIp::behind_proxies(2).extract(&parts), Some(b"ip:203.0.113.9".to_vec()));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientIp {
    trusted_proxies: usize,
    ipv6_prefix: u8,
}

impl ClientIp {
    /// The address of the connection's peer.
    pub fn peer() -> Self {
        Self {
            trusted_proxies: 0,
            ipv6_prefix: 64,
        }
    }

    /// The address `proxies` trusted reverse proxies in front of the
    /// service saw: the `proxies`-th entry of `X-Forwarded-For` counted
    /// from the right (each proxy appends the address it received from).
    /// Entries further left are written by the client and never trusted.
    /// A request with fewer entries did not come through every proxy, and
    /// is counted by its peer address.
    pub fn behind_proxies(proxies: usize) -> Self {
        Self {
            trusted_proxies: proxies,
            ..Self::peer()
        }
    }

    /// Counts IPv6 clients by their first `bits` bits (default 64; 128 for
    /// each address on its own). Values above 128 are taken as 128.
    pub fn ipv6_prefix(mut self, bits: u8) -> Self {
        self.ipv6_prefix = bits.min(128);
        self
    }

    fn peer_address(parts: &Parts) -> Option<IpAddr> {
        #[cfg(feature = "axum")]
        if let Some(info) = parts
            .extensions
            .get::<axum::extract::ConnectInfo<SocketAddr>>()
        {
            return Some(info.0.ip());
        }
        parts.extensions.get::<SocketAddr>().map(SocketAddr::ip)
    }

    fn forwarded(&self, parts: &Parts) -> Option<IpAddr> {
        let mut entries = Vec::new();
        for value in parts.headers.get_all("x-forwarded-for") {
            entries.extend(value.to_str().ok()?.split(',').map(str::trim));
        }
        let entry = entries.len().checked_sub(self.trusted_proxies)?;
        entries[entry].parse().ok()
    }
}

impl KeyExtractor for ClientIp {
    fn extract(&self, parts: &Parts) -> Option<Vec<u8>> {
        let forwarded = match self.trusted_proxies {
            0 => None,
            _ => self.forwarded(parts),
        };
        let address = match forwarded.or_else(|| Self::peer_address(parts))? {
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => IpAddr::V4(v4),
                None if self.ipv6_prefix < 128 => {
                    let mask = u128::MAX
                        .checked_shl(128 - u32::from(self.ipv6_prefix))
                        .unwrap_or(0);
                    let network = Ipv6Addr::from(u128::from(v6) & mask);
                    return Some(format!("ip:{network}/{}", self.ipv6_prefix).into_bytes());
                }
                None => IpAddr::V6(v6),
            },
            v4 => v4,
        };
        Some(format!("ip:{address}").into_bytes())
    }

    /// 500: every request has a peer, so a missing one means the service
    /// was not set up to record it.
    fn missing(&self) -> StatusCode {
        StatusCode::INTERNAL_SERVER_ERROR
    }
}

/// The value of a request header field, as it is (the key layout hashes
/// values that are not plain printable text).
///
/// ```
/// use memcache_ratelimit::http::{Header, KeyExtractor};
///
/// let user = Header::new("x-user-id")?;
/// let (parts, ()) = http::Request::get("/").header("x-user-id", "42").body(()).unwrap().into_parts();
/// assert_eq!(user.extract(&parts), Some(b"42".to_vec()));
/// assert!(Header::new("not a header").is_err());
/// # Ok::<(), memcache_ratelimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    name: HeaderName,
}

impl Header {
    /// The field `name`; a name that is not a valid header field name is
    /// rejected.
    pub fn new(name: &str) -> Result<Self, ConfigError> {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            ConfigError::new("header", format!("{name:?} is not a header field name"))
        })?;
        Ok(Self { name })
    }
}

impl KeyExtractor for Header {
    fn extract(&self, parts: &Parts) -> Option<Vec<u8>> {
        let value = parts.headers.get(&self.name)?.as_bytes();
        (!value.is_empty()).then(|| value.to_vec())
    }
}

/// An API key, from `Authorization: Bearer <key>` or a header of its own,
/// counted as `key:` and the first 128 bits of its SHA-256 in hex: the
/// secret itself never reaches memcached, where keys can be listed.
/// A request without one gets 401 Unauthorized.
///
/// ```
/// use memcache_ratelimit::http::{ApiKey, KeyExtractor};
///
/// let (parts, ()) = http::Request::get("/")
///     .header("authorization", "Bearer s3cret")
///     .body(())
///     .unwrap()
///     .into_parts();
/// let key = ApiKey::bearer().extract(&parts).unwrap();
/// assert_eq!(key, b"key:1ec1c26b50d5d3c58d9583181af80766".to_vec());
/// assert_eq!(ApiKey::header("x-api-key")?.extract(&parts), None);
/// # Ok::<(), memcache_ratelimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    header: Option<Header>,
}

impl ApiKey {
    /// The token of an `Authorization: Bearer` field (the scheme is matched
    /// without regard to case).
    pub fn bearer() -> Self {
        Self { header: None }
    }

    /// The whole value of the header field `name`, such as `x-api-key`.
    pub fn header(name: &str) -> Result<Self, ConfigError> {
        Ok(Self {
            header: Some(Header::new(name)?),
        })
    }

    fn secret<'a>(&self, parts: &'a Parts) -> Option<&'a [u8]> {
        let secret = match &self.header {
            Some(header) => parts.headers.get(&header.name)?.as_bytes(),
            None => {
                let value = parts.headers.get(http::header::AUTHORIZATION)?.as_bytes();
                let (scheme, token) = value.split_at_checked(7)?;
                if !scheme.eq_ignore_ascii_case(b"bearer ") {
                    return None;
                }
                token.trim_ascii()
            }
        };
        (!secret.is_empty()).then_some(secret)
    }
}

impl KeyExtractor for ApiKey {
    fn extract(&self, parts: &Parts) -> Option<Vec<u8>> {
        let digest = Sha256::digest(self.secret(parts)?);
        let mut key = b"key:".to_vec();
        for byte in &digest[..16] {
            key.extend_from_slice(format!("{byte:02x}").as_bytes());
        }
        Some(key)
    }

    fn missing(&self) -> StatusCode {
        StatusCode::UNAUTHORIZED
    }
}
