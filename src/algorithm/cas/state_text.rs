//! The numbers of a stored state, written as text without `format!`:
//! a float's shortest decimal that reads back as the same float (Ulf
//! Adams, "Ryū: fast float-to-string conversion", PLDI 2018,
//! <https://dl.acm.org/doi/10.1145/3192366.3192369>, through the `ryu`
//! crate), and integers through `itoa`. `format!("{}", x)` writes the
//! same values through the formatting machinery and a growing `String`:
//! some 1,600 instructions a token-bucket decision, against a few hundred
//! here.
//!
//! Any reader that parses a float (`str::parse::<f64>`) reads both
//! spellings as the same value: `1.0` and `1`, `1e16` and
//! `10000000000000000`.

/// The longest text [`push_f64`] writes (`-2.2250738585072014e-308`).
pub(crate) const LONGEST_F64: usize = 24;
/// The longest text of an `i64` (`-9223372036854775808`).
pub(crate) const LONGEST_I64: usize = 20;

/// Appends the shortest decimal text of `value` that parses back to it.
/// A state's floats are finite; a non-finite one is written as `NaN`,
/// `inf` or `-inf`, which its reader rejects.
pub(crate) fn push_f64(out: &mut Vec<u8>, value: f64) {
    out.extend_from_slice(ryu::Buffer::new().format(value).as_bytes());
}

/// Appends the decimal text of `value`.
pub(crate) fn push_int(out: &mut Vec<u8>, value: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(value).as_bytes());
}

/// The words of a stored state: its bytes trimmed of ASCII whitespace
/// (memcached pads a value it shortened) and split at each space. Read
/// as bytes, with no check of the whole state as UTF-8: each word is
/// checked as it is parsed ([`parse_f64`], [`parse_u64`], [`parse_i64`]).
pub(crate) fn words(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    bytes.trim_ascii().split(|&byte| byte == b' ')
}

/// The [`words`] after `tag`: `None` unless `tag` is the first word.
pub(crate) fn words_after<'a>(
    bytes: &'a [u8],
    tag: &str,
) -> Option<impl Iterator<Item = &'a [u8]>> {
    let mut words = words(bytes);
    (words.next()? == tag.as_bytes()).then_some(words)
}

/// `word` as `str::parse::<f64>` reads it; only its own few bytes are
/// checked as UTF-8.
pub(crate) fn parse_f64(word: &[u8]) -> Option<f64> {
    std::str::from_utf8(word).ok()?.parse().ok()
}

/// `word` as `str::parse::<u64>` reads it (an optional `+`, then one or
/// more ASCII digits, within range), the digits eight at a time
/// ([`decimal`](crate::store::decimal)).
pub(crate) fn parse_u64(word: &[u8]) -> Option<u64> {
    crate::store::decimal(word.strip_prefix(b"+").unwrap_or(word))
}

/// `word` as `str::parse::<i64>` reads it: an optional `-` before what
/// [`parse_u64`] reads, within range.
pub(crate) fn parse_i64(word: &[u8]) -> Option<i64> {
    match word.strip_prefix(b"-") {
        // Down to `i64::MIN`, whose magnitude is one more than `i64::MAX`.
        Some(digits) => 0i64.checked_sub_unsigned(crate::store::decimal(digits)?),
        None => i64::try_from(parse_u64(word)?).ok(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn written(value: f64) -> String {
        let mut out = Vec::new();
        push_f64(&mut out, value);
        String::from_utf8(out).expect("ASCII")
    }

    #[test]
    fn the_longest_texts_fit_their_bounds() {
        for value in [
            f64::MIN,
            -f64::MIN_POSITIVE,
            -5e-324,
            -1.2345678901234567e-300,
        ] {
            assert!(written(value).len() <= LONGEST_F64, "{}", written(value));
        }
        let mut out = Vec::new();
        push_int(&mut out, i64::MIN);
        assert_eq!(out.len(), LONGEST_I64);
    }

    #[test]
    fn floats_read_back_exactly_and_integers_as_display_writes_them() {
        for value in [
            0.0,
            -0.0,
            1.0,
            -1.5,
            0.1,
            1e16,
            1.5e-7,
            f64::MAX,
            f64::MIN_POSITIVE,
        ] {
            let text = written(value);
            assert_eq!(
                text.parse::<f64>().unwrap().to_bits(),
                value.to_bits(),
                "{text}"
            );
        }
        let mut out = Vec::new();
        push_int(&mut out, -1_764_200_000_000_000_000i64);
        out.push(b' ');
        push_int(&mut out, u64::MAX);
        assert_eq!(out, b"-1764200000000000000 18446744073709551615");
    }

    proptest! {
        #[test]
        fn every_finite_float_reads_back_as_itself(bits in any::<u64>()) {
            let value = f64::from_bits(bits);
            prop_assume!(value.is_finite());
            let text = written(value);
            prop_assert_eq!(text.parse::<f64>().unwrap().to_bits(), value.to_bits());
            // The same value `format!` writes, in either spelling.
            prop_assert_eq!(format!("{value}").parse::<f64>().unwrap().to_bits(), value.to_bits());
        }
    }

    #[test]
    fn integers_read_as_str_parse_reads_them() {
        for text in [
            "0",
            "-0",
            "+0",
            "7",
            "-7",
            "+7",
            "00042",
            "-00042",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
            "-9223372036854775809",
            "18446744073709551616",
            "",
            "-",
            "+",
            "--1",
            "+-1",
            " 1",
            "1 ",
            "1.0",
            "1e3",
            "0x10",
            "١",
        ] {
            assert_eq!(
                parse_i64(text.as_bytes()),
                text.parse::<i64>().ok(),
                "{text:?}"
            );
            assert_eq!(
                parse_u64(text.as_bytes()),
                text.parse::<u64>().ok(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn words_are_split_at_spaces_inside_ascii_padding() {
        let split = |bytes: &[u8]| words(bytes).map(<[u8]>::to_vec).collect::<Vec<_>>();
        assert_eq!(split(b"dr1 5 -7  \r\n"), [&b"dr1"[..], b"5", b"-7"]);
        assert_eq!(split(b"a  b"), [&b"a"[..], b"", b"b"]);
        assert_eq!(split(b""), [&b""[..]]);
        assert!(words_after(b"dr1 5", "dr1").is_some_and(|mut rest| rest.next() == Some(&b"5"[..])));
        assert!(words_after(b"dr2 5", "dr1").is_none());
        assert_eq!(parse_f64(b"-1.5"), Some(-1.5));
        assert_eq!(parse_f64(b"\xff"), None);
    }

    proptest! {
        #[test]
        fn any_text_reads_as_str_parse_reads_it(text in "[-+]?[0-9]{0,22}|\\PC{0,24}") {
            prop_assert_eq!(parse_i64(text.as_bytes()), text.parse::<i64>().ok());
            prop_assert_eq!(parse_u64(text.as_bytes()), text.parse::<u64>().ok());
        }

        #[test]
        fn any_i64_reads_back(value in any::<i64>()) {
            let mut out = Vec::new();
            push_int(&mut out, value);
            prop_assert_eq!(parse_i64(&out), Some(value));
        }
    }
}
