//! Refunds through the engine, for each compare-and-swap algorithm: alone
//! on a store that answers at once, alone through the key's task, and
//! combined in one group with the key's requests.

use std::sync::Arc;

use super::core::CasCore;
use super::optimistic::CasLimiter;
use super::tests::{limiter_on, Waiting};
use super::{discrete_refill, gcra, hybrid_quota, sessionize, sliding_log, token_bucket};
use crate::error::Error;
use crate::store::Store;
use crate::MemoryStore;

/// A fixed time, so nothing refills between the steps of a test.
const NOW: i64 = 1_800_000_000_000_000_000;

/// A check, or a refund, of a cost.
#[derive(Debug, Clone, Copy)]
enum Op {
    Check(u64),
    Refund(u64),
}

/// The remaining count a check reports; `None` for a refund.
async fn run<C: CasCore>(limiter: &CasLimiter<C>, op: Op) -> Result<Option<u64>, Error> {
    match op {
        Op::Check(cost) => {
            let decision = limiter.check_nanos(b"c", cost, NOW).await?;
            assert!(decision.is_allowed(), "{op:?}: {decision:?}");
            Ok(Some(decision.remaining()))
        }
        Op::Refund(cost) => limiter.refund(b"c", cost, NOW).await.map(|()| None),
    }
}

/// Spawns `ops` for one client, in order, and returns their outcomes in
/// the same order. On a current-thread runtime they all queue before the
/// key's task first runs: one group.
async fn together<C: CasCore>(limiter: &Arc<CasLimiter<C>>, ops: &[Op]) -> Vec<Option<u64>> {
    let tasks: Vec<_> = ops
        .iter()
        .map(|&op| {
            let limiter = limiter.clone();
            tokio::spawn(async move { run(&limiter, op).await })
        })
        .collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap().unwrap());
    }
    outcomes
}

/// A refund after an allowed check restores the remaining count, alone
/// (on `store`) and combined in one group with checks (on a store that
/// waits, so requests queue).
async fn restores<C: CasCore>(store: Arc<dyn Store>, core: impl Fn() -> C) {
    let limiter = limiter_on(store, core());
    assert_eq!(run(&limiter, Op::Check(3)).await.unwrap(), Some(7));
    assert_eq!(run(&limiter, Op::Refund(3)).await.unwrap(), None);
    assert_eq!(run(&limiter, Op::Check(1)).await.unwrap(), Some(9));
    // Nothing to give back: no error, and no more than the limit.
    run(&limiter, Op::Refund(0)).await.unwrap();
    run(&limiter, Op::Refund(5)).await.unwrap();
    assert_eq!(run(&limiter, Op::Check(10)).await.unwrap(), Some(0));
    let refund = run(&limiter, Op::Refund(11)).await;
    if limiter.core.capacity() < 11 {
        let error = refund.unwrap_err();
        assert!(matches!(error, Error::CostExceedsLimit { .. }), "{error}");
    } else {
        // Smyte's buckets take any cost: a full bucket back, no more.
        assert_eq!(refund.unwrap(), None);
        assert_eq!(run(&limiter, Op::Check(10)).await.unwrap(), Some(0));
    }
    let stats = limiter.stats();
    assert_eq!((stats.conflicts, stats.exhausted), (0, 0));

    let limiter = limiter_on(Arc::new(Waiting::default()), core());
    assert_eq!(together(&limiter, &[Op::Check(4)]).await, [Some(6)]);
    // The refund is applied in its turn: the whole limit fits after it.
    let group = [Op::Refund(4), Op::Check(10), Op::Refund(10), Op::Check(2)];
    assert_eq!(
        together(&limiter, &group).await,
        [None, Some(0), None, Some(8)]
    );
    // The first of the four finds the key idle and decides alone; the
    // three queued behind it are one group.
    let stats = limiter.stats();
    assert_eq!((stats.decisions, stats.attempts), (5, 3));
    assert_eq!(stats.combined, 3);
}

#[tokio::test]
async fn a_refund_restores_a_token_bucket() {
    let core = || token_bucket(None, "10/minute".parse().unwrap()).unwrap();
    restores(Arc::new(MemoryStore::new()), core).await;
    restores(Arc::new(Waiting::default()), core).await;
}

#[tokio::test]
async fn a_refund_restores_gcra() {
    let core = || gcra(None, "10/minute".parse().unwrap()).unwrap();
    restores(Arc::new(MemoryStore::new()), core).await;
    restores(Arc::new(Waiting::default()), core).await;
}

#[tokio::test]
async fn a_refund_restores_a_sliding_log() {
    let core = || sliding_log("10/minute".parse().unwrap()).unwrap();
    restores(Arc::new(MemoryStore::new()), core).await;
    restores(Arc::new(Waiting::default()), core).await;
}

#[tokio::test]
async fn a_refund_restores_a_hybrid_quota() {
    let core = || hybrid_quota("10/minute".parse().unwrap()).unwrap();
    restores(Arc::new(MemoryStore::new()), core).await;
    restores(Arc::new(Waiting::default()), core).await;
}

#[tokio::test]
async fn a_refund_restores_a_discrete_refill() {
    let core = || discrete_refill(Some(3), true, "10/minute".parse().unwrap()).unwrap();
    restores(Arc::new(MemoryStore::new()), core).await;
    restores(Arc::new(Waiting::default()), core).await;
}

#[tokio::test]
async fn a_refund_restores_a_sessionize_bucket() {
    let core = || sessionize(Some(3), "10/minute".parse().unwrap()).unwrap();
    restores(Arc::new(MemoryStore::new()), core).await;
    restores(Arc::new(Waiting::default()), core).await;
}
