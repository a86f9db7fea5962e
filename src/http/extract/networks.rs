//! Lists of IP networks (trusted proxies, exempt clients), parsed from
//! CIDR text with the `ipnet` crate when an extractor is built.

use std::net::IpAddr;

use ipnet::{IpNet, Ipv4Net};

use crate::error::ConfigError;

/// IP networks, matched against canonical addresses (see [`canonical`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Networks(Vec<IpNet>);

impl Networks {
    /// Parses each of `networks`: CIDR notation (`10.0.0.0/8`,
    /// `fd00::/8`) or a single address (`192.0.2.7`, `::1`). Host bits
    /// after the prefix are ignored (`10.1.2.3/8` is `10.0.0.0/8`), and
    /// IPv4-mapped IPv6 networks (`::ffff:10.0.0.0/104`) are taken as the
    /// IPv4 networks they map, since addresses are compared as IPv4.
    /// Anything else is a [`ConfigError`] for `field`.
    pub(super) fn parse<I>(field: &'static str, networks: I) -> Result<Self, ConfigError>
    where
        I: IntoIterator,
        I::Item: AsRef<str>,
    {
        let mut parsed = Vec::new();
        for network in networks {
            let text = network.as_ref().trim();
            let network = text
                .parse::<IpNet>()
                .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| {
                    ConfigError::new(
                        field,
                        format!(
                            "{text:?} is neither an IP network in CIDR notation \
                             (such as 10.0.0.0/8 or fd00::/8) nor an IP address"
                        ),
                    )
                })?;
            parsed.push(unmapped(network.trunc()));
        }
        Ok(Self(parsed))
    }

    /// Whether there are no networks.
    pub(super) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `address` (canonical) is in one of the networks.
    pub(super) fn contains(&self, address: IpAddr) -> bool {
        self.0.iter().any(|network| network.contains(&address))
    }

    /// Adds `other`'s networks to these.
    pub(super) fn extend(&mut self, other: Self) {
        self.0.extend(other.0);
    }
}

/// The address as compared and counted: an IPv4-mapped IPv6 address
/// (`::ffff:192.0.2.1`, as dual-stack sockets report IPv4 peers) is the
/// IPv4 address it maps.
pub(super) fn canonical(address: IpAddr) -> IpAddr {
    address.to_canonical()
}

/// An IPv4-mapped IPv6 network of prefix 96 or more as its IPv4 network.
fn unmapped(network: IpNet) -> IpNet {
    if let IpNet::V6(v6) = network {
        if let (Some(v4), Some(prefix)) =
            (v6.addr().to_ipv4_mapped(), v6.prefix_len().checked_sub(96))
        {
            if let Ok(v4) = Ipv4Net::new(v4, prefix) {
                return IpNet::V4(v4);
            }
        }
    }
    network
}
