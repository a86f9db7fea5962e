//! Any command, well framed but with any name and arguments, gets exactly
//! one well-formed reply, and the server goes on: a property test over
//! commands mixing the known names (in any case), option words, integers
//! at and beyond their limits and arbitrary bytes, sent pipelined over TCP
//! to an in-process server on the embedded store, its replies read back
//! with redis-protocol's decoders.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::time::Duration;

use memcache_ratelimit_server::{Server, ServerConfig};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use redis_protocol::resp3::decode::complete::decode;

mod common;
use common::multibulk;

/// A server on a free loopback port, on its own runtime, for the rest of
/// the test process.
fn start() -> SocketAddr {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let config = ServerConfig {
                listen: "127.0.0.1:0".to_owned(),
                ..ServerConfig::default()
            };
            let server = Server::bind(config).await.unwrap();
            tx.send(server.local_addr().unwrap()).unwrap();
            server.run_until(std::future::pending()).await.unwrap();
        });
    });
    rx.recv_timeout(Duration::from_secs(30)).unwrap()
}

const NAMES: [&str; 19] = [
    "RL.REDUCE",
    "rl.get",
    "Rl.PReduce",
    "RL.PGET",
    "RL.SESSIONIZE",
    "rl.PSessionize",
    "CL.THROTTLE",
    "rl.window",
    "PING",
    "ECHO",
    "HELLO",
    "AUTH",
    "CLIENT",
    "COMMAND",
    "SELECT",
    "INFO",
    "SETINFO",
    "GET",
    "rl.",
];
const WORDS: [&str; 14] = [
    "take",
    "AT",
    "refill",
    "STRICT",
    "subwindows",
    "setname",
    "getname",
    "setinfo",
    "lib-name",
    "docs",
    "count",
    "id",
    "3",
    "2",
];

fn argument() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::sample::select(WORDS.to_vec()).prop_map(|w| w.as_bytes().to_vec()),
        prop_oneof![
            -3i64..100,
            Just(i64::MAX),
            Just(i64::MIN),
            Just(i64::from(i32::MAX) + 1),
            any::<i64>(),
        ]
        .prop_map(|n| n.to_string().into_bytes()),
        Just(b"9223372036854775808".to_vec()),
        prop::collection::vec(any::<u8>(), 0..24),
    ]
}

fn command() -> impl Strategy<Value = Vec<Vec<u8>>> {
    (
        prop_oneof![
            prop::sample::select(NAMES.to_vec()).prop_map(|n| n.as_bytes().to_vec()),
            prop::collection::vec(any::<u8>(), 1..12),
        ],
        prop::collection::vec(argument(), 0..12),
    )
        .prop_map(|(name, mut args)| {
            args.insert(0, name);
            args
        })
}

/// One reply from the front of `buffer`: RESP3 (after `HELLO 3`), or RESP2,
/// whose null bulk string (`$-1`) the RESP3 decoder refuses.
fn decode_one(buffer: &[u8]) -> Result<Option<usize>, String> {
    match decode(buffer) {
        Ok(Some((_, used))) => Ok(Some(used)),
        Ok(None) => Ok(None),
        Err(resp3) => match redis_protocol::resp2::decode::decode(buffer) {
            Ok(Some((_, used))) => Ok(Some(used)),
            Ok(None) => Ok(None),
            Err(resp2) => Err(format!("{resp3:?}; as RESP2: {resp2:?}")),
        },
    }
}

/// Reads replies from `stream` until `count` have come; how many came.
fn replies(stream: &mut TcpStream, count: usize) -> Result<usize, String> {
    let mut buffer = Vec::new();
    let mut frames = 0;
    let mut chunk = [0u8; 8192];
    while frames < count {
        match decode_one(&buffer) {
            Ok(Some(used)) => {
                frames += 1;
                buffer.drain(..used);
                continue;
            }
            Ok(None) => {}
            Err(error) => return Err(format!("undecodable reply: {error:?} in {buffer:?}")),
        }
        let read = stream.read(&mut chunk).map_err(|e| e.to_string())?;
        if read == 0 {
            return Err(format!("closed after {frames} of {count} replies"));
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    if !buffer.is_empty() {
        return Err(format!("more than one reply per command: {buffer:?} left"));
    }
    Ok(frames)
}

#[test]
fn any_command_gets_one_reply_and_the_server_goes_on() {
    let address = start();
    let cases = std::env::var("COMMAND_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(512);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let strategy = prop::collection::vec(command(), 1..24);
    runner
        .run(&strategy, |commands| {
            let mut stream = TcpStream::connect(address).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(20)))
                .unwrap();
            let mut input = Vec::new();
            for command in &commands {
                input.extend_from_slice(&multibulk(command));
            }
            stream.write_all(&input).unwrap();
            let frames = replies(&mut stream, commands.len()).map_err(TestCaseError::fail)?;
            prop_assert_eq!(frames, commands.len());
            Ok(())
        })
        .unwrap();
    let mut stream = TcpStream::connect(address).unwrap();
    stream.write_all(b"PING\r\n").unwrap();
    let mut pong = [0u8; 7];
    stream.read_exact(&mut pong).unwrap();
    assert_eq!(&pong, b"+PONG\r\n");
}
