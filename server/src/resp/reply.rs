//! Replies and their encoding in RESP2 or RESP3.

use super::parse::ProtocolError;
use bytes::{BufMut, Bytes, BytesMut};

/// The protocol a connection speaks: RESP2 until the client sends `HELLO 3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Protocol {
    /// RESP2: nulls are `$-1`, maps are flat arrays.
    #[default]
    Resp2,
    /// RESP3: nulls are `_`, maps are `%` aggregates.
    Resp3,
}

/// A reply, encoded for the connection's [`Protocol`] by [`Reply::encode`].
///
/// ```
/// use bytes::BytesMut;
/// use memcache_ratelimit_server::resp::{Protocol, Reply};
///
/// let reply = Reply::Map(vec![(Reply::bulk("proto"), Reply::Integer(3)), (Reply::bulk("id"), Reply::Null)]);
/// let mut out = BytesMut::new();
/// reply.encode(Protocol::Resp3, &mut out);
/// assert_eq!(&out[..], b"%2\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n_\r\n");
/// out.clear();
/// reply.encode(Protocol::Resp2, &mut out);
/// assert_eq!(&out[..], b"*4\r\n$5\r\nproto\r\n:3\r\n$2\r\nid\r\n$-1\r\n");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A simple string (`+OK`). CR and LF are written as spaces.
    Simple(String),
    /// An error (`-ERR text`): the text starts with the error code (`ERR`,
    /// `WRONGTYPE`, `NOPROTO`...). CR and LF are written as spaces.
    Error(String),
    /// A signed 64-bit integer (`:42`).
    Integer(i64),
    /// A binary-safe bulk string (`$3\r\nabc`).
    Bulk(Bytes),
    /// No value: `$-1` in RESP2, `_` in RESP3.
    Null,
    /// An array of replies.
    Array(Vec<Reply>),
    /// Key-value pairs, in order: a `%` map in RESP3, a flat array of keys
    /// and values in RESP2.
    Map(Vec<(Reply, Reply)>),
}

impl Reply {
    /// `+OK`.
    ///
    /// ```
    /// use memcache_ratelimit_server::resp::{Protocol, Reply};
    ///
    /// assert_eq!(&Reply::ok().to_bytes(Protocol::Resp2)[..], b"+OK\r\n");
    /// ```
    pub fn ok() -> Self {
        Reply::Simple("OK".to_owned())
    }

    /// A simple string.
    ///
    /// ```
    /// use memcache_ratelimit_server::resp::{Protocol, Reply};
    ///
    /// assert_eq!(&Reply::simple("PONG").to_bytes(Protocol::Resp3)[..], b"+PONG\r\n");
    /// ```
    pub fn simple(text: impl Into<String>) -> Self {
        Reply::Simple(text.into())
    }

    /// An error reply; `text` starts with the error code.
    ///
    /// ```
    /// use memcache_ratelimit_server::resp::{Protocol, Reply};
    ///
    /// let reply = Reply::error(format!("ERR unknown command '{}'", "GET\r\n"));
    /// assert_eq!(&reply.to_bytes(Protocol::Resp2)[..], b"-ERR unknown command 'GET  '\r\n");
    /// ```
    pub fn error(text: impl Into<String>) -> Self {
        Reply::Error(text.into())
    }

    /// A bulk string.
    ///
    /// ```
    /// use memcache_ratelimit_server::resp::{Protocol, Reply};
    ///
    /// assert_eq!(&Reply::bulk("a\r\nb").to_bytes(Protocol::Resp2)[..], b"$4\r\na\r\nb\r\n");
    /// ```
    pub fn bulk(data: impl Into<Bytes>) -> Self {
        Reply::Bulk(data.into())
    }

    /// Appends the encoding of this reply to `out`, without allocating
    /// beyond `out`'s growth.
    pub fn encode(&self, protocol: Protocol, out: &mut BytesMut) {
        match self {
            Reply::Simple(text) => line(out, b'+', text),
            Reply::Error(text) => line(out, b'-', text),
            Reply::Integer(n) => {
                out.put_u8(b':');
                put_decimal(out, n.unsigned_abs(), *n < 0);
                out.put_slice(b"\r\n");
            }
            Reply::Bulk(data) => {
                header(out, b'$', data.len());
                out.put_slice(data);
                out.put_slice(b"\r\n");
            }
            Reply::Null => out.put_slice(match protocol {
                Protocol::Resp2 => b"$-1\r\n",
                Protocol::Resp3 => b"_\r\n",
            }),
            Reply::Array(items) => {
                header(out, b'*', items.len());
                for item in items {
                    item.encode(protocol, out);
                }
            }
            Reply::Map(pairs) => {
                match protocol {
                    Protocol::Resp2 => header(out, b'*', pairs.len().saturating_mul(2)),
                    Protocol::Resp3 => header(out, b'%', pairs.len()),
                }
                for (key, value) in pairs {
                    key.encode(protocol, out);
                    value.encode(protocol, out);
                }
            }
        }
    }

    /// This reply's encoding in a new buffer.
    pub fn to_bytes(&self, protocol: Protocol) -> Bytes {
        let mut out = BytesMut::new();
        self.encode(protocol, &mut out);
        out.freeze()
    }
}

impl From<ProtocolError> for Reply {
    /// `-ERR Protocol error: ...`, as Redis replies before closing.
    ///
    /// ```
    /// use bytes::BytesMut;
    /// use memcache_ratelimit_server::resp::{parse, Limits, Protocol, Reply};
    ///
    /// let mut buf = BytesMut::from(&b"*x\r\n"[..]);
    /// let err = parse(&mut buf, &Limits::default()).unwrap_err();
    /// assert_eq!(&Reply::from(err).to_bytes(Protocol::Resp2)[..], b"-ERR Protocol error: invalid multibulk length\r\n");
    /// ```
    fn from(err: ProtocolError) -> Self {
        Reply::Error(format!("ERR {err}"))
    }
}

/// `<kind><text>\r\n`, with any CR or LF in `text` written as a space so the
/// line cannot end early or inject another reply.
fn line(out: &mut BytesMut, kind: u8, text: &str) {
    out.put_u8(kind);
    let mut rest = text.as_bytes();
    while let Some(i) = rest.iter().position(|&b| b == b'\r' || b == b'\n') {
        out.put_slice(rest.get(..i).unwrap_or_default());
        out.put_u8(b' ');
        rest = rest.get(i + 1..).unwrap_or_default();
    }
    out.put_slice(rest);
    out.put_slice(b"\r\n");
}

/// `<kind><n>\r\n`: a length or count header.
fn header(out: &mut BytesMut, kind: u8, n: usize) {
    out.put_u8(kind);
    put_decimal(out, n as u64, false);
    out.put_slice(b"\r\n");
}

/// Writes `n` in decimal, after a `-` if `negative`.
fn put_decimal(out: &mut BytesMut, mut n: u64, negative: bool) {
    let mut digits = [0u8; 20]; // u64::MAX has 20 digits
    let mut start = digits.len();
    for slot in digits.iter_mut().rev() {
        *slot = b'0' + (n % 10) as u8;
        start -= 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if negative {
        out.put_u8(b'-');
    }
    out.put_slice(digits.get(start..).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(reply: &Reply, protocol: Protocol) -> Vec<u8> {
        reply.to_bytes(protocol).to_vec()
    }

    #[test]
    fn scalars() {
        let cases: &[(Reply, &[u8], &[u8])] = &[
            (Reply::ok(), b"+OK\r\n", b"+OK\r\n"),
            (Reply::simple("a\rb\nc"), b"+a b c\r\n", b"+a b c\r\n"),
            (
                Reply::error("ERR x\r\n+OK"),
                b"-ERR x  +OK\r\n",
                b"-ERR x  +OK\r\n",
            ),
            (Reply::error(""), b"-\r\n", b"-\r\n"),
            (Reply::Integer(0), b":0\r\n", b":0\r\n"),
            (Reply::Integer(-7), b":-7\r\n", b":-7\r\n"),
            (
                Reply::Integer(i64::MAX),
                b":9223372036854775807\r\n",
                b":9223372036854775807\r\n",
            ),
            (
                Reply::Integer(i64::MIN),
                b":-9223372036854775808\r\n",
                b":-9223372036854775808\r\n",
            ),
            (Reply::bulk(""), b"$0\r\n\r\n", b"$0\r\n\r\n"),
            (
                Reply::bulk(vec![0u8, 13, 10]),
                b"$3\r\n\0\r\n\r\n",
                b"$3\r\n\0\r\n\r\n",
            ),
            (Reply::Null, b"$-1\r\n", b"_\r\n"),
            (Reply::Array(vec![]), b"*0\r\n", b"*0\r\n"),
            (Reply::Map(vec![]), b"*0\r\n", b"%0\r\n"),
        ];
        for (reply, resp2, resp3) in cases {
            assert_eq!(enc(reply, Protocol::Resp2), *resp2, "{reply:?} in RESP2");
            assert_eq!(enc(reply, Protocol::Resp3), *resp3, "{reply:?} in RESP3");
        }
    }

    #[test]
    fn nested() {
        let reply = Reply::Array(vec![
            Reply::Integer(1),
            Reply::Map(vec![(Reply::simple("k"), Reply::Array(vec![Reply::Null]))]),
        ]);
        assert_eq!(
            enc(&reply, Protocol::Resp2),
            b"*2\r\n:1\r\n*2\r\n+k\r\n*1\r\n$-1\r\n"
        );
        assert_eq!(
            enc(&reply, Protocol::Resp3),
            b"*2\r\n:1\r\n%1\r\n+k\r\n*1\r\n_\r\n"
        );
    }

    #[test]
    fn decimals() {
        for n in [0u64, 9, 10, 99, 100, 12345, u64::MAX] {
            let mut out = BytesMut::new();
            put_decimal(&mut out, n, false);
            assert_eq!(&out[..], n.to_string().as_bytes());
        }
    }

    #[test]
    fn encode_appends() {
        let mut out = BytesMut::from(&b"+PONG\r\n"[..]);
        Reply::Integer(5).encode(Protocol::Resp2, &mut out);
        assert_eq!(&out[..], b"+PONG\r\n:5\r\n");
    }
}
