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
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::task::Unconstrained;
use tokio::time::{Instant, Sleep};

use crate::error::Error;
use crate::store::patience::Patience;

/// `work`, given at most `limit` (`None` past it), as
/// [`tokio::time::timeout`] runs it, but with the timer started only the
/// first time the work has to wait: work that completes at once (every call
/// to an in-process store) costs no timer and no clock read. The limit
/// counts from that first poll, which does not wait. The timer is polled
/// outside the task's cooperative budget, so work that spends the budget
/// cannot keep it from firing. While it polls the work, it declares its
/// limit ([`Patience`]), so a store call inside arms no timer of its own
/// that could only fire later.
pub(crate) fn timeout<F>(limit: Duration, work: F) -> Timeout<F> {
    Timeout {
        work,
        timer: None,
        limit,
        ends: None,
    }
}

pin_project! {
    /// The future of [`timeout`].
    #[must_use = "futures do nothing unless polled"]
    pub(crate) struct Timeout<F> {
        #[pin]
        work: F,
        #[pin]
        timer: Option<Unconstrained<Sleep>>,
        limit: Duration,
        // When the timer, once armed, fires.
        ends: Option<Instant>,
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let mut this = self.project();
        let patience = Patience::enter(*this.limit);
        let polled = this.work.poll(context);
        drop(patience);
        if let Poll::Ready(output) = polled {
            return Poll::Ready(Some(output));
        }
        if this.timer.is_none() {
            // The one clock read of a deadline, kept for what follows.
            let sleep = match Instant::now().checked_add(*this.limit) {
                Some(ends) => {
                    *this.ends = Some(ends);
                    tokio::time::sleep_until(ends)
                }
                None => tokio::time::sleep(*this.limit),
            };
            this.timer.set(Some(tokio::task::unconstrained(sleep)));
        }
        match this.timer.as_pin_mut().map(|timer| timer.poll(context)) {
            Some(Poll::Ready(())) => Poll::Ready(None),
            _ => Poll::Pending,
        }
    }
}

pin_project! {
    /// Work that must end within a limiter's deadline: its error, or
    /// [`Error::DeadlineExceeded`] past the deadline (the work is then
    /// dropped; a request already written may still land).
    #[must_use = "futures do nothing unless polled"]
    pub(crate) struct WithinDeadline<F> {
        #[pin]
        timed: Timeout<F>,
    }
}

impl<F> WithinDeadline<F> {
    pub(crate) fn new(deadline: Duration, work: F) -> Self {
        Self {
            timed: timeout(deadline, work),
        }
    }

    /// What is left of the deadline once the work is done: all of it if
    /// the work never waited (the deadline starts when it first does).
    /// Reads the clock only if the work waited, so a decision that needs
    /// no call after its own pays no clock read for it.
    pub(crate) fn left(&self) -> Duration {
        match self.timed.ends {
            Some(ends) => ends.saturating_duration_since(Instant::now()),
            None => self.timed.limit,
        }
    }
}

impl<T, E: Into<Error>, F: Future<Output = Result<T, E>>> Future for WithinDeadline<F> {
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let timed = self.project().timed;
        let deadline = timed.limit;
        Poll::Ready(match ready!(timed.poll(context)) {
            Some(outcome) => outcome.map_err(Into::into),
            None => Err(Error::DeadlineExceeded(deadline)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn work_that_ends_in_time_is_answered_and_late_work_is_not() {
        assert_eq!(
            timeout(Duration::from_millis(10), async { 7 }).await,
            Some(7)
        );
        let late = async {
            tokio::time::sleep(Duration::from_secs(10)).await;
            7
        };
        assert_eq!(timeout(Duration::from_millis(10), late).await, None);
        let deadline = Duration::from_millis(10);
        let late = async {
            tokio::time::sleep(Duration::from_secs(10)).await;
            Ok::<_, Error>(7)
        };
        assert!(matches!(
            WithinDeadline::new(deadline, late).await,
            Err(Error::DeadlineExceeded(d)) if d == deadline
        ));
        let failed = async { Err::<u8, _>(Error::ZeroCost) };
        assert!(matches!(
            WithinDeadline::new(deadline, failed).await,
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
        let bounded = WithinDeadline::new(Duration::from_secs(1), work);
        assert!(
            std::mem::size_of_val(&bounded) <= work_size + 160,
            "{} bytes around {work_size}",
            std::mem::size_of_val(&bounded)
        );
    }
}
