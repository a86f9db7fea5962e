//! [`Settings`]: what every limiter shares once built, and the deadline
//! that bounds each decision.

use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use crate::algorithm::window::buckets::unix_nanos;
use crate::clock::Clock;
use crate::error::Error;
use crate::key::KeySpace;
use crate::limiter::failure::Failures;
use crate::limiter::DeniedRequests;
use crate::quota::Quota;
use crate::store::Store;

/// The settings every limiter shares, validated by [`LimiterBuilder`].
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) quota: Quota,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) keys: KeySpace,
    pub(crate) deadline: Duration,
    pub(crate) denied: DeniedRequests,
    pub(crate) max_clock_skew: Duration,
    pub(crate) failures: Arc<Failures>,
}

impl Settings {
    /// How much longer than its algorithm reads it an item is kept: memcached
    /// expires items on a one-second clock, a process whose clock is up to
    /// `max_clock_skew` behind the writer's still reads it that much later,
    /// and a decision can land up to its deadline after it was made.
    pub(crate) fn expiry_slack(&self) -> Duration {
        self.max_clock_skew.max(Duration::from_secs(1)) + self.deadline
    }

    /// The clock's time in unix nanoseconds, or the error for a clock that
    /// reads a time beyond what they can hold.
    pub(crate) fn now(&self) -> Result<i64, Error> {
        match self.clock.unix_nanos() {
            Some(now) => Ok(now),
            None => unix_nanos(self.clock.now()),
        }
    }

    /// Runs `work` within the deadline; past it, the work is dropped (a
    /// request already written may still land) and the answer is
    /// [`Error::DeadlineExceeded`].
    pub(crate) async fn within_deadline<T, E: Into<Error>>(
        &self,
        work: impl Future<Output = Result<T, E>>,
    ) -> Result<T, Error> {
        match timeout(self.deadline, work).await {
            Some(outcome) => outcome.map_err(Into::into),
            None => Err(Error::DeadlineExceeded(self.deadline)),
        }
    }

    /// Rejects a cost that can never be decided: zero, or more than
    /// `capacity`, the most the limiter can ever admit at once.
    pub(crate) fn check_cost(&self, cost: u64, capacity: u64) -> Result<(), Error> {
        if cost == 0 {
            return Err(Error::ZeroCost);
        }
        if cost > capacity {
            return Err(Error::CostExceedsLimit {
                cost,
                limit: capacity,
            });
        }
        Ok(())
    }
}

/// `work`, given at most `limit` (`None` past it), as
/// [`tokio::time::timeout`] runs it, but with the timer started only the
/// first time the work has to wait: work that completes at once (every call
/// to an in-process store) costs no timer and no clock read. The limit
/// counts from that first poll, which does not wait. The timer is polled
/// outside the task's cooperative budget, so work that spends the budget
/// cannot keep it from firing.
pub(crate) async fn timeout<F: Future>(limit: Duration, work: F) -> Option<F::Output> {
    let mut work = std::pin::pin!(work);
    let mut timer = std::pin::pin!(None);
    std::future::poll_fn(|context| {
        if let Poll::Ready(output) = work.as_mut().poll(context) {
            return Poll::Ready(Some(output));
        }
        if timer.is_none() {
            timer.set(Some(tokio::task::unconstrained(tokio::time::sleep(limit))));
        }
        match timer.as_mut().as_pin_mut().map(|timer| timer.poll(context)) {
            Some(Poll::Ready(())) => Poll::Ready(None),
            _ => Poll::Pending,
        }
    })
    .await
}
