//! The six compare-and-swap algorithms at one small quota, with their
//! stored encodings, so tests can write any state (or garbage) straight
//! into a client's key, and the bounds a decision must respect.

use std::sync::Arc;
use std::time::Duration;

use memcache_ratelimit::limiter::DeniedRequests;
use memcache_ratelimit::store::Store;
use memcache_ratelimit::{FailurePolicy, LimiterSpec, ManualClock, RateLimiter};

/// The quota every algorithm here enforces: 5 per 10 s.
pub const LIMIT: u64 = 5;
pub const PERIOD: Duration = Duration::from_secs(10);
/// GCRA's burst and the token bucket's capacity, unlike the limit so each
/// bound shows which it depends on.
pub const BURST: u64 = 3;
pub const CAPACITY: u64 = 7;
/// The discrete refill's amount per period, unlike the limit too.
pub const REFILL: u64 = 2;
/// The limiters' allowed clock skew (the default).
pub const SKEW: Duration = Duration::from_secs(1);

/// The library's own description of each algorithm, at the burst and
/// capacity above.
pub use memcache_ratelimit::Algorithm;
pub const GCRA: Algorithm = Algorithm::Gcra { burst: Some(BURST) };
pub const TOKEN_BUCKET: Algorithm = Algorithm::TokenBucket {
    capacity: Some(CAPACITY),
};
pub const SLIDING_LOG: Algorithm = Algorithm::SlidingLog;
pub const HYBRID_QUOTA: Algorithm = Algorithm::HybridQuota;
/// With the restart, so strict denials move the refill mark too.
pub const DISCRETE_REFILL: Algorithm = Algorithm::DiscreteRefill {
    refill: Some(REFILL),
    restart_when_empty: true,
};

/// Always strict and restarting, whatever the limiter says.
pub const SESSIONIZE: Algorithm = Algorithm::Sessionize {
    refill: Some(REFILL),
};

pub const ALL: [Algorithm; 6] = [
    GCRA,
    TOKEN_BUCKET,
    SLIDING_LOG,
    HYBRID_QUOTA,
    DISCRETE_REFILL,
    SESSIONIZE,
];

/// `algorithm`'s limiter, on `store`, reading `clock`.
pub fn build(
    algorithm: Algorithm,
    store: Arc<dyn Store>,
    clock: &ManualClock,
    strict: bool,
) -> RateLimiter {
    let denied = if strict {
        DeniedRequests::Counted
    } else {
        DeniedRequests::Refunded
    };
    LimiterSpec::new(algorithm, format!("{LIMIT}/10s").parse().unwrap())
        .deadline(Duration::from_secs(5))
        .on_failure(FailurePolicy::ReturnError)
        .denied_requests(denied)
        .clock(clock.clone())
        .build(store)
        .unwrap()
}

/// The longest wait a decision may announce, from any state: the
/// furthest ahead of its writer's time a state can reach, plus the
/// skew by which that writer's clock may lead.
pub fn horizon(algorithm: Algorithm) -> Duration {
    let interval = PERIOD / LIMIT as u32;
    SKEW + match algorithm {
        // The burst tolerance, plus the longer of one period (the
        // longest reservation) and the tolerance again (strict denials).
        Algorithm::Gcra { .. } => interval * BURST as u32 + PERIOD.max(interval * BURST as u32),
        // A refill from −capacity (strict debt) to capacity.
        Algorithm::TokenBucket { .. } => interval * 2 * CAPACITY as u32,
        // The newest entry leaves one period after it was made.
        Algorithm::SlidingLog => PERIOD,
        // A smooth refill from −quota to quota takes two windows.
        Algorithm::HybridQuota => PERIOD * 2,
        // The refills from empty to the limit, from a mark at most the
        // skew ahead.
        Algorithm::DiscreteRefill { .. } | Algorithm::Sessionize { .. } => {
            PERIOD * LIMIT.div_ceil(REFILL) as u32
        }
        window => not_cas(window),
    }
}

/// The most requests of cost 1 one client can have admitted in one
/// period from the moment a state is read, whatever that state:
/// a repaired state is at best a fresh one, and from a fresh one
/// - GCRA: the burst at once, then one per emission interval;
/// - token bucket: the full capacity, then the refill of a period;
/// - sliding log: the limit, exactly;
/// - hybrid quota: what a stored bursty window still grants (at most
///   the quota), then a fresh window's quota, plus the one token of the
///   switch to smooth mode;
/// - discrete refill: a full bucket, then the one refill whose period
///   ends within the period (a forgotten state is a full bucket already);
///   sessionize, the same bucket.
pub fn most_admitted_in_a_period(algorithm: Algorithm) -> u64 {
    match algorithm {
        Algorithm::Gcra { .. } => BURST + LIMIT,
        Algorithm::TokenBucket { .. } => CAPACITY + LIMIT,
        Algorithm::SlidingLog => LIMIT,
        Algorithm::HybridQuota => 2 * LIMIT + 1,
        Algorithm::DiscreteRefill { .. } | Algorithm::Sessionize { .. } => LIMIT + REFILL,
        window => not_cas(window),
    }
}

/// Every algorithm here keeps a compare-and-swap state; a window does not.
pub fn not_cas(window: Algorithm) -> ! {
    panic!("{window} keeps no compare-and-swap state")
}

/// Little-endian LEB128 varints, as the sliding log stores distances.
fn varint(mut value: u64, out: &mut Vec<u8>) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// GCRA's state: the theoretical arrival time, in units of `1/limit` ns.
pub fn gcra(tat: i128) -> Vec<u8> {
    tat.to_string().into_bytes()
}

/// GCRA's state for a TAT at unix nanoseconds `nanos`.
pub fn gcra_at(nanos: i64) -> Vec<u8> {
    gcra(i128::from(nanos) * i128::from(LIMIT))
}

/// The token bucket's state: tokens, and when they were counted.
pub fn token_bucket(tokens: &str, updated: &str) -> Vec<u8> {
    format!("{tokens} {updated}").into_bytes()
}

/// The sliding log's state (format 3): the version, the oldest and the
/// newest entry (the oldest plus every distance, saturating), a check,
/// then the distances. The check is not the log's, so the limiter reads
/// the log as its entries say and rewrites it whole, as it would another
/// writer's.
pub fn sliding_log(first: i64, distances: &[u64]) -> Vec<u8> {
    let newest = distances.iter().fold(first, |entry, &distance| {
        entry.saturating_add_unsigned(distance)
    });
    let mut bytes = vec![3];
    bytes.extend_from_slice(&first.to_le_bytes());
    bytes.extend_from_slice(&newest.to_le_bytes());
    bytes.extend_from_slice(&[0; 8]);
    for &distance in distances {
        varint(distance, &mut bytes);
    }
    bytes
}

/// The hybrid quota's state: mode (`b` or `s`), bucket, time.
pub fn hybrid_quota(mode: char, bucket: &str, time: &str) -> Vec<u8> {
    format!("{mode} {bucket} {time}").into_bytes()
}

/// The discrete refill's state: tokens and the refill mark.
pub fn discrete_refill(tokens: &str, mark: &str) -> Vec<u8> {
    format!("dr1 {tokens} {mark}").into_bytes()
}

/// Sessionize's state: tokens, the refill mark and the session start.
pub fn sessionize(tokens: &str, mark: &str, start: &str) -> Vec<u8> {
    format!("ds1 {tokens} {mark} {start}").into_bytes()
}

/// A state of `algorithm` that puts everything at `nanos` (unix ns) and
/// leaves no quota: a client that spent everything then.
pub fn spent_at(algorithm: Algorithm, nanos: i64) -> Vec<u8> {
    match algorithm {
        Algorithm::Gcra { .. } => {
            gcra_at(nanos + PERIOD.as_nanos() as i64 * BURST as i64 / LIMIT as i64)
        }
        Algorithm::TokenBucket { .. } => token_bucket("0", &nanos.to_string()),
        Algorithm::SlidingLog => sliding_log(nanos, &[0; LIMIT as usize - 1]),
        Algorithm::HybridQuota => hybrid_quota('b', "0", &nanos.to_string()),
        Algorithm::DiscreteRefill { .. } => discrete_refill("0", &nanos.to_string()),
        Algorithm::Sessionize { .. } => sessionize("0", &nanos.to_string(), &nanos.to_string()),
        window => not_cas(window),
    }
}
