use std::time::Duration;

use super::core::*;
use crate::algorithm::cas::core::{Ask, CasCore};

#[test]
fn emission_interval_is_exact_for_awkward_rates() {
    // 3 per second: T = 333,333,333.3 ns. Three requests at every whole
    // second fit exactly for 1,000 s; a rounded T would drift by a
    // nanosecond a second and start denying.
    let core = GcraCore::new(3, "3/second".parse().unwrap());
    let mut tat = None;
    for second in 0..1_000i64 {
        let step = core.decide(tat.as_ref(), Ask::at(3, second * 1_000_000_000));
        assert!(step.decision.is_allowed(), "at {second} s");
        assert_eq!(step.decision.remaining(), 0);
        tat = Some(step.write.unwrap().0);
    }
    let fourth = core.decide(tat.as_ref(), Ask::at(1, 999_000_000_000));
    assert!(fourth.decision.is_denied());
    assert_eq!(
        fourth.decision.retry_after(),
        Some(Duration::from_nanos(333_333_334))
    );
}

#[test]
fn delay_mode_queues_within_the_maximum_and_rejects_beyond() {
    let core = GcraCore::new(1, "10/second".parse().unwrap());
    let first = core.decide(None, Ask::at(1, 0));
    let tat = first.write.unwrap().0;
    let queued = core.decide(
        Some(&tat),
        Ask {
            max_delay: Duration::from_millis(100),
            ..Ask::at(1, 0)
        },
    );
    assert!(queued.decision.is_allowed());
    assert_eq!(queued.delay, Duration::from_millis(100));
    let too_far = core.decide(
        Some(&queued.write.unwrap().0),
        Ask {
            max_delay: Duration::from_millis(100),
            ..Ask::at(1, 0)
        },
    );
    assert!(too_far.decision.is_denied());
    assert!(too_far.write.is_none(), "a rejection reserves nothing");
}

#[test]
fn a_refund_moves_the_tat_back_exactly() {
    // T = 333,333,333⅓ ns: exact only in the scaled units.
    let core = GcraCore::new(3, "3/second".parse().unwrap());
    let first = core.decide(None, Ask::at(1, 0)).write.unwrap().0;
    let taken = core.decide(Some(&first), Ask::at(2, 0)).write.unwrap().0;
    let step = core.refund(Some(&taken), Ask::refund_at(2, 0));
    assert!(step.decision.is_allowed());
    assert_eq!(step.delay, Duration::ZERO);
    assert_eq!(step.decision.remaining(), 2);
    assert_eq!(
        step.decision.reset_after(),
        Duration::from_nanos(333_333_334)
    );
    assert_eq!(step.write.unwrap().0, first);
    // All of it: back to a full bucket at `now`, not before.
    assert_eq!(
        core.refund(Some(&taken), Ask::refund_at(3, 0))
            .write
            .unwrap()
            .0,
        0
    );
}

#[test]
fn a_refund_never_moves_the_tat_before_now() {
    let core = GcraCore::new(3, "3/second".parse().unwrap());
    assert!(core.refund(None, Ask::refund_at(1, 0)).write.is_none());
    // A TAT in the past is a full bucket: it stays as it is.
    let full = core.refund(Some(&-5), Ask::refund_at(2, 0));
    assert!(full.write.is_none());
    assert_eq!(full.decision.remaining(), 3);
    assert_eq!(full.decision.reset_after(), Duration::ZERO);
    // One interval booked, two given back: full at `now`.
    let one = core.decide(None, Ask::at(1, 7)).write.unwrap().0;
    let step = core.refund(Some(&one), Ask::refund_at(2, 7));
    assert_eq!(step.write.unwrap().0, 7 * 3);
    assert_eq!(step.decision.remaining(), 3);
}

#[test]
fn a_refund_gives_back_no_more_than_was_taken() {
    let core = GcraCore::new(3, "3/second".parse().unwrap());
    let mut tat = None;
    let mut run = |ask: Ask| {
        let step = core.apply(tat.as_ref(), ask);
        if let Some((next, _)) = step.write {
            tat = Some(next);
        }
        step.decision
    };
    assert!(run(Ask::at(3, 0)).is_allowed());
    assert_eq!(run(Ask::refund_at(1, 0)).remaining(), 1);
    assert!(run(Ask::at(1, 0)).is_allowed());
    assert!(run(Ask::at(1, 0)).is_denied());
}

proptest::proptest! {
    /// The stored TAT reads as `str::parse` reads it, for every `i128`
    /// and for text around it: padded, signed, too long, or not digits.
    #[test]
    fn a_tat_parses_as_str_parse_reads_it(
        tat: i128,
        pad in "[ \r\n\t]{0,3}",
        noise in "[-+0-9 a]{0,45}",
    ) {
        let written = format!("{tat}{pad}");
        proptest::prop_assert_eq!(parse_tat(written.as_bytes()), Some(tat));
        let expected = noise
            .trim()
            .parse::<i128>()
            .ok()
            .filter(|_| !noise.trim().starts_with('+'));
        proptest::prop_assert_eq!(parse_tat(noise.as_bytes()), expected, "{:?}", noise);
    }
}

#[test]
fn a_tat_at_the_edges_of_i128() {
    for tat in [i128::MAX, i128::MIN + 1, 0, -1] {
        assert_eq!(parse_tat(tat.to_string().as_bytes()), Some(tat));
    }
    // i128::MIN's digits are one past i128::MAX: not a TAT any writer
    // could store, so not read as one either.
    assert_eq!(parse_tat(i128::MIN.to_string().as_bytes()), None);
    assert_eq!(parse_tat(b"170141183460469231731687303715884105728"), None);
    assert_eq!(parse_tat(b""), None);
    assert_eq!(parse_tat(b"-"), None);
    assert_eq!(parse_tat(b"1 2"), None);
    assert_eq!(parse_tat(&[0xff; 36]), None);
}

/// The plain products the arithmetic uses in place of saturating ones
/// are exact at their extremes: any clock time with the largest limit a
/// `Quota` holds, any cost with the longest period, and any wait, which
/// is clamped to one period before it is scaled.
#[test]
fn scaled_products_are_exact_at_their_extremes() {
    use crate::quota::MAX_PERIOD;
    use std::num::NonZeroU64;
    let widest = crate::Quota::with_period(NonZeroU64::MAX, MAX_PERIOD).unwrap();
    let core = GcraCore::new(u64::MAX, widest);
    let limit = i128::from(u64::MAX);
    let interval = MAX_PERIOD.as_nanos() as i128;
    for now in [i64::MIN, -1, 0, 1, i64::MAX] {
        let step = core.decide(None, Ask::at(u64::MAX, now));
        // A first request of the largest cost against the largest burst
        // lands at `now + cost` (saturating, as the TAT's sums do), each
        // product exact.
        let scaled_now = i128::from(now).checked_mul(limit).unwrap();
        let cost = i128::from(u64::MAX).checked_mul(interval).unwrap();
        let expected = scaled_now.saturating_add(cost);
        assert_eq!(step.write.map(|(tat, _)| tat), Some(expected), "at {now}");
    }
    let queued = core.decide(
        None,
        Ask {
            max_delay: Duration::MAX,
            ..Ask::at(1, 0)
        },
    );
    assert!(queued.decision.is_allowed());
}
