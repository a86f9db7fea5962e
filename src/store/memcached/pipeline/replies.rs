//! Reading a shared batch's results back into each job's own answer.

use memcache::exp::{Error as McError, OpResult};

use super::JobResults;
use crate::error::{StoreError, StoreErrorKind};

/// Whether memcached answered an operation with an error line
/// (`CLIENT_ERROR`, `SERVER_ERROR`): the `memcache` client stops reading a
/// batch there, though memcached goes on executing the rest of it.
pub(super) fn is_error_reply(error: &McError) -> bool {
    match error {
        McError::Ambiguous { source, .. } => is_error_reply(source),
        McError::Rejected(_) | McError::Server(_) => true,
        _ => false,
    }
}

/// The answer for a job batched after another job's error reply. Its
/// operations were sent and memcached probably executed them, but their
/// answers were never read; the `memcache` client reports each with the
/// other job's error, which would mislead (an increment "rejected" as
/// non-numeric because of someone else's key), so say what happened.
/// Ambiguous exactly when the client found a written operation with side
/// effects among them.
pub(super) fn unread(
    cause: &str,
    server: &str,
    results: Vec<Result<OpResult, McError>>,
) -> JobResults {
    if results.iter().all(Result::is_ok) {
        return Ok(results);
    }
    let error = StoreError::new(
        StoreErrorKind::Io,
        format!(
            "answer not read: memcached {server} answered an earlier call in the same \
             pipelined batch with an error ({cause}), and the client stops reading a batch there"
        ),
    );
    let written = results
        .iter()
        .any(|result| matches!(result, Err(error) if error.is_ambiguous()));
    Err(if written { error.ambiguous() } else { error })
}
