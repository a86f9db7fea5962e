//! The sessionize core: Smyte's own `SessionizeCommands` vectors
//! (`RateLimitHandlerTest.cpp` in smyte/ratelimit), then its rules one at
//! a time. Smyte's reply is `[available before, session start in ms]`, the
//! first `remaining + cost` when allowed and `remaining` when denied.

use std::time::Duration;

use super::core::*;
use super::sessionize;
use crate::algorithm::cas::core::{Ask, CasCore};
use crate::algorithm::cas::discrete_refill::{discrete_refill, Bucket};

const MS: i64 = 1_000_000;
const SECOND: i64 = 1_000 * MS;

fn core(quota: &str, refill: Option<u64>) -> SessionizeCore {
    sessionize(refill, quota.parse().unwrap()).unwrap()
}

/// Runs `ask` on `state`; returns Smyte's reply: the tokens available
/// before, and the session start in milliseconds.
fn run(core: &SessionizeCore, state: &mut Option<Session>, ask: Ask) -> (u64, i64) {
    let step = core.decide(state.as_ref(), ask);
    let (next, _) = step.write.expect("sessionize always writes");
    *state = Some(next);
    let decision = step.decision;
    let available = decision.remaining() + if decision.is_allowed() { ask.cost } else { 0 };
    let start = decision.session_start().expect("a session start");
    assert_eq!(start.timestamp_nanos_opt(), Some(next.start));
    (available, start.timestamp_millis())
}

fn session(tokens: u64, mark: i64, start: i64) -> Option<Session> {
    Some(Session {
        bucket: Bucket { tokens, mark },
        start,
    })
}

/// `RateLimitHandlerTest.SessionizeCommands`: `rl.sessionize a 1 3600 at
/// T STRICT`, lenient asks (the core is strict whatever it is told).
#[test]
fn smyte_sessionize_commands() {
    let core = core("1/3600s", None);
    let mut state = None;
    let s = |seconds: i64| seconds * SECOND;
    assert_eq!(run(&core, &mut state, Ask::at(1, 0)), (1, 0));
    assert_eq!(state, session(0, 0, 0));
    assert_eq!(run(&core, &mut state, Ask::at(1, s(1))), (0, 0));
    assert_eq!(state, session(0, s(1), 0));
    assert_eq!(run(&core, &mut state, Ask::at(1, s(1000))), (0, 0));
    // No refill even after 3600 s: the mark restarted at 1000 s.
    assert_eq!(run(&core, &mut state, Ask::at(1, s(3605))), (0, 0));
    assert_eq!(state, session(0, s(3605), 0));
    assert_eq!(run(&core, &mut state, Ask::at(1, s(7205))), (1, 7_205_000));
    // RL.PSESSIONIZE names the same bucket: 3600000 ms.
    assert_eq!(core.suffix(), self::core("1/3600000ms", Some(1)).suffix());
}

#[test]
fn a_sessionize_bucket_is_not_a_discrete_refill_bucket() {
    let quota = "10/5s".parse().unwrap();
    let reduce = discrete_refill(Some(3), true, quota).unwrap();
    let sessions = sessionize(Some(3), quota).unwrap();
    assert!(sessions.suffix().starts_with("ds-"));
    assert_ne!(sessions.suffix(), reduce.suffix());
    assert_eq!(sessions.rules, reduce.rules);
    // Neither reads the other's state.
    assert_eq!(sessions.decode(b"dr1 3 0"), None);
    assert_eq!(reduce.decode(b"ds1 3 0 0"), None);
    assert_eq!(sessions.capacity(), u64::MAX);
}

#[test]
fn denials_keep_the_session_and_take_what_is_left() {
    let core = core("10/5s", Some(3));
    let stored = session(2, 0, -7);
    let step = core.decide(stored.as_ref(), Ask::at(4, SECOND));
    let d = step.decision;
    assert!(d.is_denied());
    assert_eq!((d.remaining(), d.used()), (2, 10.0));
    // Drained and restarted at the request; 4 tokens take two refills.
    assert_eq!(
        step.write,
        Some((session(0, SECOND, -7).unwrap(), d.reset_after()))
    );
    assert_eq!(d.retry_after(), Some(Duration::from_secs(10)));
    assert_eq!(d.session_start().unwrap().timestamp_nanos_opt(), Some(-7));
    // Allowed: a new session at the request's time.
    let allowed = core.decide(stored.as_ref(), Ask::at(2, SECOND));
    assert!(allowed.decision.is_allowed());
    assert_eq!(
        allowed.write.unwrap().0,
        session(0, SECOND, SECOND).unwrap()
    );
    // A new client asking above the maximum: denied, its session now.
    let huge = core.decide(None, Ask::at(11, 5 * SECOND));
    assert!(huge.decision.is_denied());
    assert_eq!(
        huge.write.unwrap().0,
        session(0, 5 * SECOND, 5 * SECOND).unwrap()
    );
}

#[test]
fn state_round_trips_and_anything_else_is_rejected() {
    let core = core("10/5s", Some(3));
    let state = session(7, -1_800_000_000_123_456_789, i64::MIN).unwrap();
    assert_eq!(
        core.encode(&state),
        b"ds1 7 -1800000000123456789 -9223372036854775808"
    );
    assert_eq!(core.decode(&core.encode(&state)), Some(state));
    for bad in [
        &b""[..],
        b"ds1",
        b"ds1 7 5",
        b"ds2 7 5 5",
        b"dr1 7 5 5",
        b"ds1 -1 5 5",
        b"ds1 7 5 5 0",
        b"ds1 7 5 x",
        b"ds1  7 5 5",
        b"\xff",
    ] {
        assert_eq!(core.decode(bad), None, "{bad:?}");
    }
}

#[test]
fn repair_cuts_tokens_and_clamps_a_far_mark_or_start() {
    let core = core("10/5s", Some(3));
    let mut over = session(11, 0, 0).unwrap();
    assert!(core.repair(&mut over, 0, SECOND));
    assert_eq!(Some(over), session(10, 0, 0));
    let mut ahead = session(3, 0, 5 * SECOND).unwrap();
    assert!(core.repair(&mut ahead, 0, SECOND));
    assert_eq!(Some(ahead), session(3, 0, SECOND));
    assert!(!core.repair(&mut ahead, 0, SECOND), "within the skew");
}

#[test]
fn a_refund_gives_tokens_back_and_keeps_the_session() {
    let core = core("10/5s", Some(3));
    assert!(core.refund(None, Ask::refund_at(4, 0)).write.is_none());
    let taken = session(3, 0, 42).unwrap();
    let step = core.refund(Some(&taken), Ask::refund_at(4, SECOND));
    assert_eq!(step.write.unwrap().0, session(7, 0, 42).unwrap());
    assert_eq!(step.decision.remaining(), 7);
    assert_eq!(
        step.decision.session_start().unwrap().timestamp_nanos_opt(),
        Some(42)
    );
    let full = session(10, 0, 42).unwrap();
    assert!(core
        .refund(Some(&full), Ask::refund_at(1, 0))
        .write
        .is_none());
}

#[test]
fn huge_values_neither_overflow_nor_panic() {
    let core = core(&format!("{}/366d", 1u64 << 56), Some(u64::MAX));
    for (tokens, mark) in [(0, i64::MIN), (u64::MAX, i64::MAX), (0, i64::MAX), (1, 0)] {
        for now in [i64::MIN, 0, i64::MAX] {
            for cost in [1, 1 << 56, u64::MAX] {
                let state = session(tokens, mark, mark).unwrap();
                let _ = core.decide(Some(&state), Ask::at(cost, now));
                let _ = core.refund(Some(&state), Ask::refund_at(cost, now));
                let mut repaired = state;
                let _ = core.repair(&mut repaired, now, i64::MAX);
            }
        }
    }
    let error = sessionize(Some(0), "10/5s".parse().unwrap()).unwrap_err();
    assert_eq!(error.field(), "refill_amount");
}
