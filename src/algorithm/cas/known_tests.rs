//! Decisions on the state a limiter last saw: the read they save, and
//! why they stay exact when someone else writes.

use std::sync::Arc;
use std::time::Duration;

use super::optimistic::CasLimiter;
use super::policy::CasPolicy;
use super::tests::{limiter_on, limiter_with, now, Count};
use crate::store::{CountingStore, PutCondition, Store};
use crate::MemoryStore;

type Counting = Arc<CountingStore<MemoryStore>>;

fn counting() -> Counting {
    Arc::new(CountingStore::new(MemoryStore::new()))
}

/// A limiter of 10 whose denials check the version of a known state
/// however small it is.
fn checking(store: Counting) -> Arc<CasLimiter<Count>> {
    let policy = CasPolicy::default().checking_every_version();
    limiter_with(store, Count { limit: 10 }, policy)
}

#[tokio::test]
async fn a_denial_on_a_small_known_state_reads_it() {
    let store = counting();
    let limiter = limiter_on(store.clone(), Count { limit: 10 });
    assert_eq!(remaining(&limiter, 10).await, Some(0));
    assert_eq!(remaining(&limiter, 1).await, None);
    // A read carries hardly more than a version: no check first, which
    // a state someone else changed would make a second round trip.
    let calls = store.calls();
    assert_eq!((calls.gets, calls.versions), (2, 0));
    assert_eq!(limiter.stats().checked, 0);
}

async fn remaining(limiter: &CasLimiter<Count>, cost: u64) -> Option<u64> {
    let (decision, _) = limiter
        .step(b"c", cost, now(), Duration::ZERO)
        .await
        .unwrap();
    decision.is_allowed().then(|| decision.remaining())
}

#[tokio::test]
async fn a_known_state_saves_the_read_of_every_decision_that_writes() {
    let store = counting();
    let limiter = checking(store.clone());
    for left in (0..10).rev() {
        assert_eq!(remaining(&limiter, 1).await, Some(left));
    }
    // The first decision read (nothing there); the nine after it wrote on
    // the version of the one before.
    let calls = store.calls();
    assert_eq!((calls.gets, calls.puts), (1, 10));
    let stats = limiter.stats();
    assert_eq!((stats.known, stats.stale, stats.attempts), (9, 0, 1));
    // A denial writes nothing, so nothing would check the known state: it
    // is answered from it only once the store confirms its version, which
    // it tells without the state itself.
    assert_eq!(remaining(&limiter, 1).await, None);
    let calls = store.calls();
    assert_eq!((calls.gets, calls.versions, calls.puts), (1, 1, 10));
    let stats = limiter.stats();
    assert_eq!((stats.known, stats.checked, stats.stale), (10, 1, 0));
}

#[tokio::test]
async fn a_denial_on_a_state_another_writer_changed_is_decided_on_a_read() {
    let store = counting();
    let one = checking(store.clone());
    assert_eq!(remaining(&one, 10).await, Some(0));
    // Another process writes the key: 4 used, at a new version. `one`
    // knows 10 used, a denial; the version it knows is not stored.
    let key = one.key(b"c");
    store
        .put(&key, b"4", Duration::from_secs(60), PutCondition::Always)
        .await
        .unwrap();
    assert_eq!(remaining(&one, 1).await, Some(5));
    let calls = store.calls();
    assert_eq!((calls.versions, calls.gets), (1, 2), "checked, then read");
    let stats = one.stats();
    assert_eq!((stats.checked, stats.stale), (1, 1));
    // Known again from that write, but the one recent check was stale:
    // a denial now reads, as long as checks are not nearly always
    // current.
    assert_eq!(remaining(&one, 6).await, None);
    assert_eq!(store.calls().gets, 3);
    assert_eq!(one.stats().checked, 1);
}

#[tokio::test]
async fn a_state_another_writer_changed_is_read_again_and_nothing_is_lost() {
    let store = counting();
    let one = limiter_on(store.clone(), Count { limit: 10 });
    let other = limiter_on(store.clone(), Count { limit: 10 });
    assert_eq!(remaining(&one, 3).await, Some(7));
    assert_eq!(remaining(&other, 4).await, Some(3));
    // `one` knows the state it wrote (3 used), which is no longer stored:
    // its write on that version fails, and it decides again on 7 used.
    assert_eq!(remaining(&one, 1).await, Some(2));
    let stats = one.stats();
    assert_eq!((stats.known, stats.stale, stats.conflicts), (1, 1, 0));
    assert_eq!(remaining(&one, 3).await, None);
    assert_eq!(remaining(&other, 2).await, Some(0));
    let key = one.key(b"c");
    assert_eq!(store.get(&key).await.unwrap().unwrap().value, b"10");
}

#[tokio::test]
async fn a_deleted_state_is_not_believed() {
    let store = counting();
    let limiter = checking(store.clone());
    assert_eq!(remaining(&limiter, 10).await, Some(0));
    // Deleted behind the limiter's back (expired, evicted, or reset by
    // another process): the known state says 10 used, the store nothing.
    store.delete(&[limiter.key(b"c")]).await.unwrap();
    // Decided on the known state this would be a denial, which writes
    // nothing: the store tells the key is gone, so it is read and
    // decided on no state.
    assert_eq!(remaining(&limiter, 1).await, Some(9));
    // Deleted again: the write on the known version finds the key gone.
    store.delete(&[limiter.key(b"c")]).await.unwrap();
    assert_eq!(remaining(&limiter, 2).await, Some(8));
    let stats = limiter.stats();
    assert_eq!((stats.known, stats.checked, stats.stale), (2, 1, 2));
}

#[tokio::test]
async fn a_state_that_vanished_is_written_anew_without_a_read() {
    let store = counting();
    let limiter = limiter_on(store.clone(), Count { limit: 10 });
    assert_eq!(remaining(&limiter, 4).await, Some(6));
    // Expired or evicted early, behind the limiter's back: the write on the
    // known version finds no key, so the group is decided on no state and
    // written as new, without reading what is not there.
    store.delete(&[limiter.key(b"c")]).await.unwrap();
    assert_eq!(remaining(&limiter, 2).await, Some(8));
    let calls = store.calls();
    assert_eq!(
        (calls.gets, calls.puts),
        (1, 3),
        "a failed write and a write as new, no read"
    );
    let stats = limiter.stats();
    assert_eq!((stats.known, stats.stale, stats.vanished), (1, 1, 1));
    assert_eq!(
        store.get(&limiter.key(b"c")).await.unwrap().unwrap().value,
        b"2"
    );
    // Known again from that write: the next decision needs no read either.
    assert_eq!(remaining(&limiter, 1).await, Some(7));
    assert_eq!(store.calls().gets, 2);
}

#[tokio::test]
async fn a_state_that_vanished_and_came_back_is_read_and_nothing_is_lost() {
    let store = counting();
    let one = limiter_on(store.clone(), Count { limit: 10 });
    let other = limiter_on(store.clone(), Count { limit: 10 });
    assert_eq!(remaining(&one, 4).await, Some(6));
    store.delete(&[one.key(b"c")]).await.unwrap();
    // Another process writes the key anew before `one` comes back.
    assert_eq!(remaining(&other, 7).await, Some(3));
    // `one`'s write on its known version finds the key changed, not gone:
    // it reads, and decides on what the other process wrote.
    assert_eq!(remaining(&one, 2).await, Some(1));
    let stats = one.stats();
    assert_eq!((stats.known, stats.stale, stats.vanished), (1, 1, 0));
    assert_eq!(
        store.get(&one.key(b"c")).await.unwrap().unwrap().value,
        b"9"
    );
}

#[tokio::test]
async fn a_reset_forgets_and_no_known_states_means_every_decision_reads() {
    let store = counting();
    let limiter = limiter_on(store.clone(), Count { limit: 10 });
    assert_eq!(remaining(&limiter, 4).await, Some(6));
    limiter.reset(b"c").await.unwrap();
    assert_eq!(remaining(&limiter, 1).await, Some(9));
    assert_eq!(limiter.stats().stale, 0);
    assert_eq!(store.calls().gets, 2);

    let store = counting();
    let policy = CasPolicy::default().known_states(0);
    let limiter = limiter_with(store.clone(), Count { limit: 10 }, policy);
    for left in [9, 8, 7] {
        assert_eq!(remaining(&limiter, 1).await, Some(left));
    }
    assert_eq!((store.calls().gets, store.calls().puts), (3, 3));
    assert_eq!(limiter.stats().known, 0);
}

#[tokio::test]
async fn many_limiters_sharing_keys_admit_exactly_the_limit() {
    // Four limiters (as in four processes) on one store, each knowing
    // the states it wrote, deciding in turn on a few keys: whatever they
    // know, each key's stored count is exactly what was admitted, and
    // never more than the limit.
    let store = counting();
    let limiters: Vec<_> = (0..4)
        .map(|_| limiter_on(store.clone(), Count { limit: 50 }))
        .collect();
    let mut admitted = [0u64; 3];
    for round in 0..100u64 {
        for (i, limiter) in limiters.iter().enumerate() {
            let client = [b'a' + ((round + i as u64) % 3) as u8];
            let cost = 1 + (round + i as u64) % 3;
            let (decision, _) = limiter
                .step(&client, cost, now(), Duration::ZERO)
                .await
                .unwrap();
            if decision.is_allowed() {
                admitted[usize::from(client[0] - b'a')] += cost;
            }
        }
    }
    for (client, admitted) in [b"a", b"b", b"c"].iter().zip(admitted) {
        let stored = store.get(&limiters[0].key(*client)).await.unwrap();
        let stored: u64 = std::str::from_utf8(&stored.unwrap().value)
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(stored, admitted);
        assert!((48..=50).contains(&admitted), "{admitted}");
    }
    let stale: u64 = limiters.iter().map(|limiter| limiter.stats().stale).sum();
    assert!(stale > 0, "the limiters never wrote over each other");
}

#[tokio::test]
async fn a_state_past_its_lifetime_is_written_anew_without_a_read() {
    use crate::clock::Clock;
    use crate::ManualClock;
    let clock = ManualClock::from_unix_secs(1_000_000);
    let store = Arc::new(CountingStore::new(MemoryStore::with_clock(clock.clone())));
    let one = limiter_on(store.clone(), Count { limit: 10 });
    let other = limiter_on(store.clone(), Count { limit: 10 });
    let at = |clock: &ManualClock| clock.unix_nanos().unwrap();
    let step = |limiter: &Arc<CasLimiter<Count>>, cost, now| {
        let limiter = Arc::clone(limiter);
        async move {
            let (decision, _) = limiter.step(b"c", cost, now, Duration::ZERO).await.unwrap();
            decision.is_allowed().then(|| decision.remaining())
        }
    };
    assert_eq!(step(&one, 4, at(&clock)).await, Some(6));
    // Written for 60 s plus the slack of 11 s; 2 s of margin after that.
    clock.advance(Duration::from_secs(74));
    assert_eq!(step(&one, 1, at(&clock)).await, Some(9));
    let calls = store.calls();
    assert_eq!(
        (calls.gets, calls.puts),
        (1, 2),
        "no read for the expired state"
    );
    assert_eq!(one.stats().known, 1);

    // Gone again, but another process wrote the key meanwhile: the write
    // as new fails, and the decision is made on what that process wrote.
    clock.advance(Duration::from_secs(74));
    assert_eq!(step(&other, 7, at(&clock)).await, Some(3));
    assert_eq!(step(&one, 2, at(&clock)).await, Some(1));
    let stats = one.stats();
    assert_eq!((stats.known, stats.stale), (2, 1));
    assert_eq!(
        store.get(&one.key(b"c")).await.unwrap().unwrap().value,
        b"9"
    );

    // Within its lifetime and the margin, a state is still believed stored.
    assert_eq!(step(&one, 1, at(&clock) + 72_000_000_000).await, Some(0));
    assert_eq!(one.stats().stale, 1);
}

#[tokio::test]
async fn a_state_that_may_just_have_expired_costs_one_call_either_way() {
    use crate::clock::Clock;
    use crate::ManualClock;
    let clock = ManualClock::from_unix_secs(1_000_000);
    let store = Arc::new(CountingStore::new(MemoryStore::with_clock(clock.clone())));
    let limiter = limiter_on(store.clone(), Count { limit: 10 });
    let at = |clock: &ManualClock| clock.unix_nanos().unwrap();
    let step = |cost, now| {
        let limiter = Arc::clone(&limiter);
        async move {
            let (decision, _) = limiter.step(b"c", cost, now, Duration::ZERO).await.unwrap();
            decision.is_allowed().then(|| decision.remaining())
        }
    };
    let puts = || store.calls().puts;
    let gets = || store.calls().gets;
    // Nothing used, once the cost is given back: a state that decides as
    // no state would. Written for 60 s plus the slack of 11 s.
    assert_eq!(step(2, at(&clock)).await, Some(8));
    limiter.refund(b"c", 2, at(&clock)).await.unwrap();
    let (puts_before, gets_before) = (puts(), gets());

    // Half a second before its lifetime ends, memcached may have dropped
    // it already (its clock counts whole seconds); here it has not. One
    // call: the write on its version, with the add beside it.
    clock.advance(Duration::from_millis(70_500));
    assert_eq!(step(2, at(&clock)).await, Some(8));
    assert_eq!((puts() - puts_before, gets() - gets_before), (1, 0));
    limiter.refund(b"c", 2, at(&clock)).await.unwrap();
    let puts_before = puts_before + 1;

    // Half a second past it, it is gone (the store counts whole seconds
    // too), and the limiter still allows 2 s for it: one call again, the
    // add writing.
    clock.advance(Duration::from_millis(71_500));
    assert_eq!(step(3, at(&clock)).await, Some(7));
    assert_eq!((puts() - puts_before, gets() - gets_before), (2, 0));
    let stats = limiter.stats();
    assert_eq!((stats.either, stats.stale, stats.vanished), (2, 0, 0));
    assert_eq!(
        store.get(&limiter.key(b"c")).await.unwrap().unwrap().value,
        b"3"
    );
    let gets_before = gets_before + 1; // the read just above

    // A state that decides otherwise than no state (3 used) is written
    // on its version alone: gone, it is decided again and added.
    clock.advance(Duration::from_millis(71_500));
    assert_eq!(step(1, at(&clock)).await, Some(9));
    assert_eq!((puts() - puts_before, gets() - gets_before), (4, 0));
    let stats = limiter.stats();
    assert_eq!((stats.either, stats.stale, stats.vanished), (2, 1, 1));
}
