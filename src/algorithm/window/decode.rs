//! What the window counters read mean: plain counts, or for a moment
//! estimator packed counts with their offset sums ([`moment`]),
//! decoded and checked, and the window the estimate weighs.

use super::engine::WindowCounter;
use super::math::{verdict, Counts, Decoded, Position, Verdict, When};
use super::moment;

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

    /// What a request of `cost` at `at` adds to its counter: its cost,
    /// and on a packed counter its offset too.
    pub(super) fn delta(&self, cost: u64, at: Position) -> u64 {
        if self.estimator.packs() {
            moment::delta(cost, moment::cell(at.into, at.len))
        } else {
            cost
        }
    }

    /// `decoded` with `delta` taken back from its current bucket: the
    /// counts and offsets as they stand after a refund of that increment.
    pub(super) fn take_back(&self, decoded: &mut Decoded, delta: u64) {
        let (count, offsets) = if self.estimator.packs() {
            let (count, offsets, _) = moment::unpack(delta);
            (count, offsets)
        } else {
            (delta, 0)
        };
        decoded.counts[0] = decoded.counts[0].saturating_sub(count);
        if let Some(sum) = decoded.offsets.first_mut() {
            *sum = sum.saturating_sub(offsets);
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

    /// A counter's `value` as read under `key`, checked: a packed counter
    /// whose offset sum is more than its count allows is cut to it, and
    /// reported. What the sealed-bucket cache keeps is checked, so each
    /// bad value is reported once per read from the store.
    pub(super) fn checked(&self, value: u64, key: &[u8]) -> u64 {
        if !self.estimator.packs() {
            return value;
        }
        let (count, sum, cut) = moment::unpack(value);
        if !cut {
            return value;
        }
        self.settings.repairs.state_repaired(
            key,
            value.to_string().as_bytes(),
            "an offset sum beyond its count; cut to it",
        );
        moment::pack(count, sum)
    }

    /// The counts and offset sums of `checked` counters (the counts in
    /// place).
    pub(super) fn decode(&self, checked: Counts) -> Decoded {
        let mut decoded = Decoded {
            counts: checked,
            offsets: Counts::new(),
        };
        self.decode_in_place(&mut decoded);
        decoded
    }

    /// [`decode`](Self::decode) of the checked counters `decoded.counts`
    /// holds, where they are: a packed counter's count stays, its offset
    /// sum goes into `decoded.offsets`.
    pub(super) fn decode_in_place(&self, decoded: &mut Decoded) {
        if !self.estimator.packs() {
            return;
        }
        decoded.offsets = decoded
            .counts
            .iter_mut()
            .map(|value| {
                let (count, sum, _) = moment::unpack(*value);
                *value = count;
                sum
            })
            .collect();
    }

    /// The verdict on `decoded` at `when` for a request of `cost`.
    pub(super) fn verdict(
        &self,
        decoded: &Decoded,
        when: When,
        allowed: bool,
        cost: u64,
    ) -> Verdict {
        let limit = self.settings.quota.limit();
        verdict(&self.buckets, &decoded.window(), when, allowed, cost, limit)
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
