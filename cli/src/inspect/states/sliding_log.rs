//! The sliding log's state, read by the library's own reader of it.

use super::{decoded, stored_as, Decoded, Detail};
use crate::inspect::units::ms_up;
use memcache_ratelimit::algorithm::stored_log_entries;

/// A log of the admitted requests' times: those after `now − period`
/// count.
pub fn sliding_log(raw: Option<&[u8]>, now: i64, period: i128, limit: u64) -> Decoded {
    let parsed = raw.and_then(|bytes| stored_log_entries(bytes, limit));
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
        // 70 s ago (out of the period), 50 s ago, and 1 ns later: the
        // version, the oldest and newest entries, a check, then the
        // distances.
        let mut bytes = vec![3];
        bytes.extend_from_slice(&(NOW - 70 * SECOND).to_le_bytes());
        bytes.extend_from_slice(&(NOW - 50 * SECOND + 1).to_le_bytes());
        bytes.extend_from_slice(&[0; 8]);
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
        let garbage = sliding_log(Some(&[1, 0, 0]), NOW, MINUTE, 3);
        assert_eq!(summary(&garbage).0, "unreadable");
    }
}
