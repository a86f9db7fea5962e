//! Trusting proxies by count or by network, exemptions, and configuration
//! errors.

use ::http::StatusCode;

use super::tests::{counting, ip, request};
use super::{ApiKey, ClientIp, Header, KeyExtractor, ProxyHeader, TrustedProxies};

fn trusting(header: ProxyHeader, networks: &[&str]) -> ClientIp {
    ClientIp::behind(header, TrustedProxies::networks(networks).unwrap()).unwrap()
}

#[test]
fn networks_skip_trusted_hops_from_the_right() {
    let key = trusting(
        ProxyHeader::XForwardedFor,
        &["10.0.0.0/8", "198.51.100.0/24"],
    );
    let address = |peer: Option<&str>, line: &[u8]| {
        key.client_address(&request(peer, &[("x-forwarded-for", line)]))
    };
    let lb = Some("10.0.0.2:41000");
    // The client wrote 1.1.1.1; the CDN (198.51.100.7) and an inner proxy
    // (10.0.0.3) are trusted.
    let chain = b"1.1.1.1, 203.0.113.9, 198.51.100.7, 10.0.0.3";
    assert_eq!(address(lb, chain), ip("203.0.113.9"));
    // The same chain by count needs the exact number of hops.
    let by_count = |proxies| {
        ClientIp::behind_proxies(proxies)
            .client_address(&request(lb, &[("x-forwarded-for", chain)]))
    };
    assert_eq!(by_count(3), ip("203.0.113.9"));
    assert_eq!(by_count(2), ip("198.51.100.7"));
    // Fewer hops this time (no CDN): networks still find the client.
    assert_eq!(address(lb, b"6.6.6.6, 203.0.113.9"), ip("203.0.113.9"));
    // Every hop trusted: the leftmost.
    assert_eq!(address(lb, b"10.0.0.9, 10.0.0.3"), ip("10.0.0.9"));
    assert_eq!(
        key.client_address(&request(lb, &[])),
        ip("10.0.0.2"),
        "no header: the trusted peer itself"
    );
    // A trusted proxy that wrote no address: no key.
    assert_eq!(address(lb, b"203.0.113.9, unknown"), None);
    // ...but garbage beyond the client is never read.
    assert_eq!(address(lb, b"garbage, 203.0.113.9"), ip("203.0.113.9"));
    // Without a peer, nothing can be trusted.
    assert_eq!(address(None, b"203.0.113.9"), None);
    assert_eq!(key.missing(), StatusCode::INTERNAL_SERVER_ERROR);
}

#[test]
fn an_untrusted_peer_is_the_client_whatever_it_sends() {
    let key = trusting(ProxyHeader::Forwarded, &["10.0.0.0/8"]);
    let spoofed = [("forwarded", &b"for=192.0.2.1"[..])];
    assert_eq!(
        key.client_address(&request(Some("203.0.113.50:1234"), &spoofed)),
        ip("203.0.113.50")
    );
    // A count cannot check the peer: it believes the header.
    assert_eq!(
        counting(ProxyHeader::Forwarded, 1)
            .client_address(&request(Some("203.0.113.50:1234"), &spoofed)),
        ip("192.0.2.1")
    );
    // The peer trusted: the header is believed.
    assert_eq!(
        key.client_address(&request(Some("10.9.9.9:1234"), &spoofed)),
        ip("192.0.2.1")
    );
}

#[test]
fn ipv6_and_ipv4_mapped_proxies() {
    let key = trusting(ProxyHeader::Forwarded, &["fd00::/8", "10.0.0.0/8"]);
    let line = [(
        "forwarded",
        &br#"for="[2001:db8::1]:4711", for="[fd00::7]""#[..],
    )];
    assert_eq!(
        key.client_address(&request(Some("[fd00::1]:443"), &line)),
        ip("2001:db8::1")
    );
    assert_eq!(
        key.extract(&request(Some("[fd00::1]:443"), &line)),
        Some(b"ip:2001:db8::/64".to_vec())
    );
    // A dual-stack socket reports an IPv4 proxy as IPv4-mapped IPv6.
    assert_eq!(
        key.client_address(&request(Some("[::ffff:10.0.0.2]:443"), &line)),
        ip("2001:db8::1")
    );
    // Networks written as IPv4-mapped IPv6 match IPv4 addresses.
    let mapped = trusting(ProxyHeader::Forwarded, &["::ffff:10.0.0.0/104"]);
    assert_eq!(
        mapped.client_address(&request(Some("10.0.0.2:443"), &line)),
        ip("fd00::7"),
        "fd00::/8 is not trusted here"
    );
}

#[test]
fn exempt_networks_are_matched_against_the_client() {
    let key = ClientIp::peer()
        .exempt(["10.0.0.0/8"])
        .unwrap()
        .exempt(["::1/128", "192.0.2.7"])
        .unwrap();
    for (peer, exempt) in [
        ("10.1.2.3:1", true),
        ("[::1]:1", true),
        ("192.0.2.7:1", true),
        ("[::ffff:10.0.0.1]:1", true),
        ("192.0.2.8:1", false),
        ("[::2]:1", false),
    ] {
        assert_eq!(key.is_exempt(&request(Some(peer), &[])), exempt, "{peer}");
    }
    assert!(!key.is_exempt(&request(None, &[])));
    // Behind a proxy, the client found is what is matched, not the proxy.
    let proxied = trusting(ProxyHeader::XForwardedFor, &["10.0.0.0/8"])
        .exempt(["203.0.113.0/24"])
        .unwrap();
    let from =
        |line: &[u8]| proxied.is_exempt(&request(Some("10.0.0.2:1"), &[("x-forwarded-for", line)]));
    assert!(from(b"203.0.113.9"));
    assert!(!from(b"198.51.100.1"));
    assert!(!from(b"unknown"));
    assert!(!from(b"203.0.113.9, 198.51.100.1"));
    // Exemption does not change the key.
    let parts = request(Some("10.1.2.3:1"), &[]);
    assert_eq!(key.extract(&parts), Some(b"ip:10.1.2.3".to_vec()));
    // Nothing else exempts by default.
    assert!(!ClientIp::peer().is_exempt(&parts));
    assert!(!ApiKey::bearer().is_exempt(&parts));
    assert!(!Header::new("x-tenant").unwrap().is_exempt(&parts));
    let closure = |_: &::http::request::Parts| Some(b"everyone".to_vec());
    assert!(!closure.is_exempt(&parts));
}

#[test]
fn configuration_mistakes_are_errors() {
    assert_eq!(
        TrustedProxies::count(0).unwrap_err().field(),
        "trusted proxies"
    );
    let empty: [&str; 0] = [];
    assert!(TrustedProxies::networks(empty).is_err());
    for bad in [
        "10.0.0.0/33",
        "fd00::/129",
        "10.0.0.0/8/8",
        "10.0.0/8",
        "ten",
        "",
        "10.0.0.0/-1",
    ] {
        let error = TrustedProxies::networks(["10.0.0.0/8", bad]).unwrap_err();
        assert!(error.reason().contains(&format!("{bad:?}")), "{error}");
        let error = ClientIp::peer().exempt([bad]).unwrap_err();
        assert_eq!(error.field(), "exempt networks");
    }
    let x_real_ip = |count| ClientIp::behind(ProxyHeader::XRealIp, TrustedProxies::count(count)?);
    assert!(x_real_ip(1).is_ok());
    assert!(x_real_ip(2).unwrap_err().reason().contains("X-Real-IP"));
    assert!(ClientIp::behind(ProxyHeader::Forwarded, TrustedProxies::count(5).unwrap()).is_ok());
    // The older shorthand keeps 0 as "no proxies".
    assert_eq!(ClientIp::behind_proxies(0), ClientIp::peer());
    assert_eq!(
        ClientIp::behind_proxies(2),
        counting(ProxyHeader::XForwardedFor, 2)
    );
    // Host bits are ignored; single addresses are /32 or /128.
    let loose = TrustedProxies::networks(["10.1.2.3/8", "::1"]).unwrap();
    assert_eq!(
        loose,
        TrustedProxies::networks(["10.0.0.0/8", "::1/128"]).unwrap()
    );
}
