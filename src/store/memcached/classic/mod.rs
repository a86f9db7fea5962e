//! [`ClassicStore`]: memcached over the classic text protocol.

mod builder;
mod reply;
mod store;

pub use self::builder::ClassicStoreBuilder;

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use self::store::get_command;
use super::connection::{protocol, Connection};
use super::detach::detached;
use super::pool::{Pools, Slot};
use super::router::ClientRouter;
use crate::error::{StoreError, StoreErrorKind};
use crate::store::parse_counter;
use crate::timer::{timeout_in, TimerQueue};

/// A memcached store over the classic text protocol (`incr`, `add`, `get`,
/// `gets`, `cas`, `delete`), for what does not pass the meta protocol
/// through: twemproxy (nutcracker), mcrouter, memcached before 1.6.
///
/// Each call is one write of every command it needs, then the replies
/// read in order, on a pooled connection of the key's server: the
/// increment of a window decision and the reads of its older buckets go
/// together. A missing counter costs more: `incr` answers `NOT_FOUND`, the
/// store sends `add` with the delta and the lifetime, and if another
/// process created the counter in between (`NOT_STORED`), `incr` again, so
/// no count is lost.
///
/// Connections per server are bounded
/// ([`max_connections`](ClassicStoreBuilder::max_connections)), and an
/// exchange whose caller stops waiting goes on in the background until its
/// replies are read ([`drain_timeout`](ClassicStoreBuilder::drain_timeout)),
/// so a server that hangs for a while costs no new connections: the ones
/// that waited are used again once it answers.
///
/// ```no_run
/// use memcache_ratelimit::store::ClassicStore;
/// use memcache_ratelimit::{RateLimiter, SlidingWindow};
/// use std::sync::Arc;
///
/// # async fn example() -> Result<(), Box<dyn std::error::Error>> {
/// // A twemproxy listening on 22121 in front of the memcached fleet.
/// let store = ClassicStore::builder().server("127.0.0.1:22121").build()?;
/// let limiter = SlidingWindow::builder("100/minute".parse()?, Arc::new(store))
///     .sub_windows(4)
///     .build()?;
/// limiter.check(b"alice").await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct ClassicStore {
    pools: Arc<Pools>,
    /// How long a caller waits for its exchange (the I/O timeout), and
    /// the timer those waits share.
    io_deadlines: TimerQueue,
    /// How long an exchange goes on once its caller stops waiting, before
    /// its connection is closed.
    drain_timeout: Duration,
}

impl ClassicStore {
    /// Starts building a store.
    pub fn builder() -> ClassicStoreBuilder {
        ClassicStoreBuilder::default()
    }

    /// The servers, as configured.
    pub fn servers(&self) -> &[String] {
        self.pools.addresses()
    }

    /// Round trips made so far: writes sent, each followed by reading its
    /// replies. A window decision is 1, plus 1 or 2 when it creates its
    /// counter (`add`, and `incr` again if another process created it
    /// first).
    pub fn round_trips(&self) -> u64 {
        self.pools.round_trips.load(Ordering::Relaxed)
    }

    /// The server that holds `key`.
    pub fn server_for(&self, key: &[u8]) -> &str {
        self.pools.address(self.home(key))
    }

    /// Checks that every server answers (`version`).
    pub async fn ping(&self) -> Result<(), StoreError> {
        for server in 0..self.pools.addresses().len() {
            self.with_connection(server, false, move |mut connection| async move {
                connection.send(b"version\r\n").await?;
                let line = connection.line().await?;
                if !line.starts_with(b"VERSION ") {
                    return Err(protocol(format!(
                        "unexpected reply to version: {:?}",
                        String::from_utf8_lossy(&line)
                    )));
                }
                Ok((connection, ()))
            })
            .await?;
        }
        Ok(())
    }

    fn home(&self, key: &[u8]) -> usize {
        match self.pools.addresses().len() {
            1 => 0,
            _ => ClientRouter::place(key, self.pools.addresses()),
        }
    }

    /// `keys` by the server that holds them, with their positions.
    fn by_server<'k>(&self, keys: &'k [Vec<u8>]) -> BTreeMap<usize, Vec<(usize, &'k [u8])>> {
        let mut groups: BTreeMap<usize, Vec<(usize, &[u8])>> = BTreeMap::new();
        for (at, key) in keys.iter().enumerate() {
            groups.entry(self.home(key)).or_default().push((at, key));
        }
        groups
    }

    /// Runs `work` on a connection to `server`; the caller waits up to the
    /// I/O timeout, the one timer of the call. Once the connection is taken
    /// the exchange is [`detached`]: if the caller stops waiting, it goes on
    /// in the background within the drain timeout, and its connection goes
    /// back to the pool if the work succeeds. An error once `writes` were
    /// sent is ambiguous.
    async fn with_connection<T, F, Fut>(
        &self,
        server: usize,
        writes: bool,
        work: F,
    ) -> Result<T, StoreError>
    where
        F: FnOnce(Connection) -> Fut + Send + 'static,
        Fut: Future<Output = Result<(Connection, T), StoreError>> + Send + 'static,
        T: Send + 'static,
    {
        let address = self.pools.address(server);
        let checkout = self.pools.checkout(server).await?;
        // Taken apart before the exchange is boxed, which then holds the
        // checkout's parts, not the checkout beside them.
        let (connection, slot) = checkout.into_parts();
        let exchange = detached(
            || exchange(Arc::clone(&self.pools), server, connection, slot, work),
            self.drain_timeout,
        );
        let outcome = match timeout_in(&self.io_deadlines, exchange).await {
            Some(outcome) => outcome,
            None => Err(StoreError::new(
                StoreErrorKind::Timeout,
                format!("did not answer within {:?}", self.io_deadlines.limit()),
            )),
        };
        let outcome = outcome.map_err(|error| error.at(address));
        match outcome {
            Ok(value) => Ok(value),
            // What the server refused is a definite answer, not a lost one.
            Err(error) if writes && error.kind() != StoreErrorKind::Rejected => {
                Err(error.ambiguous())
            }
            Err(error) => Err(error),
        }
    }

    /// Reads `keys`, all on `server`, as counters.
    async fn read_counters(
        &self,
        server: usize,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<u64>>, StoreError> {
        let mut request = Vec::new();
        get_command(&mut request, b"get", keys);
        let items = self
            .with_connection(server, false, move |mut connection| async move {
                {
                    connection.send(&request).await?;
                }
                let items = reply::items(&mut connection).await?;
                Ok((connection, items))
            })
            .await?;
        keys.iter()
            .map(|key| {
                items
                    .get(*key)
                    .map(|item| parse_counter(key, &item.value))
                    .transpose()
            })
            .collect()
    }
}

/// One exchange on a taken `connection`, `work` on it, bounded by its
/// caller (see [`detached`]): the connection goes back to the pool if
/// `work` succeeds, and is closed otherwise, since its stream may then be
/// mid-reply.
async fn exchange<T, F, Fut>(
    pools: Arc<Pools>,
    server: usize,
    connection: Connection,
    slot: Slot,
    work: F,
) -> Result<T, StoreError>
where
    F: FnOnce(Connection) -> Fut,
    Fut: Future<Output = Result<(Connection, T), StoreError>>,
{
    let (connection, value) = work(connection).await?;
    pools.give_back(server, connection, slot);
    Ok(value)
}
