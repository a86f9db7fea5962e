//! A client's log as it is stored: its two ends in the clear and the
//! entries between them as varint distances, read only as far as a
//! decision needs.
//!
//! A denial needs the number of live entries, the oldest few (the ones
//! that must leave for the request to fit) and the newest. With both ends
//! stored whole and the count given by the framing, a denial reads the
//! front of the log and nothing else: at the largest limit, 10,000 entries,
//! decoding every entry was most of the decision's cost.

use super::VERSION;

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
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Log {
    len: usize,
    oldest: i64,
    newest: i64,
    /// `len - 1` LEB128 varints: the distance of each entry after the
    /// first from the one before it.
    distances: Vec<u8>,
}

/// The size of a non-empty log's header: the version byte, then the
/// oldest and the newest entry as little-endian `i64`s.
const HEADER: usize = 1 + 8 + 8;

impl Log {
    /// A log holding `entries`, which must be sorted.
    pub(crate) fn from_entries(entries: &[i64]) -> Log {
        debug_assert!(entries.is_sorted());
        let (Some(&oldest), Some(&newest)) = (entries.first(), entries.last()) else {
            return Log {
                len: 0,
                oldest: 0,
                newest: 0,
                distances: Vec::new(),
            };
        };
        let mut distances = Vec::with_capacity(entries.len() - 1);
        for pair in entries.windows(2) {
            let mut distance = pair[1].abs_diff(pair[0]);
            loop {
                let byte = (distance & 0x7f) as u8;
                distance >>= 7;
                if distance == 0 {
                    distances.push(byte);
                    break;
                }
                distances.push(byte | 0x80);
            }
        }
        Log {
            len: entries.len(),
            oldest,
            newest,
            distances,
        }
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

    /// Every entry, decoded.
    pub(crate) fn to_vec(&self) -> Vec<i64> {
        let mut entries = Vec::with_capacity(self.len);
        entries.extend(self.entries());
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
        true
    }

    /// Appends the stored form to `out`: the version byte alone for an
    /// empty log, else the header and the distances.
    pub(crate) fn encode_into(&self, out: &mut Vec<u8>) {
        out.reserve(HEADER + self.distances.len());
        out.push(VERSION);
        if self.len > 0 {
            out.extend_from_slice(&self.oldest.to_le_bytes());
            out.extend_from_slice(&self.newest.to_le_bytes());
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
        let (newest, distances) = rest.split_first_chunk::<8>()?;
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

impl Entries<'_> {
    /// The next varint, saturating at `u64::MAX`.
    fn distance(&mut self) -> u64 {
        let mut distance: u64 = 0;
        let mut shift: u32 = 0;
        while let Some((&byte, rest)) = self.rest.split_first() {
            self.rest = rest;
            let part = u64::from(byte & 0x7f);
            if part != 0 {
                distance = if shift >= 64 || part.leading_zeros() < shift {
                    u64::MAX
                } else {
                    distance | part << shift
                };
            }
            if byte & 0x80 == 0 {
                break;
            }
            shift = shift.saturating_add(7);
        }
        distance
    }
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
                let distance = self.distance();
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
