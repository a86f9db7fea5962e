use super::core::SlidingLogCore;
use super::log::Log;
use super::VERSION;
use crate::algorithm::cas::core::{Ask, CasCore};

const SECOND: i64 = 1_000_000_000;

/// A header with a check that is not the log's.
fn header(oldest: i64, newest: i64) -> Vec<u8> {
    let mut bytes = vec![VERSION];
    bytes.extend_from_slice(&oldest.to_le_bytes());
    bytes.extend_from_slice(&newest.to_le_bytes());
    bytes.extend_from_slice(&[0x5a; 8]);
    bytes
}

#[test]
fn encoding_is_compact_and_round_trips() {
    let core = SlidingLogCore::new("4/second".parse().unwrap());
    let entries = [-5, 1_800_000_000 * SECOND, 1_800_000_000 * SECOND, i64::MAX];
    let log = Log::from_entries(&entries);
    let bytes = core.encode(&log);
    assert_eq!(core.decode(&bytes), Some(log.clone()));
    assert_eq!(log.to_vec(), entries);
    assert_eq!(core.encode(&Log::from_entries(&[])), vec![VERSION]);
    assert_eq!(core.decode(&[VERSION]), Some(Log::from_entries(&[])));
    // One request of cost 3: the header and two one-byte distances.
    let request = core.encode(&Log::from_entries(&[SECOND; 3]));
    assert_eq!(request.len(), 25 + 2);
    assert_eq!(request[..17], header(SECOND, SECOND)[..17]);
    assert_eq!(request[25..], [0, 0]);
}

#[test]
fn the_stored_check_tells_a_log_written_here_from_a_lookalike() {
    let core = SlidingLogCore::new("10/second".parse().unwrap());
    let log = Log::from_entries(&[SECOND, SECOND + 300, 2 * SECOND]);
    let mut bytes = core.encode(&log);
    assert!(core.decode(&bytes).unwrap().sums_hold());
    // The same entries with a check that is not theirs: read alike,
    // trusted less.
    bytes[17] ^= 1;
    let lookalike = core.decode(&bytes).unwrap();
    assert_eq!(lookalike, log);
    assert!(!lookalike.sums_hold());
    // A clamped log's distances no longer add up to its ends.
    let mut clamped = core.decode(&core.encode(&log)).unwrap();
    assert!(clamped.clamp_to(SECOND + 500));
    assert!(!clamped.sums_hold());
    // Kept whole from index 1: the distance after it, then the new one.
    let from = |log| {
        let mut from = Log::entries(log);
        from.pass(1);
        from
    };
    let kept = log.recorded_from(from(&log), 3 * SECOND, 2);
    assert_eq!(
        kept.to_vec(),
        [SECOND + 300, 2 * SECOND, 3 * SECOND, 3 * SECOND]
    );
    assert!(kept.sums_hold());
    assert_eq!(
        lookalike.recorded_from(from(&lookalike), 3 * SECOND, 2),
        kept
    );
}

#[test]
fn decode_rejects_what_is_not_a_log() {
    let core = SlidingLogCore::new("4/second".parse().unwrap());
    let mut five = core.encode(&Log::from_entries(&[0; 4]));
    five.push(0);
    let backwards = header(10, 9);
    let unfinished = [header(0, 9), vec![0x80]].concat();
    let lone = header(0, 9);
    for bad in [
        &b""[..],
        b"hello",
        b"3.25 1800000000",
        &[VERSION - 1],
        &[VERSION, 1, 2, 3],
        &header(0, 9)[..24],
        &backwards,
        &unfinished,
        &lone,
        &five,
    ] {
        assert_eq!(core.decode(bad), None, "{bad:?}");
    }
}

/// A deterministic xorshift, so the test needs no seed plumbing.
fn pseudo_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Whatever the distances hold, an accepted value is a sorted log within
/// its two ends, any prefix of it reads the same entries, and it decides
/// as the log of the same entries written by this crate does.
#[test]
fn any_accepted_value_is_a_log_that_decides_as_its_entries_do() {
    let core = SlidingLogCore::new("40/10s".parse().unwrap());
    let mut seed = 0x2545_f491_4f6c_dd1d;
    let mut accepted = 0;
    for _ in 0..5_000 {
        let oldest = (pseudo_random(&mut seed) % (20 * SECOND as u64)) as i64;
        let newest = oldest + (pseudo_random(&mut seed) % (20 * SECOND as u64)) as i64;
        let mut bytes = header(oldest, newest);
        for _ in 0..pseudo_random(&mut seed) % 60 {
            // Bytes with the continuation bit more often than not, so that
            // long, overlong and overflowing varints all occur.
            let byte = pseudo_random(&mut seed) as u8;
            bytes.push(if byte.is_multiple_of(4) {
                byte & 0x7f
            } else {
                byte | 0x80
            });
        }
        bytes.push(0x7f & pseudo_random(&mut seed) as u8);
        let Some(log) = core.decode(&bytes) else {
            continue;
        };
        accepted += 1;
        let entries = log.to_vec();
        assert_eq!(entries.len(), log.len());
        assert_eq!(entries.first(), Some(&oldest));
        assert_eq!(entries.last(), Some(&newest));
        assert!(entries.is_sorted(), "{entries:?}");
        for (taken, prefix) in (0..entries.len()).map(|k| (log.entries().take(k), k)) {
            assert!(taken.eq(entries[..prefix].iter().copied()));
        }
        let written = Log::from_entries(&entries);
        for _ in 0..4 {
            let now = (pseudo_random(&mut seed) % (45 * SECOND as u64)) as i64;
            let cost = 1 + pseudo_random(&mut seed) % 5;
            let strict = pseudo_random(&mut seed).is_multiple_of(2);
            let ask = Ask {
                strict,
                ..Ask::at(cost, now)
            };
            let (read, canonical) = (
                core.decide(Some(&log), ask),
                core.decide(Some(&written), ask),
            );
            assert_eq!(read.decision, canonical.decision, "{entries:?} {ask:?}");
            assert_eq!(
                read.write.map(|(log, _)| log.to_vec()),
                canonical.write.map(|(log, _)| log.to_vec())
            );
        }
    }
    assert!(accepted > 1_000, "{accepted} accepted");
}

#[test]
fn clamping_lowers_every_entry_past_the_horizon() {
    let mut log = Log::from_entries(&[0, 5, 10, 20]);
    assert!(!log.clone().clamp_to(20));
    assert!(log.clamp_to(8));
    assert_eq!(log.to_vec(), [0, 5, 8, 8]);
    let mut ahead = Log::from_entries(&[10, 20]);
    assert!(ahead.clamp_to(5));
    assert_eq!(ahead.to_vec(), [5, 5]);
    let mut lone = Log::from_entries(&[10]);
    assert!(lone.clamp_to(5));
    assert_eq!(lone.to_vec(), [5]);
    assert!(!Log::from_entries(&[]).clamp_to(i64::MIN));
}

proptest::proptest! {
    /// A write that keeps a tail of a stored log, by copying its
    /// distances, holds exactly the entries a rewrite from them would, and
    /// stores a log whose own check passes again.
    #[test]
    fn keeping_a_tail_of_the_stored_bytes_is_rewriting_it(
        start in -(1i64 << 62)..(1i64 << 62),
        gaps in proptest::collection::vec(
            proptest::prop_oneof![proptest::strategy::Just(0u64), 0..1u64 << 20, 0..1u64 << 40],
            0..40,
        ),
        first in 0usize..45,
        later in 0u64..1 << 30,
        times in 1usize..5,
    ) {
        let core = SlidingLogCore::new("100/minute".parse().unwrap());
        let mut entries = vec![start];
        for gap in gaps {
            let next = entries.last().unwrap().saturating_add_unsigned(gap);
            entries.push(next);
        }
        let at = entries.last().unwrap().saturating_add_unsigned(later);
        let stored = core.decode(&core.encode(&Log::from_entries(&entries))).unwrap();
        proptest::prop_assert!(stored.sums_hold());
        let mut from = stored.entries();
        from.pass(first);
        let kept = stored.recorded_from(from, at, times);
        let mut expected = entries[first.min(entries.len())..].to_vec();
        expected.extend(std::iter::repeat_n(at, times));
        proptest::prop_assert_eq!(kept.to_vec(), expected.clone());
        proptest::prop_assert_eq!(&kept, &Log::from_entries(&expected));
        let again = core.decode(&core.encode(&kept)).unwrap();
        proptest::prop_assert!(again.sums_hold());
        proptest::prop_assert_eq!(again.to_vec(), expected);
    }
}
