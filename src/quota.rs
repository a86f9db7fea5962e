//! The rate definition: a number of requests per period.

use std::fmt;
use std::num::NonZeroU64;
use std::str::FromStr;
use std::time::Duration;

use crate::error::ConfigError;

/// The shortest period a quota may have.
pub const MIN_PERIOD: Duration = Duration::from_millis(1);
/// The longest period a quota may have.
pub const MAX_PERIOD: Duration = Duration::from_secs(366 * 24 * 3600);

/// The largest limit a limiter accepts: 2^56 (about 7.2 × 10^16).
///
/// Memcached's counters are unsigned 64-bit and wrap at 2^64. A window
/// counter holds at most the limit plus the costs of the requests still in
/// flight (each at most the limit), or, when denied requests are counted,
/// whatever a flood of them adds. Keeping limits (and so costs) at or below
/// 2^56 leaves room for 256 requests of the largest cost above a full
/// window before a counter could wrap; a wrap beyond that is detected and
/// read as a full window. The builders refuse a larger limit with a
/// [`ConfigError`] that names this bound.
pub const MAX_LIMIT: u64 = 1 << 56;

/// A limit of `limit` requests (or cost units) per `period`.
///
/// The limit cannot be zero and the period is a whole number of
/// milliseconds between [`MIN_PERIOD`] and [`MAX_PERIOD`], so a `Quota`
/// that exists is always usable. The common periods have `const`
/// constructors; anything else goes through [`Quota::with_period`] or is
/// parsed from text such as `"100/minute"` or `"20/15s"`.
///
/// ```
/// use memcache_ratelimit::Quota;
/// use std::num::NonZeroU64;
/// use std::time::Duration;
///
/// const API: Quota = Quota::per_minute(NonZeroU64::new(100).unwrap());
/// assert_eq!(API.limit(), 100);
/// assert_eq!(API.period(), Duration::from_secs(60));
///
/// let parsed: Quota = "100/minute".parse()?;
/// assert_eq!(parsed, API);
/// assert_eq!("100 per minute".parse::<Quota>()?, API);
/// assert_eq!("20/15s".parse::<Quota>()?.period(), Duration::from_secs(15));
/// assert!("0/minute".parse::<Quota>().is_err());
/// # Ok::<(), memcache_ratelimit::ConfigError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quota {
    limit: NonZeroU64,
    period: Duration,
}

impl Quota {
    /// `limit` per second.
    pub const fn per_second(limit: NonZeroU64) -> Self {
        Self {
            limit,
            period: Duration::from_secs(1),
        }
    }

    /// `limit` per minute.
    pub const fn per_minute(limit: NonZeroU64) -> Self {
        Self {
            limit,
            period: Duration::from_secs(60),
        }
    }

    /// `limit` per hour.
    pub const fn per_hour(limit: NonZeroU64) -> Self {
        Self {
            limit,
            period: Duration::from_secs(3600),
        }
    }

    /// `limit` per day (86,400 seconds).
    pub const fn per_day(limit: NonZeroU64) -> Self {
        Self {
            limit,
            period: Duration::from_secs(86_400),
        }
    }

    /// `limit` per `period`, where the period is a whole number of
    /// milliseconds between [`MIN_PERIOD`] and [`MAX_PERIOD`].
    ///
    /// ```
    /// use memcache_ratelimit::Quota;
    /// use std::num::NonZeroU64;
    /// use std::time::Duration;
    ///
    /// let ten = NonZeroU64::new(10).unwrap();
    /// assert!(Quota::with_period(ten, Duration::from_millis(250)).is_ok());
    /// assert!(Quota::with_period(ten, Duration::from_micros(1500)).is_err());
    /// assert!(Quota::with_period(ten, Duration::ZERO).is_err());
    /// ```
    pub fn with_period(limit: NonZeroU64, period: Duration) -> Result<Self, ConfigError> {
        if period < MIN_PERIOD || period > MAX_PERIOD {
            return Err(ConfigError::new(
                "period",
                format!("{period:?} is outside {MIN_PERIOD:?}..={MAX_PERIOD:?}"),
            ));
        }
        if !period.subsec_nanos().is_multiple_of(1_000_000) {
            return Err(ConfigError::new(
                "period",
                format!("{period:?} is not a whole number of milliseconds"),
            ));
        }
        Ok(Self { limit, period })
    }

    /// The number of requests (or cost units) allowed per period.
    pub const fn limit(&self) -> u64 {
        self.limit.get()
    }

    /// The period the limit applies to.
    pub const fn period(&self) -> Duration {
        self.period
    }

    /// The same period with another limit.
    pub(crate) const fn with_limit(self, limit: NonZeroU64) -> Self {
        Self { limit, ..self }
    }
}

impl fmt::Display for Quota {
    /// Formats as `<limit>/<period>`, for example `100/1m`, which
    /// [`FromStr`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.limit, compact_duration(self.period))
    }
}

impl FromStr for Quota {
    type Err = ConfigError;

    /// Reads `<limit>/<period>` or `<limit> per <period>`. The period is a
    /// unit (`second`, `minute`, `hour`, `day`, or `s`, `m`, `h`, `d`,
    /// `ms`, plurals and `sec`/`min` accepted) optionally preceded by a
    /// count, as in `15s` or `10 minutes`.
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let (limit, period) = text
            .split_once('/')
            .or_else(|| text.split_once(" per "))
            .ok_or_else(|| {
                ConfigError::new(
                    "quota",
                    format!("{text:?} is not of the form <limit>/<period>, such as 100/minute"),
                )
            })?;
        let limit: u64 = limit.trim().parse().map_err(|_| {
            ConfigError::new("limit", format!("{:?} is not a whole number", limit.trim()))
        })?;
        let limit = NonZeroU64::new(limit)
            .ok_or_else(|| ConfigError::new("limit", "must be at least 1"))?;
        Quota::with_period(limit, parse_period(period.trim())?)
    }
}

fn parse_period(text: &str) -> Result<Duration, ConfigError> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (count, unit) = text.split_at(split);
    let count: u64 = if count.is_empty() {
        1
    } else {
        count
            .parse()
            .map_err(|_| ConfigError::new("period", format!("{count:?} is too large")))?
    };
    let unit_millis: u64 = match unit.trim() {
        "ms" | "millisecond" | "milliseconds" => 1,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000,
        "h" | "hr" | "hour" | "hours" => 3_600_000,
        "d" | "day" | "days" => 86_400_000,
        other => {
            return Err(ConfigError::new(
                "period",
                format!("unknown unit {other:?}; use ms, s, m, h or d"),
            ))
        }
    };
    let millis = count
        .checked_mul(unit_millis)
        .ok_or_else(|| ConfigError::new("period", format!("{text:?} is too long")))?;
    Ok(Duration::from_millis(millis))
}

/// The shortest exact spelling of a whole-millisecond duration: `1m`,
/// `15s`, `250ms`, `2h`, `1d`.
pub(crate) fn compact_duration(period: Duration) -> String {
    let millis = period.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if millis >= size && millis.is_multiple_of(size) {
            return format!("{}{unit}", millis / size);
        }
    }
    format!("{millis}ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(v: u64) -> NonZeroU64 {
        NonZeroU64::new(v).unwrap()
    }

    #[test]
    fn parses_the_usual_spellings() {
        for (text, limit, secs) in [
            ("100/minute", 100, 60),
            ("100/m", 100, 60),
            ("5 per second", 5, 1),
            ("7/10 minutes", 7, 600),
            ("1000/hour", 1000, 3600),
            ("3/2d", 3, 172_800),
        ] {
            let quota: Quota = text.parse().unwrap();
            assert_eq!(quota.limit(), limit, "{text}");
            assert_eq!(quota.period(), Duration::from_secs(secs), "{text}");
        }
        assert_eq!(
            "9/250ms".parse::<Quota>().unwrap().period(),
            Duration::from_millis(250)
        );
    }

    #[test]
    fn rejects_nonsense_with_the_field_named() {
        for (text, field) in [
            ("0/minute", "limit"),
            ("-1/minute", "limit"),
            ("ten/minute", "limit"),
            ("10/fortnight", "period"),
            ("10/0s", "period"),
            ("10/400d", "period"),
            ("10", "quota"),
            ("10/99999999999999999999s", "period"),
        ] {
            let error = text.parse::<Quota>().unwrap_err();
            assert_eq!(error.field(), field, "{text}: {error}");
        }
    }

    #[test]
    fn display_round_trips() {
        for text in ["100/1m", "20/15s", "9/250ms", "1/1d", "5/90s"] {
            let quota: Quota = text.parse().unwrap();
            assert_eq!(quota.to_string(), text);
            assert_eq!(quota.to_string().parse::<Quota>().unwrap(), quota);
        }
        assert_eq!(Quota::per_hour(n(3)).to_string(), "3/1h");
    }
}
