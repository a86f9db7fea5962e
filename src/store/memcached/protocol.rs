//! Which memcached protocol a [`MemcachedStore`](super::MemcachedStore)
//! speaks, and how it finds out.

use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::error::{StoreError, StoreErrorKind};

/// The protocol a [`MemcachedStore`](super::MemcachedStore) speaks.
///
/// | protocol | speaks to | a window decision |
/// |---|---|---|
/// | [`Meta`](Self::Meta) (default) | memcached 1.6 and later | one `ma` with auto-create, and `mg` reads, pipelined across concurrent calls |
/// | [`Classic`](Self::Classic) | twemproxy, mcrouter, memcached 1.5 and earlier, and 1.6 as well | `incr` and a multi-key `get` in one write; a missing counter adds `add` and maybe `incr` |
/// | [`Detect`](Self::Detect) | either | asks the first server at build time (`mn`, the meta no-op) and picks meta if it answers `MN`, classic otherwise |
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protocol {
    /// The meta protocol.
    #[default]
    Meta,
    /// The classic text protocol.
    Classic,
    /// Meta where the server speaks it, classic otherwise.
    Detect,
}

/// Asks `address` whether it speaks the meta protocol: memcached 1.6
/// answers the meta no-op `mn` with `MN`; memcached 1.5 answers `ERROR`,
/// and twemproxy closes the connection.
pub(super) async fn detect(address: &str, timeout: Duration) -> Result<Protocol, StoreError> {
    let failed = |what: &'static str| {
        move |error: std::io::Error| {
            StoreError::new(
                StoreErrorKind::Io,
                format!("detecting the protocol of {address}: {what}: {error}"),
            )
        }
    };
    let exchange = async {
        let mut stream = TcpStream::connect(address)
            .await
            .map_err(failed("connecting"))?;
        stream
            .write_all(b"mn\r\n")
            .await
            .map_err(failed("writing"))?;
        let mut line = String::new();
        let read = BufReader::new(&mut stream).read_line(&mut line).await;
        Ok(match read {
            Ok(_) if line.trim_end() == "MN" => Protocol::Meta,
            // ERROR, a closed connection, a reset: not meta.
            _ => Protocol::Classic,
        })
    };
    tokio::time::timeout(timeout, exchange).await.map_err(|_| {
        StoreError::new(
            StoreErrorKind::Timeout,
            format!("{address} did not answer within {timeout:?} while detecting its protocol"),
        )
    })?
}
