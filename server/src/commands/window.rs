//! `RL.WINDOW key limit window [SUBWINDOWS n] [TAKE n] [ESTIMATOR e]`: the
//! library's approximated sliding window, the core algorithm of this
//! product, for clients in any language. `limit` requests per `window`
//! seconds, over `n` sub-windows (default 4, the library's default); a
//! request takes `TAKE` units (default 1); the oldest sub-window is weighed
//! by the estimator `e`: `uniform` (the default) or `moment` (from the
//! offsets its counter also sums), each its own buckets. The reply is an array of five integers:
//! allowed (1 or 0), the limit, the units remaining, the milliseconds
//! until the window is empty, and the milliseconds to wait before a retry
//! can succeed (−1 when allowed). Denied requests are not counted, as in
//! the library's default.

use std::time::Duration;

use bytes::Bytes;
use memcache_ratelimit::algorithm::{Estimator, DEFAULT_SUB_WINDOWS};
use memcache_ratelimit::Algorithm;

use super::args::{integer, is};
use crate::limiters::{LimiterKey, Limiters};
use crate::resp::Reply;
use crate::stats::Outcome;

const NAMESPACE: &str = "rw";
const NOT_AN_INTEGER: &str = "ERR value is not an integer or out of range";

/// A parsed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub key: Bytes,
    pub limit: u64,
    pub window_s: u64,
    pub sub_windows: u32,
    pub take: u64,
    pub estimator: Estimator,
}

/// Reads `args`, the command's name first.
pub fn parse(args: &[Bytes]) -> Result<Request, Reply> {
    if !(4..=10).contains(&args.len()) {
        return Err(Reply::error(
            "ERR wrong number of arguments for 'rl.window' command",
        ));
    }
    let positive = |arg: &Bytes| {
        integer(arg)
            .and_then(|v| u64::try_from(v).ok())
            .filter(|v| *v >= 1)
            .ok_or_else(|| Reply::error(NOT_AN_INTEGER))
    };
    let mut request = Request {
        key: args[1].clone(),
        limit: positive(&args[2])?,
        window_s: positive(&args[3])?,
        sub_windows: DEFAULT_SUB_WINDOWS,
        take: 1,
        estimator: Estimator::default(),
    };
    let mut options = args[4..].chunks(2);
    for pair in &mut options {
        let [name, value] = pair else {
            return Err(Reply::error("ERR syntax error"));
        };
        if is(name, "subwindows") {
            request.sub_windows =
                u32::try_from(positive(value)?).map_err(|_| Reply::error(NOT_AN_INTEGER))?;
        } else if is(name, "take") {
            request.take = positive(value)?;
        } else if is(name, "estimator") {
            request.estimator = if is(value, Estimator::Uniform.name()) {
                Estimator::Uniform
            } else if is(value, Estimator::Moment.name()) {
                Estimator::Moment
            } else {
                return Err(Reply::error("ERR syntax error"));
            };
        } else {
            return Err(Reply::error("ERR syntax error"));
        }
    }
    Ok(request)
}

/// Runs `request` now, by the limiter's clock; says what it decided.
pub async fn run(limiters: &Limiters, request: Request) -> (Reply, Outcome) {
    let algorithm = Algorithm::SlidingWindow {
        sub_windows: request.sub_windows,
    };
    let period = Duration::from_secs(request.window_s);
    let decided = match LimiterKey::new(NAMESPACE, algorithm, request.limit, period, false) {
        Ok(key) => {
            let key = key.with_estimator(request.estimator);
            limiters.decide(key, &request.key, request.take, None).await
        }
        Err(error) => Err(error),
    };
    let decision = match decided {
        Ok(decision) => decision,
        Err(error) => return (Reply::error(format!("ERR {error}")), Outcome::Error),
    };
    let millis = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    let retry = match decision.retry_after() {
        Some(wait) if decision.is_denied() => millis(wait),
        _ => -1,
    };
    let reply = Reply::Array(vec![
        Reply::Integer(i64::from(decision.is_allowed())),
        Reply::Integer(i64::try_from(decision.limit()).unwrap_or(i64::MAX)),
        Reply::Integer(i64::try_from(decision.remaining()).unwrap_or(i64::MAX)),
        Reply::Integer(millis(decision.reset_after())),
        Reply::Integer(retry),
    ]);
    (reply, Outcome::of(&decision))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::commands::args::words as args;

    #[test]
    fn options_in_any_order_and_case() {
        let request = parse(&args("RL.WINDOW k 100 60 take 2 SubWindows 12")).unwrap();
        assert_eq!(
            (
                request.limit,
                request.window_s,
                request.sub_windows,
                request.take
            ),
            (100, 60, 12, 2)
        );
        let default = parse(&args("rl.window k 5 1")).unwrap();
        assert_eq!(
            (default.sub_windows, default.take),
            (DEFAULT_SUB_WINDOWS, 1)
        );
        let error = |text: &str| match parse(&args(text)) {
            Err(Reply::Error(message)) => message,
            other => panic!("{text}: {other:?}"),
        };
        assert_eq!(
            error("rl.window k 5"),
            "ERR wrong number of arguments for 'rl.window' command"
        );
        assert_eq!(error("rl.window k 0 60"), NOT_AN_INTEGER);
        assert_eq!(error("rl.window k 5 -1"), NOT_AN_INTEGER);
        assert_eq!(error("rl.window k 5 60 take"), "ERR syntax error");
        assert_eq!(error("rl.window k 5 60 burst 2"), "ERR syntax error");
        assert_eq!(error("rl.window k 5 60 take x"), NOT_AN_INTEGER);
        assert_eq!(error("rl.window k 5 60 estimator mean"), "ERR syntax error");
        let moment = parse(&args("rl.window k 5 60 ESTIMATOR Moment take 2")).unwrap();
        assert_eq!((moment.estimator, moment.take), (Estimator::Moment, 2));
        assert_eq!(default.estimator, Estimator::Uniform);
    }
}
