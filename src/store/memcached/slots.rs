//! Connection slots: how many exchanges may hold a connection to one
//! server at once, and how long a caller waits for one.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::{StoreError, StoreErrorKind};

/// One of `server`'s `max_connections` slots, waited for up to `wait`.
/// Nothing has been sent when this fails.
pub(super) async fn take_slot(
    slots: &Arc<Semaphore>,
    wait: Duration,
    max_connections: usize,
    server: &str,
) -> Result<OwnedSemaphorePermit, StoreError> {
    // A free slot is taken at once. Waiting (its timer, its place in the
    // semaphore's queue) is boxed, so every exchange's future does not
    // carry it.
    if let Ok(slot) = Arc::clone(slots).try_acquire_owned() {
        return Ok(slot);
    }
    Box::pin(wait_for_slot(slots, wait, max_connections, server)).await
}

async fn wait_for_slot(
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
