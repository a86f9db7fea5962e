//! [`Repairs`]: stored values an engine found untrustworthy and repaired,
//! counted and reported. Anything read back from the store may be garbage,
//! huge, far in the future or written by another version; the engines
//! validate it, repair it, and count it here, and the limiter reports the
//! count as [`FailureStats::repaired`](crate::limiter::FailureStats).

use std::sync::atomic::{AtomicU64, Ordering};

/// A limiter's count of repaired stored values.
#[derive(Debug, Default)]
pub(crate) struct Repairs {
    count: AtomicU64,
}

impl Repairs {
    /// How many stored values were repaired since the limiter was built.
    pub(crate) fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn bump(&self) {
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts and reports a counter at `key` that held `held`, not a
    /// count, and was reset.
    pub(crate) fn counter_reset(&self, key: &[u8], held: &[u8]) {
        self.bump();
        tracing::warn!(
            key = %String::from_utf8_lossy(key),
            held = %String::from_utf8_lossy(&held[..held.len().min(40)]),
            "counter held something else; reset to zero"
        );
    }

    /// Counts and reports a counter at `key` that wrapped past 2^64 to
    /// `value` and was read as a full window.
    pub(crate) fn counter_wrapped(&self, key: &[u8], value: u64) {
        self.bump();
        tracing::warn!(
            key = %String::from_utf8_lossy(key),
            value,
            "counter wrapped past 2^64; read as a full window and reset to the limit"
        );
    }

    /// Counts and reports a compare-and-swap state at `key` that held
    /// `held` and was repaired as `what` says.
    pub(crate) fn state_repaired(&self, key: &[u8], held: &[u8], what: &str) {
        self.bump();
        tracing::warn!(
            key = %String::from_utf8_lossy(key),
            held = %String::from_utf8_lossy(&held[..held.len().min(40)]),
            reason = what,
            "stored state repaired"
        );
    }
}
