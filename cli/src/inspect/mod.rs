//! What `inspect` reads and prints: a client's keys as the library's
//! `RateLimiter::inspect` returns them, with what they mean.
//!
//! The window algorithms' buckets are aligned on unix time, bucket `i`
//! covering `[i·len, (i+1)·len)` (as the `FixedWindow` and `SlidingWindow`
//! documentation says), so each key's span follows from the time of the
//! reading. Their weights are the sliding window's estimate, as its
//! documentation gives it: every sub-window in full but the oldest,
//! weighted by the share of it still inside the period.
//!
//! The compare-and-swap algorithms' states are decoded from the formats
//! their rustdocs give: the token bucket's `<tokens> <updated>` (unix
//! nanoseconds), GCRA's theoretical arrival time in units of `1/limit`
//! nanoseconds, the sliding log's version byte, little-endian `i64` oldest
//! time and LEB128 gaps, and the hybrid quota's `<b|s> <bucket> <time>`,
//! read by its documented rules. A value that does not decode is shown as
//! stored and, as the library does, taken for a new client's.
//!
//! - [`read`]: the keys, read from the store;
//! - [`report`]: what they mean, one object (`--json` prints it as is);
//! - [`buckets`]: the windows' buckets;
//! - [`states`]: the compare-and-swap algorithms' states, one decoder each;
//! - [`human`]: the report for people;
//! - [`units`]: times and durations, from nanoseconds.

mod buckets;
mod human;
mod read;
mod report;
mod states;
mod units;

use crate::limiter::Configured;

/// Reads and prints `client`'s state: for people, or as one JSON object.
pub async fn inspect(
    configured: &Configured,
    client: &[u8],
    json: bool,
) -> Result<(), Box<dyn std::error::Error>> {
    let reading = read::read(configured, client).await?;
    let report = report::Report::new(configured, client, reading);
    match json {
        true => println!("{}", serde_json::to_string(&report)?),
        false => print!("{}", human::human(&report)),
    }
    Ok(())
}
