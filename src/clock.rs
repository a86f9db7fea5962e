//! Where time comes from. Algorithms never read the wall clock themselves:
//! every limiter is handed a [`Clock`], so tests and simulations can drive
//! time by hand and production code uses unix time.

mod anchored;

use std::fmt;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};

/// A source of the current time.
///
/// Window buckets are derived from unix time, so every process that shares
/// a store must read a clock that agrees on unix time (NTP-synchronised
/// hosts). [`SystemClock`] is that clock; [`ManualClock`] is moved by hand.
///
/// ```
/// use memcache_ratelimit::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::from_unix_secs(1_700_000_000);
/// let view = clock.clone();
/// clock.advance(Duration::from_secs(5));
/// assert_eq!(view.now().timestamp(), 1_700_000_005);
/// ```
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current time.
    fn now(&self) -> DateTime<Utc>;

    /// The current time in nanoseconds since the unix epoch, or `None` if
    /// an `i64` cannot hold it (before 1677 or after 2262): what
    /// `now().timestamp_nanos_opt()` returns. [`SystemClock`] and
    /// [`ManualClock`] answer without building a `DateTime`, which the
    /// in-process store, reading the time on every call, appreciates.
    ///
    /// ```
    /// use memcache_ratelimit::{Clock, ManualClock};
    ///
    /// let clock = ManualClock::from_unix_secs(1_700_000_000);
    /// assert_eq!(clock.unix_nanos(), Some(1_700_000_000_000_000_000));
    /// ```
    fn unix_nanos(&self) -> Option<i64> {
        self.now().timestamp_nanos_opt()
    }
}

/// A shared clock is a clock.
impl<C: Clock + ?Sized> Clock for Arc<C> {
    fn now(&self) -> DateTime<Utc> {
        (**self).now()
    }

    fn unix_nanos(&self) -> Option<i64> {
        (**self).unix_nanos()
    }
}

/// The host's unix time, to the nanosecond.
///
/// Each thread reads the system clock once a millisecond and, in between,
/// the processor's time-stamp counter since that reading (through the
/// `quanta` crate, which falls back to the system clock where the counter
/// cannot be trusted): a few nanoseconds a reading where the system clock
/// takes tens, within microseconds of it, and a step of the system clock
/// shows within a millisecond.
///
/// ```
/// use memcache_ratelimit::{Clock, SystemClock};
///
/// assert!(SystemClock.now().timestamp() > 1_600_000_000);
/// let nanos = SystemClock.unix_nanos().unwrap();
/// assert_eq!(SystemClock.now().timestamp(), nanos / 1_000_000_000);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        at_nanos(self.unix_nanos())
    }

    fn unix_nanos(&self) -> Option<i64> {
        anchored::unix_nanos()
    }
}

/// The time `nanos` names, or chrono's reading of the host's clock where
/// an `i64` of nanoseconds cannot hold the time (before 1677 or after 2262).
fn at_nanos(nanos: Option<i64>) -> DateTime<Utc> {
    nanos.map_or_else(Utc::now, DateTime::from_timestamp_nanos)
}

/// The host's unix time as the kernel last updated it, at the price of
/// its resolution: one scheduler tick, 1 to 4 ms on Linux
/// (`CLOCK_REALTIME_COARSE`, read through the vDSO without a system call,
/// in a few nanoseconds where [`SystemClock`] takes tens). On other
/// systems it reads what `SystemClock` reads.
///
/// It is the clock of the embedded store's expiry
/// ([`MemoryStore::new`](crate::MemoryStore::new)), which is read on
/// every call: memcached itself expires items by a clock that moves once
/// a second, and every algorithm is written for that. A limiter keeps
/// reading [`SystemClock`], whose nanoseconds its windows and GCRA's
/// arrival times need.
///
/// ```
/// use memcache_ratelimit::{Clock, CoarseClock, SystemClock};
///
/// let coarse = CoarseClock.unix_nanos().unwrap();
/// let precise = SystemClock.unix_nanos().unwrap();
/// // Behind by at most a tick (a generous bound here: 100 ms).
/// assert!((precise - coarse).abs() < 100_000_000);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct CoarseClock;

impl Clock for CoarseClock {
    fn now(&self) -> DateTime<Utc> {
        at_nanos(self.unix_nanos())
    }

    #[cfg(target_os = "linux")]
    // `tv_nsec` is a C `long`: already an `i64` on 64-bit targets only.
    #[allow(clippy::useless_conversion)]
    fn unix_nanos(&self) -> Option<i64> {
        use rustix::time::{clock_gettime, ClockId};
        let now = clock_gettime(ClockId::RealtimeCoarse);
        now.tv_sec
            .checked_mul(1_000_000_000)?
            .checked_add(i64::from(now.tv_nsec))
    }

    #[cfg(not(target_os = "linux"))]
    fn unix_nanos(&self) -> Option<i64> {
        SystemClock.unix_nanos()
    }
}

/// A clock that only moves when told to. Clones share one time, so a test
/// can hand a clone to a limiter and a store and move them all at once.
///
/// ```
/// use memcache_ratelimit::{Clock, ManualClock};
/// use std::time::Duration;
///
/// let clock = ManualClock::from_unix_secs(60);
/// clock.advance(Duration::from_millis(1500));
/// assert_eq!(clock.now().timestamp_millis(), 61_500);
/// clock.set(chrono::DateTime::from_timestamp(0, 0).unwrap());
/// assert_eq!(clock.now().timestamp(), 0);
/// ```
#[derive(Clone)]
pub struct ManualClock {
    nanos: Arc<AtomicI64>,
}

impl ManualClock {
    /// A clock stopped at `at`.
    ///
    /// Times outside what `i64` nanoseconds can hold (before 1677 or after
    /// 2262) are clamped to that range.
    pub fn new(at: DateTime<Utc>) -> Self {
        Self {
            nanos: Arc::new(AtomicI64::new(to_nanos(at))),
        }
    }

    /// A clock stopped at `secs` seconds after the unix epoch.
    pub fn from_unix_secs(secs: i64) -> Self {
        Self::new(Utc.timestamp_opt(secs, 0).single().unwrap_or_default())
    }

    /// Moves every clone of this clock forward by `by`.
    pub fn advance(&self, by: Duration) {
        let by = i64::try_from(by.as_nanos()).unwrap_or(i64::MAX);
        let _ = self
            .nanos
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| {
                Some(now.saturating_add(by))
            });
    }

    /// Sets every clone of this clock to `at`, forward or backward.
    pub fn set(&self, at: DateTime<Utc>) {
        self.nanos.store(to_nanos(at), Ordering::SeqCst);
    }
}

impl Default for ManualClock {
    /// A clock stopped at the unix epoch.
    fn default() -> Self {
        Self::from_unix_secs(0)
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        DateTime::from_timestamp_nanos(self.nanos.load(Ordering::SeqCst))
    }

    fn unix_nanos(&self) -> Option<i64> {
        Some(self.nanos.load(Ordering::SeqCst))
    }
}

impl fmt::Debug for ManualClock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ManualClock").field(&self.now()).finish()
    }
}

fn to_nanos(at: DateTime<Utc>) -> i64 {
    at.timestamp_nanos_opt().unwrap_or(if at.timestamp() < 0 {
        i64::MIN
    } else {
        i64::MAX
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_nanos_is_now_in_nanoseconds() {
        let before = Utc::now().timestamp_nanos_opt().unwrap();
        let nanos = SystemClock.unix_nanos().unwrap();
        let after = SystemClock.now().timestamp_nanos_opt().unwrap();
        assert!(
            before <= nanos && nanos <= after,
            "{before} {nanos} {after}"
        );
        for at in [i64::MIN, -1, 0, 1_800_000_000_123_456_789, i64::MAX] {
            let clock = ManualClock::new(DateTime::from_timestamp_nanos(at));
            assert_eq!(clock.unix_nanos(), Some(at));
            assert_eq!(clock.unix_nanos(), clock.now().timestamp_nanos_opt());
        }
    }
}
