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
/// [`push_rewritten`](Self::push_rewritten) panics as `write_key` does on
/// a suffix longer than the space kept, and on a key of another length
/// than the first.
#[derive(Debug, Default)]
pub(crate) struct SiblingKeys {
    bytes: Vec<u8>,
    /// The length of every key.
    len: usize,
}

impl SiblingKeys {
    /// Room for `count` keys of `len` bytes each: nothing allocated for
    /// none. The keys' length is the first one's.
    pub(crate) fn with_capacity(count: usize, len: usize) -> Self {
        Self {
            bytes: Vec::with_capacity(count * len),
            len: 0,
        }
    }

    /// Appends a sibling of `key`, a key that `write_key` wrote, its
    /// suffix starting at `suffix_at`: a copy of it, whose suffix
    /// `rewrite` then changes in place (to another of the same length).
    /// Copying the key and rewriting a few digits of it costs less than
    /// writing a key out.
    pub(crate) fn push_rewritten(
        &mut self,
        key: &[u8],
        suffix_at: usize,
        rewrite: impl FnOnce(&mut [u8]),
    ) {
        if self.bytes.is_empty() {
            self.len = key.len();
        }
        assert_eq!(key.len(), self.len, "sibling keys of different lengths");
        let start = self.bytes.len();
        self.bytes.extend_from_slice(key);
        let suffix = &mut self.bytes[start + suffix_at..];
        rewrite(suffix);
        check_suffix(suffix);
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

    /// A rewrite that sets a suffix to `to`.
    fn to(suffix: &'static [u8]) -> impl FnOnce(&mut [u8]) {
        move |bytes: &mut [u8]| bytes.copy_from_slice(suffix)
    }

    #[test]
    fn keys_come_back_in_order_and_whole() {
        let mut keys = SiblingKeys::with_capacity(2, 8);
        assert_eq!(keys.count(), 0);
        assert_eq!(keys.iter().count(), 0);
        assert!(keys.slices().is_empty());
        let current = b"rl:a_202611220107";
        keys.push_rewritten(current, 5, to(b"202611220106"));
        keys.push_rewritten(current, 5, to(b"202611220105"));
        keys.push_rewritten(b"rl:b_202611220107", 5, |suffix| suffix[11] = b'4');
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
        keys.push_rewritten(b"rl:a_1", 5, |_| {});
        keys.push_rewritten(b"rl:a_12", 5, |_| {});
    }

    #[test]
    #[should_panic(expected = "too long")]
    fn a_suffix_past_the_space_kept_is_refused() {
        let long = [b'1'; 300];
        SiblingKeys::default().push_rewritten(&long, 0, |_| {});
    }
}
