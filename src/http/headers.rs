//! The HTTP response header fields that tell a client where it stands:
//! the IETF `RateLimit-Policy` and `RateLimit` fields
//! (draft-ietf-httpapi-ratelimit-headers), `Retry-After` on a denial, and
//! optionally the older `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
//! `X-RateLimit-Reset`. Plain names and values, for any HTTP stack.

use crate::decision::Decision;
use crate::error::ConfigError;
use crate::quota::Quota;

/// A named quota policy, as the header fields announce it.
///
/// ```
/// use memcache_ratelimit::Decision;
/// use memcache_ratelimit::http::HeaderPolicy;
/// use std::time::Duration;
///
/// let policy = HeaderPolicy::new("default", "100/minute".parse()?)?;
/// let allowed = Decision::allowed(100, 42, Duration::from_millis(12_300));
/// assert_eq!(
///     policy.fields(&allowed, false),
///     [
///         ("RateLimit-Policy", "default;q=100;w=60".to_owned()),
///         ("RateLimit", "default;r=42;t=13".to_owned()),
///     ]
/// );
/// let denied = Decision::denied(100, 0, Duration::from_secs(30), Duration::from_millis(1_500));
/// let fields = policy.fields(&denied, true);
/// assert!(fields.contains(&("Retry-After", "2".to_owned())));
/// assert!(fields.contains(&("X-RateLimit-Remaining", "0".to_owned())));
/// assert!(HeaderPolicy::new("has space", "1/second".parse()?).is_err());
/// # Ok::<(), memcache_ratelimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderPolicy {
    name: String,
    policy: String,
}

impl HeaderPolicy {
    /// A policy called `name` for `quota`. The name must be a Structured
    /// Fields token: a letter or `*`, then letters, digits and
    /// ``!#$%&'*+-.^_`|~:/``, at most 64 bytes.
    pub fn new(name: &str, quota: Quota) -> Result<Self, ConfigError> {
        let mut bytes = name.bytes();
        let first = bytes.next();
        let token = first.is_some_and(|b| b.is_ascii_alphabetic() || b == b'*')
            && bytes.all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~:/".contains(&b))
            && name.len() <= 64;
        if !token {
            return Err(ConfigError::new(
                "header_policy",
                format!("{name:?} is not a Structured Fields token of at most 64 bytes"),
            ));
        }
        let window = quota.period().as_secs_f64().ceil() as u64;
        Ok(Self {
            name: name.to_owned(),
            policy: format!("{name};q={};w={window}", quota.limit()),
        })
    }

    /// The header fields for `decision`, as `(name, value)`: always
    /// `RateLimit-Policy` and `RateLimit`; `Retry-After` when it was
    /// denied; the `X-RateLimit-*` fields too when `legacy`. Seconds are
    /// rounded up, so a client that waits them out is never early.
    pub fn fields(&self, decision: &Decision, legacy: bool) -> Vec<(&'static str, String)> {
        let reset = whole_seconds(decision.reset_after());
        let mut fields = vec![
            ("RateLimit-Policy", self.policy.clone()),
            (
                "RateLimit",
                format!("{};r={};t={reset}", self.name, decision.remaining()),
            ),
        ];
        if let Some(retry) = decision.retry_after() {
            fields.push(("Retry-After", whole_seconds(retry).to_string()));
        }
        if legacy {
            fields.push(("X-RateLimit-Limit", decision.limit().to_string()));
            fields.push(("X-RateLimit-Remaining", decision.remaining().to_string()));
            fields.push(("X-RateLimit-Reset", reset.to_string()));
        }
        fields
    }
}

/// `duration` in whole seconds, rounded up.
fn whole_seconds(duration: std::time::Duration) -> u64 {
    duration.as_secs() + u64::from(duration.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn names_are_tokens_and_seconds_round_up() {
        let quota: Quota = "10/1500ms".parse().unwrap();
        for bad in ["", "1abc", "a b", "a\"b", "a,b", &"x".repeat(65)] {
            assert_eq!(
                HeaderPolicy::new(bad, quota).unwrap_err().field(),
                "header_policy",
                "{bad:?}"
            );
        }
        let policy = HeaderPolicy::new("per-user/api:v1", quota).unwrap();
        let decision = Decision::denied(10, 0, Duration::from_millis(1), Duration::ZERO);
        assert_eq!(
            policy.fields(&decision, false),
            [
                ("RateLimit-Policy", "per-user/api:v1;q=10;w=2".to_owned()),
                ("RateLimit", "per-user/api:v1;r=0;t=1".to_owned()),
                ("Retry-After", "0".to_owned()),
            ]
        );
    }
}
