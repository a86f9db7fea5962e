use std::time::Duration;

use super::core::*;
use crate::algorithm::cas::core::{Ask, CasCore};
use crate::decision::Decision;

pub(super) const MS: i64 = 1_000_000;
pub(super) const SECOND: i64 = 1_000 * MS;
pub(super) const T0: i64 = 1_800_000_000 * SECOND;

pub(super) fn core(quota: &str) -> HybridQuotaCore {
    HybridQuotaCore::new(quota.parse().unwrap())
}

/// Runs one request, keeping the written state.
pub(super) fn run(core: &HybridQuotaCore, state: &mut Option<Client>, ask: Ask) -> Decision {
    let step = core.decide(state.as_ref(), ask);
    if let Some((next, _)) = step.write {
        assert_eq!(core.decode(&core.encode(&next)), Some(next));
        *state = Some(next);
    }
    step.decision
}

pub(super) fn client(mode: Mode, bucket: f64, time: i64) -> Client {
    Client { mode, bucket, time }
}

#[test]
fn a_new_client_is_reset_with_its_request_taken() {
    let hq = core("10/second");
    let step = hq.decide(None, Ask::at(3, T0));
    assert!(step.decision.is_allowed());
    assert_eq!(step.decision.remaining(), 7);
    assert_eq!(step.decision.reset_after(), Duration::from_secs(1));
    let (state, ttl) = step.write.unwrap();
    assert_eq!(state, client(Mode::Bursty, 7.0, T0));
    // Read until the window ends; the engine adds the expiry slack.
    assert_eq!(ttl, Duration::from_secs(1));
}

#[test]
fn a_low_traffic_client_bursts_its_whole_quota_at_once() {
    let hq = core("10/second");
    let mut state = None;
    for i in 0..10 {
        assert!(
            run(&hq, &mut state, Ask::at(1, T0)).is_allowed(),
            "request {i}"
        );
    }
    let denied = run(&hq, &mut state, Ask::at(1, T0));
    assert!(denied.is_denied());
    // Weighted: the whole quota in one request, then again next window.
    let mut heavy = None;
    assert!(run(&hq, &mut heavy, Ask::at(10, T0)).is_allowed());
    assert!(run(&hq, &mut heavy, Ask::at(1, T0 + SECOND - 1)).is_denied());
    assert!(run(&hq, &mut heavy, Ask::at(10, T0 + SECOND)).is_allowed());
}

#[test]
fn an_expired_bursty_window_resets() {
    let hq = core("10/second");
    let bursty = client(Mode::Bursty, 2.0, T0);
    let inside = hq.decide(Some(&bursty), Ask::at(1, T0 + SECOND - 1));
    assert_eq!(inside.write.unwrap().0, client(Mode::Bursty, 1.0, T0));
    let expired = hq.decide(Some(&bursty), Ask::at(4, T0 + SECOND));
    assert!(expired.decision.is_allowed());
    assert_eq!(
        expired.write.unwrap().0,
        client(Mode::Bursty, 6.0, T0 + SECOND)
    );
}

#[test]
fn taking_the_last_tokens_switches_to_smooth_with_a_penalty() {
    let hq = core("10/second");
    let bursty = client(Mode::Bursty, 2.0, T0);
    let step = hq.decide(Some(&bursty), Ask::at(2, T0 + 400 * MS));
    assert!(step.decision.is_allowed());
    let (state, ttl) = step.write.unwrap();
    // remaining = 600 ms, so bucket = −6 + 1.
    assert_eq!(state.mode, Mode::Smooth);
    assert_eq!(state.time, T0 + 400 * MS);
    assert!((state.bucket + 5.0).abs() < 1e-9);
    assert_eq!(step.decision.remaining(), 0);
    // Back to a full quota after 15 tokens at 10 per second.
    assert_eq!(step.decision.reset_after(), Duration::from_millis(1500));
    assert_eq!(ttl, Duration::from_millis(1500));
}

#[test]
fn an_emptied_client_gets_nothing_over_quota_before_its_window_ends() {
    let hq = core("10/second");
    let mut state = None;
    for _ in 0..10 {
        assert!(run(&hq, &mut state, Ask::at(1, T0 + 200 * MS)).is_allowed());
    }
    // Hammering until the fixed window (from T0 + 200 ms) ends: nothing.
    for ms in 200..1_200 {
        let denied = run(&hq, &mut state, Ask::at(1, T0 + ms * MS));
        assert!(denied.is_denied(), "at {ms} ms");
        // Rounded up, so a nanosecond of float error may show.
        let retry = denied.retry_after().unwrap().as_nanos() as i64;
        assert!((0..=1).contains(&(retry - (1_200 - ms) * MS)), "at {ms} ms");
    }
    assert!(run(&hq, &mut state, Ask::at(1, T0 + 1_200 * MS)).is_allowed());
    // Then the smooth rate: one every 100 ms, whatever is asked.
    let mut admitted = Vec::new();
    for ms in 1_201..3_000 {
        if run(&hq, &mut state, Ask::at(1, T0 + ms * MS)).is_allowed() {
            admitted.push(ms);
        }
    }
    let expected: Vec<i64> = (13..30).map(|tenth| tenth * 100).collect();
    assert_eq!(admitted, expected);
    assert_eq!(state.unwrap().mode, Mode::Smooth);
}

#[test]
fn the_switch_keeps_plus_one_for_any_cost() {
    // A cost-3 request takes the last tokens: the bucket still reaches
    // exactly 1 when the window ends, so no cost fits sooner.
    let hq = core("6/second");
    let mut state = None;
    run(&hq, &mut state, Ask::at(3, T0));
    assert!(run(&hq, &mut state, Ask::at(3, T0)).is_allowed());
    assert_eq!(state.unwrap().mode, Mode::Smooth);
    assert!(run(&hq, &mut state, Ask::at(1, T0 + SECOND - 1)).is_denied());
    let denied = run(&hq, &mut state, Ask::at(3, T0 + SECOND));
    // Two more tokens at 6 per second.
    assert_eq!(
        denied.retry_after(),
        Some(Duration::from_nanos(333_333_334))
    );
    assert!(run(&hq, &mut state, Ask::at(1, T0 + SECOND)).is_allowed());
}

#[test]
fn smooth_mode_accrues_and_a_denial_writes_nothing() {
    let hq = core("10/second");
    let smooth = client(Mode::Smooth, -2.0, T0);
    let step = hq.decide(Some(&smooth), Ask::at(1, T0 + 250 * MS));
    assert!(step.decision.is_denied());
    assert_eq!(step.decision.retry_after(), Some(Duration::from_millis(50)));
    assert!(
        step.write.is_none(),
        "a denial that takes nothing is not written"
    );
    // The stored state already implies the same later decision.
    let later = hq.decide(Some(&smooth), Ask::at(1, T0 + 300 * MS));
    assert!(later.decision.is_allowed());
    let (state, ttl) = later.write.expect("an admission is written");
    assert_eq!(state.time, T0 + 300 * MS);
    assert!(state.bucket.abs() < 1e-9);
    assert_eq!(ttl, Duration::from_secs(1));
    // Strict mode writes the denial's cost.
    let strict = hq.decide(
        Some(&smooth),
        Ask {
            strict: true,
            ..Ask::at(1, T0 + 250 * MS)
        },
    );
    assert!((strict.write.unwrap().0.bucket + 0.5).abs() < 1e-9);
}

#[test]
fn a_refilled_smooth_client_returns_to_bursty_mode() {
    let hq = core("10/second");
    let smooth = client(Mode::Smooth, 0.5, T0);
    let almost = hq.decide(Some(&smooth), Ask::at(1, T0 + 949 * MS));
    assert_eq!(almost.write.unwrap().0.mode, Mode::Smooth);
    let refilled = hq.decide(Some(&smooth), Ask::at(4, T0 + 950 * MS));
    assert!(refilled.decision.is_allowed());
    assert_eq!(
        refilled.write.unwrap().0,
        client(Mode::Bursty, 6.0, T0 + 950 * MS)
    );
    // And may burst again.
    let mut state = Some(client(Mode::Bursty, 6.0, T0 + 950 * MS));
    for _ in 0..6 {
        assert!(run(&hq, &mut state, Ask::at(1, T0 + 950 * MS)).is_allowed());
    }
}

#[test]
fn strict_mode_takes_denied_costs_down_to_minus_the_quota() {
    let hq = core("10/second");
    let mut state = Some(client(Mode::Smooth, 0.0, T0));
    let strict = |cost, now| Ask {
        strict: true,
        ..Ask::at(cost, now)
    };
    let denied = run(&hq, &mut state, strict(4, T0 + 100 * MS));
    assert!(denied.is_denied());
    assert!((state.unwrap().bucket + 3.0).abs() < 1e-9);
    // Retrying the same request needs 7 more tokens.
    assert_eq!(denied.retry_after(), Some(Duration::from_millis(700)));
    for _ in 0..10 {
        run(&hq, &mut state, strict(4, T0 + 100 * MS));
    }
    assert_eq!(state.unwrap().bucket, -10.0);
    // Bursty: a denial's debt lasts until the window ends.
    let mut bursty = Some(client(Mode::Bursty, 2.0, T0));
    assert!(run(&hq, &mut bursty, strict(3, T0)).is_denied());
    assert_eq!(bursty.unwrap(), client(Mode::Bursty, -1.0, T0));
    assert!(run(&hq, &mut bursty, strict(3, T0 + SECOND)).is_allowed());
}

#[test]
fn older_events_are_decided_as_of_the_stored_time() {
    let hq = core("10/second");
    let smooth = client(Mode::Smooth, 0.5, T0);
    let late = hq.decide(Some(&smooth), Ask::at(1, T0 - SECOND));
    assert!(late.decision.is_denied());
    // Counted from the event's own time: the second until the stored
    // time, then 50 ms to earn the missing half token.
    assert_eq!(
        late.decision.retry_after(),
        Some(Duration::from_millis(1_050))
    );
    let bursty = client(Mode::Bursty, 3.0, T0);
    let step = hq.decide(Some(&bursty), Ask::at(1, 0));
    assert_eq!(step.write.unwrap().0, client(Mode::Bursty, 2.0, T0));
}

#[test]
fn a_fast_client_averages_at_most_the_rate() {
    // Three times the rate for a minute, one request every 33 ms.
    let hq = core("10/second");
    let mut state = None;
    let mut admitted = Vec::new();
    for i in 0..1_800 {
        let now = T0 + i * 33 * MS;
        if run(&hq, &mut state, Ask::at(1, now)).is_allowed() {
            admitted.push(now);
        }
    }
    // 10 in the first window, then 10 a second from its end, plus the
    // switch's token.
    let elapsed = (1_800 * 33 * MS - SECOND) as f64 / SECOND as f64;
    assert!(admitted.len() as f64 <= 10.0 + 1.0 + elapsed * 10.0);
    assert!(admitted.len() as f64 >= elapsed * 10.0);
    // Smooth mode bounds only the average: the bucket can hold a little
    // over one token when a request arrives, so one window of a second
    // may see one request more than the quota (the seed's caveat), but
    // never two.
    let mut most = 0;
    for (i, &at) in admitted.iter().enumerate() {
        let window = admitted[i..].iter().take_while(|&&t| t < at + SECOND);
        most = most.max(window.count());
    }
    assert_eq!(most, 11);
    assert!(admitted.iter().take_while(|&&t| t < T0 + SECOND).count() == 10);
}

#[test]
fn state_round_trips_and_garbage_is_rejected() {
    let hq = core("10/second");
    for state in [
        client(Mode::Bursty, 7.0, T0),
        client(Mode::Smooth, -3.25, T0 + 1),
    ] {
        assert_eq!(hq.decode(&hq.encode(&state)), Some(state));
    }
    for bad in [
        &b""[..],
        b"hello",
        b"b 1",
        b"x 1 5",
        b"s NaN 5",
        b"s 11 5",
        b"s -11 5",
        b"b 1 x",
        b"b 1 5 6",
        b"3.25 1800000000",
    ] {
        assert_eq!(hq.decode(bad), None, "{bad:?}");
    }
}

#[test]
fn parameters_name_the_key() {
    assert_ne!(core("10/second").suffix, core("11/second").suffix);
    assert_ne!(core("10/second").suffix, core("10/minute").suffix);
    assert!(core("10/second").suffix.starts_with("hq-"));
}
