//! GCRA, the generic cell rate algorithm, by optimistic compare-and-swap;
//! with a delay mode that makes it a leaky bucket used as a queue.

use std::sync::Arc;
use std::time::Duration;

use super::core::{parameter_suffix, Ask, CasCore, Step};
use super::optimistic::CasLimiter;
use super::stats::CasStats;
use crate::decision::Decision;
use crate::error::{ConfigError, Error};
use crate::limiter::{delegate_rate_limiter, other_algorithm, LimiterBuilder};
use crate::quota::Quota;
use crate::spec::{Algorithm, LimiterSpec};
use crate::store::Store;

/// GCRA (Tony Finch, "hybrid quota-linear rate limiter", 2026, <https://dotat.at/@/2026-01-12-hqlr.html>, "the case for GCRA").
///
/// The whole state is one number per client: the theoretical arrival time
/// (TAT), the moment the client's past traffic would have been served had
/// it arrived at exactly the permitted rate. With emission interval
/// `T = period / limit` and a burst of `B` requests, a request of cost `c`
/// at time `t` is allowed when
///
/// ```text
/// max(TAT, t) + c·T − t ≤ B·T
/// ```
///
/// and then moves the TAT to `max(TAT, t) + c·T`. It behaves exactly as a
/// [`TokenBucket`](crate::TokenBucket) of capacity `B`, refilled at the
/// quota's rate, in half the state. Times are kept exactly, in units of
/// `1/limit` nanoseconds, so no rounding accumulates. It uses the same
/// optimistic compare-and-swap loop as the token bucket.
///
/// **Delay mode, the leaky bucket as a queue**: [`Gcra::until_ready`] and
/// [`Gcra::reserve`] accept a request that does not fit yet if it will fit
/// within `max_delay`: the slot is reserved at once and the caller waits
/// until it comes, so requests leave at the permitted rate instead of being
/// turned away. A request that would have to wait longer than `max_delay`
/// is rejected at once and reserves nothing. A reservation waits at most
/// one period of the quota: a longer `max_delay` counts as one period.
///
/// **Strict mode** moves the TAT for denied requests too, at most `2·B·T`
/// ahead, so a client that keeps sending stays denied until it slows down.
///
/// **Timestamps**: an event older than the TAT's present sees the TAT
/// further ahead of it, so it is judged more strictly, never more leniently.
///
/// **Stored state** is validated: a value that is not a number counts as a
/// new client, and a TAT further ahead than any writer could have put it
/// (the burst tolerance `B·T`, plus the longer of one period and `B·T`,
/// plus the limiter's `max_clock_skew`) is clamped to that horizon; either
/// repair is counted in [`FailureStats::repaired`](crate::FailureStats).
/// No decision announces a wait beyond the horizon.
///
/// ```
/// use memcache_ratelimit::{Gcra, ManualClock, MemoryStore, RateLimiter};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let clock = ManualClock::from_unix_secs(1_800_000_000);
/// let store = Arc::new(MemoryStore::with_clock(clock.clone()));
/// let gcra = Gcra::builder("10/second".parse()?, store).burst(2).clock(clock.clone()).build()?;
///
/// assert!(gcra.check(b"alice").await?.is_allowed());
/// assert!(gcra.check(b"alice").await?.is_allowed());
/// assert!(gcra.check(b"alice").await?.is_denied());
///
/// // Queue instead: the next slot is 100 ms away, within the 250 ms allowed.
/// let slot = gcra.reserve(b"alice", 1, Duration::from_millis(250)).await?;
/// assert!(slot.decision().is_allowed());
/// assert_eq!(slot.delay(), Duration::from_millis(100));
/// // Two more slots would be 300 ms away: rejected at once.
/// let full = gcra.reserve(b"alice", 2, Duration::from_millis(250)).await?;
/// assert!(full.decision().is_denied());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct Gcra {
    inner: CasLimiter<GcraCore>,
}

/// A request accepted for later, or rejected, in delay mode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reservation {
    decision: Decision,
    delay: Duration,
}

impl Reservation {
    /// Whether the request got a slot, and the limit's state.
    pub fn decision(&self) -> Decision {
        self.decision
    }

    /// How long to wait before acting, when the request got a slot.
    pub fn delay(&self) -> Duration {
        self.delay
    }
}

impl Gcra {
    /// Starts building a GCRA limiter enforcing `quota` on `store`.
    pub fn builder(quota: Quota, store: Arc<dyn Store>) -> LimiterBuilder<Gcra> {
        LimiterBuilder::from_spec(
            LimiterSpec::new(Algorithm::Gcra { burst: None }, quota),
            store,
        )
    }

    /// The burst: how many requests a quiet client may send at once.
    pub fn burst(&self) -> u64 {
        self.inner.core.burst
    }

    /// The key holding `client`'s theoretical arrival time.
    pub fn key(&self, client: &[u8]) -> Vec<u8> {
        self.inner.key(client)
    }

    /// Retries, conflicts and give-ups of the compare-and-swap loop.
    pub fn cas_stats(&self) -> CasStats {
        self.inner.stats()
    }

    /// Reserves a slot for a request of `cost` that may wait up to
    /// `max_delay`, without waiting. An allowed reservation is already
    /// counted: act after [`Reservation::delay`].
    pub async fn reserve(
        &self,
        key: &[u8],
        cost: u64,
        max_delay: Duration,
    ) -> Result<Reservation, Error> {
        let settings = &self.inner.settings;
        let now = settings.now()?;
        match self.inner.step(key, cost, now, max_delay).await {
            Ok((decision, delay)) => Ok(Reservation { decision, delay }),
            // The failure policy decides; its decision is immediate, so
            // there is nothing to wait for.
            Err(error) => {
                let decision = settings
                    .failures
                    .decide(Err(error), settings.quota, key, cost, now)
                    .await?;
                Ok(Reservation {
                    decision,
                    delay: Duration::ZERO,
                })
            }
        }
    }

    /// Waits until a request of `cost` may go ahead, if that is within
    /// `max_delay`; otherwise returns the denial at once. Waiting uses
    /// tokio's timer.
    pub async fn until_ready(
        &self,
        key: &[u8],
        cost: u64,
        max_delay: Duration,
    ) -> Result<Decision, Error> {
        let reservation = self.reserve(key, cost, max_delay).await?;
        if reservation.decision.is_allowed() && !reservation.delay.is_zero() {
            tokio::time::sleep(reservation.delay).await;
        }
        Ok(reservation.decision)
    }
}

impl LimiterBuilder<Gcra> {
    /// How many requests a quiet client may send at once (default: the
    /// quota's limit). A request may cost at most this much.
    pub fn burst(mut self, requests: u64) -> Self {
        self.spec = self.spec.with_algorithm(Algorithm::Gcra {
            burst: Some(requests),
        });
        self
    }

    /// Validates the settings and builds the limiter.
    pub fn build(self) -> Result<Gcra, ConfigError> {
        let (settings, spec) = self.into_parts(Self::build)?;
        let Algorithm::Gcra { burst } = spec.algorithm else {
            return Err(other_algorithm(&spec, "GCRA"));
        };
        let burst = burst.unwrap_or(settings.quota.limit());
        if burst == 0 {
            return Err(ConfigError::new("burst", "must be at least 1"));
        }
        let core = GcraCore::new(burst, settings.quota);
        Ok(Gcra {
            inner: CasLimiter::new(settings, core, spec.cas),
        })
    }
}

delegate_rate_limiter!(Gcra, "gcra");

/// The arithmetic, in units of `1/limit` nanoseconds: one request is
/// `interval` (the period in nanoseconds) units, and time `t` is
/// `t × limit` units, so the emission interval `period/limit` is exact.
#[derive(Debug, Clone)]
pub(crate) struct GcraCore {
    burst: u64,
    limit: i128,
    interval: i128,
    suffix: String,
}

impl GcraCore {
    pub(crate) fn new(burst: u64, quota: Quota) -> Self {
        let interval = quota.period().as_nanos() as i128;
        Self {
            burst,
            limit: i128::from(quota.limit()),
            interval,
            suffix: parameter_suffix("gcra", &format!("{burst}/{}/{interval}", quota.limit())),
        }
    }

    /// One period, in scaled units: the longest a reservation may wait.
    fn period(&self) -> i128 {
        self.interval.saturating_mul(self.limit)
    }

    /// The furthest ahead of its writer's time a TAT can be, in scaled
    /// units: the burst tolerance, plus the longer of a reservation's
    /// longest wait (one period) and a strict denial's extra tolerance.
    pub(crate) fn horizon(&self) -> i128 {
        let tolerance = i128::from(self.burst).saturating_mul(self.interval);
        tolerance.saturating_add(tolerance.max(self.period()))
    }

    /// Scaled units to a duration, rounded up.
    fn duration(&self, units: i128) -> Duration {
        if units <= 0 {
            return Duration::ZERO;
        }
        let nanos = div(units + self.limit - 1, self.limit);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
    }
}

/// `a / b`, in 64 bits when both fit, as they do but for extreme quotas:
/// a 128-bit division costs several times more.
fn div(a: i128, b: i128) -> i128 {
    match (i64::try_from(a), i64::try_from(b)) {
        (Ok(a), Ok(b)) => i128::from(a / b),
        _ => a / b,
    }
}

/// `value as f64`, through 64 bits when it fits.
fn to_f64(value: i128) -> f64 {
    match i64::try_from(value) {
        Ok(value) => value as f64,
        Err(_) => value as f64,
    }
}

impl CasCore for GcraCore {
    type State = i128;

    fn capacity(&self) -> u64 {
        self.burst
    }

    fn suffix(&self) -> &str {
        &self.suffix
    }

    fn encode(&self, tat: &i128) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(tat, &mut out);
        out
    }

    fn encode_into(&self, tat: &i128, out: &mut Vec<u8>) {
        out.extend_from_slice(itoa::Buffer::new().format(*tat).as_bytes());
    }

    fn decode(&self, bytes: &[u8]) -> Option<i128> {
        std::str::from_utf8(bytes).ok()?.trim().parse().ok()
    }

    /// A TAT further ahead of `now` than [`horizon`](GcraCore::horizon),
    /// plus the skew, is clamped to that: no writer could have stored it.
    fn repair(&self, tat: &mut i128, now: i64, skew: i64) -> bool {
        let skew = i128::from(skew).saturating_mul(self.limit);
        let latest = i128::from(now)
            .saturating_mul(self.limit)
            .saturating_add(self.horizon())
            .saturating_add(skew);
        let beyond = *tat > latest;
        *tat = (*tat).min(latest);
        beyond
    }

    fn decide(&self, state: Option<&i128>, ask: Ask) -> Step<i128> {
        let now = i128::from(ask.now).saturating_mul(self.limit);
        let tolerance = i128::from(self.burst).saturating_mul(self.interval);
        let cost = i128::from(ask.cost).saturating_mul(self.interval);
        let tat = state.copied().unwrap_or(now).max(now);
        let next = tat.saturating_add(cost);
        // How far past the burst tolerance this request would land.
        let excess = next.saturating_sub(now).saturating_sub(tolerance);
        // A reservation waits at most one period.
        let max_delay = (ask.max_delay.as_nanos() as i128)
            .saturating_mul(self.limit)
            .min(self.period());
        let allowed = excess <= max_delay;
        let after = if allowed {
            next
        } else if ask.strict {
            // Never below the TAT: a strict denial takes, it never gives.
            next.min(now.saturating_add(2 * tolerance)).max(tat)
        } else {
            tat
        };
        let remaining = div(
            now.saturating_add(tolerance).saturating_sub(after),
            self.interval,
        )
        .max(0) as u64;
        let reset_after = self.duration(after.saturating_sub(now));
        let decision = if allowed {
            Decision::allowed(self.burst, remaining, reset_after)
        } else {
            let retry = self.duration(
                after
                    .saturating_add(cost)
                    .saturating_sub(tolerance)
                    .saturating_sub(now),
            );
            Decision::denied(self.burst, remaining, reset_after, retry)
        }
        .with_used(to_f64(after.saturating_sub(now).max(0)) / to_f64(self.interval));
        Step {
            decision,
            delay: if allowed {
                self.duration(excess)
            } else {
                Duration::ZERO
            },
            write: (allowed || ask.strict).then_some((after, reset_after)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(cost: u64, now: i64) -> Ask {
        Ask {
            cost,
            now,
            strict: false,
            max_delay: Duration::ZERO,
        }
    }

    #[test]
    fn emission_interval_is_exact_for_awkward_rates() {
        // 3 per second: T = 333,333,333.3 ns. Three requests at every whole
        // second fit exactly for 1,000 s; a rounded T would drift by a
        // nanosecond a second and start denying.
        let core = GcraCore::new(3, "3/second".parse().unwrap());
        let mut tat = None;
        for second in 0..1_000i64 {
            let step = core.decide(tat.as_ref(), ask(3, second * 1_000_000_000));
            assert!(step.decision.is_allowed(), "at {second} s");
            assert_eq!(step.decision.remaining(), 0);
            tat = Some(step.write.unwrap().0);
        }
        let fourth = core.decide(tat.as_ref(), ask(1, 999_000_000_000));
        assert!(fourth.decision.is_denied());
        assert_eq!(
            fourth.decision.retry_after(),
            Some(Duration::from_nanos(333_333_334))
        );
    }

    #[test]
    fn delay_mode_queues_within_the_maximum_and_rejects_beyond() {
        let core = GcraCore::new(1, "10/second".parse().unwrap());
        let first = core.decide(None, ask(1, 0));
        let tat = first.write.unwrap().0;
        let queued = core.decide(
            Some(&tat),
            Ask {
                max_delay: Duration::from_millis(100),
                ..ask(1, 0)
            },
        );
        assert!(queued.decision.is_allowed());
        assert_eq!(queued.delay, Duration::from_millis(100));
        let too_far = core.decide(
            Some(&queued.write.unwrap().0),
            Ask {
                max_delay: Duration::from_millis(100),
                ..ask(1, 0)
            },
        );
        assert!(too_far.decision.is_denied());
        assert!(too_far.write.is_none(), "a rejection reserves nothing");
    }
}
