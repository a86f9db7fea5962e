//! The client's IP address as the key.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use ::http::request::Parts;
use ::http::StatusCode;

use super::networks::{canonical, Networks};
use super::proxies::TrustedProxies;
use super::proxy_header::ProxyHeader;
use super::KeyExtractor;
use crate::error::ConfigError;

/// The client's IP address, as `ip:<address>`. IPv6 clients are counted
/// by their /64 network by default, since one subscriber usually holds a
/// whole /64 and could otherwise take a fresh address per request; an
/// IPv4-mapped IPv6 address (`::ffff:192.0.2.1`) counts as IPv4.
///
/// The peer address comes from the request's extensions: axum's
/// `ConnectInfo<SocketAddr>` (with the `axum` feature, when the app is
/// served with `into_make_service_with_connect_info::<SocketAddr>()`) or a
/// plain `SocketAddr` that a hyper service inserted. A request with no
/// address is a deployment error: 500. So, by default, is a request whose
/// trusted proxy wrote no address (`for=unknown`, an obfuscated
/// identifier, garbage): to count those together instead, give the layer
/// `on_missing_key(MissingKey::Shared(..))`.
///
/// Behind reverse proxies, [`behind`](Self::behind) reads the address
/// they wrote in one header ([`ProxyHeader`]: `X-Forwarded-For`,
/// `Forwarded` or `X-Real-IP`), trusting only what the proxies named by
/// [`TrustedProxies`] (a count, or their networks) wrote;
/// [`behind_proxies`](Self::behind_proxies)`(n)` is the same with
/// `X-Forwarded-For` and a count. [`exempt`](Self::exempt) lets the
/// requests of some networks through unlimited.
///
/// ```
/// use memcache_ratelimit::http::{ClientIp, KeyExtractor, ProxyHeader, TrustedProxies};
/// use std::net::SocketAddr;
///
/// let mut request = http::Request::get("/")
///     .header("x-forwarded-for", "203.0.113.9, 198.51.100.7")
///     .header("forwarded", r#"for=192.0.2.1, for="[2001:db8::1]:4711""#)
///     .body(())
///     .unwrap();
/// request.extensions_mut().insert("10.0.0.2:41000".parse::<SocketAddr>().unwrap());
/// let (parts, ()) = request.into_parts();
/// assert_eq!(ClientIp::peer().extract(&parts), Some(b"ip:10.0.0.2".to_vec()));
/// // One trusted proxy (it appended 198.51.100.7, the address it saw):
/// assert_eq!(ClientIp::behind_proxies(1).extract(&parts), Some(b"ip:198.51.100.7".to_vec()));
/// assert_eq!(ClientIp::behind_proxies(2).extract(&parts), Some(b"ip:203.0.113.9".to_vec()));
/// // The proxy at 10.0.0.2 writes `Forwarded` instead:
/// let forwarded = ClientIp::behind(ProxyHeader::Forwarded, TrustedProxies::networks(["10.0.0.0/8"])?)?;
/// assert_eq!(forwarded.extract(&parts), Some(b"ip:2001:db8::/64".to_vec()));
/// # Ok::<(), memcache_ratelimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIp {
    proxies: Option<(ProxyHeader, TrustedProxies)>,
    ipv6_prefix: u8,
    exempt: Networks,
}

impl ClientIp {
    /// The address of the connection's peer.
    pub fn peer() -> Self {
        Self {
            proxies: None,
            ipv6_prefix: 64,
            exempt: Networks::default(),
        }
    }

    /// The address `proxies` trusted reverse proxies in front of the
    /// service saw: the `proxies`-th entry of `X-Forwarded-For` counted
    /// from the right (each proxy appends the address it received from).
    /// Entries further left are written by the client and never trusted.
    /// A request with fewer entries did not come through every proxy, and
    /// is counted by its peer address; an entry that is not an address
    /// gives no key. 0 proxies is [`peer`](Self::peer).
    ///
    /// Short for [`behind`](Self::behind)`(ProxyHeader::XForwardedFor,
    /// TrustedProxies::count(proxies)?)`.
    pub fn behind_proxies(proxies: usize) -> Self {
        match TrustedProxies::count(proxies) {
            Ok(trusted) => Self {
                proxies: Some((ProxyHeader::XForwardedFor, trusted)),
                ..Self::peer()
            },
            Err(_) => Self::peer(),
        }
    }

    /// The client's address as the `trusted` proxies wrote it in `header`;
    /// see [`TrustedProxies`] for the walk, and [`ProxyHeader`] for why
    /// exactly one header is read. `X-Real-IP` with a count of more than
    /// one proxy is an error: only the nearest proxy writes it.
    ///
    /// ```
    /// use memcache_ratelimit::http::{ClientIp, KeyExtractor, ProxyHeader, TrustedProxies};
    /// use std::net::SocketAddr;
    ///
    /// // A CDN at 198.51.100.0/24, then a load balancer at 10.0.0.2.
    /// let trusted = TrustedProxies::networks(["10.0.0.0/8", "198.51.100.0/24"])?;
    /// let key = ClientIp::behind(ProxyHeader::XForwardedFor, trusted)?;
    /// let mut request = http::Request::get("/")
    ///     // The client wrote 1.1.1.1 itself; the CDN appended 203.0.113.9,
    ///     // the load balancer 198.51.100.7.
    ///     .header("x-forwarded-for", "1.1.1.1, 203.0.113.9, 198.51.100.7")
    ///     .body(())
    ///     .unwrap();
    /// request.extensions_mut().insert("10.0.0.2:41000".parse::<SocketAddr>().unwrap());
    /// let (parts, ()) = request.into_parts();
    /// assert_eq!(key.extract(&parts), Some(b"ip:203.0.113.9".to_vec()));
    ///
    /// let nginx = ClientIp::behind(ProxyHeader::XRealIp, TrustedProxies::count(1)?)?;
    /// assert!(ClientIp::behind(ProxyHeader::XRealIp, TrustedProxies::count(2)?).is_err());
    /// # let _ = nginx;
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn behind(header: ProxyHeader, trusted: TrustedProxies) -> Result<Self, ConfigError> {
        trusted.check(header)?;
        Ok(Self {
            proxies: Some((header, trusted)),
            ..Self::peer()
        })
    }

    /// Counts IPv6 clients by their first `bits` bits (default 64; 128 for
    /// each address on its own). Values above 128 are taken as 128.
    pub fn ipv6_prefix(mut self, bits: u8) -> Self {
        self.ipv6_prefix = bits.min(128);
        self
    }

    /// Exempts clients in `networks` (CIDR notation such as `10.0.0.0/8`
    /// or `::1/128`, or single addresses) from the limit: the layer lets
    /// their requests through uncounted, without rate-limit header fields
    /// ([`KeyExtractor::is_exempt`]). The client is the address this
    /// extractor finds, after any proxies: behind a proxy, exempting the
    /// proxy's own network exempts only requests the proxy itself makes.
    /// IPv4-mapped IPv6 addresses are matched as IPv4. Calls add up; an
    /// invalid network is an error.
    ///
    /// ```
    /// use memcache_ratelimit::http::{ClientIp, KeyExtractor};
    /// use std::net::SocketAddr;
    ///
    /// let key = ClientIp::peer().exempt(["10.0.0.0/8", "::1/128"])?;
    /// let request = |peer: &str| {
    ///     let mut request = http::Request::get("/").body(()).unwrap();
    ///     request.extensions_mut().insert(peer.parse::<SocketAddr>().unwrap());
    ///     request.into_parts().0
    /// };
    /// assert!(key.is_exempt(&request("10.1.2.3:5000")));
    /// assert!(key.is_exempt(&request("[::1]:5000")));
    /// assert!(key.is_exempt(&request("[::ffff:10.0.0.9]:5000")));
    /// assert!(!key.is_exempt(&request("192.0.2.1:5000")));
    /// assert!(ClientIp::peer().exempt(["10.0.0.0/8", "ten"]).is_err());
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn exempt<I>(mut self, networks: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        self.exempt
            .extend(Networks::parse("exempt networks", networks)?);
        Ok(self)
    }

    /// The client's address as this extractor finds it, before IPv6
    /// clients are grouped by prefix (an IPv4-mapped address as IPv4), or
    /// `None` when there is none: for logging, or a key of one's own.
    ///
    /// ```
    /// use memcache_ratelimit::http::{ClientIp, ProxyHeader, TrustedProxies};
    /// use std::net::{IpAddr, SocketAddr};
    ///
    /// let key = ClientIp::behind(ProxyHeader::XRealIp, TrustedProxies::count(1)?)?;
    /// let mut request = http::Request::get("/").header("x-real-ip", "2001:db8::7").body(()).unwrap();
    /// request.extensions_mut().insert("127.0.0.1:41000".parse::<SocketAddr>().unwrap());
    /// let (parts, ()) = request.into_parts();
    /// assert_eq!(key.client_address(&parts), Some("2001:db8::7".parse::<IpAddr>().unwrap()));
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn client_address(&self, parts: &Parts) -> Option<IpAddr> {
        let peer = peer_address(parts);
        match &self.proxies {
            None => peer.map(canonical),
            Some((header, trusted)) => trusted.client(*header, &parts.headers, peer),
        }
    }
}

/// The connection's peer, from the request's extensions.
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

impl KeyExtractor for ClientIp {
    fn extract(&self, parts: &Parts) -> Option<Vec<u8>> {
        let key = match self.client_address(parts)? {
            IpAddr::V6(v6) if self.ipv6_prefix < 128 => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.ipv6_prefix))
                    .unwrap_or(0);
                let network = Ipv6Addr::from(u128::from(v6) & mask);
                format!("ip:{network}/{}", self.ipv6_prefix)
            }
            address => format!("ip:{address}"),
        };
        Some(key.into_bytes())
    }

    /// 500: every request has a peer, so a missing one means the service
    /// was not set up to record it.
    fn missing(&self) -> StatusCode {
        StatusCode::INTERNAL_SERVER_ERROR
    }

    /// Whether the client's address is in an [exempt](ClientIp::exempt)
    /// network.
    fn is_exempt(&self, parts: &Parts) -> bool {
        !self.exempt.is_empty()
            && self
                .client_address(parts)
                .is_some_and(|address| self.exempt.contains(address))
    }
}
