//! Deadlines of one length that share one timer.
//!
//! A limiter bounds every decision that waits on its store by the same
//! deadline, and a memcached store every exchange by its I/O timeout. A
//! tokio timer for each is registered in the runtime's timer wheel on the
//! first wait and taken out again when the call ends, under the wheel's
//! lock, for a timer that almost never fires. Sharing one saves some 300
//! instructions a decision on memcached (callgrind).
//!
//! Deadlines of one length expire in the order they were armed. So they
//! wait here in that order, behind one timer: the queue's driver, a task
//! that sleeps until the earliest deadline, wakes what has expired by
//! then, and sleeps until the next. Arming is a clock read and a push
//! under the queue's lock, and an armed deadline that is dropped marks
//! its entry done; done entries leave the queue once they reach its
//! front. The clock is read under the lock, so the queue's deadlines rise
//! from front to back.
//!
//! The driver runs on the runtime of the call that first needed it, and
//! ends once the queue itself is dropped. If that runtime shuts down
//! first, the next deadline armed or polled starts a driver on its own
//! runtime.

use std::collections::VecDeque;
use std::fmt;
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use tokio::runtime::Handle;
use tokio::time::{Instant, Sleep};

/// Deadlines of `limit` from when each is armed, sharing one timer.
/// Clones share the queue.
#[derive(Clone)]
pub(crate) struct TimerQueue {
    shared: Arc<Shared>,
}

struct Shared {
    limit: Duration,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// The number of the entry at the front; entry `n` sits at
    /// `n - first`.
    first: u64,
    entries: VecDeque<Entry>,
    /// Whether a driver task is running: it will look at the queue again.
    driving: bool,
    /// The driver's waker while it waits for a deadline to be armed.
    idle: Option<Waker>,
}

struct Entry {
    ends: Instant,
    /// The task to wake when it expires.
    waker: Option<Waker>,
    /// Its deadline was dropped: nobody waits for it any more.
    done: bool,
}

/// A deadline armed in a [`TimerQueue`], disarmed when dropped.
pub(crate) struct Armed<'q> {
    queue: &'q TimerQueue,
    number: u64,
    ends: Instant,
}

impl TimerQueue {
    /// A queue of deadlines `limit` long.
    pub(crate) fn new(limit: Duration) -> Self {
        Self {
            shared: Arc::new(Shared {
                limit,
                state: Mutex::default(),
            }),
        }
    }

    /// How long each deadline is.
    pub(crate) fn limit(&self) -> Duration {
        self.shared.limit
    }

    /// Arms a deadline `limit` from now, whose expiry wakes `waker`.
    /// `None` outside a tokio runtime, or if the deadline lies beyond what
    /// an [`Instant`] can hold: the caller then needs a timer of its own.
    pub(crate) fn arm(&self, waker: &Waker) -> Option<Armed<'_>> {
        let mut state = self.shared.lock();
        let ends = Instant::now().checked_add(self.shared.limit)?;
        // Before anything is queued: a runtime without timers fails here,
        // in its caller, as a timer of the caller's own would.
        let driver = match state.driving {
            true => None,
            false => Some(self.driver(&mut state, ends)?),
        };
        state.drop_done();
        let number = state.first + state.entries.len() as u64;
        let idle = if state.entries.is_empty() {
            state.idle.take()
        } else {
            None
        };
        state.entries.push_back(Entry {
            ends,
            waker: Some(waker.clone()),
            done: false,
        });
        drop(state);
        if let Some(driver) = idle {
            driver.wake();
        }
        if let Some(driver) = driver {
            driver.spawn();
        }
        Some(Armed {
            queue: self,
            number,
            ends,
        })
    }

    /// A driver for the queue on the caller's runtime (`None` outside
    /// one), its first sleep until `ends`; to be spawned once the queue's
    /// lock is released ([`Driver::spawn`]).
    fn driver(&self, state: &mut State, ends: Instant) -> Option<Driver> {
        let runtime = Handle::try_current().ok()?;
        let sleep = tokio::time::sleep_until(ends);
        state.driving = true;
        let shared = Arc::downgrade(&self.shared);
        let task = Box::pin(drive(Driving(shared.clone()), shared, sleep));
        Some(Driver { runtime, task })
    }
}

/// A driver made and not yet spawned.
struct Driver {
    runtime: Handle,
    task: Pin<Box<dyn Future<Output = ()> + Send>>,
}

impl Driver {
    /// Spawns it. Never under the queue's lock: a runtime shutting down
    /// drops the task at once, and its drop takes the lock.
    fn spawn(self) {
        self.runtime.spawn(self.task);
    }
}

impl fmt::Debug for TimerQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TimerQueue")
            .field("limit", &self.shared.limit)
            .finish_non_exhaustive()
    }
}

impl Armed<'_> {
    /// When it expires.
    pub(crate) fn ends(&self) -> Instant {
        self.ends
    }

    /// Ready once it has expired; until then `context`'s task is woken
    /// when it does.
    pub(crate) fn poll_expired(&self, context: &mut Context<'_>) -> Poll<()> {
        let mut state = self.queue.shared.lock();
        // Only the driver takes out an entry that is not done, and only
        // once it has expired.
        let Some(at) = self.number.checked_sub(state.first) else {
            return Poll::Ready(());
        };
        let entry = &mut state.entries[at as usize];
        match &entry.waker {
            Some(waker) if waker.will_wake(context.waker()) => {}
            _ => entry.waker = Some(context.waker().clone()),
        }
        if !state.driving {
            // The driver's runtime went away: this one takes over.
            let ends = state.entries.front().map_or(self.ends, |front| front.ends);
            if let Some(driver) = self.queue.driver(&mut state, ends) {
                drop(state);
                driver.spawn();
            }
        }
        Poll::Pending
    }
}

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        let mut state = self.queue.shared.lock();
        if let Some(at) = self.number.checked_sub(state.first) {
            let entry = &mut state.entries[at as usize];
            entry.done = true;
            let waker = entry.waker.take();
            state.drop_done();
            drop(state);
            drop(waker);
        }
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // What can panic under the lock (a runtime without timers, making
        // the driver's sleep) does so before it changes anything; recover
        // from poisoning rather than wedge every decision.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let Some(driver) = state.idle.take() {
            driver.wake();
        }
    }
}

impl State {
    /// Takes the front entry off while `leaves` holds for it, waking the
    /// task of each.
    fn drop_front_while(&mut self, leaves: impl Fn(&Entry) -> bool) {
        while self.entries.front().is_some_and(&leaves) {
            let left = self.entries.pop_front();
            self.first += 1;
            if let Some(waker) = left.and_then(|entry| entry.waker) {
                // Waking schedules the task; it runs after the lock is
                // released.
                waker.wake();
            }
        }
    }

    /// Takes the done entries off the front (they have no task to wake).
    fn drop_done(&mut self) {
        self.drop_front_while(|entry| entry.done);
    }

    /// Takes off the front every entry that has expired by `now`, waking
    /// its task, and the done ones.
    fn expire(&mut self, now: Instant) {
        self.drop_front_while(|entry| entry.done || entry.ends <= now);
    }
}

/// Marks the queue as without a driver when the driver's task ends, or is
/// dropped with its runtime, even before its first poll.
struct Driving(Weak<Shared>);

impl Drop for Driving {
    fn drop(&mut self) {
        if let Some(shared) = self.0.upgrade() {
            let mut state = shared.lock();
            state.driving = false;
            state.idle = None;
        }
    }
}

/// The driver of the queue `shared`: sleeps until its earliest deadline
/// (first `sleep`), expires what is due, and again; waits while the queue
/// is empty; ends once the queue is dropped. An argument, `driving` is
/// dropped with the task, polled or not.
async fn drive(driving: Driving, shared: Weak<Shared>, sleep: Sleep) {
    let _driving = driving;
    let mut sleep = pin!(sleep);
    loop {
        sleep.as_mut().await;
        let next = poll_fn(|context| {
            let Some(queue) = shared.upgrade() else {
                return Poll::Ready(None);
            };
            let mut state = queue.lock();
            state.expire(Instant::now());
            match state.entries.front() {
                Some(front) => Poll::Ready(Some(front.ends)),
                None => {
                    state.idle = Some(context.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await;
        match next {
            Some(ends) => sleep.as_mut().reset(ends),
            None => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waits until `armed` expires.
    async fn expiry(armed: &Armed<'_>) {
        poll_fn(|context| armed.poll_expired(context)).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_deadline_expires_after_its_limit_and_not_before() {
        let queue = TimerQueue::new(Duration::from_millis(100));
        let start = Instant::now();
        let armed = queue.arm(Waker::noop()).unwrap();
        assert_eq!(armed.ends(), start + Duration::from_millis(100));
        expiry(&armed).await;
        assert_eq!(Instant::now(), start + Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn deadlines_armed_apart_expire_apart_and_dropped_ones_never_wake() {
        let queue = TimerQueue::new(Duration::from_millis(100));
        let start = Instant::now();
        let first = queue.arm(Waker::noop()).unwrap();
        tokio::time::sleep(Duration::from_millis(30)).await;
        let dropped = queue.arm(Waker::noop()).unwrap();
        tokio::time::sleep(Duration::from_millis(30)).await;
        let third = queue.arm(Waker::noop()).unwrap();
        drop(dropped);
        expiry(&first).await;
        assert_eq!(Instant::now(), start + Duration::from_millis(100));
        // Still waiting: its own deadline is 60 ms later.
        let mut waiting = pin!(expiry(&third));
        assert!(futures_poll_once(waiting.as_mut()).is_pending());
        waiting.await;
        assert_eq!(Instant::now(), start + Duration::from_millis(160));
        let state = queue.shared.lock();
        assert!(state.entries.is_empty(), "expired entries are taken out");
    }

    #[tokio::test(start_paused = true)]
    async fn done_entries_leave_the_queue_and_an_idle_driver_wakes_for_the_next() {
        let queue = TimerQueue::new(Duration::from_millis(50));
        for _ in 0..1_000 {
            drop(queue.arm(Waker::noop()).unwrap());
        }
        assert!(queue.shared.lock().entries.is_empty());
        // The driver's first sleep ends; it finds nothing and waits.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let start = Instant::now();
        let armed = queue.arm(Waker::noop()).unwrap();
        expiry(&armed).await;
        assert_eq!(Instant::now(), start + Duration::from_millis(50));
    }

    #[tokio::test(start_paused = true)]
    async fn the_driver_ends_with_its_queue() {
        let queue = TimerQueue::new(Duration::from_millis(50));
        drop(queue.arm(Waker::noop()).unwrap());
        let shared = Arc::downgrade(&queue.shared);
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(queue);
        assert!(shared.upgrade().is_none());
        // The idle driver is woken by the drop, and ends.
        let metrics = Handle::current().metrics();
        for _ in 0..10 {
            if metrics.num_alive_tasks() == 0 {
                return;
            }
            tokio::task::yield_now().await;
        }
        panic!("the driver outlived its queue");
    }

    #[test]
    fn a_runtime_that_shut_down_hands_the_driver_to_the_next() {
        let queue = TimerQueue::new(Duration::from_millis(20));
        let first = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        // Armed on the first runtime, which then shuts down with its
        // driver, the deadline still expires on the second.
        let armed = first.block_on(async { queue.arm(Waker::noop()).unwrap() });
        drop(first);
        let second = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        second.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), expiry(&armed))
                .await
                .expect("expired on the second runtime");
        });
    }

    #[test]
    fn outside_a_runtime_nothing_is_armed() {
        let queue = TimerQueue::new(Duration::from_millis(20));
        assert!(queue.arm(Waker::noop()).is_none());
    }

    /// Polls `future` once with a waker that does nothing.
    fn futures_poll_once<F: Future>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
        let mut context = Context::from_waker(Waker::noop());
        future.poll(&mut context)
    }
}
