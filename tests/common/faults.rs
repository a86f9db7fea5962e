//! A store decorator that makes the next `k` compare-and-swap writes lose,
//! whatever they carry, to drive the optimistic loop's retry path.

use std::sync::atomic::{AtomicU64, Ordering};

use memcache_ratelimit::store::{PutCondition, PutOutcome};

use super::wrapped::{Hooks, Wrapped};

/// A store whose next conditional writes report a conflict.
pub type LosingCas = Wrapped<Losses>;

/// How many conditional writes are still to lose.
#[derive(Debug, Default)]
pub struct Losses {
    remaining: AtomicU64,
}

impl LosingCas {
    /// The next `k` conditional writes report a conflict and write nothing.
    pub fn lose_next(&self, k: u64) {
        self.hooks.remaining.store(k, Ordering::SeqCst);
    }
}

impl Losses {
    fn take_loss(&self) -> bool {
        self.remaining
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
    }
}

impl Hooks for Losses {
    fn instead_of_put(&self, condition: PutCondition) -> Option<PutOutcome> {
        (condition != PutCondition::Always && self.take_loss()).then_some(PutOutcome::Conflict)
    }
}
