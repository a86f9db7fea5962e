//! Tony Finch's hybrid bursty/smooth quota, by optimistic compare-and-swap.

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

/// Slack for float comparisons of token counts.
const EPSILON: f64 = 1e-9;
/// The largest quota whose whole token counts an `f64` holds exactly.
const MAX_EXACT_LIMIT: u64 = 1 << 53;

/// Tony Finch's hybrid quota (seed `001_c8817f0acf66dd9b.txt`, "hybrid
/// quota-linear algorithm"): low-traffic clients may burst, high-traffic
/// clients are held to an even rate.
///
/// With quota `q` per window `w` (the [`Quota`]'s limit and period) and
/// `rate = q/w`, each client has a `bucket` of tokens, a `time` and a
/// `mode`. In **bursty** mode `time` is the start of a fixed window of the
/// client's own and the bucket holds whole tokens, refilled to a full quota
/// when the window ends. When a request takes the last tokens, the client
/// switches to **smooth** mode, where tokens accrue continuously at `rate`,
/// starting from a penalty, until the bucket holds a whole quota again and
/// the client is bursty once more. The rules, in order, with Finch's notes
/// quoted, for a request of cost `c` at time `now`:
///
/// ```text
/// reset():                     bucket = q − c; time = now; mode = BURSTY; ALLOW
///   "a client that returns after a long absence is reinitialized like a
///    new client; ... we subtract one from the quota to account for the
///    current request"
/// new client:                  reset()
/// BURSTY and time + w <= now:  reset()
///   "reset the state when a bursty client's window has expired"
/// BURSTY and bucket == c:      remaining = time + w − now
///                              bucket = −remaining · rate + 1
///                              time = now; mode = SMOOTH; ALLOW
///   "apply a negative penalty so we don't allow any over-quota requests
///    before the end of the fixed window; add one to allow the next
///    request at the start of the next window"
/// SMOOTH:                      bucket += (now − time) · rate; time = now
///   "update the request time so that tokens accumulate at the same rate
///    whether the request is allowed or denied"
/// SMOOTH and bucket >= q:      reset()
///   "when the bucket has refilled, switch back to bursty mode"
/// otherwise:                   if bucket >= c { bucket −= c; ALLOW } else DENY
/// ```
///
/// **Costs**: Finch's pseudocode takes one token per request; here every
/// `1` that stands for the request's token is its cost `c`, while the `+1`
/// of the switch stays `+1`: it is one token's worth of the smallest
/// request, so the bucket reaches 1 exactly when the fixed window ends and
/// no request of any cost is admitted before then, and a cost-`c` request
/// waits `(c − 1)/rate` more. (`+c` would admit a cost-1 request
/// `(c − 1)/rate` before the window ends, over the quota.) A first request
/// costing the whole quota empties the bucket in `reset()` and, as in the
/// pseudocode with a quota of 1, stays bursty: the client simply waits for
/// the end of its window.
///
/// **Guarantees** (from the seed): a bursty client never gets more than `q`
/// in its fixed window; a smooth client stays below `rate` on average over
/// the whole time it is smooth. A smooth client that slows down, but not
/// for long enough to refill, can speed up again and exceed `q` within one
/// window; and as the bucket carries fractions, even a client sending
/// steadily faster than the rate may see `q + 1` in some span of `w`. It
/// reacts within one window, unlike a
/// [`TokenBucket`](crate::TokenBucket).
///
/// **Decision**: `limit` is `q`; `remaining` is the whole tokens in the
/// bucket; `retry_after` is the end of the fixed window (bursty) or the
/// time for the bucket to earn the missing tokens (smooth); `reset_after`
/// is the time until a whole quota is available again: the end of the
/// window (bursty) or the refill to `q` (smooth). The state is one
/// memcached value, `<b|s> <bucket> <time>`, in the shared optimistic loop
/// ([`CasPolicy`](crate::CasPolicy)); it expires once it would mean the
/// same as no state.
/// A denial writes nothing unless strict: tokens accrue linearly, so the
/// stored state already implies the same later decisions, and a flooding
/// client costs reads only.
///
/// **Strict mode** ([`DeniedRequests::Counted`](crate::DeniedRequests)): a
/// denied request takes its cost too, down to `−q`. In bursty mode that
/// debt lasts only until the window ends.
///
/// **Timestamps** ([`check_at`](crate::RateLimiter::check_at)): `now` is
/// never before the stored `time`; an older event is decided as of `time`,
/// and its `retry_after` and `reset_after` count from its own time.
///
/// **Stored state** is validated: a value that is not a state (or a bucket
/// outside `±q`) counts as a new client, and a `time` further ahead than
/// the limiter's `max_clock_skew` is clamped to it; either repair is
/// counted in [`FailureStats::repaired`](crate::FailureStats). No decision
/// announces a wait longer than two windows plus the skew.
///
/// ```
/// use memcache_ratelimit::{HybridQuota, ManualClock, MemoryStore, RateLimiter};
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let clock = ManualClock::from_unix_secs(1_800_000_000);
/// let store = Arc::new(MemoryStore::with_clock(clock.clone()));
/// let quota = HybridQuota::builder("10/second".parse()?, store).clock(clock.clone()).build()?;
///
/// // A quiet client may spend its whole quota at once...
/// for _ in 0..10 {
///     assert!(quota.check(b"alice").await?.is_allowed());
/// }
/// // ...and is then held to the smooth rate, from the end of its window.
/// clock.advance(Duration::from_millis(990));
/// let denied = quota.check(b"alice").await?;
/// assert_eq!(denied.retry_after(), Some(Duration::from_millis(10)));
/// clock.advance(Duration::from_millis(10));
/// assert!(quota.check(b"alice").await?.is_allowed());
/// clock.advance(Duration::from_millis(50));
/// assert!(quota.check(b"alice").await?.is_denied()); // one per 100 ms
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
pub struct HybridQuota {
    inner: CasLimiter<HybridQuotaCore>,
}

impl HybridQuota {
    /// Starts building a hybrid quota enforcing `quota` on `store`.
    ///
    /// ```
    /// use memcache_ratelimit::{HybridQuota, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// let quota = HybridQuota::builder("5/second".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    ///
    /// Its own setting is the compare-and-swap policy:
    ///
    /// ```
    /// use memcache_ratelimit::{CasPolicy, HybridQuota, MemoryStore};
    /// use std::sync::Arc;
    /// use std::time::Duration;
    ///
    /// let quota = HybridQuota::builder("100/minute".parse()?, Arc::new(MemoryStore::new()))
    ///     .cas_policy(CasPolicy::new(4, Duration::from_micros(100), Duration::from_millis(2))?)
    ///     .build()?;
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn builder(quota: Quota, store: Arc<dyn Store>) -> LimiterBuilder<HybridQuota> {
        LimiterBuilder::from_spec(LimiterSpec::new(Algorithm::HybridQuota, quota), store)
    }

    /// The key holding `client`'s state.
    ///
    /// ```
    /// use memcache_ratelimit::{HybridQuota, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// let quota = HybridQuota::builder("5/second".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// assert!(quota.key(b"alice").starts_with(b"rl:alice_hq-"));
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn key(&self, client: &[u8]) -> Vec<u8> {
        self.inner.key(client)
    }

    /// Retries, conflicts and give-ups of the compare-and-swap loop.
    ///
    /// ```
    /// use memcache_ratelimit::{HybridQuota, MemoryStore, RateLimiter};
    /// use std::sync::Arc;
    ///
    /// # tokio::runtime::Runtime::new().unwrap().block_on(async {
    /// let quota = HybridQuota::builder("5/second".parse()?, Arc::new(MemoryStore::new())).build()?;
    /// quota.check(b"alice").await?;
    /// assert_eq!(quota.cas_stats().attempts, 1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn cas_stats(&self) -> CasStats {
        self.inner.stats()
    }
}

impl LimiterBuilder<HybridQuota> {
    /// Validates the settings and builds the limiter. A limit above 2^53,
    /// whose whole token counts a float cannot hold exactly, is rejected
    /// (field `limit`).
    ///
    /// ```
    /// use memcache_ratelimit::{HybridQuota, MemoryStore};
    /// use std::sync::Arc;
    ///
    /// let store = Arc::new(MemoryStore::new());
    /// let too_big = format!("{}/second", (1u64 << 53) + 1).parse()?;
    /// assert_eq!(HybridQuota::builder(too_big, store).build().unwrap_err().field(), "limit");
    /// # Ok::<(), memcache_ratelimit::ConfigError>(())
    /// ```
    pub fn build(self) -> Result<HybridQuota, ConfigError> {
        let (settings, spec) = self.into_parts(Self::build)?;
        if spec.algorithm != Algorithm::HybridQuota {
            return Err(other_algorithm(&spec, "hybrid quota"));
        }
        let limit = settings.quota.limit();
        if limit > MAX_EXACT_LIMIT {
            return Err(ConfigError::new(
                "limit",
                format!("{limit} is above the hybrid quota's maximum of 2^53"),
            ));
        }
        let core = HybridQuotaCore::new(settings.quota);
        Ok(HybridQuota {
            inner: CasLimiter::new(settings, core, spec.cas),
        })
    }
}

delegate_rate_limiter!(HybridQuota, "hybrid_quota");

/// The arithmetic: quota `quota` per `window` nanoseconds.
#[derive(Debug, Clone)]
pub(crate) struct HybridQuotaCore {
    quota: u64,
    window: i64,
    suffix: String,
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
    mode: Mode,
    bucket: f64,
    time: i64,
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
    fn earned(&self, nanos: i64) -> f64 {
        self.quota as f64 * (nanos as f64 / self.window as f64)
    }

    /// Nanoseconds (rounded up) to earn `tokens`.
    fn time_for(&self, tokens: f64) -> Duration {
        if tokens <= EPSILON {
            return Duration::ZERO;
        }
        let nanos = (tokens * self.window as f64 / self.quota as f64).ceil();
        Duration::from_nanos(nanos.min(u64::MAX as f64) as u64)
    }

    /// How long from `now` until the fixed window starting at `time` ends.
    fn window_end(&self, time: i64, now: i64) -> Duration {
        let nanos = time.saturating_add(self.window).saturating_sub(now);
        Duration::from_nanos(u64::try_from(nanos).unwrap_or(0))
    }

    /// A fresh bursty window, with this request taken: always allowed.
    fn reset(&self, now: i64, cost: u64) -> Step<Client> {
        let client = Client {
            mode: Mode::Bursty,
            bucket: (self.quota - cost) as f64,
            time: now,
        };
        self.conclude(true, client, now, cost, true)
    }

    /// The decision on `client`, as it stands after the request.
    fn conclude(
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
        let mode = match client.mode {
            Mode::Bursty => 'b',
            Mode::Smooth => 's',
        };
        format!("{mode} {} {}", client.bucket, client.time).into_bytes()
    }

    fn decode(&self, bytes: &[u8]) -> Option<Client> {
        let mut parts = std::str::from_utf8(bytes).ok()?.split(' ');
        let mode = match parts.next()? {
            "b" => Mode::Bursty,
            "s" => Mode::Smooth,
            _ => return None,
        };
        let bucket: f64 = parts.next()?.parse().ok()?;
        let time = parts.next()?.parse().ok()?;
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
        let mut step = self.decide_from(state, ask);
        // Waits count from the request's own time, even when the stored
        // time is ahead of it.
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
}

impl HybridQuotaCore {
    /// The decision as of the later of the request's time and the stored
    /// time.
    fn decide_from(&self, state: Option<&Client>, ask: Ask) -> Step<Client> {
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

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;
    const SECOND: i64 = 1_000 * MS;
    const T0: i64 = 1_800_000_000 * SECOND;

    fn core(quota: &str) -> HybridQuotaCore {
        HybridQuotaCore::new(quota.parse().unwrap())
    }

    fn ask(cost: u64, now: i64) -> Ask {
        Ask {
            cost,
            now,
            strict: false,
            max_delay: Duration::ZERO,
        }
    }

    /// Runs one request, keeping the written state.
    fn run(core: &HybridQuotaCore, state: &mut Option<Client>, ask: Ask) -> Decision {
        let step = core.decide(state.as_ref(), ask);
        if let Some((next, _)) = step.write {
            assert_eq!(core.decode(&core.encode(&next)), Some(next));
            *state = Some(next);
        }
        step.decision
    }

    fn client(mode: Mode, bucket: f64, time: i64) -> Client {
        Client { mode, bucket, time }
    }

    #[test]
    fn a_new_client_is_reset_with_its_request_taken() {
        let hq = core("10/second");
        let step = hq.decide(None, ask(3, T0));
        assert!(step.decision.is_allowed());
        assert_eq!(step.decision.remaining(), 7);
        assert_eq!(step.decision.reset_after(), Duration::from_secs(1));
        let (state, ttl) = step.write.unwrap();
        assert_eq!(state, client(Mode::Bursty, 7.0, T0));
        // Read until the window ends; the engine adds the expiry slack.
        assert_eq!(ttl, Duration::from_secs(1));
    }

    #[test]
    fn a_low_traffic_client_bursts_its_whole_quota_at_once() {
        let hq = core("10/second");
        let mut state = None;
        for i in 0..10 {
            assert!(run(&hq, &mut state, ask(1, T0)).is_allowed(), "request {i}");
        }
        let denied = run(&hq, &mut state, ask(1, T0));
        assert!(denied.is_denied());
        // Weighted: the whole quota in one request, then again next window.
        let mut heavy = None;
        assert!(run(&hq, &mut heavy, ask(10, T0)).is_allowed());
        assert!(run(&hq, &mut heavy, ask(1, T0 + SECOND - 1)).is_denied());
        assert!(run(&hq, &mut heavy, ask(10, T0 + SECOND)).is_allowed());
    }

    #[test]
    fn an_expired_bursty_window_resets() {
        let hq = core("10/second");
        let bursty = client(Mode::Bursty, 2.0, T0);
        let inside = hq.decide(Some(&bursty), ask(1, T0 + SECOND - 1));
        assert_eq!(inside.write.unwrap().0, client(Mode::Bursty, 1.0, T0));
        let expired = hq.decide(Some(&bursty), ask(4, T0 + SECOND));
        assert!(expired.decision.is_allowed());
        assert_eq!(
            expired.write.unwrap().0,
            client(Mode::Bursty, 6.0, T0 + SECOND)
        );
    }

    #[test]
    fn taking_the_last_tokens_switches_to_smooth_with_a_penalty() {
        let hq = core("10/second");
        let bursty = client(Mode::Bursty, 2.0, T0);
        let step = hq.decide(Some(&bursty), ask(2, T0 + 400 * MS));
        assert!(step.decision.is_allowed());
        let (state, ttl) = step.write.unwrap();
        // remaining = 600 ms, so bucket = −6 + 1.
        assert_eq!(state.mode, Mode::Smooth);
        assert_eq!(state.time, T0 + 400 * MS);
        assert!((state.bucket + 5.0).abs() < 1e-9);
        assert_eq!(step.decision.remaining(), 0);
        // Back to a full quota after 15 tokens at 10 per second.
        assert_eq!(step.decision.reset_after(), Duration::from_millis(1500));
        assert_eq!(ttl, Duration::from_millis(1500));
    }

    #[test]
    fn an_emptied_client_gets_nothing_over_quota_before_its_window_ends() {
        let hq = core("10/second");
        let mut state = None;
        for _ in 0..10 {
            assert!(run(&hq, &mut state, ask(1, T0 + 200 * MS)).is_allowed());
        }
        // Hammering until the fixed window (from T0 + 200 ms) ends: nothing.
        for ms in 200..1_200 {
            let denied = run(&hq, &mut state, ask(1, T0 + ms * MS));
            assert!(denied.is_denied(), "at {ms} ms");
            // Rounded up, so a nanosecond of float error may show.
            let retry = denied.retry_after().unwrap().as_nanos() as i64;
            assert!((0..=1).contains(&(retry - (1_200 - ms) * MS)), "at {ms} ms");
        }
        assert!(run(&hq, &mut state, ask(1, T0 + 1_200 * MS)).is_allowed());
        // Then the smooth rate: one every 100 ms, whatever is asked.
        let mut admitted = Vec::new();
        for ms in 1_201..3_000 {
            if run(&hq, &mut state, ask(1, T0 + ms * MS)).is_allowed() {
                admitted.push(ms);
            }
        }
        let expected: Vec<i64> = (13..30).map(|tenth| tenth * 100).collect();
        assert_eq!(admitted, expected);
        assert_eq!(state.unwrap().mode, Mode::Smooth);
    }

    #[test]
    fn the_switch_keeps_plus_one_for_any_cost() {
        // A cost-3 request takes the last tokens: the bucket still reaches
        // exactly 1 when the window ends, so no cost fits sooner.
        let hq = core("6/second");
        let mut state = None;
        run(&hq, &mut state, ask(3, T0));
        assert!(run(&hq, &mut state, ask(3, T0)).is_allowed());
        assert_eq!(state.unwrap().mode, Mode::Smooth);
        assert!(run(&hq, &mut state, ask(1, T0 + SECOND - 1)).is_denied());
        let denied = run(&hq, &mut state, ask(3, T0 + SECOND));
        // Two more tokens at 6 per second.
        assert_eq!(
            denied.retry_after(),
            Some(Duration::from_nanos(333_333_334))
        );
        assert!(run(&hq, &mut state, ask(1, T0 + SECOND)).is_allowed());
    }

    #[test]
    fn smooth_mode_accrues_and_a_denial_writes_nothing() {
        let hq = core("10/second");
        let smooth = client(Mode::Smooth, -2.0, T0);
        let step = hq.decide(Some(&smooth), ask(1, T0 + 250 * MS));
        assert!(step.decision.is_denied());
        assert_eq!(step.decision.retry_after(), Some(Duration::from_millis(50)));
        assert!(
            step.write.is_none(),
            "a denial that takes nothing is not written"
        );
        // The stored state already implies the same later decision.
        let later = hq.decide(Some(&smooth), ask(1, T0 + 300 * MS));
        assert!(later.decision.is_allowed());
        let (state, ttl) = later.write.expect("an admission is written");
        assert_eq!(state.time, T0 + 300 * MS);
        assert!(state.bucket.abs() < 1e-9);
        assert_eq!(ttl, Duration::from_secs(1));
        // Strict mode writes the denial's cost.
        let strict = hq.decide(
            Some(&smooth),
            Ask {
                strict: true,
                ..ask(1, T0 + 250 * MS)
            },
        );
        assert!((strict.write.unwrap().0.bucket + 0.5).abs() < 1e-9);
    }

    #[test]
    fn a_refilled_smooth_client_returns_to_bursty_mode() {
        let hq = core("10/second");
        let smooth = client(Mode::Smooth, 0.5, T0);
        let almost = hq.decide(Some(&smooth), ask(1, T0 + 949 * MS));
        assert_eq!(almost.write.unwrap().0.mode, Mode::Smooth);
        let refilled = hq.decide(Some(&smooth), ask(4, T0 + 950 * MS));
        assert!(refilled.decision.is_allowed());
        assert_eq!(
            refilled.write.unwrap().0,
            client(Mode::Bursty, 6.0, T0 + 950 * MS)
        );
        // And may burst again.
        let mut state = Some(client(Mode::Bursty, 6.0, T0 + 950 * MS));
        for _ in 0..6 {
            assert!(run(&hq, &mut state, ask(1, T0 + 950 * MS)).is_allowed());
        }
    }

    #[test]
    fn strict_mode_takes_denied_costs_down_to_minus_the_quota() {
        let hq = core("10/second");
        let mut state = Some(client(Mode::Smooth, 0.0, T0));
        let strict = |cost, now| Ask {
            strict: true,
            ..ask(cost, now)
        };
        let denied = run(&hq, &mut state, strict(4, T0 + 100 * MS));
        assert!(denied.is_denied());
        assert!((state.unwrap().bucket + 3.0).abs() < 1e-9);
        // Retrying the same request needs 7 more tokens.
        assert_eq!(denied.retry_after(), Some(Duration::from_millis(700)));
        for _ in 0..10 {
            run(&hq, &mut state, strict(4, T0 + 100 * MS));
        }
        assert_eq!(state.unwrap().bucket, -10.0);
        // Bursty: a denial's debt lasts until the window ends.
        let mut bursty = Some(client(Mode::Bursty, 2.0, T0));
        assert!(run(&hq, &mut bursty, strict(3, T0)).is_denied());
        assert_eq!(bursty.unwrap(), client(Mode::Bursty, -1.0, T0));
        assert!(run(&hq, &mut bursty, strict(3, T0 + SECOND)).is_allowed());
    }

    #[test]
    fn older_events_are_decided_as_of_the_stored_time() {
        let hq = core("10/second");
        let smooth = client(Mode::Smooth, 0.5, T0);
        let late = hq.decide(Some(&smooth), ask(1, T0 - SECOND));
        assert!(late.decision.is_denied());
        // Counted from the event's own time: the second until the stored
        // time, then 50 ms to earn the missing half token.
        assert_eq!(
            late.decision.retry_after(),
            Some(Duration::from_millis(1_050))
        );
        let bursty = client(Mode::Bursty, 3.0, T0);
        let step = hq.decide(Some(&bursty), ask(1, 0));
        assert_eq!(step.write.unwrap().0, client(Mode::Bursty, 2.0, T0));
    }

    #[test]
    fn a_fast_client_averages_at_most_the_rate() {
        // Three times the rate for a minute, one request every 33 ms.
        let hq = core("10/second");
        let mut state = None;
        let mut admitted = Vec::new();
        for i in 0..1_800 {
            let now = T0 + i * 33 * MS;
            if run(&hq, &mut state, ask(1, now)).is_allowed() {
                admitted.push(now);
            }
        }
        // 10 in the first window, then 10 a second from its end, plus the
        // switch's token.
        let elapsed = (1_800 * 33 * MS - SECOND) as f64 / SECOND as f64;
        assert!(admitted.len() as f64 <= 10.0 + 1.0 + elapsed * 10.0);
        assert!(admitted.len() as f64 >= elapsed * 10.0);
        // Smooth mode bounds only the average: the bucket can hold a little
        // over one token when a request arrives, so one window of a second
        // may see one request more than the quota (the seed's caveat), but
        // never two.
        let mut most = 0;
        for (i, &at) in admitted.iter().enumerate() {
            let window = admitted[i..].iter().take_while(|&&t| t < at + SECOND);
            most = most.max(window.count());
        }
        assert_eq!(most, 11);
        assert!(admitted.iter().take_while(|&&t| t < T0 + SECOND).count() == 10);
    }

    #[test]
    fn state_round_trips_and_garbage_is_rejected() {
        let hq = core("10/second");
        for state in [
            client(Mode::Bursty, 7.0, T0),
            client(Mode::Smooth, -3.25, T0 + 1),
        ] {
            assert_eq!(hq.decode(&hq.encode(&state)), Some(state));
        }
        for bad in [
            &b""[..],
            b"hello",
            b"b 1",
            b"x 1 5",
            b"s NaN 5",
            b"s 11 5",
            b"s -11 5",
            b"b 1 x",
            b"b 1 5 6",
            b"3.25 1800000000",
        ] {
            assert_eq!(hq.decode(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn parameters_name_the_key() {
        assert_ne!(core("10/second").suffix, core("11/second").suffix);
        assert_ne!(core("10/second").suffix, core("10/minute").suffix);
        assert!(core("10/second").suffix.starts_with("hq-"));
    }
}
