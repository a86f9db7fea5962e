//! What can go wrong. A denial is not an error: it is a [`Decision`]
//! whose `allowed` is false. Errors are for requests that can never succeed,
//! for the store failing, and for configurations that make no sense.
//!
//! [`Decision`]: crate::Decision

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A limiter could not reach a decision.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The store failed. [`StoreError::is_ambiguous`] tells whether a write
    /// may have landed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The decision did not complete within the limiter's deadline. Any
    /// write already sent may or may not have landed; it is never retried.
    #[error("no decision within the {0:?} deadline")]
    DeadlineExceeded(Duration),
    /// The request costs more than the limit allows in a whole period, so
    /// it could never be allowed, however long the client waited.
    #[error("a cost of {cost} exceeds the limit of {limit}: this request can never be allowed")]
    CostExceedsLimit {
        /// The cost asked for.
        cost: u64,
        /// The limit per period.
        limit: u64,
    },
    /// A compare-and-swap algorithm lost the race for its key on every one
    /// of its attempts. Nothing was admitted; the caller may retry.
    #[error("gave up after {attempts} conflicting compare-and-swap attempts")]
    Contention {
        /// How many attempts were made.
        attempts: u32,
    },
    /// A cost of zero was asked for; every request costs at least 1.
    #[error("a request must cost at least 1")]
    ZeroCost,
    /// The clock reads a time that the window arithmetic cannot represent
    /// (before 1677 or after 2262).
    #[error(
        "the clock reads {0}, outside the range the window arithmetic supports (1677 to 2262)"
    )]
    ClockOutOfRange(chrono::DateTime<chrono::Utc>),
    /// A quota picked at request time
    /// ([`DynamicLimiter`](crate::DynamicLimiter)) could not be built into
    /// a limiter.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// What kind of store failure happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreErrorKind {
    /// The connection failed or could not be made.
    Io,
    /// The store did not answer in time.
    Timeout,
    /// The store answered something that does not parse.
    Protocol,
    /// The store reported an error of its own (`SERVER_ERROR`).
    Server,
    /// The store rejected the command (`CLIENT_ERROR`), for example an
    /// increment of a value that is not a number.
    Rejected,
    /// A counter holds something that is not a number.
    NotACounter,
    /// The key is not a valid memcached key (1 to 250 bytes, no whitespace
    /// or control bytes). Keys built by the limiters are always valid.
    InvalidKey,
    /// The store was configured wrongly or could not be set up.
    Config,
}

/// A store operation failed.
///
/// `ambiguous` is true when the request was written but its outcome is
/// unknown: the write may have landed. Limiters never retry such a write
/// blindly, so nothing is counted twice. The error names the server it
/// came from, when there is one ([`server`](Self::server)), and keeps the
/// error it was caused by ([`source`](std::error::Error::source)), such as
/// the I/O error of a refused connection.
#[derive(Debug, Clone)]
pub struct StoreError {
    kind: StoreErrorKind,
    ambiguous: bool,
    message: String,
    server: Option<Arc<str>>,
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl StoreError {
    /// A store error of `kind`.
    ///
    /// ```
    /// use memcache_ratelimit::StoreError;
    /// use memcache_ratelimit::store::StoreErrorKind;
    ///
    /// let error = StoreError::new(StoreErrorKind::Io, "connection refused");
    /// assert_eq!(error.kind(), StoreErrorKind::Io);
    /// assert!(!error.is_ambiguous());
    /// assert_eq!(error.server(), None);
    /// ```
    pub fn new(kind: StoreErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            ambiguous: false,
            message: message.into(),
            server: None,
            source: None,
        }
    }

    /// Marks the error as ambiguous: the request was written, and its
    /// effect may have happened.
    #[must_use]
    pub fn ambiguous(mut self) -> Self {
        self.ambiguous = true;
        self
    }

    /// Names the server the error came from (`host:port`), unless one is
    /// named already.
    ///
    /// ```
    /// use memcache_ratelimit::StoreError;
    /// use memcache_ratelimit::store::StoreErrorKind;
    ///
    /// let error = StoreError::new(StoreErrorKind::Timeout, "no answer").at("10.0.0.1:11211");
    /// assert_eq!(error.server(), Some("10.0.0.1:11211"));
    /// assert_eq!(error.to_string(), "Timeout store error from 10.0.0.1:11211: no answer");
    /// ```
    #[must_use]
    pub fn at(mut self, server: &str) -> Self {
        if self.server.is_none() {
            self.server = Some(server.into());
        }
        self
    }

    /// Keeps `cause` as the error's [`source`](std::error::Error::source).
    ///
    /// ```
    /// use memcache_ratelimit::StoreError;
    /// use memcache_ratelimit::store::StoreErrorKind;
    /// use std::error::Error as _;
    ///
    /// let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    /// let error = StoreError::new(StoreErrorKind::Io, "connecting").caused_by(refused);
    /// let source = error.source().unwrap().downcast_ref::<std::io::Error>().unwrap();
    /// assert_eq!(source.kind(), std::io::ErrorKind::ConnectionRefused);
    /// ```
    #[must_use]
    pub fn caused_by(mut self, cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Arc::new(cause));
        self
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> StoreErrorKind {
        self.kind
    }

    /// Whether the request may have been applied although it failed.
    pub fn is_ambiguous(&self) -> bool {
        self.ambiguous
    }

    /// The failure's description, without the server.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The server (`host:port`) the error came from, if it came from one.
    pub fn server(&self) -> Option<&str> {
        self.server.as_deref()
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} store error", self.kind)?;
        if self.ambiguous {
            f.write_str(" (outcome unknown)")?;
        }
        if let Some(server) = &self.server {
            write!(f, " from {server}")?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn std::error::Error + 'static))
    }
}

/// A quota, limiter or store configuration was rejected when it was built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {field}: {reason}")]
pub struct ConfigError {
    field: std::borrow::Cow<'static, str>,
    reason: String,
}

impl ConfigError {
    pub(crate) fn new(
        field: impl Into<std::borrow::Cow<'static, str>>,
        reason: impl Into<String>,
    ) -> Self {
        Self {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// The name of the setting that was rejected, such as `"period"`, or
    /// in a configuration file its path, such as `"plans.pro"` or
    /// `"quota (from MEMCACHE_RATELIMIT_QUOTA)"`.
    pub fn field(&self) -> &str {
        &self.field
    }

    /// Why it was rejected.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}
