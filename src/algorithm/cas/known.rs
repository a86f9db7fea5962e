//! The states a compare-and-swap limiter last saw for its keys, each with
//! the version it had, so that the next decision on a key can skip the
//! read.
//!
//! A decision on a key normally reads the state and its version, decides,
//! and writes the new state only if the version is still the one read. When
//! this limiter itself wrote the state last, and the store told it the
//! version of that write ([`Store::put_versioned`]), the read would return
//! exactly what the limiter already knows. So the decision is made on the
//! known state and written on its version at once: one store call instead
//! of two. The compare-and-swap keeps it exact: if anyone wrote since, the
//! write fails, nothing is written, and the decision is made again on a
//! fresh read, as after any conflict. If the item is gone (it expired, was
//! evicted or deleted), the store says so, and the decision is made again
//! on no state and written only if the key is still absent: two calls, no
//! read. Near the end of a state's lifetime, when memcached may or may not
//! have dropped it yet, a decision that comes out the same on no state is
//! written on the version or as new, whichever holds, in one call.
//!
//! A decision that writes nothing (a denial that leaves the state as it
//! was) has no write to check that the known state is still current, and
//! a denial's reply (the tokens available, the time to wait) must come
//! from the state as stored. So, where the state is large and the known
//! states have nearly all been current of late, it asks the store for the
//! state's version alone ([`Store::version`], memcached's `mg` with `c` and no `v`): one
//! round trip, as a read, but with no state in the answer, which for a
//! full sliding log is most of what a read carries. If the version is the
//! known one, the stored state is the known one and the denial stands;
//! if not, the decision reads, as without this cache, and the state it
//! read becomes the known one. A small state, or one that other writers
//! often change, is read as before: its read costs hardly more than the
//! check, and a stale check costs a second round trip.
//!
//! A known state pays while it is usually still current: a fresh one saves
//! a read, a changed one costs a failed write before the read, and a gone
//! one costs what a read would have. Where other
//! processes write the same keys as often as this one (a fleet that spreads
//! each client over its instances), most would be stale, so the limiter
//! watches the share of changed ones among its recent tries and, while more
//! than half are stale, tries only one decision in 16 on a known state, to
//! notice when they would pay again.
//!
//! Memory is bounded: two generations of at most `capacity / 2` keys each
//! (split over shards). Entries go into the current generation; when it is
//! full it becomes the previous one and the old previous one is dropped,
//! so the keys used recently stay and a key idle for long is forgotten, at
//! a constant cost per call. Forgetting costs only a read. Limiters that
//! share one bound ([`SharedKnownStates`]) count their keys together, and
//! one that remembers a new key while together they hold the bound first
//! drops its own previous generation in that key's shard.
//!
//! [`SharedKnownStates`]: super::SharedKnownStates
//!
//! [`Store::put_versioned`]: crate::store::Store::put_versioned
//! [`Store::version`]: crate::store::Store::version

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};
use std::sync::{Mutex, MutexGuard, PoisonError};

use hashbrown::HashTable;

use super::policy::{KnownBound, SharedKnownStates};
use crate::held_key::HeldKey;
use crate::key::KeyHasher;

/// How many shards the keys are spread over, so threads deciding on
/// different keys seldom wait for each other's lock.
const SHARDS: usize = 16;

/// The tries the stale share is measured over: the counts are halved each
/// time this many are reached, so older tries weigh less and less.
const RECENT_TRIES: u32 = 64;

/// While most recent tries were stale, one decision in this many is still
/// tried on a known state.
const PROBE_EVERY: u32 = 16;

/// A key's state, decoded, the version it was stored at, and the key's
/// hash, kept so that the key is hashed once per call and never again when
/// its table grows. The state is kept as the algorithm holds it, not as
/// stored: the next decision uses it without decoding it again.
///
/// The key is held in the entry (up to [`INLINE`](crate::held_key::INLINE)
/// bytes), beside its hash, so that finding an entry reads no memory but
/// the entry's own. A decision finds its key's entry twice, before its
/// round trip and after it; with a key in a box of its own, each find read
/// that box too, and with 1,024 decisions in flight among 100,000 clients
/// the box had left the cache by the second find: comparing keys was 11 %
/// of a GCRA client's time at 1,024 in flight and nothing at 256 (`perf`).
// In C's order, so that the hash and the key come first, where a find
// compares them.
#[derive(Debug)]
#[repr(C)]
struct Entry<S> {
    hash: u64,
    key: HeldKey,
    known: Known<S>,
}

impl<S> Entry<S> {
    /// Whether it is the entry of `key`, whose hash is `hash`.
    fn is(&self, hash: u64, key: &[u8]) -> bool {
        self.hash == hash && self.key.as_bytes() == key
    }
}

/// A key's known state, as [`KnownStates::read`] gives it and
/// [`KnownStates::remember_until`] takes it.
#[derive(Debug, Clone)]
pub(super) struct Known<S> {
    pub(super) state: S,
    /// The version it was stored at.
    pub(super) version: u64,
    /// When the store drops the item, as the limiter's clock reads it
    /// (unix nanoseconds), if the limiter wrote it; `i64::MAX` if unknown.
    pub(super) expires_at: i64,
    /// The bytes it takes in the store: what a read of it would carry.
    pub(super) size: usize,
}

#[derive(Debug)]
struct Generations<S> {
    current: HashTable<Entry<S>>,
    previous: HashTable<Entry<S>>,
}

impl<S> Generations<S> {
    fn len(&self) -> usize {
        self.current.len() + self.previous.len()
    }
}

impl<S> Default for Generations<S> {
    fn default() -> Self {
        Self {
            current: HashTable::new(),
            previous: HashTable::new(),
        }
    }
}

/// The known states of one limiter's keys.
#[derive(Debug)]
pub(super) struct KnownStates<S> {
    shards: Box<[Mutex<Generations<S>>]>,
    /// The most keys one generation of one shard holds.
    per_generation: usize,
    /// The bound shared with other limiters, counting this one's keys.
    shared: Option<SharedKnownStates>,
    hasher: KeyHasher,
    /// Recent tries on a known state, and how many of them were stale.
    tried: AtomicU32,
    stale: AtomicU32,
    /// Decisions that found known states not worth trying.
    skipped: AtomicU32,
}

impl<S: Clone> KnownStates<S> {
    /// Room for about `capacity` keys; 0 keeps none (every decision
    /// reads).
    #[cfg(test)]
    pub(super) fn new(capacity: usize) -> Self {
        Self::within(&KnownBound::Keys(capacity))
    }

    /// Room for about as many keys as `bound` says, and, with a shared
    /// bound, no more than it leaves among the limiters sharing it.
    pub(super) fn within(bound: &KnownBound) -> Self {
        let (capacity, shared) = match bound {
            KnownBound::Keys(keys) => (*keys, None),
            KnownBound::Shared(shared) => (shared.keys(), Some(shared.clone())),
        };
        let shards = if capacity == 0 { 0 } else { SHARDS };
        Self {
            shards: (0..shards).map(|_| Mutex::default()).collect(),
            per_generation: (capacity / 2 / SHARDS).max(1),
            shared,
            hasher: KeyHasher::random(),
            tried: AtomicU32::new(0),
            stale: AtomicU32::new(0),
            skipped: AtomicU32::new(0),
        }
    }

    /// Whether a decision should be tried on a known state now: while at
    /// most half the recent tries were stale, and otherwise one in
    /// [`PROBE_EVERY`].
    pub(super) fn worth_trying(&self) -> bool {
        if self.stale_at_most(2) {
            return true;
        }
        self.skipped
            .fetch_add(1, Relaxed)
            .is_multiple_of(PROBE_EVERY)
    }

    /// Whether nearly every recent try on a known state found it current
    /// (at most one in eight stale): a decision that writes nothing then
    /// checks the known state's version rather than reading it, since a
    /// stale one costs it a second round trip.
    pub(super) fn mostly_current(&self) -> bool {
        self.stale_at_most(8)
    }

    /// Whether at most one in `one_in` recent tries on a known state was
    /// stale.
    fn stale_at_most(&self, one_in: u32) -> bool {
        one_in * self.stale.load(Relaxed) <= self.tried.load(Relaxed)
    }

    /// Counts a try on a known state, and whether it was stale. (Racing
    /// threads may lose a count or a halving; the share stays about right,
    /// which is all it is used for.)
    pub(super) fn tried(&self, stale: bool) {
        let tried = self.tried.fetch_add(1, Relaxed) + 1;
        let stale = self.stale.fetch_add(u32::from(stale), Relaxed) + u32::from(stale);
        if tried >= RECENT_TRIES {
            self.tried.store(tried / 2, Relaxed);
            self.stale.store(stale / 2, Relaxed);
        }
    }

    /// `key`'s hash and its shard, locked.
    fn shard(&self, key: &[u8]) -> Option<(u64, MutexGuard<'_, Generations<S>>)> {
        if self.shards.is_empty() {
            return None;
        }
        let hash = self.hasher.hash_one(key);
        // The table uses the low bits and the top 7; the shard takes bits
        // from the middle, so that keys of one shard still spread evenly.
        let index = (hash >> 32) as usize % self.shards.len();
        // Held only for a table operation, which cannot leave it half done.
        let shard = self.shards[index]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Some((hash, shard))
    }

    /// The known state of `key`, with its version, when the store drops it
    /// and its size there.
    pub(super) fn read(&self, key: &[u8]) -> Option<Known<S>> {
        let (hash, shard) = self.shard(key)?;
        let matches = |entry: &Entry<S>| entry.is(hash, key);
        let entry = shard
            .current
            .find(hash, matches)
            .or_else(|| shard.previous.find(hash, matches))?;
        Some(entry.known.clone())
    }

    /// Remembers `state`, stored at `version` in `size` bytes, as the state
    /// of `key`, with no known lifetime; an entry already there is
    /// overwritten in place.
    pub(super) fn remember(&self, key: &[u8], state: S, version: u64, size: usize) {
        let known = Known {
            state,
            version,
            expires_at: i64::MAX,
            size,
        };
        self.remember_until(key, known);
    }

    /// [`remember`](Self::remember), for a state whose lifetime in the store
    /// may be known (`known.expires_at`).
    pub(super) fn remember_until(&self, key: &[u8], known: Known<S>) {
        let Some((hash, mut shard)) = self.shard(key) else {
            return;
        };
        let matches = |entry: &Entry<S>| entry.is(hash, key);
        if let Some(entry) = shard.current.find_mut(hash, matches) {
            entry.known = known;
            return;
        }
        // Known in the previous generation: moved to the current one.
        let (key, new) = match shard.previous.find_entry(hash, matches) {
            Ok(found) => (found.remove().0.key, false),
            Err(_) => (HeldKey::new(key), true),
        };
        let entry = Entry { hash, key, known };
        let shared = self.shared.as_ref().filter(|_| new);
        let shared_full = shared.is_some_and(SharedKnownStates::full);
        if shard.current.len() >= self.per_generation || shared_full {
            // The full generation becomes the previous one; the old
            // previous one is emptied and reused, keeping its room, so
            // the tables never grow again once both are full.
            let generations = &mut *shard;
            std::mem::swap(&mut generations.current, &mut generations.previous);
            if let Some(shared) = &self.shared {
                shared.remove(generations.current.len());
            }
            generations.current.clear();
        }
        shard.current.insert_unique(hash, entry, |entry| entry.hash);
        if let Some(shared) = shared {
            shared.add(1);
        }
    }

    /// Forgets `key`'s state: it is no longer what is stored, or may not
    /// be (a write on it failed or its outcome is unknown, or the limiter
    /// reset the key).
    pub(super) fn forget(&self, key: &[u8]) {
        let Some((hash, mut shard)) = self.shard(key) else {
            return;
        };
        let matches = |entry: &Entry<S>| entry.is(hash, key);
        if let Ok(found) = shard.current.find_entry(hash, matches) {
            found.remove();
        } else if let Ok(found) = shard.previous.find_entry(hash, matches) {
            found.remove();
        } else {
            return;
        }
        if let Some(shared) = &self.shared {
            shared.remove(1);
        }
    }
}

impl<S> KnownStates<S> {
    /// How many keys are known now.
    pub(super) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.lock().unwrap_or_else(PoisonError::into_inner).len())
            .sum()
    }
}

/// A limiter dropped gives its keys back to the shared bound.
impl<S> Drop for KnownStates<S> {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            let held = self.len();
            shared.remove(held);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(states: &KnownStates<Vec<u8>>, key: &[u8]) -> Option<(Vec<u8>, u64)> {
        states.read(key).map(|known| (known.state, known.version))
    }

    #[test]
    fn the_last_state_remembered_is_known_until_forgotten() {
        let states = KnownStates::new(1_000);
        assert_eq!(read(&states, b"k"), None);
        states.remember(b"k", b"one".to_vec(), 1, 0);
        states.remember(b"k", b"two".to_vec(), 2, 0);
        assert_eq!(read(&states, b"k"), Some((b"two".to_vec(), 2)));
        states.forget(b"k");
        assert_eq!(read(&states, b"k"), None);
    }

    #[test]
    fn known_states_are_tried_while_most_are_fresh() {
        let states = KnownStates::<Vec<u8>>::new(1_000);
        for _ in 0..1_000 {
            assert!(states.worth_trying());
            states.tried(false);
        }
        // Mostly stale now: one decision in 16 still tries.
        for _ in 0..200 {
            states.tried(true);
        }
        let tries = (0..160).filter(|_| states.worth_trying()).count();
        assert_eq!(tries, 10);
        // Fresh again: tried every time once most recent tries are fresh.
        for _ in 0..200 {
            states.tried(false);
        }
        assert!((0..100).all(|_| states.worth_trying()));
    }

    #[test]
    fn a_capacity_of_zero_knows_nothing() {
        let states = KnownStates::new(0);
        states.remember(b"k", b"one".to_vec(), 1, 0);
        assert_eq!(read(&states, b"k"), None);
    }

    #[test]
    fn memory_stays_bounded_and_recent_keys_stay_known() {
        let capacity = 3_200;
        let states = KnownStates::new(capacity);
        for i in 0..100_000u64 {
            states.remember(format!("key{i}").as_bytes(), i.to_be_bytes().to_vec(), i, 0);
            assert!(states.len() <= capacity + SHARDS, "{} at {i}", states.len());
        }
        // The most recent keys fill at least one generation of each shard.
        let recent = (100_000 - capacity as u64 / 4..100_000)
            .filter(|i| {
                read(&states, format!("key{i}").as_bytes()) == Some((i.to_be_bytes().to_vec(), *i))
            })
            .count();
        assert_eq!(recent, capacity / 4);
        assert_eq!(read(&states, b"key0"), None);
    }

    #[test]
    fn limiters_sharing_a_bound_hold_no_more_than_it_together() {
        let bound = 3_200;
        let shared = SharedKnownStates::new(bound);
        let first = KnownStates::within(&KnownBound::Shared(shared.clone()));
        let second = KnownStates::within(&KnownBound::Shared(shared.clone()));
        // Each alone may fill the bound; together they stay within it,
        // plus the two keys per shard of each that a rotation may leave.
        for i in 0..50_000u64 {
            let states = if i % 3 == 0 { &first } else { &second };
            states.remember(format!("key{i}").as_bytes(), i.to_be_bytes().to_vec(), i, 0);
            assert_eq!(shared.held(), first.len() + second.len(), "at {i}");
            assert!(
                shared.held() <= bound + 2 * 2 * SHARDS,
                "{} at {i}",
                shared.held()
            );
        }
        assert!(shared.held() >= bound / 2, "{}", shared.held());
        // Overwriting, moving between generations and forgetting keep the
        // count; a limiter dropped gives its keys back.
        second.remember(b"key49999", b"again".to_vec(), 1, 0);
        first.forget(b"key49998");
        second.forget(b"never known");
        assert_eq!(shared.held(), first.len() + second.len());
        let first_held = first.len();
        drop(second);
        assert_eq!(shared.held(), first_held);
        drop(first);
        assert_eq!(shared.held(), 0);
    }

    #[test]
    fn an_idle_limiter_keeps_its_keys_and_a_busy_one_stays_within_the_rest() {
        let bound = 3_200;
        let shared = SharedKnownStates::new(bound);
        let idle = KnownStates::<Vec<u8>>::within(&KnownBound::Shared(shared.clone()));
        for i in 0..bound as u64 {
            idle.remember(format!("idle{i}").as_bytes(), vec![], i, 0);
        }
        let idle_held = idle.len();
        let busy = KnownStates::within(&KnownBound::Shared(shared.clone()));
        for i in 0..10_000u64 {
            busy.remember(format!("busy{i}").as_bytes(), vec![], i, 0);
            assert!(
                shared.held() <= bound + 2 * 2 * SHARDS,
                "{} at {i}",
                shared.held()
            );
        }
        assert_eq!(idle.len(), idle_held);
        // The latest key is still known: a rotation keeps the key it
        // makes room for.
        assert!(read(&busy, b"busy9999").is_some());
    }

    #[test]
    fn a_key_known_in_the_previous_generation_moves_to_the_current_one() {
        let states = KnownStates::new(2 * SHARDS);
        // One key per generation and shard: the second fills a shard's
        // current generation, so its first key is in the previous one.
        let keys: Vec<Vec<u8>> = (0..200).map(|i| format!("k{i}").into_bytes()).collect();
        for (i, key) in keys.iter().enumerate() {
            states.remember(key, b"v".to_vec(), i as u64, 0);
        }
        let known: Vec<&Vec<u8>> = keys
            .iter()
            .filter(|key| read(&states, key).is_some())
            .collect();
        assert!(!known.is_empty());
        for key in &known {
            states.remember(key, b"w".to_vec(), 7, 0);
            assert_eq!(read(&states, key), Some((b"w".to_vec(), 7)));
        }
    }
}
