//! The sealed-bucket cache: window buckets that can no longer change, kept
//! in process so each is read from the store at most once per client.
//!
//! A bucket stops receiving increments when it closes. Processes whose
//! clocks lag can still add to it for up to the allowed clock skew, and a
//! denied request's refund can land up to one deadline after its decision.
//! Past both, the bucket is sealed: its count is final, and reading it
//! again would only return the same number. Keeping it here turns a
//! sliding-window decision into a single increment in steady state,
//! whatever the number of sub-windows.
//!
//! Entries are per client: one lookup per decision finds every sealed
//! bucket of that client, in a ring with a slot per bucket of the window,
//! so a decision builds and sends only the keys it must read.

use std::hash::BuildHasher;
use std::sync::{Mutex, MutexGuard};

use hashbrown::HashTable;

use crate::held_key::HeldKey;
use crate::key::KeyHasher;

/// Final counts of sealed buckets, by client, each kept until the last
/// moment any decision reads it.
#[derive(Debug)]
pub(crate) struct SealedCache {
    entries: Mutex<Table>,
}

/// The clients' rings, in entries sized for the history: every slot a
/// ring holds in the map's own entry for histories of up to
/// [`INLINE_SLOTS`] buckets, so that a lookup among many clients touches
/// that entry alone, and no slot left empty for the histories of 1 and of
/// 2 to 4 buckets (n = 1 and the default n = 4).
#[derive(Debug)]
enum Table {
    One(Entries<[Slot; 1], SHORT_PREFIX>),
    Four(Entries<[Slot; 4], LONG_PREFIX>),
    Inline(Entries<[Slot; INLINE_SLOTS], LONG_PREFIX>),
    Heap(Entries<Box<[Slot]>, SHORT_PREFIX>),
}

/// The longest history whose rings are held in the map's entries; a
/// longer one (n = 60) has each ring in an allocation of its own.
const INLINE_SLOTS: usize = 12;

/// `$body` with `$entries` bound to the table's entries, whatever their
/// ring.
macro_rules! each {
    ($table:expr, $entries:ident => $body:expr) => {
        match $table {
            Table::One($entries) => $body,
            Table::Four($entries) => $body,
            Table::Inline($entries) => $body,
            Table::Heap($entries) => $body,
        }
    };
}

#[derive(Debug)]
struct Entries<S, const N: usize> {
    /// Buckets of history per client: the ring size.
    history: usize,
    /// Clients kept at most.
    capacity: usize,
    /// By client prefix, hashed with a random seed as the store's keys are,
    /// so ids chosen by clients cannot be made to collide. A short prefix
    /// is held in the entry, beside its ring ([`Held`]).
    map: HashTable<Held<S, N>>,
    hasher: KeyHasher,
    /// The size at which the map is next swept for entries no longer
    /// read: twice what the last sweep left (at least [`FIRST_SWEEP`]), so
    /// sweeping costs O(1) per insert and the map holds at most about
    /// twice the clients still read, however many one-shot clients pass.
    sweep_at: usize,
    /// When a full cache may next be swept: sweeping is a pass over every
    /// entry, so a cache that stays full under many clients sweeps at most
    /// once per [`SWEEP_EVERY`] rather than on every insert.
    next_sweep: i64,
    /// Clients not kept because the cache was full of clients still read.
    refused: u64,
}

/// The least time between two sweeps of a full cache.
const SWEEP_EVERY: i64 = 1_000_000_000;
/// The map's size at its first sweep.
const FIRST_SWEEP: usize = 1_024;

/// A ring slot: the index and count of the bucket it was filled for.
type Slot = (i64, u64);

/// The longest client prefix held in an entry whose ring is one slot or
/// a pointer: `<namespace>:<client>` with a 32-character client id and a
/// namespace of up to 5 bytes, in 40 bytes, so that the entry is one line.
const SHORT_PREFIX: usize = 38;
/// The longest client prefix held in an entry whose ring fills lines of
/// its own (4 or 12 slots): 56 bytes, which leave the entry no larger.
const LONG_PREFIX: usize = crate::held_key::INLINE;

/// A client's entry: its prefix, held inline up to `N` bytes, and its
/// ring, from the start of a cache line. With 100,000 clients the table
/// is far larger than the caches, and a lookup's cost is the lines of its
/// entry that it must fetch: for a history of one bucket (n = 1) the
/// prefix (40 bytes), the time of its last read and its slot fill exactly
/// one line, and for 4 buckets (the default) two, where an entry placed
/// anywhere straddled one more line more often than not.
#[repr(C, align(64))]
#[derive(Debug)]
struct Held<S, const N: usize> {
    prefix: HeldKey<N>,
    ring: Ring<S>,
}

/// One client's sealed buckets: slot `index mod history` holds the index
/// and count of bucket `index`, if that is the bucket it was filled for.
/// Each slot keeps both side by side; slots past the history are unused.
///
/// Its time first: a lookup reads it, then the newest slots, which then
/// share the entry's first line with the prefix.
#[repr(C)]
#[derive(Debug)]
struct Ring<S> {
    /// Unix nanoseconds after which no decision reads any of these buckets.
    last_read: i64,
    slots: S,
}

/// Where a ring's slots are: an array in the entry, or on the heap.
trait Slots: AsRef<[Slot]> + AsMut<[Slot]> {
    /// `history` empty slots (or more).
    fn empty(history: usize) -> Self;
}

impl<const N: usize> Slots for [Slot; N] {
    fn empty(_: usize) -> Self {
        [(EMPTY, 0); N]
    }
}

impl Slots for Box<[Slot]> {
    fn empty(history: usize) -> Self {
        vec![(EMPTY, 0); history].into_boxed_slice()
    }
}

/// Ages of buckets (1 for the one before the current), inline up to 8.
pub(crate) type Ages = smallvec::SmallVec<[usize; 8]>;

/// A slot holding no bucket.
const EMPTY: i64 = i64::MIN;

impl<S: Slots> Ring<S> {
    fn new(history: usize) -> Self {
        Self {
            last_read: i64::MIN,
            slots: S::empty(history),
        }
    }

    /// The count of bucket `index`, if slot `at` holds it.
    fn get(&self, at: usize, index: i64) -> Option<u64> {
        let (held, count) = self.slots.as_ref()[at];
        (held == index).then_some(count)
    }

    fn put_all(&mut self, sealed: &[SealedBucket], history: usize) {
        for bucket in sealed {
            self.slots.as_mut()[slot(bucket.index, history)] = (bucket.index, bucket.count);
            self.last_read = self.last_read.max(bucket.last_read);
        }
    }
}

/// The slot of bucket `index` in a ring of `history`.
fn slot(index: i64, history: usize) -> usize {
    index.rem_euclid(history as i64) as usize
}

/// A sealed bucket to keep: its index, final count and the last moment a
/// decision reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SealedBucket {
    pub(crate) index: i64,
    pub(crate) count: u64,
    pub(crate) last_read: i64,
}

impl SealedCache {
    /// A cache of about `buckets` sealed buckets, as whole clients of
    /// `history` buckets each (at least one client).
    pub(crate) fn new(buckets: usize, history: u32) -> Self {
        let history = (history as usize).max(1);
        let capacity = (buckets / history).max(1);
        let table = match history {
            1 => Table::One(Entries::new(history, capacity)),
            2..=4 => Table::Four(Entries::new(history, capacity)),
            5..=INLINE_SLOTS => Table::Inline(Entries::new(history, capacity)),
            _ => Table::Heap(Entries::new(history, capacity)),
        };
        Self {
            entries: Mutex::new(table),
        }
    }

    /// Clients whose sealed buckets were not kept because the cache was
    /// full of clients still read: each of their decisions reads those
    /// buckets from the store again. Growing means the cache is too small
    /// for the clients seen within a window.
    pub(crate) fn refused(&self) -> u64 {
        each!(&*self.lock(), entries => entries.refused)
    }

    // Only touched between awaits, never across one, so a std mutex is the
    // right lock; a poisoned one only means a panic elsewhere.
    fn lock(&self) -> MutexGuard<'_, Table> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Fills `counts[age]` for each `age` in `1..counts.len()` whose bucket
    /// (`current - age`) is known, and returns the ages that are not.
    pub(crate) fn fill(&self, client: &[u8], current: i64, now: i64, counts: &mut [u64]) -> Ages {
        each!(&*self.lock(), entries => entries.fill(client, current, now, counts))
    }

    /// Keeps the final counts of `sealed` buckets of `client`. When full,
    /// clients no longer read are dropped first (at most once a second);
    /// if it is still full, a new client is not kept (its buckets are
    /// simply read again next time).
    pub(crate) fn keep(&self, client: &[u8], sealed: &[SealedBucket], now: i64) {
        if sealed.is_empty() {
            return;
        }
        each!(&mut *self.lock(), entries => entries.keep(client, sealed, now))
    }

    /// Clients kept (some perhaps no longer read, until the next sweep).
    #[cfg(test)]
    fn len(&self) -> usize {
        each!(&*self.lock(), entries => entries.map.len())
    }

    /// Forgets `client` (a reset).
    pub(crate) fn remove(&self, client: &[u8]) {
        each!(&mut *self.lock(), entries => entries.remove(client))
    }
}

impl<S: Slots, const N: usize> Entries<S, N> {
    fn new(history: usize, capacity: usize) -> Self {
        Self {
            history,
            capacity,
            map: HashTable::new(),
            hasher: KeyHasher::random(),
            sweep_at: FIRST_SWEEP,
            next_sweep: i64::MIN,
            refused: 0,
        }
    }

    /// `client`'s hash in the map, and what tells its entry.
    fn locate<'a>(&self, client: &'a [u8]) -> (u64, impl Fn(&Held<S, N>) -> bool + 'a) {
        let holds = move |held: &Held<S, N>| held.prefix.as_bytes() == client;
        (self.hasher.hash_one(client), holds)
    }

    /// The ring of `client`, if kept.
    fn ring(&self, client: &[u8]) -> Option<&Ring<S>> {
        let (hash, holds) = self.locate(client);
        self.map.find(hash, holds).map(|held| &held.ring)
    }

    fn ring_mut(&mut self, client: &[u8]) -> Option<&mut Ring<S>> {
        let (hash, holds) = self.locate(client);
        self.map.find_mut(hash, holds).map(|held| &mut held.ring)
    }

    /// [`SealedCache::remove`].
    fn remove(&mut self, client: &[u8]) {
        let (hash, holds) = self.locate(client);
        if let Ok(found) = self.map.find_entry(hash, holds) {
            found.remove();
        }
    }

    /// [`SealedCache::fill`].
    fn fill(&self, client: &[u8], current: i64, now: i64, counts: &mut [u64]) -> Ages {
        let Some(ring) = self.ring(client).filter(|ring| ring.last_read >= now) else {
            return (1..counts.len()).collect();
        };
        let mut unknown = Ages::new();
        // Each older bucket's slot is the one before the newer's, wrapping
        // around: one division for the whole history.
        let mut at = slot(current, self.history);
        for (age, count) in counts.iter_mut().enumerate().skip(1) {
            at = at.checked_sub(1).unwrap_or(self.history - 1);
            match ring.get(at, current - age as i64) {
                Some(known) => *count = known,
                None => unknown.push(age),
            }
        }
        unknown
    }

    /// [`SealedCache::keep`], of at least one bucket.
    fn keep(&mut self, client: &[u8], sealed: &[SealedBucket], now: i64) {
        // A client already kept takes its buckets with one lookup and no
        // copy of its key.
        let history = self.history;
        if let Some(ring) = self.ring_mut(client) {
            ring.put_all(sealed, history);
            return;
        }
        if self.map.len() >= self.capacity {
            if now >= self.next_sweep {
                self.next_sweep = now.saturating_add(SWEEP_EVERY);
                self.sweep(now);
            }
            if self.map.len() >= self.capacity {
                self.refused += 1;
                return;
            }
        } else if self.map.len() >= self.sweep_at {
            self.sweep(now);
        }
        let mut ring = Ring::new(self.history);
        ring.put_all(sealed, self.history);
        let held = Held {
            prefix: HeldKey::new(client),
            ring,
        };
        let hasher = self.hasher;
        self.map
            .insert_unique(hasher.hash_one(client), held, |held| {
                hasher.hash_one(held.prefix.as_bytes())
            });
    }

    /// Drops the clients no decision reads any more, and sets the next
    /// sweep at twice what is left.
    fn sweep(&mut self, now: i64) {
        self.map.retain(|held| held.ring.last_read >= now);
        self.sweep_at = (2 * self.map.len()).max(FIRST_SWEEP);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = SWEEP_EVERY;

    fn bucket(index: i64, count: u64, last_read: i64) -> SealedBucket {
        SealedBucket {
            index,
            count,
            last_read,
        }
    }

    #[test]
    fn an_entry_fills_whole_cache_lines_and_one_for_one_bucket() {
        use std::mem::{align_of, size_of};
        assert_eq!(size_of::<Held<[Slot; 1], SHORT_PREFIX>>(), 64);
        assert_eq!(align_of::<Held<[Slot; 1], SHORT_PREFIX>>(), 64);
        assert_eq!(size_of::<Held<Box<[Slot]>, SHORT_PREFIX>>(), 64);
        // Four slots and the longer prefix: two lines, as four slots and
        // the shorter one take.
        assert_eq!(size_of::<Held<[Slot; 4], LONG_PREFIX>>(), 128);
        assert_eq!(size_of::<Held<[Slot; 4], SHORT_PREFIX>>(), 128);
        assert_eq!(size_of::<Held<[Slot; INLINE_SLOTS], LONG_PREFIX>>(), 256);
    }

    #[test]
    fn fills_known_buckets_and_names_the_rest() {
        let cache = SealedCache::new(100, 4);
        cache.keep(b"a", &[bucket(8, 3, 100 * S), bucket(6, 5, 100 * S)], 0);
        let mut counts = [0; 5];
        // Current bucket 10: ages 1..=4 are buckets 9, 8, 7, 6.
        assert_eq!(cache.fill(b"a", 10, 0, &mut counts).as_slice(), [1, 3]);
        assert_eq!(counts, [0, 0, 3, 0, 5]);
        // Another client knows nothing.
        assert_eq!(
            cache.fill(b"b", 10, 0, &mut [0; 5]).as_slice(),
            [1, 2, 3, 4]
        );
        // A slot refilled for a newer bucket no longer answers for the old.
        cache.keep(b"a", &[bucket(12, 7, 100 * S)], 0);
        let mut counts = [0; 5];
        assert_eq!(cache.fill(b"a", 13, 0, &mut counts).as_slice(), [2, 3, 4]);
        assert_eq!(counts[1], 7);
    }

    #[test]
    fn every_ring_size_answers_for_its_whole_history() {
        // Histories held in rings of 1, 4 (2 and 3 leave slots unused),
        // 12 in the entry, and on the heap.
        for history in [1u32, 2, 3, 4, 5, 11, 12, 13, 60] {
            let h = i64::from(history);
            let cache = SealedCache::new(1_000, history);
            let current = 1_000;
            let sealed: Vec<_> = (1..=h)
                .map(|age| bucket(current - age, age as u64 * 10, 100 * S))
                .collect();
            cache.keep(b"c", &sealed, 0);
            let mut counts = vec![0; history as usize + 1];
            let unknown = cache.fill(b"c", current, 0, &mut counts);
            assert!(unknown.is_empty(), "history {history}: {unknown:?}");
            let expected: Vec<u64> = (0..=h).map(|age| age as u64 * 10).collect();
            assert_eq!(counts, expected, "history {history}");
            // The current bucket, once sealed, takes the oldest one's
            // slot: that one is no longer known, and a bucket later the
            // whole history is again.
            cache.keep(b"c", &[bucket(current, 7, 100 * S)], 0);
            let mut counts = vec![0; history as usize + 1];
            let unknown = cache.fill(b"c", current, 0, &mut counts);
            assert_eq!(unknown.as_slice(), [history as usize], "history {history}");
            let mut counts = vec![0; history as usize + 1];
            assert!(cache.fill(b"c", current + 1, 0, &mut counts).is_empty());
            assert_eq!(counts[1], 7, "history {history}");
        }
    }

    #[test]
    fn keeps_clients_until_their_last_read_and_stays_bounded() {
        // Room for two clients of 2 buckets each.
        let cache = SealedCache::new(4, 2);
        cache.keep(b"a", &[bucket(1, 3, 100 * S)], 0);
        cache.keep(b"b", &[bucket(1, 4, 50 * S)], 0);
        cache.keep(b"c", &[bucket(1, 5, 100 * S)], 0); // full, nothing to sweep
        assert_eq!(cache.refused(), 1);
        let known = |client: &[u8], now| cache.fill(client, 2, now, &mut [0; 3]).len() == 1;
        assert!(known(b"a", 10 * S));
        assert!(!known(b"c", 10 * S));
        assert!(!known(b"b", 51 * S));
        // A known client still takes new buckets when the cache is full.
        cache.keep(b"a", &[bucket(0, 2, 100 * S)], 10 * S);
        assert!(cache.fill(b"a", 2, 10 * S, &mut [0; 3]).is_empty());
        cache.keep(b"c", &[bucket(1, 5, 100 * S)], 60 * S); // b no longer read
        assert!(known(b"c", 60 * S));
        cache.remove(b"a");
        assert!(!known(b"a", 60 * S));
        // A cache that stays full sweeps at most once a second.
        cache.keep(b"a", &[bucket(1, 3, 100 * S)], 60 * S);
        cache.keep(b"d", &[bucket(1, 6, 100 * S)], 60 * S + 1);
        assert!(!known(b"d", 60 * S + 1));
    }

    #[test]
    fn one_shot_clients_leave_the_cache_bounded_by_those_still_read() {
        // Room for a million clients, but each client is read for 10 s
        // only: a stream of new clients, one every millisecond, keeps the
        // cache near the 10,000 still read, not at all the clients seen.
        let cache = SealedCache::new(1_000_000, 1);
        let ms = 1_000_000;
        let mut largest = 0;
        for i in 0..100_000i64 {
            let now = i * ms;
            cache.keep(&i.to_be_bytes(), &[bucket(1, 1, now + 10 * S)], now);
            largest = largest.max(cache.len());
        }
        assert!(largest <= 2 * 10_001 + 1, "{largest} clients kept");
        assert!(largest >= 10_000, "{largest}: those still read are kept");
        assert_eq!(cache.refused(), 0);
    }
}
