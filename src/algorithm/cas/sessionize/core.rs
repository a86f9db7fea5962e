//! The arithmetic of [`Sessionize`](super): Smyte's bucket rules
//! ([`Rules`]), always strict and restarting when empty, with the start
//! of the client's session beside the bucket.

use std::time::Duration;

use crate::algorithm::cas::core::{parameter_suffix, Ask, CasCore, Step};
use crate::algorithm::cas::discrete_refill::{Bucket, Rules};
use crate::algorithm::cas::state_text::{parse_i64, parse_u64, push_int, words_after, LONGEST_I64};
use crate::quota::Quota;

/// The first word of every stored value: text without it is not this
/// algorithm's state (a discrete refill's `dr1` among them), and decodes to
/// `None`.
const TAG: &str = "ds1";

/// Smyte's sessionizing bucket: `max` tokens at most, `refill` more at
/// each whole `period` after the refill mark.
#[derive(Debug, Clone)]
pub(crate) struct SessionizeCore {
    pub(crate) rules: Rules,
    suffix: String,
}

/// What is stored per client: the bucket, and when its session started
/// (unix nanoseconds): the time of the last request allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Session {
    pub(crate) bucket: Bucket,
    pub(crate) start: i64,
}

impl SessionizeCore {
    /// `quota.limit()` tokens at most, `refill` of them (at least 1) more
    /// at each whole `quota.period()`.
    pub(crate) fn new(quota: Quota, refill: u64) -> Self {
        let rules = Rules::new(quota, refill);
        Self {
            rules,
            // Named by (max, refill, period) as the discrete refill's, but
            // under its own tag: another state, so another key.
            suffix: parameter_suffix("ds", &rules.parameters()),
        }
    }
}

impl CasCore for SessionizeCore {
    type State = Session;

    /// Any cost: one above `max` is denied (and drains the bucket), not an
    /// error, as Smyte's `TAKE` above the maximum.
    fn capacity(&self) -> u64 {
        u64::MAX
    }

    fn suffix(&self) -> &str {
        &self.suffix
    }

    fn encode(&self, session: &Session) -> Vec<u8> {
        let mut out = Vec::with_capacity(TAG.len() + 3 * (1 + LONGEST_I64));
        self.encode_into(session, &mut out);
        out
    }

    /// `ds1 <tokens> <mark> <session start>`, decimal.
    fn encode_into(&self, session: &Session, out: &mut Vec<u8>) {
        let Session { bucket, start } = session;
        out.extend_from_slice(TAG.as_bytes());
        out.push(b' ');
        push_int(out, bucket.tokens);
        out.push(b' ');
        push_int(out, bucket.mark);
        out.push(b' ');
        push_int(out, *start);
    }

    /// `ds1 <tokens> <mark> <session start>`, decimal, exactly; anything
    /// else is `None`.
    fn decode(&self, bytes: &[u8]) -> Option<Session> {
        let mut words = words_after(bytes, TAG)?;
        let tokens = parse_u64(words.next()?)?;
        let mark = parse_i64(words.next()?)?;
        let start = parse_i64(words.next()?)?;
        words.next().is_none().then_some(Session {
            bucket: Bucket { tokens, mark },
            start,
        })
    }

    /// The bucket as [`Rules::repair`] repairs it, and a session start
    /// further ahead of `now` than the skew moved back to `now + skew`.
    fn repair(&self, session: &mut Session, now: i64, skew: i64) -> bool {
        let latest = now.saturating_add(skew);
        let bucket = self.rules.repair(&mut session.bucket, now, skew);
        let start = session.start > latest;
        session.start = session.start.min(latest);
        bucket || start
    }

    /// Smyte's `RL.SESSIONIZE`: always strict (a denial takes what is
    /// left, whatever the limiter's `DeniedRequests`), always restarting
    /// an emptied bucket. An allowed request starts a new session at its
    /// own time; a denied one keeps the stored start (a new client's is
    /// the request's time).
    fn decide(&self, state: Option<&Session>, ask: Ask) -> Step<Session> {
        let taken = self
            .rules
            .take(state.map(|session| &session.bucket), ask, true, true);
        let start = match state {
            Some(session) if !taken.allowed => session.start,
            _ => ask.now,
        };
        let session = Session {
            bucket: taken.after,
            start,
        };
        Step {
            decision: taken.decision.with_session_start(start),
            delay: Duration::ZERO,
            write: Some((session, taken.reset_after)),
        }
    }

    /// The bucket's refund ([`Rules::give_back`]); the session start is
    /// left as it is (the one before the refunded request is not known).
    fn refund(&self, state: Option<&Session>, ask: Ask) -> Step<Session> {
        let (decision, write) = self
            .rules
            .give_back(state.map(|session| &session.bucket), ask);
        let start = state.map(|session| session.start);
        Step {
            decision: match start {
                Some(start) => decision.with_session_start(start),
                None => decision,
            },
            delay: Duration::ZERO,
            write: write
                .zip(start)
                .map(|((bucket, ttl), start)| (Session { bucket, start }, ttl)),
        }
    }
}
