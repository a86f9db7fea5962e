//! Exchanges that outlive their caller, so a connection is never dropped
//! with replies still owed on it.
//!
//! A limiter's deadline (or a store's I/O timeout) ends a call by dropping
//! its future. Dropping an exchange that has written its request leaves
//! the connection with replies owed, so it cannot be used again, and the
//! next call dials a new one: against a server that hangs, one connection
//! per call that gave up. Instead, an exchange runs inside [`detached`]:
//! polled by its caller while the caller waits, and moved onto a task of
//! its own if the caller stops waiting, where it reads its replies to the
//! end (within the drain timeout) and gives its connection back to the
//! pool. Its connection slot stays taken meanwhile, which is what bounds
//! the connections to a server that does not answer.
//!
//! While its caller waits, an exchange arms no timer of its own: its
//! caller gives up within the store's I/O timeout, or sooner (a limiter's
//! deadline), and then the drain timeout starts. So a call costs the one
//! timer its caller arms, not a second one that could only fire later.
//!
//! Only the exchange itself is detached, after its connection slot was
//! taken: a caller that stops waiting before that sends nothing.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::boxed;

/// An exchange to finish even if its caller stops waiting.
type Exchange<T> = Pin<Box<dyn Future<Output = T> + Send>>;

/// Runs the exchange `build` makes, which its caller bounds; if the
/// returned future is dropped before the exchange ends, it goes on for at
/// most `drain` on a task of the current tokio runtime (or is dropped,
/// outside of one), and is dropped past it. The exchange is built in its
/// box ([`boxed::pinned`]).
pub(crate) fn detached<T, F>(build: impl FnOnce() -> F, drain: Duration) -> Detached<T>
where
    F: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let exchange: Exchange<T> = boxed::pinned(build);
    Detached {
        exchange: Some(exchange),
        drain,
    }
}

/// The future of [`detached`].
pub(crate) struct Detached<T: Send + 'static> {
    /// `None` once it has ended.
    exchange: Option<Exchange<T>>,
    /// How long it may go on once its caller stops waiting.
    drain: Duration,
}

impl<T: Send + 'static> Future for Detached<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, context: &mut Context<'_>) -> Poll<T> {
        let Some(exchange) = self.exchange.as_mut() else {
            // Polled after it ended: it never ends again.
            return Poll::Pending;
        };
        let output = std::task::ready!(exchange.as_mut().poll(context));
        self.exchange = None;
        Poll::Ready(output)
    }
}

impl<T: Send + 'static> Drop for Detached<T> {
    fn drop(&mut self) {
        let Some(exchange) = self.exchange.take() else {
            return;
        };
        // On a runtime that is shutting down the task is dropped unstarted,
        // which closes the connection: nothing is left to reuse it anyway.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(tokio::time::timeout(self.drain, exchange));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    #[tokio::test]
    async fn an_exchange_whose_caller_stops_waiting_still_ends() {
        let ended = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ended);
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let exchange = detached(
            || async move {
                let _ = released.await;
                flag.store(true, Ordering::SeqCst);
            },
            Duration::from_secs(5),
        );
        // The caller gives up first.
        assert!(tokio::time::timeout(Duration::from_millis(10), exchange)
            .await
            .is_err());
        assert!(!ended.load(Ordering::SeqCst));
        release.send(()).unwrap();
        for _ in 0..100 {
            if ended.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the exchange was dropped with its caller");
    }

    /// Sets its flag when dropped.
    struct Dropped(Arc<AtomicBool>);

    impl Drop for Dropped {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[tokio::test]
    async fn an_exchange_that_never_ends_is_dropped_once_its_drain_has_run_out() {
        let dropped = Arc::new(AtomicBool::new(false));
        let guard = Dropped(Arc::clone(&dropped));
        let exchange = detached(
            || async move {
                let _guard = guard;
                std::future::pending::<()>().await;
            },
            Duration::from_millis(50),
        );
        assert!(tokio::time::timeout(Duration::from_millis(10), exchange)
            .await
            .is_err());
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!dropped.load(Ordering::SeqCst), "dropped before its drain");
        for _ in 0..100 {
            if dropped.load(Ordering::SeqCst) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        panic!("the exchange outlived its drain");
    }

    #[tokio::test]
    async fn a_caller_that_waits_gets_the_output() {
        assert_eq!(detached(|| async { 7 }, Duration::ZERO).await, 7);
    }
}
