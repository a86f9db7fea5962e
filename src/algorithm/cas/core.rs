//! The pure side of a compare-and-swap algorithm: a function from the
//! stored state, the time and the request to a decision and a new state.

use std::fmt;
use std::time::Duration;

use crate::decision::Decision;

/// One request, as the pure core sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ask {
    pub(crate) cost: u64,
    pub(crate) now: i64,
    pub(crate) strict: bool,
    /// How long the caller is willing to wait for a later slot (GCRA's
    /// delay mode); zero for an immediate decision.
    pub(crate) max_delay: Duration,
    /// Not a request but the return of one: gives back `cost` units that
    /// an allowed decision at `now` took ([`CasCore::refund`]), for a
    /// request that several limiters decide all or nothing and another of
    /// them denied. `false` for every request decided.
    pub(crate) refund: bool,
}

#[cfg(test)]
impl Ask {
    /// An immediate, lenient request of `cost` at `now`.
    pub(crate) fn at(cost: u64, now: i64) -> Self {
        Ask {
            cost,
            now,
            strict: false,
            max_delay: Duration::ZERO,
            refund: false,
        }
    }

    /// A refund of `cost` that an allowed request at `now` took.
    pub(crate) fn refund_at(cost: u64, now: i64) -> Self {
        Ask {
            refund: true,
            ..Ask::at(cost, now)
        }
    }
}

/// What the pure core decided, and the state to write for it.
#[derive(Debug, Clone)]
pub(crate) struct Step<S> {
    pub(crate) decision: Decision,
    /// How long the caller must wait before acting (delay mode).
    pub(crate) delay: Duration,
    /// The new state and how long it is read (the engine keeps it longer
    /// by the limiter's expiry slack); `None` leaves the store untouched.
    pub(crate) write: Option<(S, Duration)>,
}

/// The arithmetic of one compare-and-swap algorithm: a pure function from
/// the stored state, the time and the request to a decision and a new state.
///
/// `'static` and a `Send` state because groups are decided on a spawned
/// task (see the module documentation).
pub(crate) trait CasCore: Send + Sync + fmt::Debug + 'static {
    type State: Send + Clone + fmt::Debug;

    /// The most cost units one request may ask for.
    fn capacity(&self) -> u64;
    /// The key suffix naming the algorithm and its parameters, so limiters
    /// with different parameters never share a state.
    fn suffix(&self) -> &str;
    fn encode(&self, state: &Self::State) -> Vec<u8>;
    /// [`encode`](Self::encode), appended to `out`.
    fn encode_into(&self, state: &Self::State, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.encode(state));
    }
    /// `None` for bytes that are not this algorithm's state.
    fn decode(&self, bytes: &[u8]) -> Option<Self::State>;
    /// Brings a decoded `state` back within what a writer could have
    /// stored: one whose clock is at most `skew` nanoseconds ahead of
    /// `now`, deciding by this algorithm's rules. Returns whether the state
    /// had to change (a time beyond that horizon, from a clock far ahead or
    /// from another program writing over the key).
    fn repair(&self, state: &mut Self::State, now: i64, skew: i64) -> bool;
    fn decide(&self, state: Option<&Self::State>, ask: Ask) -> Step<Self::State>;
    /// Gives back `ask.cost` units that an allowed decision at `ask.now`
    /// took. The decision is an allowed one describing the state after the
    /// refund (limit, remaining and reset as [`decide`](Self::decide)
    /// reports them), with no delay; the write is the new state, or `None`
    /// when nothing changes (no state stored, or nothing to give back).
    ///
    /// A refund never creates capacity beyond the algorithm's maximum, and
    /// never leaves a state that admits more, over any window, than the
    /// state before the refunded request would have: where the exact
    /// inverse cannot be known it gives back less, never more.
    fn refund(&self, state: Option<&Self::State>, ask: Ask) -> Step<Self::State>;
    /// [`refund`](Self::refund) for a refund, [`decide`](Self::decide)
    /// for a request: what the engine runs for each one it holds.
    fn apply(&self, state: Option<&Self::State>, ask: Ask) -> Step<Self::State> {
        if ask.refund {
            self.refund(state, ask)
        } else {
            self.decide(state, ask)
        }
    }
}

/// A key suffix naming an algorithm and its parameters: `<tag>-<hash>`,
/// where the hash is XXH3 of the parameters' canonical text.
pub(crate) fn parameter_suffix(tag: &str, parameters: &str) -> String {
    format!(
        "{tag}-{:016x}",
        xxhash_rust::xxh3::xxh3_64(parameters.as_bytes())
    )
}
