//! The sliding log's state: a version byte, the oldest time (a
//! little-endian `i64`, unix nanoseconds), then each later entry's gap
//! from the one before as a LEB128 varint.

use super::{decoded, stored_as, Decoded, Detail};
use crate::inspect::units::ms_up;

/// The only version of the format.
const VERSION: u8 = 1;

/// The log's entries (unix nanoseconds), or `None` if `bytes` is not a log
/// of at most `limit` entries.
fn decode_log(bytes: &[u8], limit: u64) -> Option<Vec<i64>> {
    let (&version, rest) = bytes.split_first()?;
    if version != VERSION {
        return None;
    }
    if rest.is_empty() {
        return Some(Vec::new());
    }
    let (first, mut rest) = rest.split_first_chunk::<8>()?;
    let mut previous = i64::from_le_bytes(*first);
    let mut entries = vec![previous];
    while !rest.is_empty() {
        previous = previous.checked_add_unsigned(varint(&mut rest)?)?;
        entries.push(previous);
        if entries.len() as u64 > limit {
            return None;
        }
    }
    Some(entries)
}

/// Takes one LEB128 varint off the front of `bytes`; `None` if it is cut
/// short or holds more than 64 bits.
fn varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut value: u64 = 0;
    for shift in (0..64).step_by(7) {
        let (&byte, tail) = bytes.split_first()?;
        *bytes = tail;
        if shift == 63 && byte > 1 {
            return None;
        }
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// A log of the admitted requests' times: those after `now − period`
/// count.
pub fn sliding_log(raw: Option<&[u8]>, now: i64, period: i128, limit: u64) -> Decoded {
    let parsed = raw.and_then(|bytes| decode_log(bytes, limit));
    let after = i128::from(now) - period;
    let inside: Vec<i64> = parsed
        .iter()
        .flatten()
        .copied()
        .filter(|&entry| i128::from(entry) > after)
        .collect();
    let leaves = |entry: i64| ms_up((i128::from(entry) + period - i128::from(now)).max(0) as u128);
    let in_window = inside.len() as u64;
    let entries = parsed.as_deref();
    let unix_ms = |entry: Option<&i64>| entry.map(|entry| entry.div_euclid(1_000_000));
    let detail = Detail::SlidingLog {
        stored_entries: entries.map(|entries| entries.len() as u64),
        oldest_unix_ms: unix_ms(entries.and_then(<[i64]>::first)),
        newest_unix_ms: unix_ms(entries.and_then(<[i64]>::last)),
        in_window,
        next_refill_ms: inside.first().map(|&entry| leaves(entry)),
        full_in_ms: inside.last().map_or(0, |&entry| leaves(entry)),
    };
    decoded(
        stored_as(raw, &parsed),
        detail,
        limit.saturating_sub(in_window),
    )
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{summary, MINUTE, NOW, SECOND};
    use super::*;

    #[test]
    fn a_sliding_log_counts_the_entries_in_the_period() {
        // 70 s ago (out of the period), 50 s ago, and 1 ns later.
        let mut bytes = vec![VERSION];
        bytes.extend_from_slice(&(NOW - 70 * SECOND).to_le_bytes());
        // 20 s: 20_000_000_000 ns, in LEB128.
        bytes.extend_from_slice(&[0x80, 0x90, 0xdf, 0xc0, 0x4a]);
        bytes.push(1);
        let decoded = sliding_log(Some(&bytes), NOW, MINUTE, 3);
        assert_eq!(summary(&decoded), ("decoded", 1, 10_000, Some(10_000)));
        let Detail::SlidingLog {
            stored_entries,
            in_window,
            ..
        } = decoded.0.detail
        else {
            panic!("{decoded:?}")
        };
        assert_eq!((stored_entries, in_window), (Some(3), 2));
        assert_eq!(decode_log(&[2], 3), None);
        assert_eq!(decode_log(&[1, 0, 0], 3), None);
    }

    #[test]
    fn a_varint_holds_at_most_64_bits() {
        let max = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(varint(&mut &max[..]), Some(u64::MAX));
        let over = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(varint(&mut &over[..]), None);
        assert_eq!(varint(&mut &[0x80][..]), None);
    }
}
