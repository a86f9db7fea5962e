//! One group's read-decide-write on a store that makes a request wait:
//! the state read (or known, see [`known`](super::known)), every member
//! decided in arrival order on the state the one before it left, one
//! write of the final state, and on a conflict all of it again on fresh
//! state, within the policy's attempts.

use std::time::Duration;

use super::combining::{Combiner, Decided, Decider, Failure, Group, Waiter};
use super::core::CasCore;
use super::known::Known;
use super::optimistic::Engine;
use super::stats::{
    ATTEMPTS, CHECKED, COMBINED, CONFLICTS, EITHER, EXHAUSTED, KNOWN, RETRIES, STALE, VANISHED,
};
use crate::boxed;
use crate::store::{ttl_secs, PutCondition, PutOutcome};

/// How long past the lifetime it was stored with (in whole seconds, as
/// every store keeps it) a state is still thought to be stored: memcached
/// counts lifetimes on a clock of its own that ticks once a second, so an
/// item can outlive its lifetime by up to about a second. Judging a state
/// gone too early costs an add that fails, a read and a write; too late,
/// only the add beside the write on its version (see [`EXPIRY_EARLY`]).
const EXPIRY_MARGIN: Duration = Duration::from_secs(2);

/// How long before the end of the lifetime it was stored with a state
/// may already be gone: memcached's clock, which starts the lifetime,
/// ticks once a second, so an item is kept up to a second less. In that
/// span, and until [`EXPIRY_MARGIN`] past the lifetime, a state that
/// decides as no state would is written on its version or as new, in one
/// round trip.
const EXPIRY_EARLY: Duration = Duration::from_secs(1);

impl<C: CasCore> Engine<C> {
    /// The optimistic loop for one group: read, decide every member in
    /// order (a refund among them is applied in its turn, on the state the
    /// member before it left), write the final state once; on a conflict,
    /// all again on fresh state. Returns one decision per member of
    /// `group` as it is on return: members that stopped waiting are dropped
    /// before each read, and again before deciding, so none is written for
    /// after it left.
    ///
    /// When this limiter knows the state stored at `key` and its version
    /// (see [`known`](super::known)), the first attempt skips the read.
    pub(super) async fn decide(&self, key: &[u8], group: &mut Group) -> Result<Decided, Failure> {
        if let Some(decided) = self.decide_on_known(key, group).await? {
            return Ok(decided);
        }
        // Boxed: a group that reads first waits for two round trips, where
        // an allocation is little, and every decision's future would
        // otherwise carry the loop's state beside the known state's path.
        boxed::pinned(|| self.decide_reading(key, group)).await
    }

    /// [`decide`](Self::decide)'s attempts that read the state first.
    async fn decide_reading(&self, key: &[u8], group: &mut Group) -> Result<Decided, Failure> {
        let attempts = self.policy.attempts;
        for attempt in 1..=attempts {
            // Nobody waits for these any more, and nothing was written for
            // them yet: leave them out, so they cost nothing.
            group.retain(|waiter| !waiter.gone());
            if group.is_empty() {
                return Ok(Decided::new());
            }
            self.counters.bump(ATTEMPTS);
            let current = self.store().get(key).await.map_err(Failure::Store)?;
            // Again for those who gave up during the read: from here to the
            // write there is no `.await`, so a member is counted exactly when
            // it was still waiting as the write was sent.
            group.retain(|waiter| !waiter.gone());
            if group.is_empty() {
                return Ok(Decided::new());
            }
            // Repaired on the first member's time: the state is clamped to
            // what a writer could have stored by then.
            let (state, repaired, condition) = match &current {
                None => (None, false, PutCondition::Absent),
                Some(stored) => {
                    let (state, repaired) = self.read(key, &stored.value, group[0].ask.now);
                    (state, repaired, PutCondition::Version(stored.version))
                }
            };
            let (state, mut ttl, decided) = self.apply(state, group);
            if repaired && ttl.is_none() {
                // Nothing else changed it, but the repair is written all the
                // same, so the next read does not find the garbage again.
                ttl = decided.first().map(|(decision, _)| decision.reset_after());
            }
            let (ttl, last) = match (ttl, state) {
                (Some(ttl), Some(last)) => (ttl, last),
                (_, state) => {
                    // Nothing changed: nothing to write, nothing to lose.
                    // What was read is still what is stored.
                    if let (Some(stored), Some(state), false) = (current, state, repaired) {
                        self.known
                            .remember(key, state, stored.version, stored.value.len());
                    }
                    return Ok(self.combined(decided));
                }
            };
            // A version that vanished between the read and this write is
            // a conflict like any other: the next attempt reads again.
            let outcome = self
                .write(key, last, ttl, condition, group[0].ask.now)
                .await?;
            if outcome == PutOutcome::Stored {
                return Ok(self.combined(decided));
            }
            self.counters.bump(CONFLICTS);
            if attempt < attempts {
                self.counters.bump(RETRIES);
                tracing::debug!(
                    key = %String::from_utf8_lossy(key),
                    attempt,
                    group = group.len(),
                    "compare-and-swap conflict; retrying"
                );
                // Boxed: a timer is large, and a conflict rare.
                Box::pin(tokio::time::sleep(self.policy.backoff(attempt))).await;
            }
        }
        self.counters.add(EXHAUSTED, group.len());
        tracing::debug!(
            key = %String::from_utf8_lossy(key),
            attempts,
            group = group.len(),
            "compare-and-swap attempts exhausted"
        );
        Err(Failure::Contention(attempts))
    }

    /// Decides `group` on the state this limiter last saw at `key`, if it
    /// knows it, and writes the result on its version, without reading
    /// first. A state this limiter wrote whose lifetime in the store has
    /// passed ([`EXPIRY_MARGIN`] included) is taken as gone: the group is
    /// decided on no state and written only if the key is still absent, so
    /// a client returning after its state expired costs one store call, not
    /// a read that misses and then a write. `None` when the group needs a
    /// read after all: the state is not known, the known state needs a
    /// repair (the read path does it, and counts it), the write found the
    /// state changed (anyone wrote since, or it was still there) or gone
    /// and then taken again, or the group would write nothing and the
    /// store no longer holds the known version ([`confirm`](Self::confirm)).
    ///
    /// A write on the known version that finds the key gone (expired or
    /// evicted early) decides the group again on no state and writes it
    /// only if the key is still absent: two store calls, where a read
    /// would make it three. Near the end of the state's lifetime, when
    /// memcached may or may not have dropped it, a group that decides on
    /// no state as on the known one is written on the version or as new
    /// in one call ([`PutCondition::VersionOrAbsent`]).
    async fn decide_on_known(
        &self,
        key: &[u8],
        group: &mut Group,
    ) -> Result<Option<Decided>, Failure> {
        group.retain(|waiter| !waiter.gone());
        let Some(first) = group.first() else {
            return Ok(Some(Decided::new()));
        };
        if !self.known.worth_trying() {
            return Ok(None);
        }
        let Some(Known {
            mut state,
            version,
            expires_at,
            size,
        }) = self.known.read(key)
        else {
            return Ok(None);
        };
        let now = first.ask.now;
        let gone = expires_at
            .checked_add(EXPIRY_MARGIN.as_nanos() as i64)
            .is_some_and(|gone_at| now > gone_at);
        let (known, condition) = if gone {
            (None, PutCondition::Absent)
        } else {
            if self.core.repair(&mut state, now, self.skew) {
                return Ok(None);
            }
            (Some(state), PutCondition::Version(version))
        };
        let (state, ttl, decided) = self.apply(known, group);
        let (Some(ttl), Some(last)) = (ttl, state) else {
            return match condition {
                // Only where a read would carry much more than a version,
                // and a check is seldom stale: a changed state costs it a
                // second round trip. Boxed, as the read it replaces is:
                // every decision's future would otherwise carry the
                // decisions beside it.
                PutCondition::Version(version)
                    if size >= self.policy.check_versions_from && self.known.mostly_current() =>
                {
                    boxed::pinned(|| self.confirm(key, version, decided)).await
                }
                _ => Ok(None),
            };
        };
        self.counters.bump(KNOWN);
        let may_be_gone = expires_at
            .checked_sub(EXPIRY_EARLY.as_nanos() as i64)
            .is_none_or(|early| now > early);
        let condition = match condition {
            // Memcached may just have dropped it, and the group decides as
            // it would on no state: written on the version or, if the key
            // is gone, as new, in one round trip.
            PutCondition::Version(version)
                if may_be_gone && self.decides_as_new(group, &last, &decided) =>
            {
                self.counters.bump(EITHER);
                PutCondition::VersionOrAbsent(version)
            }
            condition => condition,
        };
        let outcome = self.write(key, last, ttl, condition, now).await?;
        // A vanished state costs the write as new what a read would have:
        // not a reason to stop trying known states.
        self.known.tried(outcome == PutOutcome::Conflict);
        match outcome {
            PutOutcome::Stored => Ok(Some(self.combined(decided))),
            PutOutcome::Conflict => {
                self.counters.bump(STALE);
                Ok(None)
            }
            PutOutcome::Vanished => {
                self.counters.bump(STALE);
                // Rare: boxed, so that every decision's future does not
                // carry a second write's.
                boxed::pinned(|| self.decide_anew(key, group)).await
            }
        }
    }

    /// A group that writes nothing (denials that leave the state as it
    /// was), `decided` on the state known at `version`: answered so if the
    /// store still holds that version, which it tells without the state
    /// itself ([`Store::version`](crate::store::Store::version)), so a
    /// denial on a full sliding log does not fetch the log. `None` when
    /// the state changed or is gone: the group is decided again on a read,
    /// as any decision on a stale known state is.
    async fn confirm(
        &self,
        key: &[u8],
        version: u64,
        decided: Decided,
    ) -> Result<Option<Decided>, Failure> {
        self.counters.bump(KNOWN);
        self.counters.bump(CHECKED);
        let stored = self.store().version(key).await.map_err(Failure::Store)?;
        let current = stored == Some(version);
        self.known.tried(!current);
        if current {
            return Ok(Some(self.combined(decided)));
        }
        self.counters.bump(STALE);
        self.known.forget(key);
        Ok(None)
    }

    /// Whether `group`, decided on no state, gives the same decisions and
    /// writes the same state as it did on the known one (`last`,
    /// `decided`): then either write is right.
    fn decides_as_new(&self, group: &[Waiter], last: &C::State, decided: &Decided) -> bool {
        let (fresh, ttl, fresh_decided) = self.apply(None, group);
        ttl.is_some()
            && fresh_decided == *decided
            && fresh.is_some_and(|fresh| self.core.encode(&fresh) == self.core.encode(last))
    }

    /// After a write on a known version found `key` gone: `group` (those
    /// still waiting) decided on no state and written only if the key is
    /// still absent. `None` when the group needs a read after all: it
    /// would write nothing, or someone wrote the key since.
    async fn decide_anew(&self, key: &[u8], group: &mut Group) -> Result<Option<Decided>, Failure> {
        group.retain(|waiter| !waiter.gone());
        let Some(first) = group.first() else {
            return Ok(Some(Decided::new()));
        };
        let now = first.ask.now;
        let (state, ttl, decided) = self.apply(None, group);
        let (Some(ttl), Some(last)) = (ttl, state) else {
            return Ok(None);
        };
        self.counters.bump(VANISHED);
        match self
            .write(key, last, ttl, PutCondition::Absent, now)
            .await?
        {
            PutOutcome::Stored => Ok(Some(self.combined(decided))),
            PutOutcome::Conflict | PutOutcome::Vanished => Ok(None),
        }
    }

    /// Writes `state` at `key` with a lifetime of `ttl` (plus the slack)
    /// if `condition` holds, at `now`; whether it wrote, and if not, why.
    /// The known state follows what is stored: the state written with its
    /// new version and the moment the store drops it, or nothing when the
    /// write did not go through, its outcome is unknown, or the store told
    /// no version.
    async fn write(
        &self,
        key: &[u8],
        state: C::State,
        ttl: Duration,
        condition: PutCondition,
        now: i64,
    ) -> Result<PutOutcome, Failure> {
        let lifetime = ttl + self.slack;
        let value = self.core.encode(&state);
        let written = self
            .store()
            .put_versioned(key, &value, lifetime, condition)
            .await;
        match written {
            Ok((PutOutcome::Stored, Some(version))) => {
                // The store keeps it for whole seconds, rounded up.
                let kept = Duration::from_secs(ttl_secs(lifetime));
                let expires_at = i64::try_from(kept.as_nanos())
                    .ok()
                    .and_then(|nanos| now.checked_add(nanos))
                    .unwrap_or(i64::MAX);
                let known = Known {
                    state,
                    version,
                    expires_at,
                    size: value.len(),
                };
                self.known.remember_until(key, known);
                Ok(PutOutcome::Stored)
            }
            Ok((outcome, _)) => {
                self.known.forget(key);
                Ok(outcome)
            }
            Err(error) => {
                self.known.forget(key);
                Err(Failure::Store(error))
            }
        }
    }

    /// Decides every member of `group` in order, each on the state the one
    /// before it left, exactly as if they had come one after another: the
    /// final state, the lifetime of the last write (`None` if nothing
    /// changed the state), and the decisions.
    #[allow(clippy::type_complexity)]
    fn apply(
        &self,
        mut state: Option<C::State>,
        group: &[Waiter],
    ) -> (Option<C::State>, Option<Duration>, Decided) {
        let mut ttl = None;
        let mut decided = Decided::with_capacity(group.len());
        for waiter in group {
            let step = self.core.apply(state.as_ref(), waiter.ask);
            if let Some((next, lifetime)) = step.write {
                state = Some(next);
                ttl = Some(lifetime);
            }
            decided.push((step.decision, step.delay));
        }
        (state, ttl, decided)
    }

    /// Counts a group's decisions as combined when it had more than one.
    pub(super) fn combined(&self, decided: Decided) -> Decided {
        if decided.len() > 1 {
            self.counters.add(COMBINED, decided.len());
        }
        decided
    }
}

impl<C: CasCore> Decider for Engine<C> {
    fn combiner(&self) -> &Combiner {
        &self.combiner
    }

    fn decide_group<'a>(
        &'a self,
        key: &'a [u8],
        group: &'a mut Group,
    ) -> impl std::future::Future<Output = Result<Decided, Failure>> + Send + 'a {
        self.decide(key, group)
    }
}
