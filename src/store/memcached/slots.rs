//! Connection slots: how many exchanges may hold a connection to one
//! server at once, and how long a caller waits for one.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{StoreError, StoreErrorKind};

/// One of a server's slots, if one is free now.
pub(super) fn free_slot(slots: &Arc<Semaphore>) -> Option<OwnedSemaphorePermit> {
    Arc::clone(slots).try_acquire_owned().ok()
}

/// One of `server`'s `max_connections` slots, waited for up to `wait`.
/// Nothing has been sent when this fails.
pub(super) async fn wait_for_slot(
    slots: &Arc<Semaphore>,
    wait: Duration,
    max_connections: usize,
    server: &str,
) -> Result<OwnedSemaphorePermit, StoreError> {
    match tokio::time::timeout(wait, Arc::clone(slots).acquire_owned()).await {
        Ok(Ok(slot)) => Ok(slot),
        Ok(Err(_)) => {
            Err(StoreError::new(StoreErrorKind::Io, "the connection pool was closed").at(server))
        }
        Err(_) => Err(StoreError::new(
            StoreErrorKind::Timeout,
            format!("all {max_connections} connections stayed busy for {wait:?} (max_connections)"),
        )
        .at(server)),
    }
}
