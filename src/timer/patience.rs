//! How long the caller polling a store call will wait for it, so that a
//! store need not arm a timer of its own that could never fire first.
//!
//! A limiter bounds each decision by its deadline (100 ms by default) and
//! drops the decision's work past it; a memcached store bounds each call
//! by its I/O timeout (by default 500 ms on the meta protocol, 1 s on the
//! classic one). Under a limiter the store's timer would be armed and
//! disarmed on every call, and never fire. A bound that drops the work it bounds
//! declares its limit here while it polls that work ([`Patience::enter`]);
//! a store call that finds, on its first poll, a declared limit no longer
//! than its own timeout arms none ([`waits_at_most`]).
//!
//! The limit is the bound's whole limit, never less than what is left of
//! it, so the test errs only toward arming a timer. It holds for the work
//! polled inside the bound: a task the work spawns is polled elsewhere and
//! sees no limit.

use std::cell::Cell;
use std::time::Duration;

thread_local! {
    static LIMIT: Cell<Option<Duration>> = const { Cell::new(None) };
}

/// A declared limit, in force until dropped.
pub(crate) struct Patience {
    previous: Option<Duration>,
}

impl Patience {
    /// Declares that the work polled until this is dropped is given up
    /// at most `limit` after its first poll. Nested bounds keep the
    /// tightest.
    pub(crate) fn enter(limit: Duration) -> Self {
        let previous = LIMIT.get();
        let tightest = previous.map_or(limit, |outer| outer.min(limit));
        LIMIT.set(Some(tightest));
        Self { previous }
    }
}

impl Drop for Patience {
    fn drop(&mut self) {
        LIMIT.set(self.previous);
    }
}

/// Whether the caller polling now gives up within `limit`: a bound of at
/// most `limit` is in force.
pub(crate) fn waits_at_most(limit: Duration) -> bool {
    LIMIT.get().is_some_and(|declared| declared <= limit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_holds_while_declared_and_nested_ones_keep_the_tightest() {
        let second = Duration::from_secs(1);
        assert!(!waits_at_most(second), "nothing declared");
        {
            let _outer = Patience::enter(Duration::from_millis(100));
            assert!(waits_at_most(second));
            assert!(!waits_at_most(Duration::from_millis(50)));
            {
                let _inner = Patience::enter(Duration::from_secs(5));
                assert!(waits_at_most(second), "the outer bound still holds");
            }
            {
                let _inner = Patience::enter(Duration::from_millis(10));
                assert!(waits_at_most(Duration::from_millis(50)));
            }
            assert!(!waits_at_most(Duration::from_millis(50)));
        }
        assert!(!waits_at_most(second), "nothing declared any more");
        let _long = Patience::enter(Duration::from_secs(5));
        assert!(!waits_at_most(second), "a longer bound does not do");
    }
}
