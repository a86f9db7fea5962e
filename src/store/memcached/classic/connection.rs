//! One connection to a memcached (or a proxy in front of some) speaking
//! the classic text protocol: requests written whole, replies read line by
//! line.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;

use crate::error::{StoreError, StoreErrorKind};

/// The longest reply line read: a `VALUE` header with a 250-byte key and
/// its numbers fits many times over.
const MAX_LINE: usize = 4096;

/// A connection; dropped (not reused) after any error, since its stream
/// may then be mid-reply.
#[derive(Debug)]
pub(super) struct Connection {
    reader: BufReader<OwnedReadHalf>,
    writer: OwnedWriteHalf,
    /// The store's count of writes sent, each followed by reading replies.
    round_trips: Arc<AtomicU64>,
}

impl Connection {
    /// Connects to `address` within `timeout`; each [`send`](Self::send)
    /// counts one in `round_trips`.
    pub(super) async fn open(
        address: &str,
        timeout: Duration,
        round_trips: Arc<AtomicU64>,
    ) -> Result<Self, StoreError> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(address))
            .await
            .map_err(|_| {
                StoreError::new(
                    StoreErrorKind::Timeout,
                    format!("connecting took over {timeout:?}"),
                )
            })?
            .map_err(|error| {
                StoreError::new(StoreErrorKind::Io, format!("connecting: {error}")).caused_by(error)
            })?;
        stream.set_nodelay(true).map_err(io)?;
        let (read, write) = stream.into_split();
        Ok(Self {
            reader: BufReader::new(read),
            writer: write,
            round_trips,
        })
    }

    /// Writes `request` whole.
    pub(super) async fn send(&mut self, request: &[u8]) -> Result<(), StoreError> {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        self.writer.write_all(request).await.map_err(io)?;
        self.writer.flush().await.map_err(io)
    }

    /// The next reply line, without its `\r\n`.
    pub(super) async fn line(&mut self) -> Result<Vec<u8>, StoreError> {
        let mut line = Vec::with_capacity(64);
        let read = (&mut self.reader)
            .take(MAX_LINE as u64)
            .read_until(b'\n', &mut line)
            .await
            .map_err(io)?;
        if read == 0 {
            return Err(StoreError::new(
                StoreErrorKind::Io,
                "the server closed the connection",
            ));
        }
        if !line.ends_with(b"\r\n") {
            return Err(protocol(format!(
                "a reply line longer than {MAX_LINE} bytes or not ended by CRLF: {:?}",
                String::from_utf8_lossy(&line[..line.len().min(80)])
            )));
        }
        line.truncate(line.len() - 2);
        Ok(line)
    }

    /// A data block of `length` bytes and its `\r\n`.
    pub(super) async fn block(&mut self, length: usize) -> Result<Vec<u8>, StoreError> {
        let mut data = vec![0; length + 2];
        self.reader.read_exact(&mut data).await.map_err(io)?;
        if !data.ends_with(b"\r\n") {
            return Err(protocol("a data block not ended by CRLF".to_owned()));
        }
        data.truncate(length);
        Ok(data)
    }
}

fn io(error: std::io::Error) -> StoreError {
    StoreError::new(StoreErrorKind::Io, error.to_string()).caused_by(error)
}

pub(super) fn protocol(message: String) -> StoreError {
    StoreError::new(StoreErrorKind::Protocol, message)
}
