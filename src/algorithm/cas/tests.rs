//! The optimistic loop and local combining, on a counting core.

use std::sync::Arc;
use std::time::Duration;

use super::combining::Answer;
use super::core::*;
use super::optimistic::*;
use super::policy::*;
use crate::algorithm::settings::{DeniedRequests, Settings};
use crate::decision::Decision;
use crate::error::StoreError;
use crate::store::{PutCondition, PutOutcome, Store};
use crate::{Clock, MemoryStore, SystemClock};
use std::future::Future;
use std::panic::{self, AssertUnwindSafe};
use std::task::Poll;

pub(super) fn now() -> i64 {
    SystemClock.unix_nanos().unwrap()
}

/// A counter up to `limit`; a cost of `PANIC` panics, as a buggy core
/// would.
#[derive(Debug)]
pub(super) struct Count {
    pub(super) limit: u64,
}

const PANIC: u64 = 999;

impl CasCore for Count {
    type State = u64;

    fn capacity(&self) -> u64 {
        1_000
    }

    fn suffix(&self) -> &str {
        "count"
    }

    fn encode(&self, used: &u64) -> Vec<u8> {
        used.to_string().into_bytes()
    }

    fn decode(&self, bytes: &[u8]) -> Option<u64> {
        std::str::from_utf8(bytes).ok()?.parse().ok()
    }

    fn repair(&self, used: &mut u64, _now: i64, _skew: i64) -> bool {
        let over = *used > self.limit;
        *used = (*used).min(self.limit);
        over
    }

    fn decide(&self, state: Option<&u64>, ask: Ask) -> Step<u64> {
        assert_ne!(ask.cost, PANIC, "a core bug");
        let used = state.copied().unwrap_or(0);
        let allowed = used + ask.cost <= self.limit;
        let after = if allowed { used + ask.cost } else { used };
        let remaining = self.limit.saturating_sub(after);
        let minute = Duration::from_secs(60);
        Step {
            decision: if allowed {
                Decision::allowed(self.limit, remaining, minute)
            } else {
                Decision::denied(self.limit, remaining, minute, minute)
            },
            delay: Duration::ZERO,
            write: allowed.then_some((after, minute)),
        }
    }

    fn refund(&self, state: Option<&u64>, ask: Ask) -> Step<u64> {
        let used = state.copied().unwrap_or(0);
        let after = used.saturating_sub(ask.cost);
        let minute = Duration::from_secs(60);
        Step {
            decision: Decision::allowed(self.limit, self.limit.saturating_sub(after), minute),
            delay: Duration::ZERO,
            write: (after != used).then_some((after, minute)),
        }
    }
}

/// A [`MemoryStore`] whose reads and writes each wait once, as a
/// round trip to memcached would, so requests for a key overlap; or whose
/// reads never answer (`reads_hang`), as a memcached that hangs.
#[derive(Debug, Default)]
pub(super) struct Waiting {
    store: MemoryStore,
    reads_hang: bool,
}

#[async_trait::async_trait]
impl Store for Waiting {
    async fn increment(
        &self,
        key: &[u8],
        delta: u64,
        ttl: Duration,
        also_read: &[&[u8]],
    ) -> Result<crate::store::Counters, StoreError> {
        self.store.increment(key, delta, ttl, also_read).await
    }

    async fn decrement(&self, key: &[u8], delta: u64) -> Result<Option<u64>, StoreError> {
        self.store.decrement(key, delta).await
    }

    async fn get_counters(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<u64>>, StoreError> {
        self.store.get_counters(keys).await
    }

    async fn get(&self, key: &[u8]) -> Result<Option<crate::store::Versioned>, StoreError> {
        if self.reads_hang {
            std::future::pending::<()>().await;
        }
        tokio::task::yield_now().await;
        self.store.get(key).await
    }

    /// Tells no version, so every decision on it reads, as its tests of
    /// groups and attempts count on.
    async fn put_versioned(
        &self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
        condition: PutCondition,
    ) -> Result<(PutOutcome, Option<u64>), StoreError> {
        tokio::task::yield_now().await;
        let outcome = self.store.put(key, value, ttl, condition).await?;
        Ok((outcome, None))
    }

    async fn delete(&self, keys: &[Vec<u8>]) -> Result<usize, StoreError> {
        self.store.delete(keys).await
    }
}

/// `core` on `store`, at 10 a minute, denied requests refunded.
pub(super) fn limiter_on<C: CasCore>(store: Arc<dyn Store>, core: C) -> Arc<CasLimiter<C>> {
    limiter_with(store, core, CasPolicy::default())
}

/// [`limiter_on`], with `policy`.
pub(super) fn limiter_with<C: CasCore>(
    store: Arc<dyn Store>,
    core: C,
    policy: CasPolicy,
) -> Arc<CasLimiter<C>> {
    let settings = Settings {
        quota: "10/minute".parse().unwrap(),
        store,
        keys: crate::key::KeySpace::default(),
        deadline: crate::timer::TimerQueue::new(Duration::from_secs(10)),
        denied: DeniedRequests::Refunded,
        max_clock_skew: Duration::from_secs(1),
        repairs: Arc::default(),
        clock: Arc::new(crate::clock::SystemClock),
    };
    Arc::new(CasLimiter::new(settings, core, policy))
}

/// On a store that waits like memcached.
fn limiter(limit: u64) -> Arc<CasLimiter<Count>> {
    limiter_on(Arc::new(Waiting::default()), Count { limit })
}

fn keys_in_flight(limiter: &CasLimiter<Count>) -> usize {
    limiter.engine.combiner.keys_in_flight()
}

/// Spawns `costs.len()` requests for one client, in order, and returns
/// their answers in the same order. On a current-thread runtime the first
/// claims the key and decides itself, and the rest queue while it waits
/// for its read.
async fn burst(limiter: &Arc<CasLimiter<Count>>, costs: &[u64]) -> Vec<Answer> {
    let tasks: Vec<_> = costs
        .iter()
        .map(|&cost| {
            let limiter = limiter.clone();
            tokio::spawn(async move { limiter.step(b"c", cost, now(), Duration::ZERO).await })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(task.await.unwrap());
    }
    answers
}

#[tokio::test]
async fn a_group_is_capped_and_the_key_is_let_go_when_idle() {
    let limiter = limiter(1_000);
    let answers = burst(&limiter, &[1; 1_500]).await;
    let allowed = answers
        .iter()
        .filter(|a| a.as_ref().unwrap().0.is_allowed())
        .count();
    assert_eq!(allowed, 1_000);
    let stats = limiter.stats();
    // The first decides alone; the 1,499 queued behind it go in groups of
    // 1,024 and 475: three reads, three writes.
    assert_eq!((stats.decisions, stats.attempts), (1_500, 3));
    assert_eq!(stats.combined, 1_499);
    assert_eq!(keys_in_flight(&limiter), 0);
}

#[tokio::test]
async fn a_panic_is_its_callers_and_the_queued_requests_are_still_decided() {
    let limiter = limiter(10);
    // The first claims the key and panics in the core, in its caller's
    // task; the two that queued meanwhile are decided by the key's task.
    let tasks: Vec<_> = [PANIC, 1, 1]
        .into_iter()
        .map(|cost| {
            let limiter = limiter.clone();
            tokio::spawn(async move { limiter.step(b"c", cost, now(), Duration::ZERO).await })
        })
        .collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await);
    }
    assert!(outcomes[0].as_ref().unwrap_err().is_panic());
    let remaining: Vec<u64> = outcomes[1..]
        .iter()
        .map(|outcome| outcome.as_ref().unwrap().as_ref().unwrap().0.remaining())
        .collect();
    assert_eq!(remaining, [9, 8]);
    assert_eq!(keys_in_flight(&limiter), 0);
    let (decision, _) = limiter.step(b"c", 3, now(), Duration::ZERO).await.unwrap();
    assert_eq!(decision.remaining(), 5);
    assert_eq!(keys_in_flight(&limiter), 0);
}

#[tokio::test]
async fn a_store_without_the_synchronous_path_is_decided_in_the_callers_future() {
    // Answers at once, but through the asynchronous calls only.
    let store = crate::store::CountingStore::new(MemoryStore::new());
    assert!(store.immediate().is_none());
    let limiter = limiter_on(Arc::new(store), Count { limit: 10 });
    let noop = std::task::Waker::noop();
    for remaining in [9, 8, 7] {
        // No task and no channel: one poll decides.
        let step = limiter.step(b"c", 1, now(), Duration::ZERO);
        let Poll::Ready(answer) =
            std::pin::pin!(step).poll(&mut std::task::Context::from_waker(noop))
        else {
            panic!("a decision on a store that answers at once waited");
        };
        assert_eq!(answer.unwrap().0.remaining(), remaining);
        assert_eq!(keys_in_flight(&limiter), 0);
    }
    // A panic in the core is the caller's, and the key is let go.
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        let step = limiter.step(b"c", PANIC, now(), Duration::ZERO);
        let _ = std::pin::pin!(step).poll(&mut std::task::Context::from_waker(noop));
    }));
    assert!(caught.is_err());
    assert_eq!(keys_in_flight(&limiter), 0);
    let (decision, _) = limiter.step(b"c", 1, now(), Duration::ZERO).await.unwrap();
    assert_eq!(decision.remaining(), 6);
    let stats = limiter.stats();
    assert_eq!((stats.decisions, stats.combined), (5, 0));
}

#[tokio::test]
async fn an_immediate_store_is_decided_in_one_atomic_step() {
    let store = Arc::new(MemoryStore::new());
    let limiter = limiter_on(store.clone(), Count { limit: 10 });
    let noop = std::task::Waker::noop();
    let mut context = std::task::Context::from_waker(noop);
    for remaining in [9, 8, 7] {
        let step = limiter.step(b"c", 1, now(), Duration::ZERO);
        let Poll::Ready(answer) = std::pin::pin!(step).poll(&mut context) else {
            panic!("a decision on MemoryStore waited");
        };
        assert_eq!(answer.unwrap().0.remaining(), remaining);
        assert_eq!(keys_in_flight(&limiter), 0);
    }
    // A bug in the core is the caller's panic, as in any synchronous
    // call; nothing was written and the store keeps serving the key.
    let caught = panic::catch_unwind(AssertUnwindSafe(|| {
        let step = limiter.step(b"c", PANIC, now(), Duration::ZERO);
        let _ = std::pin::pin!(step).poll(&mut std::task::Context::from_waker(noop));
    }));
    assert!(caught.is_err());
    let (decision, _) = limiter.step(b"c", 1, now(), Duration::ZERO).await.unwrap();
    assert_eq!(decision.remaining(), 6);
    // Something else at the key is replaced, and reported.
    let key = limiter.key(b"c");
    store
        .put(
            &key,
            b"not a count",
            Duration::from_secs(60),
            PutCondition::Always,
        )
        .await
        .unwrap();
    let (decision, _) = limiter.step(b"c", 2, now(), Duration::ZERO).await.unwrap();
    assert_eq!(decision.remaining(), 8);
    let stats = limiter.stats();
    assert_eq!(
        (
            stats.decisions,
            stats.attempts,
            stats.conflicts,
            stats.replaced
        ),
        (6, 6, 0, 1)
    );
    assert_eq!(limiter.settings.repairs.count(), 1);
    // A count beyond what the core allows is clamped, counted, and
    // written back even though the denial changes nothing else.
    store
        .put(&key, b"99", Duration::from_secs(60), PutCondition::Always)
        .await
        .unwrap();
    let (decision, _) = limiter.step(b"c", 1, now(), Duration::ZERO).await.unwrap();
    assert!(decision.is_denied());
    assert_eq!(store.get(&key).await.unwrap().unwrap().value, b"10");
    assert_eq!(limiter.settings.repairs.count(), 2);
}

#[test]
fn a_runtime_shut_down_mid_decision_leaves_no_key_claimed() {
    let hanging = Waiting {
        reads_hang: true,
        ..Waiting::default()
    };
    let limiter = limiter_on(Arc::new(hanging), Count { limit: 10 });
    let first = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    first.block_on(async {
        // One request claims the key and hangs in its read; another queues.
        for _ in 0..2 {
            let limiter = limiter.clone();
            tokio::spawn(async move { limiter.step(b"c", 1, now(), Duration::ZERO).await });
        }
        for _ in 0..4 {
            tokio::task::yield_now().await;
        }
    });
    assert_eq!(keys_in_flight(&limiter), 1);
    // The runtime stops with both still in flight: the queued request's
    // task is never polled again, and nothing may keep the key claimed.
    drop(first);
    assert_eq!(keys_in_flight(&limiter), 0);
}
