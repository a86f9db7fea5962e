//! Auto-pipelining for [`MemcachedStore`](crate::store::MemcachedStore): the calls
//! in flight at the same moment toward one server share one pipelined
//! batch, so throughput under concurrency approaches what memcached serves
//! on a few busy connections instead of costing one connection per call.
//!
//! Each store call is a *job*: its operations, all for one server, and a
//! one-shot [`handoff`] for its results. Per server a *lane* holds a queue of jobs and
//! allows up to `depth` batches in flight at once:
//!
//! - A call that finds a batch slot free takes it and runs its own job as a
//!   one-job batch in its own future: at low concurrency the cost over a
//!   direct call is one uncontended lock, no task hop and no timer.
//! - A call that finds every slot busy queues its job and waits. When a
//!   batch finishes, its slot is not given back while jobs wait: the queue
//!   (up to the batch's cap on operations, [`DEFAULT_BATCH_OPS`] unless the
//!   builder says otherwise) goes out as the
//!   next batch, on a task of the lane's (a *driver*) that keeps going
//!   until the queue is empty, then waits, with no slot, for the next
//!   slot handed to it; a lane starts a driver only when none waits, so
//!   it has at most `depth` of them. So while `depth` batches are on the
//!   wire the calls arriving meanwhile pile up into the next one; that is
//!   where coalescing comes from.
//!
//! A job's operations stay contiguous and in order within a batch, so an
//! increment is still read back by the reads that follow it. Results are
//! attributed per operation (see [`exchange`](mod@super::exchange): a
//! written operation that was not answered is ambiguous), so a batch
//! failing part way gives each job exactly its own operations' errors.
//! Nothing is retried.
//!
//! One cost of sharing: when memcached answers an operation with an error
//! line (`CLIENT_ERROR`, such as an increment of a value that is not a
//! number, or `SERVER_ERROR`, such as out of memory), reading the batch
//! stops there and its connection is closed, although memcached goes on
//! executing the rest. The jobs batched after it then fail too, ambiguous
//! if they write; their error says so rather than repeating the other
//! job's. The limiters' own keys never hold non-numbers, so this takes a
//! corrupted key or a server in trouble.
//!
//! A caller that stops waiting (a limiter deadline drops its future) never
//! costs a connection: a queued job whose caller has gone is never sent,
//! and a batch already sent goes on until its replies are read: on a
//! driver within the batch's bound (the I/O timeout and the drain
//! timeout), or, for the batch of a call that took a free slot, within the
//! drain timeout once that call stops waiting (it is then
//! [`detached`](crate::store::memcached::detach)). Its connection then goes back to the
//! pool, so against a server that hangs a lane holds at most `depth`
//! connections and dials no more. A queued job is never left without a task to send it: if
//! the runtime shuts down under it, the job fails with a
//! [`StoreError`] instead, and a driver that waits when its runtime shuts
//! down leaves the lane, so no slot is handed to it. A driver runs on the
//! runtime of the call that started it, and ends with its store; like the
//! pooled connections, a store is meant to be used from one runtime.

mod handoff;
mod slot;
mod stats;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};
use std::time::Duration;

use self::slot::{InlineSlot, Slot};
pub use self::stats::PipelineStats;
use self::stats::Stats;
use super::exchange::{exchange, exchange_one, room_for, Answers};
use super::request::Request;
use crate::error::{StoreError, StoreErrorKind};
use crate::store::memcached::pool::{Checkout, Pools};
use crate::timer::TimerQueue;

/// The most operations one batch carries by default (a bigger job goes out
/// alone). With 64 sliding-window
/// decisions of about 4 operations each in flight, 128 gave about twice
/// the decisions/s of 2,048 (see `bench/`); where memcached shares a CPU
/// with its client, bigger batches pay (see
/// [`MemcachedStoreBuilder::pipeline_batch`](crate::store::MemcachedStoreBuilder::pipeline_batch)).
pub(crate) const DEFAULT_BATCH_OPS: usize = 128;

/// One job's results: one per operation, in order. The outer error means
/// nothing of the job was sent.
pub(crate) type JobResults = Result<Answers, StoreError>;

struct Job {
    request: Request,
    /// Empty, with room for the request's answers: allocated as the job
    /// is queued, by its caller, one among that caller's own allocations
    /// and frees (a caller that decides again has just freed its last
    /// list), rather than by the batch that sends it. A batch allocating
    /// a list for each of its jobs in a row ran past the allocator's
    /// per-thread cache (seven blocks a size), and each list then cost
    /// some 400 instructions (callgrind, 256 in flight).
    answers: Answers,
    reply: handoff::Sender,
}

impl Job {
    fn new(request: Request, reply: handoff::Sender) -> Self {
        Self {
            answers: room_for(&request),
            request,
            reply,
        }
    }
}

/// An exchange sends the batch's jobs as they are, with no list of their
/// requests made for it.
impl AsRef<Request> for Job {
    fn as_ref(&self) -> &Request {
        &self.request
    }
}

#[derive(Default)]
struct Lane {
    /// Batch slots taken, at most `depth`. Jobs queue only while all are
    /// taken, and a slot is handed on rather than freed while jobs queue,
    /// so the queue is never left without a batch in flight to drain it.
    /// A slot handed to an idle driver counts from the moment it is
    /// handed, before the driver runs.
    in_flight: usize,
    queue: VecDeque<Job>,
    /// Drivers (tasks that send queued jobs) waiting for work, holding no
    /// slot. A slot handed on while one waits goes to it, with the batch
    /// it is to send, rather than to a new task; the driver stays here,
    /// handed them, until it runs and takes them.
    idle: Vec<Idle>,
    /// The number the next idle driver is registered under.
    next_idle: u64,
}

/// A driver waiting in [`Lane::idle`].
struct Idle {
    number: u64,
    waker: Waker,
    /// Empty, with the room of the driver's last batch, for its next
    /// one; once `handed`, that batch.
    jobs: Vec<Job>,
    /// Handed a slot, and `jobs` to send with it.
    handed: bool,
}

impl Lane {
    /// Frees the slot of a driver that has no batch to send and registers
    /// it as idle, woken by `waker` when a slot is handed to it, `jobs`
    /// (empty) kept for its next batch; the number it is registered
    /// under.
    fn idle(&mut self, waker: &Waker, jobs: &mut Vec<Job>) -> u64 {
        self.in_flight -= 1;
        let number = self.next_idle;
        self.next_idle += 1;
        self.idle.push(Idle {
            number,
            waker: waker.clone(),
            jobs: std::mem::take(jobs),
            handed: false,
        });
        number
    }

    /// Moves the next batch into `batch` (empty): queued jobs in order, up
    /// to `max_ops` operations, at least one job.
    fn take_batch(&mut self, max_ops: usize, batch: &mut Vec<Job>) {
        let mut ops = 0;
        while let Some(job) = self.queue.front() {
            if !batch.is_empty() && ops + job.request.len() > max_ops {
                break;
            }
            ops += job.request.len();
            batch.extend(self.queue.pop_front());
        }
    }
}

struct Inner {
    pools: Arc<Pools>,
    /// How long one batch's exchange may take, its replies included, and
    /// the timer the batches share.
    bound: TimerQueue,
    /// How long a call's own exchange goes on once the call stops waiting.
    drain: Duration,
    lanes: Box<[Mutex<Lane>]>,
    depth: usize,
    /// The most operations per batch.
    max_ops: usize,
    stats: Stats,
}

/// The idle drivers end with the pipeline: woken, they find it gone.
impl Drop for Inner {
    fn drop(&mut self) {
        for lane in self.lanes.iter_mut() {
            let lane = lane.get_mut().unwrap_or_else(PoisonError::into_inner);
            // A batch handed to a driver that has not run is dropped with
            // it: nobody waits for it, as every caller holds the pipeline.
            for idle in lane.idle.drain(..) {
                idle.waker.wake();
            }
        }
    }
}

/// The per-server lanes of one store; cheap to clone, clones share them.
#[derive(Clone)]
pub(crate) struct Pipeline {
    inner: Arc<Inner>,
}

impl Pipeline {
    /// A pipeline over the connections of `pools`, a lane per server, with
    /// up to `depth` (at least 1) batches in flight per server, each of at
    /// most `batch_ops` operations (at least 1) and taking at most `bound`;
    /// a batch a call runs itself goes on for `drain` once it stops waiting.
    pub(crate) fn new(
        pools: Arc<Pools>,
        bound: Duration,
        drain: Duration,
        depth: usize,
        batch_ops: usize,
    ) -> Self {
        let lanes = pools.addresses().iter().map(|_| Mutex::default()).collect();
        Self {
            inner: Arc::new(Inner {
                pools,
                bound: TimerQueue::new(bound),
                drain,
                lanes,
                depth: depth.max(1),
                max_ops: batch_ops.max(1),
                stats: Stats::default(),
            }),
        }
    }

    /// The counters so far.
    pub(crate) fn stats(&self) -> PipelineStats {
        self.inner.stats.snapshot()
    }

    /// Runs `request`, whose keys all live on server `lane`, in order and
    /// contiguously within one batch; one result per operation. `writes`:
    /// whether it can change what memcached holds.
    pub(crate) async fn run(&self, lane: usize, request: Request, writes: bool) -> JobResults {
        let inner = &self.inner;
        let answer = match inner.admit(lane, request) {
            Admission::Slot(request) => {
                // A free slot: this call is the batch. Running it in the
                // caller's own future keeps the latency of a direct call;
                // a caller that stops waiting once it is sent leaves it to
                // finish.
                let slot = InlineSlot {
                    inner: Arc::clone(inner),
                    lane,
                };
                let checkout = inner.pools.checkout(lane).await?;
                inner.stats.batch(1, request.len());
                let pools = Arc::clone(&inner.pools);
                return Ok(exchange_one(pools, checkout, request, inner.drain, slot).await);
            }
            Admission::Queued(answer) => answer,
        };
        match answer.await {
            Ok(results) => results,
            Err(_) => {
                // Only a batch dropped mid-flight drops its replies: a
                // job that was never sent is always answered.
                let error = StoreError::new(
                    StoreErrorKind::Io,
                    format!(
                        "the pipelined batch to memcached {} was dropped before it was answered \
                         (its tokio runtime shut down)",
                        inner.pools.address(lane)
                    ),
                );
                Err(if writes { error.ambiguous() } else { error })
            }
        }
    }
}

/// How a call enters its lane.
enum Admission {
    /// It took a free batch slot and runs its operations itself.
    Slot(Request),
    /// Every slot was busy: its job is queued for the next batch.
    Queued(handoff::Receiver),
}

impl Inner {
    fn admit(&self, lane: usize, request: Request) -> Admission {
        let mut state = self.lane(lane);
        if state.in_flight < self.depth {
            state.in_flight += 1;
            return Admission::Slot(request);
        }
        let (reply, answer) = handoff::channel();
        state.queue.push_back(Job::new(request, reply));
        Admission::Queued(answer)
    }

    fn lane(&self, lane: usize) -> MutexGuard<'_, Lane> {
        // The lock is never held across a call that can panic; recover
        // from poisoning anyway rather than wedge the store.
        self.lanes[lane]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// One batch on a connection to `lane`'s server, its answers into
    /// `answers` (empty), each job's list moved there; the error means
    /// nothing was sent. `kept`: the connection of the task's batch before
    /// (checked to be reusable, as one from the idle stack is), and the
    /// batch's own once every reply was read.
    async fn exchange(
        &self,
        lane: usize,
        jobs: &mut [Job],
        answers: &mut Vec<Answers>,
        kept: &mut Option<Checkout>,
    ) -> Result<(), StoreError> {
        // One that cannot be used again is dropped before another is
        // taken, so that its slot is free for it.
        let checkout = match kept.take().filter(Checkout::is_reusable) {
            Some(checkout) => checkout,
            None => self.pools.checkout(lane).await?,
        };
        answers.extend(jobs.iter_mut().map(|job| std::mem::take(&mut job.answers)));
        *kept = exchange(&self.pools, checkout, jobs, answers, &self.bound).await;
        Ok(())
    }

    /// Sends `jobs` as one batch and answers each with its own results,
    /// leaving `jobs` and `answers` empty, their room kept for the next
    /// batch: a list of a whole batch's answers is allocated once per
    /// task, not once per batch (at 128 jobs a batch, 3 KiB, past the
    /// allocator's per-thread cache).
    async fn run_jobs(
        &self,
        lane: usize,
        jobs: &mut Vec<Job>,
        answers: &mut Vec<Answers>,
        kept: &mut Option<Checkout>,
    ) {
        let before = jobs.len();
        jobs.retain(|job| !job.reply.is_closed());
        let abandoned = before - jobs.len();
        if abandoned > 0 {
            self.stats.abandoned(abandoned as u64);
        }
        if jobs.is_empty() {
            return;
        }
        let ops = jobs.iter().map(|job| job.request.len()).sum();
        self.stats.batch(jobs.len(), ops);
        // Sent, it runs to its end even if every caller has gone, so its
        // connection is not dropped with replies owed.
        match self.exchange(lane, jobs, answers, kept).await {
            Ok(()) => {
                for (job, answers) in jobs.drain(..).zip(answers.drain(..)) {
                    job.reply.send(Ok(answers));
                }
            }
            Err(error) => {
                // No connection could be had: nothing was sent.
                for job in jobs.drain(..) {
                    job.reply.send(Err(error.clone()));
                }
            }
        }
    }

    /// Moves the next batch into `batch` (empty) if jobs wait, keeping
    /// the finished batch's slot for it (`true`); `false`, changing
    /// nothing, if none wait.
    fn next_queued(&self, lane: usize, batch: &mut Vec<Job>) -> bool {
        let mut state = self.lane(lane);
        if state.queue.is_empty() {
            return false;
        }
        state.take_batch(self.max_ops, batch);
        true
    }

    /// A driver holding a slot: the next batch moved into `batch` (empty)
    /// if jobs wait (`None`); otherwise the slot freed and the driver
    /// registered as idle, woken by `waker` when a slot is handed to it,
    /// under the number returned. Both under one lock, so that no slot is
    /// handed on between the two.
    fn next_batch_or_idle(&self, lane: usize, batch: &mut Vec<Job>, waker: &Waker) -> Option<u64> {
        let mut state = self.lane(lane);
        if state.queue.is_empty() {
            return Some(state.idle(waker, batch));
        }
        state.take_batch(self.max_ops, batch);
        None
    }

    /// An idle driver registered as `number`, polled by `waker`'s task:
    /// ready with the batch handed to it, and the slot with it, once there
    /// is one; with `None` if it is no longer registered (its pipeline is
    /// being dropped).
    fn poll_idle(&self, lane: usize, number: u64, waker: &Waker) -> Poll<Option<Vec<Job>>> {
        let mut state = self.lane(lane);
        let Some(at) = state.idle.iter().position(|idle| idle.number == number) else {
            return Poll::Ready(None);
        };
        let idle = &mut state.idle[at];
        if !idle.handed {
            if !idle.waker.will_wake(waker) {
                idle.waker = waker.clone();
            }
            return Poll::Pending;
        }
        Poll::Ready(Some(state.idle.swap_remove(at).jobs))
    }

    /// An idle driver registered as `number` is dropped (its runtime shut
    /// down): taken out of the lane's idle drivers, and, if a batch was
    /// handed to it meanwhile, the batch put back at the front of the
    /// queue and its slot handed on.
    fn leave_idle(self: &Arc<Self>, lane: usize, number: u64) {
        let mut state = self.lane(lane);
        let Some(at) = state.idle.iter().position(|idle| idle.number == number) else {
            return;
        };
        let Idle {
            waker,
            jobs,
            handed,
            ..
        } = state.idle.swap_remove(at);
        for job in jobs.into_iter().rev() {
            state.queue.push_front(job);
        }
        drop(state);
        drop(waker);
        if handed {
            self.hand_off(lane, true);
        }
    }

    /// A slot is given up by a batch that did not run to its end on a
    /// task of its own: an inline call (finished or cancelled), or a
    /// driver that was dropped. Queued jobs go to an idle driver, woken,
    /// or else out on a new task; if none can be spawned (no runtime, or
    /// it is shutting down) they fail, so no caller waits on a queue
    /// nothing will drain.
    fn hand_off(self: &Arc<Self>, lane: usize, can_spawn: bool) {
        let mut state = self.lane(lane);
        if state.queue.is_empty() {
            state.in_flight -= 1;
            return;
        }
        if let Some(at) = state.idle.iter().rposition(|idle| !idle.handed) {
            // The slot and the next batch, taken now as for a new task,
            // are the driver's; it sends them when it runs (or puts them
            // back and hands the slot on if it is dropped first).
            let mut jobs = std::mem::take(&mut state.idle[at].jobs);
            state.take_batch(self.max_ops, &mut jobs);
            let idle = &mut state.idle[at];
            idle.jobs = jobs;
            idle.handed = true;
            let waker = idle.waker.clone();
            drop(state);
            waker.wake();
            return;
        }
        let runtime = if can_spawn {
            tokio::runtime::Handle::try_current().ok()
        } else {
            None
        };
        match runtime {
            Some(runtime) => {
                let mut jobs = Vec::new();
                state.take_batch(self.max_ops, &mut jobs);
                drop(state);
                let slot = Slot::pending(Arc::clone(self), lane, jobs, false);
                self.stats.driver();
                // On a runtime that is shutting down the task is dropped
                // unstarted, and its slot fails the jobs (see Slot::drop).
                runtime.spawn(slot::drive(slot));
            }
            None => {
                state.in_flight -= 1;
                let jobs: Vec<Job> = state.queue.drain(..).collect();
                drop(state);
                self.fail(lane, jobs);
            }
        }
    }

    /// Answers jobs that were never sent.
    fn fail(&self, lane: usize, jobs: Vec<Job>) {
        let error = StoreError::new(
            StoreErrorKind::Io,
            format!(
                "no task left to send the pipelined call to memcached {} (its tokio runtime \
                 shut down); nothing was sent",
                self.pools.address(lane)
            ),
        );
        for job in jobs {
            job.reply.send(Err(error.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(ops: usize) -> (Job, handoff::Receiver) {
        let (reply, answer) = handoff::channel();
        let mut request = Request::default();
        for _ in 0..ops {
            request.read_counter(b"k");
        }
        (Job::new(request, reply), answer)
    }

    #[test]
    fn batches_respect_the_cap_and_always_take_one() {
        let mut lane = Lane::default();
        let mut answers = Vec::new();
        for _ in 0..DEFAULT_BATCH_OPS + 10 {
            let (job, answer) = job(1);
            lane.queue.push_back(job);
            answers.push(answer);
        }
        let taken = |lane: &mut Lane, cap| {
            let mut batch = Vec::new();
            lane.take_batch(cap, &mut batch);
            batch.len()
        };
        assert_eq!(taken(&mut lane, DEFAULT_BATCH_OPS), DEFAULT_BATCH_OPS);
        assert_eq!(taken(&mut lane, DEFAULT_BATCH_OPS), 10);
        assert!(lane.queue.is_empty());

        let cap = DEFAULT_BATCH_OPS;
        for ops in [cap + 5, cap / 2, cap / 2, 1] {
            let (job, answer) = job(ops);
            lane.queue.push_back(job);
            answers.push(answer);
        }
        // Too big for the cap on its own: it still goes, alone.
        assert_eq!(taken(&mut lane, cap), 1);
        assert_eq!(taken(&mut lane, cap), 2);
        assert_eq!(taken(&mut lane, cap), 1);
        // The smallest cap still makes progress, one job at a time.
        for ops in [3, 1] {
            let (job, answer) = job(ops);
            lane.queue.push_back(job);
            answers.push(answer);
        }
        assert_eq!(taken(&mut lane, 1), 1);
        assert_eq!(taken(&mut lane, 1), 1);
    }

    #[test]
    fn jobs_per_batch_is_zero_before_any_batch() {
        assert_eq!(PipelineStats::default().jobs_per_batch(), 0.0);
        let stats = PipelineStats {
            batches: 4,
            jobs: 10,
            ..PipelineStats::default()
        };
        assert_eq!(stats.jobs_per_batch(), 2.5);
    }
}
