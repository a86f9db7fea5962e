//! The arithmetic of [`SlidingLog`](super): a pure function from the stored
//! log, the time and the request to a decision and the log to write.

use super::log::{Entries, Log};
use super::VERSION;
use crate::algorithm::cas::core::{parameter_suffix, Ask, CasCore, Step};
use crate::decision::Decision;
use crate::quota::Quota;
use std::time::Duration;

/// The arithmetic: at most `limit` entries younger than `period`
/// nanoseconds.
#[derive(Debug, Clone)]
pub(crate) struct SlidingLogCore {
    pub(super) limit: u64,
    pub(super) period: i64,
    pub(super) suffix: String,
}

impl SlidingLogCore {
    pub(crate) fn new(quota: Quota) -> Self {
        let period = i64::try_from(quota.period().as_nanos()).unwrap_or(i64::MAX);
        Self {
            limit: quota.limit(),
            period,
            // The format's version is a parameter: a log of another format
            // is at another key, never misread.
            suffix: parameter_suffix("log", &format!("{}/{period}/v{VERSION}", quota.limit())),
        }
    }

    /// Records the request in `log`, whose entries from `live` on are
    /// inside the window at `now`: allowed if it fits, else (strict mode)
    /// its entries push out the oldest ones.
    fn record<'a>(&self, log: &'a Log, mut live: Entries<'a>, now: i64, ask: Ask) -> Step<Log> {
        let count = (log.len() - live.position()) as u64;
        let allowed = count + ask.cost <= self.limit;
        // Strict mode: a denied request's entries push out the oldest.
        let overflow = (count + ask.cost).saturating_sub(self.limit);
        live.pass(overflow.min(count) as usize);
        let added = (ask.cost - overflow.saturating_sub(count)) as usize;
        let after = log.len() - live.position() + added;
        let remaining = self.limit - after as u64;
        // Denied, the oldest `excess` entries kept must leave for the cost
        // to fit (the new ones, at `now`, when there are too few).
        let oldest_to_leave = (!allowed).then(|| {
            let excess = (after as u64 + ask.cost - self.limit) as usize;
            live.clone().nth(excess - 1).unwrap_or(now)
        });
        let written = log.recorded_from(live, now, added);
        // Waits count from the request's own time, even when the log's
        // newest entry is ahead of it.
        let reset_after = written
            .newest()
            .map_or(Duration::ZERO, |newest| self.until_gone(newest, ask.now));
        let decision = match oldest_to_leave {
            None => Decision::allowed(self.limit, remaining, reset_after),
            Some(entry) => {
                let retry = self.until_gone(entry, ask.now);
                Decision::denied(self.limit, remaining, reset_after, retry)
            }
        }
        .with_used(after as f64);
        Step {
            decision,
            delay: Duration::ZERO,
            write: Some((written, reset_after)),
        }
    }

    /// How long from `now` until the entry at `entry` leaves the window.
    pub(super) fn until_gone(&self, entry: i64, now: i64) -> Duration {
        let nanos = entry.saturating_add(self.period).saturating_sub(now);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(0))
    }
}

impl CasCore for SlidingLogCore {
    type State = Log;

    fn capacity(&self) -> u64 {
        self.limit
    }

    fn suffix(&self) -> &str {
        &self.suffix
    }

    fn encode(&self, log: &Log) -> Vec<u8> {
        let mut bytes = Vec::new();
        log.encode_into(&mut bytes);
        bytes
    }

    fn encode_into(&self, log: &Log, out: &mut Vec<u8>) {
        log.encode_into(out);
    }

    fn decode(&self, bytes: &[u8]) -> Option<Log> {
        Log::decode(bytes, self.limit)
    }

    /// Entries after `now` plus the skew are clamped to it: no writer's
    /// clock could have been that far ahead. The log stays sorted.
    fn repair(&self, log: &mut Log, now: i64, skew: i64) -> bool {
        log.clamp_to(now.saturating_add(skew))
    }

    fn decide(&self, state: Option<&Log>, ask: Ask) -> Step<Log> {
        let empty = Log::from_entries(&[]);
        let log = state.unwrap_or(&empty);
        // Time never runs backwards for a key: an older event is decided
        // and recorded as of the newest entry.
        let now = log.newest().map_or(ask.now, |newest| ask.now.max(newest));
        let cutoff = now.saturating_sub(self.period);
        // The entries that left the window are the oldest: only they are
        // read, and none when the newest has left too.
        let mut live = log.entries();
        live.skip_through(cutoff);
        let count = (log.len() - live.position()) as u64;
        if count + ask.cost <= self.limit || ask.strict {
            return self.record(log, live, now, ask);
        }
        // A denial that records nothing reads no further than the oldest
        // entries that must leave for the cost to fit.
        let excess = (count + ask.cost - self.limit) as usize;
        let retry = live
            .nth(excess - 1)
            .map_or(Duration::ZERO, |entry| self.until_gone(entry, ask.now));
        let reset_after = log
            .newest()
            .filter(|_| count > 0)
            .map_or(Duration::ZERO, |newest| self.until_gone(newest, ask.now));
        Step {
            decision: Decision::denied(self.limit, self.limit - count, reset_after, retry)
                .with_used(count as f64),
            delay: Duration::ZERO,
            write: None,
        }
    }

    /// Removes the `cost` entries the refunded request recorded: the
    /// newest live entries not after `ask.now`, which are those at
    /// `ask.now` first. An entry recorded later belongs to a later
    /// request, and removing it instead would free the quota sooner; when
    /// fewer are found (the request was recorded as of a newer entry, or
    /// its entries already left the window), older ones go, which frees it
    /// later, never sooner, and never more entries than the log holds.
    fn refund(&self, state: Option<&Log>, ask: Ask) -> Step<Log> {
        let entries = state.map_or_else(Vec::new, Log::to_vec);
        // The window as a decision at this time would see it.
        let now = entries
            .last()
            .map_or(ask.now, |&newest| ask.now.max(newest));
        let cutoff = now.saturating_sub(self.period);
        let start = entries.partition_point(|&entry| entry <= cutoff);
        let end = entries
            .partition_point(|&entry| entry <= ask.now)
            .max(start);
        let removed = usize::try_from(ask.cost)
            .unwrap_or(usize::MAX)
            .min(end - start);
        let after: Vec<i64> = entries[start..end - removed]
            .iter()
            .chain(&entries[end..])
            .copied()
            .collect();
        let remaining = self.limit.saturating_sub(after.len() as u64);
        let reset_after = after
            .last()
            .map_or(Duration::ZERO, |&newest| self.until_gone(newest, ask.now));
        Step {
            decision: Decision::allowed(self.limit, remaining, reset_after)
                .with_used(after.len() as f64),
            delay: Duration::ZERO,
            write: (removed > 0).then(|| (Log::from_entries(&after), reset_after)),
        }
    }
}
