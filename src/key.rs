//! The one place that turns a client id into memcached keys.
//!
//! A key is `<namespace>:<client>_<suffix>`, for example
//! `rl:alice_202611220107` for alice's minute bucket starting at
//! 2026-11-22 01:07 UTC. The parts:
//!
//! - `namespace` is chosen by the operator and validated when a limiter is
//!   built: printable ASCII without `#`, at most [`MAX_NAMESPACE_LEN`]
//!   bytes as written into keys. It is written with `%` as `%25` and `:`
//!   as `%3A`, so it never holds a `:` and the first `:` of a key ends it:
//!   the namespace `api:login` is written `api%3Alogin`, and its client
//!   `alice` never meets the client `login:alice` of the namespace `api`.
//!   A namespace without `%` or `:` is written as it is.
//! - `client` is the id itself when it is short and made of printable
//!   ASCII other than `#`: readable keys for the common case. Any other id
//!   (empty, spaces, CR/LF, control bytes, non-UTF-8, too long, or
//!   containing `#`) becomes `#` followed by the hex SHA-256 of its bytes.
//!   Raw ids never contain `#`, so a raw id and a hashed one never meet,
//!   and SHA-256 keeps hashed ids apart.
//! - `suffix` is written by the algorithm and never contains `_`. It names
//!   the limiter's identity: a window bucket's start time and, unless the
//!   bucket is one minute long, its length (`202611220107`,
//!   `20261122010715-15s`), so window limiters of one namespace that share
//!   a bucket length share its counters (they count the same requests) and
//!   any other length reads other keys; a compare-and-swap state names its
//!   algorithm and parameters (`gcra-…`, `tb-…`, `log-…`, `hq-…`).
//!
//! So every key is at most [`MAX_KEY_LEN`] bytes of printable ASCII with no
//! whitespace, nothing a client sends can inject a protocol command, and
//! the encoding is injective: the namespace is everything before the first
//! `:`, the suffix everything after the last `_`, and the client what lies
//! between. Two distinct (namespace, client, suffix) triples never share a
//! key. `<namespace>:<client>` is also what the memcached store routes on
//! ([`routing_prefix`]), so all the keys of one client live on one server.
//!
//! Keys written before namespaces were escaped differ only for namespaces
//! holding `%` or `:`; after an upgrade, their counters start afresh once.

use std::fmt;

use sha2::{Digest, Sha256};

use crate::error::ConfigError;
use crate::stack_text::StackText;

mod printable;
mod siblings;

pub(crate) use self::siblings::SiblingKeys;

/// The longest key memcached accepts.
pub const MAX_KEY_LEN: usize = 250;
/// The longest namespace a limiter accepts, in bytes as written into keys
/// (`%` and `:` take three bytes each there).
pub const MAX_NAMESPACE_LEN: usize = 64;
/// Bytes kept free at the end of every key for `_<suffix>`.
const SUFFIX_RESERVE: usize = 40;
const HASH_MARK: u8 = b'#';

/// A validated namespace, the first part of every key a limiter writes.
///
/// ```
/// use memcache_ratelimit::key::KeySpace;
///
/// let keys = KeySpace::new("api")?;
/// assert_eq!(keys.client(b"alice").as_str(), "api:alice");
/// // Unsafe or long ids are hashed.
/// assert!(keys.client(b"a b\r\nflush_all").as_str().starts_with("api:#"));
/// assert!(KeySpace::new("has space").is_err());
/// # Ok::<(), memcache_ratelimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeySpace {
    namespace: String,
    /// The namespace as written into keys: `%` and `:` escaped.
    written: String,
}

impl KeySpace {
    /// Validates `namespace`: printable ASCII (`!` to `~`) without `#`, 1
    /// to [`MAX_NAMESPACE_LEN`] bytes long as written into keys, where `%`
    /// and `:` are escaped as `%25` and `%3A`.
    ///
    /// ```
    /// use memcache_ratelimit::key::KeySpace;
    ///
    /// // The separator in a namespace is escaped: no two namespaces meet.
    /// let login = KeySpace::new("api:login")?;
    /// assert_eq!(login.client(b"alice").as_str(), "api%3Alogin:alice");
    /// assert_ne!(
    ///     login.client(b"alice"),
    ///     KeySpace::new("api")?.client(b"login:alice")
    /// );
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn new(namespace: impl Into<String>) -> Result<Self, ConfigError> {
        let namespace = namespace.into();
        if !is_raw(namespace.as_bytes()) {
            return Err(ConfigError::new(
                "namespace",
                format!("{namespace:?} may only hold printable ASCII other than '#' and space"),
            ));
        }
        let mut written = String::with_capacity(namespace.len());
        for c in namespace.chars() {
            match c {
                '%' => written.push_str("%25"),
                ':' => written.push_str("%3A"),
                c => written.push(c),
            }
        }
        if namespace.is_empty() || written.len() > MAX_NAMESPACE_LEN {
            return Err(ConfigError::new(
                "namespace",
                format!(
                    "{namespace:?} must be 1 to {MAX_NAMESPACE_LEN} bytes long as written into keys ('%' and ':' take three bytes), not {}",
                    written.len()
                ),
            ));
        }
        Ok(Self { namespace, written })
    }

    /// The namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The key prefix of client `id`: `<namespace>:<client>`, at most
    /// `MAX_KEY_LEN - SUFFIX_RESERVE` bytes.
    pub fn client(&self, id: &[u8]) -> ClientKey {
        let mut prefix = KeyBuf::new();
        self.push_client(id, &mut prefix);
        ClientKey { prefix }
    }

    /// Writes client `id`'s key `<namespace>:<client>_<suffix>` into
    /// `key`, in place of what it held, and returns the length of its
    /// prefix `<namespace>:<client>`. Written where the caller keeps it:
    /// a key is 258 bytes on the stack, and a decision that received one
    /// by value would copy it.
    ///
    /// # Panics
    ///
    /// If `suffix` holds `_` or is longer than the space kept for it: the
    /// suffixes are written by this crate's algorithms, so that is a bug.
    pub(crate) fn write_key(&self, id: &[u8], suffix: &[u8], key: &mut KeyBuf) -> usize {
        key.clear();
        self.push_client(id, key);
        let prefix = key.len();
        push_suffix(key, suffix);
        prefix
    }

    /// Appends `<namespace>:<client>` of `id` to `prefix`.
    fn push_client(&self, id: &[u8], prefix: &mut KeyBuf) {
        let max_raw = MAX_KEY_LEN - self.written.len() - 2 - SUFFIX_RESERVE;
        prefix.push(self.written.as_bytes());
        prefix.push_byte(b':');
        if !id.is_empty() && id.len() <= max_raw && is_raw(id) {
            prefix.push(id);
        } else {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            let mut hashed = [HASH_MARK; 65];
            for (at, byte) in Sha256::digest(id).into_iter().enumerate() {
                hashed[1 + 2 * at] = HEX[usize::from(byte >> 4)];
                hashed[2 + 2 * at] = HEX[usize::from(byte & 0xf)];
            }
            prefix.push(&hashed);
        }
    }
}

/// Appends `_<suffix>` to a key prefix.
fn push_suffix(key: &mut KeyBuf, suffix: &[u8]) {
    check_suffix(suffix);
    key.push_byte(b'_');
    key.push(suffix);
}

/// A whole key, on the stack.
pub(crate) type KeyBuf = StackText<MAX_KEY_LEN>;

/// Panics on a suffix longer than the space kept, and in debug builds on
/// one this crate's algorithms never write: holding `_` or anything but
/// printable ASCII.
fn check_suffix(suffix: &[u8]) {
    assert!(
        suffix.len() < SUFFIX_RESERVE,
        "key suffix {:?} too long",
        String::from_utf8_lossy(suffix)
    );
    // The suffixes are the algorithms' own constants and dates, checked
    // by their tests; the length above keeps every key within bounds.
    debug_assert!(
        is_raw(suffix) && !suffix.contains(&b'_'),
        "invalid key suffix {:?}",
        String::from_utf8_lossy(suffix)
    );
}

impl Default for KeySpace {
    /// The namespace `rl`.
    fn default() -> Self {
        Self {
            namespace: "rl".to_owned(),
            written: "rl".to_owned(),
        }
    }
}

/// The key prefix of one client, `<namespace>:<client>`; every key of the
/// client extends it with `_<suffix>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientKey {
    prefix: KeyBuf,
}

impl ClientKey {
    /// The prefix as text.
    pub fn as_str(&self) -> &str {
        self.prefix.as_str()
    }

    /// The prefix as bytes: what [`as_str`](Self::as_str) holds, without
    /// checking it again.
    pub fn as_bytes(&self) -> &[u8] {
        &self.prefix
    }
}

impl fmt::Display for ClientKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.prefix.as_str())
    }
}

/// The part of a key that decides its server: everything before the last
/// `_`, which for keys built by this crate is `<namespace>:<client>`. A key
/// without `_` routes as a whole.
///
/// ```
/// use memcache_ratelimit::key::routing_prefix;
///
/// assert_eq!(routing_prefix(b"rl:user_42_202611220107"), b"rl:user_42");
/// assert_eq!(routing_prefix(b"plain"), b"plain");
/// ```
pub fn routing_prefix(key: &[u8]) -> &[u8] {
    match key.iter().rposition(|&b| b == b'_') {
        Some(at) => &key[..at],
        None => key,
    }
}

/// Whether `key` is one memcached accepts verbatim: 1 to 250 bytes with no
/// whitespace or control bytes.
pub fn is_valid_key(key: &[u8]) -> bool {
    !key.is_empty() && key.len() <= MAX_KEY_LEN && printable::all_printable_except(key, None)
}

/// Hashes whole keys with XXH3, seeded: fast for keys of a few dozen bytes,
/// and with a random seed per map, ids chosen by clients cannot be made to
/// collide. For maps keyed by `Vec<u8>`, `[u8]` or the like, whose
/// [`Hash`](std::hash::Hash) writes the length, then the bytes in one call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct KeyHasher {
    seed: u64,
}

impl KeyHasher {
    /// A hasher with a random seed.
    pub(crate) fn random() -> Self {
        Self {
            seed: rand::random(),
        }
    }
}

impl Default for KeyHasher {
    fn default() -> Self {
        Self::random()
    }
}

impl std::hash::BuildHasher for KeyHasher {
    type Hasher = KeyHash;

    fn build_hasher(&self) -> KeyHash {
        KeyHash {
            seed: self.seed,
            hash: 0,
        }
    }
}

/// One key's hash, from [`KeyHasher`].
pub(crate) struct KeyHash {
    seed: u64,
    hash: u64,
}

impl std::hash::Hasher for KeyHash {
    fn write(&mut self, bytes: &[u8]) {
        self.hash ^= xxhash_rust::xxh3::xxh3_64_with_seed(bytes, self.seed);
    }

    fn write_usize(&mut self, length: usize) {
        // The length prefix: the bytes that follow already tell keys of
        // different lengths apart.
        let _ = length;
    }

    fn finish(&self) -> u64 {
        self.hash
    }
}

/// Whether client id bytes go into a key as they are: printable, and
/// none the mark of a hashed id.
fn is_raw(id: &[u8]) -> bool {
    printable::all_printable_except(id, Some(HASH_MARK))
}

/// A client id for logs: printable ASCII as it is, any other byte as
/// `\xNN`, cut after 64 bytes with the full length noted, so that no id
/// can forge or flood a log line.
pub(crate) struct Printable<'a>(pub(crate) &'a [u8]);

impl fmt::Display for Printable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN: usize = 64;
        for &byte in self.0.iter().take(SHOWN) {
            if byte.is_ascii_graphic() && byte != b'\\' {
                write!(f, "{}", char::from(byte))?;
            } else {
                write!(f, "\\x{byte:02x}")?;
            }
        }
        if self.0.len() > SHOWN {
            write!(f, "… ({} bytes)", self.0.len())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_ids_stay_readable_and_others_are_hashed() {
        let keys = KeySpace::default();
        let mut key = KeyBuf::new();
        let prefix = keys.write_key(b"user_42", b"202611220107", &mut key);
        assert_eq!(key, b"rl:user_42_202611220107");
        assert_eq!(&key[..prefix], keys.client(b"user_42").as_bytes());
        let mut siblings = SiblingKeys::default();
        siblings.push_rewritten(&key, prefix + 1, |suffix| suffix[11] = b'6');
        assert_eq!(siblings.slices(), [b"rl:user_42_202611220106"]);
        // Written in place of what the buffer held.
        keys.write_key(b"bob", b"x", &mut key);
        assert_eq!(key, b"rl:bob_x");
        for id in [
            &b""[..],
            b" ",
            b"a\r\nb",
            b"#x",
            &[0xff, 0xfe],
            &[b'a'; 300],
        ] {
            let prefix = keys.client(id);
            assert!(prefix.as_str().starts_with("rl:#"), "{id:?}");
            assert_eq!(prefix.as_str().len(), 3 + 1 + 64);
        }
    }

    #[test]
    fn longest_raw_id_still_fits() {
        let keys = KeySpace::new("n".repeat(MAX_NAMESPACE_LEN)).unwrap();
        let max_raw = MAX_KEY_LEN - MAX_NAMESPACE_LEN - 2 - SUFFIX_RESERVE;
        let mut key = KeyBuf::new();
        let suffix = "9".repeat(SUFFIX_RESERVE - 1);
        keys.write_key(&vec![b'x'; max_raw], suffix.as_bytes(), &mut key);
        assert!(is_valid_key(&key), "{} bytes", key.len());
        assert!(keys.client(&vec![b'x'; max_raw + 1]).as_str().contains('#'));
    }

    #[test]
    fn a_key_is_printable_ascii_without_spaces_of_1_to_250_bytes() {
        for byte in 0..=u8::MAX {
            let printable = byte > 0x20 && byte < 0x7f;
            assert_eq!(is_valid_key(&[b'k', byte, b'k']), printable, "{byte:#x}");
        }
        assert!(!is_valid_key(b""));
        assert!(is_valid_key(&[b'k'; MAX_KEY_LEN]));
        assert!(!is_valid_key(&[b'k'; MAX_KEY_LEN + 1]));
    }
}
