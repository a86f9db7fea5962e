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

use std::time::Duration;

use common::replay::{self, Outcome, Run};
use memcache_ratelimit::{Gcra, Quota, TokenBucket};
use proptest::collection::vec;
use proptest::prelude::*;

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

/// A request after a gap in nanoseconds.
type Request = replay::Request<u64>;

#[derive(Debug, Clone)]
struct Scenario {
    limit: u64,
    period_ms: u64,
    /// The token bucket's capacity and GCRA's burst.
    burst: u64,
    /// Where the first request falls after `T0`, in nanoseconds.
    offset: u64,
    requests: Vec<Request>,
    /// The gap before the cost probes of the monotonicity property.
    probe_gap: u64,
}

impl Scenario {
    fn quota(&self) -> Quota {
        replay::quota(self.limit, self.period_ms)
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
        let request = replay::request(gap(), burst);
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

/// A fresh limiter of `kind` on a fresh store, with the clock at the
/// scenario's start.
fn run(kind: Kind, strict: bool, s: &Scenario) -> Run {
    Run::new(s.offset, |store, clock| match kind {
        Kind::TokenBucket => replay::build(
            TokenBucket::builder(s.quota(), store).capacity(s.burst),
            strict,
            clock,
        ),
        Kind::Gcra => replay::build(
            Gcra::builder(s.quota(), store).burst(s.burst),
            strict,
            clock,
        ),
    })
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
    let fresh = run(kind, strict, s);
    let wait = replay::retry_after_admits(fresh, &s.requests, label, outcomes, index).await?;
    prop_assert!(wait > Duration::ZERO, "{label}: denied with no wait");

    let denied = outcomes[index];
    let slack = retry_slack(kind);
    if wait > slack {
        let run = run(kind, strict, s);
        run.replay(&s.requests[..=index]).await?;
        run.clock.advance(wait - slack);
        let early = run.decide(denied.cost).await?;
        prop_assert!(
            early.is_denied(),
            "{label}: request {index} of cost {} allowed {slack:?} before its retry_after {wait:?}",
            denied.cost,
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(common::proptest_config("linear_properties", 128))]

    #[test]
    fn no_interval_admits_more_than_burst_plus_rate_times_length(s in scenario()) {
        replay::check_variants(VARIANTS, async |kind, strict, label| {
            let outcomes = run(kind, strict, &s).replay(&s.requests).await?;
            check_interval_bound(&s, label, &outcomes)
        })?;
    }
}

proptest! {
    #![proptest_config(common::proptest_config("linear_properties", 96))]

    #[test]
    fn waiting_retry_after_admits_the_same_request(s in scenario()) {
        replay::check_variants(VARIANTS, async |kind, strict, label| {
            let outcomes = run(kind, strict, &s).replay(&s.requests).await?;
            for index in 0..outcomes.len() {
                if outcomes[index].decision.is_denied() {
                    check_retry_after(kind, strict, &s, label, &outcomes, index).await?;
                }
            }
            Ok(())
        })?;
    }

    /// Property c: every cost in `1..=burst`, each from the state the
    /// whole history leaves, `probe_gap` after its last request.
    #[test]
    fn decisions_are_monotone_in_cost(s in scenario()) {
        replay::check_variants(VARIANTS, async |kind, strict, label| {
            let fresh = || run(kind, strict, &s);
            replay::check_monotone_in_cost(fresh, &s.requests, s.probe_gap, s.burst, label)
                .await
        })?;
    }
}
