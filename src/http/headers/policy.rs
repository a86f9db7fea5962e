//! A policy as the fields announce it: its name, quota, unit, and whether
//! it is per client.

use super::whole_seconds;
use super::writer::{FieldBuf, ListWriter};
use crate::error::ConfigError;
use crate::quota::Quota;

/// The longest policy name, in bytes. The name is sent twice on every
/// response (in `RateLimit-Policy` and `RateLimit`) for each policy, so a
/// short bound keeps the fields small; 64 bytes is room for names such as
/// `"per-tenant/api-v2:uploads"` many times over.
///
/// ```
/// use memcache_ratelimit::http::{HeaderPolicy, MAX_POLICY_NAME};
///
/// let quota = "1/second".parse()?;
/// assert!(HeaderPolicy::new(&"a".repeat(MAX_POLICY_NAME), quota).is_ok());
/// assert!(HeaderPolicy::new(&"a".repeat(MAX_POLICY_NAME + 1), quota).is_err());
/// # Ok::<(), memcache_ratelimit::ConfigError>(())
/// ```
pub const MAX_POLICY_NAME: usize = 64;

#[cfg(feature = "tower")]
const DEFAULT_NAME: &sfv::StringRef = sfv::StringRef::constant("default");

/// What a policy's quota counts: the `qu` parameter of
/// draft-ietf-httpapi-ratelimit-headers-11, section 3.1.2 (*Quota Unit
/// Parameter*), which defines these three.
///
/// ```
/// use memcache_ratelimit::http::{HeaderPolicy, QuotaUnit};
///
/// let uploads = HeaderPolicy::new("uploads", "10000000/hour".parse()?)?
///     .quota_unit(QuotaUnit::ContentBytes);
/// assert_eq!(uploads.unit(), QuotaUnit::ContentBytes);
/// assert_eq!(QuotaUnit::ContentBytes.as_str(), "content-bytes");
/// # Ok::<(), memcache_ratelimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QuotaUnit {
    /// Requests, the draft's default: no `qu` parameter is written.
    #[default]
    Requests,
    /// Content bytes processed (`qu="content-bytes"`): for a layer whose
    /// cost is a request's size.
    ContentBytes,
    /// Concurrent requests (`qu="concurrent-requests"`).
    ConcurrentRequests,
}

impl QuotaUnit {
    /// The unit's name in the draft's registry (section 10.3).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Requests => "requests",
            Self::ContentBytes => "content-bytes",
            Self::ConcurrentRequests => "concurrent-requests",
        }
    }

    /// The `qu` value to write, if any.
    pub(super) fn parameter(self) -> Option<&'static str> {
        match self {
            Self::Requests => None,
            unit => Some(unit.as_str()),
        }
    }
}

/// A named quota policy, as `RateLimit-Policy` and `RateLimit` announce
/// it: its name (a Structured Fields String), its quota, its quota unit,
/// and whether it is per client (then its fields carry a `pk`).
///
/// [`RateLimitFields::fields`](super::RateLimitFields::fields) writes the
/// fields for one or several of them.
///
/// ```
/// use memcache_ratelimit::http::{HeaderPolicy, QuotaUnit};
///
/// let policy = HeaderPolicy::new("per user, v2", "100/minute".parse()?)?.per_client(true);
/// assert_eq!(policy.name(), "per user, v2");
/// assert_eq!(policy.quota().limit(), 100);
/// assert!(policy.is_per_client());
/// assert_eq!(policy.unit(), QuotaUnit::Requests);
/// // Not printable ASCII: refused, never a panic.
/// assert!(HeaderPolicy::new("caf\u{e9}", "1/second".parse()?).is_err());
/// assert!(HeaderPolicy::new("tab\there", "1/second".parse()?).is_err());
/// # Ok::<(), memcache_ratelimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderPolicy {
    pub(super) name: sfv::String,
    pub(super) quota: Quota,
    pub(super) unit: QuotaUnit,
    pub(super) per_client: bool,
    /// Its member of `RateLimit-Policy` without `pk`
    /// (`"name";q=…;qu=…;w=…`), written when the policy is built and
    /// copied into every response; its quoted name is the first
    /// `quoted_name` bytes.
    member: Box<[u8]>,
    quoted_name: usize,
}

impl HeaderPolicy {
    /// A policy called `name` for `quota`, counted in requests, not per
    /// client. The name must be a Structured Fields String of 1 to
    /// [`MAX_POLICY_NAME`] bytes: printable ASCII, 0x20 (space) to 0x7E
    /// (`~`), quotes and backslashes included (they are escaped on the
    /// wire); anything else is a [`ConfigError`] for the field
    /// `header_policy`.
    ///
    /// ```
    /// use memcache_ratelimit::http::HeaderPolicy;
    ///
    /// let quota = "1/second".parse()?;
    /// assert!(HeaderPolicy::new(r#"say "hi" \o/"#, quota).is_ok());
    /// assert!(HeaderPolicy::new("", quota).is_err());
    /// assert!(HeaderPolicy::new(&"x".repeat(65), quota).is_err());
    /// assert_eq!(HeaderPolicy::new("new\nline", quota).unwrap_err().field(), "header_policy");
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn new(name: &str, quota: Quota) -> Result<Self, ConfigError> {
        Ok(Self::written(
            Self::checked(name)?,
            quota,
            QuotaUnit::Requests,
            false,
        ))
    }

    /// `name` as a Structured Fields String, if it is one of 1 to
    /// [`MAX_POLICY_NAME`] bytes.
    fn checked(name: &str) -> Result<sfv::String, ConfigError> {
        let refused = |what: String| {
            ConfigError::new(
                "header_policy",
                format!(
                    "{what} is not a Structured Fields String of 1 to {MAX_POLICY_NAME} printable ASCII characters (0x20 to 0x7E)"
                ),
            )
        };
        if name.len() > MAX_POLICY_NAME {
            return Err(refused(format!("a name of {} bytes", name.len())));
        }
        if name.is_empty() {
            return Err(refused("an empty name".to_owned()));
        }
        sfv::String::from_string(name.to_owned()).map_err(|(_, name)| refused(format!("{name:?}")))
    }

    /// The policy `"default"`, per client, as a layer announces it
    /// before it is given a name.
    #[cfg(feature = "tower")]
    pub(crate) fn default_for(quota: Quota) -> Self {
        Self::written(DEFAULT_NAME.to_owned(), quota, QuotaUnit::Requests, true)
    }

    /// This policy under another name, checked as [`new`](Self::new) does.
    #[cfg(feature = "tower")]
    pub(crate) fn renamed(&self, name: &str) -> Result<Self, ConfigError> {
        Ok(Self::written(
            Self::checked(name)?,
            self.quota,
            self.unit,
            self.per_client,
        ))
    }

    /// This policy for another quota: a dynamic limiter's per-client one.
    #[cfg(feature = "tower")]
    pub(crate) fn with_quota(&self, quota: Quota) -> Self {
        Self::written(self.name.clone(), quota, self.unit, self.per_client)
    }

    /// The policy, with its member of `RateLimit-Policy` written.
    fn written(name: sfv::String, quota: Quota, unit: QuotaUnit, per_client: bool) -> Self {
        let mut out = FieldBuf::new();
        let mut list = ListWriter::new(&mut out);
        list.member(name.as_str());
        let quoted_name = list.len();
        list.integer(b";q=", quota.limit());
        if let Some(unit) = unit.parameter() {
            list.string(b";qu=", unit);
        }
        list.integer(b";w=", whole_seconds(quota.period()));
        Self {
            name,
            quota,
            unit,
            per_client,
            member: out[..].into(),
            quoted_name,
        }
    }

    /// Its member of `RateLimit-Policy` without `pk`.
    pub(super) fn member(&self) -> &[u8] {
        &self.member
    }

    /// Its name as a Structured Fields String, quoted and escaped.
    pub(super) fn quoted_name(&self) -> &[u8] {
        &self.member[..self.quoted_name]
    }

    /// Counts the quota in `unit` (default: requests).
    #[must_use]
    pub fn quota_unit(self, unit: QuotaUnit) -> Self {
        Self::written(self.name, self.quota, unit, self.per_client)
    }

    /// Whether each client has a quota of its own (default: false). A
    /// per-client policy's items carry `pk`, derived from the client's
    /// key by
    /// [`PartitionKeySecret::partition_key`](super::PartitionKeySecret::partition_key).
    #[must_use]
    pub fn per_client(mut self, per_client: bool) -> Self {
        self.per_client = per_client;
        self
    }

    /// The policy's name.
    pub fn name(&self) -> &str {
        self.name.as_str()
    }

    /// The quota announced as `q` and `w`.
    pub fn quota(&self) -> Quota {
        self.quota
    }

    /// The unit the quota counts.
    pub fn unit(&self) -> QuotaUnit {
        self.unit
    }

    /// Whether the policy is per client.
    pub fn is_per_client(&self) -> bool {
        self.per_client
    }
}
