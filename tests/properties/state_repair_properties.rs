//! Whatever a compare-and-swap algorithm's key holds (arbitrary bytes,
//! extreme numbers, times far ahead or far behind, plausible encodings
//! with wrong values, too many log entries), its decisions stay within the
//! policy: no announced wait beyond the policy's horizon, every
//! `retry_after` true, and no more admitted in a period than a fresh
//! client could get. See `common::states` for the bounds and why.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::states::{self, Algorithm};
use common::{block_on, replay, T0};
use memcache_ratelimit::store::{MemoryStore, PutCondition, Store};
use memcache_ratelimit::{Clock, ManualClock};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;

const NANOS: i64 = 1_000_000_000;
const NOW: i64 = T0 * NANOS;
const CENTURY: i64 = 100 * 365 * 86_400 * NANOS;

/// A time (unix ns) as text, extreme or near the limiter's now, or a
/// number that is no `i64` at all.
fn time() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(i64::MIN.to_string()),
        Just(i64::MAX.to_string()),
        Just(u64::MAX.to_string()),
        Just("-1".to_string()),
        Just("0".to_string()),
        Just((NOW + CENTURY).to_string()),
        Just((NOW - CENTURY).to_string()),
        (-20 * NANOS..20 * NANOS).prop_map(|offset| (NOW + offset).to_string()),
        any::<i64>().prop_map(|n| n.to_string()),
    ]
}

/// A token or bucket count as text, in range or not.
fn count() -> impl Strategy<Value = String> {
    prop_oneof![
        (-10.0f64..10.0).prop_map(|n| n.to_string()),
        (-10i64..=10).prop_map(|n| n.to_string()),
        Just("NaN".to_string()),
        Just("inf".to_string()),
        Just("-1e300".to_string()),
        Just(u64::MAX.to_string()),
        Just(i64::MIN.to_string()),
    ]
}

/// A time for the log's oldest entry.
fn first_entry() -> impl Strategy<Value = i64> {
    prop_oneof![
        Just(i64::MIN),
        Just(i64::MAX),
        Just(0),
        Just(NOW + CENTURY),
        Just(NOW - CENTURY),
        (-20 * NANOS..20 * NANOS).prop_map(|offset| NOW + offset),
        any::<i64>(),
    ]
}

/// What the key holds: bytes, or the algorithm's own encoding with any
/// values in it.
fn stored(algorithm: Algorithm) -> BoxedStrategy<Vec<u8>> {
    let bytes = proptest::collection::vec(any::<u8>(), 1..40);
    let encoded = match algorithm {
        Algorithm::Gcra { .. } => prop_oneof![
            time().prop_map(|t| t.into_bytes()),
            (-20 * NANOS..20 * NANOS).prop_map(|offset| states::gcra_at(NOW + offset)),
            Just(states::gcra(i128::MAX)),
            Just(states::gcra(i128::MIN)),
            any::<i128>().prop_map(states::gcra),
        ]
        .boxed(),
        Algorithm::TokenBucket { .. } => (count(), time())
            .prop_map(|(tokens, updated)| states::token_bucket(&tokens, &updated))
            .boxed(),
        Algorithm::SlidingLog => (
            first_entry(),
            proptest::collection::vec(
                prop_oneof![Just(0u64), 0..20 * NANOS as u64, Just(u64::MAX)],
                0..9,
            ),
        )
            .prop_map(|(first, distances)| states::sliding_log(first, &distances))
            .boxed(),
        Algorithm::HybridQuota => (prop_oneof![Just('b'), Just('s')], count(), time())
            .prop_map(|(mode, bucket, time)| states::hybrid_quota(mode, &bucket, &time))
            .boxed(),
        Algorithm::DiscreteRefill { .. } => {
            let tokens = prop_oneof![(0u64..=10).prop_map(|n| n.to_string()), count()];
            let tag = prop_oneof![4 => Just("dr1"), 1 => Just("dr2")];
            (tag, tokens, time())
                .prop_map(|(tag, tokens, mark)| format!("{tag} {tokens} {mark}").into_bytes())
                .boxed()
        }
        Algorithm::Sessionize { .. } => {
            let tokens = prop_oneof![(0u64..=10).prop_map(|n| n.to_string()), count()];
            let tag = prop_oneof![4 => Just("ds1"), 1 => Just("dr1")];
            (tag, tokens, time(), time())
                .prop_map(|(tag, tokens, mark, start)| {
                    format!("{tag} {tokens} {mark} {start}").into_bytes()
                })
                .boxed()
        }
        window => states::not_cas(window),
    };
    prop_oneof![1 => bytes, 4 => encoded].boxed()
}

/// Gaps between requests, in milliseconds: bursts and pauses.
fn gaps() -> impl Strategy<Value = Vec<u64>> {
    proptest::collection::vec(prop_oneof![Just(0u64), 1..500u64, 500..4_000u64], 1..40)
}

/// Writes `value` at a client's key, then sends requests of cost 1: after
/// each admission the next comes after the next gap, after each denial
/// exactly its `retry_after` later, which must admit it.
async fn run(
    algorithm: Algorithm,
    strict: bool,
    value: &[u8],
    gaps: &[u64],
) -> Result<(), TestCaseError> {
    let label = format!("{} on {value:?}", replay::label(algorithm, strict));
    let clock = ManualClock::from_unix_secs(T0);
    let store: Arc<dyn Store> = Arc::new(MemoryStore::with_clock(clock.clone()));
    let limiter = states::build(algorithm, store.clone(), &clock, strict);
    let client = b"client";
    let key = limiter.inspect(client).await.unwrap().keys.remove(0).key;
    store
        .put(
            key.as_bytes(),
            value,
            Duration::from_secs(86_400),
            PutCondition::Always,
        )
        .await
        .unwrap();
    let horizon = states::horizon(algorithm);
    let period_ends = NOW + states::PERIOD.as_nanos() as i64;
    let mut admitted_in_first_period = 0;
    let mut denied_before = false;
    for &gap in gaps {
        let now = clock.unix_nanos().unwrap();
        let decision = limiter
            .check(client)
            .await
            .map_err(|e| TestCaseError::fail(format!("{label}: {e}")))?;
        prop_assert!(!decision.under_failure(), "{}: {:?}", label, decision);
        prop_assert!(
            decision.reset_after() <= horizon
                && decision.retry_after().unwrap_or_default() <= horizon,
            "{}: at +{} ns, {:?} beyond the horizon {:?}",
            label,
            now - NOW,
            decision,
            horizon
        );
        prop_assert!(
            !(denied_before && decision.is_denied()),
            "{}: at +{} ns, denied again after waiting the retry_after: {:?}",
            label,
            now - NOW,
            decision
        );
        if decision.is_allowed() && now < period_ends {
            admitted_in_first_period += 1;
        }
        denied_before = decision.is_denied();
        match decision.retry_after() {
            Some(retry) if decision.is_denied() => clock.advance(retry),
            _ => clock.advance(Duration::from_millis(gap)),
        }
    }
    prop_assert!(
        admitted_in_first_period <= states::most_admitted_in_a_period(algorithm),
        "{}: {} admitted in the first period, more than {}",
        label,
        admitted_in_first_period,
        states::most_admitted_in_a_period(algorithm)
    );
    prop_assert!(limiter.stats().failures.repaired <= 1, "{}", label);
    Ok(())
}

macro_rules! property {
    ($name:ident, $algorithm:expr) => {
        proptest! {
            #![proptest_config(common::proptest_config("state_repair_properties", 1_024))]

            #[test]
            fn $name(
                value in stored($algorithm),
                strict in any::<bool>(),
                gaps in gaps(),
            ) {
                block_on(run($algorithm, strict, &value, &gaps))?;
            }
        }
    };
}

property!(gcra_decides_within_bounds_on_any_stored_value, states::GCRA);
property!(
    token_bucket_decides_within_bounds_on_any_stored_value,
    states::TOKEN_BUCKET
);
property!(
    sliding_log_decides_within_bounds_on_any_stored_value,
    states::SLIDING_LOG
);
property!(
    hybrid_quota_decides_within_bounds_on_any_stored_value,
    states::HYBRID_QUOTA
);
property!(
    discrete_refill_decides_within_bounds_on_any_stored_value,
    states::DISCRETE_REFILL
);
property!(
    sessionize_decides_within_bounds_on_any_stored_value,
    states::SESSIONIZE
);
