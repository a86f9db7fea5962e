//! The decision flow shared by the fixed and sliding windows: one
//! create-on-miss increment of the current bucket with the reads of the
//! older buckets in the same round trip, the estimate, and the refund of a
//! denied request.

use std::time::Duration;

use super::buckets::Buckets;
use super::math::{admits, Counts, Position};
use super::moment::Estimator;
use super::repair::{not_a_counter, repair};
use super::sealed::{Ages, SealedBucket, SealedCache};
use crate::algorithm::inspect::{InspectedKey, Inspection};
use crate::algorithm::settings::{timeout, DeniedRequests, Settings};
use crate::decision::Decision;
use crate::error::Error;
use crate::error::StoreError;
use crate::key::{ClientKey, KeyBuf};
use crate::store::{parse_counter, ImmediateStore, PutCondition};

/// How a decision calls its store.
#[derive(Clone, Copy)]
enum Call<'a> {
    /// Synchronously: the store answers at once.
    Now(&'a dyn ImmediateStore),
    /// Waiting for it, with this much of the deadline left for the calls
    /// that follow the decision's own: the refund of a denied request, the
    /// repair of a wrapped counter.
    Waiting(Duration),
}

/// A limiter over time-bucketed counters.
#[derive(Debug)]
pub(crate) struct WindowCounter {
    pub(crate) settings: Settings,
    pub(crate) buckets: Buckets,
    /// Final counts of sealed buckets; `None` reads every bucket every time.
    pub(crate) sealed: Option<SealedCache>,
    /// How the oldest bucket is weighed; with a moment estimator every
    /// counter is packed (count and offset sum, [`moment`](super::moment)).
    pub(crate) estimator: Estimator,
}

impl WindowCounter {
    /// The key of `client`'s bucket `index`.
    fn bucket_key(&self, client: &ClientKey, index: i64) -> KeyBuf {
        client.with_suffix(&self.buckets.suffix(index))
    }

    /// The keys read for `client` at `now_nanos`: the current bucket first,
    /// then each older one, newest first.
    fn keys(&self, client: &ClientKey, now_nanos: i64) -> Vec<Vec<u8>> {
        let index = self.buckets.index(now_nanos);
        (0..=i64::from(self.buckets.history()))
            .map(|age| self.bucket_key(client, index - age).to_vec())
            .collect()
    }

    pub(crate) fn keys_at(&self, client: &[u8], now_nanos: i64) -> Vec<Vec<u8>> {
        self.keys(&self.settings.keys.client(client), now_nanos)
    }

    /// `client`'s counters at `now_nanos` and the estimate they add up to,
    /// read without counting.
    pub(crate) async fn inspect(&self, client: &[u8], now_nanos: i64) -> Result<Inspection, Error> {
        let keys = self.keys(&self.settings.keys.client(client), now_nanos);
        let read = self
            .settings
            .within_deadline(self.settings.store.get_counters(&keys))
            .await?;
        let checked: Counts = read
            .iter()
            .zip(&keys)
            .map(|(count, key)| self.checked(count.unwrap_or(0), key))
            .collect();
        let decoded = self.decode(checked);
        let limit = self.settings.quota.limit();
        let seen = self.verdict(&decoded, now_nanos, true, 1);
        Ok(Inspection {
            limit,
            keys: keys
                .into_iter()
                .zip(read)
                .map(|(key, count)| InspectedKey {
                    key: String::from_utf8_lossy(&key).into_owned(),
                    value: count.map(|count| self.describe(count)),
                })
                .collect(),
            estimate: Some(seen.used),
            remaining: Some(seen.remaining),
            reset_after: Some(seen.reset_after),
        })
    }

    pub(crate) async fn check_nanos(
        &self,
        client: &[u8],
        cost: u64,
        now: i64,
    ) -> Result<Decision, Error> {
        let settings = &self.settings;
        settings.check_cost(cost, settings.quota.limit())?;
        let client = settings.keys.client(client);
        let index = self.buckets.index(now);
        let limit = settings.quota.limit();
        let at = Position::of(&self.buckets, now);
        let delta = self.delta(cost, at);

        // Older buckets whose final count is known locally are not read,
        // and their keys are not even built.
        let mut counts: Counts = smallvec::smallvec![0; self.buckets.history() as usize + 1];
        let read_ages: Ages = match &self.sealed {
            Some(cache) => cache.fill(client.as_bytes(), index, now, &mut counts),
            None => (1..counts.len()).collect(),
        };
        let reads: Vec<Vec<u8>> = read_ages
            .iter()
            .map(|&age| self.bucket_key(&client, index - age as i64).to_vec())
            .collect();
        let prefix_len = client.as_bytes().len();
        let current = client.into_key(&self.buckets.suffix(index));
        let ttl = self.buckets.ttl() + settings.expiry_slack();
        let (call, counted) = match settings.store.immediate() {
            Some(store) => (
                Call::Now(store),
                store
                    .increment_now(&current, delta, ttl, &reads)
                    .map_err(Error::from),
            ),
            None => {
                let increment = settings.store.increment(&current, delta, ttl, &reads);
                let mut within = std::pin::pin!(settings.within_deadline(increment));
                let counted = within.as_mut().await;
                (Call::Waiting(within.left()), counted)
            }
        };
        let counters = match counted {
            Err(error) => match not_a_counter(&error) {
                Some(cause) => repair(settings, &current, &reads, delta, ttl, cause).await?,
                None => return Err(error),
            },
            Ok(counters) => counters,
        };

        // An increment that lands below itself went past 2^64 and
        // wrapped: the counter is not a small count but a full one.
        let wrapped = counters.value < delta;
        counts[0] = if wrapped {
            self.repair_wrap(call, &current, counters.value, ttl).await;
            self.full()
        } else {
            self.checked(counters.value, &current)
        };
        for ((&age, count), key) in read_ages.iter().zip(&counters.read).zip(&reads) {
            counts[age] = self.checked(count.unwrap_or(0), key);
        }
        if let Some(cache) = &self.sealed {
            let sealed: Vec<SealedBucket> = read_ages
                .iter()
                .filter_map(|&age| self.sealed_bucket(index - age as i64, counts[age], now))
                .collect();
            cache.keep(&current[..prefix_len], &sealed, now);
        }
        // Every count is checked: as read just now, or as the sealed
        // cache kept it when it was read.
        let mut decoded = self.decode(counts);
        let allowed = admits(&decoded.window(), at, limit);

        let allowed = allowed && !wrapped;
        if !allowed && !wrapped && settings.denied == DeniedRequests::Refunded {
            self.take_back(&mut decoded, delta);
            self.refund(call, &current, delta).await;
        }
        let v = self.verdict(&decoded, now, allowed, cost);
        let decision = match v.retry_after {
            None => Decision::allowed(limit, v.remaining, v.reset_after),
            Some(retry) => Decision::denied(limit, v.remaining, v.reset_after, retry),
        };
        Ok(decision.with_used(v.used))
    }

    /// Bucket `index` with its `count`, if it is sealed at `now`: closed
    /// longer ago than the allowed clock skew plus the deadline (within
    /// which a refund can still land), so its count is final.
    fn sealed_bucket(&self, index: i64, count: u64, now: i64) -> Option<SealedBucket> {
        let settings = &self.settings;
        let allowance = settings.max_clock_skew + settings.deadline;
        let closed = self.buckets.start(index + 1);
        if closed.saturating_add(allowance.as_nanos() as i64) > now {
            return None;
        }
        // The last decision that reads it is in the bucket `history` after.
        let last_read = self
            .buckets
            .start(index + i64::from(self.buckets.history()) + 1);
        Some(SealedBucket {
            index,
            count,
            last_read,
        })
    }

    /// Gives a denied request's cost back. The denial stands whatever
    /// happens here; a refund that fails is reported and not retried, since
    /// it may have landed, so the client at worst loses `cost` units until
    /// the bucket slides out of the window.
    async fn refund(&self, call: Call<'_>, key: &[u8], cost: u64) {
        if let Err(error) = self.decrement(call, key, cost).await {
            tracing::warn!(%error, cost, "refund of a denied request failed");
        }
    }

    /// Takes `cost` off the counter at `key`, stopping at zero: at once on
    /// a store that answers at once, else within what is left of the
    /// deadline that began when `call` did.
    async fn decrement(&self, call: Call<'_>, key: &[u8], cost: u64) -> Result<(), Error> {
        let settings = &self.settings;
        match call {
            Call::Now(store) => {
                store.decrement_now(key, cost)?;
            }
            Call::Waiting(left) => {
                timeout(left, settings.store.decrement(key, cost))
                    .await
                    .ok_or(Error::DeadlineExceeded(settings.deadline))??;
            }
        }
        Ok(())
    }

    /// Counts a counter that wrapped to `value` and sets it to the limit, a
    /// full window, unless it has been set to something larger meanwhile
    /// (compare-and-swap on the value read). Within what is left of the
    /// deadline; a repair that fails is reported, and the next decision
    /// that wraps it tries again.
    async fn repair_wrap(&self, call: Call<'_>, key: &[u8], value: u64, ttl: Duration) {
        let settings = &self.settings;
        settings.repairs.counter_wrapped(key, value);
        let limit = settings.quota.limit();
        let store = settings.store.as_ref();
        let work = async {
            let Some(held) = store.get(key).await? else {
                return Ok(());
            };
            if parse_counter(key, &held.value).is_ok_and(|value| self.count_of(value) < limit) {
                let full = self.full().to_string();
                store
                    .put(
                        key,
                        full.as_bytes(),
                        ttl,
                        PutCondition::Version(held.version),
                    )
                    .await?;
            }
            Ok::<_, StoreError>(())
        };
        let left = match call {
            Call::Now(_) => settings.deadline,
            Call::Waiting(left) => left,
        };
        match timeout(left, work).await {
            Some(Ok(())) => {}
            Some(Err(error)) => tracing::warn!(%error, "repair of a wrapped counter failed"),
            None => tracing::warn!("repair of a wrapped counter missed the deadline"),
        }
    }

    /// Gives back `cost` units that an allowed decision at `now` counted:
    /// the bucket it incremented is decremented, stopping at zero. Done
    /// within the deadline of the decision, the bucket is still open, so
    /// no sealed count has been taken of it; a later refund may leave a
    /// sealed count `cost` too high, which only denies sooner.
    pub(crate) async fn refund_nanos(
        &self,
        client: &[u8],
        cost: u64,
        now: i64,
    ) -> Result<(), Error> {
        if cost == 0 {
            return Ok(());
        }
        let settings = &self.settings;
        let key = self.bucket_key(&settings.keys.client(client), self.buckets.index(now));
        // A refund asked for on its own has the whole deadline.
        let call = match settings.store.immediate() {
            Some(store) => Call::Now(store),
            None => Call::Waiting(settings.deadline),
        };
        let delta = self.delta(cost, Position::of(&self.buckets, now));
        self.decrement(call, &key, delta).await
    }

    pub(crate) async fn reset(&self, client: &[u8], now_nanos: i64) -> Result<(), Error> {
        let settings = &self.settings;
        let client = settings.keys.client(client);
        // Every bucket the estimate reads right now.
        let keys = self.keys(&client, now_nanos);
        if let Some(cache) = &self.sealed {
            cache.remove(client.as_bytes());
        }
        settings
            .within_deadline(settings.store.delete(&keys))
            .await?;
        Ok(())
    }
}
