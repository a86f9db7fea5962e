use std::time::Duration;

use super::core::*;
use super::log::Log;
use crate::algorithm::cas::core::{Ask, CasCore};
use crate::decision::Decision;

const SECOND: i64 = 1_000_000_000;

fn core(quota: &str) -> SlidingLogCore {
    SlidingLogCore::new(quota.parse().unwrap())
}

fn ask(cost: u64, now: i64, strict: bool) -> Ask {
    Ask {
        strict,
        ..Ask::at(cost, now)
    }
}

/// Runs one request against `log`, keeping the written state.
fn run(core: &SlidingLogCore, log: &mut Option<Log>, ask: Ask) -> Decision {
    let step = core.decide(log.as_ref(), ask);
    if let Some((next, _)) = step.write {
        // Every written state survives the store, and the next decision
        // reads it as the store gives it back.
        let stored = core.decode(&core.encode(&next));
        assert_eq!(stored, Some(next));
        *log = stored;
    }
    step.decision
}

/// A deterministic xorshift, so the test needs no seed plumbing.
fn pseudo_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn exact_against_a_naive_count() {
    let log_core = core("7/10s");
    let period = 10 * SECOND;
    let mut log = None;
    let mut admitted: Vec<(i64, u64)> = Vec::new();
    let mut seed = 0x9e37_79b9_7f4a_7c15;
    let mut now = 1_800_000_000 * SECOND;
    for _ in 0..5_000 {
        now += (pseudo_random(&mut seed) % (3 * SECOND as u64)) as i64;
        let cost = 1 + pseudo_random(&mut seed) % 3;
        let in_window: u64 = admitted
            .iter()
            .filter(|&&(at, _)| at > now - period)
            .map(|&(_, cost)| cost)
            .sum();
        let expected = in_window + cost <= 7;
        let decision = run(&log_core, &mut log, ask(cost, now, false));
        assert_eq!(decision.is_allowed(), expected, "at {now}");
        if expected {
            admitted.push((now, cost));
            assert_eq!(decision.remaining(), 7 - in_window - cost);
        } else {
            // Waiting exactly `retry_after` makes the same request fit.
            let retry = decision.retry_after().unwrap().as_nanos() as i64;
            let later = log_core.decide(log.as_ref(), ask(cost, now + retry, false));
            assert!(later.decision.is_allowed());
            let sooner = log_core.decide(log.as_ref(), ask(cost, now + retry - 1, false));
            assert!(sooner.decision.is_denied());
        }
        assert!(log.as_ref().unwrap().len() <= 7);
    }
}

#[test]
fn size_stays_bounded_at_the_limit() {
    let log_core = core("100/minute");
    let mut log = None;
    for i in 0..1_000 {
        run(&log_core, &mut log, ask(1, i * 1_000_000, true));
        let stored = log.as_ref().unwrap();
        assert!(stored.len() <= 100);
        assert!(log_core.encode(stored).len() <= 1 + 8 + 99 * 4);
    }
    assert_eq!(log.unwrap().len(), 100);
}

#[test]
fn strict_mode_keeps_a_fast_client_denied_until_it_slows_down() {
    let log_core = core("2/second");
    let mut lenient = None;
    let mut strict = None;
    // Three requests a second, for five seconds.
    let mut admitted = (0, 0);
    for i in 0..15 {
        let now = i * SECOND / 3;
        admitted.0 += u64::from(run(&log_core, &mut lenient, ask(1, now, false)).is_allowed());
        admitted.1 += u64::from(run(&log_core, &mut strict, ask(1, now, true)).is_allowed());
    }
    assert_eq!(admitted, (10, 2));
    // A pause of one period lets it through again.
    let last = 14 * SECOND / 3;
    let back = run(&log_core, &mut strict, ask(1, last + SECOND, true));
    assert!(back.is_allowed());
}

#[test]
fn strict_denial_retries_after_its_own_entries_leave() {
    let log_core = core("3/second");
    let mut log = None;
    run(&log_core, &mut log, ask(3, 0, true));
    let denied = run(&log_core, &mut log, ask(2, SECOND / 2, true));
    assert!(denied.is_denied());
    assert_eq!(
        log.as_ref().unwrap().to_vec(),
        vec![0, SECOND / 2, SECOND / 2]
    );
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(1)));
    assert_eq!(denied.reset_after(), Duration::from_secs(1));
    assert_eq!(denied.remaining(), 0);
}

#[test]
fn older_events_are_decided_as_of_the_newest_entry() {
    let log_core = core("2/second");
    let mut log = None;
    run(&log_core, &mut log, ask(1, 5 * SECOND, false));
    let late = run(&log_core, &mut log, ask(1, 0, false));
    assert!(late.is_allowed());
    assert_eq!(log.as_ref().unwrap().to_vec(), vec![5 * SECOND, 5 * SECOND]);
    // Counted from the event's own time, 5 s before the entries.
    assert_eq!(late.reset_after(), Duration::from_secs(6));
}

#[test]
fn ttl_covers_the_newest_entry() {
    let log_core = core("2/minute");
    let step = log_core.decide(None, ask(1, 0, false));
    // Read for a period; the engine adds the expiry slack.
    assert_eq!(step.write.unwrap().1, Duration::from_secs(60));
    let full = Log::from_entries(&[0, 0]);
    let denied = log_core.decide(Some(&full), ask(1, 30 * SECOND, false));
    assert!(denied.write.is_none(), "a lenient denial writes nothing");
}

#[test]
fn parameters_name_the_key() {
    assert_ne!(core("10/second").suffix, core("11/second").suffix);
    assert_ne!(core("10/second").suffix, core("10/minute").suffix);
    assert!(core("10/second").suffix.starts_with("log-"));
}

#[test]
fn a_refund_removes_the_entries_the_request_recorded() {
    let log_core = core("5/second");
    let before = Log::from_entries(&[0, SECOND / 4]);
    let taken = log_core.decide(Some(&before), ask(2, SECOND / 2, false));
    let taken = taken.write.unwrap().0;
    assert_eq!(taken.to_vec(), vec![0, SECOND / 4, SECOND / 2, SECOND / 2]);
    let step = log_core.refund(Some(&taken), Ask::refund_at(2, SECOND / 2));
    assert!(step.decision.is_allowed());
    assert_eq!(step.delay, Duration::ZERO);
    assert_eq!(step.decision.remaining(), 3);
    // The newest entry left, at 250 ms, goes at 1.25 s.
    assert_eq!(step.decision.reset_after(), Duration::from_millis(750));
    assert_eq!(step.write.unwrap(), (before, Duration::from_millis(750)));
}

#[test]
fn a_refund_takes_older_entries_never_later_ones_nor_more_than_exist() {
    let log_core = core("5/second");
    assert!(log_core.refund(None, Ask::refund_at(2, 0)).write.is_none());
    assert!(log_core
        .refund(Some(&Log::from_entries(&[])), Ask::refund_at(2, 0))
        .write
        .is_none());
    // Only one entry at the refund's time: the next older goes too, but
    // not the one recorded later.
    let log = Log::from_entries(&[10, 20, 30, 40]);
    let step = log_core.refund(Some(&log), Ask::refund_at(2, 30));
    assert_eq!(step.write.unwrap().0, Log::from_entries(&[10, 40]));
    // Never more than the log holds before the refund's time.
    let step = log_core.refund(Some(&log), Ask::refund_at(5, 20));
    assert_eq!(step.write.unwrap().0, Log::from_entries(&[30, 40]));
    // Entries already out of the window are not given back.
    let old = Log::from_entries(&[0, 2 * SECOND]);
    let step = log_core.refund(Some(&old), Ask::refund_at(1, 0));
    assert!(step.write.is_none());
    assert_eq!(step.decision.remaining(), 4);
}

#[test]
fn a_refund_gives_back_no_more_than_was_taken() {
    let log_core = core("3/second");
    let mut log = None;
    let mut run = |ask: Ask| {
        let step = log_core.apply(log.as_ref(), ask);
        if let Some((next, _)) = step.write {
            log = Some(next);
        }
        step.decision
    };
    assert!(run(ask(3, 0, false)).is_allowed());
    assert_eq!(run(Ask::refund_at(1, 0)).remaining(), 1);
    assert!(run(ask(1, 0, false)).is_allowed());
    assert!(run(ask(1, 0, false)).is_denied());
    // Nor over the sliding window: the full log lasts until 1 s.
    assert!(run(ask(1, SECOND - 1, false)).is_denied());
    assert!(run(ask(3, SECOND, false)).is_allowed());
}

#[test]
fn a_cost_of_zero_records_nothing_and_drops_what_left() {
    // The limiter refuses a cost of 0 before the core; the core still
    // decides it, recording no entry.
    let log_core = core("3/10s");
    let log = Log::from_entries(&[0, 8 * SECOND]);
    let step = log_core.decide(Some(&log), Ask::at(0, 12 * SECOND));
    assert!(step.decision.is_allowed());
    assert_eq!(step.decision.remaining(), 2);
    assert_eq!(step.write.unwrap().0.to_vec(), [8 * SECOND]);
}
