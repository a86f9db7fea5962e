//! Property tests for [`DiscreteRefill`], Smyte's token bucket with
//! discrete refills, through the public API on a [`MemoryStore`], against
//! the model of Smyte's rules in [`crate::smyte_model`].
//!
//! Proptest draws the histories of [`scenario`] (events from the past
//! through [`check_at`](memcache_ratelimit::RateLimiter::check_at)
//! included). For every
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
use memcache_ratelimit::{DiscreteRefill, ManualClock, MemoryStore, Quota, RateLimiter};
use proptest::prelude::*;

use crate::smyte_model::{self, scenario, Model, Scenario};

const CLIENT: &[u8] = b"smyte";

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

async fn agrees(s: &Scenario) -> Result<(), TestCaseError> {
    let clock = ManualClock::from_unix_secs(T0);
    smyte_model::agrees(
        s,
        &limiter(s, &clock),
        &clock,
        Model::new(s.max, s.refill, s.period_ms, s.strict, s.restart),
        false,
    )
    .await
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
