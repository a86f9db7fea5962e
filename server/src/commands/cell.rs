//! `CL.THROTTLE key max_burst count period [quantity]`, as the redis-cell
//! module answers it (Brandur Leach, redis-cell,
//! <https://github.com/brandur/redis-cell>), on the library's GCRA: a
//! burst of `max_burst + 1` requests at `count` per `period` seconds. The
//! reply is an array of five integers: limited (0 or 1), the limit
//! (`max_burst + 1`), the requests remaining, the seconds to wait before
//! retrying (−1 when allowed), and the seconds until the limit is whole
//! again, rounded up.
//!
//! Where redis-cell accepts what cannot be meant, this command says so:
//! negative numbers, a quantity of 0 (redis-cell reports the state without
//! taking anything) and a quantity above the limit (redis-cell denies it
//! with −1 as its wait) are errors.

use std::time::Duration;

use bytes::Bytes;
use memcache_ratelimit::{Algorithm, Decision};

use super::args::{integer, shown};
use crate::limiters::{LimiterKey, Limiters};
use crate::resp::Reply;
use crate::stats::Outcome;

const NAMESPACE: &str = "cl";
const USAGE: &str =
    "Cell error: Usage: cl.throttle <key> <max_burst> <count per period> <period> [<quantity>]";

/// A parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub key: Bytes,
    /// `max_burst + 1`.
    pub burst: u64,
    pub count: u64,
    pub period_s: u64,
    pub quantity: u64,
}

/// Reads `args`, the command's name first.
pub fn parse(args: &[Bytes]) -> Result<Request, Reply> {
    if args.len() != 5 && args.len() != 6 {
        return Err(Reply::error(USAGE));
    }
    let number = |arg: &Bytes| {
        integer(arg).ok_or_else(|| {
            Reply::error(format!(
                "Cell error: Couldn't parse as integer: {}",
                shown(arg)
            ))
        })
    };
    let max_burst = number(&args[2])?;
    let count = number(&args[3])?;
    let period = number(&args[4])?;
    let quantity = match args.get(5) {
        Some(arg) => number(arg)?,
        None => 1,
    };
    if count == 0 || period == 0 {
        return Err(Reply::error("Cell error: Zero rates are not supported"));
    }
    let natural = |v: i64, what: &str| {
        u64::try_from(v)
            .map_err(|_| Reply::error(format!("Cell error: {what} must not be negative")))
    };
    let burst = natural(max_burst, "max_burst")?.saturating_add(1);
    let count = natural(count, "count")?;
    let period_s = natural(period, "period")?;
    let quantity = natural(quantity, "quantity")?;
    if quantity == 0 {
        return Err(Reply::error("Cell error: quantity must be at least 1"));
    }
    if quantity > burst {
        return Err(Reply::error(format!(
            "Cell error: quantity {quantity} exceeds the limit {burst} (max_burst + 1)"
        )));
    }
    Ok(Request {
        key: args[1].clone(),
        burst,
        count,
        period_s,
        quantity,
    })
}

/// Runs `request` now, by the limiter's clock; says what it decided.
pub async fn run(limiters: &Limiters, request: Request) -> (Reply, Outcome) {
    let algorithm = Algorithm::Gcra {
        burst: Some(request.burst),
    };
    let period = Duration::from_secs(request.period_s);
    let decided = match LimiterKey::new(NAMESPACE, algorithm, request.count, period, false) {
        Ok(key) => {
            limiters
                .decide(key, &request.key, request.quantity, None)
                .await
        }
        Err(error) => Err(error),
    };
    match decided {
        Ok(decision) => (reply(&decision, request.burst), Outcome::of(&decision)),
        Err(error) => (Reply::error(format!("Cell error: {error}")), Outcome::Error),
    }
}

/// redis-cell's five integers for `decision`.
fn reply(decision: &Decision, limit: u64) -> Reply {
    let retry = match decision.retry_after() {
        Some(wait) if decision.is_denied() => seconds(wait),
        _ => -1,
    };
    Reply::Array(vec![
        Reply::Integer(i64::from(decision.is_denied())),
        Reply::Integer(clamp(limit)),
        Reply::Integer(clamp(decision.remaining())),
        Reply::Integer(retry),
        Reply::Integer(seconds(decision.reset_after())),
    ])
}

/// Whole seconds, rounded up from the millisecond (a wait of 1.0004 s is
/// 1 s, of 1.2 s is 2 s), as redis-cell rounds them.
fn seconds(wait: Duration) -> i64 {
    let millis = wait.as_millis();
    clamp(u64::try_from(millis.div_ceil(1000)).unwrap_or(u64::MAX))
}

fn clamp(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::args::words as args;

    #[test]
    fn parses_as_redis_cell_and_refuses_what_cannot_be_meant() {
        let ok = parse(&args("CL.THROTTLE user123 15 30 60 1")).unwrap();
        assert_eq!(
            (ok.burst, ok.count, ok.period_s, ok.quantity),
            (16, 30, 60, 1)
        );
        assert_eq!(parse(&args("CL.THROTTLE k 0 1 2")).unwrap().quantity, 1);
        let error = |text: &str| match parse(&args(text)) {
            Err(Reply::Error(message)) => message,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(error("CL.THROTTLE k 1 2"), USAGE);
        assert_eq!(
            error("CL.THROTTLE k x 2 3"),
            "Cell error: Couldn't parse as integer: x"
        );
        assert_eq!(
            error("CL.THROTTLE k 1 0 3"),
            "Cell error: Zero rates are not supported"
        );
        assert_eq!(
            error("CL.THROTTLE k 1 2 0"),
            "Cell error: Zero rates are not supported"
        );
        assert!(error("CL.THROTTLE k -1 2 3").contains("max_burst"));
        assert!(error("CL.THROTTLE k 1 2 3 0").contains("at least 1"));
        assert!(error("CL.THROTTLE k 1 2 3 3").contains("exceeds the limit 2"));
    }

    #[test]
    fn waits_round_up_to_whole_seconds() {
        assert_eq!(seconds(Duration::ZERO), 0);
        assert_eq!(seconds(Duration::from_micros(1_000_400)), 1);
        assert_eq!(seconds(Duration::from_micros(999)), 0);
        assert_eq!(seconds(Duration::from_millis(1000)), 1);
        assert_eq!(seconds(Duration::from_millis(1001)), 2);
    }
}
