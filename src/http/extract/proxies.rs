//! Which of the proxies in front of a service are trusted, and the walk
//! that finds the client among the hops.

use std::net::IpAddr;
use std::num::NonZeroUsize;

use ::http::HeaderMap;

use super::hops::hops;
use super::networks::{canonical, Networks};
use super::proxy_header::ProxyHeader;
use crate::error::ConfigError;

/// Which proxies in front of a service are trusted to write the client's
/// address: a number of them, or the networks they are in.
///
/// - [`count`](Self::count)`(n)`: exactly `n` proxies, each appending, so
///   the client is the `n`-th entry from the right. The connection's peer
///   is taken to be the nearest of them, unchecked. A request with fewer
///   entries did not pass every proxy and is counted by its peer.
/// - [`networks`](Self::networks)`([...])`: the peer must be in one of the
///   networks, or it is the client and no header is read. Otherwise the
///   entries are walked from the right, past each address in a trusted
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
