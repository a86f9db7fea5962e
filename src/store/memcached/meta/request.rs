//! Meta-protocol requests, encoded as they are built: the bytes sent and,
//! per operation, what kind of reply it gets.
//!
//! The commands and flags are memcached's ("Meta Commands" in memcached's
//! `protocol.txt`, <https://github.com/memcached/memcached/blob/master/doc/protocol.txt>).
//! Keys are the store's, already checked to be printable ASCII without
//! spaces (`check_key`), so they go on the wire as they are, never in
//! base64. No operation is quiet (`q`) and none carries an opaque token:
//! every operation gets exactly one reply, in order, and a reply of the
//! wrong kind for its operation stops the exchange.

use super::recycled::{self, none_kept, Kept};
use crate::store::PutCondition;

/// The most bytes an operation's line takes besides its key (and its
/// value): its words, flags, numbers, and line ends.
const LINE: usize = 80;

/// The bytes a read's line takes besides its key (`mg <key> v c\r\n`),
/// and then some: what a request is sized by per operation, with one
/// [`LINE`] more for its longest.
const READ_LINE: usize = 16;

thread_local! {
    /// Requests' bytes this thread kept ([`recycled`]).
    static BYTES: Kept<u8> = const { none_kept() };
    /// Requests' lists of operations this thread kept.
    static OPERATIONS: Kept<(Verb, usize)> = const { none_kept() };
}

/// An operation's verb, which says what its reply can be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verb {
    /// `mg <key> v [c]`: `VA` and the value, or `EN`.
    Get,
    /// `mg <key> v` of a counter: the same replies, the value read as a
    /// number where it is one.
    ReadCounter,
    /// `mg <key> c`: `HD` with the CAS token, or `EN`.
    Version,
    /// `ma <key> v ...`: `VA` and the new value, `NF`, `NS` or `EX`.
    Arithmetic,
    /// `ms <key> <length> ...`: `HD`, `NS`, `EX` or `NF`.
    Set,
    /// `md <key>`: `HD`, `NF` or `EX`.
    Delete,
}

impl Verb {
    /// Whether the operation can change what memcached holds, so that one
    /// sent and not answered may or may not have happened.
    pub(crate) fn writes(self) -> bool {
        !matches!(self, Verb::Get | Verb::ReadCounter | Verb::Version)
    }
}

/// Operations for one server, in order, ready to send.
#[derive(Debug, Default)]
pub(crate) struct Request {
    bytes: Vec<u8>,
    /// Per operation, its verb and where its bytes end.
    operations: Operations,
}

/// Per operation, its verb and where its bytes end: a request of one
/// operation (most are) keeps it inline, with no allocation.
#[derive(Debug, Default)]
enum Operations {
    #[default]
    None,
    One((Verb, usize)),
    Many(Vec<(Verb, usize)>),
}

impl Operations {
    fn with_capacity(operations: usize) -> Self {
        match operations {
            0 | 1 => Self::None,
            _ => Self::Many(recycled::take(&OPERATIONS, operations)),
        }
    }

    fn as_slice(&self) -> &[(Verb, usize)] {
        match self {
            Self::None => &[],
            Self::One(operation) => std::slice::from_ref(operation),
            Self::Many(operations) => operations,
        }
    }

    fn push(&mut self, operation: (Verb, usize)) {
        match self {
            Self::None => *self = Self::One(operation),
            Self::One(first) => {
                let mut many = recycled::take(&OPERATIONS, 2);
                many.extend([*first, operation]);
                *self = Self::Many(many);
            }
            Self::Many(operations) => operations.push(operation),
        }
    }
}

/// Its bytes and its list of operations go back to this thread's kept
/// buffers, for the next request.
impl Drop for Request {
    fn drop(&mut self) {
        recycled::keep(&BYTES, std::mem::take(&mut self.bytes));
        if let Operations::Many(operations) = std::mem::take(&mut self.operations) {
            recycled::keep(&OPERATIONS, operations);
        }
    }
}

/// A request, or what carries one (a pipelined job): what an exchange
/// sends.
impl AsRef<Request> for Request {
    fn as_ref(&self) -> &Request {
        self
    }
}

impl Request {
    /// An empty request with room for `operations` operations on keys of
    /// `key_bytes` bytes in all (and `value_bytes` of values to set), so
    /// that building it allocates once, if at all. Sized as reads, with
    /// room for one longer line: a window's increment and its reads (or a
    /// write alone) fit, and a dozen reads fit a buffer that is kept for
    /// the next request.
    pub(crate) fn with_capacity(operations: usize, key_bytes: usize, value_bytes: usize) -> Self {
        let bytes = key_bytes + value_bytes + operations * READ_LINE + LINE;
        Self {
            bytes: recycled::take(&BYTES, bytes),
            operations: Operations::with_capacity(operations),
        }
    }

    /// The bytes to send.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Each operation's verb, in order.
    pub(crate) fn verbs(&self) -> impl Iterator<Item = Verb> + '_ {
        self.operations.as_slice().iter().map(|&(verb, _)| verb)
    }

    /// How many operations it holds.
    pub(crate) fn len(&self) -> usize {
        self.operations.as_slice().len()
    }

    /// Whether any operation can change what memcached holds.
    pub(crate) fn writes(&self) -> bool {
        self.verbs().any(Verb::writes)
    }

    /// Reads `key`'s value and its CAS token.
    pub(crate) fn get(&mut self, key: &[u8]) -> &mut Self {
        self.start(b"mg ", key);
        self.bytes.extend_from_slice(b" v c");
        self.end(Verb::Get)
    }

    /// Reads `key`'s CAS token alone.
    pub(crate) fn version(&mut self, key: &[u8]) -> &mut Self {
        self.start(b"mg ", key);
        self.bytes.extend_from_slice(b" c");
        self.end(Verb::Version)
    }

    /// Reads `key`'s value as a counter.
    pub(crate) fn read_counter(&mut self, key: &[u8]) -> &mut Self {
        self.start(b"mg ", key);
        self.bytes.extend_from_slice(b" v");
        self.end(Verb::ReadCounter)
    }

    /// Adds `delta` to the counter `key`, creating it at `delta` with a
    /// lifetime of `ttl` (memcached's expiration time) if it is missing;
    /// the reply is the new value.
    pub(crate) fn increment(&mut self, key: &[u8], delta: u64, ttl: u32) -> &mut Self {
        self.start(b"ma ", key);
        self.number(b" v D", delta);
        self.number(b" N", u64::from(ttl));
        self.number(b" J", delta);
        self.end(Verb::Arithmetic)
    }

    /// Takes `delta` from the counter `key`, stopping at 0; never creates
    /// it.
    pub(crate) fn decrement(&mut self, key: &[u8], delta: u64) -> &mut Self {
        self.start(b"ma ", key);
        self.number(b" v MD D", delta);
        self.end(Verb::Arithmetic)
    }

    /// Writes `value` under `key` for `ttl` (memcached's expiration time)
    /// if `condition` holds, asking for the new CAS token: one `ms`, or
    /// for [`PutCondition::VersionOrAbsent`] two, the compare then the add.
    pub(crate) fn set(
        &mut self,
        key: &[u8],
        value: &[u8],
        ttl: u32,
        condition: PutCondition,
    ) -> &mut Self {
        if let PutCondition::VersionOrAbsent(version) = condition {
            // Two operations: at most one of them writes.
            self.set(key, value, ttl, PutCondition::Version(version));
            return self.set(key, value, ttl, PutCondition::Absent);
        }
        self.bytes.reserve(key.len() + value.len() + LINE);
        self.start(b"ms ", key);
        self.number(b" ", value.len() as u64);
        self.number(b" c T", u64::from(ttl));
        match condition {
            PutCondition::Always | PutCondition::VersionOrAbsent(_) => {}
            PutCondition::Absent => self.bytes.extend_from_slice(b" ME"),
            PutCondition::Version(version) => self.number(b" C", version),
        }
        self.bytes.extend_from_slice(b"\r\n");
        self.bytes.extend_from_slice(value);
        self.end(Verb::Set)
    }

    /// Deletes `key`.
    pub(crate) fn delete(&mut self, key: &[u8]) -> &mut Self {
        self.start(b"md ", key);
        self.end(Verb::Delete)
    }

    /// The operations of `self` at `positions`, in that order, as a request
    /// of their own.
    pub(crate) fn select(&self, positions: &[usize]) -> Self {
        let mut part = Self::with_capacity(positions.len(), self.bytes.len(), 0);
        for &at in positions {
            let begin = match at {
                0 => 0,
                _ => self.operations.as_slice()[at - 1].1,
            };
            let (verb, end) = self.operations.as_slice()[at];
            part.bytes.extend_from_slice(&self.bytes[begin..end]);
            part.operations.push((verb, part.bytes.len()));
        }
        part
    }

    /// Begins an operation's line: its command and key. Inlined: every
    /// operation's builder starts here.
    #[inline]
    fn start(&mut self, command: &[u8], key: &[u8]) {
        self.bytes.reserve(key.len() + LINE);
        self.bytes.extend_from_slice(command);
        self.bytes.extend_from_slice(key);
    }

    fn number(&mut self, flag: &[u8], number: u64) {
        self.bytes.extend_from_slice(flag);
        self.bytes
            .extend_from_slice(itoa::Buffer::new().format(number).as_bytes());
    }

    /// Ends the operation begun last, of `verb`: its line end, and the
    /// operation with where its bytes end, pushed once complete.
    fn end(&mut self, verb: Verb) -> &mut Self {
        self.bytes.extend_from_slice(b"\r\n");
        self.operations.push((verb, self.bytes.len()));
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_is_one_line_with_memcacheds_flags() {
        let mut request = Request::with_capacity(8, 8, 5);
        request
            .increment(b"a", 5, 60)
            .get(b"b")
            .version(b"h")
            .read_counter(b"c")
            .decrement(b"d", 2)
            .set(b"e", b"x\r\ny", 30, PutCondition::Version(9))
            .set(b"f", b"1", 30, PutCondition::Absent)
            .delete(b"g");
        assert_eq!(
            String::from_utf8_lossy(request.bytes()),
            "ma a v D5 N60 J5\r\nmg b v c\r\nmg h c\r\nmg c v\r\nma d v MD D2\r\n\
             ms e 4 c T30 C9\r\nx\r\ny\r\nms f 1 c T30 ME\r\n1\r\nmd g\r\n"
        );
        assert!(request.writes());
        assert_eq!(request.len(), 8);
        let mut reads = Request::default();
        reads.get(b"a").read_counter(b"b").version(b"c");
        assert!(!reads.writes());
    }

    /// A window of 1 s sub-windows whose client was away 13 s: its
    /// increment and 13 reads.
    fn visit(key: &[u8]) -> Request {
        let mut request = Request::with_capacity(14, 14 * key.len(), 0);
        request.increment(key, 1, 63);
        for _ in 0..13 {
            request.read_counter(key);
        }
        request
    }

    #[test]
    fn a_window_that_reads_a_dozen_sub_windows_reuses_one_requests_buffers() {
        let key = b"sw60:c21101_20261207191842-1s";
        let first = visit(key);
        let (bytes, capacity) = (first.bytes.as_ptr(), first.bytes.capacity());
        let Operations::Many(operations) = &first.operations else {
            panic!("14 operations");
        };
        let operations = operations.as_ptr();
        drop(first);
        let second = visit(key);
        // Built without growing, in the buffers the first one left.
        assert_eq!(second.bytes.capacity(), capacity);
        assert_eq!(second.bytes.as_ptr(), bytes);
        let Operations::Many(again) = &second.operations else {
            panic!("14 operations");
        };
        assert_eq!(again.as_ptr(), operations);
    }

    #[test]
    fn a_selection_keeps_each_operation_whole_even_with_newlines_in_values() {
        let mut request = Request::default();
        request
            .read_counter(b"a")
            .set(b"b", b"one\r\ntwo\n", 1, PutCondition::Always)
            .delete(b"c");
        let part = request.select(&[2, 1]);
        assert_eq!(
            String::from_utf8_lossy(part.bytes()),
            "md c\r\nms b 9 c T1\r\none\r\ntwo\n\r\n"
        );
        assert_eq!(part.verbs().collect::<Vec<_>>(), [Verb::Delete, Verb::Set]);
    }
}
