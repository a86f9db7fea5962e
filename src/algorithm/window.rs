//! The decision flow shared by the fixed and sliding windows: one
//! create-on-miss increment of the current bucket with the reads of the
//! older buckets in the same round trip, the estimate, and the refund of a
//! denied request.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::{timeout, Instant};

use super::buckets::{unix_nanos, Buckets};
use super::sealed::SealedCache;
use super::window_math::{admits, verdict};
use crate::decision::Decision;
use crate::error::Error;
use crate::key::ClientKey;
use crate::limiter::{DeniedRequests, Settings};

/// A limiter over time-bucketed counters.
#[derive(Debug)]
pub(crate) struct WindowCounter {
    pub(crate) settings: Settings,
    pub(crate) buckets: Buckets,
    /// Final counts of sealed buckets; `None` reads every bucket every time.
    pub(crate) sealed: Option<SealedCache>,
}

impl WindowCounter {
    /// The keys read for `client` at `now_nanos`: the current bucket first,
    /// then each older one, newest first.
    fn keys(&self, client: &ClientKey, now_nanos: i64) -> (Vec<u8>, Vec<Vec<u8>>) {
        let index = self.buckets.index(now_nanos);
        let current = client.with_suffix(&self.buckets.suffix(index));
        let older = (1..=i64::from(self.buckets.history()))
            .map(|age| client.with_suffix(&self.buckets.suffix(index - age)))
            .collect();
        (current, older)
    }

    pub(crate) fn keys_at(&self, client: &[u8], at: DateTime<Utc>) -> Result<Vec<Vec<u8>>, Error> {
        let (current, mut older) = self.keys(&self.settings.keys.client(client), unix_nanos(at)?);
        older.insert(0, current);
        Ok(older)
    }

    pub(crate) async fn check_at(
        &self,
        client: &[u8],
        cost: u64,
        at: DateTime<Utc>,
    ) -> Result<Decision, Error> {
        let settings = &self.settings;
        settings.check_cost(cost, settings.quota.limit())?;
        let now = unix_nanos(at)?;
        let (current, older) = self.keys(&settings.keys.client(client), now);
        let limit = settings.quota.limit();
        let started = Instant::now();

        // Older buckets whose final count is known locally are not read.
        let mut counts = vec![0; older.len() + 1];
        let mut reads = Vec::with_capacity(older.len());
        let mut read_ages = Vec::with_capacity(older.len());
        for (age, key) in (1..).zip(&older) {
            match self.sealed.as_ref().and_then(|cache| cache.get(key, now)) {
                Some(count) => counts[age] = count,
                None => {
                    reads.push(key.clone());
                    read_ages.push(age);
                }
            }
        }
        let increment = settings
            .store
            .increment(&current, cost, self.buckets.ttl(), &reads);
        let counters = settings.within_deadline(increment).await?;

        counts[0] = counters.value;
        for ((&age, key), count) in read_ages.iter().zip(&reads).zip(&counters.read) {
            let count = count.unwrap_or(0);
            counts[age] = count;
            self.keep_if_sealed(key, age, count, now);
        }
        let elapsed = self.buckets.elapsed_fraction(now);
        let allowed = admits(&counts, elapsed, limit);

        if !allowed && settings.denied == DeniedRequests::Refunded {
            counts[0] = counts[0].saturating_sub(cost);
            let left = settings.deadline.saturating_sub(started.elapsed());
            self.refund(&current, cost, left).await;
        }
        let v = verdict(&self.buckets, &counts, now, allowed, cost, limit);
        let decision = match v.retry_after {
            None => Decision::allowed(limit, v.remaining, v.reset_after),
            Some(retry) => Decision::denied(limit, v.remaining, v.reset_after, retry),
        };
        Ok(decision.with_used(v.used))
    }

    /// Keeps the count of the bucket `age` buckets before the one holding
    /// `now` if it is sealed: closed longer ago than the allowed clock skew
    /// plus the deadline (within which a refund can still land).
    fn keep_if_sealed(&self, key: &[u8], age: usize, count: u64, now: i64) {
        let Some(cache) = &self.sealed else {
            return;
        };
        let index = self.buckets.index(now) - age as i64;
        let settings = &self.settings;
        let allowance = settings.max_clock_skew + settings.deadline;
        let closed = self.buckets.start(index + 1);
        if closed.saturating_add(allowance.as_nanos() as i64) > now {
            return;
        }
        // The last decision that reads it is in the bucket `history` after.
        let last_read = self
            .buckets
            .start(index + i64::from(self.buckets.history()) + 1);
        cache.insert(key, count, last_read, now);
    }

    /// Gives a denied request's cost back. The denial stands whatever
    /// happens here; a refund that fails is reported and not retried, since
    /// it may have landed, so the client at worst loses `cost` units until
    /// the bucket slides out of the window.
    async fn refund(&self, key: &[u8], cost: u64, left: Duration) {
        let outcome = timeout(left, self.settings.store.decrement(key, cost)).await;
        match outcome {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => tracing::warn!(%error, cost, "refund of a denied request failed"),
            Err(_) => tracing::warn!(cost, "refund of a denied request missed the deadline"),
        }
    }

    pub(crate) async fn reset(&self, client: &[u8]) -> Result<(), Error> {
        let settings = &self.settings;
        // Every bucket the estimate reads right now.
        let keys = self.keys_at(client, settings.clock.now())?;
        if let Some(cache) = &self.sealed {
            cache.remove(&keys);
        }
        settings
            .within_deadline(settings.store.delete(&keys))
            .await?;
        Ok(())
    }
}
