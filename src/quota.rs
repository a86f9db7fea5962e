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
    /// unit (`ms`, `second`, `minute`, `hour`, `day`, `week`; their
    /// plurals; or `s`, `sec`, `m`, `min`, `h`, `hr`, `d`, `w`) counted
    /// once, or a sum of terms each with a number before it: `15s`,
    /// `10 minutes`, `1h30m`, `1h 30m`, `1.5s`. Decimals are exact and
    /// must come to whole milliseconds.
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

/// Milliseconds in one of each unit a period may be written in.
fn unit_millis(unit: &str) -> Option<u128> {
    Some(match unit {
        "ms" | "msec" | "msecs" | "millisecond" | "milliseconds" => 1,
        "s" | "sec" | "secs" | "second" | "seconds" => 1_000,
        "m" | "min" | "mins" | "minute" | "minutes" => 60_000,
        "h" | "hr" | "hrs" | "hour" | "hours" => 3_600_000,
        "d" | "day" | "days" => 86_400_000,
        "w" | "wk" | "wks" | "week" | "weeks" => 604_800_000,
        _ => return None,
    })
}

/// Reads a period: one or more terms of a number and a unit, such as
/// `minute`, `10 minutes`, `1h30m`, `1h 30m` or `1.5s`. A lone unit counts
/// once; decimals are exact, and must come to whole milliseconds.
fn parse_period(text: &str) -> Result<Duration, ConfigError> {
    let bad = |why: String| ConfigError::new("period", why);
    let mut rest = text.trim();
    if rest.is_empty() {
        return Err(bad(
            "is empty; write a unit such as minute or 15s".to_owned()
        ));
    }
    if unit_millis(rest).is_some() {
        return term(text, "1", rest);
    }
    let mut total = Duration::ZERO;
    while !rest.is_empty() {
        let number_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_end);
        let after = after.trim_start();
        let unit_end = after
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(after.len());
        let (unit, after) = after.split_at(unit_end);
        if number.is_empty() {
            return Err(bad(format!(
                "{text:?}: each unit needs a number before it, as in 1h30m"
            )));
        }
        total = total
            .checked_add(term(text, number, unit)?)
            .ok_or_else(|| bad(format!("{text:?} is too long")))?;
        rest = after.trim_start();
    }
    Ok(total)
}

/// `number` (digits, perhaps with a decimal point) of `unit`, exactly.
fn term(text: &str, number: &str, unit: &str) -> Result<Duration, ConfigError> {
    let bad = |why: String| ConfigError::new("period", why);
    let size = unit_millis(unit).ok_or_else(|| {
        bad(format!(
            "unknown unit {unit:?} in {text:?}; use ms, s, m, h, d or w (or their names)"
        ))
    })?;
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    let digits = format!("{whole}{fraction}");
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 30 {
        return Err(bad(format!("{number:?} in {text:?} is not a number")));
    }
    let scaled: u128 = digits
        .parse()
        .map_err(|_| bad(format!("{number:?} in {text:?} is not a number")))?;
    let divisor = 10u128.pow(fraction.len() as u32);
    let product = scaled
        .checked_mul(size)
        .ok_or_else(|| bad(format!("{text:?} is too long")))?;
    if product % divisor != 0 {
        return Err(bad(format!(
            "{number}{unit} is not a whole number of milliseconds"
        )));
    }
    let millis =
        u64::try_from(product / divisor).map_err(|_| bad(format!("{text:?} is too long")))?;
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
            ("100/1h30m", 100, 5_400),
            ("100/1h 30m", 100, 5_400),
            ("10/1.5 hours", 10, 5_400),
            ("1000/week", 1000, 604_800),
            ("1000/2 weeks", 1000, 1_209_600),
            ("50/day", 50, 86_400),
            ("50 per 3 days", 50, 259_200),
            ("5/90 secs", 5, 90),
            ("5/1m30s", 5, 90),
        ] {
            let quota: Quota = text.parse().unwrap();
            assert_eq!(quota.limit(), limit, "{text}");
            assert_eq!(quota.period(), Duration::from_secs(secs), "{text}");
        }
        for (text, millis) in [("9/250ms", 250), ("9/1.5s", 1_500), ("9/0.25s", 250)] {
            let quota: Quota = text.parse().unwrap();
            assert_eq!(quota.period(), Duration::from_millis(millis), "{text}");
        }
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
            ("10/1.0005s", "period"),
            ("10/1.2.3s", "period"),
            ("10/h1", "period"),
            ("10/1h30", "period"),
            ("10/.s", "period"),
            ("10/", "period"),
            ("10/99999999999999999999999999999999999w", "period"),
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
