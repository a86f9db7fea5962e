//! Reading a client's keys from the store, as of one moment.

use memcache_ratelimit::algorithm::Inspection;
use memcache_ratelimit::store::Store;
use memcache_ratelimit::{Algorithm, Error};

use crate::describe;
use crate::limiter::Configured;

/// The most attempts at reading a window's buckets within one bucket.
const ATTEMPTS: usize = 3;

/// What the store held, read as of `now` (unix nanoseconds).
pub struct Reading {
    pub seen: Inspection,
    pub now: i64,
    /// The sliding log's state as stored, its bytes exactly.
    pub raw: Option<Vec<u8>>,
}

/// Reads `client`'s keys. A window's reading is retried when a bucket
/// boundary passed during it, so that every span shown is the one read.
pub async fn read(
    configured: &Configured,
    client: &[u8],
) -> Result<Reading, Box<dyn std::error::Error>> {
    let limiter = &configured.limiter;
    let failed = |error: Error| describe::error(configured, error);
    let algorithm = configured.spec.algorithm();
    let mut attempt = 0;
    loop {
        attempt += 1;
        let seen = limiter.inspect(client).await.map_err(failed)?;
        let at = limiter.clock().now();
        let now = at
            .timestamp_nanos_opt()
            .ok_or("the clock reads a time beyond what unix nanoseconds hold (after 2262)")?;
        if algorithm.uses_cas() {
            let raw = match (algorithm, seen.keys.first()) {
                (Algorithm::SlidingLog, Some(key)) if key.value.is_some() => configured
                    .watched
                    .get(key.key.as_bytes())
                    .await
                    .map_err(|error| failed(Error::Store(error)))?
                    .map(|stored| stored.value),
                _ => None,
            };
            return Ok(Reading { seen, now, raw });
        }
        let current = limiter.keys_at(client, at).map_err(failed)?;
        let same = match (current.first(), seen.keys.first()) {
            (Some(expected), Some(read)) => expected.as_slice() == read.key.as_bytes(),
            _ => false,
        };
        if same || attempt >= ATTEMPTS {
            return Ok(Reading {
                seen,
                now,
                raw: None,
            });
        }
    }
}
