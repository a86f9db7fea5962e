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

use common::replay::{self, Outcome, Run};
use memcache_ratelimit::{
    FixedWindow, Gcra, HybridQuota, Quota, SlidingLog, SlidingWindow, TokenBucket,
};
use proptest::collection::vec;
use proptest::prelude::*;

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

impl replay::Gap for Gap {
    fn nanos_from(self, now: i64) -> u64 {
        match self {
            Gap::By(nanos) => nanos,
            Gap::Boundary { grid, nudge } => {
                let grid = i64::try_from(grid).unwrap();
                let next = (now.div_euclid(grid) + 1) * grid + i64::from(nudge);
                // The next boundary is at least 1 ns away, so `next ≥ now`.
                u64::try_from(next - now).unwrap()
            }
        }
    }
}

type Request = replay::Request<Gap>;

#[derive(Debug, Clone)]
struct Scenario {
    limit: u64,
    period_ms: u64,
    /// Where the clock starts after `T0`, in nanoseconds.
    offset: u64,
    requests: Vec<Request>,
    /// The gap before the cost probes of the monotonicity property.
    probe_gap: Gap,
}

impl Scenario {
    fn quota(&self) -> Quota {
        replay::quota(self.limit, self.period_ms)
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
        let request = replay::request(gap(), limit);
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

/// A fresh limiter of `kind` on a fresh store, with the clock at the
/// scenario's start.
fn run(kind: Kind, strict: bool, s: &Scenario) -> Run {
    let quota = s.quota();
    Run::new(s.offset, |store, clock| match kind {
        Kind::FixedWindow => replay::build(FixedWindow::builder(quota, store), strict, clock),
        Kind::SlidingWindow1 | Kind::SlidingWindow4 => {
            let n = if kind == Kind::SlidingWindow1 { 1 } else { 4 };
            replay::build(
                SlidingWindow::builder(quota, store).sub_windows(n),
                strict,
                clock,
            )
        }
        Kind::TokenBucket => replay::build(TokenBucket::builder(quota, store), strict, clock),
        Kind::Gcra => replay::build(Gcra::builder(quota, store), strict, clock),
        Kind::SlidingLog => replay::build(SlidingLog::builder(quota, store), strict, clock),
        Kind::HybridQuota => replay::build(HybridQuota::builder(quota, store), strict, clock),
    })
}

/// Property 3, for the admission at `index` reporting `remaining > 0`: on
/// a fresh replay up to it, a request of cost `remaining` at once.
async fn check_remaining(
    fresh: Run,
    s: &Scenario,
    label: &str,
    outcomes: &[Outcome],
    index: usize,
) -> Result<(), TestCaseError> {
    let remaining = outcomes[index].decision.remaining();
    let run = fresh
        .replayed_to(&s.requests, label, outcomes, index)
        .await?;
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

    /// Property 1, for every denial: on a fresh replay of the history up
    /// to it, waits exactly `retry_after` and asks again.
    #[test]
    fn waiting_retry_after_admits_the_same_request(s in scenario()) {
        replay::check_variants(variants(&s), async |kind, strict, label| {
            let outcomes = run(kind, strict, &s).replay(&s.requests).await?;
            for index in 0..outcomes.len() {
                if outcomes[index].decision.is_denied() {
                    let fresh = run(kind, strict, &s);
                    replay::retry_after_admits(fresh, &s.requests, label, &outcomes, index)
                        .await?;
                }
            }
            Ok(())
        })?;
    }

    /// Property 2: every cost in `1..=limit`, each from the state the
    /// whole history leaves, `probe_gap` after its last request.
    #[test]
    fn decisions_are_monotone_in_cost(s in scenario()) {
        replay::check_variants(variants(&s), async |kind, strict, label| {
            let fresh = || run(kind, strict, &s);
            replay::check_monotone_in_cost(fresh, &s.requests, s.probe_gap, s.limit, label)
                .await
        })?;
    }

    #[test]
    fn the_remaining_reported_can_be_spent_at_once(s in scenario()) {
        replay::check_variants(variants(&s), async |kind, strict, label| {
            let outcomes = run(kind, strict, &s).replay(&s.requests).await?;
            for index in 0..outcomes.len() {
                let decision = outcomes[index].decision;
                if decision.is_allowed() && decision.remaining() > 0 {
                    check_remaining(run(kind, strict, &s), &s, label, &outcomes, index).await?;
                }
            }
            Ok(())
        })?;
    }

    #[test]
    fn admitted_requests_stay_within_each_algorithms_bound(s in scenario()) {
        replay::check_variants(variants(&s), async |kind, strict, label| {
            let outcomes = run(kind, strict, &s).replay(&s.requests).await?;
            check_bounds(kind, &s, label, &outcomes)
        })?;
    }
}
