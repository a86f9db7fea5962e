//! Several server processes on one memcached share every bucket exactly:
//! requests spread over three servers drain one bucket as one server
//! would.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;

use memcache_ratelimit_testkit::Memcached;

use crate::process::Served;

/// Sends `command` (inline) and reads one integer reply.
fn integer(stream: &mut BufReader<TcpStream>, command: &str) -> i64 {
    stream
        .get_mut()
        .write_all(format!("{command}\r\n").as_bytes())
        .unwrap();
    let mut line = String::new();
    stream.read_line(&mut line).unwrap();
    line.trim_end()
        .strip_prefix(':')
        .unwrap_or_else(|| panic!("{command}: {line:?}"))
        .parse()
        .unwrap()
}

#[test]
fn three_servers_on_one_memcached_share_every_bucket() {
    let memcached = Memcached::start();
    let servers: Vec<Served> = (0..3)
        .map(|_| Served::start(&["--servers", &memcached.address()]))
        .collect();
    let mut connections: Vec<BufReader<TcpStream>> = servers
        .iter()
        .map(|s| BufReader::new(TcpStream::connect(&s.address).unwrap()))
        .collect();
    // A bucket of 30 at a fixed client time: every reply is the tokens
    // left before it, 30 down to 1, whichever server answers, then 0.
    let mut replies = Vec::new();
    for i in 0..31 {
        let connection = &mut connections[i % 3];
        replies.push(integer(connection, "RL.PREDUCE shared 30 60000 AT 1000"));
    }
    let expected: Vec<i64> = (0..=30).rev().collect();
    assert_eq!(replies, expected);
    // The sliding window too: exactly its limit, over the three.
    let mut allowed = 0;
    for i in 0..12 {
        let connection = &mut connections[i % 3];
        connection
            .get_mut()
            .write_all(b"RL.WINDOW shared-window 10 60\r\n")
            .unwrap();
        let mut header = String::new();
        connection.read_line(&mut header).unwrap();
        assert_eq!(header, "*5\r\n");
        let mut fields = Vec::new();
        for _ in 0..5 {
            let mut line = String::new();
            connection.read_line(&mut line).unwrap();
            fields.push(line);
        }
        allowed += i32::from(fields[0] == ":1\r\n");
    }
    assert_eq!(allowed, 10);
}
