//! Property tests for [`Sessionize`], Smyte's sessionizing bucket, through
//! the public API on a [`MemoryStore`], against the model of Smyte's rules
//! in [`crate::smyte_model`] as `RL.SESSIONIZE` runs them
//! (`RateLimitHandler.cpp`: always strict, the refill mark restarted when a
//! reduction leaves the bucket empty, the session start moved to the
//! client's time when `available ≥ take`).
//!
//! Proptest draws the histories of [`scenario`]; the limiter's
//! `DeniedRequests` comes from its strict flag and must change nothing, and
//! its restart flag does not apply. For every request the limiter and
//! the model must agree on allowed or denied, on `remaining` and on the
//! session start; every `reset_after`, and a denial's `retry_after`, are
//! checked on the model: waiting them out gets the bucket full / the
//! request through, and 1 ns less does not.
//!
//! The model leaves the refill mark where it is when an emptied bucket's
//! event is older than the mark (the library never moves a mark back;
//! Smyte's would).
//!
//! The store's items never expire here (its clock stands still), so the
//! state is never forgotten.

use crate::common;

use std::sync::Arc;

use common::T0;
use memcache_ratelimit::{ManualClock, MemoryStore, Quota, RateLimiter, Sessionize};
use proptest::prelude::*;

use crate::smyte_model::{self, scenario, Model, Scenario};

const CLIENT: &[u8] = b"sessions";

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

async fn agrees(s: &Scenario) -> Result<(), TestCaseError> {
    let clock = ManualClock::from_unix_secs(T0);
    // Always strict and restarting, whatever the limiter is told.
    smyte_model::agrees(
        s,
        &limiter(s, &clock),
        &clock,
        Model::new(s.max, s.refill, s.period_ms, true, true),
        true,
    )
    .await
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
