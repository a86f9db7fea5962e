//! Unsigned decimal numbers as memcached and the stored states write
//! them, read eight digits at a time: every counter and every state a
//! decision reads back is digits, and a state's timestamps run to
//! twenty or more of them.
//!
//! Eight ASCII digits are checked and read as one word, as Daniel Lemire
//! explains in "SWAR explained: parsing eight digits" (2022),
//! <https://lemire.me/blog/2022/01/21/swar-explained-parsing-eight-digits/>;
//! the check is simdjson's `is_made_of_eight_digits_fast` (Geoff Langdale
//! and Daniel Lemire, <https://github.com/simdjson/simdjson>).

/// `digits` as a number: one or more ASCII decimal digits and nothing
/// else, at most `u64::MAX`. Past any leading zeros, up to 19 digits
/// cannot overflow, so they are read with no overflow check; only a 20th
/// is multiplied in with one.
///
/// Fewer than eight digits (every counter below ten million) are read
/// one by one at once, with no word to fill: the words' way took some 94
/// instructions a six-digit counter, this some 61 (callgrind, the web
/// service's `MemcachedStore::increment`).
pub(crate) fn decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    if digits.len() < 8 {
        return digits.iter().try_fold(0, |value: u64, &byte| {
            let digit = byte.wrapping_sub(b'0');
            (digit <= 9).then(|| value * 10 + u64::from(digit))
        });
    }
    let zeros = digits.iter().take_while(|&&byte| byte == b'0').count();
    let significant = &digits[zeros..];
    if significant.len() > 20 {
        return None;
    }
    let (head, last) = significant.split_at(significant.len().min(19));
    let mut words = head.chunks_exact(8);
    let mut value = 0u64;
    let mut all_digits = true;
    for word in words.by_ref() {
        let word = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        all_digits &= eight_digits(word);
        value = value
            .wrapping_mul(100_000_000)
            .wrapping_add(eight_value(word));
    }
    for &byte in words.remainder() {
        let digit = byte.wrapping_sub(b'0');
        value = value.wrapping_mul(10).wrapping_add(u64::from(digit));
        all_digits &= digit <= 9;
    }
    if !all_digits {
        return None;
    }
    match *last {
        [] => Some(value),
        [byte] => {
            let digit = byte.wrapping_sub(b'0');
            (digit <= 9).then_some(())?;
            value.checked_mul(10)?.checked_add(u64::from(digit))
        }
        _ => None,
    }
}

/// Whether all eight bytes of `word` (the first in the lowest byte) are
/// ASCII digits: each high nibble is 3, and adding 6 to each byte leaves
/// it 3 too (no low nibble above 9).
fn eight_digits(word: u64) -> bool {
    const HIGH_NIBBLES: u64 = 0xF0F0_F0F0_F0F0_F0F0;
    let sixes = word.wrapping_add(0x0606_0606_0606_0606);
    ((word & HIGH_NIBBLES) | ((sixes & HIGH_NIBBLES) >> 4)) == 0x3333_3333_3333_3333
}

/// The value of eight ASCII digits in `word`, the first (most
/// significant) in the lowest byte: pairs, then fours, then the eight
/// combined by multiplications.
fn eight_value(word: u64) -> u64 {
    const MASK: u64 = 0x0000_00FF_0000_00FF;
    const MUL1: u64 = 100 + (1_000_000 << 32);
    const MUL2: u64 = 1 + (10_000 << 32);
    let digits = word.wrapping_sub(0x3030_3030_3030_3030);
    let pairs = digits.wrapping_mul(10).wrapping_add(digits >> 8);
    let low = (pairs & MASK).wrapping_mul(MUL1);
    let high = ((pairs >> 16) & MASK).wrapping_mul(MUL2);
    (low.wrapping_add(high) >> 32) & 0xFFFF_FFFF
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_at_every_place_of_a_word_is_judged_as_one_at_a_time() {
        for at in 0..8 {
            for byte in 0..=u8::MAX {
                let mut digits = *b"31415926";
                digits[at] = byte;
                let word = u64::from_le_bytes(digits);
                assert_eq!(eight_digits(word), byte.is_ascii_digit(), "{digits:?}");
                if byte.is_ascii_digit() {
                    let text = std::str::from_utf8(&digits).unwrap();
                    assert_eq!(eight_value(word), text.parse::<u64>().unwrap());
                }
            }
        }
        for n in [0, 1, 9, 10, 12_345_678, 99_999_999] {
            let word = u64::from_le_bytes(format!("{n:08}").as_bytes().try_into().unwrap());
            assert_eq!(eight_value(word), n);
        }
    }

    proptest::proptest! {
        /// `decimal` reads what `str::parse::<u64>` reads of digits alone:
        /// any number, with leading zeros or not, and nothing past
        /// `u64::MAX` or that is not all digits.
        #[test]
        fn decimal_reads_digits_as_str_parse_does(
            number: u64,
            zeros in 0usize..25,
            noise in "[0-9]{0,22}|[0-9 a+-]{0,22}",
        ) {
            let written = format!("{}{number}", "0".repeat(zeros));
            proptest::prop_assert_eq!(decimal(written.as_bytes()), Some(number));
            let expected = noise
                .parse::<u64>()
                .ok()
                .filter(|_| noise.bytes().all(|byte| byte.is_ascii_digit()));
            proptest::prop_assert_eq!(decimal(noise.as_bytes()), expected, "{:?}", noise);
        }

        /// Any bytes at all, not only digits and a few others.
        #[test]
        fn any_bytes_are_read_as_str_parse_reads_them(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24),
        ) {
            let expected = std::str::from_utf8(&bytes)
                .ok()
                .filter(|text| text.bytes().all(|byte| byte.is_ascii_digit()))
                .and_then(|text| text.parse::<u64>().ok());
            proptest::prop_assert_eq!(decimal(&bytes), expected);
        }
    }
}
