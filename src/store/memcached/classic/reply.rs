//! The classic text protocol: requests as bytes, and the replies parsed.

use std::collections::HashMap;

use crate::error::{StoreError, StoreErrorKind};
use crate::store::memcached::connection::{protocol, Connection};
use crate::store::{counter_digits, PutOutcome};

/// Appends `parts` separated by spaces and ended by `\r\n`.
pub(super) fn command(request: &mut Vec<u8>, parts: &[&[u8]]) {
    for (at, part) in parts.iter().enumerate() {
        if at > 0 {
            request.push(b' ');
        }
        request.extend_from_slice(part);
    }
    request.extend_from_slice(b"\r\n");
}

/// Appends a storage command (`set`, `add`, `cas`) with its data block.
pub(super) fn storage(
    request: &mut Vec<u8>,
    verb: &[u8],
    key: &[u8],
    ttl: u32,
    value: &[u8],
    version: Option<u64>,
) {
    let ttl = ttl.to_string();
    let length = value.len().to_string();
    let version = version.map(|v| v.to_string());
    let mut parts: Vec<&[u8]> = vec![verb, key, b"0", ttl.as_bytes(), length.as_bytes()];
    if let Some(version) = &version {
        parts.push(version.as_bytes());
    }
    command(request, &parts);
    request.extend_from_slice(value);
    request.extend_from_slice(b"\r\n");
}

/// A server's error line, or `None` for any other line.
fn error_line(line: &[u8]) -> Option<StoreError> {
    let text = String::from_utf8_lossy(line);
    if line == b"ERROR" {
        return Some(StoreError::new(
            StoreErrorKind::Protocol,
            "the server does not know the command (ERROR)",
        ));
    }
    // Such as an increment of a value that is not a number: refused, as
    // the meta protocol's store reports it.
    if let Some(message) = text.strip_prefix("CLIENT_ERROR ") {
        return Some(StoreError::new(
            StoreErrorKind::Rejected,
            format!("CLIENT_ERROR {message}"),
        ));
    }
    text.strip_prefix("SERVER_ERROR ")
        .map(|message| StoreError::new(StoreErrorKind::Server, format!("SERVER_ERROR {message}")))
}

fn unexpected(what: &str, line: &[u8]) -> StoreError {
    error_line(line).unwrap_or_else(|| {
        protocol(format!(
            "unexpected reply to {what}: {:?}",
            String::from_utf8_lossy(&line[..line.len().min(80)])
        ))
    })
}

/// The reply to `incr` or `decr`: the new value, or `None` (`NOT_FOUND`).
pub(super) async fn arithmetic(connection: &mut Connection) -> Result<Option<u64>, StoreError> {
    let line = connection.next_line().await?;
    if line == b"NOT_FOUND" {
        return Ok(None);
    }
    counter_digits(line)
        .map(Some)
        .ok_or_else(|| unexpected("incr/decr", line))
}

/// The reply to a storage command: whether it stored (`STORED`), or not
/// because the condition failed (`NOT_STORED`, `EXISTS`) or the key of a
/// `cas` is gone (`NOT_FOUND`).
pub(super) async fn stored(connection: &mut Connection) -> Result<PutOutcome, StoreError> {
    let line = connection.next_line().await?;
    match line {
        b"STORED" => Ok(PutOutcome::Stored),
        // `NOT_FOUND` only answers `cas`: the key is gone.
        b"NOT_FOUND" => Ok(PutOutcome::Vanished),
        b"NOT_STORED" | b"EXISTS" => Ok(PutOutcome::Conflict),
        _ => Err(unexpected("a storage command", line)),
    }
}

/// The reply to `delete`: whether the key existed.
pub(super) async fn deleted(connection: &mut Connection) -> Result<bool, StoreError> {
    let line = connection.next_line().await?;
    match line {
        b"DELETED" => Ok(true),
        b"NOT_FOUND" => Ok(false),
        _ => Err(unexpected("delete", line)),
    }
}

/// An item as `get`/`gets` return it.
pub(super) struct Item {
    pub(super) value: Vec<u8>,
    pub(super) version: Option<u64>,
}

/// The reply to `get`/`gets`: the items found, by key.
pub(super) async fn items(
    connection: &mut Connection,
) -> Result<HashMap<Vec<u8>, Item>, StoreError> {
    let mut found = HashMap::new();
    loop {
        let line = connection.line().await?;
        if line == b"END" {
            return Ok(found);
        }
        let header = std::str::from_utf8(&line).ok();
        let parts: Vec<&str> = header.map(|h| h.split(' ').collect()).unwrap_or_default();
        let (key, length, version) = match parts.as_slice() {
            ["VALUE", key, _flags, length] => (key, length.parse().ok(), None),
            ["VALUE", key, _flags, length, version] => {
                (key, length.parse().ok(), version.parse().ok())
            }
            _ => return Err(unexpected("get", &line)),
        };
        let length: usize = length.ok_or_else(|| unexpected("get", &line))?;
        let value = connection.next_block(length).await?.to_vec();
        found.insert(key.as_bytes().to_vec(), Item { value, version });
    }
}
