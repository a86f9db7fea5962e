//! The arithmetic of [`HybridQuota`](super): a pure function from the stored
//! state, the time and the request to a decision and the state to write.

use crate::algorithm::cas::core::{parameter_suffix, Ask, CasCore, Step};
use crate::algorithm::cas::state_text::{
    parse_f64, parse_i64, push_f64, push_int, words, LONGEST_F64, LONGEST_I64,
};
use crate::decision::Decision;
use crate::quota::Quota;
use std::time::Duration;

/// The longest stored state, `<mode> <bucket> <time>`.
const ENCODED_LEN: usize = 2 + LONGEST_F64 + 1 + LONGEST_I64;

/// Slack for float comparisons of token counts.
pub(super) const EPSILON: f64 = 1e-9;

/// The largest quota whose whole token counts an `f64` holds exactly.
pub(super) const MAX_EXACT_LIMIT: u64 = 1 << 53;

/// The arithmetic: quota `quota` per `window` nanoseconds.
#[derive(Debug, Clone)]
pub(crate) struct HybridQuotaCore {
    pub(super) quota: u64,
    pub(super) window: i64,
    pub(super) suffix: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `time` is the start of a fixed window; whole tokens.
    Bursty,
    /// `time` is the last request; tokens accrue continuously.
    Smooth,
}

/// One client's state.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Client {
    pub(super) mode: Mode,
    pub(super) bucket: f64,
    pub(super) time: i64,
}

impl HybridQuotaCore {
    pub(crate) fn new(quota: Quota) -> Self {
        let window = i64::try_from(quota.period().as_nanos()).unwrap_or(i64::MAX);
        Self {
            quota: quota.limit(),
            window,
            suffix: parameter_suffix("hq", &format!("{}/{window}", quota.limit())),
        }
    }

    /// Tokens earned at `rate` over `nanos`.
    pub(super) fn earned(&self, nanos: i64) -> f64 {
        self.quota as f64 * (nanos as f64 / self.window as f64)
    }

    /// Nanoseconds (rounded up) to earn `tokens`.
    pub(super) fn time_for(&self, tokens: f64) -> Duration {
        if tokens <= EPSILON {
            return Duration::ZERO;
        }
        let nanos = (tokens * self.window as f64 / self.quota as f64).ceil();
        Duration::from_nanos(nanos.min(u64::MAX as f64) as u64)
    }

    /// How long from `now` until the fixed window starting at `time` ends.
    pub(super) fn window_end(&self, time: i64, now: i64) -> Duration {
        let nanos = time.saturating_add(self.window).saturating_sub(now);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(0))
    }

    /// A fresh bursty window, with this request taken: always allowed.
    pub(super) fn reset(&self, now: i64, cost: u64) -> Step<Client> {
        let client = Client {
            mode: Mode::Bursty,
            bucket: (self.quota - cost) as f64,
            time: now,
        };
        self.conclude(true, client, now, cost, true)
    }

    /// The decision on `client`, as it stands after the request.
    pub(super) fn conclude(
        &self,
        allowed: bool,
        client: Client,
        now: i64,
        cost: u64,
        changed: bool,
    ) -> Step<Client> {
        let remaining = (client.bucket + EPSILON).floor().max(0.0) as u64;
        // Until a whole quota is available again: the same moment after
        // which a missing state means the same as this one.
        let reset_after = match client.mode {
            Mode::Bursty => self.window_end(client.time, now),
            Mode::Smooth => self.time_for(self.quota as f64 - client.bucket),
        };
        let decision = if allowed {
            Decision::allowed(self.quota, remaining, reset_after)
        } else {
            let retry = match client.mode {
                Mode::Bursty => reset_after,
                Mode::Smooth => self.time_for(cost as f64 - client.bucket),
            };
            Decision::denied(self.quota, remaining, reset_after, retry)
        }
        .with_used(self.quota as f64 - client.bucket);
        Step {
            decision,
            delay: Duration::ZERO,
            write: changed.then_some((client, reset_after)),
        }
    }
}

impl CasCore for HybridQuotaCore {
    type State = Client;

    fn capacity(&self) -> u64 {
        self.quota
    }

    fn suffix(&self) -> &str {
        &self.suffix
    }

    fn encode(&self, client: &Client) -> Vec<u8> {
        let mut out = Vec::with_capacity(ENCODED_LEN);
        self.encode_into(client, &mut out);
        out
    }

    /// `<mode> <bucket> <time>`: `b` or `s`, the bucket's shortest
    /// decimal, the time's digits.
    fn encode_into(&self, client: &Client, out: &mut Vec<u8>) {
        out.extend_from_slice(match client.mode {
            Mode::Bursty => b"b ",
            Mode::Smooth => b"s ",
        });
        push_f64(out, client.bucket);
        out.push(b' ');
        push_int(out, client.time);
    }

    /// `<mode> <bucket> <time>` ([`words`]); anything else is `None`.
    fn decode(&self, bytes: &[u8]) -> Option<Client> {
        let mut parts = words(bytes);
        let mode = match parts.next()? {
            b"b" => Mode::Bursty,
            b"s" => Mode::Smooth,
            _ => return None,
        };
        let bucket = parse_f64(parts.next()?)?;
        let time = parse_i64(parts.next()?)?;
        let quota = self.quota as f64;
        let sane = bucket.is_finite() && (-quota..=quota).contains(&bucket);
        (sane && parts.next().is_none()).then_some(Client { mode, bucket, time })
    }

    /// A time after `now` plus the skew is clamped to it: no writer's
    /// clock could have been that far ahead.
    fn repair(&self, client: &mut Client, now: i64, skew: i64) -> bool {
        let latest = now.saturating_add(skew);
        let beyond = client.time > latest;
        client.time = client.time.min(latest);
        beyond
    }

    fn decide(&self, state: Option<&Client>, ask: Ask) -> Step<Client> {
        self.timed_from_request(state, ask, self.decide_from(state, ask))
    }

    /// See [`refund_from`](HybridQuotaCore::refund_from) for the rules.
    fn refund(&self, state: Option<&Client>, ask: Ask) -> Step<Client> {
        self.timed_from_request(state, ask, self.refund_from(state, ask))
    }
}

impl HybridQuotaCore {
    /// `step`, decided as of the stored time when that is ahead of the
    /// request's: waits count from the request's own time.
    fn timed_from_request(
        &self,
        state: Option<&Client>,
        ask: Ask,
        mut step: Step<Client>,
    ) -> Step<Client> {
        if let Some(stored) = state {
            let lead =
                Duration::from_nanos(stored.time.saturating_sub(ask.now).max(0).unsigned_abs());
            if !lead.is_zero() {
                step.decision = step.decision.delayed_by(lead);
                if let Some((_, ttl)) = &mut step.write {
                    *ttl = ttl.saturating_add(lead);
                }
            }
        }
        step
    }

    /// The decision as of the later of the request's time and the stored
    /// time.
    pub(super) fn decide_from(&self, state: Option<&Client>, ask: Ask) -> Step<Client> {
        let quota = self.quota as f64;
        let cost = ask.cost as f64;
        let Some(&stored) = state else {
            return self.reset(ask.now, ask.cost);
        };
        // Time never runs backwards for a client.
        let now = ask.now.max(stored.time);
        let mut client = stored;
        match client.mode {
            Mode::Bursty if client.time.saturating_add(self.window) <= now => {
                return self.reset(now, ask.cost);
            }
            Mode::Bursty if (client.bucket - cost).abs() < EPSILON => {
                // The last tokens: a penalty until the window ends, plus one
                // token for the first request of the next one.
                let remaining = client.time.saturating_add(self.window) - now;
                let smooth = Client {
                    mode: Mode::Smooth,
                    bucket: 1.0 - self.earned(remaining),
                    time: now,
                };
                return self.conclude(true, smooth, now, ask.cost, true);
            }
            Mode::Bursty => {}
            Mode::Smooth => {
                client.bucket += self.earned(now.saturating_sub(client.time));
                client.time = now;
                if client.bucket + EPSILON >= quota {
                    return self.reset(now, ask.cost);
                }
            }
        }
        let allowed = client.bucket + EPSILON >= cost;
        if allowed {
            client.bucket -= cost;
        } else if ask.strict {
            client.bucket = (client.bucket - cost).max(-quota);
        }
        // A denial that takes nothing need not be written: tokens accrue
        // linearly, so the stored state yields the same later decisions, and
        // a flooding client costs no compare-and-swap writes.
        let changed = (allowed || ask.strict) && client != stored;
        self.conclude(allowed, client, now, ask.cost, changed)
    }
}
