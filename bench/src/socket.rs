//! The physical ceiling: increments written straight to one TCP
//! connection in batches, with no client library between, so that what
//! limits it is memcached and the kernel, not a client's CPU.
//!
//! Each batch is `n` meta arithmetic commands (`ma <key> N<ttl> J1 v`:
//! add 1, create the counter at 1 with lifetime `ttl` if it is missing,
//! return the value), written at once, then their `n` replies read back.
//! A visit ([`Pipeline::visit`]) is one such increment followed by reads
//! (`mg <key> v`) of other keys, all absent or all present, in one batch:
//! what a client of a sliding window with many sub-windows sends after an
//! absence, with no client library's work around it.
//! Commands and replies are as memcached's protocol.txt, "Meta Arithmetic"
//! and "Meta Get", define them
//! (<https://github.com/memcached/memcached/wiki/MetaCommands>).

use std::io::{self, Write};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One connection, and its buffers reused from batch to batch.
pub struct Pipeline {
    stream: TcpStream,
    out: Vec<u8>,
    replies: Vec<u8>,
}

impl Pipeline {
    /// A connection to the memcached at `address`.
    pub async fn connect(address: &str) -> io::Result<Self> {
        let stream = TcpStream::connect(address).await?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            out: Vec::new(),
            replies: Vec::new(),
        })
    }

    /// Increments every key of `keys` by 1 in one batch, creating missing
    /// ones with lifetime `ttl` seconds; returns the values, in order, to
    /// `values`.
    pub async fn increments<'k>(
        &mut self,
        keys: impl Iterator<Item = &'k [u8]>,
        ttl: u32,
        values: &mut Vec<u64>,
    ) -> io::Result<()> {
        self.out.clear();
        let mut flags = Vec::with_capacity(24);
        push_increment_flags(&mut flags, ttl);
        let mut sent = 0;
        for key in keys {
            self.out.extend_from_slice(b"ma ");
            self.out.extend_from_slice(key);
            self.out.extend_from_slice(&flags);
            sent += 1;
        }
        values.clear();
        self.exchange(sent, |reply| {
            if let Reply::Value(value) = reply {
                values.push(value);
            }
        })
        .await?;
        if values.len() < sent {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "an increment answered that its key is absent",
            ));
        }
        Ok(())
    }

    /// Increments `key` by 1 (created at 1 with lifetime `ttl` seconds if
    /// missing), alone: a [`visit`](Self::visit) with no reads. Returns
    /// its value.
    pub async fn increment(&mut self, key: &[u8], ttl: u32) -> io::Result<u64> {
        self.visit(key, key, Reads::Absent(0), ttl).await
    }

    /// Increments `key` by 1 (created at 1 with lifetime `ttl` seconds if
    /// missing) and reads the keys `reads` names beside client `client`,
    /// in one batch; returns the counter's value. A read that finds an
    /// absent key present, or a present one absent, is an error.
    pub async fn visit(
        &mut self,
        key: &[u8],
        client: &[u8],
        reads: Reads,
        ttl: u32,
    ) -> io::Result<u64> {
        // Written in place, with no allocation per visit.
        self.out.clear();
        self.out.extend_from_slice(b"ma ");
        self.out.extend_from_slice(key);
        push_increment_flags(&mut self.out, ttl);
        for read in 0..reads.count() {
            self.out.extend_from_slice(b"mg ");
            reads.push_key(&mut self.out, client, read)?;
            self.out.extend_from_slice(b" v\r\n");
        }
        let mut counter = None;
        let mut found = 0;
        self.exchange(1 + reads.count(), |reply| match reply {
            Reply::Value(value) if counter.is_none() => counter = Some(value),
            Reply::Value(_) => found += 1,
            Reply::Miss => {}
        })
        .await?;
        let expected = match reads {
            Reads::Absent(_) => 0,
            Reads::Present(count) => count,
        };
        match counter {
            Some(value) if found == expected => Ok(value),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "a visit's increment missed, or {found} of its {} reads found a value where \
                     {expected} should",
                    reads.count()
                ),
            )),
        }
    }

    /// Creates the keys `Reads::Present(count)` reads beside each of
    /// `clients`, with lifetime `ttl` seconds, in batches.
    pub async fn create_present(
        &mut self,
        clients: &[Vec<u8>],
        count: usize,
        ttl: u32,
    ) -> io::Result<()> {
        const BATCH: usize = 1_000;
        let reads = Reads::Present(count);
        let mut keys: Vec<Vec<u8>> = Vec::with_capacity(BATCH);
        let mut values = Vec::new();
        let every = clients
            .iter()
            .flat_map(|client| (0..count).map(move |read| (client, read)));
        let mut every = every.peekable();
        while every.peek().is_some() {
            keys.clear();
            for (client, read) in every.by_ref().take(BATCH) {
                let mut key = Vec::new();
                reads.push_key(&mut key, client, read)?;
                keys.push(key);
            }
            self.increments(keys.iter().map(Vec::as_slice), ttl, &mut values)
                .await?;
        }
        Ok(())
    }

    /// Writes the batch in `out`, then reads its `sent` replies, each to
    /// `each`, in order.
    async fn exchange(&mut self, sent: usize, mut each: impl FnMut(Reply)) -> io::Result<()> {
        self.stream.write_all(&self.out).await?;
        self.replies.clear();
        let mut parsed = 0;
        let mut answered = 0;
        while answered < sent {
            match parse(&self.replies[parsed..])? {
                Some((reply, length)) => {
                    each(reply);
                    answered += 1;
                    parsed += length;
                }
                None => {
                    self.replies.drain(..parsed);
                    parsed = 0;
                    // Into the spare capacity, with nothing zeroed first.
                    self.replies.reserve(64 * 1024);
                    let read = self.stream.read_buf(&mut self.replies).await?;
                    if read == 0 {
                        return Err(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "memcached closed the connection",
                        ));
                    }
                }
            }
        }
        Ok(())
    }
}

/// The keys a [`Pipeline::visit`] reads beside its increment of `key`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reads {
    /// This many keys that no one writes (`<key>:absent:<i>`).
    Absent(usize),
    /// This many keys that [`Pipeline::create_present`] wrote
    /// (`<key>:present:<i>`), as a returning client's sealed sub-windows
    /// are.
    Present(usize),
}

impl Reads {
    /// How many keys it reads.
    pub fn count(self) -> usize {
        match self {
            Reads::Absent(count) | Reads::Present(count) => count,
        }
    }

    /// Appends the key of read `read` beside client `client`.
    fn push_key(self, out: &mut Vec<u8>, client: &[u8], read: usize) -> io::Result<()> {
        out.extend_from_slice(client);
        match self {
            Reads::Absent(_) => write!(out, ":absent:{read}"),
            Reads::Present(_) => write!(out, ":present:{read}"),
        }
    }
}

/// Appends an increment's flags and line end, ` N<ttl> J1 v\r\n`.
fn push_increment_flags(out: &mut Vec<u8>, ttl: u32) {
    out.extend_from_slice(b" N");
    out.extend_from_slice(itoa::Buffer::new().format(ttl).as_bytes());
    out.extend_from_slice(b" J1 v\r\n");
}

/// A reply of memcached's meta protocol, as a batch here reads them.
#[derive(Debug, PartialEq, Eq)]
enum Reply {
    /// `VA`: a number.
    Value(u64),
    /// `EN`: the key is absent.
    Miss,
}

/// The first reply in `bytes`: `VA <length>\r\n<value>\r\n` or `EN\r\n`,
/// and the bytes it takes; `None` if it is not all there yet.
fn parse(bytes: &[u8]) -> io::Result<Option<(Reply, usize)>> {
    let Some(line_end) = bytes.windows(2).position(|pair| pair == b"\r\n") else {
        return Ok(None);
    };
    let head = &bytes[..line_end];
    if head == b"EN" {
        return Ok(Some((Reply::Miss, line_end + 2)));
    }
    let bad = || {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("not a value reply: {:?}", String::from_utf8_lossy(head)),
        )
    };
    let length: usize = head
        .strip_prefix(b"VA ")
        .and_then(|rest| rest.split(|&byte| byte == b' ').next())
        .and_then(|digits| std::str::from_utf8(digits).ok()?.parse().ok())
        .ok_or_else(bad)?;
    let data = line_end + 2;
    if bytes.len() < data + length + 2 {
        return Ok(None);
    }
    let value = std::str::from_utf8(&bytes[data..data + length])
        .ok()
        .and_then(|digits| digits.trim_end().parse().ok())
        .ok_or_else(bad)?;
    Ok(Some((Reply::Value(value), data + length + 2)))
}

#[cfg(test)]
mod tests {
    use super::{parse, push_increment_flags, Reads, Reply};

    #[test]
    fn a_visits_reads_are_named_beside_its_client_absent_or_present() {
        let key = |reads: Reads, read| {
            let mut out = Vec::new();
            reads.push_key(&mut out, b"c-7", read).unwrap();
            String::from_utf8(out).unwrap()
        };
        assert_eq!(key(Reads::Absent(3), 2), "c-7:absent:2");
        assert_eq!(key(Reads::Present(3), 0), "c-7:present:0");
        assert_eq!(Reads::Present(8).count(), 8);
        assert_eq!(Reads::Absent(0).count(), 0);
    }

    #[test]
    fn increment_flags_carry_the_lifetime_in_decimal() {
        for (ttl, expected) in [
            (0, &b" N0 J1 v\r\n"[..]),
            (7, b" N7 J1 v\r\n"),
            (3600, b" N3600 J1 v\r\n"),
            (u32::MAX, b" N4294967295 J1 v\r\n"),
        ] {
            let mut out = b"ma k".to_vec();
            push_increment_flags(&mut out, ttl);
            assert_eq!(&out[4..], expected, "{ttl}");
        }
    }

    #[test]
    fn value_replies_are_read_whole_or_not_at_all() {
        assert_eq!(
            parse(b"VA 2\r\n17\r\nVA").unwrap(),
            Some((Reply::Value(17), 10))
        );
        assert_eq!(parse(b"EN\r\nVA").unwrap(), Some((Reply::Miss, 4)));
        assert_eq!(parse(b"EN\r").unwrap(), None);
        assert_eq!(parse(b"VA 2\r\n17\r").unwrap(), None);
        assert_eq!(parse(b"VA 2").unwrap(), None);
        assert!(parse(b"SERVER_ERROR out of memory\r\n").is_err());
    }
}
