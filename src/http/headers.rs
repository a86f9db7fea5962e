//! The HTTP response header fields that tell a client where it stands, as
//! R. Polli, A. Martinez and D. Miller define them in *RateLimit header
//! fields for HTTP*, draft-ietf-httpapi-ratelimit-headers-11 (May 2026),
//! <https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/11/>;
//! `Retry-After` on a denial; and optionally the older
//! `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`.
//! Plain names and values, for any HTTP stack.
//!
//! Every value is a Structured Field (M. Nottingham, P-H. Kamp,
//! *Structured Field Values for HTTP*, RFC 9651,
//! <https://www.rfc-editor.org/rfc/rfc9651>), written by hand, one after
//! the other into one buffer per response, byte for byte as the [`sfv`]
//! crate serializes it (a property test compares the two): a response's
//! fields are written on every request, and `sfv`'s general serializers
//! cost several times more.
//!
//! [`RateLimitFields`] writes them, for one or several [`HeaderPolicy`]s
//! at once; its documentation says what each field carries and which
//! section of the draft each choice follows (sections 3 and 3.1.1 to
//! 3.1.4 for `RateLimit-Policy`, 4 and 4.1.1 to 4.1.3 for `RateLimit`,
//! 6 and Appendix B for `Retry-After`). [`PartitionKeySecret`] says why
//! `pk` is a keyed hash (sections 6.1 and 8.2).

mod field_buf;
mod partition_key;
mod policy;
#[cfg(test)]
mod tests;
mod writer;

use std::ops::Range;
use std::time::Duration;

use smallvec::SmallVec;

pub use self::partition_key::PartitionKeySecret;
pub use self::policy::{HeaderPolicy, QuotaUnit, MAX_POLICY_NAME};
pub(crate) use self::writer::FieldBuf;
use self::writer::{integer, integer_item, ListWriter};
use crate::decision::Decision;

/// One response's policies: each with the key of the client it counted
/// the request under and the decision it took.
///
/// ```
/// use memcache_ratelimit::http::{HeaderPolicy, PolicyDecision};
/// use memcache_ratelimit::Decision;
/// use std::time::Duration;
///
/// let policy = HeaderPolicy::new("per-ip", "100/minute".parse()?)?.per_client(true);
/// let decision = Decision::allowed(100, 99, Duration::from_secs(60));
/// let entry: PolicyDecision<'_> = (&policy, b"ip:192.0.2.1", &decision);
/// # let _ = entry;
/// # Ok::<(), memcache_ratelimit::ConfigError>(())
/// ```
pub type PolicyDecision<'a> = (&'a HeaderPolicy, &'a [u8], &'a Decision);

/// Writes the header fields of a response from the decisions of one or
/// several policies, as R. Polli, A. Martinez and D. Miller define them in
/// *RateLimit header fields for HTTP*, draft-ietf-httpapi-ratelimit-headers-11
/// (May 2026),
/// <https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/11/>
/// ("the draft" below). Values are Structured Fields, written byte for
/// byte as the [`sfv`] crate serializes them.
///
/// The request was denied if any policy denied it. Every policy is one
/// member of `RateLimit-Policy` and one of `RateLimit`, in the order
/// given; give policies distinct names, since the name is what ties the
/// two members together.
///
/// # What each field carries, and the draft's sections behind it
///
/// - **`RateLimit-Policy`** (section 3, *RateLimit-Policy Field*): "a
///   non-empty List of Quota Policy Items. The Item value MUST be a
///   String", one member per policy (section 3.1, *Quota Policy Item*):
///   `"per-user";q=100;w=60`.
///   - `q` (section 3.1.1, *Quota Parameter*): the quota, an Integer.
///   - `qu` (section 3.1.2, *Quota Unit Parameter*): "The value MUST be a
///     String"; section 3.1 makes "requests" the default, so `qu` is
///     written only for another [`QuotaUnit`].
///   - `w` (section 3.1.3, *Window Parameter*): "a non-negative,
///     non-zero, Integer value expressing an interval in seconds …
///     Sub-second precision is not supported." A period that is not a
///     whole number of seconds is rounded **up** (1500 ms is `w=2`): the
///     rate announced is then never above the rate enforced.
///   - `pk` (section 3.1.4, *Partition Key Parameter*): "The value MUST
///     be a Byte Sequence. … Quotas are allocated per partition key."
///     Written for a policy that is [per client](HeaderPolicy::per_client),
///     as a keyed hash of the client's key, never the key itself: see
///     [`PartitionKeySecret`].
/// - **`RateLimit`** (section 4, *RateLimit Field*): a List of Service
///   Limit Items (section 4.1), one per policy, in the same order and
///   under the same String as in `RateLimit-Policy`.
///   - `r` (section 4.1.1, *Available Quota Parameter*): "the available
///     quota under the identified policy", the decision's
///     [`remaining`](Decision::remaining).
///   - `t` (section 4.1.2, *Effective Window Parameter*): "the number of
///     seconds within which the client can use no more than the
///     available quota", "a non-negative Integer compatible with the
///     delay-seconds rule". On an allowed decision it is the time until
///     the client's usage has drained ([`Decision::reset_after`]): a
///     client that spends no more than `r` within it is not denied by
///     this policy. On a denial it is the time until the request would
///     be allowed ([`Decision::retry_after`]); see below.
///   - `pk` (section 4.1.3, *Partition Key Parameter*): the same Byte
///     Sequence as in `RateLimit-Policy`.
/// - **`Retry-After`** (R. Fielding, M. Nottingham, J. Reschke, *HTTP
///   Semantics*, RFC 9110, section 10.2.3,
///   <https://www.rfc-editor.org/rfc/rfc9110#section-10.2.3>), on a
///   denial only. Section 6 (*Server Behavior*) of the draft: "If a
///   response contains both the Retry-After and the RateLimit header
///   fields, the Retry-After field value SHOULD NOT reference a point in
///   time earlier than the end of the effective window." So on a
///   denial, a denying policy's `t` is its own retry delay, and
///   `Retry-After` is the longest of those: it ends no earlier than any
///   denying policy's effective window, and with one policy the two are
///   equal, as in the draft's Appendix B.1.4 (*Use in throttled
///   responses*: `Retry-After` five seconds on, `RateLimit:
///   "default";r=0;t=5`). A policy that did not deny keeps its own `t`
///   and `r`, which are true of it, even where that `t` ends after
///   `Retry-After`: the sentence above, read alone, would have every
///   window end first, but the draft's own Appendix B.3 sends
///   `Retry-After: 20` beside `"dynamic";r=15;t=40`, a window that ends
///   later with quota still available; shortening such a `t` to
///   `Retry-After` would tell the client its daily quota comes back
///   within seconds. Section 7 (*Client Behavior*): "If a response
///   contains both the RateLimit and Retry-After fields, the Retry-After
///   field MUST take precedence".
///
/// `t` and `Retry-After` are whole seconds rounded **up**, so a client
/// that waits them out is never early: for `t`, section 7 asks a client
/// not to "exceed the available quota within the time expressed in the
/// effective window", which a longer window only makes safer; for
/// `Retry-After`, a delay rounded down would send the client back before
/// the limiter lets it in. Every number is capped at 999,999,999,999,999,
/// the largest Structured Fields Integer (RFC 9651, section 3.3.1); the
/// same capped value goes to `t` and `Retry-After`, so they still agree.
///
/// Policy names are Structured Fields Strings (RFC 9651, section 3.3.3):
/// printable ASCII, 0x20 to 0x7E, here 1 to 64 bytes (see
/// [`HeaderPolicy::new`]).
///
/// The legacy `X-RateLimit-*` fields follow no specification and carry
/// one policy: the denying one with the longest retry on a denial,
/// otherwise the one with the least quota left. Their values are the
/// decision's limit, remaining and time until its usage has drained
/// (whole seconds, rounded up), as the layer wrote them before it
/// announced policies as draft -11 does.
///
/// # Example
///
/// One request under three policies, one of which denies it:
///
/// ```
/// use memcache_ratelimit::http::{HeaderPolicy, PartitionKeySecret, QuotaUnit, RateLimitFields};
/// use memcache_ratelimit::Decision;
/// use std::time::Duration;
///
/// let fields = RateLimitFields::new(PartitionKeySecret::new(&[42; 32])?);
/// let burst = HeaderPolicy::new("burst", "10/second".parse()?)?.per_client(true);
/// let daily = HeaderPolicy::new("daily", "1000/day".parse()?)?.per_client(true);
/// let bytes = HeaderPolicy::new("upload bytes", "1000000/hour".parse()?)?
///     .quota_unit(QuotaUnit::ContentBytes);
/// let denied = Decision::denied(10, 0, Duration::from_millis(900), Duration::from_millis(300));
/// let allowed = Decision::allowed(1000, 412, Duration::from_secs(50_000));
/// let plenty = Decision::allowed(1_000_000, 999_000, Duration::from_millis(3_599_500));
/// let written = fields.fields(&[
///     (&burst, b"192.0.2.1", &denied),
///     (&daily, b"192.0.2.1", &allowed),
///     (&bytes, b"", &plenty),
/// ]);
/// let pk = ":iBah2LZo4WVmQQxg:"; // SipHash-2-4-128 of "192.0.2.1" under the secret, 12 bytes
/// assert_eq!(
///     written,
///     [
///         (
///             "RateLimit-Policy",
///             format!(r#""burst";q=10;w=1;pk={pk}, "daily";q=1000;w=86400;pk={pk}, "upload bytes";q=1000000;qu="content-bytes";w=3600"#),
///         ),
///         (
///             "RateLimit",
///             format!(r#""burst";r=0;t=1;pk={pk}, "daily";r=412;t=50000;pk={pk}, "upload bytes";r=999000;t=3600"#),
///         ),
///         ("Retry-After", "1".to_owned()),
///     ]
/// );
/// # Ok::<(), memcache_ratelimit::ConfigError>(())
/// ```
#[derive(Debug, Clone)]
pub struct RateLimitFields {
    pub(super) secret: PartitionKeySecret,
    pub(super) legacy: bool,
}

impl RateLimitFields {
    /// Fields whose `pk` parameters are keyed with `secret`, without the
    /// legacy fields.
    ///
    /// ```
    /// use memcache_ratelimit::http::{PartitionKeySecret, RateLimitFields};
    ///
    /// let fields = RateLimitFields::new(PartitionKeySecret::random());
    /// assert!(fields.fields(&[]).is_empty());
    /// ```
    pub fn new(secret: PartitionKeySecret) -> Self {
        Self {
            secret,
            legacy: false,
        }
    }

    /// Adds `X-RateLimit-Limit`, `X-RateLimit-Remaining` and
    /// `X-RateLimit-Reset` (seconds until the usage has drained, rounded
    /// up) for one policy: the denying one with the longest retry on a
    /// denial, otherwise the one with the least quota left.
    ///
    /// ```
    /// use memcache_ratelimit::http::{HeaderPolicy, PartitionKeySecret, RateLimitFields};
    /// use memcache_ratelimit::Decision;
    /// use std::time::Duration;
    ///
    /// let fields = RateLimitFields::new(PartitionKeySecret::random()).legacy_headers(true);
    /// let policy = HeaderPolicy::new("default", "100/minute".parse()?)?;
    /// let allowed = Decision::allowed(100, 42, Duration::from_millis(12_300));
    /// assert_eq!(
    ///     fields.fields(&[(&policy, b"alice", &allowed)]),
    ///     [
    ///         ("RateLimit-Policy", r#""default";q=100;w=60"#.to_owned()),
    ///         ("RateLimit", r#""default";r=42;t=13"#.to_owned()),
    ///         ("X-RateLimit-Limit", "100".to_owned()),
    ///         ("X-RateLimit-Remaining", "42".to_owned()),
    ///         ("X-RateLimit-Reset", "13".to_owned()),
    ///     ]
    /// );
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    #[must_use]
    pub fn legacy_headers(mut self, legacy: bool) -> Self {
        self.legacy = legacy;
        self
    }

    /// The fields for `policies`, as `(name, value)`: `RateLimit-Policy`
    /// and `RateLimit` with one member per policy; `Retry-After` when any
    /// policy denied the request; the legacy fields if asked for. None at
    /// all for an empty slice: the draft's lists are non-empty.
    ///
    /// See the [type's documentation](Self) for an example.
    pub fn fields(&self, policies: &[PolicyDecision<'_>]) -> Vec<(&'static str, String)> {
        self.fields_announcing(policies, &[])
    }

    /// [`fields`](Self::fields), with `announced` policies that did not
    /// decide the request (those after a denying one, under
    /// [`Policies`](crate::Policies)): each is one more member of
    /// `RateLimit-Policy`, after the deciding ones, and none of
    /// `RateLimit`, which only carries service limits that were read.
    ///
    /// ```
    /// use memcache_ratelimit::http::{HeaderPolicy, PartitionKeySecret, RateLimitFields};
    /// use memcache_ratelimit::Decision;
    /// use std::time::Duration;
    ///
    /// let fields = RateLimitFields::new(PartitionKeySecret::random());
    /// let burst = HeaderPolicy::new("burst", "2/second".parse()?)?;
    /// let daily = HeaderPolicy::new("daily", "1000/day".parse()?)?;
    /// let denied = Decision::denied(2, 0, Duration::from_secs(1), Duration::from_secs(1));
    /// let written = fields.fields_announcing(&[(&burst, b"alice", &denied)], &[(&daily, b"alice")]);
    /// assert_eq!(written[0], ("RateLimit-Policy", r#""burst";q=2;w=1, "daily";q=1000;w=86400"#.to_owned()));
    /// assert_eq!(written[1], ("RateLimit", r#""burst";r=0;t=1"#.to_owned()));
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn fields_announcing(
        &self,
        policies: &[PolicyDecision<'_>],
        announced: &[(&HeaderPolicy, &[u8])],
    ) -> Vec<(&'static str, String)> {
        let mut out = FieldBuf::new();
        self.write_announcing(&mut out, policies, announced)
            .into_iter()
            .map(|(field, value)| {
                let value = String::from_utf8_lossy(&out[value]).into_owned();
                (field.name(), value)
            })
            .collect()
    }

    /// [`fields_announcing`](Self::fields_announcing), with every value
    /// written one after the other at the end of `out` (printable ASCII):
    /// each field's name and where its value is in `out`. One buffer for
    /// a whole response.
    #[cfg_attr(not(feature = "tower"), allow(dead_code))]
    pub(crate) fn write_announcing(
        &self,
        out: &mut FieldBuf,
        policies: &[PolicyDecision<'_>],
        announced: &[(&HeaderPolicy, &[u8])],
    ) -> Written {
        let retry_after = policies
            .iter()
            .filter_map(|(_, _, decision)| denial_delay(decision))
            .max();
        let mut written = Written::new();
        // Where each decided policy's `pk` parameter is in `out`: hashed
        // and written once, and copied into the second field.
        let mut pks: SmallVec<[Option<Range<usize>>; 2]> = SmallVec::new();
        let mut policy_list = ListWriter::new(out);
        for (policy, key, _) in policies {
            pks.push(self.announce(&mut policy_list, policy, key));
        }
        for (policy, key) in announced {
            self.announce(&mut policy_list, policy, key);
        }
        let Some(policy_field) = policy_list.finish() else {
            return written;
        };
        written.push((Field::Policy, policy_field));
        let mut limit_list = ListWriter::new(out);
        for ((policy, _, decision), pk) in policies.iter().zip(&pks) {
            limit_list
                .written(policy.quoted_name())
                .integer(b";r=", decision.remaining())
                .integer(b";t=", effective_window(decision));
            if let Some(pk) = pk {
                limit_list.copied(pk.clone());
            }
        }
        let Some(limit_field) = limit_list.finish() else {
            // Announced policies alone, none that decided: no fields.
            out.truncate(written[0].1.start);
            return Written::new();
        };
        written.push((Field::Limit, limit_field));
        if let Some(retry_after) = retry_after {
            written.push((Field::RetryAfter, integer_item(out, retry_after)));
        }
        if let Some(decision) = self.legacy.then(|| legacy_decision(policies)).flatten() {
            written.push((Field::LegacyLimit, integer_item(out, decision.limit())));
            let remaining = integer_item(out, decision.remaining());
            written.push((Field::LegacyRemaining, remaining));
            let reset = whole_seconds(decision.reset_after());
            written.push((Field::LegacyReset, integer_item(out, reset)));
        }
        written
    }

    /// Writes `policy`'s member of `RateLimit-Policy` for client `key`,
    /// and returns where its `pk` parameter is if it has one.
    fn announce(
        &self,
        list: &mut ListWriter<'_>,
        policy: &HeaderPolicy,
        key: &[u8],
    ) -> Option<Range<usize>> {
        list.written(policy.member());
        policy
            .per_client
            .then(|| list.bytes(b";pk=", &self.secret.partition_key(key)))
    }
}

/// A field [`RateLimitFields`] writes: a layer finds its `HeaderName`
/// by this, with no comparison of names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Field {
    Policy,
    Limit,
    RetryAfter,
    LegacyLimit,
    LegacyRemaining,
    LegacyReset,
}

impl Field {
    /// Every field, in the order a response carries them.
    #[cfg_attr(not(all(test, feature = "tower")), allow(dead_code))]
    pub(crate) const ALL: [Field; 6] = [
        Field::Policy,
        Field::Limit,
        Field::RetryAfter,
        Field::LegacyLimit,
        Field::LegacyRemaining,
        Field::LegacyReset,
    ];

    /// The field's name, as the draft and RFC 9110 spell it.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Field::Policy => "RateLimit-Policy",
            Field::Limit => "RateLimit",
            Field::RetryAfter => "Retry-After",
            Field::LegacyLimit => "X-RateLimit-Limit",
            Field::LegacyRemaining => "X-RateLimit-Remaining",
            Field::LegacyReset => "X-RateLimit-Reset",
        }
    }
}

/// The fields of one response as [`RateLimitFields::write_announcing`]
/// wrote them: each field, and where its value is in the buffer. The
/// values follow one another in the buffer, in this order, with nothing
/// between them.
pub(crate) type Written = SmallVec<[(Field, Range<usize>); 6]>;

fn denial_delay(decision: &Decision) -> Option<u64> {
    match decision.retry_after() {
        Some(retry) if decision.is_denied() => Some(integer(whole_seconds(retry))),
        _ => None,
    }
}

/// The `t` parameter: the retry delay of a denial, otherwise the time
/// until the usage has drained.
fn effective_window(decision: &Decision) -> u64 {
    denial_delay(decision).unwrap_or_else(|| integer(whole_seconds(decision.reset_after())))
}

/// The decision the legacy fields describe: the denial with the longest
/// retry, or, with none, the decision with the least quota left (the
/// first of equals).
fn legacy_decision<'a>(policies: &[PolicyDecision<'a>]) -> Option<&'a Decision> {
    let decisions = || policies.iter().map(|(_, _, decision)| *decision);
    let mut longest_denial: Option<(&Decision, u64)> = None;
    for decision in decisions() {
        if let Some(delay) = denial_delay(decision) {
            if longest_denial.is_none_or(|(_, longest)| delay > longest) {
                longest_denial = Some((decision, delay));
            }
        }
    }
    longest_denial
        .map(|(decision, _)| decision)
        .or_else(|| decisions().min_by_key(|decision| decision.remaining()))
}

/// `duration` in whole seconds, rounded up.
pub(super) fn whole_seconds(duration: Duration) -> u64 {
    duration
        .as_secs()
        .saturating_add(u64::from(duration.subsec_nanos() > 0))
}
