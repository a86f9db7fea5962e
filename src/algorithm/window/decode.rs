//! What the window counters read mean: plain counts, or for a moment
//! estimator packed counts with their offset sums ([`moment`]),
//! decoded and checked, and the window the estimate weighs.

use super::engine::WindowCounter;
use super::math::{Position, Window};
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
        }
    }

    /// What a request of `cost` at `at` adds to its counter, and the cell
    /// it falls in: its cost, and on a packed counter its offset too.
    pub(super) fn delta(&self, cost: u64, at: Position) -> (u64, u64) {
        if self.estimator.packs() {
            let cell = moment::cell(at.into, at.len);
            (moment::delta(cost, cell), cell)
        } else {
            (cost, 0)
        }
    }

    /// The count a counter's `value` holds.
    pub(super) fn count_of(&self, value: u64) -> u64 {
        if self.estimator.packs() {
            moment::unpack(value).0
        } else {
            value
        }
    }

    /// The counts and offset sums of the counters read, `raw` (the counts
    /// in place). A packed counter whose offset sum is more than its count
    /// allows is cut to it and reported, under the key `key_of` gives for
    /// its age; the keys are looked up only then.
    pub(super) fn decode<'k>(
        &self,
        mut raw: Vec<u64>,
        key_of: impl Fn(usize) -> Option<&'k [u8]>,
    ) -> Decoded {
        if !self.estimator.packs() {
            return Decoded {
                counts: raw,
                offsets: Vec::new(),
            };
        }
        let mut offsets = Vec::with_capacity(raw.len());
        for (age, value) in raw.iter_mut().enumerate() {
            let (count, sum, cut) = moment::unpack(*value);
            if cut {
                self.settings.repairs.state_repaired(
                    key_of(age).unwrap_or_default(),
                    value.to_string().as_bytes(),
                    "an offset sum beyond its count; cut to it",
                );
            }
            *value = count;
            offsets.push(sum);
        }
        Decoded {
            counts: raw,
            offsets,
        }
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
