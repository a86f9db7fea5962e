//! [`Settings`]: what every algorithm's engine is given once built (the
//! quota, the store, the keys, the deadline, what a denial costs), and the
//! deadline that bounds each decision.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::deadline::WithinDeadline;
use super::repairs::Repairs;
use crate::clock::Clock;
use crate::error::Error;
use crate::key::KeySpace;
use crate::quota::Quota;
use crate::store::Store;
use crate::timer::TimerQueue;

/// What happens to the cost of a denied request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DeniedRequests {
    /// Denied requests do not consume quota: their cost is given back with a
    /// decrement right after the decision. A client that keeps retrying
    /// while it is denied gets through again as soon as its earlier traffic
    /// slides out of the window. The refund is a second round trip, paid
    /// only by denied requests.
    #[default]
    Refunded,
    /// Denied requests count like allowed ones ("strict mode"): a client
    /// that keeps sending while it is denied stays denied until it slows
    /// down below the limit. Costs one round trip per decision, allowed or
    /// not.
    Counted,
}

/// The settings every engine is given, validated by the limiter's
/// builder.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) quota: Quota,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) keys: KeySpace,
    /// The deadline of each decision, and the timer its decisions share.
    pub(crate) deadline: TimerQueue,
    pub(crate) denied: DeniedRequests,
    pub(crate) max_clock_skew: Duration,
    /// Where stored values found untrustworthy and repaired are counted.
    pub(crate) repairs: Arc<Repairs>,
    /// The limiter's clock: this process's present, against which a
    /// stored state is judged when a request carries an older timestamp.
    pub(crate) clock: Arc<dyn Clock>,
}

impl Settings {
    /// How much longer than its algorithm reads it an item is kept: memcached
    /// expires items on a one-second clock, a process whose clock is up to
    /// `max_clock_skew` behind the writer's still reads it that much later,
    /// and a decision can land up to its deadline after it was made.
    pub(crate) fn expiry_slack(&self) -> Duration {
        self.max_clock_skew.max(Duration::from_secs(1)) + self.deadline.limit()
    }

    /// Runs `work` within the deadline; past it, the work is dropped (a
    /// request already written may still land) and the answer is
    /// [`Error::DeadlineExceeded`].
    pub(crate) fn within_deadline<T, E: Into<Error>, F: Future<Output = Result<T, E>>>(
        &self,
        work: F,
    ) -> WithinDeadline<'_, F> {
        WithinDeadline::new(&self.deadline, work)
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
