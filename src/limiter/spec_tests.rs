//! One description, one validation: what the builders write into the spec,
//! and the same errors whether a limiter is built from a builder or a spec.

use std::sync::Arc;
use std::time::Duration;

use super::LimiterSpec;
use crate::algorithm::{Algorithm, CasPolicy, SlidingWindow, DEFAULT_SUB_WINDOWS, MAX_SUB_WINDOWS};
use crate::limiter::DeniedRequests;
use crate::quota::MAX_LIMIT;
use crate::store::{MemoryStore, Store};
use crate::{
    ConfigError, DiscreteRefill, FailurePolicy, FixedWindow, Gcra, HybridQuota, Quota, Sessionize,
    SlidingLog, TokenBucket,
};

fn store() -> Arc<dyn Store> {
    Arc::new(MemoryStore::new())
}

fn quota(text: &str) -> Quota {
    text.parse().unwrap()
}

fn field<T>(outcome: Result<T, ConfigError>) -> String {
    match outcome {
        Ok(_) => "built".to_owned(),
        Err(error) => error.field().to_owned(),
    }
}

#[test]
fn builder_setters_write_into_its_spec() {
    let cas = CasPolicy::new(4, Duration::from_micros(100), Duration::from_millis(2)).unwrap();
    let window = SlidingWindow::builder(quota("10/minute"), store())
        .sub_windows(6)
        .sealed_cache(0)
        .namespace("api")
        .deadline(Duration::from_millis(40))
        .max_clock_skew(Duration::from_secs(2))
        .strict(true)
        .on_failure(FailurePolicy::Closed);
    let spec = window.spec();
    assert_eq!(
        spec.algorithm(),
        Algorithm::SlidingWindow { sub_windows: 6 }
    );
    assert_eq!(spec.quota(), quota("10/minute"));
    assert_eq!(spec.sealed_cache, 0);
    assert_eq!(spec.namespace, "api");
    assert_eq!(spec.deadline, Duration::from_millis(40));
    assert_eq!(spec.max_clock_skew, Duration::from_secs(2));
    assert_eq!(spec.denied, DeniedRequests::Counted);
    assert_eq!(spec.failure_policy(), FailurePolicy::Closed);

    let bucket = TokenBucket::builder(quota("10/minute"), store())
        .capacity(3)
        .cas_policy(cas.clone());
    assert_eq!(
        bucket.spec().algorithm(),
        Algorithm::TokenBucket { capacity: Some(3) }
    );
    assert_eq!(bucket.spec().cas, cas);
    let gcra = Gcra::builder(quota("10/minute"), store()).burst(2);
    assert_eq!(gcra.spec().algorithm(), Algorithm::Gcra { burst: Some(2) });
    let smyte = DiscreteRefill::builder(quota("10/minute"), store())
        .restart_when_empty(true)
        .refill_amount(3);
    assert_eq!(
        smyte.spec().algorithm(),
        Algorithm::DiscreteRefill {
            refill: Some(3),
            restart_when_empty: true
        }
    );
    let sessions = Sessionize::builder(quota("10/minute"), store()).refill_amount(3);
    assert_eq!(
        sessions.spec().algorithm(),
        Algorithm::Sessionize { refill: Some(3) }
    );
    // Each builder starts from its algorithm with the builders' defaults.
    let defaults = [
        (
            FixedWindow::builder(quota("1/second"), store())
                .spec()
                .clone(),
            Algorithm::FixedWindow,
        ),
        (
            SlidingWindow::builder(quota("1/second"), store())
                .spec()
                .clone(),
            // One default sub-window count for the builder, the
            // configuration file and the command line.
            Algorithm::SlidingWindow {
                sub_windows: DEFAULT_SUB_WINDOWS,
            },
        ),
        (
            SlidingLog::builder(quota("1/second"), store())
                .spec()
                .clone(),
            Algorithm::SlidingLog,
        ),
        (
            HybridQuota::builder(quota("1/second"), store())
                .spec()
                .clone(),
            Algorithm::HybridQuota,
        ),
        (
            DiscreteRefill::builder(quota("1/second"), store())
                .spec()
                .clone(),
            Algorithm::DiscreteRefill {
                refill: None,
                restart_when_empty: false,
            },
        ),
        (
            Sessionize::builder(quota("1/second"), store())
                .spec()
                .clone(),
            Algorithm::Sessionize { refill: None },
        ),
    ];
    for (spec, algorithm) in defaults {
        let expected = LimiterSpec::new(algorithm, quota("1/second"));
        assert_eq!(format!("{spec:?}"), format!("{expected:?}"));
    }
}

#[test]
fn a_spec_and_its_builder_reject_the_same_settings_by_the_same_field() {
    let over = format!("{}/second", MAX_LIMIT + 1);
    let cases: Vec<(&str, LimiterSpec)> = vec![
        (
            "deadline",
            LimiterSpec::new(Algorithm::FixedWindow, quota("5/second")).deadline(Duration::ZERO),
        ),
        (
            "deadline",
            LimiterSpec::new(Algorithm::FixedWindow, quota("5/second"))
                .deadline(Duration::from_secs(61)),
        ),
        (
            "namespace",
            LimiterSpec::new(Algorithm::default(), quota("5/second")).namespace("has space"),
        ),
        (
            "limit",
            LimiterSpec::new(Algorithm::default(), quota(&over)),
        ),
        (
            "max_clock_skew",
            LimiterSpec::new(Algorithm::SlidingLog, quota("5/second"))
                .max_clock_skew(Duration::from_secs(61)),
        ),
        (
            "sub_windows",
            LimiterSpec::new(
                Algorithm::SlidingWindow {
                    sub_windows: MAX_SUB_WINDOWS + 1,
                },
                quota("5/hour"),
            ),
        ),
        (
            "sub_windows",
            LimiterSpec::new(
                Algorithm::SlidingWindow { sub_windows: 7 },
                quota("5/minute"),
            ),
        ),
        (
            "capacity",
            LimiterSpec::new(
                Algorithm::TokenBucket { capacity: Some(0) },
                quota("5/second"),
            ),
        ),
        (
            "burst",
            LimiterSpec::new(Algorithm::Gcra { burst: Some(0) }, quota("5/second")),
        ),
        (
            "refill_amount",
            LimiterSpec::new(
                Algorithm::DiscreteRefill {
                    refill: Some(0),
                    restart_when_empty: true,
                },
                quota("5/second"),
            ),
        ),
        (
            "refill_amount",
            LimiterSpec::new(Algorithm::Sessionize { refill: Some(0) }, quota("5/second")),
        ),
        (
            "limit",
            LimiterSpec::new(Algorithm::SlidingLog, quota("10001/hour")),
        ),
        (
            "failure_policy",
            LimiterSpec::new(Algorithm::HybridQuota, quota("5/second"))
                .on_failure(FailurePolicy::Fallback { share: 0.0 }),
        ),
    ];
    for (expected, spec) in cases {
        let from_spec = field(spec.build(store()));
        assert_eq!(from_spec, expected, "{spec:?}");
        // The same settings through the algorithm's own builder.
        let q = spec.quota();
        let from_builder = match spec.algorithm() {
            Algorithm::SlidingWindow { sub_windows } => field(
                same(SlidingWindow::builder(q, store()), &spec)
                    .sub_windows(sub_windows)
                    .build(),
            ),
            Algorithm::FixedWindow => field(same(FixedWindow::builder(q, store()), &spec).build()),
            Algorithm::TokenBucket { capacity } => field(
                same(TokenBucket::builder(q, store()), &spec)
                    .capacity(capacity.unwrap_or(q.limit()))
                    .build(),
            ),
            Algorithm::Gcra { burst } => field(
                same(Gcra::builder(q, store()), &spec)
                    .burst(burst.unwrap_or(q.limit()))
                    .build(),
            ),
            Algorithm::SlidingLog => field(same(SlidingLog::builder(q, store()), &spec).build()),
            Algorithm::HybridQuota => field(same(HybridQuota::builder(q, store()), &spec).build()),
            Algorithm::DiscreteRefill {
                refill,
                restart_when_empty,
            } => field(
                same(DiscreteRefill::builder(q, store()), &spec)
                    .refill_amount(refill.unwrap_or(q.limit()))
                    .restart_when_empty(restart_when_empty)
                    .build(),
            ),
            Algorithm::Sessionize { refill } => field(
                same(Sessionize::builder(q, store()), &spec)
                    .refill_amount(refill.unwrap_or(q.limit()))
                    .build(),
            ),
        };
        assert_eq!(from_builder, expected, "{spec:?}");
    }
}

/// `builder` with the shared settings of `spec`.
fn same<A>(builder: crate::LimiterBuilder<A>, spec: &LimiterSpec) -> crate::LimiterBuilder<A> {
    builder
        .namespace(spec.namespace.clone())
        .deadline(spec.deadline)
        .max_clock_skew(spec.max_clock_skew)
        .denied_requests(spec.denied)
        .on_failure(spec.failure)
}

#[tokio::test]
async fn with_quota_changes_the_quota_and_nothing_else() {
    let spec = LimiterSpec::new(Algorithm::Gcra { burst: Some(2) }, quota("5/second"))
        .namespace("plans")
        .on_failure(FailurePolicy::ReturnError);
    let pro = spec.clone().with_quota(quota("50/second"));
    assert_eq!(pro.quota(), quota("50/second"));
    assert_eq!(
        format!("{:?}", pro.clone().with_quota(quota("5/second"))),
        format!("{spec:?}")
    );
    let limiter = pro.build(store()).unwrap();
    assert_eq!(limiter.quota(), quota("50/second"));
    // The burst of 2 came along.
    assert!(limiter.check(b"alice").await.unwrap().is_allowed());
    assert!(limiter.check(b"alice").await.unwrap().is_allowed());
    assert!(limiter.check(b"alice").await.unwrap().is_denied());
}

#[test]
fn every_algorithm_is_found_by_its_name_and_printed_by_its_type() {
    for algorithm in Algorithm::ALL {
        assert_eq!(Algorithm::from_name(algorithm.name()), Some(algorithm));
    }
    let printed: Vec<String> = Algorithm::ALL.iter().map(ToString::to_string).collect();
    assert_eq!(
        printed,
        [
            "SlidingWindow n=4",
            "FixedWindow",
            "TokenBucket",
            "Gcra",
            "SlidingLog",
            "HybridQuota",
            "DiscreteRefill",
            "Sessionize"
        ]
    );
    assert_eq!(
        Algorithm::TokenBucket { capacity: Some(9) }.to_string(),
        "TokenBucket capacity=9"
    );
}
