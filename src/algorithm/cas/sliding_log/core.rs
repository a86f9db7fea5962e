//! The arithmetic of [`SlidingLog`](super): a pure function from the stored
//! log, the time and the request to a decision and the log to write.

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

/// The recorded timestamps (unix nanoseconds), oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Log(pub(super) Vec<i64>);

impl SlidingLogCore {
    pub(crate) fn new(quota: Quota) -> Self {
        let period = i64::try_from(quota.period().as_nanos()).unwrap_or(i64::MAX);
        Self {
            limit: quota.limit(),
            period,
            suffix: parameter_suffix("log", &format!("{}/{period}", quota.limit())),
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
        let mut bytes = Vec::with_capacity(9 + log.0.len());
        bytes.push(VERSION);
        let Some((&first, rest)) = log.0.split_first() else {
            return bytes;
        };
        bytes.extend_from_slice(&first.to_le_bytes());
        let mut previous = first;
        for &entry in rest {
            let mut delta = entry.abs_diff(previous);
            previous = entry;
            loop {
                let byte = (delta & 0x7f) as u8;
                delta >>= 7;
                if delta == 0 {
                    bytes.push(byte);
                    break;
                }
                bytes.push(byte | 0x80);
            }
        }
        bytes
    }

    fn decode(&self, bytes: &[u8]) -> Option<Log> {
        let (&version, rest) = bytes.split_first()?;
        if version != VERSION {
            return None;
        }
        if rest.is_empty() {
            return Some(Log(Vec::new()));
        }
        let (first, mut rest) = rest.split_first_chunk::<8>()?;
        // Room for every entry at once, not grown by doubling: each takes a
        // byte at least, and more than `limit` are refused below, so the
        // room is bounded by the limit whatever the value read.
        let room = rest
            .len()
            .min(usize::try_from(self.limit).unwrap_or(usize::MAX));
        let mut entries = Vec::with_capacity(room.saturating_add(1));
        entries.push(i64::from_le_bytes(*first));
        let mut previous = entries[0];
        while !rest.is_empty() {
            let mut delta: u64 = 0;
            let mut shift = 0;
            loop {
                let (&byte, tail) = rest.split_first()?;
                rest = tail;
                if shift == 63 && byte > 1 {
                    return None; // more than 64 bits
                }
                delta |= u64::from(byte & 0x7f) << shift;
                if byte & 0x80 == 0 {
                    break;
                }
                shift += 7;
            }
            previous = previous.checked_add_unsigned(delta)?;
            entries.push(previous);
            if entries.len() as u64 > self.limit {
                return None;
            }
        }
        Some(Log(entries))
    }

    /// Entries after `now` plus the skew are clamped to it: no writer's
    /// clock could have been that far ahead. The log stays sorted.
    fn repair(&self, log: &mut Log, now: i64, skew: i64) -> bool {
        let latest = now.saturating_add(skew);
        let mut beyond = false;
        for entry in log.0.iter_mut().rev() {
            if *entry <= latest {
                break;
            }
            *entry = latest;
            beyond = true;
        }
        beyond
    }

    fn decide(&self, state: Option<&Log>, ask: Ask) -> Step<Log> {
        let entries = state.map_or(&[][..], |log| &log.0[..]);
        // Time never runs backwards for a key: an older event is decided
        // and recorded as of the newest entry.
        let now = entries
            .last()
            .map_or(ask.now, |&newest| ask.now.max(newest));
        let cutoff = now.saturating_sub(self.period);
        let live = &entries[entries.partition_point(|&entry| entry <= cutoff)..];
        let count = live.len() as u64;
        let allowed = count + ask.cost <= self.limit;
        let record = allowed || ask.strict;
        // The log to write, when the request is recorded; a denial that
        // records nothing decides on the live entries as they are, with
        // no copy of a log that can hold the whole limit.
        let recorded: Option<Vec<i64>> = record.then(|| {
            // Strict mode: a denied request's entries push out the oldest.
            let overflow = (count + ask.cost).saturating_sub(self.limit) as usize;
            let keep = &live[overflow.min(live.len())..];
            let added = ask.cost as usize - overflow.saturating_sub(live.len());
            keep.iter()
                .copied()
                .chain(std::iter::repeat_n(now, added))
                .collect()
        });
        let after = recorded.as_deref().unwrap_or(live);
        let remaining = self.limit - after.len() as u64;
        // Waits count from the request's own time, even when the log's
        // newest entry is ahead of it.
        let reset_after = after
            .last()
            .map_or(Duration::ZERO, |&newest| self.until_gone(newest, ask.now));
        let decision = if allowed {
            Decision::allowed(self.limit, remaining, reset_after)
        } else {
            // The oldest `excess` entries must leave for the cost to fit.
            let excess = (after.len() as u64 + ask.cost - self.limit) as usize;
            let retry = self.until_gone(after[excess - 1], ask.now);
            Decision::denied(self.limit, remaining, reset_after, retry)
        }
        .with_used(after.len() as f64);
        Step {
            decision,
            delay: Duration::ZERO,
            write: recorded.map(|after| (Log(after), reset_after)),
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
        let entries = state.map_or(&[][..], |log| &log.0[..]);
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
            write: (removed > 0).then_some((Log(after), reset_after)),
        }
    }
}
