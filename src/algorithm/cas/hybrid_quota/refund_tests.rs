//! Refunds on the hybrid quota: exact where a take has an inverse, and
//! never more lenient where it has none (see the rules in `refund`).

use std::time::Duration;

use super::core::*;
use super::tests::{client, core, run, MS, SECOND, T0};
use crate::algorithm::cas::core::{Ask, CasCore};

#[test]
fn a_refund_undoes_a_bursty_or_smooth_take_exactly() {
    let hq = core("10/second");
    let bursty = client(Mode::Bursty, 6.0, T0);
    let taken = hq.decide(Some(&bursty), Ask::at(2, T0 + 100 * MS));
    let step = hq.refund(
        Some(&taken.write.unwrap().0),
        Ask::refund_at(2, T0 + 100 * MS),
    );
    assert!(step.decision.is_allowed());
    assert_eq!(step.delay, Duration::ZERO);
    assert_eq!(step.decision.remaining(), 6);
    assert_eq!(step.decision.reset_after(), Duration::from_millis(900));
    assert_eq!(step.write.unwrap(), (bursty, Duration::from_millis(900)));
    // Smooth: accrued to the refund's time, as the take accrued it.
    let smooth = client(Mode::Smooth, -2.0, T0);
    let taken = hq.decide(Some(&smooth), Ask::at(1, T0 + 500 * MS));
    let taken = taken.write.unwrap().0;
    assert_eq!(taken, client(Mode::Smooth, 2.0, T0 + 500 * MS));
    let step = hq.refund(Some(&taken), Ask::refund_at(1, T0 + 500 * MS));
    assert_eq!(
        step.write.unwrap().0,
        client(Mode::Smooth, 3.0, T0 + 500 * MS)
    );
}

#[test]
fn a_refund_of_a_fresh_window_means_no_state_again() {
    let hq = core("10/second");
    let taken = hq.decide(None, Ask::at(3, T0)).write.unwrap().0;
    let step = hq.refund(Some(&taken), Ask::refund_at(3, T0));
    assert_eq!(step.decision.remaining(), 10);
    assert_eq!(step.decision.reset_after(), Duration::ZERO);
    let full = step.write.unwrap().0;
    assert_eq!(full, client(Mode::Smooth, 10.0, T0));
    // Every later request is decided as on a new client.
    for ask in [
        Ask::at(4, T0),
        Ask::at(10, T0 + 700 * MS),
        Ask::at(1, T0 + 5 * SECOND),
    ] {
        let (refunded, fresh) = (hq.decide(Some(&full), ask), hq.decide(None, ask));
        assert_eq!(refunded.decision, fresh.decision);
        assert_eq!(refunded.write, fresh.write);
    }
}

#[test]
fn a_refund_writes_nothing_without_a_state_and_stays_full() {
    let hq = core("10/second");
    let none = hq.refund(None, Ask::refund_at(2, T0));
    assert!(none.write.is_none());
    assert_eq!(none.decision.remaining(), 10);
    // An expired window is a full quota already.
    let expired = client(Mode::Bursty, 1.0, T0 - SECOND);
    assert!(hq
        .refund(Some(&expired), Ask::refund_at(2, T0))
        .write
        .is_none());
    // Full stays full.
    let full = client(Mode::Smooth, 10.0, T0);
    let step = hq.refund(Some(&full), Ask::refund_at(2, T0));
    assert!(step.write.is_none());
    assert_eq!(step.decision.remaining(), 10);
    let almost = client(Mode::Smooth, 9.5, T0);
    assert_eq!(
        hq.refund(Some(&almost), Ask::refund_at(2, T0))
            .write
            .unwrap()
            .0,
        full
    );
    let bursty = client(Mode::Bursty, 9.0, T0);
    let step = hq.refund(Some(&bursty), Ask::refund_at(2, T0 + MS));
    assert_eq!(step.write.unwrap().0, client(Mode::Smooth, 10.0, T0 + MS));
    // A window started after the refund's time may not be the request's.
    let later = client(Mode::Bursty, 5.0, T0 + MS);
    assert!(hq
        .refund(Some(&later), Ask::refund_at(2, T0))
        .write
        .is_none());
}

#[test]
fn a_refund_of_the_switch_holds_the_client_back_at_least_as_much() {
    let hq = core("10/second");
    let before = client(Mode::Bursty, 2.0, T0);
    let taken = hq.decide(Some(&before), Ask::at(2, T0 + 400 * MS));
    let step = hq.refund(
        Some(&taken.write.unwrap().0),
        Ask::refund_at(2, T0 + 400 * MS),
    );
    let refunded = step.write.unwrap().0;
    assert_eq!(refunded.mode, Mode::Smooth);
    assert!((refunded.bucket + 3.0).abs() < 1e-9);
    // A client taking every unit it can, one a millisecond, never gets
    // more by any time from the refunded state than from the state before
    // the request: two before the window ends, and then the rate.
    let (mut original, mut undone) = (Some(before), Some(refunded));
    let (mut admitted, mut readmitted) = (0, 0);
    for ms in 400..4_000 {
        let ask = Ask::at(1, T0 + ms * MS);
        admitted += u64::from(run(&hq, &mut original, ask).is_allowed());
        readmitted += u64::from(run(&hq, &mut undone, ask).is_allowed());
        assert!(readmitted <= admitted, "at {ms} ms");
        if ms < 1_000 {
            assert!(readmitted <= 2, "at {ms} ms");
        }
    }
    assert_eq!(readmitted, admitted);
}

#[test]
fn a_refund_gives_back_no_more_than_was_taken() {
    let hq = core("10/second");
    let mut state = None;
    let mut run = |ask: Ask| {
        let step = hq.apply(state.as_ref(), ask);
        if let Some((next, _)) = step.write {
            state = Some(next);
        }
        step.decision
    };
    assert!(run(Ask::at(10, T0)).is_allowed());
    assert_eq!(run(Ask::refund_at(1, T0)).remaining(), 1);
    assert!(run(Ask::at(1, T0)).is_allowed());
    assert!(run(Ask::at(1, T0)).is_denied());
    // Nothing more until the window ends.
    assert!(run(Ask::at(1, T0 + SECOND - MS)).is_denied());
    assert!(run(Ask::at(1, T0 + SECOND)).is_allowed());
}
