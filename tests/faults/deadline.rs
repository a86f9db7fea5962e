//! A decision never hangs on a store that does not answer: past the
//! limiter's deadline the caller gets an error.

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::memcached::{patient_store, Memcached};
use memcache_ratelimit::limiter::DEFAULT_DEADLINE;
use memcache_ratelimit::{
    Error, FailurePolicy, FixedWindow, LimiterBuilder, RateLimiter, SlidingWindow,
};

#[test]
fn the_default_deadline_is_at_most_100_ms() {
    assert!(DEFAULT_DEADLINE <= Duration::from_millis(100));
}

#[tokio::test]
async fn a_hung_memcached_yields_a_deadline_error_not_a_hang() {
    let server = Memcached::start();
    // The store's own timeout is long, so only the limiter's deadline can
    // end the wait.
    let store = patient_store(vec![server.address()]).await;
    let deadline = Duration::from_millis(50);
    let limiters: Vec<RateLimiter> = vec![
        FixedWindow::builder("10/minute".parse().unwrap(), store.clone())
            .deadline(deadline)
            .on_failure(FailurePolicy::ReturnError)
            .build()
            .unwrap(),
        SlidingWindow::builder("10/minute".parse().unwrap(), store.clone())
            .sub_windows(4)
            .deadline(deadline)
            .on_failure(FailurePolicy::ReturnError)
            .build()
            .unwrap(),
    ];
    for limiter in &limiters {
        assert!(limiter.check(b"warm").await.unwrap().is_allowed());
    }

    server.signal("STOP");
    for limiter in &limiters {
        let started = Instant::now();
        let outcome = limiter.check(b"warm").await;
        let waited = started.elapsed();
        assert!(
            matches!(outcome, Err(Error::DeadlineExceeded(d)) if d == deadline),
            "{outcome:?}"
        );
        eprintln!("hung memcached: deadline {deadline:?}, waited {waited:?}");
        // Far below the store's 5 s timeout: the deadline ended it.
        assert!(waited < Duration::from_secs(2), "waited {waited:?}");
    }
    server.signal("CONT");
    for limiter in &limiters {
        assert!(limiter.check(b"after").await.unwrap().is_allowed());
    }
}

#[test]
fn invalid_deadlines_are_rejected_when_built() {
    let store = Arc::new(memcache_ratelimit::MemoryStore::new());
    for bad in [Duration::ZERO, Duration::from_secs(61)] {
        let built = FixedWindow::builder("1/minute".parse().unwrap(), store.clone())
            .deadline(bad)
            .build();
        assert_eq!(built.unwrap_err().field(), "deadline");
    }
    let _: LimiterBuilder<_> = FixedWindow::builder("1/minute".parse().unwrap(), store);
}
