//! The decision flow shared by the fixed and sliding windows: one
//! create-on-miss increment of the current bucket with the reads of the
//! older buckets in the same round trip, the estimate, and the refund of a
//! denied request.

use std::time::Duration;

use super::buckets::Buckets;
use super::math::{admits, Counts, Decoded, InlineCounts, When};
use super::moment::Estimator;
use super::repair::{not_a_counter, repair};
use super::sealed::{Ages, SealedBucket, SealedCache};
use crate::algorithm::inspect::{InspectedKey, Inspection};
use crate::algorithm::settings::{DeniedRequests, Settings};
use crate::decision::Decision;
use crate::error::Error;
use crate::error::StoreError;
use crate::key::{routing_prefix, KeyBuf, SiblingKeys};
use crate::store::{at_once, parse_counter, Counters, ImmediateStore, PutCondition};
use crate::timer::{timeout, Left};

/// How a decision calls its store.
#[derive(Clone, Copy)]
enum Call<'a> {
    /// Synchronously: the store answers at once.
    Now(&'a dyn ImmediateStore),
    /// Waiting for it, with this much of the deadline left for the calls
    /// that follow the decision's own: the refund of a denied request, the
    /// repair of a wrapped counter.
    Waiting(Left),
}

/// What a decision asks its store, besides the key of the current bucket
/// (which its caller keeps, so that it is written in place).
struct Ask {
    /// The length of the client's prefix in the current bucket's key.
    prefix_len: usize,
    /// The time of the decision, and its bucket.
    when: When,
    /// What the request adds to the current bucket.
    delta: u64,
    ttl: Duration,
    /// The counts of the older buckets the sealed cache knows, the others
    /// zero until read; once the store has answered, every count, checked
    /// and decoded in place.
    decoded: Decoded,
    /// The ages of the buckets read, and their keys.
    read_ages: Ages,
    reads: SiblingKeys,
}

/// Whether a request fits, once the store has answered.
struct Settled {
    allowed: bool,
    /// Whether the denied request's cost is given back.
    refund: bool,
}

/// `len` zero counts: on the stack, without a loop, up to as many as
/// `Counts` holds inline.
fn zeroes(len: usize) -> Counts {
    let inline = InlineCounts::default();
    if len <= inline.len() {
        Counts::from_buf_and_len(inline, len)
    } else {
        smallvec::smallvec![0; len]
    }
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
    /// Writes the key of `client`'s bucket `index` into `key`; returns
    /// the length of its client prefix.
    fn bucket_key(&self, client: &[u8], index: i64, key: &mut KeyBuf) -> usize {
        let suffix = self.buckets.suffix(index);
        self.settings.keys.write_key(client, &suffix, key)
    }

    /// The keys of the older buckets `index - age` for each of `ages`, of
    /// the client whose current key (of bucket `index`) `current` is, its
    /// prefix `prefix_len` bytes long: each a copy of `current` with its
    /// suffix rewritten.
    fn siblings(
        &self,
        current: &[u8],
        prefix_len: usize,
        index: i64,
        ages: &[usize],
    ) -> SiblingKeys {
        // After the prefix and its `_`.
        let suffix_at = prefix_len + 1;
        let rewrite = self.buckets.rewrite_from(index);
        let mut keys = SiblingKeys::with_capacity(ages.len(), current.len());
        for &age in ages {
            keys.push_rewritten(current, suffix_at, |suffix| {
                rewrite.to(index - age as i64, suffix);
            });
        }
        keys
    }

    /// The keys read for `client` at `now_nanos`: the current bucket first,
    /// then each older one, newest first.
    pub(crate) fn keys_at(&self, client: &[u8], now_nanos: i64) -> Vec<Vec<u8>> {
        let index = self.buckets.index(now_nanos);
        let mut current = KeyBuf::new();
        let prefix = self.bucket_key(client, index, &mut current);
        let ages: Ages = (1..=self.buckets.history() as usize).collect();
        let older = self.siblings(&current, prefix, index, &ages);
        std::iter::once(&current[..])
            .chain(older.iter())
            .map(<[u8]>::to_vec)
            .collect()
    }

    /// `client`'s counters at `now_nanos` and the estimate they add up to,
    /// read without counting.
    pub(crate) async fn inspect(&self, client: &[u8], now_nanos: i64) -> Result<Inspection, Error> {
        let keys = self.keys_at(client, now_nanos);
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
        let seen = self.verdict(&decoded, When::of(&self.buckets, now_nanos), true, 1);
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

    /// What a decision for `client` of `cost` at `now` asks its store:
    /// the key of the current bucket, written into `current`, and the
    /// older buckets to read, their keys built only for the buckets the
    /// sealed cache does not know. Inlined into both callers, so that its
    /// answer is built where it is kept rather than copied there.
    ///
    /// The caller has checked `cost` ([`Settings::check_cost`]): an `Ask`
    /// returned inside a `Result` is copied out of it by a call to
    /// `memcpy`.
    ///
    /// `warm` is given the current bucket's key before the sealed cache is
    /// looked up, so that a store in process starts fetching that key's
    /// item then. With many clients both the cache's entry and the item
    /// miss the processor's caches (about 150 ns each on the benchmark's
    /// machine), and a decision's instructions between the two lookups are
    /// too many for the processor to overlap them by itself: fetched one
    /// after the other, they made up most of a decision's time.
    #[inline(always)]
    fn ask(
        &self,
        client: &[u8],
        cost: u64,
        now: i64,
        current: &mut KeyBuf,
        warm: impl FnOnce(&[u8]),
    ) -> Ask {
        let settings = &self.settings;
        let when = When::of(&self.buckets, now);
        let index = when.index;
        let prefix_len = self.bucket_key(client, index, current);
        if self.sealed.is_some() {
            warm(current);
        }
        let prefix = &current[..prefix_len];
        let mut counts = zeroes(self.buckets.history() as usize + 1);
        let read_ages: Ages = match &self.sealed {
            Some(cache) => cache.fill(prefix, index, now, &mut counts),
            None => (1..counts.len()).collect(),
        };
        // Nothing to read, the common case with the sealed cache: no
        // keys built.
        let reads = if read_ages.is_empty() {
            SiblingKeys::default()
        } else {
            self.siblings(current, prefix_len, index, &read_ages)
        };
        // Built where it is returned, field by field: a whole `Ask` built
        // first and then returned is copied by a call to `memcpy`.
        Ask {
            prefix_len,
            when,
            delta: self.delta(cost, when.at),
            ttl: self.buckets.ttl() + settings.expiry_slack(),
            decoded: Decoded {
                counts,
                offsets: Counts::new(),
            },
            read_ages,
            reads,
        }
    }

    /// Decides a request of `cost` from `client` at `now` on a store
    /// that answers at once, within the caller's poll: the same steps as
    /// [`check_nanos`](Self::check_nanos), whose futures after the
    /// store's answer (the repairs, a denial's refund) complete in their
    /// first poll here.
    pub(crate) fn check_now(
        &self,
        store: &dyn ImmediateStore,
        client: &[u8],
        cost: u64,
        now: i64,
    ) -> Result<Decision, Error> {
        let settings = &self.settings;
        settings.check_cost(cost, settings.quota.limit())?;
        let mut current = KeyBuf::new();
        let mut ask = self.ask(client, cost, now, &mut current, |key| store.warm(key));
        let counted = store.increment_now(&current, ask.delta, ask.ttl, &ask.reads.slices());
        let counters = match counted {
            Ok(counters) => counters,
            Err(error) => at_once(self.repair_after(error.into(), &current, &ask))??,
        };
        // `conclude`'s steps, with its two rare futures completed at once:
        // polling `conclude` itself costs a decision some 200 more
        // instructions (2,615 against 2,407 for n = 1, callgrind).
        let call = Call::Now(store);
        let wrapped = counters.value < ask.delta;
        if wrapped {
            at_once(self.repair_wrap(call, &current, counters.value, ask.ttl))?;
        }
        let settled = self.settle(&mut ask, &current, &counters, wrapped);
        if settled.refund {
            self.take_back(&mut ask.decoded, ask.delta);
            at_once(self.refund(call, &current, ask.delta))?;
        }
        Ok(self.decision(&ask, settled.allowed, cost))
    }

    /// Decides a request of `cost` from `client` at `now`, waiting for
    /// the store: one increment of the current bucket with the reads of
    /// the older ones, within the deadline.
    pub(crate) async fn check_nanos(
        &self,
        client: &[u8],
        cost: u64,
        now: i64,
    ) -> Result<Decision, Error> {
        let settings = &self.settings;
        if let Some(store) = settings.store.immediate() {
            return self.check_now(store, client, cost, now);
        }
        settings.check_cost(cost, settings.quota.limit())?;
        let mut current = KeyBuf::new();
        let mut ask = self.ask(client, cost, now, &mut current, |_| {});
        // Within a block, so that what the increment's answer was read into
        // is not also kept beside `conclude`'s future: the state every
        // decision carries is what its future holds across its longest
        // wait.
        let concluding = {
            let (counted, call) = {
                let reads = ask.reads.slices();
                let increment = settings
                    .store
                    .increment(&current, ask.delta, ask.ttl, &reads);
                let mut within = std::pin::pin!(settings.within_deadline(increment));
                let counted = within.as_mut().await;
                (counted, Call::Waiting(within.left()))
            };
            let counters = match counted {
                Ok(counters) => counters,
                // Rare (a counter that holds something else): boxed, so
                // that every decision's future does not carry the repair's.
                Err(error) => Box::pin(self.repair_after(error, &current, &ask)).await?,
            };
            self.conclude(call, &mut ask, &current, counters, cost)
        };
        Ok(concluding.await)
    }

    /// The counters of `current` and the reads of `ask` after the store
    /// refused the call with `error`: repaired and asked again if a
    /// counter held something else, else the error.
    async fn repair_after(
        &self,
        error: Error,
        current: &[u8],
        ask: &Ask,
    ) -> Result<Counters, Error> {
        let Some(cause) = not_a_counter(&error) else {
            return Err(error);
        };
        repair(
            &self.settings,
            current,
            &ask.reads.slices(),
            ask.delta,
            ask.ttl,
            cause,
        )
        .await
    }

    /// The decision once the store has counted: a wrapped counter
    /// repaired, the estimate settled, a denial's cost given back.
    async fn conclude(
        &self,
        call: Call<'_>,
        ask: &mut Ask,
        current: &[u8],
        counters: Counters,
        cost: u64,
    ) -> Decision {
        // An increment that lands below itself went past 2^64 and
        // wrapped: the counter is not a small count but a full one.
        let wrapped = counters.value < ask.delta;
        if wrapped {
            // Rare: boxed, as the repair above.
            Box::pin(self.repair_wrap(call, current, counters.value, ask.ttl)).await;
        }
        let settled = self.settle(ask, current, &counters, wrapped);
        if settled.refund {
            self.take_back(&mut ask.decoded, ask.delta);
            // Boxed, as the repair: a denial that is given back waits for
            // one more call to the store anyway, and every decision's
            // future would carry the refund's.
            Box::pin(self.refund(call, current, ask.delta)).await;
        }
        self.decision(ask, settled.allowed, cost)
    }

    /// The estimate from the `counters` the store answered `ask` with:
    /// every count checked, the sealed buckets among them kept, and
    /// whether the request fits. A counter that `wrapped` counts as a full
    /// window and denies. Inlined, as [`ask`](Self::ask) is.
    #[inline(always)]
    fn settle(&self, ask: &mut Ask, current: &[u8], counters: &Counters, wrapped: bool) -> Settled {
        let counts = &mut ask.decoded.counts;
        counts[0] = if wrapped {
            self.full()
        } else {
            self.checked(counters.value, current)
        };
        let reads = ask
            .read_ages
            .iter()
            .zip(&counters.read)
            .zip(ask.reads.iter());
        for ((&age, count), key) in reads {
            counts[age] = self.checked(count.unwrap_or(0), key);
        }
        // Nothing read, nothing to keep: the common case, spared the
        // collection.
        if let Some(cache) = self.sealed.as_ref().filter(|_| !ask.read_ages.is_empty()) {
            self.keep_sealed(cache, ask, current);
        }
        // Every count is checked: as read just now, or as the sealed
        // cache kept it when it was read. Decoded where they are, rather
        // than moved into a new value (a call to `memcpy`).
        self.decode_in_place(&mut ask.decoded);
        let limit = self.settings.quota.limit();
        let allowed = !wrapped && admits(&ask.decoded.window(), ask.when.at, limit);
        let refund = !allowed && !wrapped && self.settings.denied == DeniedRequests::Refunded;
        Settled { allowed, refund }
    }

    /// Keeps in `cache` the buckets `ask` read that are sealed, with their
    /// counts, now checked. Out of line: most decisions read nothing, and
    /// a decision inlines [`settle`](Self::settle).
    #[inline(never)]
    fn keep_sealed(&self, cache: &SealedCache, ask: &Ask, current: &[u8]) {
        let now = ask.when.nanos;
        let first_unsealed = self.first_unsealed(now);
        // Sized once: collected from a filter, the list would grow from
        // nothing.
        let mut sealed = Vec::with_capacity(ask.read_ages.len());
        for &age in &ask.read_ages {
            let index = ask.when.index - age as i64;
            if index < first_unsealed {
                sealed.push(self.sealed_bucket(index, ask.decoded.counts[age]));
            }
        }
        cache.keep(&current[..ask.prefix_len], &sealed, now);
    }

    /// The decision on `ask`'s request of `cost` once settled (`allowed`
    /// or not).
    fn decision(&self, ask: &Ask, allowed: bool, cost: u64) -> Decision {
        let limit = self.settings.quota.limit();
        let v = self.verdict(&ask.decoded, ask.when, allowed, cost);
        let decision = match v.retry_after {
            None => Decision::allowed(limit, v.remaining, v.reset_after),
            Some(retry) => Decision::denied(limit, v.remaining, v.reset_after, retry),
        };
        decision.with_used(v.used)
    }

    /// The first bucket not sealed at `now`: every bucket before it closed
    /// longer ago than the allowed clock skew plus the deadline (within
    /// which a refund can still land), so its count is final.
    fn first_unsealed(&self, now: i64) -> i64 {
        let settings = &self.settings;
        let allowance = settings.max_clock_skew + settings.deadline.limit();
        self.buckets.first_closed_after(now, allowance)
    }

    /// Bucket `index`, sealed, with its `count`.
    fn sealed_bucket(&self, index: i64, count: u64) -> SealedBucket {
        // The last decision that reads it is in the bucket `history` after.
        let last_read = self
            .buckets
            .start(index + i64::from(self.buckets.history()) + 1);
        SealedBucket {
            index,
            count,
            last_read,
        }
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
                timeout(left.now(), settings.store.decrement(key, cost))
                    .await
                    .ok_or(Error::DeadlineExceeded(settings.deadline.limit()))??;
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
            Call::Now(_) => settings.deadline.limit(),
            Call::Waiting(left) => left.now(),
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
        let when = When::of(&self.buckets, now);
        let mut key = KeyBuf::new();
        self.bucket_key(client, when.index, &mut key);
        // A refund asked for on its own has the whole deadline.
        let call = match settings.store.immediate() {
            Some(store) => Call::Now(store),
            None => Call::Waiting(Left::whole(settings.deadline.limit())),
        };
        let delta = self.delta(cost, when.at);
        self.decrement(call, &key, delta).await
    }

    pub(crate) async fn reset(&self, client: &[u8], now_nanos: i64) -> Result<(), Error> {
        let settings = &self.settings;
        // Every bucket the estimate reads right now.
        let keys = self.keys_at(client, now_nanos);
        if let Some(cache) = &self.sealed {
            cache.remove(routing_prefix(&keys[0]));
        }
        settings
            .within_deadline(settings.store.delete(&keys))
            .await?;
        Ok(())
    }
}
