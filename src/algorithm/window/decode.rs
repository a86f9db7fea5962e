//! What the window counters read mean: plain counts, or for a moment
//! estimator packed counts with their offset sums ([`moment`]),
//! decoded and checked, and the window the estimate weighs.

use super::engine::WindowCounter;
use super::math::Window;
use super::moment;

/// The counts of the buckets read, and for packed counters their offset
/// sums beside them.
pub(super) struct Decoded {
    pub(super) counts: Vec<u64>,
    pub(super) offsets: Vec<u64>,
}

impl WindowCounter {
    /// What a counter that wrapped is set to: a full window, the limit
    /// (on a packed counter with its offsets in the middle).
    pub(super) fn full(&self) -> u64 {
        let limit = self.settings.quota.limit();
        if self.estimator.packs() {
            moment::pack(limit, limit * 511)
        } else {
            limit
        }
    }

    /// The window `decoded` holds, as the estimate weighs it.
    pub(super) fn window<'a>(&self, decoded: &'a Decoded) -> Window<'a> {
        Window {
            counts: &decoded.counts,
            offsets: &decoded.offsets,
            estimator: self.estimator,
        }
    }

    /// The counts and offset sums of the counters read, `raw` for the
    /// keys `keys`; a packed counter whose offset sum is more than its
    /// count allows is cut to it and reported.
    pub(super) fn decode(&self, keys: &[Vec<u8>], raw: Vec<u64>) -> Decoded {
        if !self.estimator.packs() {
            return Decoded {
                counts: raw,
                offsets: Vec::new(),
            };
        }
        let mut counts = Vec::with_capacity(raw.len());
        let mut offsets = Vec::with_capacity(raw.len());
        for (age, &value) in raw.iter().enumerate() {
            let (count, sum, cut) = moment::unpack(value);
            if cut {
                let key = keys.get(age).map_or(&[][..], Vec::as_slice);
                self.settings.repairs.state_repaired(
                    key,
                    value.to_string().as_bytes(),
                    "an offset sum beyond its count; cut to it",
                );
            }
            counts.push(count);
            offsets.push(sum);
        }
        Decoded { counts, offsets }
    }

    /// [`decode`](Self::decode) for a decision: `raw[0]` is the current
    /// counter and `raw[age]` for `age` in `read_ages` was read from
    /// `reads` (the others came from the sealed cache, checked before).
    pub(super) fn decode_read(
        &self,
        current: &[u8],
        reads: &[Vec<u8>],
        read_ages: &[usize],
        raw: Vec<u64>,
    ) -> Decoded {
        if !self.estimator.packs() {
            return self.decode(&[], raw);
        }
        let mut keys = vec![Vec::new(); raw.len()];
        keys[0] = current.to_vec();
        for (&age, key) in read_ages.iter().zip(reads) {
            keys[age] = key.clone();
        }
        self.decode(&keys, raw)
    }

    /// A counter's value as `inspect` shows it: the count, and on a
    /// packed counter the offset sum beside it.
    pub(super) fn describe(&self, value: u64) -> String {
        if self.estimator.packs() {
            let (count, offsets, _) = moment::unpack(value);
            format!("{count} (offset sum {offsets})")
        } else {
            value.to_string()
        }
    }
}
