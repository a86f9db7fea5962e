//! Token bucket, by optimistic compare-and-swap.

use std::time::Duration;

use super::core::{parameter_suffix, Ask, CasCore, Step};
use super::state_text::{parse_f64, parse_i64, push_f64, push_int, LONGEST_F64, LONGEST_I64};
use crate::decision::Decision;
use crate::error::ConfigError;
use crate::quota::Quota;

/// The longest stored state, `<tokens> <updated>`.
const ENCODED_LEN: usize = LONGEST_F64 + 1 + LONGEST_I64;

/// Slack for float comparisons of token counts.
const EPSILON: f64 = 1e-9;

/// The token bucket (Jean Baptiste Muscat, "Distributed Rate-Limiting Algorithms", Criteo R&D Blog, 2022, <https://medium.com/criteo-engineering/distributed-rate-limiting-algorithms-a35f7e24783>, "Token bucket"; Smyte's parameters from
/// Yunjing Xu, "High-performance rate limiting", Smyte Blog, 2016, <https://medium.com/the-smyte-blog/rate-limiter-df3408325846>).
///
/// Each client has a bucket of at most `capacity` tokens that refills
/// continuously at the quota's rate (its `limit` tokens per `period`,
/// fractions kept). A request of cost `c` takes `c` tokens if the bucket
/// holds them. The state is one memcached value, `<tokens> <updated>`, read
/// with its CAS token and written back with compare-and-swap (created with
/// `add`), in the shared optimistic loop ([`CasPolicy`](crate::algorithm::CasPolicy)).
///
/// The capacity defaults to the limit; a larger one lets a quiet client
/// burst above the rate for a moment ("initial tokens above the limit"),
/// without raising the rate it can sustain.
///
/// **Reaction time** (Tony Finch, "hybrid quota-linear rate limiter", 2026, <https://dotat.at/@/2026-01-12-hqlr.html>): a bucket that starts
/// full lets a client sending at `a` times the permitted rate through about
/// `q·a/(a−1)` requests before its first denial, where `q` is the capacity:
/// the bucket drains only at the difference between the two rates. Finch's
/// figure is the moment the bucket runs dry; since each request needs a
/// whole token, the exact count is `⌊(q−1)·a/(a−1)⌋ + 1`, up to `1/(a−1)`
/// fewer. For `q = 60` that is 79 at 4× (Finch: 80), 119 at 2× (120) and
/// 178 at 1.5× (180), as `tests/algorithms/reaction_time.rs` measures. Linear limiters
/// are slow to throttle a moderately abusive client; the sliding window and
/// [`HybridQuota`](crate::HybridQuota) react within one period.
///
/// **Strict mode** ([`DeniedRequests::Counted`](crate::limiter::DeniedRequests)):
/// denied requests take their tokens too, down to `−capacity`, so a client
/// that keeps sending faster than the rate stays denied until it slows
/// down.
///
/// **Timestamps** ([`check_at`](crate::RateLimiter::check_at)): the state
/// remembers when it was last updated, and an event older than that is
/// decided as of that time: it earns no tokens and moves nothing back. Its
/// `retry_after` and `reset_after` count from its own time.
///
/// **Stored state** is validated: a value that is not a bucket (or holds
/// tokens outside `±capacity`) counts as a new client, and an update time
/// further ahead than the limiter's `max_clock_skew` is clamped to it;
/// either repair is counted in
/// [`FailureStats::repaired`](crate::limiter::FailureStats). No decision announces a
/// wait longer than a refill from `−capacity` to `capacity` plus the skew.
///
/// ```
/// use memcache_ratelimit::{ManualClock, MemoryStore, RateLimiter, TokenBucket};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let clock = ManualClock::from_unix_secs(1_800_000_000);
/// let store = Arc::new(MemoryStore::with_clock(clock.clone()));
/// let bucket = TokenBucket::builder("60/minute".parse()?, store)
///     .capacity(5)
///     .clock(clock.clone())
///     .build()?;
///
/// let burst = bucket.check_n(b"alice", 5).await?;
/// assert!(burst.is_allowed());
/// let next = bucket.check(b"alice").await?;
/// assert!(next.is_denied());
/// assert_eq!(next.retry_after(), Some(Duration::from_secs(1)));
/// clock.advance(Duration::from_millis(2500));
/// assert_eq!(bucket.check(b"alice").await?.remaining(), 1); // 2.5 − 1
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
///
/// A type only names the algorithm: `TokenBucket::builder` starts a
/// [`LimiterBuilder`](crate::LimiterBuilder) whose `build` gives a
/// [`RateLimiter`](crate::RateLimiter).
#[derive(Debug, Clone, Copy)]
pub enum TokenBucket {}

/// The token bucket's core: `capacity` tokens (the quota's limit if
/// `None`) refilled at `quota`'s rate.
pub(crate) fn token_bucket(
    capacity: Option<u64>,
    quota: Quota,
) -> Result<TokenBucketCore, ConfigError> {
    let capacity = capacity.unwrap_or(quota.limit());
    if capacity == 0 {
        return Err(ConfigError::new("capacity", "must be at least 1"));
    }
    Ok(TokenBucketCore::new(capacity, quota))
}

/// The arithmetic: a bucket of `capacity` tokens refilled at `rate` tokens
/// per nanosecond.
#[derive(Debug, Clone)]
pub(crate) struct TokenBucketCore {
    capacity: u64,
    rate: f64,
    suffix: String,
}

/// Tokens held, as of a time (unix nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Bucket {
    tokens: f64,
    updated: i64,
}

impl TokenBucketCore {
    pub(crate) fn new(capacity: u64, quota: Quota) -> Self {
        let period = quota.period().as_nanos();
        Self {
            capacity,
            rate: quota.limit() as f64 / period as f64,
            suffix: parameter_suffix("tb", &format!("{capacity}/{}/{period}", quota.limit())),
        }
    }

    /// Nanoseconds (rounded up) for the bucket to gain `tokens`.
    fn time_for(&self, tokens: f64) -> Duration {
        if tokens <= EPSILON {
            return Duration::ZERO;
        }
        Duration::from_nanos((tokens / self.rate).ceil().min(u64::MAX as f64) as u64)
    }

    /// The tokens held as of `at`, and the time they are counted at: time
    /// never runs backwards for a bucket, so an older event is decided as
    /// of the last update.
    fn refilled(&self, state: Option<&Bucket>, at: i64) -> (f64, i64) {
        let capacity = self.capacity as f64;
        match state {
            None => (capacity, at),
            Some(bucket) => {
                let now = at.max(bucket.updated);
                let earned = now.saturating_sub(bucket.updated) as f64 * self.rate;
                ((bucket.tokens + earned).min(capacity), now)
            }
        }
    }

    /// For a bucket left with `after` tokens at `now`, asked about at
    /// `asked`: the whole tokens remaining, how far `now` is ahead of
    /// `asked`, and the time from `asked` until the bucket is full.
    fn report(&self, after: f64, now: i64, asked: i64) -> (u64, Duration, Duration) {
        let remaining = (after + EPSILON).floor().max(0.0) as u64;
        // Waits count from the request's own time: a bucket updated ahead
        // of it (by a writer whose clock is ahead) earns nothing until then.
        let lead = Duration::from_nanos(now.saturating_sub(asked).unsigned_abs());
        let reset_after = lead.saturating_add(self.time_for(self.capacity as f64 - after));
        (remaining, lead, reset_after)
    }
}

impl CasCore for TokenBucketCore {
    type State = Bucket;

    fn capacity(&self) -> u64 {
        self.capacity
    }

    fn suffix(&self) -> &str {
        &self.suffix
    }

    fn encode(&self, state: &Bucket) -> Vec<u8> {
        let mut out = Vec::with_capacity(ENCODED_LEN);
        self.encode_into(state, &mut out);
        out
    }

    /// `<tokens> <updated>`: the tokens' shortest decimal, the time's
    /// digits.
    fn encode_into(&self, state: &Bucket, out: &mut Vec<u8>) {
        push_f64(out, state.tokens);
        out.push(b' ');
        push_int(out, state.updated);
    }

    /// `<tokens> <updated>`, read as [`words`](super::state_text::words) reads a state; anything
    /// else is `None`. Split at its one space by hand: two words through
    /// `words`' iterator, and the check that no third follows, cost a
    /// decision 118 instructions more (callgrind).
    fn decode(&self, bytes: &[u8]) -> Option<Bucket> {
        let text = bytes.trim_ascii();
        let space = text.iter().position(|&byte| byte == b' ')?;
        let tokens = parse_f64(&text[..space])?;
        let capacity = self.capacity as f64;
        (tokens.is_finite() && (-capacity..=capacity).contains(&tokens)).then_some(())?;
        Some(Bucket {
            tokens,
            updated: parse_i64(&text[space + 1..])?,
        })
    }

    /// An update time after `now` plus the skew is moved back to it: no
    /// writer's clock could have been that far ahead. A time less than a
    /// refill from `−capacity` to `capacity` beyond that is most likely a
    /// clock running ahead of the allowed skew: the tokens the move would
    /// give away are taken off with it (down to one capacity of debt), so
    /// the bucket refills along the same line and gains nothing. A time
    /// further out is no clock's: the bucket keeps its tokens at the new
    /// time.
    fn repair(&self, bucket: &mut Bucket, now: i64, skew: i64) -> bool {
        let latest = now.saturating_add(skew);
        if bucket.updated <= latest {
            return false;
        }
        let capacity = self.capacity as f64;
        let owed = bucket.updated.saturating_sub(latest) as f64 * self.rate;
        if owed <= 2.0 * capacity {
            bucket.tokens = (bucket.tokens - owed).max(-capacity);
        }
        bucket.updated = latest;
        true
    }

    fn decide(&self, state: Option<&Bucket>, ask: Ask) -> Step<Bucket> {
        let capacity = self.capacity as f64;
        let cost = ask.cost as f64;
        let (tokens, now) = self.refilled(state, ask.now);
        let allowed = tokens + EPSILON >= cost;
        let after = if allowed || ask.strict {
            (tokens - cost).max(-capacity)
        } else {
            tokens
        };
        let (remaining, lead, reset_after) = self.report(after, now, ask.now);
        let decision = if allowed {
            Decision::allowed(self.capacity, remaining, reset_after)
        } else {
            Decision::denied(
                self.capacity,
                remaining,
                reset_after,
                lead.saturating_add(self.time_for(cost - after)),
            )
        }
        .with_used(capacity - after);
        let state = Bucket {
            tokens: after,
            updated: now,
        };
        let write = (allowed || ask.strict).then_some((state, reset_after));
        Step {
            decision,
            delay: Duration::ZERO,
            write,
        }
    }

    /// Refills the bucket to the refunded request's time exactly as
    /// [`decide`](CasCore::decide) does, then puts `cost` tokens back,
    /// never above the capacity: what a full bucket did not hold it does
    /// not get back, and a refund on a full bucket leaves it full.
    fn refund(&self, state: Option<&Bucket>, ask: Ask) -> Step<Bucket> {
        let capacity = self.capacity as f64;
        let (tokens, now) = self.refilled(state, ask.now);
        let after = (tokens + ask.cost as f64).min(capacity);
        let (remaining, _, reset_after) = self.report(after, now, ask.now);
        let decision =
            Decision::allowed(self.capacity, remaining, reset_after).with_used(capacity - after);
        let bucket = Bucket {
            tokens: after,
            updated: now,
        };
        // No state is a full bucket already; nor is a state changed by
        // giving back nothing.
        let write = state
            .filter(|&&stored| stored != bucket)
            .map(|_| (bucket, reset_after));
        Step {
            decision,
            delay: Duration::ZERO,
            write,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn core(capacity: u64, quota: &str) -> TokenBucketCore {
        TokenBucketCore::new(capacity, quota.parse().unwrap())
    }

    #[test]
    fn refills_continuously_and_keeps_fractions() {
        let tb = core(10, "10/second");
        let full = tb.decide(None, Ask::at(10, 0));
        let (empty, _) = full.write.unwrap();
        assert_eq!(empty.tokens, 0.0);
        let later = tb.decide(Some(&empty), Ask::at(1, 150_000_000));
        assert!(later.decision.is_allowed());
        assert!((later.write.unwrap().0.tokens - 0.5).abs() < 1e-9);
    }

    #[test]
    fn state_round_trips_and_garbage_is_rejected() {
        let tb = core(10, "10/second");
        let bucket = Bucket {
            tokens: 3.25,
            updated: 1_800_000_000_123_456_789,
        };
        assert_eq!(tb.decode(&tb.encode(&bucket)), Some(bucket));
        for bad in [&b"hello"[..], b"1", b"NaN 5", b"11 5", b"1 x"] {
            assert_eq!(tb.decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn older_events_earn_nothing() {
        let tb = core(10, "10/second");
        let bucket = Bucket {
            tokens: 0.0,
            updated: 1_000_000_000,
        };
        let step = tb.decide(Some(&bucket), Ask::at(1, 0));
        assert!(step.decision.is_denied());
        // Counted from the event's own time: the second until the bucket's,
        // then 100 ms for one token.
        assert_eq!(
            step.decision.retry_after(),
            Some(Duration::from_millis(1_100))
        );
    }

    #[test]
    fn a_refund_restores_the_tokens_taken() {
        let tb = core(10, "10/second");
        let before = Bucket {
            tokens: 4.5,
            updated: 1_000,
        };
        let taken = tb.decide(Some(&before), Ask::at(3, 1_000)).write.unwrap().0;
        assert_eq!(taken.tokens, 1.5);
        let step = tb.refund(Some(&taken), Ask::refund_at(3, 1_000));
        assert!(step.decision.is_allowed());
        assert_eq!(step.decision.remaining(), 4);
        assert_eq!(step.delay, Duration::ZERO);
        // 5.5 tokens short of full, at 10 a second.
        assert_eq!(step.decision.reset_after(), Duration::from_millis(550));
        assert_eq!(step.write.unwrap(), (before, Duration::from_millis(550)));
        // Later, it refills first, as a decision would.
        let later = tb.refund(Some(&taken), Ask::refund_at(3, 100_001_000));
        assert_eq!(later.write.unwrap().0.tokens, 5.5);
    }

    #[test]
    fn a_refund_never_fills_beyond_the_capacity() {
        let tb = core(10, "10/second");
        assert!(tb.refund(None, Ask::refund_at(4, 0)).write.is_none());
        assert_eq!(
            tb.refund(None, Ask::refund_at(4, 0)).decision.remaining(),
            10
        );
        let full = Bucket {
            tokens: 10.0,
            updated: 0,
        };
        let step = tb.refund(Some(&full), Ask::refund_at(4, 0));
        assert_eq!(step.decision.remaining(), 10);
        assert!(step.write.is_none(), "a full bucket stays as it was");
        let nine = Bucket {
            tokens: 9.0,
            updated: 0,
        };
        let step = tb.refund(Some(&nine), Ask::refund_at(4, 0));
        assert_eq!(step.write.unwrap().0.tokens, 10.0);
    }

    #[test]
    fn a_refund_gives_back_no_more_than_was_taken() {
        let tb = core(5, "5/minute");
        let mut state = None;
        let mut run = |ask: Ask| {
            let step = tb.apply(state.as_ref(), ask);
            if let Some((next, _)) = step.write {
                state = Some(next);
            }
            step.decision
        };
        assert!(run(Ask::at(5, 0)).is_allowed());
        assert_eq!(run(Ask::refund_at(1, 0)).remaining(), 1);
        assert!(run(Ask::at(1, 0)).is_allowed());
        assert!(run(Ask::at(1, 0)).is_denied());
    }

    #[test]
    fn parameters_name_the_key() {
        assert_ne!(core(10, "10/second").suffix, core(11, "10/second").suffix);
        assert_ne!(core(10, "10/second").suffix, core(10, "10/minute").suffix);
        assert!(core(10, "10/second").suffix.starts_with("tb-"));
    }
}
