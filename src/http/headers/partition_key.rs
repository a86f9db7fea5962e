//! The `pk` parameter: a keyed hash of the partition key, so that a client
//! can tell its partitions apart without the server disclosing the raw key.

use sha2::{Digest, Sha256};
use siphasher::sip128::SipHasher24;

use crate::error::ConfigError;

/// How many bytes of the keyed hash a `pk` parameter carries.
pub(super) const PK_LEN: usize = 12;

/// The secret that turns a partition key (the bytes a limiter counts a
/// client under: an IP address, an API key, a tenant) into the `pk`
/// parameter of `RateLimit-Policy` and `RateLimit`.
///
/// `pk` is SipHash-2-4 with a 128-bit output (J-P. Aumasson and D. J.
/// Bernstein, *SipHash: a fast short-input PRF*, INDOCRYPT 2012,
/// <https://www.aumasson.jp/siphash/siphash.pdf>; the 128-bit variant and
/// its test vectors are in the authors' reference implementation,
/// <https://github.com/veorq/SipHash>) of the partition key, keyed with
/// the first 128 bits of SHA-256 of this secret, truncated to its first 12
/// bytes (96 bits, which keep collisions between clients unlikely up to
/// about 2^48 of them). SipHash is a pseudorandom function built for
/// short inputs under a secret key, which is what a `pk` is: on a key of
/// a few dozen bytes it costs one pass of a few hundred instructions,
/// where HMAC-SHA-256 costs two SHA-256 compressions, some 7,000
/// instructions without the CPU's SHA extensions, on every response.
///
/// Why keyed: draft-ietf-httpapi-ratelimit-headers-11, section 6.1
/// (Generating Partition Keys), says "Servers should avoid returning
/// partition keys that contain sensitive information", and section 8.2
/// (Information disclosure) warns of impersonation where partition keys
/// identify clients. A client's IP address is such information, and an
/// unkeyed hash of it is no protection: there are only 2^32 IPv4
/// addresses, so anyone can hash them all and look the answer up. Under a
/// secret key, the `pk` is the same on every response to one client (so a
/// client can still tell its partitions apart, section 7.1), and nothing
/// without the secret can map it back to the key. The price is the one
/// section 6.1 names: a client cannot compute its own `pk` in advance; it
/// learns it from a response.
///
/// [`random`](Self::random) is the default of every `RateLimitLayer`
/// (the `tower` feature): private to that layer and its clones, and new
/// on every restart. Instances that serve one
/// client behind a load balancer should share one secret, given with
/// [`new`](Self::new), so that they announce the same `pk` for it.
///
/// ```
/// use memcache_ratelimit::http::PartitionKeySecret;
///
/// let fleet = PartitionKeySecret::new(b"32 bytes or more, shared by all instances")?;
/// let again = PartitionKeySecret::new(b"32 bytes or more, shared by all instances")?;
/// assert_eq!(fleet.partition_key(b"192.0.2.1"), again.partition_key(b"192.0.2.1"));
/// assert_ne!(fleet.partition_key(b"192.0.2.1"), fleet.partition_key(b"192.0.2.2"));
/// // Another secret, another pk for the same client.
/// assert_ne!(PartitionKeySecret::random().partition_key(b"192.0.2.1"), fleet.partition_key(b"192.0.2.1"));
/// assert!(PartitionKeySecret::new(b"too short").is_err());
/// # Ok::<(), memcache_ratelimit::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct PartitionKeySecret {
    /// SipHash keyed with the secret's key.
    hasher: SipHasher24,
}

impl PartitionKeySecret {
    /// The shortest secret [`new`](Self::new) accepts, in bytes: twice
    /// SipHash's 128-bit key, so that a secret chosen by hand still
    /// carries that much.
    pub const MIN_LEN: usize = 32;

    /// A secret of 32 random bytes from the thread's cryptographically
    /// secure generator (`rand::rng()`).
    ///
    /// ```
    /// use memcache_ratelimit::http::PartitionKeySecret;
    ///
    /// let secret = PartitionKeySecret::random();
    /// assert_eq!(secret.partition_key(b"alice"), secret.partition_key(b"alice"));
    /// ```
    pub fn random() -> Self {
        Self::from_secret(&rand::random::<[u8; 32]>())
    }

    /// The secret `secret`, at least [`MIN_LEN`](Self::MIN_LEN) bytes:
    /// random bytes, or a long passphrase, that every instance of a
    /// service shares.
    ///
    /// ```
    /// use memcache_ratelimit::http::PartitionKeySecret;
    ///
    /// assert!(PartitionKeySecret::new(&[7; 32]).is_ok());
    /// assert_eq!(PartitionKeySecret::new(&[7; 31]).unwrap_err().field(), "partition_key_secret");
    /// ```
    pub fn new(secret: &[u8]) -> Result<Self, ConfigError> {
        if secret.len() < Self::MIN_LEN {
            return Err(ConfigError::new(
                "partition_key_secret",
                format!(
                    "a partition key secret needs at least {} bytes, not {}",
                    Self::MIN_LEN,
                    secret.len()
                ),
            ));
        }
        Ok(Self::from_secret(secret))
    }

    /// The `pk` announced for partition key `key`: the first 12 bytes of
    /// SipHash-2-4-128 of `key` under the secret's key.
    ///
    /// ```
    /// use memcache_ratelimit::http::PartitionKeySecret;
    ///
    /// let secret = PartitionKeySecret::new(&[0x0b; 32])?;
    /// assert_eq!(secret.partition_key(b"tenant-7").len(), 12);
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn partition_key(&self, key: &[u8]) -> [u8; PK_LEN] {
        let tag = self.hasher.hash(key).as_bytes();
        let mut pk = [0; PK_LEN];
        pk.copy_from_slice(&tag[..PK_LEN]);
        pk
    }

    /// The SipHash key of `secret`: the first 128 bits of its SHA-256,
    /// so that every byte of a secret of any length counts.
    fn from_secret(secret: &[u8]) -> Self {
        let digest = Sha256::digest(secret);
        let mut key = [0; 16];
        key.copy_from_slice(&digest[..16]);
        Self::from_key(&key)
    }

    /// SipHash keyed with `key` itself.
    fn from_key(key: &[u8; 16]) -> Self {
        Self {
            hasher: SipHasher24::new_with_key(key),
        }
    }
}

impl std::fmt::Debug for PartitionKeySecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PartitionKeySecret(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|byte| format!("{byte:02x}")).collect()
    }

    /// The first vectors of `vectors_sip128` in the reference
    /// implementation's vectors.h (J-P. Aumasson, *SipHash*,
    /// <https://github.com/veorq/SipHash/blob/master/vectors.h>): key
    /// 00 01 ... 0f, message of `i` bytes 00 01 ... `i - 1`.
    #[test]
    fn siphash_2_4_128_matches_the_reference_vectors() {
        let key: [u8; 16] = std::array::from_fn(|i| i as u8);
        let message: Vec<u8> = (0..16).collect();
        let cases = [
            (0, "a3817f04ba25a8e66df67214c7550293"),
            (1, "da87c1d86b99af44347659119b22fc45"),
            (2, "8177228da4a45dc7fca38bdef60affe4"),
        ];
        let secret = PartitionKeySecret::from_key(&key);
        for (length, expected) in cases {
            let tag = secret.hasher.hash(&message[..length]).as_bytes();
            assert_eq!(hex(&tag), expected, "{length} bytes");
            assert_eq!(
                hex(&secret.partition_key(&message[..length])),
                expected[..24]
            );
        }
    }

    #[test]
    fn every_byte_of_a_long_secret_counts() {
        let mut long = [7u8; 100];
        let before = PartitionKeySecret::new(&long).unwrap();
        long[99] = 8;
        let after = PartitionKeySecret::new(&long).unwrap();
        assert_ne!(before.partition_key(b"k"), after.partition_key(b"k"));
    }

    #[test]
    fn short_secrets_are_refused_and_never_printed() {
        assert!(PartitionKeySecret::new(&[1; 31]).is_err());
        let secret = PartitionKeySecret::new(b"correct horse battery staple, twice").unwrap();
        assert_eq!(format!("{secret:?}"), "PartitionKeySecret(..)");
        assert_ne!(
            PartitionKeySecret::random().partition_key(b"k"),
            PartitionKeySecret::random().partition_key(b"k")
        );
    }
}
