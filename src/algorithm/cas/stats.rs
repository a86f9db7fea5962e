//! [`CasStats`]: what a compare-and-swap limiter has been through.

use std::sync::atomic::{AtomicU64, Ordering};

/// What a compare-and-swap limiter has been through, since it was built.
///
/// Requests for one key that overlap in time are decided together, as a
/// group with one read and one write (see [`CasPolicy`](crate::algorithm::CasPolicy)); `attempts`,
/// `conflicts` and `retries` count those shared read-decide-write attempts,
/// while `decisions`, `exhausted` and `combined` count requests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CasStats {
    /// Decisions asked for: every request, alone or in a group, and every
    /// refund of one (the cost given back when a request that several
    /// limiters decide all or nothing is denied by another of them).
    pub decisions: u64,
    /// Read-decide-write attempts made, one per group attempt: the requests
    /// of a group share one read and one write.
    pub attempts: u64,
    /// Writes that lost the race to another writer. Requests of one limiter
    /// never race each other, so these are writes from other processes, or
    /// other limiters on the same key.
    pub conflicts: u64,
    /// Attempts made again after a conflict.
    pub retries: u64,
    /// Requests that ran out of attempts ([`Error::Contention`](crate::Error::Contention)); every
    /// member of a group that ran out counts.
    pub exhausted: u64,
    /// Stored values that could not be read as this algorithm's state and
    /// were replaced. Each is also counted, with the states clamped to the
    /// policy's horizon, in
    /// [`FailureStats::repaired`](crate::limiter::FailureStats::repaired).
    pub replaced: u64,
    /// Requests decided in a group with at least one other request, sharing
    /// its read and write instead of racing it. Zero when requests for a
    /// key never overlap.
    pub combined: u64,
    /// Attempts made on the state this limiter itself last wrote or read,
    /// written on its version without reading it again: one store call
    /// where an attempt otherwise takes two. See
    /// [`CasPolicy::known_states`](crate::algorithm::CasPolicy::known_states).
    pub known: u64,
    /// Of the `known` attempts, those whose write found the state changed
    /// (another writer came first, or the item expired or was evicted):
    /// nothing was written, and the group decided again. Not counted in
    /// `conflicts`.
    pub stale: u64,
    /// Of the `stale` attempts, those whose write found the key gone
    /// (expired, evicted or deleted): the group was decided again on no
    /// state and written as new, without a read, so a client that returns
    /// just as its state expires costs two store calls, not three.
    pub vanished: u64,
    /// Of the `known` attempts, those whose state memcached may just have
    /// dropped (from a second before the end of its lifetime, on
    /// memcached's whole-second clock, to 2 s after) and which decide as
    /// on no state: written on the version or, if the key is gone, as new,
    /// in one round trip. Not counted in `stale` or `vanished`.
    pub either: u64,
    /// Of the `known` attempts, those that wrote nothing (denials that
    /// leave the state as it was) on a state of 1 KiB or more, while
    /// nearly every recent try found its known state current: the store
    /// was asked for the state's version alone, and the group answered
    /// from the known state when it was still the stored one. A state
    /// changed or gone counts in `stale` too, and the group decided again
    /// on a read.
    pub checked: u64,
}

/// The counters behind [`CasStats`], by index.
pub(super) const DECISIONS: usize = 0;
pub(super) const ATTEMPTS: usize = 1;
pub(super) const CONFLICTS: usize = 2;
pub(super) const RETRIES: usize = 3;
pub(super) const EXHAUSTED: usize = 4;
pub(super) const REPLACED: usize = 5;
pub(super) const COMBINED: usize = 6;
pub(super) const KNOWN: usize = 7;
pub(super) const STALE: usize = 8;
pub(super) const VANISHED: usize = 9;
pub(super) const EITHER: usize = 10;
pub(super) const CHECKED: usize = 11;

#[derive(Debug, Default)]
pub(super) struct Counters([AtomicU64; 12]);

impl Counters {
    pub(super) fn bump(&self, index: usize) {
        self.add(index, 1);
    }

    pub(super) fn add(&self, index: usize, n: usize) {
        self.0[index].fetch_add(n as u64, Ordering::Relaxed);
    }

    pub(super) fn snapshot(&self) -> CasStats {
        let n = |i: usize| self.0[i].load(Ordering::Relaxed);
        CasStats {
            decisions: n(DECISIONS),
            attempts: n(ATTEMPTS),
            conflicts: n(CONFLICTS),
            retries: n(RETRIES),
            exhausted: n(EXHAUSTED),
            replaced: n(REPLACED),
            combined: n(COMBINED),
            known: n(KNOWN),
            stale: n(STALE),
            vanished: n(VANISHED),
            either: n(EITHER),
            checked: n(CHECKED),
        }
    }
}
