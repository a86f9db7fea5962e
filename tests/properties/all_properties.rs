//! Property tests that hold for every algorithm: [`FixedWindow`],
//! [`SlidingWindow`] with one and with four sub-windows, [`TokenBucket`],
//! [`Gcra`], [`SlidingLog`] and [`HybridQuota`], each in the default mode
//! (denied requests cost nothing) and in strict mode (`.strict(true)`,
//! denied requests are counted too), on a [`MemoryStore`] driven by a
//! [`ManualClock`] (no sleeps, no memcached).
//!
//! Proptest generates a quota (limit and period, including awkward periods
//! such as 1,234 ms, and periods of a few milliseconds), a start time, and
//! an in-order history of requests, each a gap and a cost in `1..=limit`.
//! A gap is a number of nanoseconds (often zero, usually around the
//! emission interval `period / limit`, sometimes a pause of up to three
//! periods), or a jump to the next boundary of the period's or of a
//! quarter period's unix-aligned grid, or one nanosecond either side of
//! it, where the window algorithms change buckets. Every algorithm takes
//! the quota as it is: the token bucket's capacity and GCRA's burst are the
//! limit. The four-sub-window sliding window needs a period that splits
//! into whole milliseconds, so it sits out quotas whose period is not a
//! multiple of 4 ms (a little over half of generated periods are).
//!
//! - **Retry after**: after a denial, advancing the clock by exactly the
//!   reported `retry_after` and sending the same request again, with
//!   nothing in between, gets it through. The state is rebuilt by replaying
//!   the identical history into a fresh store and clock (`reset` would
//!   forget the history).
//! - **Monotone in cost**: from the same history, at the same time, the
//!   costs allowed are exactly `1..=k` for some `k`.
//! - **Remaining is usable**: right after an allowed decision reporting
//!   `remaining = r > 0`, a request of cost `r` at the same instant is
//!   allowed. It holds for every algorithm: each computes `remaining` from
//!   the state it leaves behind with the same comparison (and the same
//!   float slack) as its next decision, and no time passes.
//! - **Bounds over the admitted requests**, for every pair of admitted
//!   times `s ≤ e`, weighted by cost:
//!   - [`SlidingLog`]: at most `limit` in any `[s, e]` shorter than one
//!     period, that is in any half-open `(t − period, t]`;
//!   - [`FixedWindow`]: at most `limit` in each calendar window (aligned on
//!     unix time), and at most `2·limit` in any `[s, e]` of at most one
//!     period;
//!   - [`SlidingWindow`] (both splits): at most `2·limit` in any `[s, e]`
//!     of at most one period, the documented worst case.
//!
//!   The linear limiters' own bound (`burst + rate·t`) is in
//!   `tests/linear_properties.rs`; the hybrid quota promises a bound only
//!   in its bursty mode, so none is checked for it here.

use crate::common;

use std::future::Future;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use memcache_ratelimit::{
    Clock, Decision, FixedWindow, Gcra, HybridQuota, ManualClock, MemoryStore, Quota, RateLimiter,
    SlidingLog, SlidingWindow, TokenBucket,
};
use proptest::collection::vec;
use proptest::prelude::*;

/// A minute boundary (2027-01-15 08:00:00 UTC).
const T0: i64 = 1_800_000_000;
const CLIENT: &[u8] = b"prop-client";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    FixedWindow,
    SlidingWindow1,
    SlidingWindow4,
    TokenBucket,
    Gcra,
    SlidingLog,
    HybridQuota,
}

const KINDS: [Kind; 7] = [
    Kind::FixedWindow,
    Kind::SlidingWindow1,
    Kind::SlidingWindow4,
    Kind::TokenBucket,
    Kind::Gcra,
    Kind::SlidingLog,
    Kind::HybridQuota,
];

/// Every algorithm in both modes that can take the scenario's quota.
fn variants(s: &Scenario) -> impl Iterator<Item = (Kind, bool)> + '_ {
    KINDS
        .into_iter()
        .filter(|&kind| kind != Kind::SlidingWindow4 || s.period_ms.is_multiple_of(4))
        .flat_map(|kind| [(kind, false), (kind, true)])
}

/// How the clock moves before a request.
#[derive(Debug, Clone, Copy)]
enum Gap {
    /// Forward by this many nanoseconds.
    By(u64),
    /// To the next multiple of `grid` nanoseconds after the epoch (strictly
    /// after now), moved by `nudge` (−1, 0 or 1) nanoseconds.
    Boundary { grid: u64, nudge: i8 },
}

#[derive(Debug, Clone, Copy)]
struct Request {
    gap: Gap,
    cost: u64,
}

#[derive(Debug, Clone)]
struct Scenario {
    limit: u64,
    period_ms: u64,
    /// Where the clock starts after [`T0`], in nanoseconds.
    offset: u64,
    requests: Vec<Request>,
    /// The gap before the cost probes of the monotonicity property.
    probe_gap: Gap,
}

impl Scenario {
    fn quota(&self) -> Quota {
        Quota::with_period(
            NonZeroU64::new(self.limit).unwrap(),
            Duration::from_millis(self.period_ms),
        )
        .unwrap()
    }

    fn period_nanos(&self) -> i64 {
        i64::try_from(self.period_ms).unwrap() * 1_000_000
    }
}

fn scenario() -> impl Strategy<Value = Scenario> {
    let limit = prop_oneof![1 => Just(1u64), 4 => 1u64..=12, 1 => 13u64..=20];
    let period_ms = prop_oneof![
        Just(1_000u64),
        Just(60_000),
        Just(1_234),
        (1u64..=30_000).prop_map(|k| 4 * k),
        1u64..=120_000,
        1u64..=8,
    ];
    (limit, period_ms).prop_flat_map(|(limit, period_ms)| {
        let period = period_ms * 1_000_000;
        // The emission interval, the time one unit of the limit refills.
        let interval = period / limit;
        let gap = move || {
            prop_oneof![
                3 => Just(Gap::By(0)),
                8 => (0..=2 * interval).prop_map(Gap::By),
                1 => (0..=3 * period).prop_map(Gap::By),
                2 => (prop_oneof![Just(period), Just(period / 4)], -1i8..=1)
                    .prop_map(|(grid, nudge)| Gap::Boundary { grid, nudge }),
            ]
        };
        let cost = prop_oneof![3 => Just(1u64), 2 => 1..=limit];
        let request = (gap(), cost).prop_map(|(gap, cost)| Request { gap, cost });
        (0..2 * period, vec(request, 1..=24), gap()).prop_map(
            move |(offset, requests, probe_gap)| Scenario {
                limit,
                period_ms,
                offset,
                requests,
                probe_gap,
            },
        )
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
        let quota = s.quota();
        let limiter: RateLimiter = match kind {
            Kind::FixedWindow => FixedWindow::builder(quota, store)
                .strict(strict)
                .clock(clock.clone())
                .build()
                .unwrap(),
            Kind::SlidingWindow1 | Kind::SlidingWindow4 => SlidingWindow::builder(quota, store)
                .sub_windows(if kind == Kind::SlidingWindow1 { 1 } else { 4 })
                .strict(strict)
                .clock(clock.clone())
                .build()
                .unwrap(),
            Kind::TokenBucket => TokenBucket::builder(quota, store)
                .strict(strict)
                .clock(clock.clone())
                .build()
                .unwrap(),
            Kind::Gcra => Gcra::builder(quota, store)
                .strict(strict)
                .clock(clock.clone())
                .build()
                .unwrap(),
            Kind::SlidingLog => SlidingLog::builder(quota, store)
                .strict(strict)
                .clock(clock.clone())
                .build()
                .unwrap(),
            Kind::HybridQuota => HybridQuota::builder(quota, store)
                .strict(strict)
                .clock(clock.clone())
                .build()
                .unwrap(),
        };
        Self { clock, limiter }
    }

    fn now_nanos(&self) -> i64 {
        self.clock.now().timestamp_nanos_opt().unwrap()
    }

    fn advance(&self, gap: Gap) {
        let by = match gap {
            Gap::By(nanos) => nanos,
            Gap::Boundary { grid, nudge } => {
                let now = self.now_nanos();
                let grid = i64::try_from(grid).unwrap();
                let next = (now.div_euclid(grid) + 1) * grid + i64::from(nudge);
                // The next boundary is at least 1 ns away, so `next ≥ now`.
                u64::try_from(next - now).unwrap()
            }
        };
        self.clock.advance(Duration::from_nanos(by));
    }

    async fn decide(&self, cost: u64) -> Result<Decision, TestCaseError> {
        self.limiter
            .check_n(CLIENT, cost)
            .await
            .map_err(|e| TestCaseError::fail(format!("check_n({cost}) failed: {e}")))
    }

    async fn send(&self, request: &Request) -> Result<Outcome, TestCaseError> {
        self.advance(request.gap);
        let decision = self.decide(request.cost).await?;
        Ok(Outcome {
            at: self.now_nanos(),
            cost: request.cost,
            decision,
        })
    }

    async fn replay(&self, requests: &[Request]) -> Result<Vec<Outcome>, TestCaseError> {
        let mut outcomes = Vec::with_capacity(requests.len());
        for r in requests {
            outcomes.push(self.send(r).await?);
        }
        Ok(outcomes)
    }

    /// A fresh run with the history up to and including `index` replayed,
    /// checked to have decided request `index` as `original` did.
    async fn replayed_to(
        kind: Kind,
        strict: bool,
        s: &Scenario,
        label: &str,
        original: &[Outcome],
        index: usize,
    ) -> Result<Self, TestCaseError> {
        let run = Self::new(kind, strict, s);
        let replayed = run.replay(&s.requests[..=index]).await?;
        prop_assert_eq!(
            replayed[index].decision,
            original[index].decision,
            "{}: replay is not deterministic",
            label
        );
        Ok(run)
    }
}

fn block_on<F: Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

fn label(kind: Kind, strict: bool) -> String {
    format!("{kind:?}{}", if strict { " strict" } else { "" })
}

/// Property 1, for the denial at `index`: on a fresh replay of the history
/// up to it, waits exactly `retry_after` and asks again.
async fn check_retry_after(
    kind: Kind,
    strict: bool,
    s: &Scenario,
    label: &str,
    outcomes: &[Outcome],
    index: usize,
) -> Result<(), TestCaseError> {
    let denied = outcomes[index];
    let Some(wait) = denied.decision.retry_after() else {
        return Err(TestCaseError::fail(format!(
            "{label}: request {index} denied without a retry_after"
        )));
    };
    let run = Run::replayed_to(kind, strict, s, label, outcomes, index).await?;
    run.clock.advance(wait);
    let again = run.decide(denied.cost).await?;
    prop_assert!(
        again.is_allowed(),
        "{label}: request {index} of cost {} denied again after its retry_after {wait:?}: \
         first {:?}, then {again:?}",
        denied.cost,
        denied.decision,
    );
    Ok(())
}

/// Property 2: every cost in `1..=limit`, each from the state the whole
/// history leaves, `probe_gap` after its last request.
async fn check_monotone_in_cost(
    kind: Kind,
    strict: bool,
    s: &Scenario,
    label: &str,
) -> Result<(), TestCaseError> {
    let mut allowed = Vec::new();
    for cost in 1..=s.limit {
        let run = Run::new(kind, strict, s);
        run.replay(&s.requests).await?;
        run.advance(s.probe_gap);
        allowed.push(run.decide(cost).await?.is_allowed());
    }
    let cut = allowed.iter().position(|a| !a).unwrap_or(allowed.len());
    prop_assert!(
        allowed[cut..].iter().all(|a| !a),
        "{label}: allowed by cost 1..={}: {allowed:?}",
        s.limit,
    );
    Ok(())
}

/// Property 3, for the admission at `index` reporting `remaining > 0`: on
/// a fresh replay up to it, a request of cost `remaining` at once.
async fn check_remaining(
    kind: Kind,
    strict: bool,
    s: &Scenario,
    label: &str,
    outcomes: &[Outcome],
    index: usize,
) -> Result<(), TestCaseError> {
    let remaining = outcomes[index].decision.remaining();
    let run = Run::replayed_to(kind, strict, s, label, outcomes, index).await?;
    let next = run.decide(remaining).await?;
    prop_assert!(
        next.is_allowed(),
        "{label}: request {index} allowed with remaining {remaining} ({:?}), \
         but a request of cost {remaining} at the same instant is denied: {next:?}",
        outcomes[index].decision,
    );
    Ok(())
}

/// Property 4: the algorithm's own bound, over every pair of admitted
/// times `first ≤ last`, on the cost admitted in `[first, last]`.
fn check_bounds(
    kind: Kind,
    s: &Scenario,
    label: &str,
    outcomes: &[Outcome],
) -> Result<(), TestCaseError> {
    let admitted: Vec<(i64, u64)> = outcomes
        .iter()
        .filter(|o| o.decision.is_allowed())
        .map(|o| (o.at, o.cost))
        .collect();
    let period = s.period_nanos();
    let limit = s.limit;
    // (the longest span checked, whether it is included, the bound)
    let (span, inclusive, bound) = match kind {
        // Shorter than one period: any `(t − period, t]`.
        Kind::SlidingLog => (period, false, limit),
        // At most one period.
        Kind::FixedWindow | Kind::SlidingWindow1 | Kind::SlidingWindow4 => {
            (period, true, 2 * limit)
        }
        Kind::TokenBucket | Kind::Gcra | Kind::HybridQuota => return Ok(()),
    };
    for &(first, _) in &admitted {
        for &(last, _) in admitted.iter().filter(|&&(at, _)| at >= first) {
            let length = last - first;
            if length > span || (length == span && !inclusive) {
                continue;
            }
            let cost: u64 = admitted
                .iter()
                .filter(|&&(at, _)| first <= at && at <= last)
                .map(|&(_, cost)| cost)
                .sum();
            prop_assert!(
                cost <= bound,
                "{label}: {cost} units admitted in [{first}, {last}] ({length} ns, \
                 period {period} ns), more than {bound}",
            );
        }
    }
    if kind == Kind::FixedWindow {
        for &(at, _) in &admitted {
            let window = at.div_euclid(period);
            let cost: u64 = admitted
                .iter()
                .filter(|&&(other, _)| other.div_euclid(period) == window)
                .map(|&(_, cost)| cost)
                .sum();
            prop_assert!(
                cost <= limit,
                "{label}: {cost} units admitted in the calendar window starting at {} \
                 (period {period} ns), more than {limit}",
                window * period,
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(common::proptest_config("all_properties", 96))]

    #[test]
    fn waiting_retry_after_admits_the_same_request(s in scenario()) {
        block_on(async {
            for (kind, strict) in variants(&s) {
                let label = label(kind, strict);
                let outcomes = Run::new(kind, strict, &s).replay(&s.requests).await?;
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
            for (kind, strict) in variants(&s) {
                check_monotone_in_cost(kind, strict, &s, &label(kind, strict)).await?;
            }
            Ok::<(), TestCaseError>(())
        })?;
    }

    #[test]
    fn the_remaining_reported_can_be_spent_at_once(s in scenario()) {
        block_on(async {
            for (kind, strict) in variants(&s) {
                let label = label(kind, strict);
                let outcomes = Run::new(kind, strict, &s).replay(&s.requests).await?;
                for index in 0..outcomes.len() {
                    let decision = outcomes[index].decision;
                    if decision.is_allowed() && decision.remaining() > 0 {
                        check_remaining(kind, strict, &s, &label, &outcomes, index).await?;
                    }
                }
            }
            Ok::<(), TestCaseError>(())
        })?;
    }

    #[test]
    fn admitted_requests_stay_within_each_algorithms_bound(s in scenario()) {
        block_on(async {
            for (kind, strict) in variants(&s) {
                let outcomes = Run::new(kind, strict, &s).replay(&s.requests).await?;
                check_bounds(kind, &s, &label(kind, strict), &outcomes)?;
            }
            Ok::<(), TestCaseError>(())
        })?;
    }
}
