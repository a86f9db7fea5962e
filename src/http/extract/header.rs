//! A request header field's value as the key.

use std::borrow::Cow;

use ::http::request::Parts;
use ::http::HeaderName;

use super::KeyExtractor;
use crate::error::ConfigError;

/// The value of a request header field, as it is (the key layout hashes
/// values that are not plain printable text).
///
/// ```
/// use memcache_ratelimit::http::{Header, KeyExtractor};
///
/// let user = Header::new("x-user-id")?;
/// let (parts, ()) = http::Request::get("/").header("x-user-id", "42").body(()).unwrap().into_parts();
/// assert_eq!(user.extract(&parts), Some(b"42".to_vec()));
/// assert!(Header::new("not a header").is_err());
/// # Ok::<(), memcache_ratelimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub(super) name: HeaderName,
}

impl Header {
    /// The field `name`; a name that is not a valid header field name is
    /// rejected.
    pub fn new(name: &str) -> Result<Self, ConfigError> {
        let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
            ConfigError::new("header", format!("{name:?} is not a header field name"))
        })?;
        Ok(Self { name })
    }
}

impl KeyExtractor for Header {
    fn extract(&self, parts: &Parts) -> Option<Vec<u8>> {
        self.extract_borrowed(parts).map(Cow::into_owned)
    }

    fn extract_borrowed<'a>(&self, parts: &'a Parts) -> Option<Cow<'a, [u8]>> {
        let value = parts.headers.get(&self.name)?.as_bytes();
        (!value.is_empty()).then_some(Cow::Borrowed(value))
    }
}
