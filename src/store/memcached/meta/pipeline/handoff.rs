//! A queued job's results, handed from the batch that ran it to the call
//! waiting for them: a one-shot channel whose shared cell is kept per
//! thread for the next call rather than freed.
//!
//! With calls queued behind the batches in flight (the 16 connections of
//! a web service, say), nearly every call hands over its results this
//! way. `tokio::sync::oneshot` allocated a cell for each and freed it
//! when both ends were gone, and its receiver charged the task's
//! cooperative budget on every poll: about 380 instructions a call under
//! callgrind (its allocation 54, its free 94, the receiver's poll 157,
//! the send 48), in a web service whose whole `MemcachedStore::increment`
//! adds some 8,000 a request. Here a call takes a kept cell, and the
//! receiver, the last to let go of it once the results are in, keeps it
//! again; a poll takes an uncontended lock and no budget, as one job's
//! results arrive once and end the wait.
//!
//! At most [`KEEP`] cells stay per thread; a cell whose sender is still
//! held elsewhere when the receiver goes is freed as usual.

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use super::JobResults;

/// Cells kept per thread.
const KEEP: usize = 64;

thread_local! {
    /// Cells this thread kept, each with no results and both ends unused.
    static KEPT: RefCell<Vec<Arc<Cell>>> = const { RefCell::new(Vec::new()) };
}

/// What both ends share.
#[derive(Default)]
struct Cell {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    results: Option<JobResults>,
    /// The waiting call's task, once it has waited.
    waker: Option<Waker>,
    /// The sender is gone, with or without sending.
    sent: bool,
    /// The receiver is gone: nobody waits for the results.
    closed: bool,
}

impl Cell {
    fn lock(&self) -> MutexGuard<'_, State> {
        // Nothing under the lock panics; recover from poisoning anyway.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The end that answers: [`send`](Self::send) once, or dropped, which the
/// receiver reads as the batch dropped unanswered.
pub(super) struct Sender {
    cell: Option<Arc<Cell>>,
}

/// The end that waits: a future of the results, `Err(Dropped)` if the
/// sender went without sending.
pub(super) struct Receiver {
    cell: Option<Arc<Cell>>,
}

/// The sender went without sending (its batch was dropped).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Dropped;

/// A new hand-off, on a cell this thread kept if it has one.
pub(super) fn channel() -> (Sender, Receiver) {
    let cell = KEPT
        .try_with(|kept| kept.borrow_mut().pop())
        .ok()
        .flatten()
        .unwrap_or_default();
    (
        Sender {
            cell: Some(Arc::clone(&cell)),
        },
        Receiver { cell: Some(cell) },
    )
}

impl Sender {
    /// Hands `results` to the receiver and wakes it; if the receiver is
    /// gone, they are dropped.
    pub(super) fn send(mut self, results: JobResults) {
        if let Some(cell) = self.cell.take() {
            finish(&cell, Some(results));
        }
    }

    /// Whether the receiver is gone: nobody waits for the results.
    pub(super) fn is_closed(&self) -> bool {
        self.cell.as_ref().is_none_or(|cell| cell.lock().closed)
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        if let Some(cell) = self.cell.take() {
            finish(&cell, None);
        }
    }
}

/// Marks `cell`'s sender gone, with `results` if any, and wakes the
/// receiver's task outside the lock.
fn finish(cell: &Cell, results: Option<JobResults>) {
    let mut state = cell.lock();
    state.sent = true;
    if state.closed {
        return;
    }
    state.results = results;
    let waker = state.waker.take();
    drop(state);
    if let Some(waker) = waker {
        waker.wake();
    }
}

impl Future for Receiver {
    type Output = Result<JobResults, Dropped>;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(cell) = self.cell.as_ref() else {
            return Poll::Ready(Err(Dropped));
        };
        let mut state = cell.lock();
        if let Some(results) = state.results.take() {
            return Poll::Ready(Ok(results));
        }
        if state.sent {
            return Poll::Ready(Err(Dropped));
        }
        match &state.waker {
            Some(waker) if waker.will_wake(context.waker()) => {}
            _ => state.waker = Some(context.waker().clone()),
        }
        drop(state);
        Poll::Pending
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        let Some(mut cell) = self.cell.take() else {
            return;
        };
        match Arc::get_mut(&mut cell) {
            // The sender is gone too: the cell is this end's alone, to
            // keep for the next call.
            Some(only) => {
                let state = only.state.get_mut().unwrap_or_else(PoisonError::into_inner);
                *state = State::default();
                let _ = KEPT.try_with(|kept| {
                    let mut kept = kept.borrow_mut();
                    if kept.len() < KEEP {
                        kept.push(cell);
                    }
                });
            }
            None => {
                let mut state = cell.lock();
                state.closed = true;
                let waker = state.waker.take();
                let results = state.results.take();
                drop(state);
                drop((waker, results));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{StoreError, StoreErrorKind};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    struct Counted(AtomicUsize);

    impl Wake for Counted {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll(receiver: &mut Receiver, waker: &Waker) -> Poll<Result<JobResults, Dropped>> {
        Pin::new(receiver).poll(&mut Context::from_waker(waker))
    }

    fn answered(results: JobResults) -> usize {
        results.expect("answers").len()
    }

    /// A new hand-off whose receiver has waited once, with what counts
    /// its wake-ups.
    fn waiting() -> (Arc<Counted>, Waker, Sender, Receiver) {
        let woken = Arc::new(Counted(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&woken));
        let (sender, mut receiver) = channel();
        assert!(poll(&mut receiver, &waker).is_pending(), "nothing sent yet");
        (woken, waker, sender, receiver)
    }

    #[test]
    fn results_sent_wake_the_waiting_call_and_reach_it() {
        let (woken, waker, sender, mut receiver) = waiting();
        assert!(!sender.is_closed());
        sender.send(Ok(Default::default()));
        assert_eq!(woken.0.load(Ordering::SeqCst), 1);
        match poll(&mut receiver, &waker) {
            Poll::Ready(results) => assert_eq!(answered(results.expect("sent")), 0),
            Poll::Pending => panic!("the results were sent"),
        }
    }

    #[test]
    fn a_sender_dropped_unsent_ends_the_wait_with_dropped() {
        let (woken, waker, sender, mut receiver) = waiting();
        drop(sender);
        assert_eq!(woken.0.load(Ordering::SeqCst), 1);
        assert!(matches!(
            poll(&mut receiver, &waker),
            Poll::Ready(Err(Dropped))
        ));
    }

    #[test]
    fn a_receiver_gone_closes_the_sender_and_its_results_are_dropped() {
        let (sender, receiver) = channel();
        drop(receiver);
        assert!(sender.is_closed());
        sender.send(Err(StoreError::new(StoreErrorKind::Io, "late")));
    }

    #[test]
    fn a_cell_is_kept_for_the_next_call_once_both_ends_are_done() {
        // On a thread of its own, so that its kept cells are this test's.
        std::thread::spawn(|| {
            let (sender, receiver) = channel();
            let first = Arc::as_ptr(receiver.cell.as_ref().unwrap());
            sender.send(Ok(Default::default()));
            drop(receiver);
            let (sender, receiver) = channel();
            assert_eq!(
                Arc::as_ptr(receiver.cell.as_ref().unwrap()),
                first,
                "the cell of the call before"
            );
            // Kept afresh: nothing of the last call's is left in it.
            let waker = Waker::noop();
            let mut receiver = receiver;
            assert!(poll(&mut receiver, waker).is_pending());
            assert!(!sender.is_closed());
            drop(sender);
            assert!(matches!(
                poll(&mut receiver, waker),
                Poll::Ready(Err(Dropped))
            ));
            // A receiver that goes first leaves the cell to its sender:
            // not kept.
            let (sender, receiver) = channel();
            let third = Arc::as_ptr(receiver.cell.as_ref().unwrap());
            drop(receiver);
            drop(sender);
            let kept = KEPT.with(|kept| kept.borrow().iter().map(Arc::as_ptr).collect::<Vec<_>>());
            assert!(!kept.contains(&third));
        })
        .join()
        .expect("the test thread");
    }
}
