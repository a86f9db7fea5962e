//! The system's unix time, read through the processor's time-stamp counter
//! between readings of the system clock itself.
//!
//! Reading the system clock (`clock_gettime(CLOCK_REALTIME)`) costs tens
//! of nanoseconds, more in a virtual machine, and a decision on the
//! embedded store reads it once: some 15% of the decision. The `quanta`
//! crate reads the time-stamp counter, calibrated to the system's
//! monotonic clock, in a few nanoseconds, and falls back to the system's
//! clock where the counter cannot be trusted (Toby Lawrence, "quanta",
//! <https://github.com/metrics-rs/quanta>; governor's default clock reads
//! it too).
//!
//! A counter measures elapsed time, not unix time, and drifts from the
//! system clock (which NTP slews and may step). So each thread keeps an
//! anchor, a reading of the system clock and of the counter taken
//! together, and reads unix time as the anchor's plus the counter's time
//! elapsed since it. An anchor serves for [`ANCHOR_LIFE`] of the counter's
//! time, then the next reading takes a new one; a counter reading before
//! its anchor (a thread moved to a core whose counter lags) takes a new
//! one at once. A reading is therefore the system clock as read at most
//! a millisecond before, plus that millisecond as the counter measured
//! it: a calibration off by as much as 1% would put it 10 µs from the
//! system clock, and a step of the system clock shows within a
//! millisecond.

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long, by the counter, one anchor serves.
pub(super) const ANCHOR_LIFE: Duration = Duration::from_millis(1);

/// An anchor: the counter's time (ns since [`ORIGIN`]) and the unix time
/// minus it, read together.
#[derive(Clone, Copy)]
struct Anchor {
    counter: u64,
    offset: i64,
}

thread_local! {
    static ANCHOR: Cell<Option<Anchor>> = const { Cell::new(None) };
}

/// The counter's time that readings count from.
static ORIGIN: OnceLock<quanta::Instant> = OnceLock::new();

/// The unix time in nanoseconds, or `None` where an `i64` cannot hold it.
pub(super) fn unix_nanos() -> Option<i64> {
    let counter = counter_nanos();
    if let Some(anchor) = ANCHOR.get() {
        // A counter before its anchor wraps to a huge age: anchored again.
        let age = counter.wrapping_sub(anchor.counter);
        if age < ANCHOR_LIFE.as_nanos() as u64 {
            return i64::try_from(counter)
                .ok()
                .and_then(|counter| counter.checked_add(anchor.offset));
        }
    }
    let unix = system_nanos()?;
    let offset = i64::try_from(counter)
        .ok()
        .and_then(|c| unix.checked_sub(c));
    ANCHOR.set(offset.map(|offset| Anchor { counter, offset }));
    Some(unix)
}

/// The counter's time, in nanoseconds since [`ORIGIN`]. The first reading
/// in a process calibrates the counter (under a millisecond).
fn counter_nanos() -> u64 {
    let origin = *ORIGIN.get_or_init(quanta::Instant::now);
    let elapsed = quanta::Instant::now().saturating_duration_since(origin);
    u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
}

/// The system clock's unix time, read directly.
pub(super) fn system_nanos() -> Option<i64> {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_nanos()).ok(),
        Err(before) => i64::try_from(before.duration().as_nanos())
            .ok()
            .map(|nanos| -nanos),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How far a reading may be from the system clock read around it: a
    /// millisecond, a hundred times the error of a calibration off by 1%.
    /// A wrong anchor is off by the unix time itself.
    const CLOSE: i64 = 1_000_000;

    fn bracketed() -> (i64, i64, i64) {
        let before = system_nanos().unwrap();
        let read = unix_nanos().unwrap();
        let after = system_nanos().unwrap();
        (before, read, after)
    }

    #[test]
    fn readings_stay_within_a_millisecond_of_the_system_clock() {
        for round in 0..400 {
            let (before, read, after) = bracketed();
            assert!(
                before - CLOSE <= read && read <= after + CLOSE,
                "round {round}: {before} <= {read} <= {after}"
            );
            // Some readings within an anchor's life, some past it.
            if round % 4 == 0 {
                std::thread::sleep(Duration::from_micros(700));
            }
        }
    }

    #[test]
    fn every_thread_reads_the_same_time() {
        let threads: Vec<_> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    (0..1_000)
                        .map(|_| {
                            let (before, read, after) = bracketed();
                            (before - CLOSE <= read && read <= after + CLOSE) as usize
                        })
                        .sum::<usize>()
                })
            })
            .collect();
        for thread in threads {
            assert_eq!(thread.join().unwrap(), 1_000);
        }
    }

    #[test]
    fn an_anchor_is_taken_again_once_it_has_served() {
        let _ = unix_nanos();
        let first = ANCHOR.get().expect("an anchor").counter;
        let _ = unix_nanos();
        assert_eq!(ANCHOR.get().unwrap().counter, first, "within its life");
        std::thread::sleep(ANCHOR_LIFE * 2);
        let _ = unix_nanos();
        assert!(ANCHOR.get().unwrap().counter > first, "past its life");
    }
}
