//! Which bytes a key may hold, tested eight at a time: every decision
//! checks its client id and its keys, and ids and keys are a few dozen
//! bytes, too short for the compiler's vectorized loops to pay off.
//!
//! Each word of eight bytes is tested with the byte-wise tricks of Sean
//! Eron Anderson, "Bit Twiddling Hacks" ("Determine if a word has a byte
//! less than n", "... greater than n", "... equal to n"),
//! <https://graphics.stanford.edu/~seander/bithacks.html>. A lane's own
//! flag may be wrong once a lower lane borrows, but only after a lower
//! lane was already flagged, so whether any lane is flagged is exact.

/// `0x01` in every byte.
const ONES: u64 = u64::from_ne_bytes([1; 8]);
/// The top bit of every byte.
const HIGH: u64 = ONES * 0x80;

/// The lowest byte a key may hold (`!`), and the highest (`~`).
const LOWEST: u8 = 0x21;
const HIGHEST: u8 = 0x7e;

/// Whether every byte of `bytes` is printable ASCII other than space
/// (`0x21..=0x7e`), and none is `except`.
#[inline]
pub(super) fn all_printable_except(bytes: &[u8], except: Option<u8>) -> bool {
    if bytes.len() < 8 {
        return bytes
            .iter()
            .all(|&b| (LOWEST..=HIGHEST).contains(&b) && Some(b) != except);
    }
    let mut flagged = 0;
    let mut at = 0;
    while at + 8 <= bytes.len() {
        flagged |= outside(word_at(bytes, at), except);
        at += 8;
    }
    // The last eight bytes, which overlap the words already tested when
    // the length is not a multiple of eight: no copy of a short tail.
    flagged |= outside(word_at(bytes, bytes.len() - 8), except);
    flagged == 0
}

/// The eight bytes of `bytes` from `at`.
fn word_at(bytes: &[u8], at: usize) -> u64 {
    let word: [u8; 8] = bytes[at..at + 8].try_into().expect("eight bytes");
    u64::from_le_bytes(word)
}

/// Non-zero if some byte of `x` is below [`LOWEST`], above [`HIGHEST`]
/// (the top bit set included), or `except`.
fn outside(x: u64, except: Option<u8>) -> u64 {
    let below = x.wrapping_sub(ONES * u64::from(LOWEST)) & !x & HIGH;
    let above = (x.wrapping_add(ONES * u64::from(127 - HIGHEST)) | x) & HIGH;
    let equal = match except {
        Some(byte) => {
            let zeroed = x ^ (ONES * u64::from(byte));
            zeroed.wrapping_sub(ONES) & !zeroed & HIGH
        }
        None => 0,
    };
    below | above | equal
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bytewise(bytes: &[u8], except: Option<u8>) -> bool {
        bytes
            .iter()
            .all(|&b| (LOWEST..=HIGHEST).contains(&b) && Some(b) != except)
    }

    #[test]
    fn every_byte_at_every_place_is_judged_as_one_at_a_time() {
        for except in [None, Some(b'#'), Some(LOWEST + 1)] {
            for len in 1..=17 {
                for at in 0..len {
                    for byte in 0..=u8::MAX {
                        let mut bytes = vec![b'k'; len];
                        bytes[at] = byte;
                        assert_eq!(
                            all_printable_except(&bytes, except),
                            bytewise(&bytes, except),
                            "{bytes:?} except {except:?}"
                        );
                    }
                }
            }
        }
        assert!(all_printable_except(b"", None));
    }

    proptest! {
        #[test]
        fn any_bytes_are_judged_as_one_at_a_time(
            bytes in proptest::collection::vec(any::<u8>(), 0..300),
            except in proptest::option::of(any::<u8>()),
        ) {
            prop_assert_eq!(all_printable_except(&bytes, except), bytewise(&bytes, except));
        }

        #[test]
        fn printable_bytes_pass_unless_excepted(
            bytes in proptest::collection::vec(LOWEST..=HIGHEST, 0..300),
        ) {
            prop_assert!(all_printable_except(&bytes, None));
            prop_assert_eq!(all_printable_except(&bytes, Some(b'#')), !bytes.contains(&b'#'));
        }
    }
}
