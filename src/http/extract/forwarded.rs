//! The `Forwarded` header field of A. Petersson and M. Nilsson, *Forwarded
//! HTTP Extension*, RFC 7239, <https://www.rfc-editor.org/rfc/rfc7239>:
//! its elements, read from the right, and each element's `for=` node.
//!
//! Section 4's grammar:
//!
//! ```text
//! Forwarded         = 1#forwarded-element
//! forwarded-element = [ forwarded-pair ] *( ";" [ forwarded-pair ] )
//! forwarded-pair    = token "=" value
//! value             = token / quoted-string
//! ```
//!
//! Elements are read from the right end of a field line, because the
//! right end is what the proxies nearest to the service wrote; the left is
//! whatever the client sent. So a client that sends an unterminated
//! quoted-string or other garbage cannot hide the elements a proxy
//! appended after it: they are read before the scan ever reaches the
//! client's bytes.

use std::borrow::Cow;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Splits the last element off `line`: `(before, element)`, the comma
/// between them dropped. Commas inside quoted-strings do not split, and a
/// quote preceded by an odd number of backslashes is escaped (RFC 9110,
/// section 5.6.4, <https://www.rfc-editor.org/rfc/rfc9110#section-5.6.4>).
pub(super) fn split_last_element(line: &[u8]) -> (&[u8], &[u8]) {
    let mut quoted = false;
    for (at, &byte) in line.iter().enumerate().rev() {
        match byte {
            // From the right, the first quote met closes a quoted-string.
            b'"' if !quoted => quoted = true,
            b'"' if !escaped(line, at) => quoted = false,
            b',' if !quoted => {
                let (before, element) = line.split_at(at);
                return (before, element.get(1..).unwrap_or_default());
            }
            _ => {}
        }
    }
    (&[], line)
}

/// Whether the byte at `at` follows an odd run of backslashes.
fn escaped(line: &[u8], at: usize) -> bool {
    let before = line.get(..at).unwrap_or_default();
    let backslashes = before.iter().rev().take_while(|&&byte| byte == b'\\');
    backslashes.count() % 2 == 1
}

/// What one element says of the node it was received from: its address,
/// or `None` for `for=unknown` (section 6.2), an obfuscated identifier
/// such as `for=_hidden` (section 6.3), no `for` at all, `for` twice
/// (section 4: "Each parameter MUST NOT occur more than once per
/// forwarded-element"), or an element that does not parse. Parameter
/// names match without regard to case (section 4); whitespace around
/// pairs and `=` is tolerated, as is an IPv6 address without its quotes
/// and brackets or an IPv4 address with an unquoted port.
pub(super) fn element_for(element: &[u8]) -> Option<IpAddr> {
    let mut node = None;
    let mut rest = element;
    while !rest.is_empty() {
        let (pair, after) = split_first_pair(rest)?;
        rest = after;
        let pair = pair.trim_ascii();
        if pair.is_empty() {
            continue;
        }
        let equals = pair.iter().position(|&byte| byte == b'=')?;
        let (name, value) = pair.split_at(equals);
        let name = name.trim_ascii();
        let value = value.get(1..).unwrap_or_default().trim_ascii();
        if name.is_empty() || !name.iter().all(|&byte| is_tchar(byte)) {
            return None;
        }
        let value = unquote(value)?;
        if name.eq_ignore_ascii_case(b"for") {
            if node.is_some() {
                return None;
            }
            node = Some(value);
        }
    }
    parse_node(&node?)
}

/// Splits the first pair off `element` at a `;` outside quoted-strings:
/// `(pair, rest)`, or `None` for an unterminated quoted-string.
fn split_first_pair(element: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut quoted = false;
    let mut escape = false;
    for (at, &byte) in element.iter().enumerate() {
        match byte {
            _ if escape => escape = false,
            b'\\' if quoted => escape = true,
            b'"' => quoted = !quoted,
            b';' if !quoted => {
                let (pair, rest) = element.split_at(at);
                return Some((pair, rest.get(1..).unwrap_or_default()));
            }
            _ => {}
        }
    }
    (!quoted).then_some((element, &[]))
}

/// A token's or a quoted-string's content, with quoted-pairs undone; `None`
/// for a quoted-string that is not one, or a bare value with characters a
/// token cannot hold other than `:`, `[` and `]` (tolerated for addresses).
fn unquote(value: &[u8]) -> Option<Cow<'_, [u8]>> {
    let Some(inner) = value.strip_prefix(b"\"") else {
        let bare = value
            .iter()
            .all(|&byte| is_tchar(byte) || matches!(byte, b':' | b'[' | b']'));
        return (bare && !value.is_empty()).then_some(Cow::Borrowed(value));
    };
    let inner = inner.strip_suffix(b"\"")?;
    if !inner.contains(&b'\\') {
        return (!inner.contains(&b'"')).then_some(Cow::Borrowed(inner));
    }
    let mut content = Vec::with_capacity(inner.len());
    let mut bytes = inner.iter();
    while let Some(&byte) = bytes.next() {
        match byte {
            b'\\' => content.push(*bytes.next()?),
            b'"' => return None,
            _ => content.push(byte),
        }
    }
    Some(Cow::Owned(content))
}

/// RFC 9110's `tchar`, the characters of a token.
fn is_tchar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// A node (RFC 7239, section 6) as an address: `192.0.2.43`,
/// `192.0.2.43:4711`, `[2001:db8:cafe::17]`, `[2001:db8:cafe::17]:4711`,
/// with a numeric or obfuscated (`_port`) port, or, leniently, a bare IPv6
/// address. `unknown`, obfuscated names and anything else are `None`.
/// Also reads `X-Forwarded-For` entries and `X-Real-IP` values.
pub(super) fn parse_node(node: &[u8]) -> Option<IpAddr> {
    let node = std::str::from_utf8(node).ok()?.trim();
    if let Some(bracketed) = node.strip_prefix('[') {
        let (v6, after) = bracketed.split_once(']')?;
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        return v6.parse::<Ipv6Addr>().ok().map(IpAddr::V6);
    }
    if let Ok(address) = node.parse::<IpAddr>() {
        return Some(address);
    }
    let (v4, port) = node.split_once(':')?;
    if !is_port(port) {
        return None;
    }
    v4.parse::<Ipv4Addr>().ok().map(IpAddr::V4)
}

/// RFC 7239's `node-port`: a port number, or `_` and an obfuscated one.
fn is_port(port: &str) -> bool {
    match port.strip_prefix('_') {
        Some(obfuscated) => {
            !obfuscated.is_empty()
                && obfuscated
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'.' | b'_' | b'-'))
        }
        None => port.len() <= 5 && port.parse::<u16>().is_ok() && !port.starts_with('+'),
    }
}
