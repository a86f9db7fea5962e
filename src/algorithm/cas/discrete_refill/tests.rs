//! The core's rules, one at a time; Smyte's own vectors are in
//! `smyte_tests`.

use std::time::Duration;

use super::core::*;
use super::discrete_refill;
use super::rules::Bucket;
use crate::algorithm::cas::core::{Ask, CasCore};

pub(super) const MS: i64 = 1_000_000;
pub(super) const SECOND: i64 = 1_000 * MS;

/// `max` per `period`, refilling `refill` at a time.
pub(super) fn core(quota: &str, refill: u64, restart: bool) -> DiscreteRefillCore {
    discrete_refill(Some(refill), restart, quota.parse().unwrap()).unwrap()
}

/// A request that writes what it takes even when denied: Smyte's REDUCE.
pub(super) fn reduce(cost: u64, now: i64) -> Ask {
    Ask {
        strict: true,
        ..Ask::at(cost, now)
    }
}

/// Smyte's GET: what is available, read and never written. A lenient
/// request above `max` is denied with `remaining` the tokens available.
pub(super) fn get(core: &DiscreteRefillCore, state: Option<&Bucket>, now: i64) -> u64 {
    let step = core.decide(state, Ask::at(core.rules.max + 1, now));
    assert!(step.decision.is_denied() && step.write.is_none());
    step.decision.remaining()
}

/// Runs Smyte's REDUCE on `state`; returns its reply, the tokens available
/// before the reduction.
pub(super) fn run(core: &DiscreteRefillCore, state: &mut Option<Bucket>, ask: Ask) -> u64 {
    let step = core.decide(state.as_ref(), ask);
    if let Some((next, _)) = step.write {
        *state = Some(next);
    }
    let decision = step.decision;
    decision.remaining() + if decision.is_allowed() { ask.cost } else { 0 }
}

#[test]
fn the_default_refill_is_a_window_of_the_client_s_own() {
    let core = discrete_refill(None, false, "3/1m".parse().unwrap()).unwrap();
    assert_eq!(core.suffix(), self::core("3/1m", 3, true).suffix());
    let mut state = None;
    for _ in 0..3 {
        assert!(run(&core, &mut state, Ask::at(1, 7 * SECOND)) > 0);
    }
    let denied = core.decide(state.as_ref(), Ask::at(1, 66 * SECOND));
    assert_eq!(denied.decision.retry_after(), Some(Duration::from_secs(1)));
    assert_eq!(denied.decision.reset_after(), Duration::from_secs(1));
    let back = core.decide(state.as_ref(), Ask::at(3, 67 * SECOND));
    assert!(back.decision.is_allowed());
}

#[test]
fn denials_report_what_was_available_and_when_it_fits() {
    let core = core("10/5s", 3, false);
    let state = Some(Bucket { tokens: 2, mark: 0 });
    // Lenient: nothing written; 2 more tokens need one refill at 5 s.
    let lenient = core.decide(state.as_ref(), Ask::at(4, SECOND));
    assert!(lenient.write.is_none());
    let d = lenient.decision;
    assert_eq!((d.remaining(), d.used()), (2, 8.0));
    assert_eq!(d.retry_after(), Some(Duration::from_secs(4)));
    // 8 missing: three refills, full at 15 s.
    assert_eq!(d.reset_after(), Duration::from_secs(14));
    // Strict: drained; 4 tokens need two refills.
    let strict = core.decide(state.as_ref(), reduce(4, SECOND));
    let d = strict.decision;
    assert_eq!(
        strict.write,
        Some((Bucket { tokens: 0, mark: 0 }, d.reset_after()))
    );
    assert_eq!((d.remaining(), d.used()), (2, 10.0));
    assert_eq!(d.retry_after(), Some(Duration::from_secs(9)));
    assert_eq!(d.reset_after(), Duration::from_secs(19));
    // With a restart, the waits count from the request.
    let restarted = self::core("10/5s", 3, true).decide(state.as_ref(), reduce(4, SECOND));
    assert_eq!(
        restarted.write.unwrap().0,
        Bucket {
            tokens: 0,
            mark: SECOND
        }
    );
    assert_eq!(
        restarted.decision.retry_after(),
        Some(Duration::from_secs(10))
    );
    // Above max: never fits; its retry is the reset.
    let huge = core
        .decide(state.as_ref(), Ask::at(u64::MAX, SECOND))
        .decision;
    assert_eq!(
        (huge.remaining(), huge.retry_after()),
        (2, Some(huge.reset_after()))
    );
}

#[test]
fn older_events_earn_nothing_and_move_nothing_back() {
    let core = core("2/10s", 1, true);
    let stored = Bucket {
        tokens: 1,
        mark: 100 * SECOND,
    };
    let step = core.decide(Some(&stored), Ask::at(1, 0));
    assert!(step.decision.is_allowed());
    // Emptied with a restart, but the mark stays at the newer time.
    assert_eq!(
        step.write.unwrap().0,
        Bucket {
            tokens: 0,
            mark: 100 * SECOND
        }
    );
    assert_eq!(step.decision.reset_after(), Duration::from_secs(120));
    let denied = core.decide(
        Some(&Bucket {
            tokens: 0,
            ..stored
        }),
        Ask::at(1, 95 * SECOND),
    );
    assert_eq!(denied.decision.retry_after(), Some(Duration::from_secs(15)));
}

#[test]
fn huge_values_neither_overflow_nor_panic() {
    let core = core(&format!("{}/366d", 1u64 << 56), u64::MAX, false);
    for (tokens, mark) in [(0, i64::MIN), (u64::MAX, i64::MAX), (0, i64::MAX), (1, 0)] {
        for now in [i64::MIN, 0, i64::MAX] {
            for cost in [1, 1 << 56, u64::MAX] {
                let state = Bucket { tokens, mark };
                let _ = core.decide(Some(&state), reduce(cost, now));
                let _ = core.refund(Some(&state), Ask::refund_at(cost, now));
            }
        }
    }
    let slow = self::core(&format!("{}/366d", 1u64 << 56), 1, false);
    let empty = Bucket { tokens: 0, mark: 0 };
    assert_eq!(
        slow.decide(Some(&empty), Ask::at(1, 0))
            .decision
            .reset_after(),
        Duration::from_nanos(u64::MAX)
    );
}

#[test]
fn state_round_trips_and_anything_else_is_rejected() {
    let core = core("10/5s", 3, false);
    let bucket = Bucket {
        tokens: 7,
        mark: -1_800_000_000_123_456_789,
    };
    assert_eq!(core.encode(&bucket), b"dr1 7 -1800000000123456789");
    assert_eq!(core.decode(&core.encode(&bucket)), Some(bucket));
    for bad in [
        &b""[..],
        b"dr1",
        b"dr1 7",
        b"dr2 7 5",
        b"7 5",
        b"dr1 -1 5",
        b"dr1 7 5 0",
        b"dr1 7.5 5",
        b"dr1 7 x",
        b"dr1  7 5",
        b"\xff",
    ] {
        assert_eq!(core.decode(bad), None, "{bad:?}");
    }
}

#[test]
fn repair_cuts_tokens_to_max_and_clamps_a_far_mark() {
    let core = core("10/5s", 3, false);
    let mut bucket = Bucket {
        tokens: 11,
        mark: 0,
    };
    assert!(core.repair(&mut bucket, 0, SECOND));
    assert_eq!(
        bucket,
        Bucket {
            tokens: 10,
            mark: 0
        }
    );
    let mut ahead = Bucket {
        tokens: 3,
        mark: 5 * SECOND,
    };
    assert!(core.repair(&mut ahead, 0, SECOND));
    assert_eq!(
        ahead,
        Bucket {
            tokens: 3,
            mark: SECOND
        }
    );
    assert!(!core.repair(&mut ahead, 0, SECOND), "within the skew");
}

#[test]
fn a_refund_gives_back_up_to_max_without_moving_the_mark() {
    let core = core("10/5s", 3, false);
    assert!(core.refund(None, Ask::refund_at(4, 0)).write.is_none());
    let taken = Bucket { tokens: 3, mark: 0 };
    let step = core.refund(Some(&taken), Ask::refund_at(4, SECOND));
    assert_eq!(step.write.unwrap().0, Bucket { tokens: 7, mark: 0 });
    assert!(step.decision.is_allowed());
    assert_eq!(step.decision.remaining(), 7);
    assert_eq!(step.decision.reset_after(), Duration::from_secs(4));
    // Later, the refills count from the same mark: 3 + 3 + 4, capped.
    let later = core.refund(Some(&taken), Ask::refund_at(8, 6 * SECOND));
    assert_eq!(
        later.write.unwrap().0,
        Bucket {
            tokens: 10,
            mark: 0
        }
    );
    assert_eq!(later.decision.remaining(), 10);
    let full = Bucket {
        tokens: 10,
        mark: 0,
    };
    assert!(core
        .refund(Some(&full), Ask::refund_at(1, 0))
        .write
        .is_none());
}

#[test]
fn a_refund_gives_back_no_more_than_was_taken() {
    let core = core("5/1m", 5, true);
    let mut state = None;
    let mut apply = |ask: Ask| {
        let step = core.apply(state.as_ref(), ask);
        if let Some((next, _)) = step.write {
            state = Some(next);
        }
        step.decision
    };
    assert!(apply(Ask::at(5, 0)).is_allowed());
    assert_eq!(apply(Ask::refund_at(1, SECOND)).remaining(), 1);
    assert!(apply(Ask::at(1, SECOND)).is_allowed());
    assert!(apply(Ask::at(1, SECOND)).is_denied());
    // The restart at 1 s holds: nothing back before 61 s.
    assert!(apply(Ask::at(1, 60 * SECOND)).is_denied());
    assert!(apply(Ask::at(5, 61 * SECOND)).is_allowed());
}

#[test]
fn parameters_name_the_bucket_and_zero_refill_is_refused() {
    let base = core("10/5s", 3, false).suffix().to_owned();
    assert!(base.starts_with("dr-"));
    assert_ne!(base, core("10/5s", 4, false).suffix());
    assert_ne!(base, core("11/5s", 3, false).suffix());
    assert_ne!(base, core("10/6s", 3, false).suffix());
    assert_eq!(base, core("10/5000ms", 3, true).suffix());
    let error = discrete_refill(Some(0), false, "10/5s".parse().unwrap()).unwrap_err();
    assert_eq!(error.field(), "refill_amount");
    assert_eq!(core("10/5s", 3, false).capacity(), u64::MAX);
}

/// A strict denial that leaves the bucket as it was writes nothing: the
/// empty bucket knocked again before its refill costs one store read, not
/// a read and a write. With the restart, the mark moves, so it writes.
#[test]
fn a_denial_that_changes_nothing_writes_nothing() {
    let plain = core("2/5s", 2, false);
    let empty = Bucket { tokens: 0, mark: 0 };
    let step = plain.decide(Some(&empty), reduce(1, SECOND));
    assert!(step.decision.is_denied());
    assert_eq!(step.write, None);
    // A new client denied in strict mode (a cost above max) is written.
    let fresh = plain.decide(None, reduce(3, SECOND));
    assert!(fresh.decision.is_denied());
    assert_eq!(
        fresh.write.map(|(bucket, _)| bucket),
        Some(Bucket {
            tokens: 0,
            mark: SECOND
        })
    );
    let restarting = core("2/5s", 2, true);
    let step = restarting.decide(Some(&empty), reduce(1, SECOND));
    assert_eq!(
        step.write.map(|(bucket, _)| bucket),
        Some(Bucket {
            tokens: 0,
            mark: SECOND
        })
    );
}

/// Every bucket this core writes reads back as itself: the known states
/// keep the bucket as decided, and a fresh read must find the same one.
#[test]
fn a_written_bucket_reads_back() {
    let core = core("10/minute", 10, false);
    proptest::proptest!(|(tokens in proptest::prelude::any::<u64>(), mark in proptest::prelude::any::<i64>())| {
        let bucket = Bucket { tokens, mark };
        proptest::prop_assert_eq!(core.decode(&core.encode(&bucket)), Some(bucket));
    });
}
