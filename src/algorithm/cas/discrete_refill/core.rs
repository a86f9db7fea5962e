//! The discrete refill's core: Smyte's bucket rules ([`Rules`]), with
//! lenient or strict denials and an optional restart, stored as
//! `dr1 <tokens> <mark>`.

use std::time::Duration;

use super::rules::{Bucket, Rules};
use crate::algorithm::cas::core::{parameter_suffix, Ask, CasCore, Step};
use crate::algorithm::cas::state_text::{parse_i64, parse_u64, push_int, words_after, LONGEST_I64};
use crate::quota::Quota;

/// The first word of every stored value: text without it is not this
/// algorithm's state (or is another version's), and decodes to `None`.
const TAG: &str = "dr1";

/// A bucket of at most `max` tokens that gains `refill` tokens at each
/// whole `period` after its refill mark.
#[derive(Debug, Clone)]
pub(crate) struct DiscreteRefillCore {
    pub(crate) rules: Rules,
    pub(super) restart_when_empty: bool,
    suffix: String,
}

impl DiscreteRefillCore {
    /// `quota.limit()` tokens at most, `refill` of them (at least 1) more
    /// at each whole `quota.period()`.
    pub(crate) fn new(quota: Quota, refill: u64, restart_when_empty: bool) -> Self {
        let rules = Rules::new(quota, refill);
        Self {
            rules,
            restart_when_empty,
            // The bucket's identity is (max, refill, period), as Smyte's
            // key: the restart flag is how it is used, not which it is.
            suffix: parameter_suffix("dr", &rules.parameters()),
        }
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
        let mut out = Vec::with_capacity(TAG.len() + 2 * (1 + LONGEST_I64));
        self.encode_into(bucket, &mut out);
        out
    }

    /// `dr1 <tokens> <mark>`, decimal, written without `format!` (see
    /// [`state_text`](crate::algorithm::cas::state_text)): this runs on
    /// every write.
    fn encode_into(&self, bucket: &Bucket, out: &mut Vec<u8>) {
        out.extend_from_slice(TAG.as_bytes());
        out.push(b' ');
        push_int(out, bucket.tokens);
        out.push(b' ');
        push_int(out, bucket.mark);
    }

    /// `dr1 <tokens> <mark>`, decimal, exactly; anything else is `None`.
    fn decode(&self, bytes: &[u8]) -> Option<Bucket> {
        let mut words = words_after(bytes, TAG)?;
        let tokens = parse_u64(words.next()?)?;
        let mark = parse_i64(words.next()?)?;
        words.next().is_none().then_some(Bucket { tokens, mark })
    }

    fn repair(&self, bucket: &mut Bucket, now: i64, skew: i64) -> bool {
        self.rules.repair(bucket, now, skew)
    }

    /// Smyte's `RL.REDUCE` (strict) or `RL.GET` (lenient, above `max`);
    /// the restart is Smyte's `STRICT` flag.
    fn decide(&self, state: Option<&Bucket>, ask: Ask) -> Step<Bucket> {
        let taken = self
            .rules
            .take(state, ask, ask.strict, self.restart_when_empty);
        Step {
            decision: taken.decision,
            delay: Duration::ZERO,
            write: taken.write.then_some((taken.after, taken.reset_after)),
        }
    }

    /// Puts back up to `cost` tokens, never above `max`, without moving
    /// the mark ([`Rules::give_back`]). A bucket emptied with
    /// `restart_when_empty` keeps its restarted mark, so it refills later
    /// than before the request: less is given back, never more.
    fn refund(&self, state: Option<&Bucket>, ask: Ask) -> Step<Bucket> {
        let (decision, write) = self.rules.give_back(state, ask);
        Step {
            decision,
            delay: Duration::ZERO,
            write,
        }
    }
}
