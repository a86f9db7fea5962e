//! The meta-protocol backend of a [`MemcachedStore`](super::MemcachedStore):
//! every call is one exchange of [`request`]s and [`reply`]s on a pooled
//! connection ([`exchange`](mod@exchange)), pipelined with the calls in flight toward
//! the same server.
//!
//! The requests are encoded and the replies parsed here rather than by the
//! `memcache` crate's client, which the store keeps for its health check
//! (`mn` on every server): a batch through that client cost, per
//! operation, an allocation per flag and per opaque token, three checks of
//! the key, a timer per reply and a copy of every reply line, about 38% of
//! the instructions of a decision of the RESP server on memcached
//! (measured with callgrind; BENCHMARKS.md, section 6).

mod answers;
pub(super) mod exchange;
pub(super) mod pipeline;
mod recycled;
pub(super) mod reply;
pub(super) mod request;

use std::sync::Arc;
use std::time::Duration;

use memcache::exp::AsyncMetaClient;

use self::exchange::{exchange_one, Answers};
use self::pipeline::{Pipeline, PipelineStats};
use self::reply::Reply;
use self::request::Request;
use super::errors::to_store_error;

use super::pool::Pools;
use super::router::ClientRouter;
use super::wire::wire_ttl;
use crate::error::{StoreError, StoreErrorKind};
use crate::key::routing_prefix;
use crate::store::{
    check_key, check_keys, check_value, either_written, parse_counter, read_beside_increment,
    Counters, PutCondition, PutOutcome, Versioned,
};
use crate::timer::{timeout_in, timeout_in_unless_bounded, TimerQueue};

/// No keys besides the first, for [`MetaStore::exchange`].
const NO_KEYS: &[&[u8]] = &[];

/// memcached spoken to with the meta protocol.
#[derive(Clone)]
pub(super) struct MetaStore {
    /// The `memcache` crate's client, for the health check.
    pub(super) client: AsyncMetaClient,
    /// Per server, its address, connections and their slots.
    pub(super) pools: Arc<Pools>,
    /// `None` when pipelining is off.
    pub(super) pipeline: Option<Pipeline>,
    /// How long a caller waits for its exchange (the I/O timeout), and
    /// the timer those waits share.
    pub(super) io_deadlines: TimerQueue,
    /// How long an exchange goes on once its caller stops waiting.
    pub(super) drain_timeout: Duration,
}

impl MetaStore {
    /// Checks that every server answers.
    pub(super) async fn ping(&self) -> Result<(), StoreError> {
        match timeout_in(&self.io_deadlines, self.client.noop()).await {
            Some(answered) => answered.map_err(to_store_error),
            None => Err(self.timed_out(None, false)),
        }
    }

    /// A caller's wait for its exchange with `server` (or with several)
    /// ran out.
    fn timed_out(&self, server: Option<usize>, writes: bool) -> StoreError {
        let error = StoreError::new(
            StoreErrorKind::Timeout,
            format!("did not answer within {:?}", self.io_deadlines.limit()),
        );
        let error = match server {
            Some(server) => error.at(self.pools.address(server)),
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
    fn lane<K: AsRef<[u8]>>(&self, first: &[u8], rest: &[K]) -> Option<usize> {
        let servers = self.pools.addresses();
        if servers.len() == 1 {
            return Some(0);
        }
        let prefix = routing_prefix(first);
        let home = ClientRouter::place(first, servers);
        rest.iter()
            .map(K::as_ref)
            .all(|key| routing_prefix(key) == prefix || ClientRouter::place(key, servers) == home)
            .then_some(home)
    }

    /// Runs `request`, whose operations are on the keys `first` and
    /// `rest` in that order, in one round trip per server: in the pipeline
    /// when they share a server, directly otherwise. One result per
    /// operation, in order.
    async fn exchange<K: AsRef<[u8]> + Sync>(
        &self,
        first: &[u8],
        rest: &[K],
        request: Request,
    ) -> Result<Answers, StoreError> {
        let expected = request.len();
        let writes = request.writes();
        let lane = self.lane(first, rest);
        // A caller that gives up sooner needs no timer here (`patience`).
        let answers = timeout_in_unless_bounded(&self.io_deadlines, async {
            match (&self.pipeline, lane) {
                (Some(pipeline), Some(lane)) => pipeline.run(lane, request, writes).await,
                (None, Some(server)) => self.direct(server, request).await,
                // Rare (reads and deletes across clients): boxed, so that
                // every call's future does not carry it.
                (_, None) => Ok(Box::pin(self.spread(first, rest, request)).await),
            }
        })
        .await
        .ok_or_else(|| self.timed_out(lane, writes))??;
        if answers.len() != expected {
            let error = StoreError::new(
                StoreErrorKind::Protocol,
                format!("{} results for {expected} operations", answers.len()),
            );
            return Err(if writes { error.ambiguous() } else { error });
        }
        Ok(answers)
    }

    /// Runs `request` on `server` outside the pipeline: it takes a
    /// connection slot first, then runs the exchange detached
    /// ([`exchange_one`]), so a caller that stops waiting once it is sent
    /// leaves the exchange to finish and keep its connection.
    async fn direct(&self, server: usize, request: Request) -> Result<Answers, StoreError> {
        let checkout = self.pools.checkout(server).await?;
        let pools = Arc::clone(&self.pools);
        Ok(exchange_one(pools, checkout, request, self.drain_timeout, ()).await)
    }

    /// Runs `request`, whose keys live on several servers, as one exchange
    /// per server, in turn; an exchange that could not be sent answers
    /// each of its operations with why.
    async fn spread<K: AsRef<[u8]>>(&self, first: &[u8], rest: &[K], request: Request) -> Answers {
        let keys = std::iter::once(first).chain(rest.iter().map(K::as_ref));
        let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
        for (at, key) in keys.enumerate() {
            let server = ClientRouter::place(key, self.pools.addresses());
            match groups.iter_mut().find(|(home, _)| *home == server) {
                Some((_, positions)) => positions.push(at),
                None => groups.push((server, vec![at])),
            }
        }
        let mut answers: Vec<Option<Result<Reply, StoreError>>> =
            (0..request.len()).map(|_| None).collect();
        for (server, positions) in groups {
            let part = request.select(&positions);
            match self.direct(server, part).await {
                Ok(replies) => {
                    for (at, reply) in positions.into_iter().zip(replies) {
                        answers[at] = Some(reply);
                    }
                }
                Err(error) => {
                    for at in positions {
                        answers[at] = Some(Err(error.clone()));
                    }
                }
            }
        }
        answers.into_iter().flatten().collect()
    }
}

fn counter_from(key: &[u8], reply: Result<Reply, StoreError>) -> Result<Option<u64>, StoreError> {
    match reply? {
        Reply::Number(number) => Ok(Some(number)),
        Reply::Value { data, .. } => parse_counter(key, &data).map(Some),
        Reply::Miss => Ok(None),
        _ => Err(out_of_kind("read")),
    }
}

/// The one result of a single-operation exchange.
fn only(answers: Answers) -> Result<Reply, StoreError> {
    next_result(&mut answers.into_iter())
}

/// The next operation's result of an exchange.
fn next_result(
    answers: &mut impl Iterator<Item = Result<Reply, StoreError>>,
) -> Result<Reply, StoreError> {
    answers
        .next()
        .ok_or_else(|| StoreError::new(StoreErrorKind::Protocol, "no result"))?
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
        also_read: &[&[u8]],
    ) -> Result<Counters, StoreError> {
        check_keys(key, also_read)?;
        let key_bytes = key.len() + also_read.iter().map(|other| other.len()).sum::<usize>();
        let mut request = Request::with_capacity(1 + also_read.len(), key_bytes, 0);
        request.increment(key, delta, wire_ttl(ttl));
        for other in also_read {
            request.read_counter(other);
        }
        let mut answers = self.exchange(key, also_read, request).await?.into_iter();
        let value = match answers.next() {
            Some(Ok(Reply::Number(value))) => value,
            Some(Ok(Reply::Value { data, .. })) => {
                return Err(StoreError::new(
                    StoreErrorKind::Protocol,
                    format!(
                        "increment of {} returned {:?}, not a number",
                        String::from_utf8_lossy(key),
                        String::from_utf8_lossy(&data[..data.len().min(40)])
                    ),
                )
                .ambiguous())
            }
            Some(Ok(_)) | None => return Err(out_of_kind("increment").ambiguous()),
            Some(Err(error)) => return Err(error),
        };
        let read = read_beside_increment(also_read.iter().zip(answers), |(k, reply)| {
            counter_from(k, reply)
        })?;
        Ok(Counters { value, read })
    }

    pub(super) async fn decrement(
        &self,
        key: &[u8],
        delta: u64,
    ) -> Result<Option<u64>, StoreError> {
        check_key(key)?;
        let mut request = Request::with_capacity(1, key.len(), 0);
        request.decrement(key, delta);
        match only(self.exchange(key, NO_KEYS, request).await?)? {
            Reply::Number(value) => Ok(Some(value)),
            Reply::NotFound => Ok(None),
            _ => Err(out_of_kind("decrement").ambiguous()),
        }
    }

    pub(super) async fn get_counters(
        &self,
        keys: &[Vec<u8>],
    ) -> Result<Vec<Option<u64>>, StoreError> {
        let Some((first, rest)) = keys.split_first() else {
            return Ok(Vec::new());
        };
        let key_bytes = keys.iter().map(Vec::len).sum();
        let mut request = Request::with_capacity(keys.len(), key_bytes, 0);
        for key in keys {
            check_key(key)?;
            request.read_counter(key);
        }
        let answers = self.exchange(first, rest, request).await?;
        keys.iter()
            .zip(answers)
            .map(|(k, reply)| counter_from(k, reply))
            .collect()
    }

    pub(super) async fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        check_key(key)?;
        let mut request = Request::with_capacity(1, key.len(), 0);
        request.get(key);
        let (value, cas) = match only(self.exchange(key, NO_KEYS, request).await?)? {
            Reply::Miss => return Ok(None),
            Reply::Value { data, cas } => (data, cas),
            _ => return Err(out_of_kind("read")),
        };
        let version = cas.ok_or_else(|| {
            StoreError::new(StoreErrorKind::Protocol, "read returned no CAS token")
        })?;
        Ok(Some(Versioned { value, version }))
    }

    /// The version of `key`, without its value (`mg <key> c`).
    pub(super) async fn version(&self, key: &[u8]) -> Result<Option<u64>, StoreError> {
        check_key(key)?;
        let mut request = Request::with_capacity(1, key.len(), 0);
        request.version(key);
        match only(self.exchange(key, NO_KEYS, request).await?)? {
            Reply::Miss => Ok(None),
            Reply::Done { cas: Some(version) } => Ok(Some(version)),
            Reply::Done { cas: None } => Err(StoreError::new(
                StoreErrorKind::Protocol,
                "a version read returned no CAS token",
            )),
            _ => Err(out_of_kind("version read")),
        }
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
        let mut request = Request::with_capacity(1, key.len(), value.len());
        request.set(key, value, wire_ttl(ttl), condition);
        let mut answers = self.exchange(key, NO_KEYS, request).await?.into_iter();
        let outcome = |reply| match reply {
            Reply::Done { cas } => Ok((PutOutcome::Stored, cas)),
            // `NF` only answers a compare (`C`): the key is gone.
            Reply::NotFound => Ok((PutOutcome::Vanished, None)),
            Reply::NotStored | Reply::Exists => Ok((PutOutcome::Conflict, None)),
            _ => Err(out_of_kind("write").ambiguous()),
        };
        let first = outcome(next_result(&mut answers)?)?;
        if !matches!(condition, PutCondition::VersionOrAbsent(_)) {
            return Ok(first);
        }
        // The add after the compare.
        let add = outcome(next_result(&mut answers)?)?;
        Ok(either_written(first, add))
    }

    pub(super) async fn delete(&self, keys: &[Vec<u8>]) -> Result<usize, StoreError> {
        let Some((first, rest)) = keys.split_first() else {
            return Ok(0);
        };
        let key_bytes = keys.iter().map(Vec::len).sum();
        let mut request = Request::with_capacity(keys.len(), key_bytes, 0);
        for key in keys {
            check_key(key)?;
            request.delete(key);
        }
        let mut deleted = 0;
        for reply in self.exchange(first, rest, request).await? {
            match reply? {
                Reply::Done { .. } => deleted += 1,
                Reply::NotFound | Reply::Exists => {}
                _ => return Err(out_of_kind("delete").ambiguous()),
            }
        }
        Ok(deleted)
    }
}
