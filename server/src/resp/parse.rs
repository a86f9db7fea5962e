//! The request framer: one command at a time from the front of a read buffer.

use bytes::{Buf, Bytes, BytesMut};
use std::fmt;

use super::inline;

/// Redis's `PROTO_INLINE_MAX_SIZE`: the longest inline command line, 64 KiB.
pub const PROTO_INLINE_MAX_SIZE: usize = 64 * 1024;

/// The most characters a `*<count>` or `$<length>` line can hold before its
/// CR. Redis's `string2ll` refuses 21 characters or more, so a longer line can
/// never be valid; it is refused at once instead of after 64 KiB as in Redis.
pub const MAX_COUNT_LEN: usize = 20;

/// Size limits, all checked before the data they bound has arrived, so a
/// connection never buffers more than one command within these limits.
///
/// ```
/// use memcache_ratelimit_server::resp::Limits;
///
/// let limits = Limits::default();
/// assert_eq!(limits.max_args, 1024);
/// assert_eq!(limits.max_bulk, 1024 * 1024);
/// assert_eq!(limits.max_inline, 64 * 1024);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most arguments in one command (the count of a multibulk request,
    /// or the words of an inline line). More is a protocol error.
    pub max_args: usize,
    /// The longest bulk string (Redis's `proto-max-bulk-len`, which is 512 MB
    /// there). A longer declared length is a protocol error.
    pub max_bulk: usize,
    /// The longest inline line, counting a CR before its LF but not the LF
    /// (Redis's `PROTO_INLINE_MAX_SIZE`). Unlike Redis, which takes a longer
    /// line if its LF came in the same read, a longer line is always refused,
    /// however the input was split into reads.
    pub max_inline: usize,
}

impl Default for Limits {
    /// 1024 arguments, 1 MiB bulk strings, 64 KiB inline lines.
    fn default() -> Self {
        Limits {
            max_args: 1024,
            max_bulk: 1024 * 1024,
            max_inline: PROTO_INLINE_MAX_SIZE,
        }
    }
}

/// What went wrong; [`ProtocolError`]'s text depends on it alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProtocolErrorKind {
    /// An inline line longer than [`Limits::max_inline`], or with more than
    /// [`Limits::max_args`] words.
    TooBigInlineRequest,
    /// An inline line with an unterminated quote, or a closing quote followed
    /// by something other than a space.
    UnbalancedQuotes,
    /// A `*` line with no CR within [`MAX_COUNT_LEN`] characters.
    TooBigMbulkCountString,
    /// A `*` count that is not an integer or is above [`Limits::max_args`].
    InvalidMultibulkLength,
    /// An element of a multibulk request that does not start with `$`.
    ExpectedDollar(u8),
    /// A `$` line with no CR within [`MAX_COUNT_LEN`] characters.
    TooBigBulkCountString,
    /// A `$` length that is not an integer, is negative, or is above
    /// [`Limits::max_bulk`].
    InvalidBulkLength,
}

/// A malformed request. Its [`Display`](fmt::Display) is Redis's text for the
/// same fault; Redis replies `-ERR <text>` and then closes the connection,
/// and so should the caller (the rest of the buffer cannot be framed).
///
/// ```
/// use bytes::BytesMut;
/// use memcache_ratelimit_server::resp::{parse, Limits, ProtocolErrorKind};
///
/// let mut buf = BytesMut::from(&b"*1\r\n:1\r\n"[..]);
/// let err = parse(&mut buf, &Limits::default()).unwrap_err();
/// assert_eq!(err.kind(), ProtocolErrorKind::ExpectedDollar(b':'));
/// assert_eq!(err.to_string(), "Protocol error: expected '$', got ':'");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ProtocolError {
    kind: ProtocolErrorKind,
}

impl ProtocolError {
    pub(crate) fn new(kind: ProtocolErrorKind) -> Self {
        ProtocolError { kind }
    }

    /// The fault.
    pub fn kind(&self) -> ProtocolErrorKind {
        self.kind
    }
}

impl From<ProtocolErrorKind> for ProtocolError {
    fn from(kind: ProtocolErrorKind) -> Self {
        ProtocolError::new(kind)
    }
}

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ProtocolErrorKind::*;
        let text = match self.kind {
            TooBigInlineRequest => "too big inline request",
            UnbalancedQuotes => "unbalanced quotes in request",
            TooBigMbulkCountString => "too big mbulk count string",
            InvalidMultibulkLength => "invalid multibulk length",
            // Redis prints the byte with `%c`; a byte above 0x7f shows here
            // as the Latin-1 character, so the text stays UTF-8.
            ExpectedDollar(got) => {
                return write!(f, "Protocol error: expected '$', got '{}'", char::from(got))
            }
            TooBigBulkCountString => "too big bulk count string",
            InvalidBulkLength => "invalid bulk length",
        };
        write!(f, "Protocol error: {text}")
    }
}

impl std::error::Error for ProtocolError {}

/// The outcome of framing one request at the front of the buffer.
pub(crate) enum Step {
    /// A command with at least one argument; its bytes were consumed.
    Command(Vec<Bytes>),
    /// An empty request (`*0`, `*-1`, a blank inline line), consumed.
    Empty,
    /// Not enough bytes yet; nothing consumed.
    Incomplete,
}

/// Takes one command from the front of `buf`.
///
/// Returns `Ok(Some(args))` after removing the command's bytes from `buf`,
/// `Ok(None)` when more input is needed, `Err` on malformed input (reply with
/// the error and close the connection). Empty requests (`*0`, `*-1`, blank
/// inline lines) are consumed and skipped, so `args` is never empty.
///
/// Requests are either multibulk (`*N\r\n` then N times `$len\r\n<bytes>\r\n`)
/// or, when the first byte is not `*`, one inline line split like Redis's
/// `sdssplitargs` (spaces separate words; `"double"` quotes take `\n \r \t \b
/// \a \\ \" \xHH` escapes; `'single'` quotes take `\'` only).
///
/// Limits are enforced on the headers, before the data arrives: a count above
/// [`Limits::max_args`], a length above [`Limits::max_bulk`], an inline line
/// longer than [`Limits::max_inline`] or a count line with no CR within
/// [`MAX_COUNT_LEN`] characters is an error at once. The arguments are
/// zero-copy slices of the consumed bytes (an inline word with escapes is
/// a copy).
///
/// The function keeps no state between calls: a command that is still
/// arriving is framed again from its start on the next call. That costs its
/// headers only (at most [`Limits::max_args`] of them, or one inline line),
/// never its bulk data, which is skipped by its declared length.
/// The caller should keep spare capacity in `buf` for its reads; nothing
/// here reserves memory for a declared length.
///
/// As in Redis, the two bytes after a bulk string and the byte after a
/// header's CR are skipped unchecked.
///
/// ```
/// use bytes::BytesMut;
/// use memcache_ratelimit_server::resp::{parse, Limits};
///
/// let limits = Limits::default();
/// let mut buf = BytesMut::from(&b"*2\r\n$4\r\nECHO\r\n$2\r\nhi\r\nPING \"a b\"\r\n*1\r\n$4\r\nPI"[..]);
/// assert_eq!(parse(&mut buf, &limits).unwrap().unwrap(), vec!["ECHO", "hi"]);
/// assert_eq!(parse(&mut buf, &limits).unwrap().unwrap(), vec!["PING", "a b"]);
/// assert_eq!(parse(&mut buf, &limits).unwrap(), None); // waits for the rest
/// buf.extend_from_slice(b"NG\r\n");
/// assert_eq!(parse(&mut buf, &limits).unwrap().unwrap(), vec!["PING"]);
/// assert!(buf.is_empty());
/// ```
pub fn parse(buf: &mut BytesMut, limits: &Limits) -> Result<Option<Vec<Bytes>>, ProtocolError> {
    loop {
        let Some(&first) = buf.first() else {
            return Ok(None);
        };
        let step = if first == b'*' {
            multibulk(buf, limits)?
        } else {
            inline::inline(buf, limits)?
        };
        match step {
            Step::Command(args) => return Ok(Some(args)),
            Step::Empty => continue,
            Step::Incomplete => return Ok(None),
        }
    }
}

/// A multibulk request at the front of `buf` (which starts with `*`).
fn multibulk(buf: &mut BytesMut, limits: &Limits) -> Result<Step, ProtocolError> {
    use ProtocolErrorKind::*;
    let Some((count, mut pos)) = count_line(buf, 1, TooBigMbulkCountString)? else {
        return Ok(Step::Incomplete);
    };
    let count = count.ok_or(InvalidMultibulkLength)?;
    if count <= 0 {
        buf.advance(pos);
        return Ok(Step::Empty);
    }
    let count = usize::try_from(count)
        .ok()
        .filter(|&n| n <= limits.max_args)
        .ok_or(InvalidMultibulkLength)?;
    // Each element takes at least 6 bytes (`$0\r\n\r\n`): don't let a large
    // declared count allocate ahead of its data.
    let rest = buf.len().saturating_sub(pos);
    let mut ranges = Vec::with_capacity(count.min(rest / 6 + 1));
    for _ in 0..count {
        let Some(&kind) = buf.get(pos) else {
            return Ok(Step::Incomplete);
        };
        if kind != b'$' {
            return Err(ExpectedDollar(kind).into());
        }
        let Some((len, start)) = count_line(buf, pos + 1, TooBigBulkCountString)? else {
            return Ok(Step::Incomplete);
        };
        let len = len
            .and_then(|len| usize::try_from(len).ok())
            .filter(|&len| len <= limits.max_bulk)
            .ok_or(InvalidBulkLength)?;
        let end = start.checked_add(len).ok_or(InvalidBulkLength)?;
        let next = end.checked_add(2).ok_or(InvalidBulkLength)?;
        if buf.len() < next {
            return Ok(Step::Incomplete);
        }
        ranges.push((start, end));
        pos = next;
    }
    let frame = buf.split_to(pos).freeze();
    Ok(Step::Command(
        ranges
            .into_iter()
            .map(|(start, end)| frame.slice(start..end))
            .collect(),
    ))
}

/// The `*<n>` or `$<n>` line whose digits start at `from`: `Ok(None)` when its
/// CR and the byte after it have not arrived yet, else the parsed number (`None`
/// if it is not one) and the offset after the line.
fn count_line(
    buf: &[u8],
    from: usize,
    too_big: ProtocolErrorKind,
) -> Result<Option<(Option<i64>, usize)>, ProtocolError> {
    let window = buf
        .get(from..buf.len().min(from.saturating_add(MAX_COUNT_LEN + 1)))
        .unwrap_or_default();
    match window.iter().position(|&b| b == b'\r') {
        Some(cr) if from + cr + 1 < buf.len() => {
            Ok(Some((string2ll(&window[..cr]), from + cr + 2)))
        }
        Some(_) => Ok(None),
        None if window.len() > MAX_COUNT_LEN => Err(too_big.into()),
        None => Ok(None),
    }
}

/// Redis's `string2ll`: an optional `-`, then `0` alone or a digit string
/// with no leading zero; no `+`, no spaces, no `-0`, no overflow.
pub(crate) fn string2ll(s: &[u8]) -> Option<i64> {
    if s.is_empty() || s.len() > MAX_COUNT_LEN {
        return None;
    }
    if s == b"0" {
        return Some(0);
    }
    let (negative, digits) = match s {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, s),
    };
    match digits.first() {
        Some(b'1'..=b'9') => {}
        _ => return None,
    }
    let mut value: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    if negative {
        0i64.checked_sub_unsigned(value)
    } else {
        i64::try_from(value).ok()
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;
