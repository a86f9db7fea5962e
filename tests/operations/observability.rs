//! What a limiter tells an operator: `tracing` spans and events for
//! decisions, store failures, compare-and-swap retries and fallbacks, and
//! the counts a service exports (`LimiterStats`, and through the `metrics`
//! facade with the `metrics` feature).

use crate::common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::faults::LosingCas;
use memcache_ratelimit::algorithm::CasPolicy;
use memcache_ratelimit::{
    FailurePolicy, Gcra, ManualClock, MemoryStore, RateLimiter, SlidingWindow,
};

/// Everything the subscriber wrote, as text.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }

    fn lines_with(&self, needle: &str) -> Vec<String> {
        self.text()
            .lines()
            .filter(|line| line.contains(needle))
            .map(str::to_owned)
            .collect()
    }
}

impl Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `test` on a current-thread runtime with a subscriber that writes
/// every event at trace level, with its spans, into the returned text.
fn traced<F: std::future::Future<Output = ()>>(test: impl FnOnce() -> F) -> Captured {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(test())
    });
    captured
}

/// A sliding window of 2 per minute on the embedded store, at `T0`.
fn two_per_minute() -> RateLimiter {
    let clock = ManualClock::from_unix_secs(common::T0);
    SlidingWindow::builder(
        "2/minute".parse().unwrap(),
        Arc::new(MemoryStore::with_clock(clock.clone())),
    )
    .clock(clock)
    .build()
    .unwrap()
}

#[test]
fn every_decision_is_a_span_with_its_outcome() {
    let limiter = two_per_minute();
    let log = traced(|| async {
        for _ in 0..3 {
            limiter.check(b"alice\r\nflush_all").await.unwrap();
        }
    });
    let decided = log.lines_with("decided");
    assert_eq!(decided.len(), 3, "{}", log.text());
    for line in &decided {
        assert!(
            line.contains(
                "rate_limit{algorithm=\"sliding_window\" client=alice\\x0d\\x0aflush_all cost=1}"
            ),
            "{line}"
        );
    }
    assert!(
        decided[1].contains("allowed=true remaining=0"),
        "{}",
        decided[1]
    );
    assert!(decided[2].contains("allowed=false"), "{}", decided[2]);
    let stats = limiter.stats();
    assert_eq!((stats.allowed, stats.denied, stats.errors), (2, 1, 0));
}

#[test]
fn compare_and_swap_retries_are_events_and_counted() {
    let clock = ManualClock::from_unix_secs(common::T0);
    let losing = Arc::new(LosingCas::new(Arc::new(MemoryStore::with_clock(
        clock.clone(),
    ))));
    let limiter = Gcra::builder("10/minute".parse().unwrap(), losing.clone())
        .clock(clock)
        .cas_policy(
            CasPolicy::new(4, Duration::from_micros(10), Duration::from_micros(100)).unwrap(),
        )
        .build()
        .unwrap();
    let log = traced(|| async {
        losing.lose_next(2);
        assert!(limiter.check(b"bob").await.unwrap().is_allowed());
    });
    let retries = log.lines_with("compare-and-swap conflict; retrying");
    assert_eq!(retries.len(), 2, "{}", log.text());
    assert!(retries[0].contains("DEBUG"), "{}", retries[0]);
    assert!(retries[0].contains("key=rl:bob_gcra-"), "{}", retries[0]);
    assert_eq!(limiter.stats().cas_retries, 2);
    assert_eq!(limiter.stats().allowed, 1);
}

#[test]
fn store_failures_and_fallbacks_are_warnings_and_counted() {
    let log = traced(|| async {
        // Nothing listens on port 1: a real connection refused, at once.
        let store = common::refusing_store().await;
        let limiter = SlidingWindow::builder("4/minute".parse().unwrap(), store)
            .on_failure(FailurePolicy::Fallback { share: 0.5 })
            .deadline(Duration::from_secs(2))
            .build()
            .unwrap();
        let mut allowed = 0;
        for _ in 0..3 {
            let decision = limiter.check(b"carol").await.unwrap();
            assert!(decision.under_failure());
            allowed += u64::from(decision.is_allowed());
        }
        assert_eq!(allowed, 2);
        let stats = limiter.stats();
        assert_eq!((stats.allowed, stats.denied), (2, 1));
        assert_eq!(stats.failures.fallbacks, 3);
        assert_eq!(stats.failures.store_errors, 3);
    });
    let absorbed = log.lines_with("store failure absorbed by the failure policy");
    assert_eq!(absorbed.len(), 3, "{}", log.text());
    assert!(absorbed.iter().all(|line| line.contains("WARN")));
}

/// A counter as exported: name, labels, value.
#[cfg(feature = "metrics")]
type Exported = (String, Vec<(String, String)>, u64);

#[cfg(feature = "metrics")]
#[test]
fn stats_are_exported_through_the_metrics_facade() {
    use metrics_util::debugging::{DebugValue, DebuggingRecorder};

    let limiter = two_per_minute();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        for _ in 0..5 {
            limiter.check(b"dave").await.unwrap();
        }
        assert!(limiter.check_n(b"dave", 3).await.is_err());
    });
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    metrics::with_local_recorder(&recorder, || limiter.stats().record("api"));
    let counters: Vec<Exported> = snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .filter_map(|(key, _, _, value)| match value {
            DebugValue::Counter(n) => {
                let key = key.key();
                let labels = key
                    .labels()
                    .map(|l| (l.key().to_owned(), l.value().to_owned()))
                    .collect();
                Some((key.name().to_owned(), labels, n))
            }
            _ => None,
        })
        .collect();
    let value = |name: &str, extra: Option<(&str, &str)>| {
        counters
            .iter()
            .find(|(n, labels, _)| {
                n == name
                    && labels.contains(&("limiter".into(), "api".into()))
                    && extra.is_none_or(|(k, v)| labels.contains(&(k.into(), v.into())))
            })
            .map(|c| c.2)
    };
    assert_eq!(
        value("ratelimit_decisions_total", Some(("outcome", "allowed"))),
        Some(2)
    );
    assert_eq!(
        value("ratelimit_decisions_total", Some(("outcome", "denied"))),
        Some(3)
    );
    assert_eq!(value("ratelimit_errors_total", None), Some(1));
    assert_eq!(value("ratelimit_cas_retries_total", None), Some(0));
    assert_eq!(value("ratelimit_fallbacks_total", None), Some(0));
}
