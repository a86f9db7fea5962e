//! The keys of a client's older buckets, read beside its current one:
//! written back to back into one buffer, so that a decision reading 60
//! buckets makes one allocation for their keys, not 60.

use super::check_suffix;

/// Keys `<prefix>_<suffix>` of one length, for one client prefix that
/// [`KeySpace::write_key`](super::KeySpace::write_key) wrote: each a
/// sibling of the key it wrote with another suffix. A window's bucket
/// suffixes all have one length (their dates have four-digit years: a
/// clock in unix nanoseconds stays within 1677 to 2262), so the keys are
/// told apart by that length alone.
///
/// # Panics
///
/// [`push`](Self::push) panics as `write_key` does on a suffix longer than
/// the space kept, and on a key of another length than the first.
#[derive(Debug, Default)]
pub(crate) struct SiblingKeys {
    bytes: Vec<u8>,
    /// The length of every key.
    len: usize,
}

impl SiblingKeys {
    /// Room for `count` keys of `len` bytes each: nothing allocated for
    /// none.
    pub(crate) fn with_capacity(count: usize, len: usize) -> Self {
        Self {
            bytes: Vec::with_capacity(count * len),
            len,
        }
    }

    /// Appends the key `<prefix>_<suffix>`.
    pub(crate) fn push(&mut self, prefix: &[u8], suffix: &[u8]) {
        check_suffix(suffix);
        let len = prefix.len() + 1 + suffix.len();
        if self.bytes.is_empty() {
            self.len = len;
        }
        assert_eq!(len, self.len, "sibling keys of different lengths");
        self.bytes.extend_from_slice(prefix);
        self.bytes.push(b'_');
        self.bytes.extend_from_slice(suffix);
    }

    /// How many keys there are.
    pub(crate) fn count(&self) -> usize {
        self.bytes.len().checked_div(self.len).unwrap_or(0)
    }

    /// The keys, in the order pushed.
    pub(crate) fn iter(&self) -> std::slice::ChunksExact<'_, u8> {
        // A length of 0 only with no keys: any chunk size reads none.
        self.bytes.chunks_exact(self.len.max(1))
    }

    /// The keys as slices, for a store call: nothing allocated when there
    /// are none.
    pub(crate) fn slices(&self) -> Vec<&[u8]> {
        if self.bytes.is_empty() {
            return Vec::new();
        }
        let mut slices = Vec::with_capacity(self.count());
        slices.extend(self.iter());
        slices
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_come_back_in_order_and_whole() {
        let mut keys = SiblingKeys::with_capacity(2, 8);
        assert_eq!(keys.count(), 0);
        assert_eq!(keys.iter().count(), 0);
        assert!(keys.slices().is_empty());
        keys.push(b"rl:a", b"202611220106");
        keys.push(b"rl:a", b"202611220105");
        keys.push(b"rl:b", b"202611220104");
        assert_eq!(keys.count(), 3);
        let expected: [&[u8]; 3] = [
            b"rl:a_202611220106",
            b"rl:a_202611220105",
            b"rl:b_202611220104",
        ];
        assert_eq!(keys.iter().collect::<Vec<_>>(), expected);
        assert_eq!(keys.slices(), expected);
    }

    #[test]
    #[should_panic(expected = "sibling keys of different lengths")]
    fn keys_of_another_length_are_refused() {
        let mut keys = SiblingKeys::default();
        keys.push(b"rl:a", b"1");
        keys.push(b"rl:a", b"12");
    }
}
