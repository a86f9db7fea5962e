//! The entries of one proxy header, nearest hop first.
//!
//! Each proxy that appends to `X-Forwarded-For` or `Forwarded` adds, at
//! the right, the address it received the request from. Read from the
//! right, the entries go from the proxy nearest to the service outwards.
//! Several field lines of one name are one list in order (RFC 9110,
//! section 5.3, <https://www.rfc-editor.org/rfc/rfc9110#section-5.3>), so
//! the last line is read first; empty list elements are skipped (section
//! 5.6.1). Each line is read lazily: what lies left of the entries needed
//! is never parsed.

use std::net::IpAddr;

use ::http::header::{GetAll, ValueIter};
use ::http::{HeaderMap, HeaderValue};

use super::forwarded::{element_for, parse_node, split_last_element};
use super::proxy_header::ProxyHeader;

/// One entry: the address a proxy wrote, or `None` when it wrote none
/// (`unknown`, an obfuscated identifier, or something that does not
/// parse).
pub(super) type Hop = Option<IpAddr>;

/// The entries of `header` in `headers`, nearest first.
pub(super) fn hops(header: ProxyHeader, headers: &HeaderMap) -> Hops<'_> {
    let lines = headers.get_all(header.name());
    let single = match header {
        // One address, set (not appended to) by the nearest proxy: several
        // lines mean it was not overwritten, and name no one.
        ProxyHeader::XRealIp => Some(single_value(&lines)),
        ProxyHeader::XForwardedFor | ProxyHeader::Forwarded => None,
    };
    Hops {
        header,
        lines: lines.iter(),
        line: &[],
        single,
    }
}

/// `X-Real-IP`'s one entry: `None` without the field, `Some(None)` when
/// there are several lines or the value is not an address.
fn single_value(lines: &GetAll<'_, HeaderValue>) -> Option<Hop> {
    let mut values = lines.iter();
    let first = values.next()?;
    Some(match values.next() {
        Some(_) => None,
        None => parse_node(first.as_bytes()),
    })
}

/// An iterator over a header's entries, nearest first.
pub(super) struct Hops<'a> {
    header: ProxyHeader,
    lines: ValueIter<'a, HeaderValue>,
    /// What is left of the line being read.
    line: &'a [u8],
    /// `X-Real-IP`'s value, taken once.
    single: Option<Option<Hop>>,
}

impl Iterator for Hops<'_> {
    type Item = Hop;

    fn next(&mut self) -> Option<Hop> {
        if let Some(single) = &mut self.single {
            return single.take();
        }
        loop {
            if self.line.is_empty() {
                self.line = self.lines.next_back()?.as_bytes();
            }
            let (before, entry) = match self.header {
                ProxyHeader::Forwarded => split_last_element(self.line),
                _ => match self.line.iter().rposition(|&byte| byte == b',') {
                    Some(comma) => {
                        let (before, entry) = self.line.split_at(comma);
                        (before, entry.get(1..).unwrap_or_default())
                    }
                    None => (&[][..], self.line),
                },
            };
            self.line = before;
            let entry = entry.trim_ascii();
            if entry.is_empty() {
                continue;
            }
            return Some(match self.header {
                ProxyHeader::Forwarded => element_for(entry),
                _ => parse_node(entry),
            });
        }
    }
}
