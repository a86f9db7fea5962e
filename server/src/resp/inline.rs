//! Inline commands: one line of words, as typed into `telnet` or `nc`.

use bytes::{Bytes, BytesMut};

use super::parse::{Limits, ProtocolError, ProtocolErrorKind, Step};

/// The inline request at the front of `buf` (which does not start with `*`):
/// Redis's `processInlineBuffer`. The line ends at LF, with an optional CR
/// before it; it may hold at most `max_inline` bytes before its LF.
pub(crate) fn inline(buf: &mut BytesMut, limits: &Limits) -> Result<Step, ProtocolError> {
    let window = &buf[..buf.len().min(limits.max_inline.saturating_add(1))];
    let Some(lf) = window.iter().position(|&b| b == b'\n') else {
        return if buf.len() > limits.max_inline {
            Err(ProtocolErrorKind::TooBigInlineRequest.into())
        } else {
            Ok(Step::Incomplete)
        };
    };
    let end = match lf.checked_sub(1) {
        Some(cr) if window.get(cr) == Some(&b'\r') => cr,
        _ => lf,
    };
    let line = buf.split_to(lf + 1).freeze();
    let args = split_args(&line, end, limits.max_args)?;
    Ok(if args.is_empty() {
        Step::Empty
    } else {
        Step::Command(args)
    })
}

/// C's `isspace` in the "C" locale.
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn hex_value(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// One word being collected: a slice of the line while its bytes are
/// contiguous and unescaped, else an owned copy.
struct Word {
    start: usize,
    end: usize,
    owned: Option<Vec<u8>>,
}

impl Word {
    /// Takes the line's byte at `p` as it is.
    fn literal(&mut self, line: &[u8], p: usize) {
        match self.owned {
            None if self.start == self.end => (self.start, self.end) = (p, p + 1),
            None if self.end == p => self.end += 1,
            _ => {
                if let Some(&b) = line.get(p) {
                    self.byte(line, b);
                }
            }
        }
    }

    /// Appends `b`, which is not the line's next byte.
    fn byte(&mut self, line: &[u8], b: u8) {
        self.owned
            .get_or_insert_with(|| line.get(self.start..self.end).unwrap_or_default().to_vec())
            .push(b);
    }

    fn finish(self, line: &Bytes) -> Bytes {
        match self.owned {
            Some(owned) => Bytes::from(owned),
            None => line.slice(self.start..self.end),
        }
    }
}

/// Redis's `sdssplitargs` over `line[..end]`, word for word: blanks separate
/// words; a word may mix plain bytes and quoted parts (`a"b c"` is `ab c`);
/// a closing quote must be followed by a blank or the end of the line. Like
/// the C code, which sees a NUL-terminated copy, a NUL byte ends the line.
pub(crate) fn split_args(
    line: &Bytes,
    end: usize,
    max_args: usize,
) -> Result<Vec<Bytes>, ProtocolError> {
    use ProtocolErrorKind::{TooBigInlineRequest, UnbalancedQuotes};
    let text = line.get(..end).unwrap_or_default();
    // `at(i)` is C's `p[i]`, with the terminating NUL past the end.
    let at = |i: usize| text.get(i).copied().unwrap_or(0);
    let mut args = Vec::new();
    let mut p = 0;
    loop {
        while at(p) != 0 && is_space(at(p)) {
            p += 1;
        }
        if at(p) == 0 {
            return Ok(args);
        }
        if args.len() >= max_args {
            return Err(TooBigInlineRequest.into());
        }
        let mut word = Word {
            start: p,
            end: p,
            owned: None,
        };
        let (mut in_double, mut in_single, mut done) = (false, false, false);
        while !done {
            let c = at(p);
            if in_double {
                let hex = hex_value(at(p + 2)).zip(hex_value(at(p + 3)));
                match (c, at(p + 1), hex) {
                    (b'\\', b'x', Some((hi, lo))) => {
                        word.byte(text, hi * 16 + lo);
                        p += 3;
                    }
                    (b'\\', next, _) if next != 0 => {
                        p += 1;
                        let unescaped = match next {
                            b'n' => b'\n',
                            b'r' => b'\r',
                            b't' => b'\t',
                            b'b' => 0x08,
                            b'a' => 0x07,
                            other => other,
                        };
                        word.byte(text, unescaped);
                    }
                    (b'"', next, _) => {
                        if next != 0 && !is_space(next) {
                            return Err(UnbalancedQuotes.into());
                        }
                        done = true;
                    }
                    (0, _, _) => return Err(UnbalancedQuotes.into()),
                    _ => word.literal(text, p),
                }
            } else if in_single {
                match (c, at(p + 1)) {
                    (b'\\', b'\'') => {
                        p += 1;
                        word.byte(text, b'\'');
                    }
                    (b'\'', next) => {
                        if next != 0 && !is_space(next) {
                            return Err(UnbalancedQuotes.into());
                        }
                        done = true;
                    }
                    (0, _) => return Err(UnbalancedQuotes.into()),
                    _ => word.literal(text, p),
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => done = true,
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    _ => word.literal(text, p),
                }
            }
            if at(p) != 0 {
                p += 1;
            }
        }
        args.push(word.finish(line));
    }
}
