//! A client's log as it is stored: its two ends in the clear and the
//! entries between them as varint distances, read only as far as a
//! decision needs.
//!
//! A denial needs the number of live entries, the oldest few (the ones
//! that must leave for the request to fit) and the newest. With both ends
//! stored whole and the count given by the framing, a denial reads the
//! front of the log and nothing else: at the largest limit, 10,000 entries,
//! decoding every entry was most of the decision's cost.
//!
//! A write keeps the distances it can as they are: the entries that stay
//! are a tail of the log, and their distances a tail of its bytes. That
//! holds when the distances add up to the distance between the two ends,
//! as they do in every log this crate writes; a check stored beside them
//! (XXH3 of the ends and the distances) tells such a log from one that
//! only looks like it, which is read and rewritten entry by entry.

use super::VERSION;
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// The recorded timestamps (unix nanoseconds), oldest first: the stored
/// form itself.
///
/// Its meaning is defined for every value [`Log::decode`] accepts, not
/// only for the ones this crate writes: entry 0 is `oldest`, the last
/// entry is `newest`, and each entry between them is the previous one plus
/// its distance, saturating and clamped to `newest`. The entries are
/// therefore always sorted and within `[oldest, newest]`, whatever the
/// distances hold, and reading any prefix of them gives the same entries
/// as reading them all.
#[derive(Debug, Clone)]
pub(crate) struct Log {
    len: usize,
    oldest: i64,
    newest: i64,
    /// `len - 1` LEB128 varints: the distance of each entry after the
    /// first from the one before it.
    distances: Vec<u8>,
    sums: Sums,
}

/// Whether a log's distances add up to `newest - oldest`, so that a tail
/// of them can be kept as it is.
#[derive(Debug, Clone, Copy)]
enum Sums {
    /// Built here, from entries.
    Known,
    /// Read from the store with this check, not verified yet.
    Stored(u64),
    /// Changed after it was read (clamped), or its check failed.
    Unknown,
}

/// Logs are equal when they hold the same bytes, whatever is known of
/// their sums.
impl PartialEq for Log {
    fn eq(&self, other: &Log) -> bool {
        (self.len, self.oldest, self.newest, &self.distances)
            == (other.len, other.oldest, other.newest, &other.distances)
    }
}

impl Eq for Log {}

/// The size of a non-empty log's header: the version byte, the oldest and
/// the newest entry as little-endian `i64`s, then the check.
const HEADER: usize = 1 + 8 + 8 + 8;

impl Log {
    /// A log holding `entries`, which must be sorted.
    pub(crate) fn from_entries(entries: &[i64]) -> Log {
        match entries.split_last() {
            Some((&newest, kept)) => Log::recorded(kept, newest, 1),
            None => Log {
                len: 0,
                oldest: 0,
                newest: 0,
                distances: Vec::new(),
                sums: Sums::Known,
            },
        }
    }

    /// A log holding `kept` (sorted, none after `at`), then `times`
    /// entries at `at` (at least one).
    pub(crate) fn recorded(kept: &[i64], at: i64, times: usize) -> Log {
        debug_assert!(times > 0 && kept.is_sorted() && kept.last().is_none_or(|&last| last <= at));
        // Room for distances of up to 4 bytes (268 ms in nanoseconds)
        // without growing.
        let mut distances = Vec::with_capacity(4 * kept.len() + times);
        let oldest = match kept.split_first() {
            Some((&oldest, rest)) => {
                let mut previous = oldest;
                for &entry in rest.iter().chain([at].iter()) {
                    push_varint(&mut distances, entry.abs_diff(previous));
                    previous = entry;
                }
                oldest
            }
            None => at,
        };
        distances.resize(distances.len() + times.saturating_sub(1), 0);
        Log {
            len: kept.len() + times.max(1),
            oldest,
            newest: at,
            distances,
            sums: Sums::Known,
        }
    }

    /// The log of this one's entries from index `first` on, then `times`
    /// entries at `at` (at least one; `at` no older than the newest
    /// entry). A log whose sums hold keeps the distances after `first` as
    /// they are, and reads only the entries before it; any other is
    /// rewritten from its entries.
    pub(crate) fn recorded_after(&self, first: usize, at: i64, times: usize) -> Log {
        debug_assert!(at >= self.newest || self.len == 0);
        if first >= self.len {
            return Log::recorded(&[], at, times);
        }
        if first + 1 == self.len {
            return Log::recorded(&[self.newest], at, times);
        }
        if !self.sums_hold() {
            return Log::recorded(&self.to_vec()[first..], at, times);
        }
        let mut entries = self.entries();
        let oldest = entries.nth(first).unwrap_or(at);
        // `first` is not the last entry, so the cursor stands after its
        // distance: the rest are those of the entries kept after it.
        let kept = entries.rest;
        let mut distances = Vec::with_capacity(kept.len() + 10 + times);
        distances.extend_from_slice(kept);
        push_varint(&mut distances, at.abs_diff(self.newest));
        distances.resize(distances.len() + times.saturating_sub(1), 0);
        Log {
            len: self.len - first + times.max(1),
            oldest,
            newest: at,
            distances,
            sums: Sums::Known,
        }
    }

    /// Whether the distances add up to `newest - oldest`: known for a log
    /// built here, else its stored check is verified.
    pub(super) fn sums_hold(&self) -> bool {
        match self.sums {
            Sums::Known => true,
            Sums::Stored(check) => check == self.check(),
            Sums::Unknown => false,
        }
    }

    /// XXH3 of the two ends and the distances.
    fn check(&self) -> u64 {
        let mut ends = [0; 16];
        ends[..8].copy_from_slice(&self.oldest.to_le_bytes());
        ends[8..].copy_from_slice(&self.newest.to_le_bytes());
        xxh3_64_with_seed(&self.distances, xxh3_64(&ends))
    }

    /// How many entries the log holds.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The newest entry, if any.
    pub(crate) fn newest(&self) -> Option<i64> {
        (self.len > 0).then_some(self.newest)
    }

    /// The entries, oldest first, decoded as they are read.
    pub(crate) fn entries(&self) -> Entries<'_> {
        Entries {
            log: self,
            rest: &self.distances,
            index: 0,
            previous: self.oldest,
        }
    }

    /// Every entry, decoded: [`entries`](Self::entries) in one tight
    /// loop, for the paths that rewrite the log.
    pub(crate) fn to_vec(&self) -> Vec<i64> {
        let mut entries = vec![self.newest; self.len];
        if let Some((first, middle)) = entries.split_first_mut() {
            *first = self.oldest;
            let middle = match middle.split_last_mut() {
                Some((_newest, middle)) => middle,
                None => middle,
            };
            let mut rest = &self.distances[..];
            let mut previous = self.oldest;
            for entry in middle {
                previous = previous
                    .saturating_add_unsigned(next_varint(&mut rest))
                    .min(self.newest);
                *entry = previous;
            }
        }
        entries
    }

    /// Clamps every entry after `latest` to it; whether any was.
    pub(crate) fn clamp_to(&mut self, latest: i64) -> bool {
        if self.len == 0 || self.newest <= latest {
            return false;
        }
        // Entries read are clamped to `newest`, so lowering it (and
        // `oldest`, when it is beyond too) clamps every one after it.
        self.newest = latest;
        self.oldest = self.oldest.min(latest);
        self.sums = Sums::Unknown;
        true
    }

    /// Appends the stored form to `out`: the version byte alone for an
    /// empty log, else the header and the distances. The check stored is
    /// the log's own only when its sums are known to hold, so that a log
    /// whose sums do not can never pass for one whose do.
    pub(crate) fn encode_into(&self, out: &mut Vec<u8>) {
        out.reserve(HEADER + self.distances.len());
        out.push(VERSION);
        if self.len > 0 {
            let check = match self.sums_hold() {
                true => self.check(),
                false => !self.check(),
            };
            out.extend_from_slice(&self.oldest.to_le_bytes());
            out.extend_from_slice(&self.newest.to_le_bytes());
            out.extend_from_slice(&check.to_le_bytes());
            out.extend_from_slice(&self.distances);
        }
    }

    /// The log stored as `bytes`, or `None` if they are not one of at most
    /// `limit` entries. Checks the framing only, in one pass that counts
    /// the varints' last bytes; the distances are read when the entries
    /// are (see the type's documentation for what any distances mean).
    pub(crate) fn decode(bytes: &[u8], limit: u64) -> Option<Log> {
        let (&version, rest) = bytes.split_first()?;
        if version != VERSION {
            return None;
        }
        if rest.is_empty() {
            return Some(Log::from_entries(&[]));
        }
        let (oldest, rest) = rest.split_first_chunk::<8>()?;
        let (newest, rest) = rest.split_first_chunk::<8>()?;
        let (check, distances) = rest.split_first_chunk::<8>()?;
        let (oldest, newest) = (i64::from_le_bytes(*oldest), i64::from_le_bytes(*newest));
        if oldest > newest || distances.last().is_some_and(|&last| last & 0x80 != 0) {
            return None;
        }
        let len = 1 + last_bytes(distances);
        if len as u64 > limit || (len == 1 && oldest != newest) {
            return None;
        }
        Some(Log {
            len,
            oldest,
            newest,
            distances: distances.to_vec(),
            sums: Sums::Stored(u64::from_le_bytes(*check)),
        })
    }
}

/// How many varints `bytes` ends: the bytes without the continuation bit.
/// Counted in runs of 255 into a byte, which the compiler turns into wide
/// vector additions: the whole count costs little next to the value's
/// transfer, where counting into a `usize` took four bytes a step.
fn last_bytes(bytes: &[u8]) -> usize {
    bytes
        .chunks(255)
        .map(|run| usize::from(run.iter().fold(0u8, |count, &byte| count + (!byte >> 7))))
        .sum()
}

/// The entries of a [`Log`], oldest first.
#[derive(Debug, Clone)]
pub(crate) struct Entries<'a> {
    log: &'a Log,
    rest: &'a [u8],
    index: usize,
    previous: i64,
}

/// Appends `value` as a LEB128 varint.
fn push_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value & 0x7f) as u8 | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Takes the next varint off `rest`, saturating at `u64::MAX` (a varint
/// of more than 64 bits); what it holds when `rest` ends first.
#[inline]
fn next_varint(rest: &mut &[u8]) -> u64 {
    let mut value: u64 = 0;
    let mut shift: u32 = 0;
    while let Some((&byte, tail)) = rest.split_first() {
        *rest = tail;
        let part = u64::from(byte & 0x7f);
        if shift <= 57 {
            value |= part << shift;
        } else if part != 0 && (shift > 63 || part > 1) {
            value = u64::MAX;
        } else {
            value |= part << shift.min(63);
        }
        if byte < 0x80 {
            break;
        }
        shift = shift.saturating_add(7);
    }
    value
}

impl Iterator for Entries<'_> {
    type Item = i64;

    fn next(&mut self) -> Option<i64> {
        let log = self.log;
        let entry = match self.index {
            index if index >= log.len => return None,
            0 => log.oldest,
            index if index + 1 == log.len => log.newest,
            _ => {
                let distance = next_varint(&mut self.rest);
                self.previous
                    .saturating_add_unsigned(distance)
                    .min(log.newest)
            }
        };
        self.index += 1;
        self.previous = entry;
        Some(entry)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.log.len - self.index;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Entries<'_> {}
