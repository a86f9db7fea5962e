//! An item as a [`Shard`](super::shard::Shard)'s table holds it: key,
//! value, version and expiry in two cache lines, the first holding all
//! that the increment of a live counter with a short key reads and writes.
//!
//! With 100,000 clients the table is far larger than the processor's
//! caches, and a lookup costs the lines of its entry that it fetches. An
//! entry of a key and an item side by side took 112 bytes wherever it
//! fell, most often across two or three lines; this one starts a line:
//! its first holds the key's length and first [`HEAD`] bytes, the
//! expiry, the version and the counter, its second the rest of a longer
//! key, a byte value, and the expiry's bookkeeping. A byte value that fits
//! there beside the key's rest is held in the line itself: one held on the
//! heap was one more miss, after the item's, for every compare-and-swap
//! decision.

/// The key bytes held in an item's first line.
const HEAD: usize = 38;
/// The bytes of its second line that hold, side by side, the rest of a
/// key longer than [`HEAD`] and a byte value: both are in the item itself
/// while they fit here together, which a counter's key of up to 83 bytes
/// does, and a compare-and-swap algorithm's state beside a key of up to
/// [`HEAD`] (a GCRA's 25 digits, a token bucket's 44 characters at most).
const REST: usize = 45;
/// `key_len` of a key too long for it; such a key's length is told by its
/// rest.
const LONG: u8 = u8::MAX;

/// An item's value, as read or as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Value<'a> {
    Counter(u64),
    Bytes(&'a [u8]),
}

/// A key's bytes past its head, and a byte value.
enum Rest {
    /// In the item: `tail` bytes of the key, then `value` bytes of the
    /// value.
    Inline {
        tail: u8,
        value: u8,
        buf: [u8; REST],
    },
    /// Together too long for it: on the heap, where they stay.
    Spilled(Box<Spilled>),
}

struct Spilled {
    tail: Box<[u8]>,
    value: Vec<u8>,
}

impl Rest {
    fn new(tail: &[u8], value: &[u8]) -> Self {
        if tail.len() + value.len() > REST {
            return Self::spilled(tail.into(), value);
        }
        let mut buf = [0; REST];
        buf[..tail.len()].copy_from_slice(tail);
        buf[tail.len()..][..value.len()].copy_from_slice(value);
        // Both at most `REST` (45): they fit.
        Self::Inline {
            tail: tail.len() as u8,
            value: value.len() as u8,
            buf,
        }
    }

    fn spilled(tail: Box<[u8]>, value: &[u8]) -> Self {
        Self::Spilled(Box::new(Spilled {
            tail,
            value: value.to_vec(),
        }))
    }

    fn tail(&self) -> &[u8] {
        match self {
            Self::Inline { tail, buf, .. } => &buf[..usize::from(*tail)],
            Self::Spilled(spilled) => &spilled.tail,
        }
    }

    fn value(&self) -> &[u8] {
        match self {
            Self::Inline { tail, value, buf } => &buf[usize::from(*tail)..][..usize::from(*value)],
            Self::Spilled(spilled) => &spilled.value,
        }
    }

    /// Replaces the value: in the item if it fits beside the key's tail,
    /// else on the heap, keeping a heap buffer unless it is far too big
    /// for the new value. Once spilled, a rest stays on the heap, so that
    /// a value whose length goes back and forth allocates at most once.
    fn set_value(&mut self, new: &[u8]) {
        match self {
            Self::Inline { tail, value, buf } if usize::from(*tail) + new.len() <= REST => {
                buf[usize::from(*tail)..][..new.len()].copy_from_slice(new);
                // At most `REST`.
                *value = new.len() as u8;
            }
            Self::Inline { .. } => *self = Self::spilled(self.tail().into(), new),
            Self::Spilled(spilled) => {
                if spilled.value.capacity() <= 2 * new.len() + 64 {
                    spilled.value.clear();
                    spilled.value.extend_from_slice(new);
                } else {
                    spilled.value = new.to_vec();
                }
            }
        }
    }

    /// Drops the value, and the heap with it if the key's tail alone fits
    /// in the item.
    fn clear_value(&mut self) {
        match self {
            Self::Inline { value, .. } => *value = 0,
            Self::Spilled(spilled) => {
                if spilled.tail.len() <= REST {
                    *self = Self::new(&spilled.tail, &[]);
                } else {
                    spilled.value = Vec::new();
                }
            }
        }
    }
}

/// One item with its key.
#[repr(C, align(64))]
pub(super) struct Item {
    // The first line.
    /// The key's length, or [`LONG`].
    key_len: u8,
    /// Whether the value is bytes (in `rest`), else `counter`.
    is_bytes: bool,
    head: [u8; HEAD],
    pub(super) expires_at: i64,
    pub(super) version: u64,
    counter: u64,
    // The second line.
    rest: Rest,
    /// The version the item was created at, naming its expiry entry.
    pub(super) created: u64,
    /// When its expiry entry comes up: at most `expires_at`.
    pub(super) scheduled: i64,
}

impl Item {
    /// A new item at `key`, created at `version`.
    pub(super) fn new(key: &[u8], value: Value<'_>, version: u64, expires_at: i64) -> Self {
        let in_head = key.len().min(HEAD);
        let mut head = [0; HEAD];
        head[..in_head].copy_from_slice(&key[..in_head]);
        let (is_bytes, counter, bytes) = match value {
            Value::Counter(n) => (false, n, &[][..]),
            Value::Bytes(bytes) => (true, 0, bytes),
        };
        Self {
            key_len: u8::try_from(key.len()).unwrap_or(LONG),
            is_bytes,
            head,
            expires_at,
            version,
            counter,
            rest: Rest::new(&key[in_head..], bytes),
            created: version,
            scheduled: expires_at,
        }
    }

    /// Whether this item's key is `key`. A key of up to [`HEAD`] bytes
    /// is compared within the first line.
    #[inline(always)]
    pub(super) fn holds(&self, key: &[u8]) -> bool {
        if key.len() <= HEAD {
            return usize::from(self.key_len) == key.len() && self.head[..key.len()] == *key;
        }
        self.holds_long(key)
    }

    /// [`holds`](Self::holds) for a key longer than [`HEAD`]: an item
    /// whose key is not has no tail.
    #[inline(never)]
    fn holds_long(&self, key: &[u8]) -> bool {
        let (head, rest) = key.split_at(HEAD);
        self.rest.tail() == rest && self.head == *head
    }

    /// `f` of the item's key, laid out whole.
    pub(super) fn with_key<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        let tail = self.rest.tail();
        if tail.len() > REST {
            return f(&[&self.head[..], tail].concat());
        }
        let mut key = [0; HEAD + REST];
        key[..HEAD].copy_from_slice(&self.head);
        key[HEAD..][..tail.len()].copy_from_slice(tail);
        let len = if tail.is_empty() {
            usize::from(self.key_len)
        } else {
            HEAD + tail.len()
        };
        f(&key[..len])
    }

    pub(super) fn value(&self) -> Value<'_> {
        if self.is_bytes {
            Value::Bytes(self.rest.value())
        } else {
            Value::Counter(self.counter)
        }
    }

    /// Replaces the value; a counter drops the bytes held before it.
    #[inline]
    pub(super) fn set(&mut self, value: Value<'_>) {
        match value {
            Value::Counter(n) => {
                if self.is_bytes {
                    self.rest.clear_value();
                    self.is_bytes = false;
                }
                self.counter = n;
            }
            Value::Bytes(value) => {
                self.rest.set_value(value);
                self.is_bytes = true;
            }
        }
    }

    /// Rewrites the value, with a new version and expiry; returns the
    /// expiry entry to add if its current one comes too late.
    pub(super) fn rewrite(
        &mut self,
        value: Value<'_>,
        version: u64,
        expires_at: i64,
    ) -> Option<(i64, u64)> {
        self.set(value);
        self.version = version;
        self.expires_at = expires_at;
        (expires_at < self.scheduled).then(|| {
            self.scheduled = expires_at;
            (expires_at, self.created)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::{align_of, offset_of, size_of};

    #[test]
    fn a_short_keys_counter_is_in_the_first_line() {
        assert_eq!(size_of::<Item>(), 128);
        assert_eq!(align_of::<Item>(), 64);
        assert_eq!(size_of::<Rest>(), 48);
        assert_eq!(offset_of!(Item, rest), 64);
        for end in [
            offset_of!(Item, head) + HEAD,
            offset_of!(Item, expires_at) + 8,
            offset_of!(Item, version) + 8,
            offset_of!(Item, counter) + 8,
        ] {
            assert!(end <= 64, "{end}");
        }
    }

    #[test]
    fn holds_its_own_key_alone_at_every_length() {
        let lengths = [0, 1, HEAD - 1, HEAD, HEAD + 1, HEAD + REST - 1, HEAD + REST];
        let lengths = lengths
            .into_iter()
            .chain([HEAD + REST + 1, 250, 254, 255, 300]);
        let keys: Vec<Vec<u8>> = lengths
            .map(|len| (0..len).map(|i| (i % 7) as u8 + b'a').collect())
            .collect();
        let values = [
            Value::Counter(1),
            Value::Bytes(b"x"),
            Value::Bytes(&[b'v'; 40]),
        ];
        for (key, value) in keys.iter().flat_map(|key| values.map(|value| (key, value))) {
            let item = Item::new(key, value, 1, 0);
            assert_eq!(item.value(), value);
            assert!(item.holds(key), "length {}", key.len());
            item.with_key(|held| assert_eq!(held, key.as_slice()));
            for other in &keys {
                assert_eq!(
                    item.holds(other),
                    other == key,
                    "{} {}",
                    key.len(),
                    other.len()
                );
            }
            // Differing in its last byte only.
            if let Some((last, rest)) = key.split_last() {
                let other = [rest, &[last.wrapping_add(1)]].concat();
                assert!(!item.holds(&other), "length {}", key.len());
            }
        }
    }

    #[test]
    fn a_value_is_a_counter_or_bytes_as_last_set() {
        let mut item = Item::new(b"k", Value::Bytes(b"hello"), 1, 0);
        assert_eq!(item.value(), Value::Bytes(b"hello"));
        item.set(Value::Counter(7));
        assert_eq!(item.value(), Value::Counter(7));
        assert!(item.on_heap().is_none(), "a counter keeps no buffer");
        item.set(Value::Bytes(b""));
        assert_eq!(item.value(), Value::Bytes(b""));
        // A buffer far too big for the new bytes is not kept.
        item.set(Value::Bytes(&[b'x'; 4096]));
        assert_eq!(item.on_heap(), Some(4096));
        item.set(Value::Bytes(b"ab"));
        assert_eq!(item.value(), Value::Bytes(b"ab"));
        assert!(item.on_heap().unwrap() < 4096);
        // Back to a counter: the heap is let go.
        item.set(Value::Counter(1));
        assert!(item.on_heap().is_none());
    }

    #[test]
    fn a_value_is_held_in_the_item_while_it_fits_beside_the_keys_rest() {
        for key_len in [1, HEAD, HEAD + 1, HEAD + 20, HEAD + REST] {
            let key = vec![b'k'; key_len];
            let room = REST - key_len.saturating_sub(HEAD);
            let mut item = Item::new(&key, Value::Counter(3), 1, 0);
            assert!(item.on_heap().is_none(), "key of {key_len}");
            let fits = vec![b'f'; room];
            item.set(Value::Bytes(&fits));
            assert!(
                item.on_heap().is_none(),
                "key of {key_len}, value of {room}"
            );
            let spills = vec![b's'; room + 1];
            item.set(Value::Bytes(&spills));
            assert!(
                item.on_heap().is_some(),
                "key of {key_len}, value of {}",
                room + 1
            );
            for value in [&fits[..], &spills[..], b"1"] {
                item.set(Value::Bytes(value));
                assert_eq!(item.value(), Value::Bytes(value));
                assert!(item.holds(&key));
                item.with_key(|held| assert_eq!(held, key.as_slice()));
            }
            item.set(Value::Counter(9));
            assert_eq!(item.value(), Value::Counter(9));
            assert!(item.on_heap().is_none(), "key of {key_len}");
            assert!(item.holds(&key));
        }
    }

    impl Item {
        /// The capacity of the value's heap buffer, if the item has one.
        fn on_heap(&self) -> Option<usize> {
            match &self.rest {
                Rest::Inline { .. } => None,
                Rest::Spilled(spilled) => Some(spilled.value.capacity()),
            }
        }
    }
}
