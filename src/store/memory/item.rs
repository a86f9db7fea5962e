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
//! key, a byte value, and the expiry's bookkeeping.

/// The key bytes held in an item's first line.
const HEAD: usize = 38;
/// The key bytes held inline in its second line, past the head: keys of
/// up to `HEAD + TAIL` (60) bytes are held in the item itself.
const TAIL: usize = 22;
/// `key_len` of a key longer than `HEAD + TAIL`, whose rest is shared.
const LONG: u8 = u8::MAX;

/// An item's value, as read or as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Value<'a> {
    Counter(u64),
    Bytes(&'a [u8]),
}

/// A key's bytes past its head.
enum Tail {
    Inline([u8; TAIL]),
    Shared(Box<[u8]>),
}

/// One item with its key.
#[repr(C, align(64))]
pub(super) struct Item {
    // The first line.
    /// The key's length, or [`LONG`].
    key_len: u8,
    /// Whether the value is `bytes`, else `counter`.
    is_bytes: bool,
    head: [u8; HEAD],
    pub(super) expires_at: i64,
    pub(super) version: u64,
    counter: u64,
    // The second line.
    tail: Tail,
    bytes: Vec<u8>,
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
        let rest = &key[in_head..];
        let (key_len, tail) = if key.len() <= HEAD + TAIL {
            let mut tail = [0; TAIL];
            tail[..rest.len()].copy_from_slice(rest);
            // At most 60: it fits.
            (key.len() as u8, Tail::Inline(tail))
        } else {
            (LONG, Tail::Shared(rest.into()))
        };
        let mut item = Self {
            key_len,
            is_bytes: false,
            head,
            expires_at,
            version,
            counter: 0,
            tail,
            bytes: Vec::new(),
            created: version,
            scheduled: expires_at,
        };
        item.set(value);
        item
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

    /// [`holds`](Self::holds) for a key longer than [`HEAD`].
    #[inline(never)]
    fn holds_long(&self, key: &[u8]) -> bool {
        let (head, rest) = key.split_at(HEAD);
        let tail_matches = match &self.tail {
            Tail::Inline(tail) => {
                key.len() <= HEAD + TAIL
                    && usize::from(self.key_len) == key.len()
                    && tail[..rest.len()] == *rest
            }
            Tail::Shared(tail) => **tail == *rest,
        };
        tail_matches && self.head == *head
    }

    /// `f` of the item's key, laid out whole.
    pub(super) fn with_key<R>(&self, f: impl FnOnce(&[u8]) -> R) -> R {
        match &self.tail {
            Tail::Inline(tail) => {
                let len = usize::from(self.key_len);
                let mut key = [0; HEAD + TAIL];
                key[..HEAD].copy_from_slice(&self.head);
                key[HEAD..].copy_from_slice(tail);
                f(&key[..len])
            }
            Tail::Shared(tail) => f(&[&self.head[..], tail].concat()),
        }
    }

    pub(super) fn value(&self) -> Value<'_> {
        if self.is_bytes {
            Value::Bytes(&self.bytes)
        } else {
            Value::Counter(self.counter)
        }
    }

    /// Replaces the value, keeping the byte buffer for bytes unless it is
    /// far too big for them; a counter drops it.
    #[inline]
    pub(super) fn set(&mut self, value: Value<'_>) {
        match value {
            Value::Counter(n) => {
                if self.is_bytes {
                    self.bytes = Vec::new();
                    self.is_bytes = false;
                }
                self.counter = n;
            }
            Value::Bytes(value) => self.set_bytes(value),
        }
    }

    fn set_bytes(&mut self, value: &[u8]) {
        if self.bytes.capacity() <= 2 * value.len() + 64 {
            self.bytes.clear();
            self.bytes.extend_from_slice(value);
        } else {
            self.bytes = value.to_vec();
        }
        self.is_bytes = true;
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
        assert_eq!(size_of::<Tail>(), 24);
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
        let lengths = [0, 1, HEAD - 1, HEAD, HEAD + 1, HEAD + TAIL - 1, HEAD + TAIL];
        let lengths = lengths.into_iter().chain([HEAD + TAIL + 1, 250, 300]);
        let keys: Vec<Vec<u8>> = lengths
            .map(|len| (0..len).map(|i| (i % 7) as u8 + b'a').collect())
            .collect();
        for key in &keys {
            let item = Item::new(key, Value::Counter(1), 1, 0);
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
        assert_eq!(item.bytes.capacity(), 0, "a counter keeps no buffer");
        item.set(Value::Bytes(b""));
        assert_eq!(item.value(), Value::Bytes(b""));
        // A buffer far too big for the new bytes is not kept.
        item.set(Value::Bytes(&[b'x'; 4096]));
        item.set(Value::Bytes(b"ab"));
        assert_eq!(item.value(), Value::Bytes(b"ab"));
        assert!(item.bytes.capacity() < 4096);
    }
}
