//! Whatever bytes a client puts in header fields, no extractor panics, and
//! nothing a client writes left of a trusted proxy's entry changes the
//! address read.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;

use super::tests::{counting, request};
use super::{ApiKey, ClientIp, Header, KeyExtractor, ProxyHeader, TrustedProxies};

/// Bytes a header field value can hold (`HeaderValue::from_bytes`).
fn value_bytes() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![Just(b'\t'), 0x20u8..0x7f, 0x80u8..=0xff];
    proptest::collection::vec(byte, 0..48)
}

/// Values made of the pieces the parsers look for, to reach deeper.
fn pieces() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop::sample::select(vec![
        "for",
        "FOR",
        "by",
        "proto",
        "=",
        "\"",
        "\\",
        ",",
        ";",
        " ",
        "[",
        "]",
        ":",
        "_x",
        "unknown",
        "192.0.2.1",
        "10.0.0.3",
        "2001:db8::1",
        "fd00::9",
        "::ffff:10.0.0.1",
        "4711",
        "99999",
        "\u{e9}",
    ]);
    proptest::collection::vec(piece, 0..24).prop_map(|pieces| pieces.concat().into_bytes())
}

fn any_value() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![value_bytes(), pieces()]
}

fn header_name() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "forwarded",
        "x-forwarded-for",
        "x-real-ip",
        "authorization",
        "x-tenant",
    ])
}

fn peer() -> impl Strategy<Value = Option<&'static str>> {
    prop::sample::select(vec![
        None,
        Some("10.0.0.2:1"),
        Some("[fd00::1]:1"),
        Some("[::ffff:10.0.0.2]:1"),
        Some("203.0.113.50:1"),
    ])
}

fn extractors() -> Vec<ClientIp> {
    let networks = || TrustedProxies::networks(["10.0.0.0/8", "fd00::/8"]).unwrap();
    let mut all = vec![ClientIp::peer(), ClientIp::behind_proxies(3)];
    for header in [
        ProxyHeader::XForwardedFor,
        ProxyHeader::Forwarded,
        ProxyHeader::XRealIp,
    ] {
        all.push(ClientIp::behind(header, networks()).unwrap());
        all.push(counting(header, 1));
    }
    all.into_iter()
        .map(|key| key.ipv6_prefix(56).exempt(["192.0.2.0/24"]).unwrap())
        .collect()
}

fn address() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(|octets| IpAddr::V4(Ipv4Addr::from(octets))),
        any::<[u16; 8]>().prop_map(|segments| IpAddr::V6(Ipv6Addr::from(segments))),
    ]
}

proptest! {
    #[test]
    fn arbitrary_header_bytes_never_panic_an_extractor(
        lines in proptest::collection::vec((header_name(), any_value()), 0..6),
        peer in peer(),
    ) {
        let lines: Vec<(&str, &[u8])> =
            lines.iter().map(|(name, value)| (*name, value.as_slice())).collect();
        let parts = request(peer, &lines);
        for key in extractors() {
            let address = key.client_address(&parts);
            let _ = key.is_exempt(&parts);
            match key.extract(&parts) {
                Some(extracted) => {
                    prop_assert!(extracted.starts_with(b"ip:"));
                    prop_assert!(address.is_some());
                }
                None => prop_assert!(address.is_none()),
            }
        }
        let _ = ApiKey::bearer().extract(&parts);
        let _ = Header::new("x-tenant").unwrap().extract(&parts);
    }

    #[test]
    fn what_the_client_wrote_never_changes_the_proxys_entry(
        client in any_value(),
        address in address(),
        port in proptest::option::of(any::<u16>()),
        peer in peer(),
    ) {
        let expected = Some(address.to_canonical());
        let node = match (address, port) {
            (IpAddr::V4(v4), Some(port)) => format!("\"{v4}:{port}\""),
            (IpAddr::V4(v4), None) => v4.to_string(),
            (IpAddr::V6(v6), Some(port)) => format!("\"[{v6}]:{port}\""),
            (IpAddr::V6(v6), None) => format!("\"[{v6}]\""),
        };
        let entry = format!("for={node};proto=https");
        let same_line = [client.as_slice(), b", ", entry.as_bytes()].concat();
        let forwarded = counting(ProxyHeader::Forwarded, 1);
        for lines in [
            vec![("forwarded", client.as_slice()), ("forwarded", entry.as_bytes())],
            vec![("forwarded", same_line.as_slice())],
        ] {
            prop_assert_eq!(forwarded.client_address(&request(peer, &lines)), expected);
        }
        let xff_line = [client.as_slice(), b", ", address.to_string().as_bytes()].concat();
        let parts = request(peer, &[("x-forwarded-for", xff_line.as_slice())]);
        prop_assert_eq!(ClientIp::behind_proxies(1).client_address(&parts), expected);
    }
}
