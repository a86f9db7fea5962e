//! Window counters that hold something other than a count: written over
//! by another program sharing the memcached, or by an attack on it. The
//! increment of such a counter is refused, and reading one fails, so left
//! alone the client would be decided by the failure policy until the
//! bucket expires. Instead the decision resets the offending counters to
//! zero, reports it, and makes its store call again.

use std::time::Duration;

use crate::algorithm::settings::Settings;
use crate::error::{Error, StoreError, StoreErrorKind};
use crate::store::{parse_counter, Counters, PutCondition};

/// Whether `error` says a counter of the call holds something else: the
/// increment was refused ([`StoreErrorKind::Rejected`], nothing counted),
/// or a read failed after it ([`StoreErrorKind::NotACounter`], counted).
pub(crate) fn not_a_counter(error: &Error) -> Option<&StoreError> {
    match error {
        Error::Store(error)
            if matches!(
                error.kind(),
                StoreErrorKind::Rejected | StoreErrorKind::NotACounter
            ) =>
        {
            Some(error)
        }
        _ => None,
    }
}

/// Resets to zero every one of `current` and `reads` that is not a
/// counter, then makes the decision's call again: the increment of
/// `cost` if the store refused it, only the reads (the current bucket
/// first) if it had landed, so nothing is counted twice. A counter is
/// replaced only if it is still the value read (compare-and-swap), so a
/// count written meanwhile is kept. Within the limiter's deadline, as a
/// whole.
pub(crate) async fn repair(
    settings: &Settings,
    current: &[u8],
    reads: &[&[u8]],
    cost: u64,
    ttl: Duration,
    error: &StoreError,
) -> Result<Counters, Error> {
    let store = settings.store.as_ref();
    let refused = error.kind() == StoreErrorKind::Rejected;
    let work = async {
        for key in std::iter::once(current).chain(reads.iter().copied()) {
            let Some(held) = store.get(key).await? else {
                continue;
            };
            if parse_counter(key, &held.value).is_ok() {
                continue;
            }
            store
                .put(key, b"0", ttl, PutCondition::Version(held.version))
                .await?;
            settings.repairs.counter_reset(key, &held.value);
        }
        if refused {
            return store.increment(current, cost, ttl, reads).await;
        }
        let mut keys = Vec::with_capacity(reads.len() + 1);
        keys.push(current.to_vec());
        keys.extend(reads.iter().map(|key| key.to_vec()));
        let mut read = store.get_counters(&keys).await?;
        let value = read.remove(0).unwrap_or(0);
        Ok::<_, StoreError>(Counters { value, read })
    };
    settings.within_deadline(work).await
}
