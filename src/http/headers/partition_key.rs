//! The `pk` parameter: a keyed hash of the partition key, so that a client
//! can tell its partitions apart without the server disclosing the raw key.

use sha2::{Digest, Sha256};

use crate::error::ConfigError;

/// How many bytes of the HMAC a `pk` parameter carries.
pub(super) const PK_LEN: usize = 12;

/// SHA-256's block size, the size of HMAC's padded key (RFC 2104, section 2).
const BLOCK: usize = 64;

/// The secret that turns a partition key (the bytes a limiter counts a
/// client under: an IP address, an API key, a tenant) into the `pk`
/// parameter of `RateLimit-Policy` and `RateLimit`.
///
/// `pk` is HMAC-SHA-256 (H. Krawczyk, M. Bellare, R. Canetti, *HMAC:
/// Keyed-Hashing for Message Authentication*, RFC 2104,
/// <https://www.rfc-editor.org/rfc/rfc2104>) of the partition key under
/// this secret, truncated to its first 12 bytes (96 bits; RFC 2104
/// section 5 allows truncation to no less than half the output, and 96
/// bits keep collisions between clients unlikely up to about 2^48 of
/// them).
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
    /// SHA-256 having absorbed the key XOR ipad.
    inner: Sha256,
    /// SHA-256 having absorbed the key XOR opad.
    outer: Sha256,
}

impl PartitionKeySecret {
    /// The shortest secret [`new`](Self::new) accepts, in bytes: SHA-256's
    /// output length, below which RFC 2104 (section 3) calls a key
    /// "strongly discouraged".
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
        Self::from_key(&rand::random::<[u8; 32]>())
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
        Ok(Self::from_key(secret))
    }

    /// The `pk` announced for partition key `key`: the first 12 bytes of
    /// HMAC-SHA-256(secret, `key`).
    ///
    /// ```
    /// use memcache_ratelimit::http::PartitionKeySecret;
    ///
    /// let secret = PartitionKeySecret::new(&[0x0b; 32])?;
    /// assert_eq!(secret.partition_key(b"tenant-7").len(), 12);
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn partition_key(&self, key: &[u8]) -> [u8; PK_LEN] {
        let mac = self.mac(key);
        let mut pk = [0; PK_LEN];
        pk.copy_from_slice(&mac[..PK_LEN]);
        pk
    }

    /// HMAC's keyed states (RFC 2104, section 2), for a key of any length:
    /// one longer than a block is hashed first.
    fn from_key(secret: &[u8]) -> Self {
        let mut block = [0u8; BLOCK];
        if secret.len() > BLOCK {
            block[..32].copy_from_slice(&Sha256::digest(secret));
        } else {
            block[..secret.len()].copy_from_slice(secret);
        }
        Self {
            inner: Sha256::new().chain_update(block.map(|byte| byte ^ 0x36)),
            outer: Sha256::new().chain_update(block.map(|byte| byte ^ 0x5c)),
        }
    }

    /// The full HMAC-SHA-256 of `message`.
    fn mac(&self, message: &[u8]) -> [u8; 32] {
        let inner = self.inner.clone().chain_update(message).finalize();
        self.outer.clone().chain_update(inner).finalize().into()
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

    /// RFC 4231 (M. Nystrom, *Identifiers and Test Vectors for
    /// HMAC-SHA-224, HMAC-SHA-256, HMAC-SHA-384, and HMAC-SHA-512*,
    /// <https://www.rfc-editor.org/rfc/rfc4231>), test cases 1, 2, 3 and 6:
    /// a short key, a key shorter than the output, and one longer than a
    /// block.
    #[test]
    fn hmac_sha256_matches_rfc_4231() {
        let cases: [(&[u8], &[u8], &str); 4] = [
            (
                &[0x0b; 20],
                b"Hi There",
                "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7",
            ),
            (
                b"Jefe",
                b"what do ya want for nothing?",
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            ),
            (
                &[0xaa; 20],
                &[0xdd; 50],
                "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe",
            ),
            (
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First",
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
            ),
        ];
        for (key, message, expected) in cases {
            let secret = PartitionKeySecret::from_key(key);
            assert_eq!(hex(&secret.mac(message)), expected);
            assert_eq!(hex(&secret.partition_key(message)), expected[..24]);
        }
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
