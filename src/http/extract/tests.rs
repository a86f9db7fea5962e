//! Reading client addresses from proxy headers: RFC 7239's examples,
//! `X-Forwarded-For`, `X-Real-IP`, and malformed values.

use std::net::{IpAddr, SocketAddr};

use ::http::request::Parts;
use ::http::{HeaderValue, Request};

use super::{ClientIp, KeyExtractor, ProxyHeader, TrustedProxies};

/// A request from `peer` (if any) with these header field lines, in order.
pub(super) fn request(peer: Option<&str>, lines: &[(&str, &[u8])]) -> Parts {
    let mut request = Request::get("/").body(()).unwrap();
    for (name, value) in lines {
        request.headers_mut().append(
            ::http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
            HeaderValue::from_bytes(value).unwrap(),
        );
    }
    if let Some(peer) = peer {
        request
            .extensions_mut()
            .insert(peer.parse::<SocketAddr>().unwrap());
    }
    request.into_parts().0
}

pub(super) fn ip(text: &str) -> Option<IpAddr> {
    Some(text.parse().unwrap())
}

/// `ClientIp::behind(header, count(n))`.
pub(super) fn counting(header: ProxyHeader, proxies: usize) -> ClientIp {
    ClientIp::behind(header, TrustedProxies::count(proxies).unwrap()).unwrap()
}

const PEER: Option<&str> = Some("10.0.0.2:41000");

/// The address `Forwarded` lines give behind `proxies` proxies.
fn forwarded(lines: &[&str], proxies: usize) -> Option<IpAddr> {
    let lines: Vec<_> = lines
        .iter()
        .map(|line| ("forwarded", line.as_bytes()))
        .collect();
    counting(ProxyHeader::Forwarded, proxies).client_address(&request(PEER, &lines))
}

#[test]
fn rfc_7239_section_4_examples() {
    // Obfuscated: the proxy gives no address.
    assert_eq!(forwarded(&[r#"for="_gazonk""#], 1), None);
    assert_eq!(
        forwarded(&[r#"For="[2001:db8:cafe::17]:4711""#], 1),
        ip("2001:db8:cafe::17")
    );
    assert_eq!(
        forwarded(&["for=192.0.2.60;proto=http;by=203.0.113.43"], 1),
        ip("192.0.2.60")
    );
    let two = ["for=192.0.2.43, for=198.51.100.17"];
    assert_eq!(forwarded(&two, 1), ip("198.51.100.17"));
    assert_eq!(forwarded(&two, 2), ip("192.0.2.43"));
}

#[test]
fn rfc_7239_section_7_1_lists_in_one_or_several_lines() {
    for lines in [
        &[r#"for=192.0.2.43,for="[2001:db8:cafe::17]",for=unknown"#][..],
        &[r#"for=192.0.2.43, for="[2001:db8:cafe::17]", for=unknown"#],
        &[
            "for=192.0.2.43",
            r#"for="[2001:db8:cafe::17]", for=unknown"#,
        ],
    ] {
        // The nearest proxy does not know its client: no address.
        assert_eq!(forwarded(lines, 1), None, "{lines:?}");
        assert_eq!(forwarded(lines, 2), ip("2001:db8:cafe::17"), "{lines:?}");
        assert_eq!(forwarded(lines, 3), ip("192.0.2.43"), "{lines:?}");
        // Fewer entries than proxies: the peer.
        assert_eq!(forwarded(lines, 4), ip("10.0.0.2"), "{lines:?}");
    }
}

#[test]
fn rfc_7239_section_7_4_transition_reads_the_same() {
    let legacy = request(
        PEER,
        &[("x-forwarded-for", b"192.0.2.43, 2001:db8:cafe::17")],
    );
    let standard = request(
        PEER,
        &[("forwarded", br#"for=192.0.2.43, for="[2001:db8:cafe::17]""#)],
    );
    for proxies in 1..=3 {
        assert_eq!(
            counting(ProxyHeader::XForwardedFor, proxies).extract(&legacy),
            counting(ProxyHeader::Forwarded, proxies).extract(&standard),
            "{proxies}"
        );
    }
    assert_eq!(
        counting(ProxyHeader::Forwarded, 1).extract(&standard),
        Some(b"ip:2001:db8:cafe::/64".to_vec())
    );
}

#[test]
fn rfc_7239_section_7_5_example_usage() {
    // Client 192.0.2.43, a proxy at 198.51.100.17, another at 203.0.113.60.
    let parts = request(
        Some("203.0.113.60:443"),
        &[(
            "forwarded",
            b"for=192.0.2.43, for=198.51.100.17;by=203.0.113.60;proto=http;host=example.com",
        )],
    );
    assert_eq!(
        counting(ProxyHeader::Forwarded, 2).client_address(&parts),
        ip("192.0.2.43")
    );
    let trusted = TrustedProxies::networks(["198.51.100.17", "203.0.113.60/32"]).unwrap();
    let key = ClientIp::behind(ProxyHeader::Forwarded, trusted).unwrap();
    assert_eq!(key.client_address(&parts), ip("192.0.2.43"));
}

#[test]
fn obfuscated_and_unknown_identifiers_give_no_address() {
    // RFC 7239, section 6.3's example.
    let lines = ["for=_hidden, for=_SEVKISEK"];
    assert_eq!(forwarded(&lines, 1), None);
    assert_eq!(forwarded(&lines, 2), None);
    assert_eq!(forwarded(&["for=unknown"], 1), None);
    assert_eq!(forwarded(&[r#"for="unknown:_port""#], 1), None);
    // An obfuscated port (section 6.3) still gives the address.
    assert_eq!(forwarded(&[r#"for="192.0.2.1:_abc""#], 1), ip("192.0.2.1"));
    assert_eq!(
        forwarded(&[r#"for="[2001:db8::1]:_x-1""#], 1),
        ip("2001:db8::1")
    );
}

#[test]
fn forwarded_parameters_quotes_and_whitespace() {
    for (line, expected) in [
        ("FOR=192.0.2.1", "192.0.2.1"),
        ("fOr=192.0.2.1;PROTO=https", "192.0.2.1"),
        ("proto=https;for=192.0.2.1", "192.0.2.1"),
        (r#"for="192.0.2.1""#, "192.0.2.1"),
        (r#"for="192.0.2.1:4711""#, "192.0.2.1"),
        ("for=192.0.2.1:4711", "192.0.2.1"),
        (r#"for="[2001:db8::1]""#, "2001:db8::1"),
        ("for=[2001:db8::1]:4711", "2001:db8::1"),
        ("for=2001:db8::1", "2001:db8::1"),
        (" for = 192.0.2.1 ; proto = http ", "192.0.2.1"),
        // Commas, semicolons and escaped quotes inside quoted-strings.
        (r#"for=192.0.2.1;host="a,b;c""#, "192.0.2.1"),
        (r#"for=192.0.2.1;ext="a\"b,c\\""#, "192.0.2.1"),
        (r#"ext="x, for=6.6.6.6";for=192.0.2.1"#, "192.0.2.1"),
        (r#"for="192.0.\2.1""#, "192.0.2.1"),
        ("for=192.0.2.1;;", "192.0.2.1"),
        ("for=192.0.2.1, , ", "192.0.2.1"),
    ] {
        assert_eq!(forwarded(&[line], 1), ip(expected), "{line}");
    }
}

#[test]
fn malformed_forwarded_elements_give_no_address() {
    for line in [
        "for=",
        "for",
        "=192.0.2.1",
        "proto=https",
        "for=192.0.2.1;for=192.0.2.2",
        "for=192.0.2.1;FOR=192.0.2.1",
        r#"for="192.0.2.1"#,
        r#"for=192.0.2.1";"#,
        r#"for="192.0.2.1"x"#,
        r#"for="[2001:db8::1]:4711"#,
        "for=192.0.2.1:99999",
        "for=192.0.2.1:+80",
        "for=192.0.2.1:",
        "for=[2001:db8::1",
        "for=[192.0.2.1]",
        "for=300.0.2.1",
        "for=192.0.2.1 proto=http",
        "fo r=192.0.2.1",
        "for=fe80::1%25eth0",
        r#"for="\"#,
        ";;;",
    ] {
        assert_eq!(forwarded(&[line], 1), None, "{line}");
    }
}

#[test]
fn spoofed_entries_left_of_the_proxies_are_ignored() {
    let key = counting(ProxyHeader::Forwarded, 1);
    for lines in [
        &[
            ("forwarded", &b"for=6.6.6.6"[..]),
            ("forwarded", b"for=192.0.2.9"),
        ][..],
        &[("forwarded", b"for=6.6.6.6, for=192.0.2.9")],
        // Garbage the client sent, the proxy's entry appended after it.
        &[("forwarded", br#"for="unterminated, for=192.0.2.9"#)],
        &[("forwarded", br#"for=6.6.6.6;x="\, for=192.0.2.9"#)],
        &[("forwarded", b"\xff\xfe;;=,, for=192.0.2.9")],
        &[("forwarded", b"garbage"), ("forwarded", b"for=192.0.2.9")],
    ] {
        assert_eq!(
            key.client_address(&request(PEER, lines)),
            ip("192.0.2.9"),
            "{lines:?}"
        );
    }
    let xff = ClientIp::behind_proxies(1);
    for line in [
        &b"6.6.6.6, 192.0.2.9"[..],
        b"garbage, 192.0.2.9",
        b"\xff\xfe, 192.0.2.9",
        b"\"1.1.1.1, 192.0.2.9",
    ] {
        let parts = request(PEER, &[("x-forwarded-for", line)]);
        assert_eq!(xff.client_address(&parts), ip("192.0.2.9"), "{line:?}");
    }
}

#[test]
fn x_forwarded_for_entries() {
    let one = ClientIp::behind_proxies(1);
    for (line, expected) in [
        (&b"192.0.2.1"[..], ip("192.0.2.1")),
        (b" 192.0.2.1 ", ip("192.0.2.1")),
        (b"192.0.2.1:4711", ip("192.0.2.1")),
        (b"[2001:db8::1]:4711", ip("2001:db8::1")),
        (b"2001:db8::1", ip("2001:db8::1")),
        (b"1.1.1.1, 192.0.2.1, ,", ip("192.0.2.1")),
        (b"unknown", None),
        (b"192.0.2.1, unknown", None),
        (b"192.0.2", None),
        (b"\xff", None),
    ] {
        let parts = request(PEER, &[("x-forwarded-for", line)]);
        assert_eq!(one.client_address(&parts), expected, "{line:?}");
    }
    // Several lines are one list, the last line nearest.
    let parts = request(
        PEER,
        &[
            ("x-forwarded-for", b"203.0.113.9"),
            ("x-forwarded-for", b"198.51.100.7, 192.0.2.1"),
        ],
    );
    assert_eq!(
        ClientIp::behind_proxies(2).client_address(&parts),
        ip("198.51.100.7")
    );
    assert_eq!(
        ClientIp::behind_proxies(3).client_address(&parts),
        ip("203.0.113.9")
    );
    assert_eq!(
        ClientIp::behind_proxies(4).client_address(&parts),
        ip("10.0.0.2")
    );
    // No header: the peer; no header and no peer: nothing.
    assert_eq!(one.client_address(&request(PEER, &[])), ip("10.0.0.2"));
    assert_eq!(one.extract(&request(None, &[])), None);
    // A proxy header, but no peer: a count does not need one.
    let parts = request(None, &[("x-forwarded-for", b"192.0.2.1")]);
    assert_eq!(one.client_address(&parts), ip("192.0.2.1"));
}

#[test]
fn x_real_ip_is_one_address_from_the_nearest_proxy() {
    let key = counting(ProxyHeader::XRealIp, 1);
    let address = |lines: &[(&str, &[u8])]| key.client_address(&request(PEER, lines));
    assert_eq!(address(&[("x-real-ip", b"203.0.113.9")]), ip("203.0.113.9"));
    assert_eq!(
        address(&[("x-real-ip", b" 2001:db8::9 ")]),
        ip("2001:db8::9")
    );
    assert_eq!(
        address(&[("x-real-ip", b"[2001:db8::9]:80")]),
        ip("2001:db8::9")
    );
    // Not overwritten by the proxy: two lines, or a list.
    assert_eq!(
        address(&[("x-real-ip", b"6.6.6.6"), ("x-real-ip", b"203.0.113.9")]),
        None
    );
    assert_eq!(address(&[("x-real-ip", b"6.6.6.6, 203.0.113.9")]), None);
    assert_eq!(address(&[("x-real-ip", b"nobody")]), None);
    // Other headers are not read.
    assert_eq!(
        address(&[
            ("x-forwarded-for", b"6.6.6.6"),
            ("forwarded", b"for=6.6.6.6")
        ]),
        ip("10.0.0.2")
    );
    let trusted = TrustedProxies::networks(["10.0.0.0/8"]).unwrap();
    let key = ClientIp::behind(ProxyHeader::XRealIp, trusted).unwrap();
    let from = |peer| key.client_address(&request(Some(peer), &[("x-real-ip", b"203.0.113.9")]));
    assert_eq!(from("10.0.0.2:1"), ip("203.0.113.9"));
    assert_eq!(from("192.0.2.50:1"), ip("192.0.2.50"));
}

#[test]
fn addresses_from_headers_are_grouped_and_unmapped_like_peers() {
    let parts = request(PEER, &[("x-forwarded-for", b"2001:db8:1:2:3:4:5:6")]);
    let key = ClientIp::behind_proxies(1);
    assert_eq!(key.extract(&parts), Some(b"ip:2001:db8:1:2::/64".to_vec()));
    assert_eq!(
        key.clone().ipv6_prefix(48).extract(&parts),
        Some(b"ip:2001:db8:1::/48".to_vec())
    );
    assert_eq!(
        key.clone().ipv6_prefix(200).extract(&parts),
        Some(b"ip:2001:db8:1:2:3:4:5:6".to_vec())
    );
    let mapped = request(PEER, &[("forwarded", br#"for="[::ffff:192.0.2.1]:80""#)]);
    let key = counting(ProxyHeader::Forwarded, 1);
    assert_eq!(key.extract(&mapped), Some(b"ip:192.0.2.1".to_vec()));
}
