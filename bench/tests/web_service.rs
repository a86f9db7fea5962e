//! The web-service benchmark's service answers as the table says it
//! does: every variant says hello through its rate limit, the layer's
//! answers carry the RateLimit fields (and the fields variant constants
//! as long), the increment variants, the store's and the raw socket's,
//! count in a real memcached, and `/__bench/count` counts what was answered.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};

use memcache_ratelimit_testkit::Memcached;

/// The service, started with `args`, stopped when dropped.
struct Service {
    child: Child,
    address: String,
}

impl Service {
    fn start(args: &[&str]) -> Self {
        Self::start_under(&[], args)
    }

    /// The service under `wrapper` (a program and its arguments, such as
    /// valgrind), or alone if it is empty.
    fn start_under(wrapper: &[&str], args: &[&str]) -> Self {
        let service = env!("CARGO_BIN_EXE_web-service");
        let mut command = match wrapper.split_first() {
            Some((program, wrapper_args)) => {
                let mut command = Command::new(program);
                command.args(wrapper_args).arg(service);
                command
            }
            None => Command::new(service),
        };
        let mut child = command
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{wrapper:?} web-service does not start: {e}"));
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("its output"))
            .read_line(&mut line)
            .expect("a first line");
        let address = line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("web-service {args:?} said {line:?}"))
            .trim()
            .to_owned();
        Self { child, address }
    }

    /// `GET path` with the client `key`, on a connection of its own: the
    /// whole answer, head and body.
    fn get(&self, path: &str, key: &str) -> String {
        let mut stream = TcpStream::connect(&self.address).expect("connect");
        write!(
            stream,
            "GET {path} HTTP/1.1\r\nhost: bench\r\nx-api-key: {key}\r\nconnection: close\r\n\r\n"
        )
        .expect("send");
        let mut answer = String::new();
        stream.read_to_string(&mut answer).expect("an answer");
        answer.to_ascii_lowercase()
    }

    fn answered(&self) -> u64 {
        let answer = self.get("/__bench/count", "-");
        let body = answer.rsplit("\r\n\r\n").next().expect("a body");
        body.trim().parse().expect("a count")
    }
}

impl Drop for Service {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn says_hello(service: &Service, key: &str) -> String {
    let answer = service.get("/", key);
    assert!(
        answer.starts_with("http/1.1 200") && answer.ends_with("hello\n"),
        "{answer}"
    );
    answer
}

#[test]
fn the_bare_waiting_identity_and_governor_services_say_hello_and_count_it() {
    for variant in ["bare", "wait", "identity", "governor"] {
        let service = Service::start(&["--variant", variant, "--keys", "3"]);
        for key in ["client-1", "client-2", "client-3"] {
            let answer = says_hello(&service, key);
            assert!(!answer.contains("ratelimit-policy"), "{answer}");
        }
        assert_eq!(service.answered(), 3, "{variant}");
    }
}

#[test]
fn the_layer_announces_its_policy_on_the_embedded_store_and_on_memcached() {
    let memcached = Memcached::start();
    let address = memcached.address();
    for (store, key_kind) in [
        (None, "header"),
        (None, "api-key"),
        (Some(address.as_str()), "header"),
    ] {
        let mut args = vec!["--variant", "layer", "--keys", "2", "--key", key_kind];
        if let Some(address) = store {
            args.extend(["--memcached", address]);
        }
        let service = Service::start(&args);
        let first = says_hello(&service, "client-1");
        let again = says_hello(&service, "client-1");
        let other = says_hello(&service, "client-2");
        let pk = |answer: &str| {
            let field = answer
                .lines()
                .find(|line| line.starts_with("ratelimit-policy: "))
                .unwrap_or_else(|| panic!("no ratelimit-policy in {answer}"))
                .to_owned();
            field.split(";pk=").nth(1).expect("a pk").to_owned()
        };
        assert!(first.contains("ratelimit: \"default\";r="), "{first}");
        assert_eq!(pk(&first), pk(&again), "{args:?}");
        assert_ne!(pk(&first), pk(&other), "{args:?}");
        assert_eq!(service.answered(), 3, "{args:?}");
    }
}

/// The constant fields are as long as the layer's: the fields variant
/// measures what carrying them costs.
#[test]
fn the_fields_variant_carries_fields_as_long_as_the_layers() {
    let field = |answer: &str, name: &str| {
        answer
            .lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("no {name} in {answer}"))
            .len()
    };
    let fields = Service::start(&["--variant", "fields", "--keys", "1"]);
    // The quota bench/web/run.py gives the layer.
    let layer = Service::start(&[
        "--variant",
        "layer",
        "--keys",
        "1",
        "--quota",
        "1000000000/hour",
    ]);
    let constant = says_hello(&fields, "client-1");
    let computed = says_hello(&layer, "client-1");
    assert!(computed.contains(";w=3600;"), "{computed}");
    for name in ["ratelimit-policy: ", "ratelimit: "] {
        assert_eq!(field(&constant, name), field(&computed, name), "{name}");
    }
    assert_eq!(fields.answered(), 1);
}

#[test]
fn the_increment_variants_count_each_client_in_memcached() {
    for variant in ["increment", "raw-increment"] {
        let memcached = Memcached::start();
        let address = memcached.address();
        let service =
            Service::start(&["--variant", variant, "--keys", "2", "--memcached", &address]);
        for _ in 0..3 {
            says_hello(&service, "client-2");
        }
        // Once in the warm-up, three times since; client-1 once.
        for (client, expected) in [("client-2", "4"), ("client-1", "1")] {
            let mut stream = TcpStream::connect(&address).expect("connect to memcached");
            stream
                .write_all(format!("get {client}\r\n").as_bytes())
                .expect("send");
            let mut reader = BufReader::new(stream);
            let (mut head, mut value) = (String::new(), String::new());
            reader.read_line(&mut head).expect("a head");
            reader.read_line(&mut value).expect("a value");
            assert!(
                head.starts_with(&format!("VALUE {client} ")),
                "{variant}: {head}"
            );
            assert_eq!(value.trim(), expected, "{variant}: {client}");
        }
        assert_eq!(service.answered(), 3, "{variant}");
    }
}

#[test]
fn the_raw_increment_needs_memcached() {
    let output = Command::new(env!("CARGO_BIN_EXE_web-service"))
        .args(["--variant", "raw-increment"])
        .output()
        .expect("run web-service");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--memcached"), "{stderr}");
}

/// The benchmark counts instructions under valgrind, whose process
/// layout differs: the service and its embedded store's coarse clock
/// must run there as they do natively.
#[test]
fn the_layer_on_the_embedded_store_runs_under_valgrind() {
    let found = Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success());
    assert!(
        found,
        "valgrind is not installed: apt-get install valgrind (scripts/install-test-clients does)"
    );
    let service = Service::start_under(
        &["valgrind", "--tool=none", "--quiet"],
        &["--variant", "layer", "--keys", "1"],
    );
    let answer = says_hello(&service, "client-1");
    assert!(answer.contains("ratelimit-policy: "), "{answer}");
    assert_eq!(service.answered(), 1);
}

/// A quota that does not parse is refused with its flag named, before the
/// service listens.
#[test]
fn a_quota_that_does_not_parse_is_refused_by_name() {
    let output = Command::new(env!("CARGO_BIN_EXE_web-service"))
        .args(["--variant", "layer", "--quota", "many/often"])
        .output()
        .expect("web-service runs");
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let said = String::from_utf8_lossy(&output.stderr);
    assert!(said.contains("'many/often' for '--quota"), "{said}");
    assert!(output.stdout.is_empty(), "{output:?}");
}
