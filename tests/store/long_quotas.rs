//! Quotas whose items live longer than 30 days. memcached reads an
//! expiration time above 2,592,000 seconds (30 days) as an absolute unix
//! time, in both protocols, so a store that sends such a lifetime as a
//! relative number writes items that are already expired: every counter
//! and every compare-and-swap state vanishes at once and every request is
//! admitted. Here quotas of 31 and 365 days are enforced through the
//! classic protocol (directly and through twemproxy) and the meta
//! protocol, and the lifetime memcached reports for each stored item is
//! the one the limiter asked for.
//! Windows, 3 per period: the fixed and sliding windows' counters
//! (increment with an initial value), the GCRA's and token bucket's state
//! (written by compare-and-swap).

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::wrapped::{Hooks, Wrapped};
use common::Fixture;
use memcache_ratelimit::store::{Counters, PutOutcome, Store};
use memcache_ratelimit::{
    FixedWindow, Gcra, Limiter, LimiterBuilder, Quota, SlidingWindow, TokenBucket,
};

/// The lifetime each key was last written with.
type Written = Arc<Mutex<Vec<(Vec<u8>, Duration)>>>;

/// Wrapped around a store, notes the key and lifetime of every write that
/// sets one.
#[derive(Debug)]
struct Recording {
    written: Written,
}

impl Recording {
    fn note(&self, key: &[u8], ttl: Duration) {
        let mut written = self.written.lock().unwrap();
        written.retain(|(k, _)| k != key);
        written.push((key.to_vec(), ttl));
    }
}

impl Hooks for Recording {
    fn incremented(&self, key: &[u8], delta: u64, ttl: Duration, counters: &Counters) {
        // Only the increment that created the counter set its lifetime.
        if counters.value == delta {
            self.note(key, ttl);
        }
    }

    fn put_answered(&self, key: &[u8], ttl: Duration, outcome: PutOutcome) {
        if outcome == PutOutcome::Stored {
            self.note(key, ttl);
        }
    }
}

/// The remaining lifetime memcached at `address` reports for `key` (the
/// meta `mg <key> t`, asked on a connection of its own): `None` when the
/// key is missing (or already expired), `Some(-1)` when it never expires.
fn remaining_ttl(address: &str, key: &[u8]) -> Option<i64> {
    let mut stream = TcpStream::connect(address).expect("connect to memcached");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream.write_all(b"mg ").unwrap();
    stream.write_all(key).unwrap();
    stream.write_all(b" t\r\n").unwrap();
    let mut line = String::new();
    BufReader::new(stream).read_line(&mut line).unwrap();
    let line = line.trim_end();
    if line == "EN" {
        return None;
    }
    assert!(line.starts_with("HD"), "mg answered {line:?}");
    let ttl = line
        .split(' ')
        .find_map(|flag| flag.strip_prefix('t'))
        .unwrap_or_else(|| panic!("no t flag in {line:?}"));
    Some(ttl.parse().unwrap())
}

/// The memcached processes holding the fixture's items.
fn servers(fixture: &Fixture) -> Vec<String> {
    match (&fixture.server, &fixture.proxy) {
        (Some(server), _) => vec![server.address()],
        (_, Some(proxy)) => proxy.backends.iter().map(|b| b.address()).collect(),
        _ => panic!("{} has no memcached", fixture.name),
    }
}

/// `algorithm` at `quota` on `store`, reading the fixture's clock, in
/// `namespace`.
fn limiter<A>(
    fixture: &Fixture,
    store: &Arc<dyn Store>,
    algorithm: fn(Quota, Arc<dyn Store>) -> LimiterBuilder<A>,
    quota: Quota,
    namespace: String,
) -> Arc<dyn Limiter> {
    let builder = fixture.builder_on(store.clone(), algorithm, quota);
    Arc::new(builder.namespace(namespace).build().unwrap())
}

/// The limiters under test, 3 per `period`, on `store`.
fn limiters(
    period: &str,
    store: Arc<dyn Store>,
    fixture: &Fixture,
) -> Vec<(&'static str, Arc<dyn Limiter>)> {
    let q: Quota = format!("3/{period}").parse().unwrap();
    let space = |name: &str| format!("long-{}-{name}-{period}", fixture.name);
    let (f, s) = (fixture, &store);
    vec![
        (
            "fixed window",
            limiter(f, s, FixedWindow::builder, q, space("fixed")),
        ),
        (
            "sliding window",
            limiter(f, s, SlidingWindow::builder, q, space("sliding")),
        ),
        ("gcra", limiter(f, s, Gcra::builder, q, space("gcra"))),
        (
            "token bucket",
            limiter(f, s, TokenBucket::builder, q, space("token")),
        ),
    ]
}

/// Each limiter admits 3 and denies the 4th, and every item it stored
/// lives as long as it asked (within a minute of it), some past 30 days. Every
/// limiter and period is checked before the test fails, so the message
/// lists them all.
async fn enforces_long_quotas(fixture: Fixture) {
    let addresses = servers(&fixture);
    let mut failures = Vec::new();
    let mut longest = Duration::ZERO;
    for period in ["31d", "365d"] {
        let written = Written::default();
        let recording = Recording {
            written: written.clone(),
        };
        let store = Arc::new(Wrapped::with(fixture.store.clone(), recording));
        for (name, limiter) in limiters(period, store, &fixture) {
            written.lock().unwrap().clear();
            let what = format!("{name} 3/{period} on {}", fixture.name);
            let mut decisions = Vec::new();
            for _ in 0..4 {
                decisions.push(limiter.check(b"alice").await.unwrap());
            }
            let admitted = decisions.iter().filter(|d| d.is_allowed()).count();
            if admitted != 3 || decisions[3].is_allowed() {
                failures.push(format!(
                    "{what}: admitted {admitted} of 4 (the 4th: {:?})",
                    decisions[3]
                ));
            }
            let written = written.lock().unwrap().clone();
            if written.is_empty() {
                failures.push(format!("{what}: nothing was written"));
            }
            for (key, ttl) in written {
                let key_text = String::from_utf8_lossy(&key).into_owned();
                longest = longest.max(ttl);
                let asked = i64::try_from(ttl.as_secs()).unwrap() + 1;
                match addresses
                    .iter()
                    .find_map(|address| remaining_ttl(address, &key))
                {
                    Some(left) if (asked - 60..=asked).contains(&left) => {}
                    Some(left) => failures.push(format!(
                        "{what}: {key_text} has {left} s left, asked {asked} s"
                    )),
                    None => failures.push(format!(
                        "{what}: {key_text} (asked to live {asked} s) is not in memcached"
                    )),
                }
            }
        }
    }
    assert!(
        longest > Duration::from_secs(30 * 86_400),
        "no item asked for more than 30 days: {longest:?}"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[tokio::test]
async fn does_not_admit_past_a_long_quota_through_the_classic_protocol() {
    enforces_long_quotas(common::classic().await).await;
}

#[tokio::test]
async fn does_not_admit_past_a_long_quota_through_twemproxy() {
    enforces_long_quotas(common::twemproxy().await).await;
}

#[tokio::test]
async fn does_not_admit_past_a_long_quota_through_the_meta_protocol() {
    enforces_long_quotas(common::memcached().await).await;
}
