//! Histories of requests replayed into a fresh limiter on a
//! [`MemoryStore`] driven by a [`ManualClock`], for the property tests:
//! the state a history leaves is had again by replaying the same history
//! into a fresh store and clock (`reset` would forget it).

use std::fmt::Debug;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use memcache_ratelimit::store::Store;
use memcache_ratelimit::{
    Clock, Decision, LimiterBuilder, ManualClock, MemoryStore, Quota, RateLimiter,
};
use proptest::prelude::*;

use super::T0;

/// The one client every history is sent for.
pub const CLIENT: &[u8] = b"prop-client";

/// `limit` per `period_ms` milliseconds.
pub fn quota(limit: u64, period_ms: u64) -> Quota {
    Quota::with_period(
        NonZeroU64::new(limit).unwrap(),
        Duration::from_millis(period_ms),
    )
    .unwrap()
}

/// `builder` in the default mode or in strict mode, reading `clock`, built.
pub fn build<A>(builder: LimiterBuilder<A>, strict: bool, clock: &ManualClock) -> RateLimiter {
    builder.strict(strict).clock(clock.clone()).build().unwrap()
}

/// An algorithm and mode in messages: `Gcra`, `Gcra strict`.
pub fn label(kind: impl Debug, strict: bool) -> String {
    format!("{kind:?}{}", if strict { " strict" } else { "" })
}

/// How far the clock moves before a request.
pub trait Gap: Copy {
    /// The nanoseconds to move forward from `now` (unix ns).
    fn nanos_from(self, now: i64) -> u64;
}

/// A number of nanoseconds.
impl Gap for u64 {
    fn nanos_from(self, _now: i64) -> u64 {
        self
    }
}

/// A request of a history: the clock moves by `gap`, then `cost` is asked.
#[derive(Debug, Clone, Copy)]
pub struct Request<G> {
    pub gap: G,
    pub cost: u64,
}

/// A request after a gap drawn from `gap`, of cost 1 more often than not,
/// else of any cost up to `top`.
pub fn request<G: Debug + Clone>(
    gap: impl Strategy<Value = G>,
    top: u64,
) -> impl Strategy<Value = Request<G>> {
    let cost = prop_oneof![3 => Just(1u64), 2 => 1..=top];
    (gap, cost).prop_map(|(gap, cost)| Request { gap, cost })
}

/// One decision, as it happened.
#[derive(Debug, Clone, Copy)]
pub struct Outcome {
    pub at: i64,
    pub cost: u64,
    pub decision: Decision,
}

/// A fresh limiter on a fresh store, with the clock at a scenario's start.
pub struct Run {
    pub clock: ManualClock,
    pub limiter: RateLimiter,
}

impl Run {
    /// The clock `offset` ns after [`T0`], and the limiter `build` makes on
    /// a fresh [`MemoryStore`] reading it.
    pub fn new(
        offset: u64,
        build: impl FnOnce(Arc<dyn Store>, &ManualClock) -> RateLimiter,
    ) -> Self {
        let clock = ManualClock::from_unix_secs(T0);
        clock.advance(Duration::from_nanos(offset));
        let store = Arc::new(MemoryStore::with_clock(clock.clone()));
        let limiter = build(store, &clock);
        Self { clock, limiter }
    }

    pub fn now_nanos(&self) -> i64 {
        self.clock.now().timestamp_nanos_opt().unwrap()
    }

    pub fn advance(&self, gap: impl Gap) {
        let by = gap.nanos_from(self.now_nanos());
        self.clock.advance(Duration::from_nanos(by));
    }

    pub async fn decide(&self, cost: u64) -> Result<Decision, TestCaseError> {
        self.limiter
            .check_n(CLIENT, cost)
            .await
            .map_err(|e| TestCaseError::fail(format!("check_n({cost}) failed: {e}")))
    }

    pub async fn send<G: Gap>(&self, request: &Request<G>) -> Result<Outcome, TestCaseError> {
        self.advance(request.gap);
        let decision = self.decide(request.cost).await?;
        Ok(Outcome {
            at: self.now_nanos(),
            cost: request.cost,
            decision,
        })
    }

    pub async fn replay<G: Gap>(
        &self,
        requests: &[Request<G>],
    ) -> Result<Vec<Outcome>, TestCaseError> {
        let mut outcomes = Vec::with_capacity(requests.len());
        for r in requests {
            outcomes.push(self.send(r).await?);
        }
        Ok(outcomes)
    }

    /// This (fresh) run with the history up to and including `index`
    /// replayed, checked to have decided request `index` as `original` did.
    pub async fn replayed_to<G: Gap>(
        self,
        requests: &[Request<G>],
        label: &str,
        original: &[Outcome],
        index: usize,
    ) -> Result<Self, TestCaseError> {
        let replayed = self.replay(&requests[..=index]).await?;
        prop_assert_eq!(
            replayed[index].decision,
            original[index].decision,
            "{}: replay is not deterministic",
            label
        );
        Ok(self)
    }
}

/// Runs `check` on every `(kind, strict)` of `variants`, with its label,
/// on a runtime of its own.
pub fn check_variants<K: Copy + Debug>(
    variants: impl IntoIterator<Item = (K, bool)>,
    check: impl AsyncFn(K, bool, &str) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    super::block_on(async {
        for (kind, strict) in variants {
            check(kind, strict, &label(kind, strict)).await?;
        }
        Ok(())
    })
}

/// For the denial at `index` of `outcomes`: on `fresh`, the history up to
/// it replayed, waiting exactly its `retry_after` admits the same request.
/// Returns the wait.
pub async fn retry_after_admits<G: Gap>(
    fresh: Run,
    requests: &[Request<G>],
    label: &str,
    outcomes: &[Outcome],
    index: usize,
) -> Result<Duration, TestCaseError> {
    let denied = outcomes[index];
    let Some(wait) = denied.decision.retry_after() else {
        return Err(TestCaseError::fail(format!(
            "{label}: request {index} denied without a retry_after"
        )));
    };
    let run = fresh.replayed_to(requests, label, outcomes, index).await?;
    run.clock.advance(wait);
    let again = run.decide(denied.cost).await?;
    prop_assert!(
        again.is_allowed(),
        "{label}: request {index} of cost {} denied again after its retry_after {wait:?}: \
         first {:?}, then {again:?}",
        denied.cost,
        denied.decision,
    );
    Ok(wait)
}

/// Every cost in `1..=top`, each on a `fresh` run from the state the whole
/// history leaves, `probe_gap` after its last request: the costs allowed
/// are exactly `1..=k` for some `k`.
pub async fn check_monotone_in_cost<G: Gap>(
    fresh: impl Fn() -> Run,
    requests: &[Request<G>],
    probe_gap: G,
    top: u64,
    label: &str,
) -> Result<(), TestCaseError> {
    let mut allowed = Vec::new();
    for cost in 1..=top {
        let run = fresh();
        run.replay(requests).await?;
        run.advance(probe_gap);
        allowed.push(run.decide(cost).await?.is_allowed());
    }
    let cut = allowed.iter().position(|a| !a).unwrap_or(allowed.len());
    prop_assert!(
        allowed[cut..].iter().all(|a| !a),
        "{label}: allowed by cost 1..={top}: {allowed:?}",
    );
    Ok(())
}
