//! Bucket arithmetic shared by the fixed and sliding windows: which bucket a
//! moment falls in, where it starts, how far into it we are, how long its
//! counter must live, and the key suffix that names it.
//!
//! Buckets are aligned on unix time (bucket `i` covers
//! `[i * len, (i + 1) * len)` nanoseconds after the epoch), so every process
//! that shares a store agrees on them without talking to the others.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chrono::{DateTime, Utc};

use crate::error::{ConfigError, Error};
use crate::quota::compact_duration;
use crate::stack_text::{two_digits, StackText};

/// Buckets of one length, with `history` older buckets still read after a
/// bucket closes.
#[derive(Debug, Clone)]
pub(crate) struct Buckets {
    len_nanos: i64,
    history: u32,
    /// The finest field a suffix names.
    precision: Precision,
    /// What the suffix ends with after a `-`: the bucket length unless it
    /// is a minute, then `mom` for packed counters.
    tag: Option<String>,
    /// Names these buckets' suffixes in [`LAST_SUFFIX`]: one number per
    /// length, precision and tag made, never reused.
    naming: u64,
}

/// Numbers the ways of naming buckets, for [`LAST_SUFFIX`].
static NAMINGS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The suffix this thread wrote last, with its naming and bucket index:
    /// consecutive decisions mostly fall in the same bucket, so most keys
    /// reuse it instead of writing the date again.
    static LAST_SUFFIX: Cell<(u64, i64, Suffix)> = const { Cell::new((u64::MAX, 0, Suffix::new())) };
}

impl Buckets {
    /// `period` split into `count` buckets, each kept readable for `history`
    /// buckets after its own.
    pub(crate) fn new(period: Duration, count: u32, history: u32) -> Result<Self, ConfigError> {
        if count == 0 {
            return Err(ConfigError::new("sub_windows", "must be at least 1"));
        }
        let period_nanos = period.as_nanos();
        let len_nanos = period_nanos / u128::from(count);
        if len_nanos == 0
            || !period_nanos.is_multiple_of(u128::from(count))
            || !len_nanos.is_multiple_of(1_000_000)
        {
            return Err(ConfigError::new(
                "sub_windows",
                format!(
                    "{count} does not split the period {} into whole milliseconds",
                    compact_duration(period)
                ),
            ));
        }
        let millis = len_nanos / 1_000_000;
        let precision = if millis.is_multiple_of(60_000) {
            Precision::Minutes
        } else if millis.is_multiple_of(1_000) {
            Precision::Seconds
        } else {
            Precision::Millis
        };
        // Minute buckets keep the plain `<yyyyMMddHHmm>` form; any other
        // length is tagged, so limiters with different bucket lengths in one
        // namespace never share a counter.
        let tag =
            (millis != 60_000).then(|| compact_duration(Duration::from_nanos(len_nanos as u64)));
        Ok(Self {
            len_nanos: len_nanos as i64,
            history,
            precision,
            tag,
            naming: NAMINGS.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// The same buckets, their counters packed with their offset sums
    /// (named with the suffix mark `-mom`).
    pub(crate) fn packed(self) -> Self {
        let tag = match self.tag {
            Some(length) => format!("{length}-mom"),
            None => "mom".to_owned(),
        };
        Self {
            tag: Some(tag),
            naming: NAMINGS.fetch_add(1, Ordering::Relaxed),
            ..self
        }
    }

    /// How many older buckets are read beside the current one.
    pub(crate) fn history(&self) -> u32 {
        self.history
    }

    /// The index of the bucket holding `now_nanos`.
    pub(crate) fn index(&self, now_nanos: i64) -> i64 {
        now_nanos.div_euclid(self.len_nanos)
    }

    /// The index of the bucket holding `now_nanos`, and how far into it
    /// `now_nanos` is, in nanoseconds (in `[0, len)`), from one division.
    pub(crate) fn place(&self, now_nanos: i64) -> (i64, u64) {
        let index = now_nanos.div_euclid(self.len_nanos);
        // Exact modulo 2^64, and the remainder is in `[0, len)`, so the
        // wrapped difference is the remainder even where the product
        // itself would not fit.
        let into = now_nanos.wrapping_sub(index.wrapping_mul(self.len_nanos)) as u64;
        (index, into)
    }

    /// Where bucket `index` starts, in unix nanoseconds.
    pub(crate) fn start(&self, index: i64) -> i64 {
        index.saturating_mul(self.len_nanos)
    }

    /// The first bucket that had not closed `allowance` before `now`.
    /// Bucket `i` closes at `start(i + 1)`, so every bucket before the one
    /// holding `now - allowance` closed at least `allowance` before `now`,
    /// and none from it on.
    pub(crate) fn first_closed_after(&self, now_nanos: i64, allowance: Duration) -> i64 {
        let allowance = i64::try_from(allowance.as_nanos()).unwrap_or(i64::MAX);
        self.index(now_nanos.saturating_sub(allowance))
    }

    /// The length of a bucket in nanoseconds.
    pub(crate) fn len_nanos(&self) -> u64 {
        self.len_nanos as u64
    }

    /// The time from `now_nanos` to `offset_nanos` into bucket `index`,
    /// never negative.
    pub(crate) fn until(&self, now_nanos: i64, index: i64, offset_nanos: u64) -> Duration {
        let at = i128::from(self.start(index)) + i128::from(offset_nanos);
        let wait = (at - i128::from(now_nanos)).max(0);
        Duration::from_nanos(u64::try_from(wait).unwrap_or(u64::MAX))
    }

    /// How long a counter is read after its creation: its own bucket plus
    /// the `history` buckets that still read it. The limiter keeps it
    /// longer by its expiry slack (`Settings::expiry_slack`).
    pub(crate) fn ttl(&self) -> Duration {
        Duration::from_nanos(self.len_nanos as u64) * (self.history + 1)
    }

    /// The key suffix naming bucket `index`: its start in UTC as chrono's
    /// `%Y%m%d%H%M[%S[%3f]]` would format it, plus the bucket length unless
    /// it is one minute. This runs for every key of every decision, so the
    /// calendar fields are computed from the day number directly
    /// ([`civil_from_days`]) and the digits written into a buffer on the
    /// stack, with no allocation; a test holds it to chrono's output.
    /// Every suffix of one `Buckets` has one length: a bucket starts at
    /// unix nanoseconds in an `i64`, so between the years 1677 and 2262,
    /// always four digits.
    pub(crate) fn suffix(&self, index: i64) -> Suffix {
        let (naming, last_index, last) = LAST_SUFFIX.get();
        if naming == self.naming && last_index == index {
            return last;
        }
        let suffix = self.write_suffix(index);
        LAST_SUFFIX.set((self.naming, index, suffix));
        suffix
    }

    /// Rewrites copies of bucket `from`'s suffix into the suffixes of
    /// other buckets ([`SuffixRewrite::to`]): the older buckets a decision
    /// reads beside its current one are named so.
    pub(crate) fn rewrite_from(&self, from: i64) -> SuffixRewrite<'_> {
        let start = self.start(from);
        SuffixRewrite {
            buckets: self,
            // Wrapping: before 1677-09-22 the day starts before the
            // earliest i64 nanosecond, and `to` subtracts it back.
            day_start: start.wrapping_sub(start.rem_euclid(NANOS_PER_DAY)),
        }
    }

    /// The UTC day number of bucket `index`'s start (days since
    /// 1970-01-01) and its time of day.
    fn day_and_time(&self, index: i64) -> (i64, TimeOfDay) {
        let start = self.start(index);
        let into_day = start.rem_euclid(NANOS_PER_DAY) as u64;
        (start.div_euclid(NANOS_PER_DAY), TimeOfDay::at(into_day))
    }

    /// Writes `time`'s digits as the suffix names it at the start of
    /// `digits`: `HHmm`, then `ss` and `SSS` as the precision asks; returns
    /// how many.
    #[inline(always)]
    fn write_time(&self, time: TimeOfDay, digits: &mut [u8]) -> usize {
        digits[..2].copy_from_slice(&two_digits(time.secs / 3_600));
        digits[2..4].copy_from_slice(&two_digits(time.secs / 60 % 60));
        if self.precision == Precision::Minutes {
            return 4;
        }
        digits[4..6].copy_from_slice(&two_digits(time.secs % 60));
        if self.precision == Precision::Seconds {
            return 6;
        }
        digits[6..8].copy_from_slice(&two_digits(time.millis / 10));
        digits[8] = b'0' + (time.millis % 10) as u8;
        9
    }

    /// [`suffix`](Self::suffix), written out.
    fn write_suffix(&self, index: i64) -> Suffix {
        let (day, time) = self.day_and_time(index);
        let mut suffix = Suffix::new();
        let (year, month, day) = civil_from_days(day);
        // 1677 to 2262 (see above): the clamp changes nothing.
        let year = year.clamp(0, 9_999) as u32;
        for field in [year / 100, year % 100, month, day] {
            suffix.push_two_digits(field);
        }
        let mut digits = [0; 9];
        let written = self.write_time(time, &mut digits);
        suffix.push(&digits[..written]);
        if let Some(tag) = &self.tag {
            suffix.push(b"-");
            suffix.push(tag.as_bytes());
        }
        suffix
    }
}

/// Copies of one bucket's suffix, rewritten to name other buckets of the
/// same [`Buckets`] ([`Buckets::rewrite_from`]).
pub(crate) struct SuffixRewrite<'a> {
    buckets: &'a Buckets,
    /// Where the UTC day of the bucket whose suffix is copied starts, in
    /// unix nanoseconds.
    day_start: i64,
}

impl SuffixRewrite<'_> {
    /// Makes `suffix`, a copy of the first bucket's, name bucket `to`. On
    /// the same UTC day (nearly always) only the time of day changes, so
    /// only its digits are written, in place; across midnight the suffix
    /// is written whole. Not kept in [`LAST_SUFFIX`], which keeps the
    /// current bucket's for the next decision.
    ///
    /// # Panics
    ///
    /// If `suffix` is not as long as these buckets' suffixes.
    pub(crate) fn to(&self, to: i64, suffix: &mut [u8]) {
        let buckets = self.buckets;
        // Within the day, a time of day from a subtraction: no signed
        // division by the day's length.
        let into_day = buckets.start(to).wrapping_sub(self.day_start) as u64;
        if into_day >= NANOS_PER_DAY as u64 {
            suffix.copy_from_slice(&buckets.write_suffix(to));
            return;
        }
        buckets.write_time(TimeOfDay::at(into_day), &mut suffix[DATE_DIGITS..]);
    }
}

/// The finest field of a bucket's suffix: a bucket that is a whole number
/// of minutes is named to the minute, of seconds to the second, else to
/// the millisecond.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Precision {
    Minutes,
    Seconds,
    Millis,
}

impl Precision {
    /// The suffix's date as chrono would format it.
    #[cfg(test)]
    fn format(self) -> &'static str {
        match self {
            Precision::Minutes => "%Y%m%d%H%M",
            Precision::Seconds => "%Y%m%d%H%M%S",
            Precision::Millis => "%Y%m%d%H%M%S%3f",
        }
    }
}

/// A key suffix, on the stack: longer than any suffix a key has room for.
pub(crate) type Suffix = StackText<64>;

/// The length of a UTC day.
const NANOS_PER_DAY: i64 = 86_400 * 1_000_000_000;

/// How many digits a suffix's date takes before its time of day:
/// `yyyyMMdd`.
const DATE_DIGITS: usize = 8;

/// A moment within its UTC day.
#[derive(Clone, Copy)]
struct TimeOfDay {
    secs: u32,
    millis: u32,
}

impl TimeOfDay {
    /// The moment `into_day` nanoseconds (less than a day) after midnight.
    fn at(into_day: u64) -> Self {
        Self {
            secs: (into_day / 1_000_000_000) as u32,
            millis: (into_day % 1_000_000_000 / 1_000_000) as u32,
        }
    }
}

/// The proleptic Gregorian `(year, month, day)` of `days` after
/// 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097); // [0, 146096]
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365; // [0, 399]
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100); // [0, 365]
    let shifted_month = (5 * day_of_year + 2) / 153; // [0, 11], from March
    let day = (day_of_year - (153 * shifted_month + 2) / 5 + 1) as u32;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    } as u32;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `at` as unix nanoseconds, or the error for a clock beyond 2262.
pub(crate) fn unix_nanos(at: DateTime<Utc>) -> Result<i64, Error> {
    at.timestamp_nanos_opt().ok_or(Error::ClockOutOfRange(at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> i64 {
        unix_nanos(text.parse::<DateTime<Utc>>().unwrap()).unwrap()
    }

    #[test]
    fn minute_buckets_are_named_like_the_article() {
        let buckets = Buckets::new(Duration::from_secs(60), 1, 0).unwrap();
        let now = at("2026-11-22T07:10:23Z");
        assert_eq!(buckets.suffix(buckets.index(now)), "202611220710");
        assert_eq!(buckets.place(now).1, 23_000_000_000);
    }

    #[test]
    fn packed_counters_are_named_apart() {
        let now = at("2026-11-22T07:10:15Z");
        let minute = Buckets::new(Duration::from_secs(60), 1, 1)
            .unwrap()
            .packed();
        assert_eq!(minute.suffix(minute.index(now)), "202611220710-mom");
        let quarter = Buckets::new(Duration::from_secs(60), 4, 4)
            .unwrap()
            .packed();
        assert_eq!(quarter.suffix(quarter.index(now)), "20261122071015-15s-mom");
    }

    #[test]
    fn other_lengths_are_tagged() {
        let quarter = Buckets::new(Duration::from_secs(60), 4, 4).unwrap();
        let now = at("2026-11-22T07:10:23Z");
        assert_eq!(quarter.suffix(quarter.index(now)), "20261122071015-15s");
        let ten = Buckets::new(Duration::from_secs(600), 1, 0).unwrap();
        assert_eq!(ten.suffix(ten.index(now)), "202611220710-10m");
        let fast = Buckets::new(Duration::from_millis(1000), 4, 4).unwrap();
        assert_eq!(
            fast.suffix(fast.index(now + 300_000_000)),
            "20261122071023250-250ms"
        );
    }

    #[test]
    fn the_suffix_kept_from_the_last_key_is_only_reused_by_the_same_naming() {
        let minute = Buckets::new(Duration::from_secs(60), 1, 1).unwrap();
        let packed = minute.clone().packed();
        let seconds = Buckets::new(Duration::from_secs(60), 60, 60).unwrap();
        let index = 29_000_000;
        for _ in 0..2 {
            for buckets in [&minute, &packed, &seconds, &minute, &minute] {
                for index in [index, index, index + 1, index] {
                    assert_eq!(buckets.suffix(index), buckets.write_suffix(index));
                }
            }
        }
        assert_eq!(minute.suffix(index), "202502192120");
        assert_eq!(packed.suffix(index), "202502192120-mom");
    }

    #[test]
    fn suffixes_match_chrono_formatting() {
        for (period, count) in [
            (60_000, 1),
            (60_000, 4),
            (600_000, 1),
            (1_000, 4),
            (86_400_000, 24),
        ] {
            let buckets = Buckets::new(Duration::from_millis(period), count, count).unwrap();
            let mut at: i64 = -5_000_000_000_000_000_000;
            while at < 9_000_000_000_000_000_000 {
                let index = buckets.index(at);
                let start = DateTime::<Utc>::from_timestamp_nanos(buckets.start(index));
                let mut expected = start.format(buckets.precision.format()).to_string();
                if let Some(tag) = &buckets.tag {
                    expected = format!("{expected}-{tag}");
                }
                assert_eq!(buckets.suffix(index), expected, "at {at}");
                at += 7_777_777_777_777_777;
            }
        }
    }

    #[test]
    fn a_rewritten_suffix_is_the_one_written_out() {
        // Each precision, tagged or not, from one bucket to the older ones
        // a window reads: within a day, across midnight, a month's and a
        // year's end, a leap day, back across the epoch, and on the first
        // day an i64 of nanoseconds holds.
        for (period, count) in [(60_000, 1), (60_000, 60), (1_000, 4), (600_000, 1)] {
            let buckets = Buckets::new(Duration::from_millis(period), count, count).unwrap();
            for moment in [
                "2026-11-22T07:10:23.456Z",
                "2026-11-23T00:00:00.100Z",
                "2026-12-01T00:00:01Z",
                "2027-01-01T00:00:00.200Z",
                "2028-03-01T00:00:30Z",
                "1970-01-01T00:01:00.500Z",
                "1677-09-21T00:14:00Z",
            ] {
                let from = buckets.index(at(moment));
                let rewrite = buckets.rewrite_from(from);
                for age in 0..200 {
                    let to = from - age;
                    let mut bytes = buckets.write_suffix(from).to_vec();
                    rewrite.to(to, &mut bytes);
                    let written = buckets.write_suffix(to);
                    assert_eq!(bytes, &written[..], "{moment}, {age} buckets before");
                }
            }
        }
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn a_suffix_of_another_length_is_not_rewritten() {
        let buckets = Buckets::new(Duration::from_secs(60), 1, 1).unwrap();
        let index = buckets.index(at("2026-11-22T23:59:00Z"));
        let mut short = b"20261122".to_vec();
        buckets.rewrite_from(index).to(index - 1, &mut short);
    }

    #[test]
    fn a_bucket_has_closed_long_enough_exactly_when_it_is_before_the_first_that_has_not() {
        for (len, allowance) in [(1_000, 1_100), (1_000, 1_000), (60_000, 1_100), (250, 0)] {
            let buckets = Buckets::new(Duration::from_millis(len), 1, 1).unwrap();
            let allowance = Duration::from_millis(allowance);
            let base = at("2026-11-22T07:10:00Z");
            for step in -3_000..3_000 {
                let now = base + step * 1_000_000;
                let first = buckets.first_closed_after(now, allowance);
                for index in buckets.index(now) - 5..=buckets.index(now) {
                    let closed = buckets.start(index + 1) + allowance.as_nanos() as i64;
                    assert_eq!(index < first, closed <= now, "bucket {index} at {now}");
                }
            }
        }
    }

    #[test]
    fn rejects_splits_that_are_not_whole_milliseconds() {
        assert!(Buckets::new(Duration::from_secs(1), 3, 3).is_err());
        assert!(Buckets::new(Duration::from_secs(60), 0, 0).is_err());
        assert!(Buckets::new(Duration::from_millis(1), 2, 2).is_err());
        assert!(Buckets::new(Duration::from_secs(60), 7, 7).is_err());
        assert!(Buckets::new(Duration::from_secs(60), 60, 60).is_ok());
    }

    #[test]
    fn ttl_covers_every_read_of_the_bucket() {
        let buckets = Buckets::new(Duration::from_secs(60), 4, 4).unwrap();
        assert_eq!(buckets.ttl(), Duration::from_secs(5 * 15));
    }

    #[test]
    fn buckets_before_the_epoch_still_align() {
        let buckets = Buckets::new(Duration::from_secs(60), 1, 0).unwrap();
        assert_eq!(buckets.index(-1), -1);
        assert_eq!(buckets.place(-1), (-1, buckets.len_nanos() - 1));
        let len = buckets.len_nanos() as i64;
        for now in [i64::MIN, i64::MIN + 1, -1, 0, 1, 59_999_999_999, i64::MAX] {
            let into = now.rem_euclid(len) as u64;
            assert_eq!(buckets.place(now), (now.div_euclid(len), into), "{now}");
        }
    }
}
