//! Reaction time (Tony Finch, "hybrid quota-linear rate limiter", 2026, <https://dotat.at/@/2026-01-12-hqlr.html>, "linear reaction time"): how many requests a limiter lets through from a client
//! that starts quiet and then sends, evenly spaced, at `a` times the
//! permitted rate, before it denies the first one. Everything runs on a
//! [`MemoryStore`] under a [`ManualClock`] set to each request's time.
//!
//! The quota is `q = 60` per minute (the linear limiters are also run at
//! `q` = 10 and 1,000), so the permitted rate is one request a
//! second and the client sends every `1/a` seconds, for `a` = 1.5, 2 and 4.
//! A spacing of 2/3 s is not a whole number of nanoseconds, so request `k`
//! is sent at `⌊k · 60 s / (q·a)⌋` after the first, exactly evenly spaced
//! to within 1 ns and exact at every `k` divisible by 3. That is enough for
//! the linear limiters: the last admission is request `k = 3(q−1)` at
//! `a = 1.5`, sent at an exact time when the bucket holds exactly one token,
//! and every other decision has at least a third of a second of slack. The
//! window counts are checked against the request times as sent, so they do
//! not depend on the rounding.
//!
//! The counts are printed with `eprintln!` (run with `--nocapture`).

use std::num::NonZeroU64;
use std::sync::Arc;
use std::time::Duration;

use chrono::DateTime;
use memcache_ratelimit::{
    FixedWindow, Gcra, ManualClock, MemoryStore, Quota, RateLimiter, SlidingWindow, TokenBucket,
};

/// A minute boundary (2027-01-15 08:00:00 UTC): windows are aligned on unix
/// time, so a client starting here starts with a window.
const W0: i64 = 1_800_000_000;
const NANOS: i64 = 1_000_000_000;
const CLIENT: &[u8] = b"abuser";

/// An abuse factor `a = num / den`, kept as a fraction so every count is
/// computed exactly.
#[derive(Debug, Clone, Copy)]
struct Abuse {
    num: u64,
    den: u64,
}

impl Abuse {
    fn value(self) -> f64 {
        self.num as f64 / self.den as f64
    }
}

const ABUSE: [Abuse; 3] = [
    Abuse { num: 3, den: 2 },
    Abuse { num: 2, den: 1 },
    Abuse { num: 4, den: 1 },
];

/// Quota `q` per `window` seconds.
#[derive(Debug, Clone, Copy)]
struct Client {
    q: u64,
    window_secs: i64,
    a: Abuse,
}

impl Client {
    fn quota(self) -> Quota {
        Quota::with_period(
            NonZeroU64::new(self.q).unwrap(),
            Duration::from_secs(self.window_secs as u64),
        )
        .unwrap()
    }

    /// When request `k` (0-based) is sent, in nanoseconds after the first:
    /// `⌊k · w / (q·a)⌋`, computed exactly.
    fn offset(self, k: u64) -> i64 {
        let w = i128::from(self.window_secs) * i128::from(NANOS);
        let t = i128::from(k) * w * i128::from(self.a.den)
            / (i128::from(self.q) * i128::from(self.a.num));
        i64::try_from(t).unwrap()
    }

    /// Finch's continuous answer, `q·a/(a−1)`.
    fn finch(self) -> f64 {
        self.q as f64 * self.a.value() / (self.a.value() - 1.0)
    }

    /// The exact count for a linear limiter that starts full. Request `k`
    /// (0-based) finds `q − k + k/a` tokens (it is sent `k/a` emission
    /// intervals after the first, the bucket never refills past `q` because
    /// `a > 1`) and needs one whole token, so it is admitted while
    /// `k·(a−1)/a ≤ q − 1`. The first denial comes after
    /// `⌊(q−1)·a/(a−1)⌋ + 1` admissions.
    ///
    /// That is Finch's `q·a/(a−1)` less `1/(a−1)` (rounded down): his
    /// formula counts until the bucket is empty (`b(n) = 0`), but a request
    /// needs the bucket to hold a whole token before it. The gap is under
    /// one request for `a > 2`, exactly one at `a = 2`, and two at
    /// `a = 1.5` (178 instead of 180), growing as `a` approaches 1.
    fn linear_exact(self) -> u64 {
        (self.q - 1) * self.a.num / (self.a.num - self.a.den) + 1
    }

    /// The sliding window's bound, `2q·(a − √(a² − a))`; see
    /// [`windows_throttle_within_bounded_counts`].
    fn sliding_bound(self) -> f64 {
        let a = self.a.value();
        2.0 * self.q as f64 * (a - (a * a - a).sqrt())
    }
}

/// A fresh store and limiter of `kind` for `client`.
fn limiter(kind: &str, client: Client, clock: &ManualClock) -> RateLimiter {
    let store = Arc::new(MemoryStore::with_clock(clock.clone()));
    let quota = client.quota();
    match kind {
        "TokenBucket" => TokenBucket::builder(quota, store)
            .capacity(client.q)
            .clock(clock.clone())
            .build()
            .unwrap(),
        "Gcra" => Gcra::builder(quota, store)
            .burst(client.q)
            .clock(clock.clone())
            .build()
            .unwrap(),
        "SlidingWindow" => SlidingWindow::builder(quota, store)
            .sub_windows(1)
            .clock(clock.clone())
            .build()
            .unwrap(),
        "FixedWindow" => FixedWindow::builder(quota, store)
            .clock(clock.clone())
            .build()
            .unwrap(),
        other => unreachable!("{other}"),
    }
}

/// Sends `client`'s requests, the first at `start` (unix nanoseconds), to a
/// fresh `kind` limiter until one is denied; returns how many were admitted
/// before it.
async fn admitted_before_first_denial(kind: &str, client: Client, start: i64) -> u64 {
    let clock = ManualClock::new(DateTime::from_timestamp_nanos(start));
    let limiter = limiter(kind, client, &clock);
    let give_up = 100 * client.q;
    for k in 0..give_up {
        clock.set(DateTime::from_timestamp_nanos(start + client.offset(k)));
        if limiter.check(CLIENT).await.unwrap().is_denied() {
            return k;
        }
    }
    panic!("{kind} admitted {give_up} requests from {client:?} without a denial");
}

#[tokio::test]
async fn linear_limiters_admit_about_q_a_over_a_minus_1_before_throttling() {
    for kind in ["TokenBucket", "Gcra"] {
        for q in [60, 10, 1_000] {
            for a in ABUSE {
                let client = Client {
                    q,
                    window_secs: 60,
                    a,
                };
                // A linear limiter's state is born full with the client's
                // first request, so where in the minute the client starts
                // does not matter; an odd start shows it.
                let start = W0 * NANOS + 7 * NANOS + 123_456_789;
                let count = admitted_before_first_denial(kind, client, start).await;
                let finch = client.finch();
                eprintln!(
                    "{kind:<11} q={q:<5} a={:<3}: {count} admitted before the first denial \
                     (Finch's q·a/(a−1) = {finch}, exact ⌊(q−1)·a/(a−1)⌋+1 = {})",
                    a.value(),
                    client.linear_exact(),
                );
                assert_eq!(count, client.linear_exact(), "{kind} {client:?}");
                // Within Finch's figure less 1/(a−1), rounded down.
                let short = finch - count as f64;
                let gap = 1.0 / (a.value() - 1.0);
                assert!(
                    short >= gap - 1e-9 && short < gap + 1.0,
                    "{kind} {client:?}: {count} vs {finch}"
                );
            }
        }
    }
}

/// The windows, for the same clients (q = 60 per minute), from every start
/// in the minute on a 500 ms grid, which includes each worst case below.
///
/// **Fixed window.** Let `m` be how many requests the client sends before
/// the first window boundary after its start. The window's counter is exact:
/// if `m > q`, the `(q+1)`-th request is denied in the first window, after
/// `q` admissions. Otherwise all `m` pass, the next window starts from zero
/// and holds `q·a > q` of the client's requests, so its `(q+1)`-th is
/// denied: `m + q` admissions. So exactly `q` when the client starts on a
/// boundary (`m = q·a > q`), and at most `2q`, reached when `m = q`, that is
/// when the client starts `q` spacings (`w − w/a`) before a boundary.
///
/// **Sliding window, one sub-window.** In the first window there is no
/// previous count, so the estimate is the exact count and the same holds:
/// `q` from a boundary. Otherwise all `m ≤ q` requests of the first window
/// pass, and the `J`-th admitted request of the next window, a fraction `e`
/// into it, passed `J + m·(1 − e) ≤ q`. The client's first request there
/// comes less than one spacing `w/(q·a)` after the boundary, so
/// `e < J/(q·a)`, and the total `T = m + J` satisfies
/// `T < q + m·J/(q·a) ≤ q + T²/(4q·a)`. As `T ≤ 2q < 2q·a`, `T` lies below
/// the smaller root: `T < 2q·(a − √(a² − a))`, which is 76.1, 70.3 and 64.3
/// for `a` = 1.5, 2 and 4. It is at least `q`, since the request denied
/// would have made `T + 1 > q + m·e ≥ q`.
///
/// Both deny the client within the second calendar window it sends in,
/// whatever `a`, where a linear limiter takes `w/(a−1)`: from a
/// window boundary they admit `q` = 60, fewer than the linear limiters'
/// 178, 119 and 79. The sliding window's worst case is also below those;
/// the fixed window's worst case, `2q` = 120, is not below the linear count
/// once `a ≥ 2` (119 at `a = 2`, 79 at `a = 4`).
#[tokio::test]
async fn windows_throttle_within_bounded_counts() {
    let q = 60;
    let window = 60 * NANOS;
    let step = NANOS / 2;
    for a in ABUSE {
        let client = Client {
            q,
            window_secs: 60,
            a,
        };
        let linear = client.linear_exact();
        let bound = client.sliding_bound();
        let mut fixed_range = (u64::MAX, 0);
        let mut sliding_range = (u64::MAX, 0);
        for phase in (0..window).step_by(step as usize) {
            let start = W0 * NANOS + phase;
            let boundary = W0 * NANOS + window;
            let m = (0..)
                .take_while(|&k| start + client.offset(k) < boundary)
                .count() as u64;

            let fixed = admitted_before_first_denial("FixedWindow", client, start).await;
            let expected = if m > q { q } else { m + q };
            assert_eq!(
                fixed, expected,
                "fixed window, {client:?}, phase {phase} ns"
            );
            fixed_range = (fixed_range.0.min(fixed), fixed_range.1.max(fixed));

            let sliding = admitted_before_first_denial("SlidingWindow", client, start).await;
            assert!(
                sliding >= q && (sliding as f64) < bound + 1e-6,
                "sliding window, {client:?}, phase {phase} ns: {sliding} outside [{q}, {bound})"
            );
            if m > q {
                assert_eq!(sliding, q, "{client:?}, phase {phase} ns");
            }
            sliding_range = (sliding_range.0.min(sliding), sliding_range.1.max(sliding));

            if phase == 0 {
                assert_eq!((fixed, sliding), (q, q), "{client:?} from a boundary");
                assert!(q < linear);
            }
        }
        eprintln!(
            "a={:<3}: RateLimiter admits {}..={} (bound 2q = {}), SlidingWindow(n=1) {}..={} \
             (bound {bound:.2}) before the first denial, over start phases; \
             linear limiters {linear}, Finch {}",
            a.value(),
            fixed_range.0,
            fixed_range.1,
            2 * q,
            sliding_range.0,
            sliding_range.1,
            client.finch(),
        );
        assert_eq!(fixed_range, (q, 2 * q), "{client:?}");
        assert_eq!(sliding_range.0, q, "{client:?}");
        assert!(sliding_range.1 < linear, "{client:?}");
    }
}
