//! What the benchmark programs share: the memcached under test and the
//! CPU placement ([`server`]), the connections to it ([`client`]), the
//! CPU time a decision costs on both sides ([`cpu`]), the
//! common settings and run options, and the median. See `bench/README.md`.

pub mod algorithm;
pub mod client;
pub mod cpu;
pub mod instructions;
pub mod matrix;
pub mod paired;
pub mod server;
pub mod socket;

use std::ops::{Bound, RangeBounds};
use std::str::FromStr;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::CommandFactory;
use hdrhistogram::Histogram;
use memcache_ratelimit::algorithm::{CasPolicy, CasStats};

/// Clients in "many" mode and in the memory measurement.
pub const MANY_CLIENTS: usize = 100_000;
/// TTL of the raw counters, in seconds.
pub const RAW_TTL: u32 = 120;
/// Requests per minute high enough that every decision is allowed, so the
/// allowed path is measured.
pub const OPEN_PER_MINUTE: u32 = 1_000_000_000;
/// [`OPEN_PER_MINUTE`] as a quota.
pub const OPEN_QUOTA: &str = "1000000000/minute";
/// The sliding log keeps every admitted timestamp, so its limit is capped
/// (`MAX_LOG_LIMIT`); this is that cap.
pub const LOG_QUOTA: &str = "10000/minute";
/// The quota of the sliding window with a moment estimator: as open as a
/// packed counter allows (it counts up to 2^27 − 1 a sub-window), so every
/// decision is allowed.
pub const MOMENT_QUOTA: &str = "100000000/minute";

/// Whose requests a run makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Every request is for one client id.
    Hot,
    /// Each request is for one of [`MANY_CLIENTS`] ids, chosen uniformly
    /// at random.
    Many,
}

impl Mode {
    /// The heading of the mode's table.
    pub fn title(self) -> &'static str {
        match self {
            Mode::Hot => "one hot client",
            Mode::Many => "100,000 clients, chosen uniformly at random per request",
        }
    }
}

/// The `--mode` option: which [`Mode`]s to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Modes {
    Hot,
    Many,
    Both,
}

impl Modes {
    /// The modes to run, in order.
    pub fn modes(self) -> &'static [Mode] {
        match self {
            Modes::Hot => &[Mode::Hot],
            Modes::Many => &[Mode::Many],
            Modes::Both => &[Mode::Hot, Mode::Many],
        }
    }
}

/// Runs and their length, the options every benchmark takes.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct Runs {
    /// Runs per case; the tables report the median.
    #[arg(long, default_value_t = 3, value_parser = at_least_one)]
    pub runs: usize,
    /// Seconds per run.
    #[arg(long, default_value_t = 5.0, value_parser = seconds)]
    pub seconds: f64,
}

impl Runs {
    /// With `quick` (the `--quick` smoke test), 1 run of 1 s.
    pub fn resolve(&mut self, quick: bool) {
        if quick {
            self.runs = 1;
            self.seconds = 1.0;
        }
    }
}

/// The most of anything counted on the command line: runs, requests in
/// flight, clients.
pub const MOST: usize = 1_000_000;

/// `text` read as a `what` within `low` and `high`, or an error that says
/// which of them it breaks: the one check behind every count and length
/// the command line takes.
fn within<T>(text: &str, what: &str, low: Bound<T>, high: Bound<T>) -> Result<T, String>
where
    T: FromStr + PartialOrd + std::fmt::Display,
{
    let value: T = text
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not {what}"))?;
    if (low.as_ref(), high.as_ref()).contains(&value) {
        return Ok(value);
    }
    let low = match &low {
        Bound::Included(low) => format!("at least {low}"),
        Bound::Excluded(low) => format!("more than {low}"),
        Bound::Unbounded => "any".to_owned(),
    };
    let high = match &high {
        Bound::Included(high) | Bound::Excluded(high) => format!("at most {high}"),
        Bound::Unbounded => "any".to_owned(),
    };
    Err(format!("{text} is out of range: {low}, {high}"))
}

/// A command-line count from 1 to [`MOST`].
///
/// ```
/// use memcache_ratelimit_bench::at_least_one;
///
/// assert_eq!(at_least_one("64"), Ok(64));
/// assert!(at_least_one("0").unwrap_err().contains("at least 1"));
/// assert!(at_least_one("-3").is_err());
/// ```
pub fn at_least_one(text: &str) -> Result<usize, String> {
    within(
        text,
        "a whole number",
        Bound::Included(1),
        Bound::Included(MOST),
    )
}

/// The longest run the command line takes, in seconds: an hour.
pub const LONGEST_SECONDS: f64 = 3_600.0;

/// A command-line length of a run in seconds: more than 0, at most
/// [`LONGEST_SECONDS`].
///
/// ```
/// use memcache_ratelimit_bench::seconds;
///
/// assert_eq!(seconds("0.5"), Ok(0.5));
/// assert!(seconds("0").is_err());
/// assert!(seconds("NaN").is_err());
/// ```
pub fn seconds(text: &str) -> Result<f64, String> {
    within(
        text,
        "a number of seconds",
        Bound::Excluded(0.0),
        Bound::Included(LONGEST_SECONDS),
    )
}

/// The error for an `--only` that selects no case, naming them all.
fn no_case_matched(filter: &str, names: &[String]) -> String {
    format!(
        "--only {filter:?} matches no case; the cases are: {}",
        names.join(", ")
    )
}

/// What the decisions of a run came to.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub allowed: u64,
    pub denied: u64,
    /// Decisions that lost every compare-and-swap race (`Error::Contention`).
    pub contention: u64,
    /// Any other error.
    pub errors: u64,
}

impl Counts {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: Counts) {
        self.allowed += other.allowed;
        self.denied += other.denied;
        self.contention += other.contention;
        self.errors += other.errors;
    }

    /// Decisions answered: allowed or denied.
    pub fn decisions(&self) -> u64 {
        self.allowed + self.denied
    }
}

/// The compare-and-swap policy of every benchmark: generous, up to 100
/// attempts, pauses of up to 50 µs growing to 5 ms.
pub fn cas_policy() -> CasPolicy {
    CasPolicy::new(100, Duration::from_micros(50), Duration::from_millis(5))
        .expect("valid CAS policy")
}

/// What a progress line ends with: ` (first error: …)` for a run that had
/// an error, nothing for one that had none.
pub fn first_error_note(error: Option<&str>) -> String {
    error
        .map(|e| format!(" (first error: {e})"))
        .unwrap_or_default()
}

/// What a compare-and-swap algorithm's progress line ends with: of every
/// 100 of its `decisions` between the counters `before` and `after`, how
/// many were decided on a state known without a read (and how many of
/// those were written on its version or as new, in one round trip, since
/// memcached may just have dropped it, and how many wrote nothing and
/// checked the state's version alone), how many found it changed or gone
/// (stale), how many of the stale ones found it gone and wrote it anew
/// without a read, and how many read first. Nothing
/// for the window algorithms, which never compare and swap.
pub fn cas_note(before: &CasStats, after: &CasStats, decisions: u64) -> String {
    if after.decisions <= before.decisions {
        return String::new();
    }
    let per_100 = |after: u64, before: u64| {
        100.0 * after.saturating_sub(before) as f64 / decisions.max(1) as f64
    };
    format!(
        ", per 100 decisions: {:.1} on a known state ({:.1} written on its version or as new, {:.1} denied on its version), {:.1} of them stale ({:.1} gone), {:.1} read first",
        per_100(after.known, before.known),
        per_100(after.either, before.either),
        per_100(after.checked, before.checked),
        per_100(after.stale, before.stale),
        per_100(after.vanished, before.vanished),
        per_100(after.attempts, before.attempts),
    )
}

/// The cases of `all` that run under `--only filter`, in order: a whole
/// case name selects that case alone, anything else every name containing
/// it, ignoring case; with them, those `always` keeps whatever the filter
/// (a reference case). A filter that selects none of the others ends the program with
/// `A`'s usage error, naming every case.
pub fn select_cases<A: CommandFactory, T>(
    all: Vec<T>,
    name: impl Fn(&T) -> String,
    filter: Option<&str>,
    always: impl Fn(&T) -> bool,
) -> Vec<T> {
    let names: Vec<String> = all.iter().map(&name).collect();
    let mut chosen = false;
    let cases: Vec<T> = all
        .into_iter()
        .filter(|case| {
            let picked = selected(&name(case), filter, &names);
            chosen |= picked && !always(case);
            picked || always(case)
        })
        .collect();
    if let (false, Some(filter)) = (chosen, filter) {
        A::command()
            .error(ErrorKind::InvalidValue, no_case_matched(filter, &names))
            .exit();
    }
    cases
}

/// A histogram of latencies in nanoseconds, 1 ns to 60 s, to 3
/// significant digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
}

/// Records `elapsed`, `count` times, into a [`latency_histogram`]: at
/// least 1 ns, and anything past its range as its largest value.
pub fn record_latency(histogram: &mut Histogram<u64>, elapsed: Duration, count: u64) {
    let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
    histogram.saturating_record_n(nanos.max(1), count);
}

/// Whether the case called `name` runs under `--only filter`, among the
/// cases called `names`: a whole case name selects that case alone
/// ("SlidingWindow n=1" is not also n=12); anything else selects every
/// name containing it, ignoring case.
fn selected(name: &str, filter: Option<&str>, names: &[String]) -> bool {
    match filter {
        None => true,
        Some(filter) if names.iter().any(|n| n.eq_ignore_ascii_case(filter)) => {
            name.eq_ignore_ascii_case(filter)
        }
        Some(filter) => name.to_lowercase().contains(&filter.to_lowercase()),
    }
}

/// The median; the mean of the two middle values for an even count, NaN
/// for none.
pub fn median(mut values: Vec<f64>) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len() % 2 == 1 {
        values[middle]
    } else {
        (values[middle - 1] + values[middle]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The moment case measures packed counters only while its limit fits
    /// one; above it the library counts plainly, without a word.
    #[test]
    fn the_moment_quota_fits_a_packed_counter() {
        let quota: memcache_ratelimit::Quota = MOMENT_QUOTA.parse().unwrap();
        assert!(quota.limit() <= memcache_ratelimit::algorithm::MAX_MOMENT_COUNT);
    }

    #[test]
    fn median_of_odd_even_and_no_values() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(Vec::new()).is_nan());
    }

    #[test]
    fn a_whole_name_selects_one_case_and_a_part_selects_many() {
        let names: Vec<String> = ["SlidingWindow n=1", "SlidingWindow n=12", "Gcra"]
            .map(String::from)
            .into();
        let picked = |filter| names.iter().filter(|n| selected(n, filter, &names)).count();
        assert_eq!(picked(Some("slidingwindow n=1")), 1);
        assert_eq!(picked(Some("sliding")), 2);
        assert_eq!(picked(None), 3);
    }

    #[test]
    fn quick_is_one_run_of_one_second() {
        let mut runs = Runs {
            runs: 0,
            seconds: 5.0,
        };
        runs.resolve(true);
        assert_eq!((runs.runs, runs.seconds), (1, 1.0));
    }

    #[test]
    fn a_first_error_is_noted_and_none_is_not() {
        assert_eq!(first_error_note(Some("boom")), " (first error: boom)");
        assert_eq!(first_error_note(None), "");
    }

    #[test]
    fn the_open_quota_is_the_open_rate() {
        assert_eq!(OPEN_QUOTA, format!("{OPEN_PER_MINUTE}/minute"));
    }
}
