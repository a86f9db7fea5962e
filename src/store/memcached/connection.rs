//! One connection to a memcached (or a proxy in front of some), in either
//! protocol: requests written whole, replies read line by line from one
//! buffer, in place.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::{StoreError, StoreErrorKind};

/// The longest reply line read: a `VALUE` header with a 250-byte key and
/// its numbers fits many times over.
const MAX_LINE: usize = 4096;

/// The largest data block read, whatever a reply announces: memcached's
/// own largest item is 1 MiB by default (`-I` raises it to 1 GiB, which
/// no limiter state comes near). A longer announcement is a stream gone
/// wrong, not an item.
const MAX_BLOCK: usize = 64 << 20;

/// The most bytes of joined requests kept for the next batch: a batch of
/// large values (sliding logs) is not held on to for the connection's
/// life.
const KEEP_JOINED: usize = 64 << 10;

/// The read buffer's size to start with; it grows for a longer block.
const READ_BUFFER: usize = 16 << 10;

/// A connection; dropped (not reused) after any error, since its stream
/// may then be mid-reply.
#[derive(Debug)]
pub(super) struct Connection {
    stream: TcpStream,
    /// Bytes read and not yet consumed are `buffer[start..end]`.
    buffer: Vec<u8>,
    start: usize,
    end: usize,
    /// Several requests joined into one write, kept from one batch to the
    /// next so that a batch does not allocate its own.
    joined: Vec<u8>,
    /// Whether any byte of the last request reached the socket: a request
    /// that failed with none written never reached the server.
    wrote: bool,
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
        Ok(Self {
            stream,
            buffer: vec![0; READ_BUFFER],
            joined: Vec::new(),
            start: 0,
            end: 0,
            wrote: false,
            round_trips,
        })
    }

    /// Whether an idle connection can be used again: nothing is left
    /// unread, and the server has not closed it meanwhile (a restarted
    /// memcached, a proxy's idle timeout). One non-blocking read, no round
    /// trip.
    pub(super) fn is_reusable(&self) -> bool {
        if self.start != self.end {
            return false;
        }
        let mut probe = [0u8; 1];
        match self.stream.try_read(&mut probe) {
            // 0 is the server's close, a byte is a reply nobody asked for.
            Ok(_) => false,
            Err(error) => error.kind() == std::io::ErrorKind::WouldBlock,
        }
    }

    /// Writes `request` whole.
    pub(super) async fn send(&mut self, request: &[u8]) -> Result<(), StoreError> {
        self.round_trips.fetch_add(1, Ordering::Relaxed);
        self.wrote = false;
        let mut rest = request;
        while !rest.is_empty() {
            let written = self.stream.write(rest).await.map_err(io)?;
            if written == 0 {
                return Err(io(std::io::ErrorKind::WriteZero.into()));
            }
            self.wrote = true;
            rest = &rest[written..];
        }
        Ok(())
    }

    /// Writes `requests` whole, joined into one write.
    pub(super) async fn send_joined<'a>(
        &mut self,
        requests: impl Iterator<Item = &'a [u8]>,
    ) -> Result<(), StoreError> {
        let mut joined = std::mem::take(&mut self.joined);
        joined.clear();
        for request in requests {
            joined.extend_from_slice(request);
        }
        let sent = self.send(&joined).await;
        if joined.capacity() <= KEEP_JOINED {
            self.joined = joined;
        }
        sent
    }

    /// Whether any byte of the last [`send`](Self::send) left this
    /// process (when it failed, the server may have read part of it).
    pub(super) fn wrote(&self) -> bool {
        self.wrote
    }

    /// The next reply line if it is already read whole (else `None`, and
    /// nothing consumed): [`next_line`](Self::next_line) without a future,
    /// for the replies of a batch, which mostly arrive together.
    pub(super) fn buffered_line(&mut self) -> Option<Result<&[u8], StoreError>> {
        let unread = &self.buffer[self.start..self.end];
        let length = unread.iter().position(|&byte| byte == b'\n')?;
        Some(self.take_line(length))
    }

    /// The next reply line, without its `\r\n`, borrowed until the next
    /// read.
    pub(super) async fn next_line(&mut self) -> Result<&[u8], StoreError> {
        let mut searched = 0;
        let length = loop {
            let unread = &self.buffer[self.start + searched..self.end];
            if let Some(at) = unread.iter().position(|&byte| byte == b'\n') {
                break searched + at;
            }
            searched = self.end - self.start;
            if searched > MAX_LINE {
                return Err(protocol(format!(
                    "a reply line longer than {MAX_LINE} bytes: {:?}",
                    String::from_utf8_lossy(&self.buffer[self.start..self.start + 80])
                )));
            }
            self.fill(0).await?;
        };
        self.take_line(length)
    }

    /// The buffered line whose `\n` is `length` bytes on, consumed: the
    /// line without its `\r\n`, or the error of a line without `\r`.
    #[inline]
    fn take_line(&mut self, length: usize) -> Result<&[u8], StoreError> {
        let line = self.start..self.start + length;
        self.start += length + 1;
        match self.buffer[line.clone()].split_last() {
            Some((b'\r', _)) => Ok(&self.buffer[line.start..line.end - 1]),
            _ => Err(protocol(format!(
                "a reply line not ended by CRLF: {:?}",
                String::from_utf8_lossy(&self.buffer[line.start..line.end.min(line.start + 80)])
            ))),
        }
    }

    /// The next reply line, owned.
    pub(super) async fn line(&mut self) -> Result<Vec<u8>, StoreError> {
        Ok(self.next_line().await?.to_vec())
    }

    /// A data block of `length` bytes and its `\r\n`, borrowed until the
    /// next read.
    pub(super) async fn next_block(&mut self, length: usize) -> Result<&[u8], StoreError> {
        if length > MAX_BLOCK {
            return Err(protocol(format!(
                "a data block of {length} bytes announced, over the {MAX_BLOCK} read"
            )));
        }
        let whole = length + 2;
        while self.end - self.start < whole {
            self.fill(whole).await?;
        }
        let block = self.start..self.start + length;
        self.start += whole;
        if &self.buffer[block.end..block.end + 2] != b"\r\n" {
            return Err(protocol("a data block not ended by CRLF".to_owned()));
        }
        Ok(&self.buffer[block])
    }

    /// Reads more bytes into the buffer, making room for at least `want`
    /// unread bytes in all (and one more byte to read in any case).
    async fn fill(&mut self, want: usize) -> Result<(), StoreError> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
        let unread = self.end - self.start;
        let needed = want.max(unread + 1);
        if self.buffer.len() - self.start < needed {
            self.buffer.copy_within(self.start..self.end, 0);
            self.start = 0;
            self.end = unread;
            if self.buffer.len() < needed {
                self.buffer.resize(needed.next_power_of_two(), 0);
            }
        }
        let read = self
            .stream
            .read(&mut self.buffer[self.end..])
            .await
            .map_err(io)?;
        if read == 0 {
            return Err(StoreError::new(
                StoreErrorKind::Io,
                "the server closed the connection",
            ));
        }
        self.end += read;
        Ok(())
    }
}

fn io(error: std::io::Error) -> StoreError {
    StoreError::new(StoreErrorKind::Io, error.to_string()).caused_by(error)
}

pub(super) fn protocol(message: String) -> StoreError {
    StoreError::new(StoreErrorKind::Protocol, message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    /// A connection to a listener that answers `reply` in pieces of
    /// `chunk` bytes once it has read anything.
    async fn answered(reply: Vec<u8>, chunk: usize) -> Connection {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = [0u8; 64];
            let _ = stream.read(&mut request).await.unwrap();
            for piece in reply.chunks(chunk) {
                stream.write_all(piece).await.unwrap();
                stream.flush().await.unwrap();
                tokio::task::yield_now().await;
            }
            // Held open until the test has read what it wants.
            let _ = stream.read(&mut request).await;
        });
        let mut connection = Connection::open(&address, Duration::from_secs(5), Arc::default())
            .await
            .unwrap();
        connection.send(b"go\r\n").await.unwrap();
        connection
    }

    #[tokio::test]
    async fn lines_and_blocks_split_anywhere_read_whole() {
        let big = vec![b'x'; 3 * READ_BUFFER];
        let mut reply = b"HD c7\r\nVA 5\r\nhello\r\n".to_vec();
        reply.extend_from_slice(format!("VA {}\r\n", big.len()).as_bytes());
        reply.extend_from_slice(&big);
        reply.extend_from_slice(b"\r\nEN\r\n");
        for chunk in [1, 3, 7, 4096, reply.len()] {
            let mut connection = answered(reply.clone(), chunk).await;
            assert_eq!(connection.next_line().await.unwrap(), b"HD c7");
            assert_eq!(connection.next_line().await.unwrap(), b"VA 5");
            assert_eq!(connection.next_block(5).await.unwrap(), b"hello");
            let header = connection.line().await.unwrap();
            assert_eq!(header, format!("VA {}", big.len()).as_bytes());
            assert_eq!(connection.next_block(big.len()).await.unwrap(), &big[..]);
            assert_eq!(connection.next_line().await.unwrap(), b"EN");
            assert!(connection.is_reusable(), "chunk {chunk}");
        }
    }

    #[tokio::test]
    async fn a_stream_gone_wrong_is_an_error_not_an_allocation() {
        let mut connection = answered(b"HD\n".to_vec(), 64).await;
        let error = connection.next_line().await.unwrap_err();
        assert_eq!(error.kind(), StoreErrorKind::Protocol, "{error}");

        let mut connection = answered(vec![b'a'; 2 * MAX_LINE], 512).await;
        let error = connection.next_line().await.unwrap_err();
        assert!(error.message().contains("longer than"), "{error}");

        let mut connection = answered(b"VA 3\r\nabcde".to_vec(), 64).await;
        connection.next_line().await.unwrap();
        let error = connection.next_block(3).await.unwrap_err();
        assert!(error.message().contains("CRLF"), "{error}");

        let mut connection = answered(Vec::new(), 64).await;
        let error = connection.next_block(MAX_BLOCK + 1).await.unwrap_err();
        assert!(error.message().contains("announced"), "{error}");
    }
}
