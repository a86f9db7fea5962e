//! An API key as the key, hashed so the secret never reaches the store.

use ::http::request::Parts;
use ::http::{HeaderValue, StatusCode};
use sha2::{Digest, Sha256};

use super::header::Header;
use super::KeyExtractor;
use crate::error::ConfigError;

/// An API key, from `Authorization: Bearer <key>` or a header of its own,
/// counted as `key:` and the first 128 bits of its SHA-256 in hex: the
/// secret itself never reaches memcached, where keys can be listed.
/// A request without one gets 401 Unauthorized.
///
/// ```
/// use memcache_ratelimit::http::{ApiKey, KeyExtractor};
///
/// let (parts, ()) = http::Request::get("/")
///     .header("authorization", "Bearer s3cret")
///     .body(())
///     .unwrap()
///     .into_parts();
/// let key = ApiKey::bearer().extract(&parts).unwrap();
/// assert_eq!(key, b"key:1ec1c26b50d5d3c58d9583181af80766".to_vec());
/// assert_eq!(ApiKey::header("x-api-key")?.extract(&parts), None);
/// # Ok::<(), memcache_ratelimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    header: Option<Header>,
}

impl ApiKey {
    /// The token of an `Authorization: Bearer` field (the scheme is matched
    /// without regard to case).
    pub fn bearer() -> Self {
        Self { header: None }
    }

    /// The whole value of the header field `name`, such as `x-api-key`.
    pub fn header(name: &str) -> Result<Self, ConfigError> {
        Ok(Self {
            header: Some(Header::new(name)?),
        })
    }

    fn secret<'a>(&self, parts: &'a Parts) -> Option<&'a [u8]> {
        let secret = match &self.header {
            Some(header) => parts.headers.get(&header.name)?.as_bytes(),
            None => {
                let value = parts.headers.get(http::header::AUTHORIZATION)?.as_bytes();
                let (scheme, token) = value.split_at_checked(7)?;
                if !scheme.eq_ignore_ascii_case(b"bearer ") {
                    return None;
                }
                token.trim_ascii()
            }
        };
        (!secret.is_empty()).then_some(secret)
    }
}

impl KeyExtractor for ApiKey {
    fn extract(&self, parts: &Parts) -> Option<Vec<u8>> {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let digest = Sha256::digest(self.secret(parts)?);
        let mut key = Vec::with_capacity(4 + 32);
        key.extend_from_slice(b"key:");
        for byte in &digest[..16] {
            key.extend([HEX[usize::from(byte >> 4)], HEX[usize::from(byte & 15)]]);
        }
        Some(key)
    }

    fn missing(&self) -> StatusCode {
        StatusCode::UNAUTHORIZED
    }

    /// `Bearer` for the `Authorization` field (M. Jones and D. Hardt, *The
    /// OAuth 2.0 Authorization Framework: Bearer Token Usage*, RFC 6750,
    /// section 3, <https://www.rfc-editor.org/rfc/rfc6750#section-3>);
    /// for a header of its own, the `ApiKey` scheme naming that header,
    /// such as `ApiKey header="x-api-key"`.
    fn challenge(&self) -> Option<HeaderValue> {
        match &self.header {
            None => Some(HeaderValue::from_static("Bearer")),
            Some(header) => {
                HeaderValue::try_from(format!("ApiKey header=\"{}\"", header.name.as_str())).ok()
            }
        }
    }
}
