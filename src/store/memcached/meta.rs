//! The meta-protocol backend of a [`MemcachedStore`](super::MemcachedStore),
//! on the `memcache` crate's async client: every call is one exchange,
//! pipelined with the calls in flight toward the same server.

use std::sync::Arc;
use std::time::Duration;

use memcache::exp::{
    Arithmetic, AsyncMetaClient, Delete, Error as McError, Get, GetStatus, Meta, MutationStatus,
    Op, OpResult, Set,
};
use tokio::sync::Semaphore;

use super::detach::detached;
use super::errors::to_store_error;
use super::pipeline::{Pipeline, PipelineStats};
use super::router::ClientRouter;
use super::slots::take_slot;
use super::wire::wire_ttl;
use crate::error::{StoreError, StoreErrorKind};
use crate::key::routing_prefix;
use crate::store::{
    check_key, check_keys, check_value, parse_counter, Counters, PutCondition, PutOutcome,
    Versioned,
};

/// memcached spoken to with the meta protocol.
#[derive(Clone)]
pub(super) struct MetaStore {
    pub(super) client: AsyncMetaClient,
    pub(super) servers: Vec<String>,
    /// `None` when pipelining is off.
    pub(super) pipeline: Option<Pipeline>,
    /// How long a caller waits for its exchange.
    pub(super) io_timeout: Duration,
    /// How long a call outside the pipeline waits for a connection slot.
    pub(super) connect_timeout: Duration,
    pub(super) max_connections: usize,
    /// Per server, the connection slots of calls that bypass the pipeline;
    /// the pipeline's own batches are bounded by its depth.
    pub(super) slots: Arc<[Arc<Semaphore>]>,
}

impl MetaStore {
    /// Checks that every server answers.
    pub(super) async fn ping(&self) -> Result<(), StoreError> {
        match tokio::time::timeout(self.io_timeout, self.client.noop()).await {
            Ok(answered) => answered.map_err(to_store_error),
            Err(_) => Err(self.timed_out(None, false)),
        }
    }

    /// A caller's wait for its exchange with `server` (or with several)
    /// ran out.
    fn timed_out(&self, server: Option<usize>, writes: bool) -> StoreError {
        let error = StoreError::new(
            StoreErrorKind::Timeout,
            format!("did not answer within {:?}", self.io_timeout),
        );
        let error = match server {
            Some(server) => error.at(&self.servers[server]),
            None => error,
        };
        if writes {
            error.ambiguous()
        } else {
            error
        }
    }

    pub(super) fn is_pipelining(&self) -> bool {
        self.pipeline.is_some()
    }

    pub(super) fn pipeline_stats(&self) -> PipelineStats {
        self.pipeline
            .as_ref()
            .map(Pipeline::stats)
            .unwrap_or_default()
    }

    /// The server index of a call on `first` and `rest`, if they all live
    /// on one server (keys sharing a routing prefix always do).
    fn lane(&self, first: &[u8], rest: &[Vec<u8>]) -> Option<usize> {
        if self.servers.len() == 1 {
            return Some(0);
        }
        let prefix = routing_prefix(first);
        let home = ClientRouter::place(first, &self.servers);
        rest.iter()
            .all(|key| {
                routing_prefix(key) == prefix || ClientRouter::place(key, &self.servers) == home
            })
            .then_some(home)
    }

    /// Runs `ops` (on the keys `first` and `rest`) in one round trip: in
    /// the pipeline when they share a server, directly otherwise. One
    /// result per operation, in order.
    async fn exchange(
        &self,
        first: &[u8],
        rest: &[Vec<u8>],
        ops: Vec<Op>,
    ) -> Result<Vec<Result<OpResult, McError>>, StoreError> {
        let expected = ops.len();
        let writes = ops.iter().any(|op| !matches!(op, Op::Get(_)));
        let lane = self
            .pipeline
            .as_ref()
            .and_then(|pipeline| Some((pipeline, self.lane(first, rest)?)));
        let exchange = async {
            match lane {
                Some((pipeline, lane)) => pipeline.run(lane, ops).await,
                None => self.direct(first, rest, ops).await,
            }
        };
        let results = tokio::time::timeout(self.io_timeout, exchange)
            .await
            .map_err(|_| self.timed_out(self.lane(first, rest), writes))??;
        if results.len() != expected {
            let error = StoreError::new(
                StoreErrorKind::Protocol,
                format!("{} results for {expected} operations", results.len()),
            );
            return Err(if writes { error.ambiguous() } else { error });
        }
        Ok(results)
    }

    /// Runs `ops` outside the pipeline. On one server it takes a connection
    /// slot first, then runs [`detached`], so a caller that stops waiting
    /// leaves the exchange to finish and keep its connection; across
    /// servers it runs in the caller's future.
    async fn direct(
        &self,
        first: &[u8],
        rest: &[Vec<u8>],
        ops: Vec<Op>,
    ) -> Result<Vec<Result<OpResult, McError>>, StoreError> {
        let Some(server) = self.lane(first, rest) else {
            return self.client.run_batch(ops).await.map_err(to_store_error);
        };
        let slot = take_slot(
            &self.slots[server],
            self.connect_timeout,
            self.max_connections,
            &self.servers[server],
        )
        .await?;
        let client = self.client.clone();
        detached(async move {
            let results = client.run_batch(ops).await.map_err(to_store_error);
            drop(slot);
            results
        })
        .await
    }
}

fn counter_from(key: &[u8], result: OpResult) -> Result<Option<u64>, StoreError> {
    match result {
        OpResult::Get(get) if get.status == GetStatus::Hit => {
            parse_counter(key, get.value.as_deref().unwrap_or_default()).map(Some)
        }
        OpResult::Get(_) => Ok(None),
        _ => Err(StoreError::new(
            StoreErrorKind::Protocol,
            "a read answered as a write",
        )),
    }
}

/// The one result of a single-operation exchange.
fn only(results: Vec<Result<OpResult, McError>>) -> Result<OpResult, StoreError> {
    results
        .into_iter()
        .next()
        .ok_or_else(|| StoreError::new(StoreErrorKind::Protocol, "no result"))?
        .map_err(to_store_error)
}

fn out_of_kind(what: &str) -> StoreError {
    StoreError::new(
        StoreErrorKind::Protocol,
        format!("{what} answered out of kind"),
    )
}

/// The store operations, as [`Store`](crate::store::Store) states them.
/// They are inherent methods, not a `Store` impl, so that a call on a
/// [`MemcachedStore`](super::MemcachedStore) costs one boxed future, not
/// two.
impl MetaStore {
    pub(super) async fn increment(
        &self,
        key: &[u8],
        delta: u64,
        ttl: Duration,
        also_read: &[Vec<u8>],
    ) -> Result<Counters, StoreError> {
        check_keys(key, also_read)?;
        let increment = Arithmetic::new(key)
            .delta(delta)
            .initial(delta, wire_ttl(ttl));
        let operations = std::iter::once(Op::from(increment))
            .chain(also_read.iter().map(|k| Op::from(Get::new(k))))
            .collect();
        let mut results = self.exchange(key, also_read, operations).await?.into_iter();
        let value = match results.next() {
            Some(Ok(OpResult::Arithmetic(result))) => result.value.ok_or_else(|| {
                StoreError::new(
                    StoreErrorKind::Protocol,
                    format!(
                        "increment of {} returned no value",
                        String::from_utf8_lossy(key)
                    ),
                )
                .ambiguous()
            })?,
            Some(Ok(_)) | None => return Err(out_of_kind("increment")),
            Some(Err(error)) => return Err(to_store_error(error)),
        };
        // The increment has landed: a read failing now must not pass for
        // a call that did nothing, or a caller might repeat it.
        let read = also_read
            .iter()
            .zip(results)
            .map(|(k, result)| {
                result
                    .map_err(to_store_error)
                    .and_then(|result| counter_from(k, result))
                    .map_err(StoreError::ambiguous)
            })
            .collect::<Result<_, _>>()?;
        Ok(Counters { value, read })
    }

    pub(super) async fn decrement(
        &self,
        key: &[u8],
        delta: u64,
    ) -> Result<Option<u64>, StoreError> {
        check_key(key)?;
        let decrement = Arithmetic::new(key).decrement().delta(delta);
        let results = self.exchange(key, &[], vec![decrement.into()]).await?;
        let OpResult::Arithmetic(result) = only(results)? else {
            return Err(out_of_kind("decrement").ambiguous());
        };
        Ok(match result.status {
            MutationStatus::NotFound => None,
            _ => result.value,
        })
    }

    pub(super) async fn get_counters(
        &self,
        keys: &[Vec<u8>],
    ) -> Result<Vec<Option<u64>>, StoreError> {
        let Some((first, rest)) = keys.split_first() else {
            return Ok(Vec::new());
        };
        for key in keys {
            check_key(key)?;
        }
        let operations = keys.iter().map(|k| Op::from(Get::new(k))).collect();
        let results = self.exchange(first, rest, operations).await?;
        keys.iter()
            .zip(results)
            .map(|(k, result)| counter_from(k, result.map_err(to_store_error)?))
            .collect()
    }

    pub(super) async fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        check_key(key)?;
        let read = Get::new(key).meta(Meta::NONE.cas());
        let results = self.exchange(key, &[], vec![read.into()]).await?;
        let OpResult::Get(result) = only(results)? else {
            return Err(out_of_kind("read"));
        };
        if result.status != GetStatus::Hit {
            return Ok(None);
        }
        let version = result.item.cas.ok_or_else(|| {
            StoreError::new(StoreErrorKind::Protocol, "read returned no CAS token")
        })?;
        Ok(Some(Versioned {
            value: result.value.unwrap_or_default(),
            version,
        }))
    }

    /// Writes `value` if `condition` holds, asking memcached for the
    /// written item's CAS token (`c`).
    pub(super) async fn put_versioned(
        &self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
        condition: PutCondition,
    ) -> Result<(PutOutcome, Option<u64>), StoreError> {
        check_key(key)?;
        check_value(value)?;
        let set = Set::new(key, value).ttl_raw(wire_ttl(ttl)).return_cas();
        let set = match condition {
            PutCondition::Always => set,
            PutCondition::Absent => set.add(),
            PutCondition::Version(version) => set.compare_cas(version),
        };
        let results = self.exchange(key, &[], vec![set.into()]).await?;
        let OpResult::Mutation(result) = only(results)? else {
            return Err(out_of_kind("write").ambiguous());
        };
        Ok(match result.status {
            MutationStatus::Applied => (PutOutcome::Stored, result.cas),
            _ => (PutOutcome::Conflict, None),
        })
    }

    pub(super) async fn delete(&self, keys: &[Vec<u8>]) -> Result<usize, StoreError> {
        let Some((first, rest)) = keys.split_first() else {
            return Ok(0);
        };
        for key in keys {
            check_key(key)?;
        }
        let operations = keys.iter().map(|k| Op::from(Delete::new(k))).collect();
        let results = self.exchange(first, rest, operations).await?;
        let mut deleted = 0;
        for result in results {
            match result.map_err(to_store_error)? {
                OpResult::Mutation(result) if result.applied() => deleted += 1,
                OpResult::Mutation(_) => {}
                _ => return Err(out_of_kind("delete").ambiguous()),
            }
        }
        Ok(deleted)
    }
}
