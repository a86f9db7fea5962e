//! The [`Store`] operations of a [`ClassicStore`], each one write of every
//! command it needs and its replies read in order.

use std::time::Duration;

use async_trait::async_trait;

use super::{reply, ClassicStore};
use crate::error::StoreError;
use crate::store::memcached::connection::protocol;
use crate::store::memcached::wire::wire_ttl;
use crate::store::{
    check_key, check_keys, check_value, either_written, parse_counter, read_beside_increment,
    Counters, PutCondition, PutOutcome, Store, Versioned,
};

/// `incr` / `add` rounds before a missing counter is reported: each lost
/// `add` means another process created the counter, so the next `incr`
/// finds it unless it was deleted again at once.
const CREATE_ROUNDS: usize = 3;

pub(super) fn get_command(request: &mut Vec<u8>, verb: &[u8], keys: &[&[u8]]) {
    let mut parts: Vec<&[u8]> = Vec::with_capacity(keys.len() + 1);
    parts.push(verb);
    parts.extend_from_slice(keys);
    reply::command(request, &parts);
}

#[async_trait]
impl Store for ClassicStore {
    async fn increment(
        &self,
        key: &[u8],
        delta: u64,
        ttl: Duration,
        also_read: &[&[u8]],
    ) -> Result<Counters, StoreError> {
        check_keys(key, also_read)?;
        let server = self.home(key);
        let together = also_read.iter().all(|other| self.home(other) == server);
        let reading = together && !also_read.is_empty();
        let delta_text = delta.to_string();
        let mut request = Vec::new();
        reply::command(&mut request, &[b"incr", key, delta_text.as_bytes()]);
        if reading {
            get_command(&mut request, b"get", also_read);
        }
        let ttl = wire_ttl(ttl);
        let key = key.to_vec();
        let (value, items) = self
            .with_connection(server, true, move |mut connection| async move {
                {
                    connection.send(&request).await?;
                }
                let incremented = reply::arithmetic(&mut connection).await;
                // The reads' replies follow whatever the increment answered.
                let items = match reading {
                    true => reply::items(&mut connection).await?,
                    false => Default::default(),
                };
                let mut value = incremented?;
                let mut rounds = 0;
                while value.is_none() && rounds < CREATE_ROUNDS {
                    rounds += 1;
                    let mut add = Vec::new();
                    reply::storage(&mut add, b"add", &key, ttl, delta_text.as_bytes(), None);
                    connection.send(&add).await?;
                    if reply::stored(&mut connection).await? == PutOutcome::Stored {
                        value = Some(delta);
                    } else {
                        // Another process created it first: add to theirs.
                        let mut again = Vec::new();
                        reply::command(&mut again, &[b"incr", &key, delta_text.as_bytes()]);
                        connection.send(&again).await?;
                        value = reply::arithmetic(&mut connection).await?;
                    }
                }
                let value = value.ok_or_else(|| {
                    protocol(format!(
                        "{} kept disappearing between incr and add",
                        String::from_utf8_lossy(&key)
                    ))
                })?;
                Ok((connection, (value, items)))
            })
            .await?;
        let read = if together {
            read_beside_increment(also_read.iter(), |other| {
                items
                    .get(*other)
                    .map(|item| parse_counter(other, &item.value))
                    .transpose()
            })?
        } else {
            // Rare: keys of one client on several servers, read after
            // the increment landed, so ambiguous too if they fail.
            let keys: Vec<Vec<u8>> = also_read.iter().map(|other| other.to_vec()).collect();
            self.get_counters(&keys)
                .await
                .map_err(StoreError::ambiguous)?
        };
        Ok(Counters { value, read })
    }

    async fn decrement(&self, key: &[u8], delta: u64) -> Result<Option<u64>, StoreError> {
        check_key(key)?;
        let delta = delta.to_string();
        let mut request = Vec::new();
        reply::command(&mut request, &[b"decr", key, delta.as_bytes()]);
        self.with_connection(self.home(key), true, move |mut connection| async move {
            {
                connection.send(&request).await?;
            }
            let value = reply::arithmetic(&mut connection).await?;
            Ok((connection, value))
        })
        .await
    }

    async fn get_counters(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<u64>>, StoreError> {
        for key in keys {
            check_key(key)?;
        }
        let mut counters = vec![None; keys.len()];
        for (server, group) in self.by_server(keys) {
            let group_keys: Vec<&[u8]> = group.iter().map(|(_, key)| *key).collect();
            let read = self.read_counters(server, &group_keys).await?;
            for ((at, _), value) in group.into_iter().zip(read) {
                counters[at] = value;
            }
        }
        Ok(counters)
    }

    async fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        check_key(key)?;
        let mut request = Vec::new();
        get_command(&mut request, b"gets", &[key]);
        let mut items = self
            .with_connection(self.home(key), false, move |mut connection| async move {
                {
                    connection.send(&request).await?;
                }
                let items = reply::items(&mut connection).await?;
                Ok((connection, items))
            })
            .await?;
        let Some(item) = items.remove(key) else {
            return Ok(None);
        };
        let version = item
            .version
            .ok_or_else(|| protocol("gets answered without a CAS unique".to_owned()))?;
        Ok(Some(Versioned {
            value: item.value,
            version,
        }))
    }

    /// The classic protocol's `cas` does not return the new CAS token: the
    /// version is never known.
    async fn put_versioned(
        &self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
        condition: PutCondition,
    ) -> Result<(PutOutcome, Option<u64>), StoreError> {
        check_key(key)?;
        check_value(value)?;
        let mut request = Vec::new();
        let ttl = wire_ttl(ttl);
        match condition {
            PutCondition::Always => reply::storage(&mut request, b"set", key, ttl, value, None),
            PutCondition::Absent => reply::storage(&mut request, b"add", key, ttl, value, None),
            PutCondition::Version(version) => {
                reply::storage(&mut request, b"cas", key, ttl, value, Some(version))
            }
            PutCondition::VersionOrAbsent(version) => {
                reply::storage(&mut request, b"cas", key, ttl, value, Some(version));
                reply::storage(&mut request, b"add", key, ttl, value, None);
            }
        }
        let outcome = self
            .with_connection(self.home(key), true, move |mut connection| async move {
                {
                    connection.send(&request).await?;
                }
                let mut outcome = reply::stored(&mut connection).await?;
                if let PutCondition::VersionOrAbsent(_) = condition {
                    // The add after the `cas`.
                    let add = reply::stored(&mut connection).await?;
                    (outcome, _) = either_written((outcome, None), (add, None));
                }
                Ok((connection, outcome))
            })
            .await?;
        Ok((outcome, None))
    }

    async fn delete(&self, keys: &[Vec<u8>]) -> Result<usize, StoreError> {
        for key in keys {
            check_key(key)?;
        }
        let mut deleted = 0;
        for (server, group) in self.by_server(keys) {
            let mut request = Vec::new();
            for (_, key) in &group {
                reply::command(&mut request, &[b"delete", key]);
            }
            let count = group.len();
            deleted += self
                .with_connection(server, true, move |mut connection| async move {
                    {
                        connection.send(&request).await?;
                    }
                    let mut existed = 0;
                    for _ in 0..count {
                        existed += usize::from(reply::deleted(&mut connection).await?);
                    }
                    Ok((connection, existed))
                })
                .await?;
        }
        Ok(deleted)
    }
}
