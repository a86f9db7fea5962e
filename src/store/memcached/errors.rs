//! memcached failures as [`StoreError`]s, each keeping the `memcache`
//! crate's error as its source.

use memcache::exp::Error as McError;

use crate::error::{StoreError, StoreErrorKind};

/// `error` as a store error of its kind, ambiguous when the `memcache`
/// client found the request written but unanswered.
pub(super) fn to_store_error(error: McError) -> StoreError {
    let error_kind = kind(&error);
    let ambiguous = error.is_ambiguous();
    let store_error = StoreError::new(error_kind, error.to_string()).caused_by(error);
    if ambiguous {
        store_error.ambiguous()
    } else {
        store_error
    }
}

fn kind(error: &McError) -> StoreErrorKind {
    match error {
        McError::Ambiguous { source, .. } => kind(source),
        McError::Io(_) => StoreErrorKind::Io,
        McError::Timeout { .. } => StoreErrorKind::Timeout,
        McError::Server(_) => StoreErrorKind::Server,
        McError::Rejected(_) => StoreErrorKind::Rejected,
        McError::Usage(_) => StoreErrorKind::InvalidKey,
        _ => StoreErrorKind::Protocol,
    }
}
