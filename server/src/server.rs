//! The listener: accepts connections up to the limit, and stops cleanly.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use memcache_ratelimit::store::{MemcachedStore, Protocol, Store};
use memcache_ratelimit::MemoryStore;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::config::{ServerConfig, StoreChoice};
use crate::connection;
use crate::limiters::Limiters;
use crate::shared::Shared;

/// Why a server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The address could not be listened on.
    #[error("listening on {address}: {source}")]
    Listen { address: String, source: io::Error },
    /// The metrics could not be served.
    #[error("{0}")]
    Metrics(String),
    /// The memcached store could not be built.
    #[error("the memcached store: {0}")]
    Store(#[from] memcache_ratelimit::StoreError),
}

/// A server bound to its address, not yet serving.
pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
}

impl Server {
    /// Builds the store and listens on `config.listen`.
    pub async fn bind(config: ServerConfig) -> Result<Self, StartError> {
        let mut memcached = None;
        let (store, name): (Arc<dyn Store>, String) = match &config.store {
            StoreChoice::Embedded => (Arc::new(MemoryStore::new()), "embedded".to_owned()),
            StoreChoice::Memcached {
                servers,
                protocol,
                pipeline_depth,
                pipeline_batch,
            } => {
                let store = MemcachedStore::builder()
                    .servers(servers.iter().cloned())
                    .protocol(*protocol)
                    .pipeline_depth(*pipeline_depth)
                    .pipeline_batch(*pipeline_batch)
                    .build()
                    .await?;
                let protocol = match protocol {
                    Protocol::Classic => "classic",
                    Protocol::Detect => "detected",
                    _ => "meta",
                };
                let store = Arc::new(store);
                memcached = Some(store.clone());
                (store, format!("memcached {protocol} {}", servers.join(",")))
            }
        };
        let listener =
            TcpListener::bind(&config.listen)
                .await
                .map_err(|source| StartError::Listen {
                    address: config.listen.clone(),
                    source,
                })?;
        let port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        let limiters = Limiters::new(store, config.on_failure, config.known_states);
        let metrics = config.metrics.clone();
        let shared = Arc::new(Shared::new(config, limiters, port, name, memcached));
        if let Some(address) = metrics {
            crate::metrics::install(&address).map_err(StartError::Metrics)?;
            crate::metrics::spawn_updates(shared.clone());
        }
        Ok(Self { listener, shared })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` completes; then accepts no more connections,
    /// lets each open one answer the commands it has read, and returns
    /// once they are closed or `shutdown_grace` has passed.
    pub async fn run_until(self, stop: impl Future<Output = ()>) -> io::Result<()> {
        let (stopping_tx, stopping) = watch::channel(false);
        let mut connections = JoinSet::new();
        let shared = self.shared;
        tokio::pin!(stop);
        loop {
            tokio::select! {
                _ = &mut stop => break,
                accepted = self.listener.accept() => {
                    let (mut stream, peer) = match accepted {
                        Ok(accepted) => accepted,
                        Err(error) => {
                            tracing::warn!(%error, "accepting a connection");
                            continue;
                        }
                    };
                    if connections.len() >= shared.config.max_connections {
                        shared.stats.connections_rejected.add(1);
                        let _ = stream.write_all(b"-ERR max number of clients reached\r\n").await;
                        continue;
                    }
                    shared.stats.connections_received.add(1);
                    tracing::debug!(%peer, "connection");
                    let shared = shared.clone();
                    let stopping = stopping.clone();
                    connections.spawn(async move {
                        connection::serve(stream, shared.clone(), stopping).await;
                        shared.stats.connections_closed.add(1);
                    });
                }
                Some(_) = connections.join_next(), if !connections.is_empty() => {}
            }
        }
        tracing::info!(open = connections.len(), "stopping: no new connections");
        let _ = stopping_tx.send(true);
        let grace = shared.config.shutdown_grace;
        let drained = tokio::time::timeout(grace, async {
            while connections.join_next().await.is_some() {}
        })
        .await;
        if drained.is_err() {
            tracing::warn!(
                left = connections.len(),
                "connections still open after the grace period"
            );
            connections.abort_all();
        }
        Ok(())
    }

    /// Serves until SIGTERM or SIGINT (Ctrl-C). The handlers are in place
    /// when this is called, so a signal sent once it has started is never
    /// missed.
    pub async fn run(self) -> io::Result<()> {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let mut term = signal(SignalKind::terminate())?;
            let mut interrupt = signal(SignalKind::interrupt())?;
            self.run_until(async move {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = interrupt.recv() => {}
                }
            })
            .await
        }
        #[cfg(not(unix))]
        {
            self.run_until(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
        }
    }
}
