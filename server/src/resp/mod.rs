//! RESP, the Redis protocol: the request framer and the reply encoder.
//!
//! The wire format is Redis's (Redis documentation, "Redis serialization
//! protocol specification",
//! <https://redis.io/docs/latest/develop/reference/protocol-spec/>). A server
//! only has to read the part of it that clients send: a multibulk request
//! (`*N\r\n` then N bulk strings `$len\r\n<bytes>\r\n`) or an inline command
//! (one line of words, as typed into `telnet`). [`parse`] takes one such
//! request from the front of the connection's read buffer, as Redis's
//! `processMultibulkBuffer` and `processInlineBuffer` (`networking.c`) do,
//! with the same error texts. Replies go out as RESP2 or, after `HELLO 3`,
//! RESP3 ([`Reply::encode`]).
//!
//! # Why not the `redis-protocol` crate
//!
//! Requests are framed here rather than with `redis-protocol` 6 (which the
//! property tests use as an independent oracle instead). Measured against
//! its decoders, it
//!
//! - has **no limits**: no maximum argument count, bulk length or line
//!   length, and no hook to add them;
//! - **buffers without bound** while waiting for a declared length: on
//!   `*9223372036854775807\r\n`, `$9223372036854775807\r\n` or a header
//!   without CRLF it answers "incomplete" forever, so the caller keeps
//!   reading; and it re-parses an incomplete frame from its first byte on
//!   every call (quadratic on a large request arriving in small reads);
//! - does not parse **inline commands** (`PING\r\n` is an invalid frame type);
//! - **aborts the process** on deep nesting: about 40 KB of nested `*1\r\n`
//!   overflows the stack of a tokio worker, which no `catch_unwind` or task
//!   isolation can contain.
//!
//! Guarding it would take a pre-scan of every header, which is already a
//! complete request framer. [`parse`] checks every limit on the headers,
//! before the data arrives, never recurses (an element of a request must be
//! a bulk string), and skips bulk data by its declared length.
//!
//! ```
//! use bytes::BytesMut;
//! use memcache_ratelimit_server::resp::{parse, Limits, Protocol, Reply};
//!
//! let limits = Limits::default();
//! let mut input = BytesMut::from(&b"PING\r\n*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n"[..]);
//! let mut output = BytesMut::new();
//! while let Some(args) = parse(&mut input, &limits).unwrap() {
//!     let reply = match &args[..] {
//!         [_] => Reply::simple("PONG"),
//!         [_, message] => Reply::Bulk(message.clone()),
//!         _ => Reply::error("ERR wrong number of arguments for 'ping' command"),
//!     };
//!     reply.encode(Protocol::Resp2, &mut output);
//! }
//! assert_eq!(&output[..], b"+PONG\r\n$2\r\nhi\r\n");
//! ```

mod inline;
mod parse;
mod reply;

pub use parse::{
    parse, Limits, ProtocolError, ProtocolErrorKind, MAX_COUNT_LEN, PROTO_INLINE_MAX_SIZE,
};
pub use reply::{Protocol, Reply};
