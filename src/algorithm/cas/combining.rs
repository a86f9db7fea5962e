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
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;

use super::core::Ask;
use crate::algorithm::settings::timeout;
use crate::decision::Decision;
use crate::error::{Error, StoreError, StoreErrorKind};
use crate::key::KeyHasher;

/// The most requests decided in one group: one read, up to this many
/// decisions, one write. More waiting requests go to the next group.
pub(crate) const MAX_GROUP: usize = 1_024;

/// What one request gets back: its decision and how long to wait.
pub(super) type Answer = Result<(Decision, Duration), Error>;

/// A request waiting for its group.
#[derive(Debug)]
pub(super) struct Waiter {
    pub(super) ask: Ask,
    pub(super) reply: oneshot::Sender<Answer>,
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
struct Queues(Mutex<HashMap<Vec<u8>, VecDeque<Waiter>, KeyHasher>>);

impl Queues {
    /// The map. The lock is only ever held for a push, a take or a removal,
    /// none of which can panic midway, so a poisoned lock still holds a
    /// consistent map and is used as is.
    pub(super) fn lock(&self) -> MutexGuard<'_, HashMap<Vec<u8>, VecDeque<Waiter>, KeyHasher>> {
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
        group: &'a mut Vec<Waiter>,
    ) -> impl Future<Output = Result<Vec<(Decision, Duration)>, Failure>> + Send + 'a;
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

    /// The next group for `key`: up to [`MAX_GROUP`] queued requests, in
    /// arrival order. With none queued, the key is let go, under the same
    /// lock, so a request arriving next starts a new task.
    pub(super) fn take_group(&self, key: &[u8]) -> Option<Vec<Waiter>> {
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
    pub(super) fn answer(
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
}

/// Queues one request for `key` and waits for its answer, starting the
/// key's task if none serves it.
pub(super) async fn submit<D: Decider>(decider: &Arc<D>, key: Vec<u8>, ask: Ask) -> Answer {
    let (reply, answer) = oneshot::channel();
    let waiter = Waiter { ask, reply };
    let idle = {
        let mut queues = decider.combiner().queues.lock();
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
        tokio::spawn(serve(Arc::clone(decider), key));
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
async fn serve<D: Decider>(decider: Arc<D>, key: Vec<u8>) {
    let combiner = decider.combiner();
    let mut release = Release {
        queues: &combiner.queues,
        key: &key,
        armed: true,
    };
    let Some(mut group) = combiner.take_group(&key) else {
        release.armed = false;
        return;
    };
    loop {
        // One group at most the deadline: by then every member, having
        // arrived before the group started, has given up waiting.
        let outcome = timeout(combiner.deadline, decider.decide_group(&key, &mut group)).await;
        // Take the next group, or let go of the key, before answering
        // this one (see the module documentation for why).
        let next = combiner.take_group(&key);
        if next.is_none() {
            release.armed = false;
        }
        combiner.answer(group, outcome);
        match next {
            Some(waiting) => group = waiting,
            None => return,
        }
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
