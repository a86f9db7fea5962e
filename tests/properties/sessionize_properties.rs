//! Property tests for [`Sessionize`], Smyte's sessionizing bucket, through
//! the public API on a [`MemoryStore`], against a small model of Smyte's
//! `RL.SESSIONIZE` written here (`RateLimitHandler.cpp`: always strict, the
//! refill mark restarted when a reduction leaves the bucket empty, the
//! session start moved to the client's time when `available ≥ take`).
//!
//! Proptest draws a maximum, a refill amount (which may exceed it), a
//! period, the limiter's `DeniedRequests` (which must change nothing), and
//! a history of requests: a time step, a cost in `1..=max + 2` (above the
//! maximum too, denied and draining), and now and then an event up to the
//! allowed clock skew before the clock. For every request the limiter and
//! the model must agree on allowed or denied, on `remaining` and on the
//! session start; every `reset_after`, and a denial's `retry_after`, are
//! checked on the model: waiting them out gets the bucket full / the
//! request through, and 1 ns less does not.
//!
//! The model leaves the refill mark where it is when an emptied bucket's
//! event is older than the mark (the library never moves a mark back;
//! Smyte's would): the events here are at most the skew old.
//!
//! The store's items never expire here (its clock stands still), so the
//! state is never forgotten.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::T0;
use memcache_ratelimit::limiter::DEFAULT_MAX_CLOCK_SKEW;
use memcache_ratelimit::{Clock, ManualClock, MemoryStore, Quota, RateLimiter, Sessionize};
use proptest::collection::vec;
use proptest::prelude::*;

const CLIENT: &[u8] = b"sessions";

/// Smyte's value: tokens, refill mark and session start (ns, `i128`).
#[derive(Debug, Clone, Copy)]
struct Value {
    tokens: u64,
    mark: i128,
    start: i128,
}

/// Smyte's rules for `RL.SESSIONIZE`.
#[derive(Debug, Clone)]
struct Model {
    max: u64,
    refill: u64,
    period: i128,
    value: Option<Value>,
}

impl Model {
    /// Smyte's `getAdjustedAmountFromDb`: the tokens at `t` and the mark
    /// they count from.
    fn adjusted(&self, t: i128) -> (u64, i128) {
        let Some(Value { tokens, mark, .. }) = self.value else {
            return (self.max, t);
        };
        let refills = (t - mark).max(0) / self.period;
        let tokens = (i128::from(tokens) + refills * i128::from(self.refill))
            .min(i128::from(self.max)) as u64;
        (tokens, mark + refills * self.period)
    }

    /// A request of `take` at `t`: Smyte's reply, the tokens available
    /// before and the session start.
    fn sessionize(&mut self, t: i128, take: u64) -> (u64, i128) {
        let (available, mark) = self.adjusted(t);
        let stored_start = self.value.map_or(t, |value| value.start);
        let start = if available >= take { t } else { stored_start };
        let tokens = available.saturating_sub(take);
        let mark = if tokens == 0 { mark.max(t) } else { mark };
        self.value = Some(Value {
            tokens,
            mark,
            start,
        });
        (available, start)
    }
}

#[derive(Debug, Clone)]
struct Scenario {
    max: u64,
    refill: u64,
    period_ms: u64,
    strict: bool,
    /// Each request: how far the clock moves (ns), how far before the
    /// clock the event is (ns, mostly 0), and its cost.
    requests: Vec<(u64, u64, u64)>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    let period_ms = prop_oneof![Just(1_000u64), Just(3_600), 1u64..=3_000];
    (1u64..=6, period_ms, any::<bool>()).prop_flat_map(|(max, period_ms, strict)| {
        let period = period_ms * 1_000_000;
        let step = prop_oneof![
            3 => Just(0u64),
            5 => 0..=period,
            2 => 0..=4 * period,
        ];
        let skew = DEFAULT_MAX_CLOCK_SKEW.as_nanos() as u64;
        let back = prop_oneof![9 => Just(0u64), 1 => 0..=skew];
        let request = (step, back, 1..=max + 2);
        (1..=max + 2, vec(request, 1..=40)).prop_map(move |(refill, requests)| Scenario {
            max,
            refill,
            period_ms,
            strict,
            requests,
        })
    })
}

/// The limiter, reading `clock`, on a store whose items never expire.
fn limiter(s: &Scenario, clock: &ManualClock) -> RateLimiter {
    let quota: Quota = format!("{}/{}ms", s.max, s.period_ms).parse().unwrap();
    let store = Arc::new(MemoryStore::with_clock(ManualClock::from_unix_secs(T0)));
    common::patient(Sessionize::builder(quota, store))
        .refill_amount(s.refill)
        .strict(s.strict)
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// Whether `wait` is exactly how long the model, left alone after `t`,
/// takes to hold `want` tokens: it holds them then, and not 1 ns before.
fn exact_wait(model: &Model, t: i128, wait: Duration, want: u64) -> bool {
    let at = t + wait.as_nanos() as i128;
    model.adjusted(at).0 >= want && (wait.is_zero() || model.adjusted(at - 1).0 < want)
}

async fn agrees(s: &Scenario) -> Result<(), TestCaseError> {
    let clock = ManualClock::from_unix_secs(T0);
    let limiter = limiter(s, &clock);
    let mut model = Model {
        max: s.max,
        refill: s.refill,
        period: i128::from(s.period_ms) * 1_000_000,
        value: None,
    };
    for (index, &(step, back, cost)) in s.requests.iter().enumerate() {
        clock.advance(Duration::from_nanos(step));
        let now = clock.now() - chrono::Duration::nanoseconds(back as i64);
        let decision = limiter
            .check_at(CLIENT, cost, now)
            .await
            .map_err(|e| TestCaseError::fail(format!("request {index}: {e}")))?;
        let t = i128::from(now.timestamp_nanos_opt().unwrap());
        let (available, start) = model.sessionize(t, cost);
        let at = format!("request {index} (cost {cost}, {back} ns back) of {s:?}");
        let allowed = available >= cost;
        let remaining = if allowed { available - cost } else { available };
        prop_assert_eq!(
            (decision.is_allowed(), decision.remaining()),
            (allowed, remaining),
            "{}",
            at
        );
        let session = decision.session_start().map(|s| s.timestamp_nanos_opt());
        prop_assert_eq!(session, Some(i64::try_from(start).ok()), "{}", at);
        prop_assert!(
            exact_wait(&model, t, decision.reset_after(), s.max),
            "{}: reset_after {:?}",
            at,
            decision.reset_after()
        );
        if let (Some(retry), true) = (decision.retry_after(), cost <= s.max) {
            prop_assert!(
                exact_wait(&model, t, retry, cost),
                "{}: retry_after {:?}",
                at,
                retry
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(common::proptest_config("sessionize_properties", 256))]

    #[test]
    fn the_limiter_sessionizes_as_smyte_s_rules(s in scenario()) {
        common::block_on(agrees(&s))?;
    }
}

/// Smyte's `SessionizeCommands` through the public API: `rl.sessionize a 1
/// 3600 at T` for T = 0, 1, 1000, 3605, 7205 s.
#[tokio::test]
async fn smyte_s_sessionize_commands() {
    let clock = ManualClock::from_unix_secs(0);
    let store = Arc::new(MemoryStore::with_clock(clock.clone()));
    let limiter = common::patient(Sessionize::builder("1/3600s".parse().unwrap(), store))
        .clock(clock)
        .build()
        .unwrap();
    let mut replies = Vec::new();
    for t in [0, 1, 1000, 3605, 7205] {
        let at = chrono::DateTime::from_timestamp(t, 0).unwrap();
        let decision = limiter.check_at(CLIENT, 1, at).await.unwrap();
        let available = decision.remaining() + u64::from(decision.is_allowed());
        let start = decision.session_start().unwrap().timestamp_millis();
        replies.push((available, start));
    }
    assert_eq!(replies, [(1, 0), (0, 0), (0, 0), (0, 0), (1, 7_205_000)]);
}
