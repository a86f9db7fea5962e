//! Python's `redis` (redis-py) and Node's `ioredis` against the server, on
//! the embedded store, on memcached through the meta protocol, and through
//! nutcracker with the classic protocol: each client connects as it does
//! to Redis (redis-py in RESP2 and RESP3), runs the commands one by one and
//! pipelined, and reads an error.

use std::path::{Path, PathBuf};
use std::process::Command;

use memcache_ratelimit_testkit::{Memcached, Twemproxy};

use crate::process::Served;

const PYTHON_INSTALL: &str = "Python's `redis` package is missing: `pip install 'redis==8.*'` \
(`.ci/run` installs it)";
const NODE_INSTALL: &str = "ioredis is missing: `npm ci --prefix cli/tests/serve/node` \
(`.ci/run` runs it; Node.js and npm: `sudo apt-get install -y nodejs npm`)";

fn here() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/serve")
}

fn run(mut command: Command, install: &str) -> serde_json::Value {
    let output = command
        .output()
        .unwrap_or_else(|error| panic!("{error}: {install}"));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        !stderr.contains("No module named 'redis'")
            && !stderr.contains("Cannot find module 'ioredis'"),
        "{install}\n{stderr}"
    );
    assert!(output.status.success(), "{stderr}");
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("{error}: {}", String::from_utf8_lossy(&output.stdout)))
}

fn python(served: &Served, key: &str, protocol: u8) -> serde_json::Value {
    let mut command = Command::new("python3");
    command.arg(here().join("python_client.py")).args([
        served.port(),
        key.to_owned(),
        protocol.to_string(),
    ]);
    run(command, PYTHON_INSTALL)
}

fn node(served: &Served, key: &str) -> serde_json::Value {
    let mut command = Command::new("node");
    command
        .arg(here().join("node/client.js"))
        .args([served.port(), key.to_owned()]);
    run(command, NODE_INSTALL)
}

/// What every client must read, whatever the store.
fn check(out: &serde_json::Value, client: &str) {
    let ints = |field: &str| -> Vec<i64> {
        out[field]
            .as_array()
            .unwrap_or_else(|| panic!("{client}: {field} in {out}"))
            .iter()
            .map(|v| {
                v.as_i64()
                    .unwrap_or_else(|| panic!("{client}: {field} in {out}"))
            })
            .collect()
    };
    assert_eq!(ints("reduce"), [2, 1, 0], "{client}: {out}");
    assert_eq!(ints("pipelined"), [5, 4, 3, 2, 1], "{client}: {out}");
    assert_eq!(ints("throttle"), [0, 16, 15, -1, 2], "{client}: {out}");
    assert_eq!(&ints("window")[..4].len(), &4, "{client}: {out}");
    assert_eq!(ints("window")[..3], [1, 2, 1], "{client}: {out}");
    assert_eq!(
        out["error"].as_str(),
        Some("Value is not an integer or out of range"),
        "{client}: {out}"
    );
}

fn all_clients(served: &Served) {
    let resp2 = python(served, "py2", 2);
    check(&resp2, "redis-py RESP2");
    assert_eq!(resp2["name"], "py-test");
    check(&python(served, "py3", 3), "redis-py RESP3");
    let io = node(served, "node");
    check(&io, "ioredis");
    assert_eq!(io["ping"], "PONG");
}

#[test]
fn python_and_node_clients_on_the_embedded_store() {
    all_clients(&Served::start(&[]));
}

#[test]
fn python_and_node_clients_on_memcached_meta() {
    let memcached = Memcached::start();
    all_clients(&Served::start(&["--servers", &memcached.address()]));
}

#[test]
fn python_and_node_clients_on_memcached_classic_through_nutcracker() {
    let proxy = Twemproxy::start(2);
    all_clients(&Served::start(&[
        "--servers",
        &proxy.address(),
        "--protocol",
        "classic",
    ]));
}
