//! memcached's text protocol for a few administrative commands, on any
//! server address: a server started by the kit, one given to a benchmark,
//! or nutcracker's backends.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Sends `command` (with its `\r\n`) to `address` on a new connection and
/// returns the reply's lines, up to and including the first line for
/// which `done` is true.
///
/// # Panics
///
/// When the server cannot be reached, closes the connection early, or
/// does not answer within 10 s.
pub fn exchange(address: &str, command: &str, done: impl Fn(&str) -> bool) -> Vec<String> {
    let mut stream = TcpStream::connect(address)
        .unwrap_or_else(|error| panic!("cannot connect to memcached {address}: {error}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("set a read timeout");
    stream
        .write_all(command.as_bytes())
        .expect("write to memcached");
    let mut reader = BufReader::new(stream);
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        let read = reader.read_line(&mut line).expect("read from memcached");
        assert!(read > 0, "memcached {address} closed the connection");
        let line = line.trim_end().to_owned();
        let finished = done(&line);
        lines.push(line);
        if finished {
            return lines;
        }
    }
}

/// Every `STAT <name> <value>` line of `stats`, as `(name, value)`.
pub fn stats(address: &str) -> Vec<(String, String)> {
    exchange(address, "stats\r\n", |line| line == "END")
        .iter()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ' ');
            (parts.next() == Some("STAT")).then_some(())?;
            Some((parts.next()?.to_owned(), parts.next()?.to_owned()))
        })
        .collect()
}

/// A number from `stats`, such as `curr_items` or `incr_misses`.
///
/// # Panics
///
/// When `stats` has no such number.
pub fn stat(address: &str, name: &str) -> u64 {
    stats(address)
        .into_iter()
        .find(|(stat, _)| stat == name)
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no number `{name}` in the stats of memcached {address}"))
}

/// `flush_all`: every item is invalid from now on.
pub fn flush_all(address: &str) {
    let reply = exchange(address, "flush_all\r\n", |_| true);
    assert_eq!(reply, ["OK"], "flush_all on memcached {address} failed");
}

/// The server's answer to `version`, such as `VERSION 1.6.21`.
///
/// # Panics
///
/// When the answer does not start with `VERSION `.
pub fn version(address: &str) -> String {
    let reply = exchange(address, "version\r\n", |_| true).remove(0);
    assert!(
        reply.starts_with("VERSION "),
        "{address} answered `version` with {reply:?}"
    );
    reply
}
