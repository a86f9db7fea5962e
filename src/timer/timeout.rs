//! A bound on how long work may take, with its timer started only when
//! the work first has to wait, and shared where its limit is.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::task::Unconstrained;
use tokio::time::{Instant, Sleep};

use super::patience::{waits_at_most, Patience};
use super::queue::{Armed, TimerQueue};

/// `work`, given at most `limit` (`None` past it), as
/// [`tokio::time::timeout`] runs it, but with the timer started only the
/// first time the work has to wait: work that completes at once (every call
/// to an in-process store) costs no timer and no clock read. The limit
/// counts from that first poll, which does not wait. The timer is polled
/// outside the task's cooperative budget, so work that spends the budget
/// cannot keep it from firing. While it polls the work, it declares its
/// limit ([`Patience`]), so a store call inside arms no timer of its own
/// that could only fire later.
///
/// The timer is the work's own; [`timeout_in`] shares one.
pub(crate) fn timeout<F>(limit: Duration, work: F) -> Timeout<'static, F> {
    Timeout {
        work,
        timer: Timer::Unarmed(None),
        limit,
    }
}

/// [`timeout`] with `queue`'s limit, on the timer `queue`'s deadlines
/// share.
pub(crate) fn timeout_in<F>(queue: &TimerQueue, work: F) -> Timeout<'_, F> {
    Timeout {
        work,
        timer: Timer::Unarmed(Some(queue)),
        limit: queue.limit(),
    }
}

/// [`timeout_in`], but arming no timer at all if, when it is first
/// polled, the caller polling it gives up within `queue`'s limit anyway
/// ([`waits_at_most`]): under a limiter's deadline, a store's I/O timeout
/// could only fire later. It is the same future either way, so its caller
/// builds the work in place in it: choosing between `work.await` and
/// `timeout_in(queue, work).await` built the work first, then moved it
/// into the bound and the bound into its caller's future, some 210
/// instructions of `memcpy` a meta-protocol increment more (callgrind,
/// `MetaStore::exchange` in the web service's `MemcachedStore::increment`).
#[cfg_attr(not(feature = "memcached"), allow(dead_code))]
pub(crate) fn timeout_in_unless_bounded<F>(queue: &TimerQueue, work: F) -> Timeout<'_, F> {
    Timeout {
        work,
        timer: Timer::Patient(queue),
        limit: queue.limit(),
    }
}

pin_project! {
    /// The future of [`timeout`] and [`timeout_in`].
    #[must_use = "futures do nothing unless polled"]
    pub(crate) struct Timeout<'q, F> {
        #[pin]
        work: F,
        timer: Timer<'q>,
        limit: Duration,
    }
}

impl<F> Timeout<'_, F> {
    /// Its limit.
    pub(crate) fn limit(&self) -> Duration {
        self.limit
    }

    /// What is left of the limit, read when it is needed: all of it if
    /// the work has not waited yet (the limit counts from when it first
    /// does).
    pub(crate) fn left(&self) -> Left {
        Left {
            ends: self.timer.ends(),
            limit: self.limit,
        }
    }
}

/// What is left of a [`Timeout`]'s limit, from the clock at the moment it
/// is asked: most decisions never ask (only a call that follows the
/// decision's own does), so they pay no clock read for it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Left {
    /// When the limit runs out; `None` if it never started (or lies past
    /// what an `Instant` holds).
    ends: Option<Instant>,
    limit: Duration,
}

impl Left {
    /// All of `limit`, which has not started.
    pub(crate) fn whole(limit: Duration) -> Self {
        Self { ends: None, limit }
    }

    /// What is left now.
    pub(crate) fn now(self) -> Duration {
        match self.ends {
            Some(ends) => ends.saturating_duration_since(Instant::now()),
            None => self.limit,
        }
    }
}

/// The timer of a [`Timeout`].
enum Timer<'q> {
    /// Not polled yet: on its first poll, armed in the queue like
    /// `Unarmed`, unless the caller gives up sooner anyway (`Never`).
    #[cfg_attr(not(feature = "memcached"), allow(dead_code))]
    Patient(&'q TimerQueue),
    /// None: the caller polling it gives up within its limit anyway.
    Never,
    /// Not armed yet: the work has not waited. It will be armed in the
    /// queue, if any.
    Unarmed(Option<&'q TimerQueue>),
    /// A deadline in a queue.
    Shared(Armed<'q>),
    /// A timer of its own, boxed so that it takes no room in the futures
    /// that share one; `ends` is `None` past what an `Instant` can hold.
    Own {
        sleep: Pin<Box<Unconstrained<Sleep>>>,
        ends: Option<Instant>,
    },
}

impl<'q> Timer<'q> {
    /// When it fires, once armed.
    fn ends(&self) -> Option<Instant> {
        match self {
            Self::Patient(_) | Self::Never | Self::Unarmed(_) => None,
            Self::Shared(armed) => Some(armed.ends()),
            Self::Own { ends, .. } => *ends,
        }
    }

    /// Ready once it has fired. The first call arms it `limit` from now:
    /// in its queue, which then wakes `context`'s task when it expires,
    /// or on a timer of its own where the queue cannot (outside a
    /// runtime).
    fn poll_fired(&mut self, limit: Duration, context: &mut Context<'_>) -> Poll<()> {
        if let Self::Unarmed(queue) = *self {
            match queue.and_then(|queue| queue.arm(context.waker())) {
                Some(armed) => {
                    // Armed with this task's waker: the queue wakes it.
                    *self = Self::Shared(armed);
                    return Poll::Pending;
                }
                None => *self = Self::own(limit),
            }
        }
        match self {
            Self::Patient(_) | Self::Never | Self::Unarmed(_) => Poll::Pending,
            Self::Shared(armed) => armed.poll_expired(context),
            Self::Own { sleep, .. } => sleep.as_mut().poll(context),
        }
    }

    /// A timer of its own, `limit` from now.
    fn own(limit: Duration) -> Self {
        // The one clock read of a deadline, kept for what follows.
        let ends = Instant::now().checked_add(limit);
        let sleep = match ends {
            Some(ends) => tokio::time::sleep_until(ends),
            None => tokio::time::sleep(limit),
        };
        Self::Own {
            sleep: Box::pin(tokio::task::unconstrained(sleep)),
            ends,
        }
    }
}

impl<F: Future> Future for Timeout<'_, F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Timer::Patient(queue) = *this.timer {
            // Before this bound declares its own limit: whether an outer
            // one, as tight, is in force.
            *this.timer = match waits_at_most(*this.limit) {
                true => Timer::Never,
                false => Timer::Unarmed(Some(queue)),
            };
        }
        let patience = Patience::enter(*this.limit);
        let polled = this.work.poll(context);
        drop(patience);
        if let Poll::Ready(output) = polled {
            return Poll::Ready(Some(output));
        }
        match this.timer.poll_fired(*this.limit, context) {
            Poll::Ready(()) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn late() -> u8 {
        tokio::time::sleep(Duration::from_secs(10)).await;
        7
    }

    #[tokio::test]
    async fn work_that_ends_in_time_is_answered_and_late_work_is_not() {
        let limit = Duration::from_millis(10);
        assert_eq!(timeout(limit, async { 7 }).await, Some(7));
        assert_eq!(timeout(limit, late()).await, None);
        let queue = TimerQueue::new(limit);
        assert_eq!(timeout_in(&queue, async { 7 }).await, Some(7));
        assert_eq!(timeout_in(&queue, late()).await, None);
    }

    #[tokio::test(start_paused = true)]
    async fn late_work_in_a_queue_ends_at_its_limit_woken_by_the_queue() {
        // Armed with the task's waker and polled no more: only the queue's
        // driver can end it at 100 ms, before the work's own 10 s.
        let queue = TimerQueue::new(Duration::from_millis(100));
        let start = Instant::now();
        assert_eq!(timeout_in(&queue, late()).await, None);
        assert_eq!(Instant::now(), start + Duration::from_millis(100));
    }

    #[tokio::test(start_paused = true)]
    async fn the_limit_counts_from_the_first_wait_and_what_is_left_shrinks() {
        let queue = TimerQueue::new(Duration::from_millis(100));
        let start = Instant::now();
        let mut bounded = std::pin::pin!(timeout_in(&queue, async {
            tokio::time::sleep(Duration::from_millis(30)).await;
            7
        }));
        assert_eq!(
            bounded.left().now(),
            Duration::from_millis(100),
            "not armed yet"
        );
        assert_eq!(bounded.as_mut().await, Some(7));
        assert_eq!(Instant::now(), start + Duration::from_millis(30));
        assert_eq!(bounded.left().now(), Duration::from_millis(70));
    }

    #[tokio::test(start_paused = true)]
    async fn a_bound_inside_a_tighter_one_arms_nothing_and_one_outside_any_does() {
        let queue = TimerQueue::new(Duration::from_millis(100));
        let mut inner = Box::pin(timeout_in_unless_bounded(&queue, late()));
        let outer = timeout(Duration::from_millis(100), inner.as_mut()).await;
        assert_eq!(outer, None, "the outer bound ends it");
        assert!(matches!(inner.timer, Timer::Never));
        let start = Instant::now();
        assert_eq!(timeout_in_unless_bounded(&queue, late()).await, None);
        assert_eq!(Instant::now(), start + Duration::from_millis(100));
        let longer = timeout(
            Duration::from_secs(1),
            timeout_in_unless_bounded(&queue, late()),
        );
        assert_eq!(longer.await, Some(None), "the inner, tighter bound ends it");
    }

    #[test]
    fn a_bound_built_outside_a_runtime_arms_in_the_queue_once_polled_inside() {
        let queue = TimerQueue::new(Duration::from_millis(10));
        let mut bounded = Box::pin(timeout_in(&queue, late()));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        assert_eq!(runtime.block_on(bounded.as_mut()), None);
        assert!(matches!(bounded.timer, Timer::Shared(_)));
    }

    #[tokio::test]
    async fn a_limit_beyond_any_instant_falls_back_to_a_timer_of_its_own() {
        let queue = TimerQueue::new(Duration::MAX);
        let mut bounded = std::pin::pin!(timeout_in(&queue, async {
            tokio::task::yield_now().await;
            7
        }));
        assert_eq!(bounded.as_mut().await, Some(7));
        assert!(matches!(bounded.timer, Timer::Own { ends: None, .. }));
        assert_eq!(bounded.left().now(), Duration::MAX);
    }
}
