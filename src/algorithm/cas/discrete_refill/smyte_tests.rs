//! Smyte's own test vectors (`RateLimitHandlerTest.cpp` in
//! smyte/ratelimit), run on the pure core: `RL.GET` is a lenient request
//! above the maximum (denied, nothing written, `remaining` the tokens
//! available) and `RL.REDUCE` a strict one, whose reply is `remaining +
//! cost` when allowed and `remaining` when denied.

use super::rules::Bucket;
use super::tests::{core, get, reduce, run, MS, SECOND};
use crate::algorithm::cas::core::CasCore;

/// `tokens` held, counted from `mark`.
fn bucket(tokens: u64, mark: i64) -> Option<Bucket> {
    Some(Bucket { tokens, mark })
}

/// `RateLimitHandlerTest.GetReduceCommands`: one bucket of 10, 3 back
/// every 5 s; `RL.REDUCE a 10 5` and `RL.PREDUCE a 10 5000` name it alike.
#[test]
fn smyte_get_reduce_commands() {
    let plain = core("10/5s", 3, false);
    let strict = core("10/5s", 3, true);
    assert_eq!(plain.suffix(), strict.suffix());
    let mut state = None;
    let s = |seconds: i64| seconds * SECOND;
    assert_eq!(run(&plain, &mut state, reduce(1, s(2))), 10);
    assert_eq!(state, bucket(9, s(2)));
    assert_eq!(run(&plain, &mut state, reduce(1, 2_000 * MS)), 9);
    assert_eq!(get(&plain, state.as_ref(), s(2)), 8);
    assert_eq!(get(&plain, state.as_ref(), 2_000 * MS), 8);
    assert_eq!(run(&plain, &mut state, reduce(5, s(2))), 8);
    assert_eq!(state.unwrap().tokens, 3);
    // Denied, and drained: REDUCE stores max(3 − 5, 0).
    assert_eq!(run(&plain, &mut state, reduce(5, s(2))), 3);
    assert_eq!(state.unwrap().tokens, 0);
    assert_eq!(get(&plain, state.as_ref(), s(2)), 0);
    assert_eq!(get(&plain, state.as_ref(), s(8)), 3);
    assert_eq!(run(&plain, &mut state, reduce(2, s(8))), 3);
    assert_eq!(state, bucket(1, s(7)));
    assert_eq!(run(&plain, &mut state, reduce(1, 8_000 * MS)), 1);
    assert_eq!(run(&plain, &mut state, reduce(1, 9_000 * MS)), 0);
    assert_eq!(state, bucket(0, s(7)));
    assert_eq!(get(&plain, state.as_ref(), s(13)), 3);
    // STRICT: every reduce that leaves it empty restarts the period.
    assert_eq!(run(&strict, &mut state, reduce(4, s(14))), 3);
    assert_eq!(state, bucket(0, s(14)));
    assert_eq!(run(&strict, &mut state, reduce(4, s(16))), 0);
    assert_eq!(state.unwrap().mark, s(16));
    assert_eq!(run(&strict, &mut state, reduce(1, s(18))), 0);
    assert_eq!(state.unwrap().mark, s(18));
    assert_eq!(run(&strict, &mut state, reduce(2, s(23))), 3);
}

/// `RateLimitHandlerTest.AdjustAmount`: 100 of 1000 at 2 s, 100 back
/// every minute; the mark moves by whole periods, even past full.
#[test]
fn smyte_adjust_amount() {
    let core = core("1000/1m", 100, false);
    let stored = Bucket {
        tokens: 100,
        mark: 2_000 * MS,
    };
    for (now, tokens, mark) in [
        (53_000, 100, 2_000),
        (123_000, 300, 122_000),
        (1_312_000, 1_000, 1_262_000),
    ] {
        let refilled = core.rules.refilled(Some(&stored), now * MS);
        assert_eq!(
            refilled,
            Bucket {
                tokens,
                mark: mark * MS
            },
            "at {now} ms"
        );
    }
}
