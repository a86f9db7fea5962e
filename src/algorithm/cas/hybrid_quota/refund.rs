//! Giving back what a request took from a [`HybridQuota`](super) client:
//! the inverse of each of the ways a request takes, where one exists, and
//! otherwise a state that gives back less, never more.
//!
//! A request takes in one of three ways (see the rules on
//! [`HybridQuota`](super)):
//!
//! - **reset**: a new client, an expired bursty window or a refilled
//!   smooth bucket starts a fresh bursty window at the request's time with
//!   `q − c` tokens. The state before meant "a fresh window at the next
//!   request". The inverse writes the *full* state `SMOOTH, bucket = q,
//!   time = now`, which means exactly that: the next request finds a full
//!   bucket and resets at its own time (an older event is decided as of
//!   `now`, as any stored time makes it). Putting `c` back into the bursty
//!   window instead would keep the window that started at the refunded
//!   request and give the client a whole quota again when that window
//!   ends, before a fresh window would have.
//! - **bursty take** (`bucket > c`): `bucket −= c` within the client's
//!   fixed window. The inverse is exact: `bucket += c`, same window; a
//!   bucket back at `q` is the full state above, which is never more
//!   lenient than a full bursty window (the fresh window it stands for
//!   ends later).
//! - **the switch** (`bucket == c`): the last tokens turn the client smooth
//!   with a penalty until its window ends. The switch forgets where the
//!   window started, so no exact inverse exists. The refund puts `c` back
//!   into the smooth bucket, as for a smooth take: the bucket then reaches
//!   `c + 1` when the window ends, while the bursty window it replaces
//!   would have held `c` until then and a whole fresh quota after, so the
//!   client is held back more than before the request, never less.
//! - **smooth take**: tokens accrue to the refund's time exactly as a
//!   decision accrues them, then `c` goes back, capped at `q` (the full
//!   state): exact, as in a token bucket.
//!
//! What cannot be told apart is given back as nothing: a bursty window that
//! started after the refunded request's time (a later request reset the
//! window, or a writer whose clock is ahead started it) may not be the one
//! the request was counted in, so it gets nothing back; an expired bursty
//! window, or no state, is a full quota already. In smooth mode the bucket
//! does not record when its episode started, so a refund that arrives
//! after other requests have carried the client through a whole window and
//! into a new smooth episode is given to that episode: the engine sends a
//! refund right after the decision it undoes, within the limiter's
//! deadline, so this needs a window shorter than that round trip.

use super::core::{Client, HybridQuotaCore, Mode, EPSILON};
use crate::algorithm::cas::core::{Ask, Step};
use crate::decision::Decision;
use std::time::Duration;

impl HybridQuotaCore {
    /// The refund of `ask.cost` taken at `ask.now`, as of the later of that
    /// time and the stored time (see the module documentation).
    pub(super) fn refund_from(&self, state: Option<&Client>, ask: Ask) -> Step<Client> {
        let quota = self.quota as f64;
        let cost = ask.cost as f64;
        let Some(&stored) = state else {
            return self.untouched_full();
        };
        // Time never runs backwards for a client.
        let now = ask.now.max(stored.time);
        let bucket = match stored.mode {
            // A full quota already: the next request resets.
            Mode::Bursty if stored.time.saturating_add(self.window) <= now => {
                return self.untouched_full();
            }
            // Perhaps not the window the request was counted in.
            Mode::Bursty if stored.time > ask.now => {
                return self.conclude(true, stored, now, ask.cost, false);
            }
            Mode::Bursty => stored.bucket + cost,
            Mode::Smooth => stored.bucket + self.earned(now.saturating_sub(stored.time)) + cost,
        };
        let client = if bucket + EPSILON >= quota {
            Client {
                mode: Mode::Smooth,
                bucket: quota,
                time: now,
            }
        } else if stored.mode == Mode::Bursty {
            Client { bucket, ..stored }
        } else {
            Client {
                mode: Mode::Smooth,
                bucket,
                time: now,
            }
        };
        self.conclude(true, client, now, ask.cost, client != stored)
    }

    /// A full quota, with nothing to write.
    fn untouched_full(&self) -> Step<Client> {
        Step {
            decision: Decision::allowed(self.quota, self.quota, Duration::ZERO),
            delay: Duration::ZERO,
            write: None,
        }
    }
}
