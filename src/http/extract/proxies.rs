//! Which header the proxies in front of a service write, which of them are
//! trusted, and the walk that finds the client among the hops.

use std::net::IpAddr;
use std::num::NonZeroUsize;

use ::http::{HeaderMap, HeaderName};

use super::hops::hops;
use super::networks::{canonical, Networks};
use crate::error::ConfigError;

/// The request header that the proxies in front of a service write the
/// client's address in. [`ClientIp::behind`](super::ClientIp::behind)
/// reads exactly one: the one those proxies overwrite or append to.
///
/// Why only one: a client can send any header field it likes, and a proxy
/// only vouches for the one it writes. Behind a proxy that appends to
/// `X-Forwarded-For`, a `Forwarded` or `X-Real-IP` field in the request is
/// the client's own, passed through untouched; an extractor that also read
/// it would let each client pick the key it is counted under, a fresh one
/// per request. So the header is named by configuration, never guessed
/// from what a request carries. RFC 7239, section 8.1 ("Header Validity
/// and Integrity") gives the same warning for `Forwarded` itself: only
/// what trusted proxies wrote can be relied on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProxyHeader {
    /// `X-Forwarded-For: <client>, <proxy 1>, <proxy 2>`: each proxy
    /// appends the address it received the request from. Not a standard,
    /// but what most proxies and load balancers write.
    XForwardedFor,
    /// `Forwarded: for=<client>, for=<proxy 1>;proto=https`, the standard
    /// form: A. Petersson and M. Nilsson, *Forwarded HTTP Extension*,
    /// RFC 7239, <https://www.rfc-editor.org/rfc/rfc7239>. Only `for=` is
    /// read: quoted IPv6 with a port (`for="[2001:db8::1]:4711"`) and
    /// parameter names in any case are understood; `for=unknown` and
    /// obfuscated identifiers (`for=_hidden`) name no address.
    Forwarded,
    /// `X-Real-IP: <client>`: one address, set (replacing any the client
    /// sent) by the nearest proxy, as nginx does with
    /// `proxy_set_header X-Real-IP $remote_addr;`
    /// (<https://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_set_header>),
    /// often after its realip module
    /// (<https://nginx.org/en/docs/http/ngx_http_realip_module.html>) has
    /// found the client. Several `X-Real-IP` lines name no address: the
    /// proxy did not replace the client's.
    XRealIp,
}

impl ProxyHeader {
    /// The field's name.
    pub(super) fn name(self) -> HeaderName {
        match self {
            Self::XForwardedFor => HeaderName::from_static("x-forwarded-for"),
            Self::Forwarded => ::http::header::FORWARDED,
            Self::XRealIp => HeaderName::from_static("x-real-ip"),
        }
    }
}

/// Which proxies in front of a service are trusted to write the client's
/// address: a number of them, or the networks they are in.
///
/// - [`count`](Self::count)`(n)`: exactly `n` proxies, each appending, so
///   the client is the `n`-th entry from the right. The connection's peer
///   is taken to be the nearest of them, unchecked. A request with fewer
///   entries did not pass every proxy and is counted by its peer.
/// - [`networks`](Self::networks)`([...])`: the peer must be in one of the
///   networks, or it is the client and no header is read. Otherwise the
///   entries are walked from the right, skipping each address in a trusted
///   network; the first one outside them is the client, and if every
///   entry is trusted, the leftmost is. Use this when the number of hops
///   varies (several load balancers, some paths through a CDN).
///
/// Either way, an entry reached on the walk that is not an address
/// (`unknown`, an obfuscated identifier, garbage) means a trusted proxy
/// does not know the client: the request has no key, and gets the
/// layer's missing-key answer. Entries left of the client are the
/// client's own and are never parsed.
///
/// ```
/// use memcache_ratelimit::http::TrustedProxies;
///
/// assert!(TrustedProxies::count(2).is_ok());
/// assert!(TrustedProxies::networks(["10.0.0.0/8", "fd00::/8", "192.0.2.7"]).is_ok());
/// // Configuration mistakes are errors, when the extractor is built:
/// assert!(TrustedProxies::count(0).is_err());
/// assert!(TrustedProxies::networks(["10.0.0.0/33"]).is_err());
/// assert!(TrustedProxies::networks(Vec::<String>::new()).is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedProxies(Trust);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Trust {
    Count(NonZeroUsize),
    Networks(Networks),
}

impl TrustedProxies {
    /// Exactly `proxies` proxies in front of the service. 0 is an error:
    /// without proxies, count the peer ([`ClientIp::peer`](super::ClientIp::peer)).
    pub fn count(proxies: usize) -> Result<Self, ConfigError> {
        NonZeroUsize::new(proxies)
            .map(|proxies| Self(Trust::Count(proxies)))
            .ok_or_else(|| {
                ConfigError::new(
                    "trusted proxies",
                    "a count of 0 trusts no proxy: read the peer address with ClientIp::peer()",
                )
            })
    }

    /// The proxies are the addresses in `networks`, each in CIDR notation
    /// (`10.0.0.0/8`, `fd00::/8`) or a single address (`192.0.2.7`). Only
    /// proxies may be in these networks: a client inside one can claim
    /// any address. An invalid network, or none at all, is an error.
    pub fn networks<I>(networks: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let networks = Networks::parse("trusted proxies", networks)?;
        if networks.is_empty() {
            return Err(ConfigError::new(
                "trusted proxies",
                "no network is trusted: read the peer address with ClientIp::peer()",
            ));
        }
        Ok(Self(Trust::Networks(networks)))
    }

    /// Whether `header` can be read with these proxies: `X-Real-IP` holds
    /// one address, which only the nearest proxy writes.
    pub(super) fn check(&self, header: ProxyHeader) -> Result<(), ConfigError> {
        match (&self.0, header) {
            (Trust::Count(count), ProxyHeader::XRealIp) if count.get() > 1 => {
                Err(ConfigError::new(
                    "trusted proxies",
                    format!(
                        "X-Real-IP holds one address, set by the nearest proxy: a count of \
                         {count} means nothing; trust a count of 1, or the proxies' networks"
                    ),
                ))
            }
            _ => Ok(()),
        }
    }

    /// The client's address, canonical: from `header` as these proxies
    /// wrote it, or the peer's. `None` when there is no peer where one is
    /// needed, or when a trusted proxy wrote no address.
    pub(super) fn client(
        &self,
        header: ProxyHeader,
        headers: &HeaderMap,
        peer: Option<IpAddr>,
    ) -> Option<IpAddr> {
        let peer = peer.map(canonical);
        let mut hops = hops(header, headers);
        match &self.0 {
            Trust::Count(count) => match hops.nth(count.get() - 1) {
                Some(hop) => hop.map(canonical),
                None => peer,
            },
            Trust::Networks(trusted) => {
                let mut client = peer?;
                while trusted.contains(client) {
                    match hops.next() {
                        Some(hop) => client = canonical(hop?),
                        None => break,
                    }
                }
                Some(client)
            }
        }
    }
}
