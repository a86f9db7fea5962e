//! Meta-protocol replies, read in place from a connection and checked
//! against the operation they answer.

use super::request::Verb;
use crate::error::{StoreError, StoreErrorKind};
use crate::store::memcached::connection::{protocol, Connection};
use crate::store::{counter_digits, decimal};

/// memcached's answer to one operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reply {
    /// `VA`: the value read, or a counter's new value that is not a
    /// number; with the item's CAS token when it was asked for.
    Value { data: Vec<u8>, cas: Option<u64> },
    /// `VA` of a counter read or changed, as a number.
    Number(u64),
    /// `HD`: stored or deleted; with the new CAS token when asked for.
    Done { cas: Option<u64> },
    /// `EN`: a read found nothing.
    Miss,
    /// `NF`: nothing to change.
    NotFound,
    /// `NS`: not stored (an add that found the key, a counter missing).
    NotStored,
    /// `EX`: the CAS token did not match.
    Exists,
}

/// Why no reply was read.
#[derive(Debug)]
pub(crate) enum Failure {
    /// memcached answered this operation with an error line; the stream
    /// may go on, but nothing after it is read.
    Answered(StoreError),
    /// The stream failed or went wrong: nothing more can be read from it.
    Broken(StoreError),
}

/// Reads the reply to one operation of `verb`.
pub(crate) async fn read(connection: &mut Connection, verb: Verb) -> Result<Reply, Failure> {
    let line = match connection.buffered_line() {
        Some(line) => line,
        None => connection.next_line().await,
    }
    .map_err(Failure::Broken)?;
    let header = Header::parse(line, verb)?;
    let (Some(length), &Reply::Value { cas, .. }) = (header.length, &header.reply) else {
        return Ok(header.reply);
    };
    let data = connection
        .next_block(length)
        .await
        .map_err(Failure::Broken)?;
    let number = match verb {
        Verb::ReadCounter | Verb::Arithmetic => counter_digits(data),
        _ => None,
    };
    Ok(match number {
        Some(number) => Reply::Number(number),
        None => Reply::Value {
            data: data.to_vec(),
            cas,
        },
    })
}

/// A reply line, read: what it says (a `VA` with its data still to come),
/// and the length of the data block that follows it, if any.
struct Header {
    reply: Reply,
    length: Option<usize>,
}

impl Header {
    /// The reply `line` says for an operation of `verb`. A read that
    /// found nothing, the most common reply of a window's reads, is known
    /// here without splitting the line (inlined: a call would cost it
    /// more than the check).
    ///
    /// So is a `VA` with a short length and no flags, every counter's
    /// reply (to `ma ... v` and `mg ... v`): reading it word by word
    /// cost some 160 instructions a reply more (`parse_words` 112 and
    /// `decimal` 49, against 27 here; callgrind, the web service's
    /// `MemcachedStore::increment`, `bench/web/run.py`).
    #[inline]
    fn parse(line: &[u8], verb: Verb) -> Result<Self, Failure> {
        if line == b"EN" && !verb.writes() {
            return Ok(Self {
                reply: Reply::Miss,
                length: None,
            });
        }
        if let Some(length) = short_value_length(line, verb) {
            return Ok(Self {
                reply: Reply::Value {
                    data: Vec::new(),
                    cas: None,
                },
                length: Some(length),
            });
        }
        Self::parse_words(line, verb)
    }

    /// [`parse`](Self::parse), word by word.
    fn parse_words(line: &[u8], verb: Verb) -> Result<Self, Failure> {
        let mut words = line.split(|&byte| byte == b' ');
        let code = words.next().unwrap_or_default();
        let answered = |kind, what: &str| {
            Failure::Answered(StoreError::new(
                kind,
                format!(
                    "memcached answered {what}: {}",
                    String::from_utf8_lossy(&line[..line.len().min(200)])
                ),
            ))
        };
        match code {
            b"CLIENT_ERROR" | b"ERROR" => {
                return Err(answered(StoreErrorKind::Rejected, "with a client error"))
            }
            b"SERVER_ERROR" => return Err(answered(StoreErrorKind::Server, "with a server error")),
            _ => {}
        }
        let mut length = None;
        if code == b"VA" {
            length = words
                .next()
                .and_then(|word| usize::try_from(decimal(word)?).ok());
            if length.is_none() {
                return Err(broken(line, "a VA without its length"));
            }
        }
        let cas = words
            .filter_map(|flag| flag.strip_prefix(b"c"))
            .find_map(decimal);
        let reply = match code {
            b"VA" => Reply::Value {
                data: Vec::new(),
                cas,
            },
            b"HD" => Reply::Done { cas },
            b"EN" => Reply::Miss,
            b"NF" => Reply::NotFound,
            b"NS" => Reply::NotStored,
            b"EX" => Reply::Exists,
            _ => return Err(broken(line, "an unknown reply")),
        };
        let expected = match verb {
            Verb::Get | Verb::ReadCounter => matches!(reply, Reply::Value { .. } | Reply::Miss),
            Verb::Version => matches!(reply, Reply::Done { .. } | Reply::Miss),
            Verb::Arithmetic => !matches!(reply, Reply::Done { .. } | Reply::Miss),
            Verb::Set => !matches!(reply, Reply::Value { .. } | Reply::Miss),
            Verb::Delete => matches!(reply, Reply::Done { .. } | Reply::NotFound | Reply::Exists),
        };
        if !expected {
            return Err(broken(
                line,
                &format!("a reply of the wrong kind for {verb:?}"),
            ));
        }
        Ok(Self { reply, length })
    }
}

/// The length of a `VA <length>` line with no flags and at most four
/// digits, if `line` is one and a value answers `verb`; anything else is
/// left to [`Header::parse_words`], which reads the same line the same.
#[inline]
fn short_value_length(line: &[u8], verb: Verb) -> Option<usize> {
    if !matches!(verb, Verb::Get | Verb::ReadCounter | Verb::Arithmetic) {
        return None;
    }
    let digits = line.strip_prefix(b"VA ")?;
    if digits.len() > 4 {
        return None;
    }
    // Four digits or fewer: `decimal`'s digit-by-digit path.
    decimal(digits).map(|length| length as usize)
}

fn broken(line: &[u8], what: &str) -> Failure {
    Failure::Broken(protocol(format!(
        "{what}: {:?}",
        String::from_utf8_lossy(&line[..line.len().min(80)])
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str, verb: Verb) -> Result<(Reply, Option<usize>), String> {
        Header::parse(line.as_bytes(), verb)
            .map(|header| (header.reply, header.length))
            .map_err(|failure| match failure {
                Failure::Answered(error) => format!("answered {:?}", error.kind()),
                Failure::Broken(error) => format!("broken {:?}", error.kind()),
            })
    }

    #[test]
    fn each_reply_is_read_with_its_cas_token() {
        assert_eq!(
            parse("HD c42", Verb::Set),
            Ok((Reply::Done { cas: Some(42) }, None))
        );
        assert_eq!(
            parse("HD", Verb::Delete),
            Ok((Reply::Done { cas: None }, None))
        );
        assert_eq!(parse("EN", Verb::Get), Ok((Reply::Miss, None)));
        assert_eq!(parse("NS", Verb::Set), Ok((Reply::NotStored, None)));
        assert_eq!(parse("EX", Verb::Set), Ok((Reply::Exists, None)));
        assert_eq!(parse("NF", Verb::Arithmetic), Ok((Reply::NotFound, None)));
        let value = Reply::Value {
            data: Vec::new(),
            cas: Some(7),
        };
        assert_eq!(parse("VA 12 c7", Verb::Get), Ok((value, Some(12))));
        assert_eq!(
            parse("HD c7", Verb::Version),
            Ok((Reply::Done { cas: Some(7) }, None))
        );
        assert_eq!(parse("EN", Verb::Version), Ok((Reply::Miss, None)));
    }

    #[test]
    fn a_short_value_is_read_as_word_by_word() {
        for line in [
            "VA 1", "VA 0", "VA 0042", "VA 9999", "VA 12345", "VA 1 c9", "VA 1x",
        ] {
            for verb in [Verb::Get, Verb::ReadCounter, Verb::Arithmetic, Verb::Set] {
                let words = Header::parse_words(line.as_bytes(), verb)
                    .map(|header| (header.reply, header.length))
                    .map_err(|_| ());
                let fast = parse(line, verb).map_err(|_| ());
                assert_eq!(fast, words, "{line:?} for {verb:?}");
            }
        }
        assert_eq!(short_value_length(b"VA 12", Verb::Arithmetic), Some(12));
        assert_eq!(short_value_length(b"VA 12", Verb::Set), None);
        assert_eq!(short_value_length(b"VA ", Verb::Get), None);
        assert_eq!(short_value_length(b"VA 1 c9", Verb::Get), None);
    }

    #[test]
    fn error_lines_are_answers_and_anything_else_breaks_the_stream() {
        assert_eq!(
            parse("CLIENT_ERROR bad data chunk", Verb::Set),
            Err("answered Rejected".to_owned())
        );
        assert_eq!(
            parse("SERVER_ERROR out of memory", Verb::Set),
            Err("answered Server".to_owned())
        );
        assert_eq!(
            parse("ERROR", Verb::Get),
            Err("answered Rejected".to_owned())
        );
        for (line, verb) in [
            ("HD", Verb::Get),
            ("VA 1", Verb::Set),
            ("EN", Verb::Arithmetic),
            ("NS", Verb::Delete),
            ("VA", Verb::Get),
            ("VA 1", Verb::Version),
            ("NF", Verb::Version),
            ("VA x", Verb::Get),
            ("MN", Verb::Get),
            ("", Verb::Get),
        ] {
            assert_eq!(
                parse(line, verb),
                Err("broken Protocol".to_owned()),
                "{line:?} for {verb:?}"
            );
        }
    }
}
