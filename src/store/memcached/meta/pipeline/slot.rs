//! The batch slots of a lane: the one a call takes to run its own job, and
//! the one a spawned task holds while it drains the queue.

use std::sync::Arc;

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

/// The batch slot of a spawned task that sends queued jobs. Dropped before
/// the queue ran dry (the runtime shut down), it fails the jobs it had not
/// sent and hands the slot on to the queue.
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

impl Slot {
    pub(super) fn pending(inner: Arc<Inner>, lane: usize, jobs: Vec<Job>) -> Self {
        Self {
            inner,
            lane,
            started: false,
            pending: jobs,
            finished: false,
        }
    }

    /// Sends batches until the queue is empty, then frees the slot. One
    /// list of jobs, and one of their answers, serve every batch in turn.
    ///
    /// A batch that finds jobs queued behind it hands its connection
    /// straight to the next one (still probed, as one from the idle stack
    /// is), while no other caller waits for a connection slot. Giving it
    /// back and taking it again for every batch (two jobs or so under the
    /// web service's 16 connections) took the idle stack's lock twice and
    /// the slot's semaphore twice: some 100 instructions a request more in
    /// those functions, net of this (callgrind, `bench/web/run.py`, the
    /// `MemcachedStore::increment` cases).
    pub(super) async fn drive(mut self) {
        self.started = true;
        let mut answers = Vec::new();
        let mut kept = None;
        loop {
            // Out of `pending` while they are sent: a slot dropped
            // meanwhile must not report them unsent.
            let mut jobs = std::mem::take(&mut self.pending);
            self.inner
                .run_jobs(self.lane, &mut jobs, &mut answers, &mut kept)
                .await;
            let keep = kept.is_some() && self.inner.pools.has_free_slot(self.lane);
            if !(keep && self.inner.next_queued(self.lane, &mut jobs)) {
                if let Some(checkout) = kept.take() {
                    let (connection, slot) = checkout.into_parts();
                    self.inner.pools.give_back(self.lane, connection, slot);
                }
                if !self.inner.next_batch(self.lane, &mut jobs) {
                    self.finished = true;
                    return;
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
