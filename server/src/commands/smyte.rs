//! Smyte's commands: `RL.REDUCE`, `RL.GET`, `RL.PREDUCE` and `RL.PGET`, on
//! the library's discrete-refill bucket ([`Algorithm::DiscreteRefill`]), and
//! `RL.SESSIONIZE` and `RL.PSESSIONIZE`, on its sessionizing bucket
//! ([`Algorithm::Sessionize`]).
//!
//! Their grammar, errors and replies are those of Smyte's server (Yunjing
//! Xu, "High-performance rate limiting", Smyte Blog, 2016,
//! <https://medium.com/the-smyte-blog/rate-limiter-df3408325846>; source
//! and tests: <https://github.com/smyte/ratelimit>, `RateLimitHandler.cpp`):
//!
//! ```text
//! RL.REDUCE key max refilltime [REFILL amount] [TAKE tokens] [AT timestamp] [STRICT]
//! RL.GET    key max refilltime [REFILL amount] [AT timestamp] [STRICT]
//! RL.SESSIONIZE key max refilltime [REFILL amount] [TAKE tokens] [AT timestamp] [STRICT]
//! ```
//!
//! The `P` variants take `refilltime` and `AT` in milliseconds instead of
//! seconds. Options come in any order and any case, and a repeated one
//! counts its last value. The reply is the number of tokens available
//! before the reduction; the bucket then holds `max(available − tokens,
//! 0)`, so a reduction larger than what is left empties it. `TAKE 0` and
//! `GET` read without writing. The parameters (`max`, `refilltime`,
//! `REFILL`) name the bucket, so the same key with other parameters is
//! another bucket, and `RL.REDUCE a 10 5` and `RL.PREDUCE a 10 5000` are
//! the same one.
//!
//! `RL.SESSIONIZE` reduces as `RL.REDUCE ... STRICT` does, always (the
//! `STRICT` keyword is accepted and changes nothing), and replies a
//! two-element array: the tokens available before, and when the client's
//! session started, in unix **milliseconds** for both units: the client's
//! time if the tokens sufficed, the stored start otherwise (a new key's is
//! the client's time). Two differences from Smyte's server: a sessionize
//! bucket is another bucket than the `RL.REDUCE` one of the same
//! parameters (Smyte's share a key, and reading one's value as the other's
//! aborts its server), and `TAKE 0`, which Smyte answers without writing,
//! is refused with the invalid-integer error (the library's sessionizing
//! bucket has no read that writes nothing).

use std::time::Duration;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use memcache_ratelimit::{Algorithm, Decision};

use super::args::{integer, is};
use crate::limiters::{LimiterKey, Limiters};
use crate::resp::Reply;
use crate::stats::Outcome;

/// Smyte's error for an argument that is not an integer, or out of range.
pub const INVALID_INTEGER: &str = "Value is not an integer or out of range";
/// Smyte's error for an unknown or misplaced option.
pub const SYNTAX_ERROR: &str = "Syntax error";

/// The namespace of these commands' keys.
const NAMESPACE: &str = "rl";

/// Which of the commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variant {
    /// The command's name, in lower case, for the arity error.
    pub name: &'static str,
    /// `refilltime` and `AT` in milliseconds.
    pub millis: bool,
    /// Takes tokens (`TAKE`, default 1).
    pub reduce: bool,
    /// Replies the session start too: `RL.(P)SESSIONIZE`.
    pub sessionize: bool,
}

impl Variant {
    pub const REDUCE: Self = Self::new("rl.reduce", false, true);
    pub const GET: Self = Self::new("rl.get", false, false);
    pub const PREDUCE: Self = Self::new("rl.preduce", true, true);
    pub const PGET: Self = Self::new("rl.pget", true, false);
    pub const SESSIONIZE: Self = Self {
        sessionize: true,
        ..Self::new("rl.sessionize", false, true)
    };
    pub const PSESSIONIZE: Self = Self {
        sessionize: true,
        ..Self::new("rl.psessionize", true, true)
    };

    const fn new(name: &'static str, millis: bool, reduce: bool) -> Self {
        Self {
            name,
            millis,
            reduce,
            sessionize: false,
        }
    }

    /// The most arguments after the command's name: `key max refilltime`,
    /// then `REFILL n`, `AT t` and `STRICT`, and `TAKE n` for a reduction.
    fn max_args(self) -> usize {
        if self.reduce {
            10
        } else {
            8
        }
    }
}

/// A parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub key: Bytes,
    pub max: u64,
    pub refill_ms: u64,
    pub refill: u64,
    pub take: u64,
    /// The client's time, unix milliseconds; the server's when `None`.
    pub at_ms: Option<i64>,
    pub strict: bool,
}

/// Reads `args` (the command's name first) as Smyte's server does: the
/// arity, then `max` and `refilltime`, then the options left to right
/// (each value read as an integer before its name is looked at), and the
/// ranges last.
pub fn parse(variant: Variant, args: &[Bytes]) -> Result<Request, Reply> {
    let given = args.len().saturating_sub(1);
    if !(3..=variant.max_args()).contains(&given) {
        return Err(Reply::error(format!(
            "Wrong number of arguments for '{}' command",
            variant.name
        )));
    }
    let invalid = || Reply::error(INVALID_INTEGER);
    let syntax = || Reply::error(SYNTAX_ERROR);
    let scale: i64 = if variant.millis { 1 } else { 1000 };
    let max = integer(&args[2]).ok_or_else(invalid)?;
    // Smyte reads refilltime as a 32-bit integer.
    let refill_time = integer(&args[3])
        .filter(|t| i32::try_from(*t).is_ok())
        .ok_or_else(invalid)?;
    let refill_ms = refill_time * scale;
    let mut refill = max;
    let mut take: i64 = i64::from(variant.reduce);
    let mut at_ms = None;
    let mut strict = false;
    let mut i = 4;
    while i < args.len() {
        if is(&args[i], "strict") {
            strict = true;
            i += 1;
            continue;
        }
        let value = args.get(i + 1).ok_or_else(syntax)?;
        let value = integer(value).ok_or_else(invalid)?;
        let name = &args[i];
        i += 2;
        if is(name, "refill") {
            refill = value;
        } else if is(name, "take") {
            if !variant.reduce {
                return Err(syntax());
            }
            take = value;
        } else if is(name, "at") {
            at_ms = Some(value.checked_mul(scale).ok_or_else(invalid)?);
        } else {
            return Err(syntax());
        }
    }
    let positive = |v: i64| u64::try_from(v).ok().filter(|v| *v >= 1);
    // A session is only ever sessionized by taking (see the module).
    let least_take = u64::from(variant.sessionize);
    let (Some(max), Some(refill_ms), Some(refill), Some(take)) = (
        positive(max),
        positive(refill_ms),
        positive(refill),
        u64::try_from(take).ok().filter(|take| *take >= least_take),
    ) else {
        return Err(invalid());
    };
    if at_ms.is_some_and(|at| at < 0) {
        return Err(invalid());
    }
    Ok(Request {
        key: args[1].clone(),
        max,
        refill_ms,
        refill,
        take,
        at_ms,
        strict,
    })
}

/// The time `request` runs at: its `AT`, or `now`.
fn time(request: &Request, now: DateTime<Utc>) -> Result<DateTime<Utc>, Reply> {
    match request.at_ms {
        Some(ms) => {
            DateTime::from_timestamp_millis(ms).ok_or_else(|| Reply::error(INVALID_INTEGER))
        }
        None => Ok(now),
    }
}

/// Smyte's "tokens available before": what an allowed decision left plus
/// what it took, or what a denied one found.
fn available(decision: &Decision, take: u64) -> u64 {
    if decision.is_allowed() {
        decision.remaining().saturating_add(take)
    } else {
        decision.remaining()
    }
}

/// Runs `request` of `variant` at `now` (when it names no time), and
/// replies the tokens available before it (with the session start, for
/// `RL.(P)SESSIONIZE`); says what it decided.
pub async fn run(
    limiters: &Limiters,
    variant: Variant,
    request: Request,
    now: DateTime<Utc>,
) -> (Reply, Outcome) {
    let at = match time(&request, now) {
        Ok(at) => at,
        Err(reply) => return (reply, Outcome::Error),
    };
    // Reading (GET, TAKE 0) is a request the bucket can never grant,
    // decided without counting denials: it writes nothing, and a denial
    // reports the tokens available. A sessionize always takes (`parse`).
    let reads = request.take == 0;
    let cost = if reads {
        request.max.saturating_add(1)
    } else {
        request.take
    };
    let refill = Some(request.refill);
    let algorithm = if variant.sessionize {
        Algorithm::Sessionize { refill }
    } else {
        Algorithm::DiscreteRefill {
            refill,
            restart_when_empty: request.strict,
        }
    };
    let period = Duration::from_millis(request.refill_ms);
    let decided = match LimiterKey::new(NAMESPACE, algorithm, request.max, period, !reads) {
        Ok(key) => limiters.decide(key, &request.key, cost, Some(at)).await,
        Err(error) => Err(error),
    };
    let decision = match decided {
        Ok(decision) => decision,
        Err(error) => return (Reply::error(format!("ERR {error}")), Outcome::Error),
    };
    let integer = |n: u64| Reply::Integer(i64::try_from(n).unwrap_or(i64::MAX));
    if reads {
        // A read allowed by the failure policy knows nothing: it says the
        // bucket is full.
        let before = available(&decision, cost).min(request.max);
        return (integer(before), Outcome::Read);
    }
    let before = integer(available(&decision, cost));
    let reply = if variant.sessionize {
        // Under the failure policy no stored session is known: its start
        // is the client's time, a new key's.
        let start = decision.session_start().unwrap_or(at);
        Reply::Array(vec![before, Reply::Integer(start.timestamp_millis())])
    } else {
        before
    };
    (reply, Outcome::of(&decision))
}
