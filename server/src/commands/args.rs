//! Reading a command's arguments: integers as Redis reads them, option
//! names without regard to case.

/// `bytes` as a signed 64-bit decimal integer: an optional `-` or `+`, then
/// digits only, with no spaces; `None` for anything else, including a
/// value out of range.
pub fn integer(bytes: &[u8]) -> Option<i64> {
    let (negative, digits) = match bytes.split_first()? {
        (b'-', digits) => (true, digits),
        (b'+', digits) => (false, digits),
        _ => (false, bytes),
    };
    if digits.is_empty() {
        return None;
    }
    // Accumulated negatively, so that i64::MIN, whose magnitude has no
    // positive i64, reads too.
    let mut value: i64 = 0;
    for &byte in digits {
        let digit = byte.wrapping_sub(b'0');
        if digit > 9 {
            return None;
        }
        value = value.checked_mul(10)?.checked_sub(i64::from(digit))?;
    }
    if negative {
        Some(value)
    } else {
        value.checked_neg()
    }
}

/// Whether `bytes` is the option `name`, in any case.
pub fn is(bytes: &[u8], name: &str) -> bool {
    bytes.eq_ignore_ascii_case(name.as_bytes())
}

/// `bytes` as text for an error message: lossy, and cut at 128 bytes so
/// that a huge argument makes a short error.
pub fn shown(bytes: &[u8]) -> String {
    let cut = &bytes[..bytes.len().min(128)];
    String::from_utf8_lossy(cut).into_owned()
}

/// `text` split at spaces into arguments, as a test writes a command.
#[cfg(test)]
pub fn words(text: &str) -> Vec<bytes::Bytes> {
    text.split(' ')
        .map(|word| bytes::Bytes::copy_from_slice(word.as_bytes()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_read_strictly() {
        assert_eq!(integer(b"0"), Some(0));
        assert_eq!(integer(b"-12"), Some(-12));
        assert_eq!(integer(b"+7"), Some(7));
        assert_eq!(integer(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(integer(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"+",
            b" 1",
            b"1 ",
            b"1.0",
            b"1e3",
            b"0x10",
            b"9223372036854775808",
            b"--1",
            b"\xff",
        ] {
            assert_eq!(integer(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn integers_read_as_the_standard_parser_reads_signs_and_digits() {
        let reference = |bytes: &[u8]| -> Option<i64> {
            let text = std::str::from_utf8(bytes).ok()?;
            let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            text.parse().ok()
        };
        let alphabet = b"-+0189 x";
        let mut cases: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..4 {
            let longer: Vec<Vec<u8>> = cases
                .iter()
                .flat_map(|case| {
                    alphabet.iter().map(move |&byte| {
                        let mut longer = case.clone();
                        longer.push(byte);
                        longer
                    })
                })
                .collect();
            cases.extend(longer);
        }
        for edge in [
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775808",
        ] {
            for prefix in ["", "-", "+", "0", "-0"] {
                cases.push(format!("{prefix}{edge}").into_bytes());
            }
        }
        for case in &cases {
            assert_eq!(
                integer(case),
                reference(case),
                "{:?}",
                String::from_utf8_lossy(case)
            );
        }
    }

    #[test]
    fn options_ignore_case_and_errors_stay_short() {
        assert!(is(b"TaKe", "take"));
        assert!(!is(b"takes", "take"));
        assert_eq!(shown(&[b'a'; 1000]).len(), 128);
        assert_eq!(shown(b"\xffx"), "\u{fffd}x");
    }
}
