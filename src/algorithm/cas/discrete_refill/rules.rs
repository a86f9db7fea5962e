//! Smyte's bucket rules, written once for the two algorithms on them:
//! [`DiscreteRefill`](super::DiscreteRefill) and
//! [`Sessionize`](crate::Sessionize). Pure functions from the stored
//! tokens and refill mark, the time and the request to the bucket to write
//! and the decision; integers only.

use std::time::Duration;

use crate::algorithm::cas::core::Ask;
use crate::decision::Decision;
use crate::quota::Quota;

/// The tokens held and the refill mark (unix nanoseconds), the moment the
/// next refill period started counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bucket {
    pub(crate) tokens: u64,
    pub(crate) mark: i64,
}

/// A bucket of at most `max` tokens that gains `refill` tokens at each
/// whole `period` after its refill mark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rules {
    pub(crate) max: u64,
    pub(crate) refill: u64,
    /// The refill period in nanoseconds, at least 1 (a [`Quota`]'s period
    /// is at least a millisecond and at most 366 days).
    pub(crate) period: i64,
}

/// What a request does to a bucket.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Taken {
    /// Whether its cost fitted in the tokens available.
    pub(crate) allowed: bool,
    /// The bucket after it, and how long until that bucket is full again.
    pub(crate) after: Bucket,
    pub(crate) reset_after: Duration,
    /// Whether `after` is to be written (allowed, or a strict denial).
    pub(crate) write: bool,
    pub(crate) decision: Decision,
}

/// `nanos` (possibly negative or beyond `u64`) as a wait: zero when not
/// positive, saturated at `u64::MAX` nanoseconds.
fn wait(nanos: i128) -> Duration {
    if nanos <= 0 {
        return Duration::ZERO;
    }
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

impl Rules {
    /// `quota.limit()` tokens at most, `refill` of them (at least 1) more
    /// at each whole `quota.period()`.
    pub(crate) fn new(quota: Quota, refill: u64) -> Self {
        let period = i64::try_from(quota.period().as_nanos())
            .unwrap_or(i64::MAX)
            .max(1);
        Self {
            max: quota.limit(),
            refill: refill.max(1),
            period,
        }
    }

    /// The parameters naming a bucket, as Smyte's key does: `max`,
    /// `refill` and the period.
    pub(crate) fn parameters(&self) -> String {
        format!("{}/{}/{}", self.max, self.refill, self.period)
    }

    /// The bucket as of `now`, before a request takes anything: a new
    /// client's is full with its mark at `now`; a stored one gains
    /// `refill` for each whole period since its mark (at most `max`), and
    /// its mark moves by those whole periods only. At or before the mark
    /// (an event older than the bucket) nothing is gained or moved.
    pub(crate) fn refilled(&self, state: Option<&Bucket>, now: i64) -> Bucket {
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
    pub(crate) fn until_holding(&self, bucket: Bucket, want: u64, now: i64) -> Duration {
        if bucket.tokens >= want {
            return Duration::ZERO;
        }
        let refills = (want - bucket.tokens).div_ceil(self.refill);
        let at = i128::from(bucket.mark)
            .saturating_add(i128::from(refills).saturating_mul(i128::from(self.period)));
        wait(at.saturating_sub(i128::from(now)))
    }

    /// A request `ask` on the stored bucket `state`. Allowed when its cost
    /// fits in the tokens available, which it then takes. A denial takes
    /// what is left when `strict` (Smyte's `RL.REDUCE` stores `max(available
    /// − take, 0)`), and nothing otherwise. With `restart`, a written
    /// bucket left empty starts a new period at the request's time (never
    /// moving the mark back).
    ///
    /// The decision's `remaining` is the tokens left when allowed, and the
    /// tokens available when denied; `retry_after` is the wait for `cost`
    /// tokens from the bucket as written (for a cost above `max`, which
    /// never fits, the reset).
    pub(crate) fn take(
        &self,
        state: Option<&Bucket>,
        ask: Ask,
        strict: bool,
        restart: bool,
    ) -> Taken {
        let now = ask.now;
        let before = self.refilled(state, now);
        let available = before.tokens;
        let allowed = ask.cost <= available;
        let write = allowed || strict;
        let tokens = match (allowed, strict) {
            (true, _) => available - ask.cost,
            (false, true) => 0,
            (false, false) => available,
        };
        let mark = if write && tokens == 0 && restart {
            before.mark.max(now)
        } else {
            before.mark
        };
        let after = Bucket { tokens, mark };
        // A strict denial of an empty bucket that does not restart leaves
        // it as it was: writing it again would only cost a store call (its
        // expiry, set for the same bucket, still holds).
        let write = write && state != Some(&after);
        let reset_after = self.until_holding(after, self.max, now);
        let decision = if allowed {
            Decision::allowed(self.max, tokens, reset_after)
        } else {
            let retry_after = if ask.cost > self.max {
                reset_after
            } else {
                self.until_holding(after, ask.cost, now)
            };
            Decision::denied(self.max, available, reset_after, retry_after)
        }
        .with_used((self.max - tokens) as f64);
        Taken {
            allowed,
            after,
            reset_after,
            write,
            decision,
        }
    }

    /// Puts back up to `ask.cost` tokens in the stored bucket, never above
    /// `max`, without moving the mark: refilling first and then adding, or
    /// adding and then refilling, gives the same bucket at every later
    /// time. Returns the allowed decision describing the bucket after it,
    /// and the bucket to write (`None` when nothing changes: no state is a
    /// full bucket already).
    pub(crate) fn give_back(
        &self,
        state: Option<&Bucket>,
        ask: Ask,
    ) -> (Decision, Option<(Bucket, Duration)>) {
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
        (decision, write)
    }

    /// Cuts tokens above `max` to `max`, and moves a mark further ahead of
    /// `now` than the skew back to `now + skew`, as the other algorithms
    /// clamp their times: no writer could have stored either. Returns
    /// whether anything changed.
    pub(crate) fn repair(&self, bucket: &mut Bucket, now: i64, skew: i64) -> bool {
        let latest = now.saturating_add(skew);
        let repaired = bucket.tokens > self.max || bucket.mark > latest;
        bucket.tokens = bucket.tokens.min(self.max);
        bucket.mark = bucket.mark.min(latest);
        repaired
    }
}
