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

use async_trait::async_trait;
use common::{patient, Fixture};
use memcache_ratelimit::store::{Counters, PutCondition, PutOutcome, Store, Versioned};
use memcache_ratelimit::Limiter;
use memcache_ratelimit::{FixedWindow, Gcra, Quota, SlidingWindow, StoreError, TokenBucket};

/// The lifetime each key was last written with.
type Written = Arc<Mutex<Vec<(Vec<u8>, Duration)>>>;

/// A store that notes the key and lifetime of every write that sets one.
#[derive(Debug)]
struct Recording {
    store: Arc<dyn Store>,
    written: Written,
}

impl Recording {
    fn note(&self, key: &[u8], ttl: Duration) {
        let mut written = self.written.lock().unwrap();
        written.retain(|(k, _)| k != key);
        written.push((key.to_vec(), ttl));
    }
}

#[async_trait]
impl Store for Recording {
    async fn increment(
        &self,
        key: &[u8],
        delta: u64,
        ttl: Duration,
        also_read: &[Vec<u8>],
    ) -> Result<Counters, StoreError> {
        let counters = self.store.increment(key, delta, ttl, also_read).await?;
        // Only the increment that created the counter set its lifetime.
        if counters.value == delta {
            self.note(key, ttl);
        }
        Ok(counters)
    }

    async fn decrement(&self, key: &[u8], delta: u64) -> Result<Option<u64>, StoreError> {
        self.store.decrement(key, delta).await
    }

    async fn get_counters(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<u64>>, StoreError> {
        self.store.get_counters(keys).await
    }

    async fn get(&self, key: &[u8]) -> Result<Option<Versioned>, StoreError> {
        self.store.get(key).await
    }

    async fn put(
        &self,
        key: &[u8],
        value: &[u8],
        ttl: Duration,
        condition: PutCondition,
    ) -> Result<PutOutcome, StoreError> {
        let outcome = self.store.put(key, value, ttl, condition).await?;
        if outcome == PutOutcome::Stored {
            self.note(key, ttl);
        }
        Ok(outcome)
    }

    async fn delete(&self, keys: &[Vec<u8>]) -> Result<usize, StoreError> {
        self.store.delete(keys).await
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

/// The limiters under test, 3 per `period`, on `store`.
fn limiters(
    period: &str,
    store: Arc<dyn Store>,
    fixture: &Fixture,
) -> Vec<(&'static str, Arc<dyn Limiter>)> {
    let quota: Quota = format!("3/{period}").parse().unwrap();
    let clock = || fixture.clock.clone();
    let space = |name: &str| format!("long-{}-{name}-{period}", fixture.name);
    vec![
        (
            "fixed window",
            Arc::new(
                patient(FixedWindow::builder(quota, store.clone()))
                    .clock(clock())
                    .namespace(space("fixed"))
                    .build()
                    .unwrap(),
            ) as Arc<dyn Limiter>,
        ),
        (
            "sliding window",
            Arc::new(
                patient(SlidingWindow::builder(quota, store.clone()))
                    .clock(clock())
                    .namespace(space("sliding"))
                    .build()
                    .unwrap(),
            ),
        ),
        (
            "gcra",
            Arc::new(
                patient(Gcra::builder(quota, store.clone()))
                    .clock(clock())
                    .namespace(space("gcra"))
                    .build()
                    .unwrap(),
            ),
        ),
        (
            "token bucket",
            Arc::new(
                patient(TokenBucket::builder(quota, store))
                    .clock(clock())
                    .namespace(space("token"))
                    .build()
                    .unwrap(),
            ),
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
        let store = Arc::new(Recording {
            store: fixture.store.clone(),
            written: written.clone(),
        });
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
