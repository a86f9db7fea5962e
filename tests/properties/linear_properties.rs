//! Property tests for the linear limiters, [`TokenBucket`] and [`Gcra`], on
//! a [`MemoryStore`] driven by a [`ManualClock`] (no sleeps, no memcached).
//!
//! Proptest generates a quota (limit and period, including awkward rates
//! such as 7 per 1,234 ms), a capacity / burst `B` that need not equal the
//! limit, a start time with a sub-second offset, and a sequence of requests,
//! each a gap (in nanoseconds, often zero, usually around the emission
//! interval, sometimes a long pause) and a cost in `1..=B`. Every property
//! is checked for both algorithms and in both modes: the default one
//! (denied requests cost nothing) and strict mode (`.strict(true)`, denied
//! requests are counted too).
//!
//! - **Interval bound** (both modes): for every pair of admitted requests
//!   at times `s ≤ e`, the admitted cost in `[s, e]` is at most
//!   `B + rate·(e − s)`, up to 1e-6 of a request. Strict mode only takes
//!   more tokens, so the bound holds there too.
//! - **Retry after** (both modes): after a denial, advancing the clock by
//!   exactly the reported `retry_after` and sending the same request again,
//!   with nothing in between, gets it through. In strict mode the denial
//!   itself took tokens, and `retry_after` accounts for them. It is also
//!   not longer than needed: slightly earlier (1 ns for GCRA, whose
//!   arithmetic is exact; 1 µs for the token bucket, whose float slack is
//!   1e-9 of a token) the request is still denied.
//! - **Monotone in cost** (both modes; the mode changes the state a history
//!   leaves behind, not how one decision is drawn from a state): from the
//!   same state at the same time, the costs allowed are exactly `1..=k` for
//!   some `k`. The same state is had by replaying the same history into a
//!   fresh store for each probed cost (`reset` would forget the history).

use crate::common;

use std::future::Future;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use memcache_ratelimit::{
    Clock, Decision, Gcra, ManualClock, MemoryStore, Quota, RateLimiter, TokenBucket,
};
use proptest::collection::vec;
use proptest::prelude::*;

/// A minute boundary (2027-01-15 08:00:00 UTC).
const T0: i64 = 1_800_000_000;
const CLIENT: &[u8] = b"prop-client";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    TokenBucket,
    Gcra,
}

/// Every algorithm in every mode.
const VARIANTS: [(Kind, bool); 4] = [
    (Kind::TokenBucket, false),
    (Kind::TokenBucket, true),
    (Kind::Gcra, false),
    (Kind::Gcra, true),
];

#[derive(Debug, Clone, Copy)]
struct Request {
    gap: u64,
    cost: u64,
}

#[derive(Debug, Clone)]
struct Scenario {
    limit: u64,
    period_ms: u64,
    /// The token bucket's capacity and GCRA's burst.
    burst: u64,
    /// Where the first request falls after [`T0`], in nanoseconds.
    offset: u64,
    requests: Vec<Request>,
    /// The gap before the cost probes of the monotonicity property.
    probe_gap: u64,
}

impl Scenario {
    fn quota(&self) -> Quota {
        Quota::with_period(
            NonZeroU64::new(self.limit).unwrap(),
            Duration::from_millis(self.period_ms),
        )
        .unwrap()
    }

    fn period_nanos(&self) -> i128 {
        i128::from(self.period_ms) * 1_000_000
    }
}

fn scenario() -> impl Strategy<Value = Scenario> {
    let limit = 1u64..=20;
    let period_ms = prop_oneof![Just(1_000u64), Just(60_000), Just(1_234), 1u64..=120_000,];
    let burst = 1u64..=25;
    let offset = 0u64..2_000_000_000;
    (limit, period_ms, burst, offset).prop_flat_map(|(limit, period_ms, burst, offset)| {
        // The emission interval, the time one request's worth refills.
        let interval = period_ms * 1_000_000 / limit;
        let gap = || {
            prop_oneof![
                2 => Just(0u64),
                6 => 0..=2 * interval,
                1 => 0..=2 * burst * interval,
            ]
        };
        let cost = prop_oneof![3 => Just(1u64), 2 => 1..=burst];
        let request = (gap(), cost).prop_map(|(gap, cost)| Request { gap, cost });
        (vec(request, 1..=32), gap()).prop_map(move |(requests, probe_gap)| Scenario {
            limit,
            period_ms,
            burst,
            offset,
            requests,
            probe_gap,
        })
    })
}

/// One decision, as it happened.
#[derive(Debug, Clone, Copy)]
struct Outcome {
    at: i64,
    cost: u64,
    decision: Decision,
}

/// A fresh limiter on a fresh store, with the clock at the scenario's start.
struct Run {
    clock: ManualClock,
    limiter: RateLimiter,
}

impl Run {
    fn new(kind: Kind, strict: bool, s: &Scenario) -> Self {
        let clock = ManualClock::from_unix_secs(T0);
        clock.advance(Duration::from_nanos(s.offset));
        let store = Arc::new(MemoryStore::with_clock(clock.clone()));
        let limiter: RateLimiter = match kind {
            Kind::TokenBucket => TokenBucket::builder(s.quota(), store)
                .capacity(s.burst)
                .strict(strict)
                .clock(clock.clone())
                .build()
                .unwrap(),
            Kind::Gcra => Gcra::builder(s.quota(), store)
                .burst(s.burst)
                .strict(strict)
                .clock(clock.clone())
                .build()
                .unwrap(),
        };
        Self { clock, limiter }
    }

    async fn send(&self, gap: u64, cost: u64) -> Outcome {
        self.clock.advance(Duration::from_nanos(gap));
        let decision = self.limiter.check_n(CLIENT, cost).await.unwrap();
        Outcome {
            at: self.clock.now().timestamp_nanos_opt().unwrap(),
            cost,
            decision,
        }
    }

    async fn replay(&self, requests: &[Request]) -> Vec<Outcome> {
        let mut outcomes = Vec::with_capacity(requests.len());
        for r in requests {
            outcomes.push(self.send(r.gap, r.cost).await);
        }
        outcomes
    }
}

fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// Property a: no interval `[s, e]` between two admitted requests admits
/// more than `burst + rate·(e − s)` cost units. In integers, scaled by the
/// period: `(admitted − burst)·period − limit·(e − s) ≤ period / 10⁶`.
fn check_interval_bound(
    s: &Scenario,
    label: &str,
    outcomes: &[Outcome],
) -> Result<(), TestCaseError> {
    let admitted: Vec<&Outcome> = outcomes
        .iter()
        .filter(|o| o.decision.is_allowed())
        .collect();
    let period = s.period_nanos();
    for first in &admitted {
        for last in admitted.iter().filter(|o| o.at >= first.at) {
            let cost: u64 = admitted
                .iter()
                .filter(|o| first.at <= o.at && o.at <= last.at)
                .map(|o| o.cost)
                .sum();
            let span = i128::from(last.at - first.at);
            let excess =
                (i128::from(cost) - i128::from(s.burst)) * period - i128::from(s.limit) * span;
            prop_assert!(
                excess * 1_000_000 <= period,
                "{label}: {cost} units admitted in {span} ns, more than {} + {}·{span}/{period}",
                s.burst,
                s.limit,
            );
        }
    }
    Ok(())
}

/// How much earlier than `retry_after` the request must still be denied.
fn retry_slack(kind: Kind) -> Duration {
    match kind {
        Kind::Gcra => Duration::from_nanos(1),
        Kind::TokenBucket => Duration::from_micros(1),
    }
}

/// Property b, for the denial at `index`: replays the history up to it into
/// a fresh store, waits exactly `retry_after` and asks again; and, on
/// another fresh replay, asks a little earlier and expects a denial.
async fn check_retry_after(
    kind: Kind,
    strict: bool,
    s: &Scenario,
    label: &str,
    outcomes: &[Outcome],
    index: usize,
) -> Result<(), TestCaseError> {
    let denied = outcomes[index];
    let wait = denied
        .decision
        .retry_after()
        .expect("a denial has a retry_after");
    prop_assert!(wait > Duration::ZERO, "{label}: denied with no wait");

    let run = Run::new(kind, strict, s);
    let replayed = run.replay(&s.requests[..=index]).await;
    prop_assert_eq!(
        replayed[index].decision,
        denied.decision,
        "{}: replay is not deterministic",
        label
    );
    run.clock.advance(wait);
    let again = run.limiter.check_n(CLIENT, denied.cost).await.unwrap();
    prop_assert!(
        again.is_allowed(),
        "{label}: request {index} of cost {} denied again after its retry_after {wait:?}: {again:?}",
        denied.cost,
    );

    let slack = retry_slack(kind);
    if wait > slack {
        let run = Run::new(kind, strict, s);
        run.replay(&s.requests[..=index]).await;
        run.clock.advance(wait - slack);
        let early = run.limiter.check_n(CLIENT, denied.cost).await.unwrap();
        prop_assert!(
            early.is_denied(),
            "{label}: request {index} of cost {} allowed {slack:?} before its retry_after {wait:?}",
            denied.cost,
        );
    }
    Ok(())
}

/// Property c: every cost in `1..=burst`, each from the state the whole
/// history leaves, `probe_gap` after its last request.
async fn check_monotone_in_cost(
    kind: Kind,
    strict: bool,
    s: &Scenario,
    label: &str,
) -> Result<(), TestCaseError> {
    let mut allowed = Vec::new();
    for cost in 1..=s.burst {
        let run = Run::new(kind, strict, s);
        run.replay(&s.requests).await;
        run.clock.advance(Duration::from_nanos(s.probe_gap));
        let decision = run.limiter.check_n(CLIENT, cost).await.unwrap();
        allowed.push(decision.is_allowed());
    }
    let cut = allowed.iter().position(|a| !a).unwrap_or(allowed.len());
    prop_assert!(
        allowed[cut..].iter().all(|a| !a),
        "{label}: allowed by cost 1..={}: {allowed:?}",
        s.burst,
    );
    Ok(())
}

fn label(kind: Kind, strict: bool) -> String {
    format!("{kind:?}{}", if strict { " strict" } else { "" })
}

proptest! {
    #![proptest_config(common::proptest_config("linear_properties", 128))]

    #[test]
    fn no_interval_admits_more_than_burst_plus_rate_times_length(s in scenario()) {
        block_on(async {
            for (kind, strict) in VARIANTS {
                let run = Run::new(kind, strict, &s);
                let outcomes = run.replay(&s.requests).await;
                check_interval_bound(&s, &label(kind, strict), &outcomes)?;
            }
            Ok::<(), TestCaseError>(())
        })?;
    }
}

proptest! {
    #![proptest_config(common::proptest_config("linear_properties", 96))]

    #[test]
    fn waiting_retry_after_admits_the_same_request(s in scenario()) {
        block_on(async {
            for (kind, strict) in VARIANTS {
                let label = label(kind, strict);
                let run = Run::new(kind, strict, &s);
                let outcomes = run.replay(&s.requests).await;
                for index in 0..outcomes.len() {
                    if outcomes[index].decision.is_denied() {
                        check_retry_after(kind, strict, &s, &label, &outcomes, index).await?;
                    }
                }
            }
            Ok::<(), TestCaseError>(())
        })?;
    }

    #[test]
    fn decisions_are_monotone_in_cost(s in scenario()) {
        block_on(async {
            for (kind, strict) in VARIANTS {
                check_monotone_in_cost(kind, strict, &s, &label(kind, strict)).await?;
            }
            Ok::<(), TestCaseError>(())
        })?;
    }
}
