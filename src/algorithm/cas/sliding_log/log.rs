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

use super::varint::{last_bytes, next_varint, push_varint};
use super::VERSION;
use xxhash_rust::xxh3::{xxh3_64, xxh3_64_with_seed};

/// The recorded timestamps (unix nanoseconds), oldest first: the stored
/// form itself.
///
/// Its meaning is defined for every value [`Log::decode`] accepts, not
/// only for the ones this crate writes: entry 0 is the oldest, the last
/// entry is the newest, and each entry between them is the previous one
/// plus its distance, saturating and clamped to the newest. The entries
/// are therefore always sorted and within the two ends, whatever the
/// distances hold, and reading any prefix of them gives the same entries
/// as reading them all.
///
/// One buffer holds it all, so that a log costs a decision's future no
/// more than a `Vec` does, a read makes one allocation and a write is one
/// copy: empty for an empty log, else the number of entries (`u32`,
/// little-endian), whether its check is vouched for ([`BUILT`]) or still
/// to verify ([`READ`]), then the stored form: the version, the oldest and
/// the newest entry (`i64`, little-endian), the check, and `len - 1`
/// LEB128 varints, the distance of each entry after the first from the
/// one before it.
#[derive(Clone)]
pub(crate) struct Log {
    buf: Vec<u8>,
}

/// Where the parts are in [`Log`]'s buffer.
const LEN: usize = 0;
const SUMS: usize = 4;
const FORM: usize = 5;
const OLDEST: usize = FORM + 1;
const NEWEST: usize = OLDEST + 8;
const CHECK: usize = NEWEST + 8;
const DISTANCES: usize = CHECK + 8;

/// Built here, from entries: its distances add up to `newest - oldest`,
/// so that a tail of them can be kept as it is, and its check is its own.
const BUILT: u8 = 0;
/// Read from the store, or changed after (clamped): its distances add up
/// when its check is its own, verified when it matters.
const READ: u8 = 1;

/// Logs are equal when they hold the same entries in the same bytes,
/// whatever is known of their sums.
impl PartialEq for Log {
    fn eq(&self, other: &Log) -> bool {
        (self.len(), self.oldest(), self.newest(), self.distances())
            == (
                other.len(),
                other.oldest(),
                other.newest(),
                other.distances(),
            )
    }
}

impl Eq for Log {}

impl std::fmt::Debug for Log {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Log")
            .field("len", &self.len())
            .field("oldest", &self.oldest())
            .field("newest", &self.newest())
            .field("distances", &self.distances().len())
            .finish()
    }
}

/// A log's buffer up to its distances, with room for `room` bytes of them.
fn with_ends(len: usize, oldest: i64, newest: i64, room: usize) -> Vec<u8> {
    debug_assert!(len > 0 && u32::try_from(len).is_ok());
    let mut buf = Vec::with_capacity(DISTANCES + room);
    buf.extend_from_slice(&(len as u32).to_le_bytes());
    buf.push(BUILT);
    buf.push(VERSION);
    buf.extend_from_slice(&oldest.to_le_bytes());
    buf.extend_from_slice(&newest.to_le_bytes());
    buf.extend_from_slice(&[0; 8]);
    buf
}

/// The `i64` at `at` in `buf`.
fn i64_at(buf: &[u8], at: usize) -> i64 {
    let mut bytes = [0; 8];
    bytes.copy_from_slice(&buf[at..at + 8]);
    i64::from_le_bytes(bytes)
}

impl Log {
    /// A log holding `entries`, which must be sorted.
    pub(crate) fn from_entries(entries: &[i64]) -> Log {
        match entries.split_last() {
            Some((&newest, kept)) => Log::recorded(kept, newest, 1),
            None => Log { buf: Vec::new() },
        }
    }

    /// A log holding `kept` (sorted, none after `at`), then `times`
    /// entries at `at`.
    pub(crate) fn recorded(kept: &[i64], at: i64, times: usize) -> Log {
        debug_assert!(kept.is_sorted() && kept.last().is_none_or(|&last| last <= at));
        if times == 0 {
            return Log::from_entries(kept);
        }
        let oldest = kept.first().copied().unwrap_or(at);
        // Room for distances of up to 4 bytes (268 ms in nanoseconds)
        // without growing.
        let mut buf = with_ends(kept.len() + times, oldest, at, 4 * kept.len() + times);
        if let Some((&oldest, rest)) = kept.split_first() {
            let mut previous = oldest;
            for &entry in rest.iter().chain([at].iter()) {
                push_varint(&mut buf, entry.abs_diff(previous));
                previous = entry;
            }
        }
        buf.resize(buf.len() + times - 1, 0);
        Log::sealed(buf)
    }

    /// The log of this one's entries from `from` on, then `times` entries
    /// at `at` (no older than the newest entry). A log whose sums hold
    /// keeps the stored distances of the entries after `from` as they are,
    /// having read only the entries before it; any other is rewritten from
    /// its entries.
    pub(crate) fn recorded_from(&self, mut from: Entries<'_>, at: i64, times: usize) -> Log {
        let (len, first) = (self.len(), from.index);
        debug_assert!(len == 0 || at >= self.newest_entry());
        // At most the newest entry kept: no distances to keep, nothing to
        // decode.
        if first + 1 >= len {
            let kept = if first < len {
                &[self.newest_entry()][..]
            } else {
                &[]
            };
            return Log::recorded(kept, at, times);
        }
        if times == 0 || !self.sums_hold() {
            return Log::recorded(&self.to_vec()[first..], at, times);
        }
        let oldest = from.next().unwrap_or(at);
        // `first` is not the last entry, so the cursor stands after its
        // distance: the rest are those of the entries kept after it.
        let kept = from.rest;
        let mut buf = with_ends(len - first + times, oldest, at, kept.len() + 10 + times);
        buf.extend_from_slice(kept);
        push_varint(&mut buf, at.abs_diff(self.newest_entry()));
        buf.resize(buf.len() + times - 1, 0);
        Log::sealed(buf)
    }

    /// A log built here, its check written into its buffer.
    fn sealed(buf: Vec<u8>) -> Log {
        let mut log = Log { buf };
        let check = log.check();
        log.buf[CHECK..DISTANCES].copy_from_slice(&check.to_le_bytes());
        log
    }

    /// Whether the distances add up to `newest - oldest`: known for a log
    /// built here, else its stored check is verified.
    pub(super) fn sums_hold(&self) -> bool {
        match self.buf.get(SUMS) {
            None | Some(&BUILT) => true,
            Some(_) => self.buf[CHECK..DISTANCES] == self.check().to_le_bytes(),
        }
    }

    /// XXH3 of the two ends and the distances.
    fn check(&self) -> u64 {
        let ends = &self.buf[OLDEST..CHECK];
        xxh3_64_with_seed(self.distances(), xxh3_64(ends))
    }

    /// How many entries the log holds.
    pub(crate) fn len(&self) -> usize {
        match self.buf.get(LEN..SUMS) {
            Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]) as usize,
            _ => 0,
        }
    }

    /// The newest entry, if any.
    pub(crate) fn newest(&self) -> Option<i64> {
        (!self.buf.is_empty()).then(|| self.newest_entry())
    }

    /// The newest entry of a log that has one.
    fn newest_entry(&self) -> i64 {
        i64_at(&self.buf, NEWEST)
    }

    /// The oldest entry of a log that has one, else 0.
    fn oldest(&self) -> i64 {
        if self.buf.is_empty() {
            return 0;
        }
        i64_at(&self.buf, OLDEST)
    }

    /// The distances' varints.
    fn distances(&self) -> &[u8] {
        self.buf.get(DISTANCES..).unwrap_or_default()
    }

    /// The entries, oldest first, decoded as they are read.
    pub(crate) fn entries(&self) -> Entries<'_> {
        Entries {
            rest: self.distances(),
            index: 0,
            len: self.len(),
            newest: self.newest().unwrap_or(0),
            previous: self.oldest(),
        }
    }

    /// Every entry, decoded: [`entries`](Self::entries) in one tight
    /// loop, for the paths that rewrite the log.
    pub(crate) fn to_vec(&self) -> Vec<i64> {
        let (oldest, newest) = (self.oldest(), self.newest().unwrap_or(0));
        let mut entries = vec![newest; self.len()];
        if let Some((first, middle)) = entries.split_first_mut() {
            *first = oldest;
            let middle = match middle.split_last_mut() {
                Some((_newest, middle)) => middle,
                None => middle,
            };
            let mut rest = self.distances();
            let mut previous = oldest;
            for entry in middle {
                previous = after(previous, &mut rest, newest);
                *entry = previous;
            }
        }
        entries
    }

    /// Clamps every entry after `latest` to it; whether any was.
    pub(crate) fn clamp_to(&mut self, latest: i64) -> bool {
        if self.buf.is_empty() || self.newest_entry() <= latest {
            return false;
        }
        // Entries read are clamped to the newest, so lowering it (and the
        // oldest, when it is beyond too) clamps every one after it.
        let oldest = self.oldest().min(latest);
        self.buf[OLDEST..NEWEST].copy_from_slice(&oldest.to_le_bytes());
        self.buf[NEWEST..CHECK].copy_from_slice(&latest.to_le_bytes());
        // Its distances no longer add up to its ends: a check that is not
        // its own says so, here and to whoever reads it next.
        let check = !self.check();
        self.buf[CHECK..DISTANCES].copy_from_slice(&check.to_le_bytes());
        self.buf[SUMS] = READ;
        true
    }

    /// Appends the stored form to `out`: the version byte alone for an
    /// empty log, else the header and the distances, as the buffer holds
    /// them.
    pub(crate) fn encode_into(&self, out: &mut Vec<u8>) {
        match self.buf.get(FORM..) {
            Some(form) => out.extend_from_slice(form),
            None => out.push(VERSION),
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
        let (_check, distances) = rest.split_first_chunk::<8>()?;
        let (oldest, newest) = (i64::from_le_bytes(*oldest), i64::from_le_bytes(*newest));
        if oldest > newest || distances.last().is_some_and(|&last| last & 0x80 != 0) {
            return None;
        }
        let len = 1 + last_bytes(distances);
        if len as u64 > limit || (len == 1 && oldest != newest) {
            return None;
        }
        let len = u32::try_from(len).ok()?;
        let mut buf = Vec::with_capacity(FORM + bytes.len());
        buf.extend_from_slice(&len.to_le_bytes());
        buf.push(READ);
        buf.extend_from_slice(bytes);
        Some(Log { buf })
    }
}

/// The entries of a [`Log`], oldest first.
#[derive(Debug, Clone)]
pub(crate) struct Entries<'a> {
    rest: &'a [u8],
    index: usize,
    len: usize,
    newest: i64,
    previous: i64,
}

impl Entries<'_> {
    /// Passes the entries at or before `cutoff`, which are the oldest, and
    /// stops before the first one after it; how many it passed. None is
    /// read when the newest is at or before `cutoff` too.
    pub(crate) fn skip_through(&mut self, cutoff: i64) -> usize {
        let start = self.index;
        if self.newest <= cutoff {
            self.index = self.len.max(start);
            self.rest = &[];
            return self.index - start;
        }
        loop {
            let mut ahead = self.clone();
            match ahead.next() {
                Some(entry) if entry <= cutoff => *self = ahead,
                _ => return self.index - start,
            }
        }
    }

    /// Passes the next `n` entries.
    pub(crate) fn pass(&mut self, n: usize) {
        if let Some(last) = n.checked_sub(1) {
            self.nth(last);
        }
    }

    /// How many entries were read.
    pub(crate) fn position(&self) -> usize {
        self.index
    }
}

/// The entry after `previous`: its distance off `rest`, saturating, and
/// clamped to `newest`.
#[inline]
fn after(previous: i64, rest: &mut &[u8], newest: i64) -> i64 {
    previous
        .saturating_add_unsigned(next_varint(rest))
        .min(newest)
}

impl Iterator for Entries<'_> {
    type Item = i64;

    fn next(&mut self) -> Option<i64> {
        let entry = match self.index {
            index if index >= self.len => return None,
            // The oldest entry is where the cursor starts.
            0 => self.previous,
            index if index + 1 == self.len => self.newest,
            _ => after(self.previous, &mut self.rest, self.newest),
        };
        self.index += 1;
        self.previous = entry;
        Some(entry)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.len - self.index;
        (left, Some(left))
    }
}

impl ExactSizeIterator for Entries<'_> {}
