//! The decision flow shared by the fixed and sliding windows: one
//! create-on-miss increment of the current bucket with the reads of the
//! older buckets in the same round trip, the estimate, and the refund of a
//! denied request.

use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::{timeout, Instant};

use super::buckets::{unix_nanos, Buckets};
use super::window_math::{admits, verdict};
use crate::decision::Decision;
use crate::error::Error;
use crate::key::ClientKey;
use crate::limiter::{DeniedRequests, Settings};

/// A limiter over time-bucketed counters.
#[derive(Debug, Clone)]
pub(crate) struct WindowCounter {
    pub(crate) settings: Settings,
    pub(crate) buckets: Buckets,
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

        let increment = settings
            .store
            .increment(&current, cost, self.buckets.ttl(), &older);
        let counters = settings.within_deadline(increment).await?;

        let mut counts = Vec::with_capacity(older.len() + 1);
        counts.push(counters.value);
        counts.extend(counters.read.iter().map(|c| c.unwrap_or(0)));
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
        settings
            .within_deadline(settings.store.delete(&keys))
            .await?;
        Ok(())
    }
}
