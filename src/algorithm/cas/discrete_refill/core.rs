//! The arithmetic of [`DiscreteRefill`](super): a pure function from the
//! stored tokens and refill mark, the time and the request to a decision
//! and the bucket to write. Integers only.

use std::time::Duration;

use crate::algorithm::cas::core::{parameter_suffix, Ask, CasCore, Step};
use crate::decision::Decision;
use crate::quota::Quota;

/// The first word of every stored value: text without it is not this
/// algorithm's state (or is another version's), and decodes to `None`.
const TAG: &str = "dr1";

/// A bucket of at most `max` tokens that gains `refill` tokens at each
/// whole `period` after its refill mark.
#[derive(Debug, Clone)]
pub(crate) struct DiscreteRefillCore {
    pub(super) max: u64,
    pub(super) refill: u64,
    /// The refill period in nanoseconds, at least 1 (a [`Quota`]'s period
    /// is at least a millisecond and at most 366 days).
    pub(super) period: i64,
    pub(super) restart_when_empty: bool,
    suffix: String,
}

/// What is stored per client: the tokens held and the refill mark (unix
/// nanoseconds), the moment the next refill period started counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bucket {
    pub(crate) tokens: u64,
    pub(crate) mark: i64,
}

/// `nanos` (possibly negative or beyond `u64`) as a wait: zero when not
/// positive, saturated at `u64::MAX` nanoseconds.
fn wait(nanos: i128) -> Duration {
    if nanos <= 0 {
        return Duration::ZERO;
    }
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

impl DiscreteRefillCore {
    /// `quota.limit()` tokens at most, `refill` of them (at least 1) more
    /// at each whole `quota.period()`.
    pub(crate) fn new(quota: Quota, refill: u64, restart_when_empty: bool) -> Self {
        let (max, refill) = (quota.limit(), refill.max(1));
        let period = i64::try_from(quota.period().as_nanos())
            .unwrap_or(i64::MAX)
            .max(1);
        Self {
            max,
            refill,
            period,
            restart_when_empty,
            // The bucket's identity is (max, refill, period), as Smyte's
            // key: the restart flag is how it is used, not which it is.
            suffix: parameter_suffix("dr", &format!("{max}/{refill}/{period}")),
        }
    }

    /// The bucket as of `now`, before a request takes anything: a new
    /// client's is full with its mark at `now`; a stored one gains
    /// `refill` for each whole period since its mark (at most `max`), and
    /// its mark moves by those whole periods only. At or before the mark
    /// (an event older than the bucket) nothing is gained or moved.
    pub(super) fn refilled(&self, state: Option<&Bucket>, now: i64) -> Bucket {
        let Some(stored) = state else {
            return Bucket {
                tokens: self.max,
                mark: now,
            };
        };
        let tokens = stored.tokens.min(self.max);
        let elapsed = i128::from(now) - i128::from(stored.mark);
        if elapsed <= 0 {
            return Bucket { tokens, ..*stored };
        }
        let refills = elapsed / i128::from(self.period);
        // `refills × period ≤ elapsed`, so the new mark is at most `now`.
        let moved = i128::from(stored.mark) + refills * i128::from(self.period);
        let gained = u128::try_from(refills)
            .unwrap_or(0)
            .saturating_mul(u128::from(self.refill));
        let tokens = u128::from(tokens)
            .saturating_add(gained)
            .min(u128::from(self.max));
        Bucket {
            tokens: u64::try_from(tokens).unwrap_or(self.max),
            mark: i64::try_from(moved).unwrap_or(now),
        }
    }

    /// How long from `now` until `bucket`, left alone, holds `want` tokens
    /// (at most `max`): the whole periods after its mark that the missing
    /// tokens take to refill. Zero if it holds them already.
    pub(super) fn until_holding(&self, bucket: Bucket, want: u64, now: i64) -> Duration {
        if bucket.tokens >= want {
            return Duration::ZERO;
        }
        let refills = (want - bucket.tokens).div_ceil(self.refill);
        let at = i128::from(bucket.mark)
            .saturating_add(i128::from(refills).saturating_mul(i128::from(self.period)));
        wait(at.saturating_sub(i128::from(now)))
    }
}

impl CasCore for DiscreteRefillCore {
    type State = Bucket;

    /// Any cost: one above `max` is denied (and drains the bucket in
    /// strict mode), not an error, as Smyte's `TAKE` above the maximum.
    fn capacity(&self) -> u64 {
        u64::MAX
    }

    fn suffix(&self) -> &str {
        &self.suffix
    }

    fn encode(&self, bucket: &Bucket) -> Vec<u8> {
        format!("{TAG} {} {}", bucket.tokens, bucket.mark).into_bytes()
    }

    /// `dr1 <tokens> <mark>`, decimal, exactly; anything else is `None`.
    fn decode(&self, bytes: &[u8]) -> Option<Bucket> {
        let mut words = std::str::from_utf8(bytes).ok()?.trim().split(' ');
        (words.next()? == TAG).then_some(())?;
        let tokens = words.next()?.parse().ok()?;
        let mark = words.next()?.parse().ok()?;
        words.next().is_none().then_some(Bucket { tokens, mark })
    }

    /// More tokens than `max` are cut to `max`; a mark further ahead of
    /// `now` than the skew is moved back to `now + skew`, as the other
    /// algorithms clamp their times: no writer could have stored either.
    fn repair(&self, bucket: &mut Bucket, now: i64, skew: i64) -> bool {
        let latest = now.saturating_add(skew);
        let repaired = bucket.tokens > self.max || bucket.mark > latest;
        bucket.tokens = bucket.tokens.min(self.max);
        bucket.mark = bucket.mark.min(latest);
        repaired
    }

    fn decide(&self, state: Option<&Bucket>, ask: Ask) -> Step<Bucket> {
        let now = ask.now;
        let before = self.refilled(state, now);
        let available = before.tokens;
        let allowed = ask.cost <= available;
        let write = allowed || ask.strict;
        // Smyte's REDUCE stores `max(available − take, 0)`: a strict
        // denial takes whatever is left.
        let tokens = match (allowed, ask.strict) {
            (true, _) => available - ask.cost,
            (false, true) => 0,
            (false, false) => available,
        };
        // Smyte's STRICT flag: emptied, the bucket starts a new period at
        // the client's time (never moving the mark back).
        let mark = if write && tokens == 0 && self.restart_when_empty {
            before.mark.max(now)
        } else {
            before.mark
        };
        let after = Bucket { tokens, mark };
        let reset_after = self.until_holding(after, self.max, now);
        let decision = if allowed {
            Decision::allowed(self.max, tokens, reset_after)
        } else {
            // A cost above `max` never fits: its retry is the reset.
            let retry_after = if ask.cost > self.max {
                reset_after
            } else {
                self.until_holding(after, ask.cost, now)
            };
            // `remaining` is what was available when the request came.
            Decision::denied(self.max, available, reset_after, retry_after)
        }
        .with_used((self.max - tokens) as f64);
        Step {
            decision,
            delay: Duration::ZERO,
            write: write.then_some((after, reset_after)),
        }
    }

    /// Puts back up to `cost` tokens, never above `max`, without moving
    /// the mark: refilling first and then adding, or adding and then
    /// refilling, gives the same bucket at every later time. A bucket
    /// emptied with `restart_when_empty` keeps its restarted mark, so it
    /// refills later than before the request: less is given back, never
    /// more. No state is a full bucket already, and is left alone.
    fn refund(&self, state: Option<&Bucket>, ask: Ask) -> Step<Bucket> {
        let given = state.map(|stored| Bucket {
            tokens: stored.tokens.saturating_add(ask.cost).min(self.max),
            mark: stored.mark,
        });
        let now = self.refilled(given.as_ref(), ask.now);
        let reset_after = self.until_holding(now, self.max, ask.now);
        let decision = Decision::allowed(self.max, now.tokens, reset_after)
            .with_used((self.max - now.tokens) as f64);
        let write = given
            .filter(|given| Some(given) != state)
            .map(|given| (given, reset_after));
        Step {
            decision,
            delay: Duration::ZERO,
            write,
        }
    }
}
