//! Smyte's discrete-refill bucket as a small model written here,
//! independently of the library (Smyte's server, `RateLimitHandler.cpp`,
//! <https://github.com/smyte/ratelimit>), and the request histories that
//! the [`DiscreteRefill`](memcache_ratelimit::DiscreteRefill) and
//! [`Sessionize`](memcache_ratelimit::Sessionize) property tests replay
//! against it.

use std::time::Duration;

use memcache_ratelimit::limiter::DEFAULT_MAX_CLOCK_SKEW;
use memcache_ratelimit::{Clock, ManualClock, RateLimiter};
use proptest::collection::vec;
use proptest::prelude::*;

/// Smyte's rules, nanoseconds as `i128`: whole refills per whole period
/// since the mark, capped at `max`, the mark moving by whole periods only.
#[derive(Debug, Clone)]
pub struct Model {
    pub max: u64,
    pub refill: u64,
    pub period: i128,
    /// A denial takes what is left (Smyte's `RL.REDUCE`).
    pub strict: bool,
    /// A bucket left empty restarts its mark at the request (`STRICT`).
    pub restart: bool,
    /// Tokens, mark and session start; `None` for a new client.
    state: Option<(u64, i128, i128)>,
}

impl Model {
    pub fn new(max: u64, refill: u64, period_ms: u64, strict: bool, restart: bool) -> Self {
        Self {
            max,
            refill,
            period: i128::from(period_ms) * 1_000_000,
            strict,
            restart,
            state: None,
        }
    }

    /// The tokens available at `t` and the mark they count from: an event
    /// at or before the mark earns nothing and moves nothing.
    pub fn available(&self, t: i128) -> (u64, i128) {
        let Some((tokens, mark, _)) = self.state else {
            return (self.max, t);
        };
        let refills = (t - mark).max(0) / self.period;
        let tokens = (i128::from(tokens) + refills * i128::from(self.refill))
            .min(i128::from(self.max)) as u64;
        (tokens, mark + refills * self.period)
    }

    /// A request of `cost` at `t`: whether allowed, the remaining count to
    /// report (after if allowed, before if denied), and the session start
    /// after it (the request's time when allowed, else the stored one; a
    /// new client's is its request's time).
    pub fn request(&mut self, t: i128, cost: u64) -> (bool, u64, i128) {
        let (available, mark) = self.available(t);
        let allowed = cost <= available;
        let start = match self.state {
            Some((_, _, start)) if !allowed => start,
            _ => t,
        };
        if allowed || self.strict {
            let tokens = available.saturating_sub(cost);
            let restarted = self.restart && tokens == 0;
            self.state = Some((tokens, if restarted { mark.max(t) } else { mark }, start));
        }
        let remaining = if allowed { available - cost } else { available };
        (allowed, remaining, start)
    }

    /// Whether `wait` is exactly how long the bucket, left alone after
    /// `t`, takes to hold `want` tokens: it holds them then, and not 1 ns
    /// before.
    pub fn exact_wait(&self, t: i128, wait: Duration, want: u64) -> bool {
        let at = t + wait.as_nanos() as i128;
        self.available(at).0 >= want && (wait.is_zero() || self.available(at - 1).0 < want)
    }
}

/// A bucket's parameters, the limiter's modes, and a history of requests.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub max: u64,
    pub refill: u64,
    pub period_ms: u64,
    pub strict: bool,
    pub restart: bool,
    /// Each request: how far the clock moves (ns), how far before the
    /// clock the event is (ns, mostly 0), and its cost.
    pub requests: Vec<(u64, u64, u64)>,
}

/// A maximum, a refill amount (which may exceed it), a period, strict mode
/// or not, the restart flag, and up to 40 requests: a time step (often
/// zero, usually within a few periods), a cost in `1..=max + 2` (above the
/// maximum too, which is denied, not an error), and now and then an event
/// from the past, within the clock-skew allowance or up to two periods
/// before the clock.
pub fn scenario() -> impl Strategy<Value = Scenario> {
    let period_ms = prop_oneof![
        Just(1_000u64),
        Just(1_234),
        Just(3_600),
        Just(5_000),
        1u64..=3_000
    ];
    (1u64..=6, period_ms, any::<bool>(), any::<bool>()).prop_flat_map(
        |(max, period_ms, strict, restart)| {
            let period = period_ms * 1_000_000;
            let step = prop_oneof![
                3 => Just(0u64),
                5 => 0..=period,
                2 => 0..=4 * period,
            ];
            let skew = DEFAULT_MAX_CLOCK_SKEW.as_nanos() as u64;
            let back = prop_oneof![16 => Just(0u64), 2 => 0..=skew, 1 => 0..=2 * period];
            let request = (step, back, 1..=max + 2);
            (1..=max + 2, vec(request, 1..=40)).prop_map(move |(refill, requests)| Scenario {
                max,
                refill,
                period_ms,
                strict,
                restart,
                requests,
            })
        },
    )
}

/// Replays `s` on `limiter` (reading `clock`) and on `model`, request by
/// request: they must agree on allowed or denied, `remaining` and the
/// limit, and, where `sessions`, on the session start; every
/// `reset_after`, and a denial's `retry_after`, must be exact on the model.
pub async fn agrees(
    s: &Scenario,
    limiter: &RateLimiter,
    clock: &ManualClock,
    mut model: Model,
    sessions: bool,
) -> Result<(), TestCaseError> {
    let client = b"smyte";
    for (index, &(step, back, cost)) in s.requests.iter().enumerate() {
        clock.advance(Duration::from_nanos(step));
        let now = clock.now() - chrono::Duration::nanoseconds(back as i64);
        let decision = if back == 0 {
            limiter.check_n(client, cost).await
        } else {
            limiter.check_at(client, cost, now).await
        }
        .map_err(|e| TestCaseError::fail(format!("request {index}: {e}")))?;
        let t = i128::from(now.timestamp_nanos_opt().unwrap());
        let (allowed, remaining, start) = model.request(t, cost);
        let at = format!("request {index} (cost {cost}, {back} ns back) of {s:?}");
        prop_assert_eq!(
            (decision.is_allowed(), decision.remaining()),
            (allowed, remaining),
            "{}",
            at
        );
        prop_assert_eq!(decision.limit(), s.max, "{}", at);
        if sessions {
            let session = decision.session_start().map(|s| s.timestamp_nanos_opt());
            prop_assert_eq!(session, Some(i64::try_from(start).ok()), "{}", at);
        }
        prop_assert!(
            model.exact_wait(t, decision.reset_after(), s.max),
            "{}: reset_after {:?}",
            at,
            decision.reset_after()
        );
        if let (Some(retry), true) = (decision.retry_after(), cost <= s.max) {
            prop_assert!(
                model.exact_wait(t, retry, cost),
                "{}: retry_after {:?}",
                at,
                retry
            );
        }
    }
    Ok(())
}
