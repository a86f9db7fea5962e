//! The deadline that bounds each decision, as futures that hold the work
//! they bound and nothing more.
//!
//! They are written as structs rather than `async fn`s: an `async fn`
//! keeps its argument in its state beside the future it awaits, so each
//! layer of `async fn` around a decision's work held it twice (a CAS
//! decision's future was 2.4 KB where the work is 0.7 KB), and every
//! decision moved those bytes when it was boxed or queued.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use pin_project_lite::pin_project;

use crate::error::Error;
use crate::timer::{timeout_in, Left, Timeout, TimerQueue};

pin_project! {
    /// Work that must end within a limiter's deadline: its error, or
    /// [`Error::DeadlineExceeded`] past the deadline (the work is then
    /// dropped; a request already written may still land).
    #[must_use = "futures do nothing unless polled"]
    pub(crate) struct WithinDeadline<'q, F> {
        #[pin]
        timed: Timeout<'q, F>,
    }
}

impl<'q, F> WithinDeadline<'q, F> {
    /// `work` within the deadline of `deadlines`, on the timer they share.
    pub(crate) fn new(deadlines: &'q TimerQueue, work: F) -> Self {
        Self {
            timed: timeout_in(deadlines, work),
        }
    }

    /// What is left of the deadline once the work is done: all of it if
    /// the work never waited (the deadline starts when it first does).
    /// The clock is read only when a call after the decision's own asks,
    /// so a decision that needs none pays no clock read for it.
    pub(crate) fn left(&self) -> Left {
        self.timed.left()
    }
}

impl<T, E: Into<Error>, F: Future<Output = Result<T, E>>> Future for WithinDeadline<'_, F> {
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let timed = self.project().timed;
        let deadline = timed.limit();
        Poll::Ready(match ready!(timed.poll(context)) {
            Some(outcome) => outcome.map_err(Into::into),
            None => Err(Error::DeadlineExceeded(deadline)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn late_work_is_past_the_deadline_and_its_error_is_its_own() {
        let deadline = Duration::from_millis(10);
        let deadlines = TimerQueue::new(deadline);
        let late = async {
            tokio::time::sleep(Duration::from_secs(10)).await;
            Ok::<_, Error>(7)
        };
        assert!(matches!(
            WithinDeadline::new(&deadlines, late).await,
            Err(Error::DeadlineExceeded(d)) if d == deadline
        ));
        let failed = async { Err::<u8, _>(Error::ZeroCost) };
        assert!(matches!(
            WithinDeadline::new(&deadlines, failed).await,
            Err(Error::ZeroCost)
        ));
    }

    #[test]
    fn the_bound_adds_little_to_the_work() {
        let work = async {
            let buffer = [0u8; 700];
            tokio::task::yield_now().await;
            Ok::<_, Error>(buffer.len())
        };
        let work_size = std::mem::size_of_val(&work);
        let deadlines = TimerQueue::new(Duration::from_secs(1));
        let bounded = WithinDeadline::new(&deadlines, work);
        assert!(
            std::mem::size_of_val(&bounded) <= work_size + 160,
            "{} bytes around {work_size}",
            std::mem::size_of_val(&bounded)
        );
    }
}
