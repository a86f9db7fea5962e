//! Local combining of the requests for one key.
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
//! Who runs a key's decisions:
//!
//! - **A request for an idle key decides itself, in its caller's future.**
//!   It claims the key (an empty queue in the map) and runs its own
//!   read-decide-write: no task, no channel, no timer beyond the limiter's
//!   deadline. This is the common case (requests for one key seldom
//!   overlap), and it costs what a direct call costs.
//! - **Requests that find the key claimed queue**, each with a channel for
//!   its answer. When the claiming request ends, whether it finished, its
//!   caller stopped waiting (its deadline, a `select!`, a client hanging up)
//!   or it panicked, a guard hands the queue to a spawned task, which
//!   decides the queued requests in groups until the queue is empty. So a
//!   queued request never depends on another caller's future: a spawned
//!   task is dropped by nobody's deadline, and it answers every member of
//!   its groups.
//! - A request that stops waiting while it runs its own decision has the
//!   outcome of any request that times out ([`Error::DeadlineExceeded`]):
//!   if its write was sent it may have been counted, and the store call's
//!   own rules say whether it was (a pipelined memcached call already sent
//!   finishes; a queued one is never sent). The requests queued behind it
//!   are decided by the task on whatever the store then holds, through the
//!   compare-and-swap, so none of them is decided on a stale state.
//! - A queued member that stops waiting closes its channel. If that happens
//!   before its group's write is sent, it is left out of the decision and
//!   nothing is counted for it. If it happens after, the write carries its
//!   cost (if it was allowed, or strict): its quota is spent although its
//!   caller never learns so, the same "outcome unknown" as above. The
//!   others' decisions stand either way: each was made on the state the
//!   ones before it left.
//! - The bookkeeping is a `std::sync::Mutex<HashMap<key, queue>>`, held only
//!   to push a request, claim or let go of a key, or take a group, never
//!   across an `.await`. A key is in the map exactly while a request or a
//!   task runs its decisions: a request either joins a queue that a live
//!   decider will still hand on or take, or claims the key itself; none is
//!   lost, and none waits on a decider that has gone.
//! - The task removes its key *before* it hands out the last group's
//!   answers, so once a caller has its answer no task of its runtime still
//!   holds the key: a runtime that stops being driven after its last
//!   decision (a `block_on` that returned) does not leave the key stuck for
//!   callers on another runtime. (A limiter shared by several runtimes at
//!   once still needs a runtime to keep running while a key's task it
//!   started has work; a multi-thread runtime always does. A request stuck
//!   otherwise ends at its deadline.)
//! - A bug in the core panics the request that runs it, as any synchronous
//!   call would, and the queue is handed on. If the key's task stops
//!   abnormally (a panic, or its runtime shutting down, even before the
//!   task first ran), a guard removes
//!   the key and drops the queued requests' channels: they get an error at
//!   once rather than waiting out their deadlines, and the next request
//!   claims the key afresh.
//! - A group holds at most `MAX_GROUP` (1,024) requests, so one
//!   read-decide-write stays bounded however hot the key; the rest wait
//!   for the next group.
//!
//! A store that answers at once takes the synchronous path instead (see
//! [`optimistic`](super::optimistic)).
//!
//! Combining is per limiter and per key; limiters in other processes (or
//! another limiter object in this one) on the same key still race, through
//! the compare-and-swap, as before.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use hashbrown::hash_map::EntryRef;
use smallvec::SmallVec;
use tokio::sync::oneshot;

use super::core::Ask;
use crate::decision::Decision;
use crate::error::{Error, StoreError, StoreErrorKind};
use crate::held_key::HeldKey;
use crate::key::KeyHasher;
use crate::timer::timeout;

/// The most requests decided in one group: one read, up to this many
/// decisions, one write. More waiting requests go to the next group.
pub(crate) const MAX_GROUP: usize = 1_024;

/// What one request gets back: its decision and how long to wait.
pub(super) type Answer = Result<(Decision, Duration), Error>;

/// The members of one group, in arrival order: inline for the request
/// that decides itself alone, the common case, so that it allocates no
/// list.
pub(super) type Group = SmallVec<[Waiter; 1]>;

/// A group's decisions, one per member in order, with each one's delay.
pub(super) type Decided = SmallVec<[(Decision, Duration); 1]>;

/// A request in a group.
#[derive(Debug)]
pub(super) struct Waiter {
    pub(super) ask: Ask,
    /// Where its answer goes; `None` for the request that claimed an idle
    /// key and decides itself.
    pub(super) reply: Option<oneshot::Sender<Answer>>,
}

impl Waiter {
    /// Whether its caller stopped waiting (never, for a request deciding
    /// itself: its caller is the one running the decision).
    pub(super) fn gone(&self) -> bool {
        self.reply.as_ref().is_some_and(oneshot::Sender::is_closed)
    }

    fn send(self, answer: Answer) {
        if let Some(reply) = self.reply {
            let _ = reply.send(answer);
        }
    }
}

/// Why a whole group got no decision. `Error` is not `Clone`, so each
/// member gets its own copy made from this.
pub(super) enum Failure {
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
struct Queues(Mutex<HashMap<HeldKey, VecDeque<Waiter>, KeyHasher>>);

/// The queues' map: hashbrown's, for `entry_ref`, which hashes a key once
/// to find it and to insert or remove it, and copies it only to insert,
/// inline for a key of up to 54 bytes ([`HeldKey`]): a request that
/// claims an idle key allocates nothing for it.
type HashMap<K, V, S> = hashbrown::HashMap<K, V, S>;

impl Queues {
    /// The map. The lock is only ever held for a push, a take or a removal,
    /// none of which can panic midway, so a poisoned lock still holds a
    /// consistent map and is used as is.
    pub(super) fn lock(&self) -> MutexGuard<'_, HashMap<HeldKey, VecDeque<Waiter>, KeyHasher>> {
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

/// The queues of one limiter's keys, and the bound on one group.
#[derive(Debug)]
pub(super) struct Combiner {
    queues: Queues,
    /// The limiter's deadline, which also bounds one group.
    deadline: Duration,
}

/// What decides a key's groups: the optimistic loop over a store.
pub(super) trait Decider: Send + Sync + Sized + 'static {
    /// The queues requests wait in.
    fn combiner(&self) -> &Combiner;

    /// Decides `group`, in arrival order, on the state stored at `key`:
    /// one decision per member, or why the whole group got none.
    fn decide_group<'a>(
        &'a self,
        key: &'a [u8],
        group: &'a mut Group,
    ) -> impl Future<Output = Result<Decided, Failure>> + Send + 'a;
}

impl Combiner {
    pub(super) fn new(deadline: Duration) -> Self {
        Self {
            queues: Queues::default(),
            deadline,
        }
    }

    /// Keys with a task serving them now.
    #[cfg(test)]
    pub(super) fn keys_in_flight(&self) -> usize {
        self.queues.lock().len()
    }

    /// Lets go of `key` with no one to decide its queued requests: their
    /// channels are dropped, so they fail at once instead of waiting out
    /// their deadlines, and the next request claims the key afresh.
    fn abandon(&self, key: &[u8]) {
        let abandoned = self.queues.lock().remove(key);
        // Dropped outside the lock: dropping a sender wakes its receiver.
        drop(abandoned);
    }

    /// The next group for `key`: up to [`MAX_GROUP`] queued requests, in
    /// arrival order. With none queued, the key is let go, under the same
    /// lock, so a request arriving next starts a new task.
    pub(super) fn take_group(&self, key: &[u8]) -> Option<Group> {
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
    pub(super) fn answer(&self, group: Group, outcome: Option<Result<Decided, Failure>>) {
        match outcome {
            Some(Ok(decided)) => {
                for (waiter, decision) in group.into_iter().zip(decided) {
                    waiter.send(Ok(decision));
                }
            }
            Some(Err(failure)) => {
                for waiter in group {
                    waiter.send(Err(failure.error()));
                }
            }
            None => {
                for waiter in group {
                    waiter.send(Err(Error::DeadlineExceeded(self.deadline)));
                }
            }
        }
    }
}

/// Decides one request for `key`: in the caller's future if the key is
/// idle, otherwise queued for the key's next group.
pub(super) async fn submit<D: Decider>(decider: &Arc<D>, key: &[u8], ask: Ask) -> Answer {
    let queued = {
        let mut queues = decider.combiner().queues.lock();
        match queues.entry_ref(key) {
            EntryRef::Occupied(mut queue) => {
                let (reply, answer) = oneshot::channel();
                queue.get_mut().push_back(Waiter {
                    ask,
                    reply: Some(reply),
                });
                Some(answer)
            }
            EntryRef::Vacant(idle) => {
                idle.insert(VecDeque::new());
                None
            }
        }
    };
    if let Some(answer) = queued {
        return queued_answer(answer).await;
    }
    // Decides `ask` on the key it claimed, then hands on the requests that
    // queued meanwhile (see [`HandOff`]); here rather than in a function
    // of its own, whose future would hold its arguments once more. No
    // `.await` between claiming the key and arming the guard that lets it
    // go, so a caller dropped here cannot leave it claimed.
    let hand_off = HandOff { decider, key };
    let mut alone: Group = smallvec::smallvec![Waiter { ask, reply: None }];
    let outcome = decider.decide_group(key, &mut alone).await;
    drop(hand_off);
    alone_answer(outcome)
}

/// The answer of a request that decided itself alone.
fn alone_answer(outcome: Result<Decided, Failure>) -> Answer {
    match outcome {
        Ok(mut decided) => decided.pop().ok_or_else(|| {
            // A request deciding itself is never left out of its group.
            Error::Store(StoreError::new(
                StoreErrorKind::Io,
                "the compare-and-swap loop returned no decision",
            ))
        }),
        Err(failure) => Err(failure.error()),
    }
}

/// The answer of a queued request.
async fn queued_answer(answer: oneshot::Receiver<Answer>) -> Answer {
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

/// Armed while a request decides itself on the key it claimed. However
/// that ends (finished, dropped by its caller, or a panic), the requests
/// that queued meanwhile go to a spawned task, or the key is let go if none
/// did. With no runtime to spawn on, the key is let go and the queued
/// requests' channels dropped: they fail at once.
struct HandOff<'a, D: Decider> {
    decider: &'a Arc<D>,
    key: &'a [u8],
}

impl<D: Decider> Drop for HandOff<'_, D> {
    fn drop(&mut self) {
        let queues = &self.decider.combiner().queues;
        let mut map = queues.lock();
        match map.entry_ref(self.key) {
            EntryRef::Occupied(queue) if queue.get().is_empty() => {
                queue.remove();
                return;
            }
            EntryRef::Vacant(_) => return,
            EntryRef::Occupied(_) => {}
        }
        match tokio::runtime::Handle::try_current() {
            // The key stays claimed, now by the task.
            Ok(runtime) => {
                drop(map);
                runtime.spawn(serve(Claimed {
                    decider: Arc::clone(self.decider),
                    key: self.key.to_vec(),
                    armed: true,
                }));
            }
            Err(_) => {
                drop(map);
                self.decider.combiner().abandon(self.key);
            }
        }
    }
}

/// The key's task: decides groups until its queue is empty. It owns the
/// key's claim from before it is spawned, so a task that never runs (its
/// runtime is shutting down) still lets the key go.
async fn serve<D: Decider>(mut claim: Claimed<D>) {
    let decider = Arc::clone(&claim.decider);
    let combiner = decider.combiner();
    let Some(mut group) = combiner.take_group(&claim.key) else {
        claim.armed = false;
        return;
    };
    loop {
        // One group at most the deadline: by then every member, having
        // arrived before the group started, has given up waiting.
        let outcome = timeout(
            combiner.deadline,
            decider.decide_group(&claim.key, &mut group),
        )
        .await;
        // Take the next group, or let go of the key, before answering
        // this one (see the module documentation for why).
        let next = combiner.take_group(&claim.key);
        if next.is_none() {
            claim.armed = false;
        }
        combiner.answer(group, outcome);
        match next {
            Some(waiting) => group = waiting,
            None => return,
        }
    }
}

/// A key's claim, held by its task. Dropped armed (the task panicked, or
/// its runtime dropped it, run or not), it removes the key: the queued
/// requests' channels are dropped, so they fail at once instead of waiting
/// out their deadlines for a task that is gone, and the next request for
/// the key claims it afresh.
struct Claimed<D: Decider> {
    decider: Arc<D>,
    key: Vec<u8>,
    armed: bool,
}

impl<D: Decider> Drop for Claimed<D> {
    fn drop(&mut self) {
        if self.armed {
            self.decider.combiner().abandon(&self.key);
        }
    }
}
