//! The bounded optimistic compare-and-swap loop, written once for every
//! algorithm whose state is one value that is read, recomputed and written
//! back: read the value with its version, decide, write the new value only
//! if the version is still the one read (or, for a missing key, only if it
//! is still missing). A lost race means someone else changed the state
//! first, so the decision is thrown away and made again on fresh state,
//! after a jittered, exponentially growing pause. When the attempts run out
//! the answer is [`Error::Contention`]; a request is never admitted on
//! state that another writer has already changed.
//!
//! # On a store that answers at once
//!
//! A store that offers [`ImmediateStore`] (the in-process
//! [`MemoryStore`](crate::MemoryStore)) runs the read, the decision and the
//! write as one atomic step under its own lock
//! ([`ImmediateStore::update_now`]), within the caller's poll: no version,
//! no conflict, no retry, no queue, no task. Everything below is about
//! stores that make a request wait.
//!
//! Requests for one key from one limiter are combined first (see
//! [`combining`](super::combining)), and each group is decided by the loop
//! in [`group`](super::group).

use std::sync::Arc;
use std::time::Duration;

use super::combining::{submit, Answer, Combiner};
use super::core::{Ask, CasCore};
use super::known::KnownStates;
use super::policy::CasPolicy;
use super::stats::{CasStats, Counters, ATTEMPTS, DECISIONS, REPLACED};
use crate::algorithm::inspect::{InspectedKey, Inspection};
use crate::algorithm::repairs::Repairs;
use crate::algorithm::settings::{DeniedRequests, Settings};
use crate::clock::Clock;
use crate::decision::Decision;
use crate::error::Error;
use crate::held_key::HeldKey;
use crate::key::KeyBuf;
use crate::store::{ImmediateStore, Store};

/// Everything a group's task needs, shared with the limiter.
#[derive(Debug)]
pub(super) struct Engine<C: CasCore> {
    pub(super) store: Arc<dyn Store>,
    pub(super) core: Arc<C>,
    pub(super) policy: CasPolicy,
    /// Added to every lifetime the core gives a state it writes
    /// (`Settings::expiry_slack`).
    pub(super) slack: Duration,
    /// The limiter's allowed clock skew, in nanoseconds: how far ahead of
    /// this process's clock a legitimate writer's may be.
    pub(super) skew: i64,
    /// Where repaired states are counted and reported.
    pub(super) repairs: Arc<Repairs>,
    /// The limiter's clock, read only when a state looks ahead of a
    /// request's own time.
    pub(super) clock: Arc<dyn Clock>,
    pub(super) counters: Counters,
    pub(super) combiner: Combiner,
    /// The states this limiter last saw, to skip reads.
    pub(super) known: KnownStates<C::State>,
}

/// A limiter running a [`CasCore`] through the optimistic loop.
#[derive(Debug)]
pub(crate) struct CasLimiter<C: CasCore> {
    pub(crate) settings: Settings,
    pub(crate) core: Arc<C>,
    pub(super) engine: Arc<Engine<C>>,
}

impl<C: CasCore> CasLimiter<C> {
    pub(crate) fn new(settings: Settings, core: C, policy: CasPolicy) -> Self {
        let core = Arc::new(core);
        let engine = Arc::new(Engine {
            store: settings.store.clone(),
            core: core.clone(),
            known: KnownStates::within(&policy.known_states),
            policy,
            slack: settings.expiry_slack(),
            skew: i64::try_from(settings.max_clock_skew.as_nanos()).unwrap_or(i64::MAX),
            repairs: settings.repairs.clone(),
            clock: settings.clock.clone(),
            counters: Counters::default(),
            combiner: Combiner::new(settings.deadline.limit()),
        });
        Self {
            settings,
            core,
            engine,
        }
    }

    pub(crate) fn stats(&self) -> CasStats {
        self.engine.counters.snapshot()
    }

    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The one key holding `client`'s state.
    pub(crate) fn key(&self, client: &[u8]) -> Vec<u8> {
        let mut key = KeyBuf::new();
        self.write_key(client, &mut key);
        key.to_vec()
    }

    /// [`key`](Self::key), written into `key` on the stack.
    fn write_key(&self, client: &[u8], key: &mut KeyBuf) {
        let suffix = self.core.suffix().as_bytes();
        self.settings.keys.write_key(client, suffix, key);
    }

    /// Decides a request of `cost` from `client` at `now`, unix
    /// nanoseconds.
    pub(crate) async fn check_nanos(
        &self,
        client: &[u8],
        cost: u64,
        now: i64,
    ) -> Result<Decision, Error> {
        // Not through `step`: one future less around the decision's. The
        // ask in a block of its own: a copy kept here would be held to the
        // end.
        let submitted = {
            let ask = self.ask(cost, now, Duration::ZERO)?;
            self.submit(client, ask)
        };
        Ok(submitted.await?.0)
    }

    /// [`check_nanos`](Self::check_nanos) within the caller's poll, on
    /// `store`, its store, which answers at once.
    pub(crate) fn check_now(
        &self,
        store: &dyn ImmediateStore,
        client: &[u8],
        cost: u64,
        now: i64,
    ) -> Result<Decision, Error> {
        let ask = self.ask(cost, now, Duration::ZERO)?;
        Ok(self.submit_now(store, client, ask)?.0)
    }

    /// The ask of a request of `cost` at `now` that may wait up to
    /// `max_delay`, its cost checked.
    fn ask(&self, cost: u64, now: i64, max_delay: Duration) -> Result<Ask, Error> {
        let settings = &self.settings;
        settings.check_cost(cost, self.core.capacity())?;
        Ok(Ask {
            cost,
            now,
            strict: settings.denied == DeniedRequests::Counted,
            max_delay,
            refund: false,
        })
    }

    /// Decides a request at `now` (unix nanoseconds) that may wait up to
    /// `max_delay`; returns the decision and how long to wait.
    ///
    /// The deadline covers the whole wait: for the group in flight, then
    /// for this request's own group. Past it the caller gets
    /// [`Error::DeadlineExceeded`]; the request is then left out of its
    /// group if the group's write has not been sent yet, and otherwise may
    /// have been counted.
    pub(crate) async fn step(
        &self,
        client: &[u8],
        cost: u64,
        now: i64,
        max_delay: Duration,
    ) -> Result<(Decision, Duration), Error> {
        let ask = self.ask(cost, now, max_delay)?;
        self.submit(client, ask).await
    }

    /// Gives back `cost` units that an allowed decision for `client` at
    /// `now` (unix nanoseconds) took, by the core's
    /// [`refund`](CasCore::refund): for a request that several limiters
    /// decide all or nothing, when another of them denied it. It takes the
    /// same path as [`step`](Self::step) (combined with the key's other
    /// requests, within the deadline); a cost of zero does nothing.
    pub(crate) async fn refund(&self, client: &[u8], cost: u64, now: i64) -> Result<(), Error> {
        if cost == 0 {
            return Ok(());
        }
        self.settings.check_cost(cost, self.core.capacity())?;
        let ask = Ask {
            cost,
            now,
            strict: false,
            max_delay: Duration::ZERO,
            refund: true,
        };
        self.submit(client, ask).await.map(|_| ())
    }

    /// Runs `ask` for `client`: at once on a store that answers at once,
    /// otherwise queued for the key's group, within the deadline.
    async fn submit(&self, client: &[u8], ask: Ask) -> Result<(Decision, Duration), Error> {
        let settings = &self.settings;
        if let Some(store) = settings.store.immediate() {
            return self.submit_now(store, client, ask);
        }
        // Held as a table holds it (inline up to 54 bytes, shared beyond),
        // not in the 250 bytes a key can take: the decision's future holds
        // it until the end.
        let key: HeldKey = {
            let mut key = KeyBuf::new();
            self.write_key(client, &mut key);
            HeldKey::new(&key)
        };
        self.engine.counters.bump(DECISIONS);
        settings
            .within_deadline(submit(&self.engine, key.as_bytes(), ask))
            .await
    }

    /// [`submit`](Self::submit) on `store`, which answers at once.
    #[inline]
    fn submit_now(&self, store: &dyn ImmediateStore, client: &[u8], ask: Ask) -> Answer {
        let mut key = KeyBuf::new();
        self.write_key(client, &mut key);
        self.engine.counters.bump(DECISIONS);
        self.engine.decide_now(store, &key, ask)
    }

    /// `client`'s state as stored, read without counting.
    pub(crate) async fn inspect(&self, client: &[u8]) -> Result<Inspection, Error> {
        let key = self.key(client);
        let stored = self
            .settings
            .within_deadline(self.settings.store.get(&key))
            .await?;
        Ok(Inspection {
            limit: self.settings.quota.limit(),
            keys: vec![InspectedKey {
                key: String::from_utf8_lossy(&key).into_owned(),
                value: stored.map(|stored| String::from_utf8_lossy(&stored.value).into_owned()),
            }],
            estimate: None,
            remaining: None,
            reset_after: None,
        })
    }

    pub(crate) async fn reset(&self, client: &[u8]) -> Result<(), Error> {
        let settings = &self.settings;
        let key = self.key(client);
        self.engine.known.forget(&key);
        settings
            .within_deadline(settings.store.delete(&[key]))
            .await?;
        Ok(())
    }
}

impl<C: CasCore> Engine<C> {
    /// The store itself: calling through the `Arc` would go by the
    /// `Store` impl of `Arc`, one more boxed future per call.
    pub(super) fn store(&self) -> &dyn Store {
        self.store.as_ref()
    }

    /// Decides one request (or applies one refund) on a store that answers
    /// at once: one atomic read-decide-write of the key's state, in the
    /// caller's poll. Nothing can write between the read and the write, so
    /// there is no conflict, no retry and nothing to combine.
    pub(super) fn decide_now(&self, store: &dyn ImmediateStore, key: &[u8], ask: Ask) -> Answer {
        self.counters.bump(ATTEMPTS);
        let mut decided = None;
        store.update_now(key, &mut |current, next| {
            let (state, repaired) = match current {
                None => (None, false),
                Some(bytes) => self.read(key, bytes, ask.now),
            };
            let step = self.core.apply(state.as_ref(), ask);
            decided = Some((step.decision, step.delay));
            // A repaired state is written even by a decision that changes
            // nothing, so the next one does not find the garbage again.
            let (state, ttl) = match (step.write, state) {
                (Some(write), _) => write,
                (None, Some(state)) if repaired => (state, step.decision.reset_after()),
                (None, _) => return None,
            };
            self.core.encode_into(&state, next);
            Some(ttl + self.slack)
        })?;
        Ok(decided.expect("the step runs once"))
    }

    /// The state stored at `key` as `bytes`, validated for a decision at
    /// `now`, and whether it was repaired. Bytes that are not this
    /// algorithm's state give no state (a fresh client), counted in
    /// [`CasStats::replaced`]; a state beyond what any writer could have
    /// stored is clamped back to that horizon. Either way the repair is
    /// counted in [`FailureStats::repaired`](crate::limiter::FailureStats) and
    /// reported, and the decision writes the repaired state.
    pub(super) fn read(&self, key: &[u8], bytes: &[u8], now: i64) -> (Option<C::State>, bool) {
        let Some(mut state) = self.core.decode(bytes) else {
            self.counters.bump(REPLACED);
            self.repairs
                .state_repaired(key, bytes, "not this limiter's state; replaced");
            return (None, true);
        };
        if !self.core.repair(&mut state, now, self.skew) {
            return (Some(state), false);
        }
        // Ahead of this request's time, but the request may be an event
        // replayed from the past (`check_at`): what a writer could have
        // stored is bounded by this process's present, not by the event.
        let present = self
            .clock
            .unix_nanos()
            .map_or(now, |present| present.max(now));
        if present > now {
            if let Some(mut fresh) = self.core.decode(bytes) {
                if !self.core.repair(&mut fresh, present, self.skew) {
                    return (Some(fresh), false);
                }
            }
        }
        self.repairs
            .state_repaired(key, bytes, "beyond the policy's horizon; clamped to it");
        (Some(state), true)
    }
}
