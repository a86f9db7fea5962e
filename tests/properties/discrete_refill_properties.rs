//! Property tests for [`DiscreteRefill`], Smyte's token bucket with
//! discrete refills, through the public API on a [`MemoryStore`], against
//! a small model of its rules written here.
//!
//! Proptest draws a maximum (the quota's limit), a refill amount (which may
//! exceed the maximum), a period, strict mode or not, the restart flag, and
//! a history of requests: a time step (often zero, usually within a few
//! periods), a cost in `1..=max + 2` (above the maximum too, which is
//! denied, not an error), and now and then an event from the past
//! ([`check_at`](memcache_ratelimit::RateLimiter::check_at) up to the
//! allowed clock skew, 1 s, before the clock: further back, the stored mark
//! is further ahead of the event than any writer's clock could be, and is
//! clamped as a repair, as for every compare-and-swap algorithm). For every
//! request the limiter and the model must agree on
//! allowed or denied and on `remaining`; a denial's `retry_after` and every
//! `reset_after` are checked on the model: waiting them out (with nothing
//! sent meanwhile) gets the request through / the bucket full, and 1 ns
//! less does not.
//!
//! The store's items never expire here (its clock stands still): a state
//! the limiter forgets once its bucket would be full again starts a new
//! bucket, with the mark at the next request, which the model does not
//! do. [`forgotten_once_full`] checks that forgetting on its own.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::T0;
use memcache_ratelimit::limiter::DEFAULT_MAX_CLOCK_SKEW;
use memcache_ratelimit::{Clock, DiscreteRefill, ManualClock, MemoryStore, Quota, RateLimiter};
use proptest::collection::vec;
use proptest::prelude::*;

const CLIENT: &[u8] = b"smyte";

/// Smyte's rules, nanoseconds as `i128`: tokens and mark, or a new client.
#[derive(Debug, Clone)]
struct Model {
    max: u64,
    refill: u64,
    period: i128,
    strict: bool,
    restart: bool,
    state: Option<(u64, i128)>,
}

impl Model {
    /// The tokens available at `t` and the mark they count from.
    fn available(&self, t: i128) -> (u64, i128) {
        match self.state {
            None => (self.max, t),
            Some((tokens, mark)) if t <= mark => (tokens, mark),
            Some((tokens, mark)) => {
                let refills = (t - mark) / self.period;
                let tokens = (i128::from(tokens) + refills * i128::from(self.refill))
                    .min(i128::from(self.max)) as u64;
                (tokens, mark + refills * self.period)
            }
        }
    }

    /// A request of `cost` at `t`: whether allowed, and the remaining
    /// count to report (after if allowed, before if denied).
    fn request(&mut self, t: i128, cost: u64) -> (bool, u64) {
        let (available, mark) = self.available(t);
        let allowed = cost <= available;
        if allowed || self.strict {
            let tokens = available.saturating_sub(cost);
            let restarted = self.restart && tokens == 0;
            self.state = Some((tokens, if restarted { mark.max(t) } else { mark }));
        }
        (allowed, if allowed { available - cost } else { available })
    }
}

#[derive(Debug, Clone)]
struct Scenario {
    max: u64,
    refill: u64,
    period_ms: u64,
    strict: bool,
    restart: bool,
    /// Each request: how far the clock moves (ns), how far before the
    /// clock the event is (ns, mostly 0), and its cost.
    requests: Vec<(u64, u64, u64)>,
}

fn scenario() -> impl Strategy<Value = Scenario> {
    let period_ms = prop_oneof![Just(1_000u64), Just(1_234), Just(5_000), 1u64..=3_000];
    (1u64..=6, period_ms, any::<bool>(), any::<bool>()).prop_flat_map(
        |(max, period_ms, strict, restart)| {
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
                restart,
                requests,
            })
        },
    )
}

/// The limiter, reading `clock`, on a store whose items never expire.
fn limiter(s: &Scenario, clock: &ManualClock) -> RateLimiter {
    let quota: Quota = format!("{}/{}ms", s.max, s.period_ms).parse().unwrap();
    let store = Arc::new(MemoryStore::with_clock(ManualClock::from_unix_secs(T0)));
    common::patient(DiscreteRefill::builder(quota, store))
        .refill_amount(s.refill)
        .restart_when_empty(s.restart)
        .strict(s.strict)
        .clock(clock.clone())
        .build()
        .unwrap()
}

/// Whether `wait` is exactly how long the model, left alone after `t`,
/// takes to hold `want` tokens: it holds them then, and not 1 ns before.
fn exact_wait(model: &Model, t: i128, wait: Duration, want: u64) -> bool {
    let at = t + wait.as_nanos() as i128;
    model.available(at).0 >= want && (wait.is_zero() || model.available(at - 1).0 < want)
}

async fn agrees(s: &Scenario) -> Result<(), TestCaseError> {
    let clock = ManualClock::from_unix_secs(T0);
    let limiter = limiter(s, &clock);
    let mut model = Model {
        max: s.max,
        refill: s.refill,
        period: i128::from(s.period_ms) * 1_000_000,
        strict: s.strict,
        restart: s.restart,
        state: None,
    };
    for (index, &(step, back, cost)) in s.requests.iter().enumerate() {
        clock.advance(Duration::from_nanos(step));
        let now = clock.now() - chrono::Duration::nanoseconds(back as i64);
        let decision = if back == 0 {
            limiter.check_n(CLIENT, cost).await
        } else {
            limiter.check_at(CLIENT, cost, now).await
        }
        .map_err(|e| TestCaseError::fail(format!("request {index}: {e}")))?;
        let t = i128::from(now.timestamp_nanos_opt().unwrap());
        let expected = model.request(t, cost);
        let at = format!("request {index} (cost {cost}, {back} ns back) of {s:?}");
        prop_assert_eq!(
            (decision.is_allowed(), decision.remaining()),
            expected,
            "{}",
            at
        );
        prop_assert_eq!(decision.limit(), s.max, "{}", at);
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
    #![proptest_config(common::proptest_config("discrete_refill_properties", 256))]

    #[test]
    fn the_limiter_decides_as_smyte_s_rules(s in scenario()) {
        common::block_on(agrees(&s))?;
    }
}

/// The state is kept while the bucket refills and forgotten once it would
/// be full again: the next request starts a new bucket at its own time.
#[tokio::test]
async fn forgotten_once_full() {
    let clock = ManualClock::from_unix_secs(T0);
    let store = Arc::new(MemoryStore::with_clock(clock.clone()));
    let limiter = common::patient(DiscreteRefill::builder("3/10s".parse().unwrap(), store))
        .refill_amount(1)
        .clock(clock.clone())
        .build()
        .unwrap();
    let spent = limiter.check_n(CLIENT, 3).await.unwrap();
    assert_eq!(spent.reset_after(), Duration::from_secs(30));
    clock.advance(Duration::from_millis(29_999));
    let seen = limiter.inspect(CLIENT).await.unwrap();
    let stored = format!("dr1 0 {}", T0 * 1_000_000_000);
    assert_eq!(seen.keys[0].value.as_deref(), Some(stored.as_str()));
    clock.advance(Duration::from_secs(60));
    assert_eq!(limiter.inspect(CLIENT).await.unwrap().keys[0].value, None);
    // A new bucket, its mark at this request: one token back 10 s later.
    assert!(limiter.check_n(CLIENT, 3).await.unwrap().is_allowed());
    let denied = limiter.check_n(CLIENT, 1).await.unwrap();
    assert_eq!(denied.retry_after(), Some(Duration::from_secs(10)));
}
