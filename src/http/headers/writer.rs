//! Lists of Structured Fields items written by hand, byte for byte as the
//! `sfv` crate serializes them (M. Nottingham, P-H. Kamp, *Structured
//! Field Values for HTTP*, RFC 9651, section 4.1,
//! <https://www.rfc-editor.org/rfc/rfc9651#section-4.1>), one after the
//! other into one buffer on the stack for all of a response's fields:
//! they cost a few hundred instructions and no allocation instead of the
//! thousands of instructions `sfv`'s serializers spend on formatting and
//! growing a buffer per field. Only what the fields use is here: String
//! items with Integer, String and Byte Sequence parameters, and Integer
//! items; and members written once, when a policy is built, and copied.

use std::ops::Range;

pub(crate) use super::field_buf::FieldBuf;

/// The largest Structured Fields Integer (RFC 9651, section 3.3.1):
/// larger numbers are written as this.
pub(super) const MAX_INTEGER: u64 = 999_999_999_999_999;

/// The standard base64 alphabet (S. Josefsson, *The Base16, Base32, and
/// Base64 Data Encodings*, RFC 4648, section 4), which a Byte Sequence
/// uses (RFC 9651, section 3.3.5).
const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `n`, or [`MAX_INTEGER`] if larger.
pub(super) fn integer(n: u64) -> u64 {
    n.min(MAX_INTEGER)
}

/// A List (RFC 9651, section 4.1.1) being written at the end of a
/// buffer: members separated by `", "`, each a String item with its
/// parameters.
pub(super) struct ListWriter<'a> {
    out: &'a mut FieldBuf,
    /// Where the list begins in `out`.
    start: usize,
}

impl<'a> ListWriter<'a> {
    /// An empty list, to be written at the end of `out`.
    pub(super) fn new(out: &'a mut FieldBuf) -> Self {
        let start = out.len();
        Self { out, start }
    }

    /// Starts a member: the String item `name` (printable ASCII, as a
    /// [`HeaderPolicy`](super::HeaderPolicy) name is checked to be), with
    /// `\` and `"` escaped (section 4.1.6).
    pub(super) fn member(&mut self, name: &str) -> &mut Self {
        self.separate();
        push_string(self.out, name);
        self
    }

    /// A member, or the start of one, written before by
    /// [`member`](Self::member) and the parameter methods, copied as it
    /// is.
    pub(super) fn written(&mut self, member: &[u8]) -> &mut Self {
        self.separate();
        self.out.extend_from_slice(member);
        self
    }

    /// A parameter `;key=n`: an Integer (section 4.1.4), capped at
    /// [`MAX_INTEGER`]. `key` is the parameter's start, `;key=`, a
    /// constant written in one copy.
    pub(super) fn integer<const N: usize>(&mut self, key: &[u8; N], n: u64) -> &mut Self {
        self.key(key);
        push_integer(self.out, n);
        self
    }

    /// A parameter `;key="value"`: a String; `key` as for
    /// [`integer`](Self::integer).
    pub(super) fn string<const N: usize>(&mut self, key: &[u8; N], value: &str) -> &mut Self {
        self.key(key);
        push_string(self.out, value);
        self
    }

    /// A parameter `;key=:base64:`: a Byte Sequence (section 4.1.8);
    /// `key` as for [`integer`](Self::integer). Returns where the whole
    /// parameter is in the buffer, for [`copied`](Self::copied).
    pub(super) fn bytes<const N: usize>(&mut self, key: &[u8; N], value: &[u8]) -> Range<usize> {
        let start = self.out.len();
        self.key(key);
        self.out.push(b':');
        push_base64(self.out, value);
        self.out.push(b':');
        start..self.out.len()
    }

    /// A parameter written before at `parameter` in the buffer, copied.
    pub(super) fn copied(&mut self, parameter: Range<usize>) -> &mut Self {
        self.out.extend_from_within(parameter);
        self
    }

    /// How many bytes the list holds so far.
    pub(super) fn len(&self) -> usize {
        self.out.len() - self.start
    }

    /// Where the list is in the buffer, or `None` if it has no member (an
    /// empty List is not serialized, section 4.1.1).
    pub(super) fn finish(self) -> Option<Range<usize>> {
        (self.out.len() > self.start).then_some(self.start..self.out.len())
    }

    fn separate(&mut self) {
        if self.out.len() > self.start {
            self.out.extend_from_slice(b", ");
        }
    }

    /// Writes a parameter's `;key=`, given whole: a copy of a length
    /// known when compiled, with no call to `memcpy`.
    fn key<const N: usize>(&mut self, key: &[u8; N]) {
        debug_assert!(N >= 3 && key[0] == b';' && key[N - 1] == b'=');
        self.out.extend_from_slice(key);
    }
}

/// Writes an Integer item alone at the end of `out`: `n`, capped at
/// [`MAX_INTEGER`]; returns where it is.
pub(super) fn integer_item(out: &mut FieldBuf, n: u64) -> Range<usize> {
    let start = out.len();
    push_integer(out, n);
    start..out.len()
}

fn push_integer(out: &mut FieldBuf, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(integer(n)).as_bytes());
}

fn push_string(out: &mut FieldBuf, value: &str) {
    out.push(b'"');
    let bytes = value.as_bytes();
    if bytes.iter().any(|&byte| byte == b'"' || byte == b'\\') {
        for &byte in bytes {
            if byte == b'"' || byte == b'\\' {
                out.push(b'\\');
            }
            out.push(byte);
        }
    } else {
        out.extend_from_slice(bytes);
    }
    out.push(b'"');
}

/// `bytes` in base64 with padding, as RFC 4648 section 4 encodes it.
fn push_base64(out: &mut FieldBuf, bytes: &[u8]) {
    let digit = |sextet: u32| BASE64[(sextet & 63) as usize];
    let mut chunks = bytes.chunks_exact(3);
    for chunk in &mut chunks {
        let n = u32::from(chunk[0]) << 16 | u32::from(chunk[1]) << 8 | u32::from(chunk[2]);
        out.extend_from_slice(&[digit(n >> 18), digit(n >> 12), digit(n >> 6), digit(n)]);
    }
    match *chunks.remainder() {
        [a] => {
            let n = u32::from(a) << 16;
            out.extend_from_slice(&[digit(n >> 18), digit(n >> 12), b'=', b'=']);
        }
        [a, b] => {
            let n = u32::from(a) << 16 | u32::from(b) << 8;
            out.extend_from_slice(&[digit(n >> 18), digit(n >> 12), digit(n >> 6), b'=']);
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use sfv::{KeyRef, ListSerializer};

    /// The same list through `sfv`.
    fn by_sfv(members: &[(String, u64, Vec<u8>, Option<String>)]) -> Option<String> {
        let mut list = ListSerializer::new();
        for (name, n, bytes, unit) in members {
            let name = sfv::String::from_string(name.clone()).unwrap();
            let mut item = list.bare_item(&name).parameter(
                KeyRef::constant("q"),
                sfv::Integer::try_from(integer(*n)).unwrap(),
            );
            if let Some(unit) = unit {
                item = item.parameter(
                    KeyRef::constant("qu"),
                    sfv::StringRef::from_str(unit).unwrap(),
                );
            }
            item.parameter(KeyRef::constant("pk"), &bytes[..]);
        }
        list.finish()
    }

    fn by_hand(members: &[(String, u64, Vec<u8>, Option<String>)]) -> Option<String> {
        let mut out = FieldBuf::new();
        out.extend_from_slice(b"before");
        let mut list = ListWriter::new(&mut out);
        for (name, n, bytes, unit) in members {
            list.member(name).integer(b";q=", *n);
            if let Some(unit) = unit {
                list.string(b";qu=", unit);
            }
            list.bytes(b";pk=", bytes);
        }
        let range = list.finish()?;
        Some(String::from_utf8(out[range].to_vec()).expect("ASCII"))
    }

    #[test]
    fn base64_matches_rfc_4648_section_10() {
        let cases = [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ];
        for (input, expected) in cases {
            let mut out = FieldBuf::new();
            push_base64(&mut out, input.as_bytes());
            assert_eq!(&out[..], expected.as_bytes());
        }
    }

    proptest! {
        #[test]
        fn a_list_is_written_as_sfv_writes_it(
            members in prop::collection::vec(
                (
                    "[ -~]{1,64}",
                    any::<u64>(),
                    prop::collection::vec(any::<u8>(), 0..120),
                    prop::option::of("[ -~]{0,20}"),
                ),
                0..4,
            ),
        ) {
            prop_assert_eq!(by_hand(&members), by_sfv(&members));
        }
    }
}
