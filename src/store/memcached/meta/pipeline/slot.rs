//! The batch slots of a lane: the one a call takes to run its own job, and
//! the one a driver holds while it drains the queue; and a driver waiting,
//! with no slot, for the next one handed to it.

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};

use super::{Inner, Job};

/// The batch slot a call took to run its own job in its own future. Freed
/// (or handed to the queue) when the call ends or is cancelled.
pub(super) struct InlineSlot {
    pub(super) inner: Arc<Inner>,
    pub(super) lane: usize,
}

impl Drop for InlineSlot {
    fn drop(&mut self) {
        self.inner.hand_off(self.lane, true);
    }
}

/// The batch slot of a driver, the task that sends queued jobs. Dropped
/// before the queue ran dry (the runtime shut down), it fails the jobs it
/// had not sent and hands the slot on to the queue.
pub(super) struct Slot {
    inner: Arc<Inner>,
    lane: usize,
    /// Whether the holder ever ran; a task dropped before its first poll
    /// (runtime shutting down) must not spawn a successor.
    started: bool,
    /// Jobs assigned to this slot and not yet sent.
    pending: Vec<Job>,
    finished: bool,
}

/// A driver's task: sends batches while jobs queue, then waits, with no
/// slot and no hold on the pipeline, until a slot is handed to it again;
/// ends with the pipeline, or with its runtime.
///
/// A task per burst of queued jobs, spawned when a call's own batch ended
/// with jobs queued behind it and ended once the queue ran dry, cost
/// every such hand-off a task's allocation (aligned, so past glibc's
/// per-thread cache), its scheduling and its free: under the web
/// service's 16 connections, some 400 instructions a request in those
/// functions (callgrind, `bench/web/run.py`, the
/// `MemcachedStore::increment` cases). Waking a waiting driver costs a
/// lock and a wake; the batch it sends is taken when the slot is handed
/// on, as it was for a new task. (Taken later, when the woken driver
/// ran, batches grew: sliding window n = 4 with 100,000 clients at 64 in
/// flight went from 6.3 and 6.8 operations a round trip to 13.6 and 20.8,
/// with fewer batches on the wire at once and fewer decisions a second:
/// `memcache-ratelimit-bench --mode many --in-flight 64,256 --only
/// 'SlidingWindow n=4'`.) A lane has at most its depth of drivers: one is
/// started only when a slot is handed on and none waits, and every
/// driver not waiting holds a slot.
pub(super) async fn drive(mut slot: Slot) {
    let mut answers = Vec::new();
    loop {
        let idle = slot.send(&mut answers).await;
        match idle.await {
            Some(next) => slot = next,
            None => return,
        }
    }
}

impl Slot {
    /// The slot of a driver that is to send `jobs` first; `started` if
    /// its task already runs (a driver handed the slot while it waited).
    pub(super) fn pending(inner: Arc<Inner>, lane: usize, jobs: Vec<Job>, started: bool) -> Self {
        Self {
            inner,
            lane,
            started,
            pending: jobs,
            finished: false,
        }
    }

    /// Sends batches until the queue is empty, then frees the slot and
    /// registers the driver as idle. One list of jobs, and one of their
    /// answers, serve every batch in turn.
    ///
    /// A batch that finds jobs queued behind it hands its connection
    /// straight to the next one (still probed, as one from the idle stack
    /// is), while no other caller waits for a connection slot. Giving it
    /// back and taking it again for every batch (two jobs or so under the
    /// web service's 16 connections) took the idle stack's lock twice and
    /// the slot's semaphore twice: some 100 instructions a request more in
    /// those functions, net of this (callgrind, `bench/web/run.py`, the
    /// `MemcachedStore::increment` cases).
    async fn send(mut self, answers: &mut Vec<super::Answers>) -> Idle {
        self.started = true;
        let mut kept = None;
        loop {
            // Out of `pending` while they are sent: a slot dropped
            // meanwhile must not report them unsent.
            let mut jobs = std::mem::take(&mut self.pending);
            self.inner
                .run_jobs(self.lane, &mut jobs, answers, &mut kept)
                .await;
            let keep = kept.is_some() && self.inner.pools.has_free_slot(self.lane);
            if !(keep && self.inner.next_queued(self.lane, &mut jobs)) {
                if let Some(checkout) = kept.take() {
                    let (connection, slot) = checkout.into_parts();
                    self.inner.pools.give_back(self.lane, connection, slot);
                }
                let idle = poll_fn(|context| {
                    Poll::Ready(self.inner.next_batch_or_idle(
                        self.lane,
                        &mut jobs,
                        context.waker(),
                    ))
                })
                .await;
                if let Some(number) = idle {
                    self.finished = true;
                    return Idle {
                        inner: Arc::downgrade(&self.inner),
                        lane: self.lane,
                        number: Some(number),
                    };
                }
            }
            self.pending = jobs;
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        let pending = std::mem::take(&mut self.pending);
        if !pending.is_empty() {
            self.inner.fail(self.lane, pending);
        }
        self.inner.hand_off(self.lane, self.started);
    }
}

/// A driver waiting in its lane's idle list for a slot: ready with the
/// slot and the batch handed to it, or with `None` once the pipeline is
/// gone. It holds the pipeline weakly, so a store dropped meanwhile is
/// freed (and wakes it to end).
struct Idle {
    inner: Weak<Inner>,
    lane: usize,
    /// The number it waits under; `None` once it is no longer registered.
    number: Option<u64>,
}

impl Future for Idle {
    type Output = Option<Slot>;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Option<Slot>> {
        let this = self.get_mut();
        let Some(number) = this.number else {
            return Poll::Ready(None);
        };
        let Some(inner) = this.inner.upgrade() else {
            this.number = None;
            return Poll::Ready(None);
        };
        let handed = std::task::ready!(inner.poll_idle(this.lane, number, context.waker()));
        this.number = None;
        Poll::Ready(handed.map(|jobs| Slot::pending(inner, this.lane, jobs, true)))
    }
}

/// Dropped while registered (its runtime shut down), it leaves the idle
/// list, or puts back the batch handed to it meanwhile and hands on its
/// slot.
impl Drop for Idle {
    fn drop(&mut self) {
        if let Some(number) = self.number.take() {
            if let Some(inner) = self.inner.upgrade() {
                inner.leave_idle(self.lane, number);
            }
        }
    }
}
