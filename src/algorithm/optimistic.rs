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
//! # Local combining
//!
//! Requests for one key from one limiter never race each other. At most one
//! read-modify-write per key is in flight; requests that arrive meanwhile
//! queue, and when it finishes they are all decided together, as a
//! **group**: one read, then each request decided in arrival order on the
//! state the previous one left (each with its own cost, time, strictness
//! and maximum delay), then one write of the final state. If nothing in the
//! group changes the state (denials that take nothing), nothing is written.
//! A conflicting write means another process (or another limiter on the
//! same key) wrote first, and the whole group is decided again on fresh
//! state, within the same attempts and backoff as a single request. The
//! outcome is exactly that of the requests made one after another, in
//! arrival order, so every algorithm stays exact; a hot key costs one read
//! and one write per group instead of a storm of lost races.
//!
//! The group runs on its own spawned task, never inside a caller's future:
//!
//! - Why not let the first caller (a "leader") run it inline? A caller's
//!   future can be dropped at any `.await` (its deadline, a `select!`, a
//!   client hanging up). A leader dropped while its group's write is in
//!   flight would leave the other members with no answer and no way to
//!   know whether their requests were written; taking over and deciding
//!   again could count them twice, and failing them punishes them for
//!   someone else's deadline. A spawned task is dropped by nobody's
//!   deadline: it finishes the group (bounded by the limiter's deadline and
//!   the attempts) and hands every member its own answer.
//! - A member that stops waiting (its deadline passed, or its future was
//!   dropped) closes its channel. If that happens before its group's write
//!   is sent, it is left out of the decision and nothing is counted for it.
//!   If it happens after, the write carries its cost (if it was allowed, or
//!   strict): its quota is spent although its caller never learns so, the
//!   same "outcome unknown" as any request that times out after its write
//!   was sent ([`Error::DeadlineExceeded`]). The others' decisions stand
//!   either way: each was made on the state the ones before it left.
//! - The bookkeeping is a `std::sync::Mutex<HashMap<key, queue>>`, held only
//!   to push a request or take a group, never across an `.await`. A key is
//!   in the map exactly while a task serves it: the request that finds the
//!   key missing inserts it and spawns the task; the task removes the key,
//!   under the same lock, when it finds the queue empty. So a request either
//!   joins a queue that a live task will still take, or starts a new task:
//!   none is lost, and none waits on a task that has gone.
//! - The task removes its key *before* it hands out the last group's
//!   answers, so once a caller has its answer no task of its runtime still
//!   holds the key: a runtime that stops being driven after its last
//!   decision (a `block_on` that returned) does not leave the key stuck for
//!   callers on another runtime. (A limiter shared by several runtimes at
//!   once still needs a runtime to keep running while a key's task it
//!   started has work; a multi-thread runtime always does. A request stuck
//!   otherwise ends at its deadline.)
//! - If the task stops abnormally (a panic, or its runtime shutting down),
//!   a guard removes the key and drops the queued requests' channels: they
//!   get an error at once rather than waiting out their deadlines, and the
//!   next request starts a fresh task.
//! - A group holds at most `MAX_GROUP` (1,024) requests, so one
//!   read-decide-write stays bounded however hot the key; the rest wait
//!   for the next group.
//!
//! The price is a task spawn each time a key goes from idle to busy (so
//! once per request when requests for a key never overlap) and a channel
//! per request, small beside a round trip to memcached; an idle key costs
//! nothing (it is not in the map). A store that answers at once takes the
//! synchronous path above instead.
//!
//! Combining is per limiter and per key; limiters in other processes (or
//! another limiter object in this one) on the same key still race, through
//! the compare-and-swap, as before.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rand::Rng;
use tokio::sync::oneshot;

use super::inspect::{InspectedKey, Inspection};
use crate::decision::Decision;
use crate::error::{Error, StoreError, StoreErrorKind};
use crate::failure::Failures;
use crate::key::{KeyBuf, KeyHasher};
use crate::limiter::{timeout, DeniedRequests, Settings};
use crate::store::{ImmediateStore, PutCondition, PutOutcome, Store};

/// The most requests decided in one group: one read, up to this many
/// decisions, one write. More waiting requests go to the next group.
pub(crate) const MAX_GROUP: usize = 1_024;

/// How hard a compare-and-swap algorithm tries before giving up.
///
/// Requests for one key that overlap in one limiter are decided together,
/// one read and one write for the group, so they never race each other;
/// the attempts and pauses are spent only on writes that lose to another
/// process. A group that runs out of attempts fails every one of its
/// requests with [`Error::Contention`].
///
/// ```
/// use memcache_ratelimit::{CasPolicy, MemoryStore, TokenBucket};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// let bucket = TokenBucket::builder("10/second".parse()?, Arc::new(MemoryStore::new()))
///     .cas_policy(CasPolicy::new(16, Duration::from_micros(200), Duration::from_millis(5))?)
///     .build()?;
/// # Ok::<(), memcache_ratelimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CasPolicy {
    attempts: u32,
    base_backoff: Duration,
    max_backoff: Duration,
}

impl CasPolicy {
    /// At most `attempts` tries (1 to 1,000); before retry `k` the loop
    /// sleeps a random time up to `base_backoff × 2^(k−1)`, capped at
    /// `max_backoff`.
    pub fn new(
        attempts: u32,
        base_backoff: Duration,
        max_backoff: Duration,
    ) -> Result<Self, crate::ConfigError> {
        if attempts == 0 || attempts > 1_000 {
            return Err(crate::ConfigError::new(
                "cas_attempts",
                format!("{attempts} is outside 1..=1000"),
            ));
        }
        if base_backoff > max_backoff {
            return Err(crate::ConfigError::new(
                "cas_backoff",
                format!("base {base_backoff:?} exceeds max {max_backoff:?}"),
            ));
        }
        Ok(Self {
            attempts,
            base_backoff,
            max_backoff,
        })
    }

    /// The most attempts per decision (per group of combined decisions).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// The pause before retry `retry` (1-based): full jitter over an
    /// exponentially growing, capped range.
    fn backoff(&self, retry: u32) -> Duration {
        let ceiling = self
            .base_backoff
            .saturating_mul(1u32 << retry.saturating_sub(1).min(20))
            .min(self.max_backoff);
        if ceiling.is_zero() {
            return Duration::ZERO;
        }
        rand::rng().random_range(Duration::ZERO..=ceiling)
    }
}

impl Default for CasPolicy {
    /// 8 attempts, pauses from up to 500 µs growing to at most 10 ms.
    fn default() -> Self {
        Self {
            attempts: 8,
            base_backoff: Duration::from_micros(500),
            max_backoff: Duration::from_millis(10),
        }
    }
}

/// What a compare-and-swap limiter has been through, since it was built.
///
/// Requests for one key that overlap in time are decided together, as a
/// group with one read and one write (see [`CasPolicy`]); `attempts`,
/// `conflicts` and `retries` count those shared read-decide-write attempts,
/// while `decisions`, `exhausted` and `combined` count requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CasStats {
    /// Decisions asked for: every request, alone or in a group.
    pub decisions: u64,
    /// Read-decide-write attempts made, one per group attempt: the requests
    /// of a group share one read and one write.
    pub attempts: u64,
    /// Writes that lost the race to another writer. Requests of one limiter
    /// never race each other, so these are writes from other processes, or
    /// other limiters on the same key.
    pub conflicts: u64,
    /// Attempts made again after a conflict.
    pub retries: u64,
    /// Requests that ran out of attempts ([`Error::Contention`]); every
    /// member of a group that ran out counts.
    pub exhausted: u64,
    /// Stored values that could not be read as this algorithm's state and
    /// were replaced. Each is also counted, with the states clamped to the
    /// policy's horizon, in
    /// [`FailureStats::repaired`](crate::FailureStats::repaired).
    pub replaced: u64,
    /// Requests decided in a group with at least one other request, sharing
    /// its read and write instead of racing it. Zero when requests for a
    /// key never overlap.
    pub combined: u64,
}

/// The counters behind [`CasStats`], by index.
const DECISIONS: usize = 0;
const ATTEMPTS: usize = 1;
const CONFLICTS: usize = 2;
const RETRIES: usize = 3;
const EXHAUSTED: usize = 4;
const REPLACED: usize = 5;
const COMBINED: usize = 6;

#[derive(Debug, Default)]
struct Counters([AtomicU64; 7]);

impl Counters {
    fn bump(&self, index: usize) {
        self.add(index, 1);
    }

    fn add(&self, index: usize, n: usize) {
        self.0[index].fetch_add(n as u64, Ordering::Relaxed);
    }

    fn snapshot(&self) -> CasStats {
        let n = |i: usize| self.0[i].load(Ordering::Relaxed);
        CasStats {
            decisions: n(DECISIONS),
            attempts: n(ATTEMPTS),
            conflicts: n(CONFLICTS),
            retries: n(RETRIES),
            exhausted: n(EXHAUSTED),
            replaced: n(REPLACED),
            combined: n(COMBINED),
        }
    }
}

/// One request, as the pure core sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ask {
    pub(crate) cost: u64,
    pub(crate) now: i64,
    pub(crate) strict: bool,
    /// How long the caller is willing to wait for a later slot (GCRA's
    /// delay mode); zero for an immediate decision.
    pub(crate) max_delay: Duration,
}

/// What the pure core decided, and the state to write for it.
#[derive(Debug, Clone)]
pub(crate) struct Step<S> {
    pub(crate) decision: Decision,
    /// How long the caller must wait before acting (delay mode).
    pub(crate) delay: Duration,
    /// The new state and how long it is read (the engine keeps it longer
    /// by the limiter's expiry slack); `None` leaves the store untouched.
    pub(crate) write: Option<(S, Duration)>,
}

/// The arithmetic of one compare-and-swap algorithm: a pure function from
/// the stored state, the time and the request to a decision and a new state.
///
/// `'static` and a `Send` state because groups are decided on a spawned
/// task (see the module documentation).
pub(crate) trait CasCore: Send + Sync + fmt::Debug + 'static {
    type State: Send;

    /// The most cost units one request may ask for.
    fn capacity(&self) -> u64;
    /// The key suffix naming the algorithm and its parameters, so limiters
    /// with different parameters never share a state.
    fn suffix(&self) -> &str;
    fn encode(&self, state: &Self::State) -> Vec<u8>;
    /// [`encode`](Self::encode), appended to `out`.
    fn encode_into(&self, state: &Self::State, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.encode(state));
    }
    /// `None` for bytes that are not this algorithm's state.
    fn decode(&self, bytes: &[u8]) -> Option<Self::State>;
    /// Brings a decoded `state` back within what a writer could have
    /// stored: one whose clock is at most `skew` nanoseconds ahead of
    /// `now`, deciding by this algorithm's rules. Returns whether the state
    /// had to change (a time beyond that horizon, from a clock far ahead or
    /// from another program writing over the key).
    fn repair(&self, state: &mut Self::State, now: i64, skew: i64) -> bool;
    fn decide(&self, state: Option<&Self::State>, ask: Ask) -> Step<Self::State>;
}

/// What one request gets back: its decision and how long to wait.
type Answer = Result<(Decision, Duration), Error>;

/// A request waiting for its group.
#[derive(Debug)]
struct Waiter {
    ask: Ask,
    reply: oneshot::Sender<Answer>,
}

/// Why a whole group got no decision. `Error` is not `Clone`, so each
/// member gets its own copy made from this.
enum Failure {
    Store(StoreError),
    Contention(u32),
}

impl Failure {
    fn error(&self) -> Error {
        match self {
            Failure::Store(error) => Error::Store(error.clone()),
            Failure::Contention(attempts) => Error::Contention {
                attempts: *attempts,
            },
        }
    }
}

/// The queues of requests waiting per key. A key is present exactly while
/// a task serves it.
#[derive(Default)]
struct Queues(Mutex<HashMap<Vec<u8>, VecDeque<Waiter>, KeyHasher>>);

impl Queues {
    /// The map. The lock is only ever held for a push, a take or a removal,
    /// none of which can panic midway, so a poisoned lock still holds a
    /// consistent map and is used as is.
    fn lock(&self) -> MutexGuard<'_, HashMap<Vec<u8>, VecDeque<Waiter>, KeyHasher>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl fmt::Debug for Queues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queues")
            .field("keys_in_flight", &self.lock().len())
            .finish()
    }
}

/// Everything a group's task needs, shared with the limiter.
#[derive(Debug)]
struct Engine<C> {
    store: Arc<dyn Store>,
    core: Arc<C>,
    policy: CasPolicy,
    /// The limiter's deadline, which also bounds one group.
    deadline: Duration,
    /// Added to every lifetime the core gives a state it writes
    /// (`Settings::expiry_slack`).
    slack: Duration,
    /// The limiter's allowed clock skew, in nanoseconds: how far ahead of
    /// this process's clock a legitimate writer's may be.
    skew: i64,
    /// Where repaired states are counted and reported.
    failures: Arc<Failures>,
    counters: Counters,
    queues: Queues,
}

/// A limiter running a [`CasCore`] through the optimistic loop.
#[derive(Debug)]
pub(crate) struct CasLimiter<C> {
    pub(crate) settings: Settings,
    pub(crate) core: Arc<C>,
    engine: Arc<Engine<C>>,
}

impl<C: CasCore> CasLimiter<C> {
    pub(crate) fn new(settings: Settings, core: C, policy: CasPolicy) -> Self {
        let core = Arc::new(core);
        let engine = Arc::new(Engine {
            store: settings.store.clone(),
            core: core.clone(),
            policy,
            deadline: settings.deadline,
            slack: settings.expiry_slack(),
            skew: i64::try_from(settings.max_clock_skew.as_nanos()).unwrap_or(i64::MAX),
            failures: settings.failures.clone(),
            counters: Counters::default(),
            queues: Queues::default(),
        });
        Self {
            settings,
            core,
            engine,
        }
    }

    /// Attempts made again after a conflict.
    pub(crate) fn cas_retries(&self) -> u64 {
        self.stats().retries
    }

    pub(crate) fn stats(&self) -> CasStats {
        self.engine.counters.snapshot()
    }

    /// The one key holding `client`'s state.
    pub(crate) fn key(&self, client: &[u8]) -> Vec<u8> {
        self.key_buf(client).to_vec()
    }

    /// [`key`](Self::key), on the stack.
    fn key_buf(&self, client: &[u8]) -> KeyBuf {
        self.settings
            .keys
            .client(client)
            .with_suffix(self.core.suffix())
    }

    /// Decides a request of `cost` from `client` at `now`, unix
    /// nanoseconds.
    pub(crate) async fn check_nanos(
        &self,
        client: &[u8],
        cost: u64,
        now: i64,
    ) -> Result<Decision, Error> {
        Ok(self.step(client, cost, now, Duration::ZERO).await?.0)
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
        let settings = &self.settings;
        settings.check_cost(cost, self.core.capacity())?;
        let ask = Ask {
            cost,
            now,
            strict: settings.denied == DeniedRequests::Counted,
            max_delay,
        };
        let key = self.key_buf(client);
        self.engine.counters.bump(DECISIONS);
        if let Some(store) = settings.store.immediate() {
            return self.engine.decide_now(store, &key, ask);
        }
        settings
            .within_deadline(Engine::submit(&self.engine, key.to_vec(), ask))
            .await
    }

    /// `client`'s state as stored, read without counting.
    pub(crate) async fn inspect(&self, client: &[u8], _now: i64) -> Result<Inspection, Error> {
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
        settings
            .within_deadline(settings.store.delete(&[key]))
            .await?;
        Ok(())
    }
}

impl<C: CasCore> Engine<C> {
    /// The store itself: calling through the `Arc` would go by the
    /// `Store` impl of `Arc`, one more boxed future per call.
    fn store(&self) -> &dyn Store {
        self.store.as_ref()
    }

    /// Decides one request on a store that answers at once: one atomic
    /// read-decide-write of the key's state, in the caller's poll. Nothing
    /// can write between the read and the write, so there is no conflict,
    /// no retry and nothing to combine.
    fn decide_now(&self, store: &dyn ImmediateStore, key: &[u8], ask: Ask) -> Answer {
        self.counters.bump(ATTEMPTS);
        let mut decided = None;
        store.update_now(key, &mut |current, next| {
            let (state, repaired) = match current {
                None => (None, false),
                Some(bytes) => self.read(key, bytes, ask.now),
            };
            let step = self.core.decide(state.as_ref(), ask);
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
    /// counted in [`FailureStats::repaired`](crate::FailureStats) and
    /// reported, and the decision writes the repaired state.
    fn read(&self, key: &[u8], bytes: &[u8], now: i64) -> (Option<C::State>, bool) {
        let Some(mut state) = self.core.decode(bytes) else {
            self.counters.bump(REPLACED);
            self.failures
                .repaired_state(key, bytes, "not this limiter's state; replaced");
            return (None, true);
        };
        if self.core.repair(&mut state, now, self.skew) {
            self.failures
                .repaired_state(key, bytes, "beyond the policy's horizon; clamped to it");
            return (Some(state), true);
        }
        (Some(state), false)
    }

    /// Queues one request for `key` and waits for its answer, starting the
    /// key's task if none serves it.
    async fn submit(engine: &Arc<Self>, key: Vec<u8>, ask: Ask) -> Answer {
        let (reply, answer) = oneshot::channel();
        let waiter = Waiter { ask, reply };
        let idle = {
            let mut queues = engine.queues.lock();
            match queues.get_mut(&key) {
                Some(queue) => {
                    queue.push_back(waiter);
                    false
                }
                None => {
                    queues.insert(key.clone(), VecDeque::from([waiter]));
                    true
                }
            }
        };
        // No `.await` between claiming the key and spawning its task, so a
        // caller dropped here cannot leave the key claimed with no task.
        if idle {
            tokio::spawn(Arc::clone(engine).serve(key));
        }
        match answer.await {
            Ok(answer) => answer,
            // The task ended without answering: it panicked, or its runtime
            // is shutting down. The request may have been written.
            Err(_) => Err(Error::Store(
                StoreError::new(
                    StoreErrorKind::Io,
                    "the compare-and-swap task for this key stopped before answering",
                )
                .ambiguous(),
            )),
        }
    }

    /// The key's task: decides groups until its queue is empty.
    async fn serve(self: Arc<Self>, key: Vec<u8>) {
        let mut release = Release {
            queues: &self.queues,
            key: &key,
            armed: true,
        };
        let Some(mut group) = self.take_group(&key) else {
            release.armed = false;
            return;
        };
        loop {
            // One group at most the deadline: by then every member, having
            // arrived before the group started, has given up waiting.
            let outcome = timeout(self.deadline, self.decide(&key, &mut group)).await;
            // Take the next group, or let go of the key, before answering
            // this one (see the module documentation for why).
            let next = self.take_group(&key);
            if next.is_none() {
                release.armed = false;
            }
            self.answer(group, outcome);
            match next {
                Some(waiting) => group = waiting,
                None => return,
            }
        }
    }

    /// The next group for `key`: up to [`MAX_GROUP`] queued requests, in
    /// arrival order. With none queued, the key is let go, under the same
    /// lock, so a request arriving next starts a new task.
    fn take_group(&self, key: &[u8]) -> Option<Vec<Waiter>> {
        let mut queues = self.queues.lock();
        let queue = queues.get_mut(key)?;
        if queue.is_empty() {
            queues.remove(key);
            return None;
        }
        let size = queue.len().min(MAX_GROUP);
        Some(queue.drain(..size).collect())
    }

    /// Hands every member of a finished group its own answer. A member that
    /// stopped waiting has dropped its receiver; its answer is dropped too.
    fn answer(
        &self,
        group: Vec<Waiter>,
        outcome: Option<Result<Vec<(Decision, Duration)>, Failure>>,
    ) {
        match outcome {
            Some(Ok(decided)) => {
                for (waiter, decision) in group.into_iter().zip(decided) {
                    let _ = waiter.reply.send(Ok(decision));
                }
            }
            Some(Err(failure)) => {
                for waiter in group {
                    let _ = waiter.reply.send(Err(failure.error()));
                }
            }
            None => {
                for waiter in group {
                    let _ = waiter
                        .reply
                        .send(Err(Error::DeadlineExceeded(self.deadline)));
                }
            }
        }
    }

    /// The optimistic loop for one group: read, decide every member in
    /// order, write the final state once; on a conflict, all again on
    /// fresh state. Returns one decision per member of `group` as it is on
    /// return: members that stopped waiting are dropped before each read,
    /// and again before deciding, so none is written for after it left.
    async fn decide(
        &self,
        key: &[u8],
        group: &mut Vec<Waiter>,
    ) -> Result<Vec<(Decision, Duration)>, Failure> {
        let attempts = self.policy.attempts;
        for attempt in 1..=attempts {
            // Nobody waits for these any more, and nothing was written for
            // them yet: leave them out, so they cost nothing.
            group.retain(|waiter| !waiter.reply.is_closed());
            if group.is_empty() {
                return Ok(Vec::new());
            }
            self.counters.bump(ATTEMPTS);
            let current = self.store().get(key).await.map_err(Failure::Store)?;
            // Again for those who gave up during the read: from here to the
            // write there is no `.await`, so a member is counted exactly when
            // it was still waiting as the write was sent.
            group.retain(|waiter| !waiter.reply.is_closed());
            if group.is_empty() {
                return Ok(Vec::new());
            }
            // Repaired on the first member's time: the state is clamped to
            // what a writer could have stored by then.
            let (mut state, repaired, condition) = match &current {
                None => (None, false, PutCondition::Absent),
                Some(stored) => {
                    let (state, repaired) = self.read(key, &stored.value, group[0].ask.now);
                    (state, repaired, PutCondition::Version(stored.version))
                }
            };
            // Each member on the state the one before it left, exactly as
            // if they had come one after another. The last write's lifetime
            // is the final state's.
            let mut ttl = None;
            let mut decided = Vec::with_capacity(group.len());
            for waiter in group.iter() {
                let step = self.core.decide(state.as_ref(), waiter.ask);
                if let Some((next, lifetime)) = step.write {
                    state = Some(next);
                    ttl = Some(lifetime);
                }
                decided.push((step.decision, step.delay));
            }
            if repaired && ttl.is_none() {
                // Nothing else changed it, but the repair is written all the
                // same, so the next read does not find the garbage again.
                ttl = decided.first().map(|(decision, _)| decision.reset_after());
            }
            let (Some(ttl), Some(last)) = (ttl, state.as_ref()) else {
                // Nothing changed: nothing to write, nothing to lose.
                return Ok(self.combined(decided));
            };
            let value = self.core.encode(last);
            match self
                .store()
                .put(key, &value, ttl + self.slack, condition)
                .await
                .map_err(Failure::Store)?
            {
                PutOutcome::Stored => return Ok(self.combined(decided)),
                PutOutcome::Conflict => {
                    self.counters.bump(CONFLICTS);
                    if attempt < attempts {
                        self.counters.bump(RETRIES);
                        tracing::debug!(
                            key = %String::from_utf8_lossy(key),
                            attempt,
                            group = group.len(),
                            "compare-and-swap conflict; retrying"
                        );
                        tokio::time::sleep(self.policy.backoff(attempt)).await;
                    }
                }
            }
        }
        self.counters.add(EXHAUSTED, group.len());
        tracing::debug!(
            key = %String::from_utf8_lossy(key),
            attempts,
            group = group.len(),
            "compare-and-swap attempts exhausted"
        );
        Err(Failure::Contention(attempts))
    }

    /// Counts a group's decisions as combined when it had more than one.
    fn combined(&self, decided: Vec<(Decision, Duration)>) -> Vec<(Decision, Duration)> {
        if decided.len() > 1 {
            self.counters.add(COMBINED, decided.len());
        }
        decided
    }
}

/// Lets go of a key if its task stops without doing so itself: a panic in
/// the core or the store, or the runtime dropping the task at shutdown.
/// Removing the key drops the queued requests' senders, so they fail at once
/// instead of waiting out their deadlines for a task that is gone, and the
/// next request for the key starts a new task.
struct Release<'a> {
    queues: &'a Queues,
    key: &'a [u8],
    armed: bool,
}

impl Drop for Release<'_> {
    fn drop(&mut self) {
        if self.armed {
            let abandoned = self.queues.lock().remove(self.key);
            // Dropped outside the lock: dropping a sender wakes its
            // receiver.
            drop(abandoned);
        }
    }
}

/// A key suffix naming an algorithm and its parameters: `<tag>-<hash>`,
/// where the hash is XXH3 of the parameters' canonical text.
pub(crate) fn parameter_suffix(tag: &str, parameters: &str) -> String {
    format!(
        "{tag}-{:016x}",
        xxhash_rust::xxh3::xxh3_64(parameters.as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Clock, MemoryStore, SystemClock};
    use std::future::Future;
    use std::panic::{self, AssertUnwindSafe};
    use std::task::Poll;

    fn now() -> i64 {
        SystemClock.unix_nanos().unwrap()
    }

    /// A counter up to `limit`; a cost of `PANIC` panics, as a buggy core
    /// would.
    #[derive(Debug)]
    struct Count {
        limit: u64,
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
    }

    /// A [`MemoryStore`] whose reads and writes each wait once, as a
    /// round trip to memcached would, so requests for a key overlap.
    #[derive(Debug, Default)]
    struct Waiting(MemoryStore);

    #[async_trait::async_trait]
    impl Store for Waiting {
        async fn increment(
            &self,
            key: &[u8],
            delta: u64,
            ttl: Duration,
            also_read: &[Vec<u8>],
        ) -> Result<crate::store::Counters, StoreError> {
            self.0.increment(key, delta, ttl, also_read).await
        }

        async fn decrement(&self, key: &[u8], delta: u64) -> Result<Option<u64>, StoreError> {
            self.0.decrement(key, delta).await
        }

        async fn get_counters(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<u64>>, StoreError> {
            self.0.get_counters(keys).await
        }

        async fn get(&self, key: &[u8]) -> Result<Option<crate::store::Versioned>, StoreError> {
            tokio::task::yield_now().await;
            self.0.get(key).await
        }

        async fn put(
            &self,
            key: &[u8],
            value: &[u8],
            ttl: Duration,
            condition: PutCondition,
        ) -> Result<PutOutcome, StoreError> {
            tokio::task::yield_now().await;
            self.0.put(key, value, ttl, condition).await
        }

        async fn delete(&self, keys: &[Vec<u8>]) -> Result<usize, StoreError> {
            self.0.delete(keys).await
        }
    }

    fn limiter_on(store: Arc<dyn Store>, limit: u64) -> Arc<CasLimiter<Count>> {
        // Through the builder, so the test follows whatever settings exist.
        let settings = crate::TokenBucket::builder("10/minute".parse().unwrap(), store)
            .deadline(Duration::from_secs(10))
            .into_settings()
            .unwrap();
        Arc::new(CasLimiter::new(
            settings,
            Count { limit },
            CasPolicy::default(),
        ))
    }

    /// On a store that waits like memcached.
    fn limiter(limit: u64) -> Arc<CasLimiter<Count>> {
        limiter_on(Arc::new(Waiting::default()), limit)
    }

    fn keys_in_flight(limiter: &CasLimiter<Count>) -> usize {
        limiter.engine.queues.lock().len()
    }

    /// Spawns `costs.len()` requests for one client, in order, and returns
    /// their answers in the same order. On a current-thread runtime they all
    /// queue before the key's task first runs.
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
        // 1,024 then 476: two reads, two writes.
        assert_eq!((stats.decisions, stats.attempts), (1_500, 2));
        assert_eq!(stats.combined, 1_500);
        assert_eq!(keys_in_flight(&limiter), 0);
    }

    #[tokio::test]
    async fn a_panicking_group_fails_its_members_and_frees_the_key() {
        let limiter = limiter(10);
        // All three queue before the key's task first runs: one group.
        let answers = burst(&limiter, &[PANIC, 1, 1]).await;
        for answer in &answers {
            assert!(
                matches!(answer, Err(Error::Store(e)) if e.is_ambiguous()),
                "{answer:?}"
            );
        }
        assert_eq!(keys_in_flight(&limiter), 0);
        // Nothing was written; the key works again.
        let (decision, _) = limiter.step(b"c", 3, now(), Duration::ZERO).await.unwrap();
        assert_eq!(decision.remaining(), 7);
        assert_eq!(keys_in_flight(&limiter), 0);
    }

    #[tokio::test]
    async fn a_store_without_the_synchronous_path_is_served_by_the_keys_task() {
        // Answers at once, but through the asynchronous calls only.
        let store = crate::store::CountingStore::new(MemoryStore::new());
        assert!(store.immediate().is_none());
        let limiter = limiter_on(Arc::new(store), 10);
        for remaining in [9, 8, 7] {
            let (decision, _) = limiter.step(b"c", 1, now(), Duration::ZERO).await.unwrap();
            assert_eq!(decision.remaining(), remaining);
            assert_eq!(keys_in_flight(&limiter), 0);
        }
        // A panic on the key's task: an error for the caller, and the key
        // let go.
        let answer = limiter.step(b"c", PANIC, now(), Duration::ZERO).await;
        assert!(
            matches!(&answer, Err(Error::Store(e)) if e.is_ambiguous()),
            "{answer:?}"
        );
        assert_eq!(keys_in_flight(&limiter), 0);
        let (decision, _) = limiter.step(b"c", 1, now(), Duration::ZERO).await.unwrap();
        assert_eq!(decision.remaining(), 6);
        let stats = limiter.stats();
        assert_eq!((stats.decisions, stats.combined), (5, 0));
    }

    #[tokio::test]
    async fn an_immediate_store_is_decided_in_one_atomic_step() {
        let store = Arc::new(MemoryStore::new());
        let limiter = limiter_on(store.clone(), 10);
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
        assert_eq!(limiter.settings.failures.stats().repaired, 1);
        // A count beyond what the core allows is clamped, counted, and
        // written back even though the denial changes nothing else.
        store
            .put(&key, b"99", Duration::from_secs(60), PutCondition::Always)
            .await
            .unwrap();
        let (decision, _) = limiter.step(b"c", 1, now(), Duration::ZERO).await.unwrap();
        assert!(decision.is_denied());
        assert_eq!(store.get(&key).await.unwrap().unwrap().value, b"10");
        assert_eq!(limiter.settings.failures.stats().repaired, 2);
    }
}
