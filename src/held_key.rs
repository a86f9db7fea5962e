//! Keys as the in-process tables hold them: inline when short, so that
//! finding one compares bytes already in the table's own entry instead of
//! following a pointer to another allocation; shared when long.
//!
//! With many clients, the tables are far larger than the processor's
//! caches, and every pointer a lookup follows is a likely cache miss: a
//! key held in its own allocation costs one more per lookup than a key
//! held in the entry.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The longest key held inline by default. A `HeldKey` takes 56 bytes, a
/// length byte and a tag among them: room for
/// `<namespace>:<client>_<suffix>` with a 32-character client id, a short
/// namespace and a 12-digit suffix.
pub(crate) const INLINE: usize = 54;

/// A key held by a table: its bytes inline up to `N` (at most 255), else
/// in an `Arc`, so that a clone is cheap either way. It takes `N` + 2
/// bytes, rounded up to a multiple of 8 (at least 24). It hashes,
/// compares and orders as its bytes do, so a table of them is searched
/// with a `&[u8]`.
#[derive(Clone)]
pub(crate) struct HeldKey<const N: usize = INLINE>(Repr<N>);

#[derive(Clone)]
enum Repr<const N: usize> {
    Inline { len: u8, bytes: [u8; N] },
    Shared(Arc<[u8]>),
}

impl<const N: usize> HeldKey<N> {
    /// A length byte counts the bytes held inline.
    const FITS: () = assert!(
        N <= u8::MAX as usize,
        "a length byte counts the inline bytes"
    );

    /// Holds `key`.
    pub(crate) fn new(key: &[u8]) -> Self {
        let () = Self::FITS;
        if key.len() > N {
            return Self(Repr::Shared(Arc::from(key)));
        }
        let mut bytes = [0; N];
        bytes[..key.len()].copy_from_slice(key);
        // At most `N`, which `FITS` bounds by 255.
        let len = key.len() as u8;
        Self(Repr::Inline { len, bytes })
    }

    /// The key's bytes.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        match &self.0 {
            Repr::Inline { len, bytes } => &bytes[..usize::from(*len)],
            Repr::Shared(bytes) => bytes,
        }
    }
}

/// For maps that insert a key found missing by a borrowed one (hashbrown's
/// `entry_ref`).
impl<const N: usize> From<&[u8]> for HeldKey<N> {
    fn from(key: &[u8]) -> Self {
        Self::new(key)
    }
}

impl<const N: usize> Borrow<[u8]> for HeldKey<N> {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

// As `[u8]` hashes, which `Borrow` requires.
impl<const N: usize> Hash for HeldKey<N> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl<const N: usize> PartialEq for HeldKey<N> {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl<const N: usize> Eq for HeldKey<N> {}

impl<const N: usize> PartialOrd for HeldKey<N> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<const N: usize> Ord for HeldKey<N> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_bytes().cmp(other.as_bytes())
    }
}

impl<const N: usize> fmt::Debug for HeldKey<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::RandomState;
    use std::collections::HashMap;
    use std::hash::BuildHasher;

    fn lengths() -> impl Iterator<Item = usize> {
        [0, 1, INLINE - 1, INLINE, INLINE + 1, 255, 256, 300, 10_000].into_iter()
    }

    #[test]
    fn holds_any_key_as_its_bytes() {
        let hasher = RandomState::new();
        for len in lengths() {
            let key: Vec<u8> = (0..len).map(|i| (i * 7 + len) as u8).collect();
            let held = HeldKey::<INLINE>::new(&key);
            assert_eq!(held.as_bytes(), key.as_slice(), "length {len}");
            assert_eq!(held.clone(), held);
            assert_eq!(
                hasher.hash_one(&held),
                hasher.hash_one(key.as_slice()),
                "hashes as its bytes, length {len}"
            );
        }
    }

    #[test]
    fn a_table_of_held_keys_is_searched_by_bytes() {
        let keys: Vec<Vec<u8>> = lengths().map(|len| vec![b'k'; len]).collect();
        let map: HashMap<HeldKey, usize> = keys
            .iter()
            .enumerate()
            .map(|(i, key)| (HeldKey::<INLINE>::new(key), i))
            .collect();
        assert_eq!(map.len(), keys.len());
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(map.get(key.as_slice()), Some(&i));
        }
        // Keys differing only past the inline part, or only by length.
        let long = vec![b'k'; INLINE + 1];
        let mut other = long.clone();
        *other.last_mut().expect("not empty") = b'j';
        assert_ne!(
            HeldKey::<INLINE>::new(&long),
            HeldKey::<INLINE>::new(&other)
        );
        assert_ne!(
            HeldKey::<INLINE>::new(&long[..INLINE]),
            HeldKey::<INLINE>::new(&long)
        );
        assert!(!map.contains_key(other.as_slice()));
    }

    #[test]
    fn orders_as_its_bytes() {
        let keys: [&[u8]; 5] = [b"", b"a", b"ab", &[b'a'; INLINE + 3], b"b"];
        for a in keys {
            for b in keys {
                assert_eq!(
                    HeldKey::<INLINE>::new(a).cmp(&HeldKey::<INLINE>::new(b)),
                    a.cmp(b)
                );
            }
        }
    }

    #[test]
    fn takes_its_inline_bytes_and_two() {
        assert_eq!(std::mem::size_of::<HeldKey>(), 56);
        assert_eq!(std::mem::size_of::<HeldKey<38>>(), 40);
    }

    #[test]
    fn a_shorter_inline_part_holds_any_key_too() {
        for len in [0, 37, 38, 39, 54, 300] {
            let key: Vec<u8> = (0..len).map(|i| (i * 3) as u8).collect();
            let held = HeldKey::<38>::new(&key);
            assert_eq!(held.as_bytes(), key.as_slice(), "length {len}");
            assert_eq!(held.clone(), held);
        }
    }
}
