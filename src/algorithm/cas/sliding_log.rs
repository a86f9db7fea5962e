//! The exact sliding log, by optimistic compare-and-swap.

use std::sync::Arc;
use std::time::Duration;

use super::core::{parameter_suffix, Ask, CasCore, Step};
use super::optimistic::CasLimiter;
use super::stats::CasStats;
use crate::decision::Decision;
use crate::error::ConfigError;
use crate::limiter::{delegate_rate_limiter, other_algorithm, LimiterBuilder};
use crate::quota::Quota;
use crate::spec::{Algorithm, LimiterSpec};
use crate::store::Store;

/// The largest limit a [`SlidingLog`] accepts: its state holds one
/// timestamp per admitted cost unit, so the limit bounds the stored value
/// (at most about 8 bytes an entry, 80 KB at this limit, well under
/// memcached's default 1 MB item size).
///
/// ```
/// use memcache_ratelimit::algorithm::MAX_LOG_LIMIT;
/// use memcache_ratelimit::{MemoryStore, Quota, SlidingLog};
/// use std::num::NonZeroU64;
/// use std::sync::Arc;
///
/// let too_many = Quota::per_hour(NonZeroU64::new(MAX_LOG_LIMIT + 1).unwrap());
/// let error = SlidingLog::builder(too_many, Arc::new(MemoryStore::new())).build().unwrap_err();
/// assert_eq!(error.field(), "limit");
/// ```
pub const MAX_LOG_LIMIT: u64 = 10_000;

/// The first byte of every stored log, so even an empty log is a value.
const VERSION: u8 = 1;

/// The exact sliding log (seed `003_c61f8e9115d1ba67.txt`, "Sliding
/// (Rolling) Log").
///
/// Each client's state is one memcached value: the timestamps of its
/// admitted requests still inside the period, one entry per cost unit, so
/// never more than `limit` of them. A request of cost `c` at time `t` first
/// drops the entries at or before `t − period`; it is allowed if the
/// entries left plus `c` fit in the limit, and then records `c` entries at
/// `t`. The limit holds exactly over every window of one period, with no
/// boundary effects and no estimate, at the price of a value that grows
/// with the limit (hence [`MAX_LOG_LIMIT`]) and is read and written whole
/// on every decision, in the shared optimistic loop
/// ([`CasPolicy`](crate::CasPolicy)).
///
/// The log is stored compactly: a version byte, the oldest timestamp as a
/// little-endian `i64` (unix nanoseconds), then each later entry as the
/// LEB128 varint of its distance from the previous one (1 byte for entries
/// of one request, 1 to 8 bytes otherwise).
///
/// **Decision**: `remaining` is `limit` minus the entries after the
/// decision; `retry_after` is the time until enough of the oldest entries
/// leave the window for the request to fit; `reset_after` is the time until
/// the newest entry leaves it.
///
/// **Strict mode** ([`DeniedRequests::Counted`](crate::DeniedRequests)):
/// denied requests are recorded too, dropping the oldest entries to stay at
/// `limit`, so a client sending faster than the limit stays denied until
/// it slows down. Admitted requests still never exceed the limit in any
/// window: the log always keeps the newest recorded entries, a superset of
/// the admitted ones inside the window or else a full log.
///
/// **Timestamps** ([`check_at`](crate::RateLimiter::check_at)): time never
/// runs backwards for a key. An event older than the newest recorded entry
/// is decided, and recorded, as of that newest time, so the log stays
/// sorted and replaying out of order can never free quota from the past;
/// its `retry_after` and `reset_after` count from its own time.
///
/// **Stored state** is validated: a value that is not a log (or holds more
/// than `limit` entries) counts as a new client, and entries further ahead
/// than the limiter's `max_clock_skew` are clamped to it; either repair is
/// counted in [`FailureStats::repaired`](crate::FailureStats). No decision
/// announces a wait longer than one period plus the skew.
///
/// ```
/// use memcache_ratelimit::{ManualClock, MemoryStore, RateLimiter, SlidingLog};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let clock = ManualClock::from_unix_secs(1_800_000_000);
/// let store = Arc::new(MemoryStore::with_clock(clock.clone()));
/// let log = SlidingLog::builder("3/minute".parse()?, store).clock(clock.clone()).build()?;
///
/// assert!(log.check(b"alice").await?.is_allowed());
/// clock.advance(Duration::from_secs(40));
/// assert!(log.check_n(b"alice", 2).await?.is_allowed());
/// let denied = log.check(b"alice").await?;
/// assert!(denied.is_denied());
/// // The first request leaves the window 60 s after it was made.
/// assert_eq!(denied.retry_after(), Some(Duration::from_secs(20)));
/// clock.advance(Duration::from_secs(20));
/// assert_eq!(log.check(b"alice").await?.remaining(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct SlidingLog {
    inner: CasLimiter<SlidingLogCore>,
}

impl SlidingLog {
    /// Starts building a sliding log enforcing `quota` on `store`.
    ///
    /// ```
    /// use memcache_ratelimit::{MemoryStore, SlidingLog};
    /// use std::sync::Arc;
    ///
    /// let log = SlidingLog::builder("5/second".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    ///
    /// Its own setting is the compare-and-swap policy:
    ///
    /// ```
    /// use memcache_ratelimit::{CasPolicy, SlidingLog, MemoryStore};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let log = SlidingLog::builder("100/minute".parse()?, Arc::new(MemoryStore::new()))
    ///     .cas_policy(CasPolicy::new(4, Duration::from_micros(100), Duration::from_millis(2))?)
    ///     .build()?;
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn builder(quota: Quota, store: Arc<dyn Store>) -> LimiterBuilder<SlidingLog> {
        LimiterBuilder::from_spec(LimiterSpec::new(Algorithm::SlidingLog, quota), store)
    }

    /// The key holding `client`'s log.
    ///
    /// ```
    /// use memcache_ratelimit::{MemoryStore, SlidingLog};
    /// use std::sync::Arc;
    ///
    /// let log = SlidingLog::builder("5/second".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// assert!(log.key(b"alice").starts_with(b"rl:alice_log-"));
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn key(&self, client: &[u8]) -> Vec<u8> {
        self.inner.key(client)
    }

    /// Retries, conflicts and give-ups of the compare-and-swap loop.
    ///
    /// ```
    /// use memcache_ratelimit::{MemoryStore, RateLimiter, SlidingLog};
    /// use std::sync::Arc;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let log = SlidingLog::builder("5/second".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// log.check(b"alice").await?;
    /// assert_eq!(log.cas_stats().decisions, 1);
    /// assert_eq!(log.cas_stats().conflicts, 0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn cas_stats(&self) -> CasStats {
        self.inner.stats()
    }
}

impl LimiterBuilder<SlidingLog> {
    /// Validates the settings and builds the limiter. A quota whose limit
    /// is above [`MAX_LOG_LIMIT`] is rejected (field `limit`).
    ///
    /// ```
    /// use memcache_ratelimit::{MemoryStore, SlidingLog};
    /// use std::sync::Arc;
    ///
    /// let store = Arc::new(MemoryStore::new());
    /// assert!(SlidingLog::builder("10000/hour".parse()?, store.clone()).build().is_ok());
    /// assert!(SlidingLog::builder("10001/hour".parse()?, store).build().is_err());
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn build(self) -> Result<SlidingLog, ConfigError> {
        let (settings, spec) = self.into_parts(Self::build)?;
        if spec.algorithm != Algorithm::SlidingLog {
            return Err(other_algorithm(&spec, "sliding log"));
        }
        let limit = settings.quota.limit();
        if limit > MAX_LOG_LIMIT {
            return Err(ConfigError::new(
                "limit",
                format!("{limit} is above the sliding log's maximum of {MAX_LOG_LIMIT}"),
            ));
        }
        let core = SlidingLogCore::new(settings.quota);
        Ok(SlidingLog {
            inner: CasLimiter::new(settings, core, spec.cas),
        })
    }
}

delegate_rate_limiter!(SlidingLog, "sliding_log");

/// The arithmetic: at most `limit` entries younger than `period`
/// nanoseconds.
#[derive(Debug, Clone)]
pub(crate) struct SlidingLogCore {
    limit: u64,
    period: i64,
    suffix: String,
}

/// The recorded timestamps (unix nanoseconds), oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Log(Vec<i64>);

impl SlidingLogCore {
    pub(crate) fn new(quota: Quota) -> Self {
        let period = i64::try_from(quota.period().as_nanos()).unwrap_or(i64::MAX);
        Self {
            limit: quota.limit(),
            period,
            suffix: parameter_suffix("log", &format!("{}/{period}", quota.limit())),
        }
    }

    /// How long from `now` until the entry at `entry` leaves the window.
    fn until_gone(&self, entry: i64, now: i64) -> Duration {
        let nanos = entry.saturating_add(self.period).saturating_sub(now);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(0))
    }
}

impl CasCore for SlidingLogCore {
    type State = Log;

    fn capacity(&self) -> u64 {
        self.limit
    }

    fn suffix(&self) -> &str {
        &self.suffix
    }

    fn encode(&self, log: &Log) -> Vec<u8> {
        let mut bytes = Vec::with_capacity(9 + log.0.len());
        bytes.push(VERSION);
        let Some((&first, rest)) = log.0.split_first() else {
            return bytes;
        };
        bytes.extend_from_slice(&first.to_le_bytes());
        let mut previous = first;
        for &entry in rest {
            let mut delta = entry.abs_diff(previous);
            previous = entry;
            loop {
                let byte = (delta & 0x7f) as u8;
                delta >>= 7;
                if delta == 0 {
                    bytes.push(byte);
                    break;
                }
                bytes.push(byte | 0x80);
            }
        }
        bytes
    }

    fn decode(&self, bytes: &[u8]) -> Option<Log> {
        let (&version, rest) = bytes.split_first()?;
        if version != VERSION {
            return None;
        }
        if rest.is_empty() {
            return Some(Log(Vec::new()));
        }
        let (first, mut rest) = rest.split_first_chunk::<8>()?;
        let mut entries = vec![i64::from_le_bytes(*first)];
        let mut previous = entries[0];
        while !rest.is_empty() {
            let mut delta: u64 = 0;
            let mut shift = 0;
            loop {
                let (&byte, tail) = rest.split_first()?;
                rest = tail;
                if shift == 63 && byte > 1 {
                    return None; // more than 64 bits
                }
                delta |= u64::from(byte & 0x7f) << shift;
                if byte & 0x80 == 0 {
                    break;
                }
                shift += 7;
            }
            previous = previous.checked_add_unsigned(delta)?;
            entries.push(previous);
            if entries.len() as u64 > self.limit {
                return None;
            }
        }
        Some(Log(entries))
    }

    /// Entries after `now` plus the skew are clamped to it: no writer's
    /// clock could have been that far ahead. The log stays sorted.
    fn repair(&self, log: &mut Log, now: i64, skew: i64) -> bool {
        let latest = now.saturating_add(skew);
        let mut beyond = false;
        for entry in log.0.iter_mut().rev() {
            if *entry <= latest {
                break;
            }
            *entry = latest;
            beyond = true;
        }
        beyond
    }

    fn decide(&self, state: Option<&Log>, ask: Ask) -> Step<Log> {
        let entries = state.map_or(&[][..], |log| &log.0[..]);
        // Time never runs backwards for a key: an older event is decided
        // and recorded as of the newest entry.
        let now = entries
            .last()
            .map_or(ask.now, |&newest| ask.now.max(newest));
        let cutoff = now.saturating_sub(self.period);
        let live = &entries[entries.partition_point(|&entry| entry <= cutoff)..];
        let count = live.len() as u64;
        let allowed = count + ask.cost <= self.limit;
        let record = allowed || ask.strict;
        let after: Vec<i64> = if record {
            // Strict mode: a denied request's entries push out the oldest.
            let overflow = (count + ask.cost).saturating_sub(self.limit) as usize;
            let keep = &live[overflow.min(live.len())..];
            let added = ask.cost as usize - overflow.saturating_sub(live.len());
            keep.iter()
                .copied()
                .chain(std::iter::repeat_n(now, added))
                .collect()
        } else {
            live.to_vec()
        };
        let remaining = self.limit - after.len() as u64;
        // Waits count from the request's own time, even when the log's
        // newest entry is ahead of it.
        let reset_after = after
            .last()
            .map_or(Duration::ZERO, |&newest| self.until_gone(newest, ask.now));
        let decision = if allowed {
            Decision::allowed(self.limit, remaining, reset_after)
        } else {
            // The oldest `excess` entries must leave for the cost to fit.
            let excess = (after.len() as u64 + ask.cost - self.limit) as usize;
            let retry = self.until_gone(after[excess - 1], ask.now);
            Decision::denied(self.limit, remaining, reset_after, retry)
        }
        .with_used(after.len() as f64);
        Step {
            decision,
            delay: Duration::ZERO,
            write: record.then_some((Log(after), reset_after)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: i64 = 1_000_000_000;

    fn core(quota: &str) -> SlidingLogCore {
        SlidingLogCore::new(quota.parse().unwrap())
    }

    fn ask(cost: u64, now: i64, strict: bool) -> Ask {
        Ask {
            cost,
            now,
            strict,
            max_delay: Duration::ZERO,
        }
    }

    /// Runs one request against `log`, keeping the written state.
    fn run(core: &SlidingLogCore, log: &mut Option<Log>, ask: Ask) -> Decision {
        let step = core.decide(log.as_ref(), ask);
        if let Some((next, _)) = step.write {
            // Every written state survives the store.
            assert_eq!(core.decode(&core.encode(&next)), Some(next.clone()));
            *log = Some(next);
        }
        step.decision
    }

    /// A deterministic xorshift, so the test needs no seed plumbing.
    fn pseudo_random(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    #[test]
    fn exact_against_a_naive_count() {
        let log_core = core("7/10s");
        let period = 10 * SECOND;
        let mut log = None;
        let mut admitted: Vec<(i64, u64)> = Vec::new();
        let mut seed = 0x9e37_79b9_7f4a_7c15;
        let mut now = 1_800_000_000 * SECOND;
        for _ in 0..5_000 {
            now += (pseudo_random(&mut seed) % (3 * SECOND as u64)) as i64;
            let cost = 1 + pseudo_random(&mut seed) % 3;
            let in_window: u64 = admitted
                .iter()
                .filter(|&&(at, _)| at > now - period)
                .map(|&(_, cost)| cost)
                .sum();
            let expected = in_window + cost <= 7;
            let decision = run(&log_core, &mut log, ask(cost, now, false));
            assert_eq!(decision.is_allowed(), expected, "at {now}");
            if expected {
                admitted.push((now, cost));
                assert_eq!(decision.remaining(), 7 - in_window - cost);
            } else {
                // Waiting exactly `retry_after` makes the same request fit.
                let retry = decision.retry_after().unwrap().as_nanos() as i64;
                let later = log_core.decide(log.as_ref(), ask(cost, now + retry, false));
                assert!(later.decision.is_allowed());
                let sooner = log_core.decide(log.as_ref(), ask(cost, now + retry - 1, false));
                assert!(sooner.decision.is_denied());
            }
            assert!(log.as_ref().unwrap().0.len() <= 7);
        }
    }

    #[test]
    fn size_stays_bounded_at_the_limit() {
        let log_core = core("100/minute");
        let mut log = None;
        for i in 0..1_000 {
            run(&log_core, &mut log, ask(1, i * 1_000_000, true));
            let stored = log.as_ref().unwrap();
            assert!(stored.0.len() <= 100);
            assert!(log_core.encode(stored).len() <= 1 + 8 + 99 * 4);
        }
        assert_eq!(log.unwrap().0.len(), 100);
    }

    #[test]
    fn strict_mode_keeps_a_fast_client_denied_until_it_slows_down() {
        let log_core = core("2/second");
        let mut lenient = None;
        let mut strict = None;
        // Three requests a second, for five seconds.
        let mut admitted = (0, 0);
        for i in 0..15 {
            let now = i * SECOND / 3;
            admitted.0 += u64::from(run(&log_core, &mut lenient, ask(1, now, false)).is_allowed());
            admitted.1 += u64::from(run(&log_core, &mut strict, ask(1, now, true)).is_allowed());
        }
        assert_eq!(admitted, (10, 2));
        // A pause of one period lets it through again.
        let last = 14 * SECOND / 3;
        let back = run(&log_core, &mut strict, ask(1, last + SECOND, true));
        assert!(back.is_allowed());
    }

    #[test]
    fn strict_denial_retries_after_its_own_entries_leave() {
        let log_core = core("3/second");
        let mut log = None;
        run(&log_core, &mut log, ask(3, 0, true));
        let denied = run(&log_core, &mut log, ask(2, SECOND / 2, true));
        assert!(denied.is_denied());
        assert_eq!(log.as_ref().unwrap().0, vec![0, SECOND / 2, SECOND / 2]);
        assert_eq!(denied.retry_after(), Some(Duration::from_secs(1)));
        assert_eq!(denied.reset_after(), Duration::from_secs(1));
        assert_eq!(denied.remaining(), 0);
    }

    #[test]
    fn older_events_are_decided_as_of_the_newest_entry() {
        let log_core = core("2/second");
        let mut log = None;
        run(&log_core, &mut log, ask(1, 5 * SECOND, false));
        let late = run(&log_core, &mut log, ask(1, 0, false));
        assert!(late.is_allowed());
        assert_eq!(log.as_ref().unwrap().0, vec![5 * SECOND, 5 * SECOND]);
        // Counted from the event's own time, 5 s before the entries.
        assert_eq!(late.reset_after(), Duration::from_secs(6));
    }

    #[test]
    fn ttl_covers_the_newest_entry() {
        let log_core = core("2/minute");
        let step = log_core.decide(None, ask(1, 0, false));
        // Read for a period; the engine adds the expiry slack.
        assert_eq!(step.write.unwrap().1, Duration::from_secs(60));
        let full = Log(vec![0, 0]);
        let denied = log_core.decide(Some(&full), ask(1, 30 * SECOND, false));
        assert!(denied.write.is_none(), "a lenient denial writes nothing");
    }

    #[test]
    fn encoding_is_compact_and_decode_rejects_garbage() {
        let log_core = core("4/second");
        let log = Log(vec![
            -5,
            1_800_000_000 * SECOND,
            1_800_000_000 * SECOND,
            i64::MAX,
        ]);
        let bytes = log_core.encode(&log);
        assert_eq!(log_core.decode(&bytes), Some(log));
        assert_eq!(log_core.encode(&Log(vec![])), vec![VERSION]);
        assert_eq!(log_core.decode(&[VERSION]), Some(Log(vec![])));
        let mut too_long = log_core.encode(&Log(vec![0; 4]));
        too_long.push(0);
        for bad in [
            &b""[..],
            b"hello",
            b"3.25 1800000000",
            &[VERSION, 1, 2, 3],
            &[VERSION, 0, 0, 0, 0, 0, 0, 0, 0, 0x80],
            &[
                VERSION, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                0xff, 0x7f,
            ],
            &[VERSION, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 1],
            &too_long,
        ] {
            assert_eq!(log_core.decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn parameters_name_the_key() {
        assert_ne!(core("10/second").suffix, core("11/second").suffix);
        assert_ne!(core("10/second").suffix, core("10/minute").suffix);
        assert!(core("10/second").suffix.starts_with("log-"));
    }
}
